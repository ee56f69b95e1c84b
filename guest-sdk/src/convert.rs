//! Typed Rust to and from [`Value`], and each type's JSON Schema.

use std::collections::{BTreeMap, HashMap};

use crate::__private::wit::sandwit::plugin::types as t;
use crate::Value;
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
