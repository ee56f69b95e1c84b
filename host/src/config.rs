//! A plugin's configuration: the operator's values checked against the
//! plugin's config schema, and the secrets among them kept out of everything
//! that leaves the plugin.
//!
//! A top-level property whose schema has `"secret": true` is a secret: its
//! value is given to the plugin through `config.get` and to nothing else.
//! Wherever it would appear in a log line, an event, a chat message, a
//! result, an error or an outcome, the host writes `[secret]` instead.

use serde_json::{Map, Value as Json};

use crate::types::{ContentPart, MethodResult, Value};

/// What replaces a secret.
pub const REDACTED: &str = "[secret]";

/// Secrets shorter than this are not searched for: they would mask ordinary
/// text. A schema can require a longer secret with `minLength`.
const MIN_SECRET_LEN: usize = 4;

/// The checked configuration of one plugin.
#[derive(Debug, Clone, Default)]
pub(crate) struct PluginConfig {
    /// The values, if the operator supplied any.
    pub(crate) values: Option<Map<String, Json>>,
    /// Hides the secret ones.
    pub(crate) redactor: Redactor,
}

impl PluginConfig {
    /// Checks `supplied` against `schema`. With no values supplied the
    /// plugin loads, and reading its configuration says none was given.
    pub(crate) fn bind(
        schema: Option<&Json>,
        supplied: Option<&Map<String, Json>>,
    ) -> Result<Self, Vec<String>> {
        let Some(supplied) = supplied else {
            return Ok(PluginConfig::default());
        };
        let Some(schema) = schema else {
            return Err(vec![
                "the operator supplies a configuration, but the plugin declares no config schema"
                    .to_string(),
            ]);
        };
        let redactor = Redactor::new(secret_values(schema, supplied));
        let instance = Json::Object(supplied.clone());
        let validator = jsonschema::validator_for(schema).map_err(|e| vec![e.to_string()])?;
        let problems: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_string() } else { at };
                redactor.redact(&format!("config {at}: {e}"))
            })
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(PluginConfig {
            values: Some(supplied.clone()),
            redactor,
        })
    }
}

/// The values of the top-level properties marked `"secret": true`, as text.
fn secret_values(schema: &Json, supplied: &Map<String, Json>) -> Vec<String> {
    let Some(props) = schema.get("properties").and_then(Json::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .filter(|(_, s)| s.get("secret") == Some(&Json::Bool(true)))
        .filter_map(|(name, _)| supplied.get(name))
        .map(|v| match v {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// Replaces every occurrence of a set of secrets with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    fn new(mut secrets: Vec<String>) -> Self {
        secrets.retain(|s| s.len() >= MIN_SECRET_LEN);
        // Longest first, so a secret containing another is hidden whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// Whether there is nothing to hide.
    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with the secrets hidden.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        self.redact_in_place(&mut out);
        out
    }

    /// Hides the secrets in `text`.
    pub(crate) fn redact_in_place(&self, text: &mut String) {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), REDACTED);
            }
        }
    }

    /// Hides the secrets in every string and byte string of a value, and in
    /// object keys.
    pub(crate) fn redact_value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        let mut stack = vec![value];
        while let Some(v) = stack.pop() {
            match v {
                Value::Text(s) => self.redact_in_place(s),
                Value::Bytes(b) => {
                    if let Ok(s) = std::str::from_utf8(b) {
                        let hidden = self.redact(s);
                        if hidden != s {
                            *b = hidden.into_bytes();
                        }
                    }
                }
                Value::List(items) => stack.extend(items.iter_mut()),
                Value::Object(fields) => {
                    for (k, v) in fields.iter_mut() {
                        self.redact_in_place(k);
                        stack.push(v);
                    }
                }
                Value::Null | Value::Bool(_) | Value::Int(_) | Value::Float(_) => {}
            }
        }
    }

    /// Hides the secrets in a method's result.
    pub(crate) fn redact_result(&self, result: &mut MethodResult) {
        if self.is_empty() {
            return;
        }
        match result {
            MethodResult::Tool(v) => self.redact_value(v),
            MethodResult::Agent(t) | MethodResult::Behavior(t) => self.redact_in_place(t),
            MethodResult::MultimodalAgent(parts) => {
                for part in parts {
                    if let ContentPart::Text(t) | ContentPart::ImageUrl(t) = part {
                        self.redact_in_place(t);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Json {
        json!({
            "type": "object",
            "properties": {
                "base_url": {"type": "string"},
                "api_key": {"type": "string", "secret": true, "minLength": 8},
            },
            "required": ["base_url", "api_key"],
            "additionalProperties": false,
        })
    }

    fn map(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn checks_values_against_the_schema() {
        let ok = map(json!({"base_url": "http://x", "api_key": "k-12345678"}));
        let bound = PluginConfig::bind(Some(&schema()), Some(&ok)).unwrap();
        assert_eq!(bound.values.unwrap()["base_url"], "http://x");

        let bad = map(json!({"base_url": 3, "colour": "red"}));
        let problems = PluginConfig::bind(Some(&schema()), Some(&bad))
            .unwrap_err()
            .join("\n");
        for needle in ["\"api_key\" is a required property", "/base_url", "colour"] {
            assert!(problems.contains(needle), "{needle}: {problems}");
        }
        let none = PluginConfig::bind(None, Some(&ok)).unwrap_err();
        assert!(none[0].contains("declares no config schema"));
        assert!(
            PluginConfig::bind(Some(&schema()), None)
                .unwrap()
                .values
                .is_none()
        );
    }

    #[test]
    fn a_secret_never_appears_in_an_error() {
        let short = map(json!({"base_url": "http://x", "api_key": "hunter2"}));
        let problems = PluginConfig::bind(Some(&schema()), Some(&short))
            .unwrap_err()
            .join("\n");
        assert!(!problems.contains("hunter2"), "{problems}");
        assert!(problems.contains(REDACTED), "{problems}");
    }

    #[test]
    fn redacts_text_and_values() {
        let r = Redactor::new(vec!["s3cret-key".into(), "ab".into()]);
        assert_eq!(r.redact("key=s3cret-key;ab"), "key=[secret];ab");
        let mut v = Value::Object(vec![
            (
                "s3cret-key".into(),
                Value::List(vec![Value::Text("x s3cret-key".into())]),
            ),
            ("b".into(), Value::Bytes(b"s3cret-key".to_vec())),
        ]);
        r.redact_value(&mut v);
        assert_eq!(
            v,
            Value::Object(vec![
                (
                    "[secret]".into(),
                    Value::List(vec![Value::Text("x [secret]".into())])
                ),
                ("b".into(), Value::Bytes(b"[secret]".to_vec())),
            ])
        );
    }
}
