//! Typed Rust to and from [`Value`], and each type's JSON Schema.

use std::collections::{BTreeMap, HashMap};

use crate::Value;
use crate::bindings::wit::sandwit::plugin::types as t;
use sandwit_value::Node;

/// A type a parameter can have: decoded from the argument's value.
pub trait FromValue: Sized {
    /// Decodes a value, or says why it does not fit.
    fn from_value(value: Value) -> Result<Self, String>;
    /// The value of a parameter the call left out: `None` means it is required.
    fn when_missing() -> Option<Self> {
        None
    }
}

/// A type a tool can return: encoded as a value.
pub trait IntoValue {
    /// Encodes it.
    fn into_value(self) -> Value;
}

/// A type's JSON Schema, as the host checks arguments against it and the AI
/// reads it.
pub trait Schema {
    /// The schema as JSON text.
    fn schema() -> String;
}

/// Raw bytes (Python `bytes`). As a parameter it also accepts a string, as its
/// UTF-8 bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

fn mismatch<T>(want: &str, got: &Value) -> Result<T, String> {
    Err(format!("expected {want}, got {}", got.type_name()))
}

impl FromValue for Value {
    fn from_value(value: Value) -> Result<Self, String> {
        Ok(value)
    }
}
impl IntoValue for Value {
    fn into_value(self) -> Value {
        self
    }
}
impl Schema for Value {
    fn schema() -> String {
        "{}".into()
    }
}

impl FromValue for i64 {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Int(i) => Ok(i),
            other => mismatch("an integer", &other),
        }
    }
}
impl IntoValue for i64 {
    fn into_value(self) -> Value {
        Value::Int(self)
    }
}
impl Schema for i64 {
    fn schema() -> String {
        r#"{"type":"integer"}"#.into()
    }
}

macro_rules! small_int {
    ($($ty:ty),*) => {$(
        impl FromValue for $ty {
            fn from_value(value: Value) -> Result<Self, String> {
                let i = i64::from_value(value)?;
                <$ty>::try_from(i).map_err(|_| {
                    format!("{i} is out of range for {}", stringify!($ty))
                })
            }
        }
        impl IntoValue for $ty {
            fn into_value(self) -> Value {
                Value::Int(self as i64)
            }
        }
        impl Schema for $ty {
            fn schema() -> String {
                format!(
                    r#"{{"type":"integer","minimum":{},"maximum":{}}}"#,
                    <$ty>::MIN,
                    <$ty>::MAX
                )
            }
        }
    )*};
}
small_int!(i8, i16, i32, u8, u16, u32);

impl FromValue for f64 {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Float(x) => Ok(x),
            Value::Int(i) => Ok(i as f64),
            other => mismatch("a number", &other),
        }
    }
}
impl IntoValue for f64 {
    fn into_value(self) -> Value {
        Value::Float(self)
    }
}
impl Schema for f64 {
    fn schema() -> String {
        r#"{"type":"number"}"#.into()
    }
}

impl FromValue for bool {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Bool(b) => Ok(b),
            other => mismatch("a boolean", &other),
        }
    }
}
impl IntoValue for bool {
    fn into_value(self) -> Value {
        Value::Bool(self)
    }
}
impl Schema for bool {
    fn schema() -> String {
        r#"{"type":"boolean"}"#.into()
    }
}

impl FromValue for String {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Text(s) => Ok(s),
            other => mismatch("a string", &other),
        }
    }
}
impl IntoValue for String {
    fn into_value(self) -> Value {
        Value::Text(self)
    }
}
impl IntoValue for &str {
    fn into_value(self) -> Value {
        Value::Text(self.to_string())
    }
}
impl Schema for String {
    fn schema() -> String {
        r#"{"type":"string"}"#.into()
    }
}
impl Schema for &str {
    fn schema() -> String {
        String::schema()
    }
}

impl FromValue for Bytes {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Bytes(b) => Ok(Bytes(b)),
            Value::Text(s) => Ok(Bytes(s.into_bytes())),
            other => mismatch("bytes", &other),
        }
    }
}
impl IntoValue for Bytes {
    fn into_value(self) -> Value {
        Value::Bytes(self.0)
    }
}
impl Schema for Bytes {
    /// Bytes validate as strings in JSON Schema, which has no bytes type.
    fn schema() -> String {
        r#"{"type":"string","contentMediaType":"application/octet-stream"}"#.into()
    }
}

impl IntoValue for () {
    fn into_value(self) -> Value {
        Value::Null
    }
}
impl Schema for () {
    fn schema() -> String {
        r#"{"type":"null"}"#.into()
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
    fn when_missing() -> Option<Self> {
        Some(None)
    }
}
impl<T: IntoValue> IntoValue for Option<T> {
    fn into_value(self) -> Value {
        self.map_or(Value::Null, IntoValue::into_value)
    }
}
impl<T: Schema> Schema for Option<T> {
    fn schema() -> String {
        format!(r#"{{"anyOf":[{},{{"type":"null"}}]}}"#, T::schema())
    }
}

impl<T: FromValue> FromValue for Vec<T> {
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::List(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| T::from_value(v).map_err(|e| format!("item {i}: {e}")))
                .collect(),
            other => mismatch("a list", &other),
        }
    }
}
impl<T: IntoValue> IntoValue for Vec<T> {
    fn into_value(self) -> Value {
        Value::List(self.into_iter().map(IntoValue::into_value).collect())
    }
}
impl<T: Schema> Schema for Vec<T> {
    fn schema() -> String {
        format!(r#"{{"type":"array","items":{}}}"#, T::schema())
    }
}

macro_rules! map_impls {
    ($($map:ident),*) => {$(
        impl<T: FromValue> FromValue for $map<String, T> {
            fn from_value(value: Value) -> Result<Self, String> {
                match value {
                    Value::Object(entries) => entries
                        .into_iter()
                        .map(|(k, v)| {
                            let v = T::from_value(v).map_err(|e| format!("key `{k}`: {e}"))?;
                            Ok((k, v))
                        })
                        .collect(),
                    other => mismatch("a dict", &other),
                }
            }
        }
        impl<T: IntoValue> IntoValue for $map<String, T> {
            fn into_value(self) -> Value {
                Value::Object(self.into_iter().map(|(k, v)| (k, v.into_value())).collect())
            }
        }
        impl<T: Schema> Schema for $map<String, T> {
            fn schema() -> String {
                format!(r#"{{"type":"object","additionalProperties":{}}}"#, T::schema())
            }
        }
    )*};
}
map_impls!(BTreeMap, HashMap);

pub(crate) fn to_wit(value: Value) -> t::Value {
    let nodes = value
        .into_nodes()
        .into_iter()
        .map(|node| match node {
            Node::Null => t::Node::Null,
            Node::Boolean(b) => t::Node::Boolean(b),
            Node::Integer(i) => t::Node::Integer(i),
            Node::Float(x) => t::Node::Float(x),
            Node::Text(s) => t::Node::Text(s),
            Node::Bytes(b) => t::Node::Bytes(b),
            Node::Array(items) => t::Node::Array(items),
            Node::Object(entries) => t::Node::Object(entries),
        })
        .collect();
    t::Value { nodes }
}

pub(crate) fn nodes_from_wit(value: t::Value) -> Vec<Node> {
    value
        .nodes
        .into_iter()
        .map(|node| match node {
            t::Node::Null => Node::Null,
            t::Node::Boolean(b) => Node::Boolean(b),
            t::Node::Integer(i) => Node::Integer(i),
            t::Node::Float(x) => Node::Float(x),
            t::Node::Text(s) => Node::Text(s),
            t::Node::Bytes(b) => Node::Bytes(b),
            t::Node::Array(items) => Node::Array(items),
            t::Node::Object(entries) => Node::Object(entries),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! The conversions on the host target: they touch no WIT import.

    use super::*;

    /// `value` through the WIT encoding a tool's result takes and back, as
    /// the host decodes it.
    fn through_wit(value: Value) -> Value {
        Value::from_nodes(nodes_from_wit(to_wit(value)), &Default::default()).unwrap()
    }

    /// `x` encoded, through WIT, and decoded as `T` again.
    fn round_trip<T: IntoValue + FromValue>(x: T) -> T {
        T::from_value(through_wit(x.into_value())).unwrap()
    }

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn integers_keep_every_i64() {
        for i in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX] {
            assert_eq!(round_trip(i), i);
            assert_eq!(i.into_value(), Value::Int(i));
        }
        assert_eq!(
            i64::from_value(Value::Float(1.0)),
            Err("expected an integer, got float".into())
        );
        assert_eq!(
            i64::from_value(text("1")),
            Err("expected an integer, got str".into())
        );
    }

    #[test]
    fn small_integers_take_their_whole_range_and_refuse_the_rest() {
        assert_eq!(round_trip(i8::MIN), i8::MIN);
        assert_eq!(round_trip(i8::MAX), i8::MAX);
        assert_eq!(round_trip(u8::MAX), u8::MAX);
        assert_eq!(round_trip(i16::MIN), i16::MIN);
        assert_eq!(round_trip(u16::MAX), u16::MAX);
        assert_eq!(round_trip(i32::MIN), i32::MIN);
        assert_eq!(round_trip(u32::MAX), u32::MAX);
        assert_eq!(u32::MAX.into_value(), Value::Int(4_294_967_295));
        assert_eq!(
            u8::from_value(Value::Int(256)),
            Err("256 is out of range for u8".into())
        );
        assert_eq!(
            u32::from_value(Value::Int(-1)),
            Err("-1 is out of range for u32".into())
        );
        assert_eq!(
            i32::from_value(Value::Int(i64::from(i32::MAX) + 1)),
            Err("2147483648 is out of range for i32".into())
        );
        assert_eq!(
            i16::from_value(Value::Int(i64::MIN)),
            Err("-9223372036854775808 is out of range for i16".into())
        );
        assert_eq!(
            u16::from_value(Value::Bool(true)),
            Err("expected an integer, got bool".into())
        );
        assert_eq!(
            u8::schema(),
            r#"{"type":"integer","minimum":0,"maximum":255}"#
        );
        assert_eq!(
            i32::schema(),
            r#"{"type":"integer","minimum":-2147483648,"maximum":2147483647}"#
        );
    }

    #[test]
    fn floats_keep_their_bits_and_accept_integers() {
        for x in [
            0.0,
            -0.0,
            f64::MIN,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert_eq!(round_trip(x).to_bits(), x.to_bits(), "{x}");
        }
        assert!(round_trip(f64::NAN).is_nan());
        assert_eq!(f64::from_value(Value::Int(-3)), Ok(-3.0));
        // Beyond 2^53 an integer becomes the nearest float, as in Python.
        assert_eq!(
            f64::from_value(Value::Int(i64::MAX)),
            Ok(9.223372036854776e18)
        );
        assert_eq!(
            f64::from_value(Value::Null),
            Err("expected a number, got None".into())
        );
    }

    #[test]
    fn text_bytes_bools_and_unit() {
        assert_eq!(round_trip(String::new()), "");
        assert_eq!(
            round_trip("naïve ☕ \0 \u{10FFFF}".to_string()),
            "naïve ☕ \0 \u{10FFFF}"
        );
        assert_eq!("x".into_value(), text("x"));
        assert!(round_trip(true));
        assert!(!round_trip(false));
        assert_eq!(
            bool::from_value(Value::Int(1)),
            Err("expected a boolean, got int".into())
        );
        assert_eq!(
            String::from_value(Value::Bytes(b"x".to_vec())),
            Err("expected a string, got bytes".into())
        );
        let bytes = Bytes((0..=255).collect());
        assert_eq!(round_trip(bytes.clone()), bytes);
        assert_eq!(round_trip(Bytes::default()), Bytes(vec![]));
        // A string argument is taken as its UTF-8 bytes.
        assert_eq!(Bytes::from_value(text("é")), Ok(Bytes(vec![0xC3, 0xA9])));
        assert_eq!(
            Bytes::from_value(Value::List(vec![])),
            Err("expected bytes, got list".into())
        );
        assert_eq!(().into_value(), Value::Null);
        assert_eq!(through_wit(().into_value()), Value::Null);
    }

    #[test]
    fn options_are_null_or_the_value() {
        assert_eq!(round_trip(Some(5i64)), Some(5));
        assert_eq!(round_trip(None::<i64>), None);
        assert_eq!(None::<String>.into_value(), Value::Null);
        assert_eq!(Option::<i64>::when_missing(), Some(None));
        assert_eq!(i64::when_missing(), None);
        assert_eq!(
            Option::<i64>::from_value(text("5")),
            Err("expected an integer, got str".into())
        );
        // Nested options cannot tell `Some(None)` from `None`: both are null.
        assert_eq!(Some(None::<i64>).into_value(), Value::Null);
        assert_eq!(round_trip(Some(None::<i64>)), None);
        assert_eq!(round_trip(Some(Some(1i64))), Some(Some(1)));
        assert_eq!(
            Option::<i64>::schema(),
            r#"{"anyOf":[{"type":"integer"},{"type":"null"}]}"#
        );
    }

    #[test]
    fn lists_and_maps_nest_and_name_the_item_that_does_not_fit() {
        let nested = vec![vec![Some(1i64), None], vec![], vec![Some(i64::MIN)]];
        assert_eq!(round_trip(nested.clone()), nested);
        assert_eq!(round_trip(Vec::<String>::new()), Vec::<String>::new());

        let mut map = BTreeMap::new();
        map.insert("b".to_string(), vec![1.5f64]);
        map.insert("a".to_string(), vec![]);
        map.insert(String::new(), vec![-0.5]);
        assert_eq!(round_trip(map.clone()), map);
        // A BTreeMap's entries go out sorted by key.
        let Value::Object(entries) = map.into_value() else {
            panic!("not an object");
        };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["", "a", "b"]);

        let mut hash = HashMap::new();
        hash.insert("k".to_string(), BTreeMap::from([("x".to_string(), true)]));
        assert_eq!(round_trip(hash.clone()), hash);

        assert_eq!(
            Vec::<i64>::from_value(Value::List(vec![Value::Int(1), text("2")])),
            Err("item 1: expected an integer, got str".into())
        );
        assert_eq!(
            Vec::<Vec<i64>>::from_value(Value::List(vec![Value::List(vec![Value::Null])])),
            Err("item 0: item 0: expected an integer, got None".into())
        );
        assert_eq!(
            Vec::<i64>::from_value(Value::Object(vec![])),
            Err("expected a list, got dict".into())
        );
        assert_eq!(
            BTreeMap::<String, i64>::from_value(Value::Object(vec![("n".into(), text("x"))])),
            Err("key `n`: expected an integer, got str".into())
        );
        assert_eq!(
            HashMap::<String, i64>::from_value(Value::List(vec![])),
            Err("expected a dict, got list".into())
        );
        // A repeated key (a value from the host never has one): the last wins.
        let repeated = Value::Object(vec![
            ("k".into(), Value::Int(1)),
            ("k".into(), Value::Int(2)),
        ]);
        assert_eq!(
            BTreeMap::<String, i64>::from_value(repeated),
            Ok(BTreeMap::from([("k".to_string(), 2)]))
        );
        assert_eq!(
            Vec::<BTreeMap<String, u8>>::schema(),
            r#"{"type":"array","items":{"type":"object","additionalProperties":{"type":"integer","minimum":0,"maximum":255}}}"#
        );
    }

    #[test]
    fn a_value_crosses_whole_in_any_shape() {
        // As deep as a value goes: its innermost null is at depth 64.
        let deep = (0..63).fold(Value::Null, |v, _| Value::List(vec![v]));
        let value = Value::Object(vec![
            ("null".into(), Value::Null),
            (
                "ints".into(),
                Value::List(vec![Value::Int(i64::MIN), Value::Int(i64::MAX)]),
            ),
            ("float".into(), Value::Float(-0.0)),
            ("text".into(), text("ü")),
            ("bytes".into(), Value::Bytes(vec![0, 255])),
            ("empty list".into(), Value::List(vec![])),
            ("empty dict".into(), Value::Object(vec![])),
            ("deep".into(), deep),
            (
                "same key twice in order".into(),
                Value::Object(vec![
                    ("z".into(), Value::Int(1)),
                    ("a".into(), Value::Int(2)),
                ]),
            ),
        ]);
        assert_eq!(Value::from_value(value.clone()), Ok(value.clone()));
        assert_eq!(through_wit(value.clone()), value);
        assert_eq!(Value::schema(), "{}");
    }

    #[test]
    fn every_schema_is_a_json_object() {
        for schema in [
            Value::schema(),
            i64::schema(),
            u16::schema(),
            f64::schema(),
            bool::schema(),
            String::schema(),
            <&str>::schema(),
            Bytes::schema(),
            <()>::schema(),
            Option::<Vec<Option<Bytes>>>::schema(),
            HashMap::<String, Vec<f64>>::schema(),
        ] {
            let json: serde_json::Value = serde_json::from_str(&schema).unwrap();
            assert!(json.is_object(), "{schema}");
        }
    }
}
