//! Conversions between [`Value`] and JSON, for arguments given as JSON, for
//! schema checks and for printing results.

use serde_json::{Map, Number, Value as Json};

use crate::text::cut;
use crate::types::Value;

/// How bytes appear in JSON, which has no bytes type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BytesAs {
    /// As a (lossy UTF-8) string: JSON Schema validates bytes as strings.
    String,
    /// As `{"bytes": N}`: the size only, for printing.
    Summary,
    /// As `{"base64": "..."}`, standard base64: every byte, for a value
    /// handed back whole (a run's result).
    Base64,
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
            BytesAs::Base64 => {
                use base64::Engine;
                let data = base64::engine::general_purpose::STANDARD.encode(b);
                serde_json::json!({ "base64": data })
            }
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

/// `value` as one line of compact JSON of at most `max` bytes, cut with `…`
/// where longer (bytes as `{"bytes":N}`, objects in insertion order). The
/// work is bounded by `max`, not by the size of the value: a call's events
/// summarize every result, megabytes included.
pub fn summary(value: &Value, max: usize) -> String {
    let mut out = String::new();
    write_summary(value, max, &mut out);
    cut(out, max)
}

/// Writes `value` to `out`, stopping once `out` is longer than `max`.
fn write_summary(value: &Value, max: usize, out: &mut String) {
    use std::fmt::Write as _;
    if out.len() > max {
        return;
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => write!(out, "{b}").expect("writing to a String"),
        Value::Int(i) => write!(out, "{i}").expect("writing to a String"),
        Value::Float(x) => match Number::from_f64(*x) {
            Some(n) => write!(out, "{n}").expect("writing to a String"),
            None => out.push_str("null"),
        },
        Value::Text(s) => write_text(s, max, out),
        Value::Bytes(b) => write!(out, "{{\"bytes\":{}}}", b.len()).expect("writing to a String"),
        Value::List(items) => write_items(items, ['[', ']'], max, out, |item, out| {
            write_summary(item, max, out);
        }),
        Value::Object(entries) => {
            write_items(entries, ['{', '}'], max, out, |(key, item), out| {
                write_text(key, max, out);
                out.push(':');
                write_summary(item, max, out);
            });
        }
    }
}

/// Writes `items` between `brackets`, comma-separated, each with `write`,
/// stopping once `out` is longer than `max`.
fn write_items<T>(
    items: &[T],
    brackets: [char; 2],
    max: usize,
    out: &mut String,
    write: impl Fn(&T, &mut String),
) {
    out.push(brackets[0]);
    for (i, item) in items.iter().enumerate() {
        if out.len() > max {
            return;
        }
        if i > 0 {
            out.push(',');
        }
        write(item, out);
    }
    out.push(brackets[1]);
}

/// Writes `text` as a JSON string, only as much of it as can show within
/// `max` bytes of `out`.
fn write_text(text: &str, max: usize, out: &mut String) {
    let room = (max + 1).saturating_sub(out.len());
    let mut end = room.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&Json::from(&text[..end]).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_json_cut_to_its_length() {
        let value = Value::Object(vec![
            (
                "z".into(),
                Value::List(vec![Value::Int(1), Value::Float(0.5)]),
            ),
            ("a".into(), Value::Text("say \"hi\"\n".into())),
            ("b".into(), Value::Bytes(vec![0; 3])),
            ("n".into(), Value::Float(f64::NAN)),
            ("t".into(), Value::Bool(true)),
            ("u".into(), Value::Null),
        ]);
        let full = r#"{"z":[1,0.5],"a":"say \"hi\"\n","b":{"bytes":3},"n":null,"t":true,"u":null}"#;
        assert_eq!(summary(&value, 200), full);
        assert_eq!(summary(&value, full.len()), full);
        assert_eq!(summary(&value, 10), format!("{}…", &full[..10]));
        // Cut on a character boundary.
        assert_eq!(summary(&Value::Text("héé".into()), 3), "\"h…");
    }

    #[test]
    fn a_summary_of_a_huge_value_reads_only_its_head() {
        let huge = Value::List(vec![Value::Text("x".repeat(1 << 20)); 1 << 10]);
        let text = summary(&huge, 200);
        assert_eq!(text.chars().count(), 201);
        assert!(text.starts_with("[\"xxx") && text.ends_with('…'));
    }

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
