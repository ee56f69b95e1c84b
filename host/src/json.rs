//! Conversions between [`Value`] and JSON, for arguments given as JSON, for
//! schema checks and for printing results.

use serde_json::{Map, Number, Value as Json};

use crate::types::Value;

/// How bytes appear in JSON, which has no bytes type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BytesAs {
    /// As a (lossy UTF-8) string: JSON Schema validates bytes as strings.
    String,
    /// As `{"bytes": N}`: the size only, for printing.
    Summary,
}

/// A JSON value as a [`Value`]: integers that fit in 64 bits stay integers,
/// other numbers become floats.
pub fn value_from_json(json: Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::Text(s),
        Json::Array(items) => Value::List(items.into_iter().map(value_from_json).collect()),
        Json::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, value_from_json(v)))
                .collect(),
        ),
    }
}

/// A [`Value`] as JSON; non-finite floats become `null`.
pub fn value_to_json(value: &Value, bytes: BytesAs) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::Number((*i).into()),
        Value::Float(x) => Number::from_f64(*x).map_or(Json::Null, Json::Number),
        Value::Text(s) => Json::String(s.clone()),
        Value::Bytes(b) => match bytes {
            BytesAs::String => Json::String(String::from_utf8_lossy(b).into_owned()),
            BytesAs::Summary => serde_json::json!({ "bytes": b.len() }),
        },
        Value::List(items) => Json::Array(items.iter().map(|v| value_to_json(v, bytes)).collect()),
        Value::Object(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), value_to_json(v, bytes)))
                .collect::<Map<_, _>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip() {
        let json = serde_json::json!({"a": 1, "b": [1.5, "x", null, true], "c": {"d": -2}});
        let value = value_from_json(json.clone());
        assert_eq!(value.get("a"), Some(&Value::Int(1)));
        assert_eq!(value_to_json(&value, BytesAs::Summary), json);
        assert_eq!(
            value_to_json(&Value::Bytes(vec![1, 2, 3]), BytesAs::Summary),
            serde_json::json!({"bytes": 3})
        );
    }
}
