//! A plugin's configuration: the operator's values checked against the
//! plugin's config schema, and the secrets among them kept out of everything
//! that leaves the plugin.
//!
//! A top-level property is a secret when the operator's policy names it in
//! `secrets`, or the plugin's schema gives it `"secret": true` (a plugin can
//! add secrets, never remove the operator's). Its value is given to the
//! plugin through `config.get` and to nothing else. Wherever it would appear
//! in a log line, an event, a chat message, a result, an error or an
//! outcome, the host writes `[secret]` instead: every string, number and
//! boolean inside it is searched for, in text and in bytes, and a number
//! equal to a secret number is replaced as a whole.

pub(crate) mod interface;

use jsonschema::Validator;
use serde_json::{Map, Value as Json};

use sandwit_contract::text::cut;
use sandwit_contract::types::{ContentPart, Media, MethodResult, Value};

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
    /// Checks `supplied` against `schema` (with its validator, compiled when
    /// the manifest was checked). With no values supplied the plugin loads,
    /// and reading its configuration says none was given.
    pub(crate) fn bind(
        schema: Option<(&Json, &Validator)>,
        supplied: Option<&Map<String, Json>>,
        operator_secrets: &[String],
    ) -> Result<Self, Vec<String>> {
        let Some(supplied) = supplied else {
            return Ok(PluginConfig::default());
        };
        let Some((schema, validator)) = schema else {
            return Err(vec![
                "the operator supplies a configuration, but the plugin declares no config schema"
                    .to_string(),
            ]);
        };
        let redactor = Redactor::new(secret_values(schema, supplied, operator_secrets));
        let instance = Json::Object(supplied.clone());
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

/// The values of the secret top-level properties: those the operator names
/// and those the schema marks `"secret": true`. Each is every string, number
/// and boolean inside the value (a secret may be an object of credentials).
fn secret_values(schema: &Json, supplied: &Map<String, Json>, operator: &[String]) -> Vec<Json> {
    let marked = schema
        .get("properties")
        .and_then(Json::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, s)| s.get("secret") == Some(&Json::Bool(true)))
        .map(|(name, _)| name.as_str());
    let names: std::collections::BTreeSet<&str> =
        marked.chain(operator.iter().map(String::as_str)).collect();
    let mut leaves = Vec::new();
    let mut stack: Vec<&Json> = names.iter().filter_map(|n| supplied.get(*n)).collect();
    while let Some(v) = stack.pop() {
        match v {
            Json::Array(items) => stack.extend(items),
            Json::Object(fields) => stack.extend(fields.values()),
            Json::Null => {}
            leaf => leaves.push(leaf.clone()),
        }
    }
    leaves
}

/// Replaces every occurrence of a set of secrets with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Redactor {
    /// Longest first, so a secret containing another is hidden whole.
    secrets: Vec<String>,
    /// Secret numbers, as integers and floats, hidden where a value is one.
    ints: Vec<i64>,
    floats: Vec<f64>,
}

impl Redactor {
    fn new(leaves: Vec<Json>) -> Self {
        let mut secrets = Vec::new();
        let (mut ints, mut floats) = (Vec::new(), Vec::new());
        for leaf in leaves {
            match &leaf {
                Json::String(s) => secrets.push(s.clone()),
                Json::Number(n) => {
                    secrets.push(n.to_string());
                    if let Some(i) = n.as_i64() {
                        ints.push(i);
                    }
                    if let Some(f) = n.as_f64() {
                        floats.push(f);
                    }
                }
                other => secrets.push(other.to_string()),
            }
        }
        secrets.retain(|s| s.len() >= MIN_SECRET_LEN);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        // A number too short to search for as text is too common to hide.
        ints.retain(|i| i.to_string().len() >= MIN_SECRET_LEN);
        floats.retain(|f| f.to_string().len() >= MIN_SECRET_LEN);
        Redactor {
            secrets,
            ints,
            floats,
        }
    }

    /// A redactor of `secrets` (a tool source's token, say).
    pub(crate) fn of_secrets(secrets: impl IntoIterator<Item = String>) -> Self {
        Redactor::new(secrets.into_iter().map(Json::String).collect())
    }

    /// Whether there is nothing to hide.
    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The longest secret's length, in bytes.
    fn longest(&self) -> usize {
        self.secrets.first().map_or(0, String::len)
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

    /// `text` with the secrets hidden, then cut to `max` bytes. Only the part
    /// that can survive the cut is searched, so a huge text costs no more
    /// than a short one, and a secret across the cut is hidden whole.
    pub(crate) fn redact_cut(&self, mut text: String, max: usize) -> String {
        sandwit_contract::text::truncate(&mut text, max + self.longest());
        self.redact_in_place(&mut text);
        cut(text, max)
    }

    /// Hides the secrets in `bytes`, text or not.
    pub(crate) fn redact_bytes(&self, bytes: &mut Vec<u8>) {
        for secret in &self.secrets {
            let needle = secret.as_bytes();
            if !bytes.windows(needle.len()).any(|w| w == needle) {
                continue;
            }
            let mut out = Vec::with_capacity(bytes.len());
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i..].starts_with(needle) {
                    out.extend_from_slice(REDACTED.as_bytes());
                    i += needle.len();
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            *bytes = out;
        }
    }

    /// Whether `value` is a secret number.
    fn is_secret_number(&self, value: &Value) -> bool {
        match value {
            Value::Int(i) => self.ints.contains(i) || self.floats.contains(&(*i as f64)),
            Value::Float(f) => self.floats.contains(f),
            _ => false,
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
            if self.is_secret_number(v) {
                *v = Value::Text(REDACTED.to_string());
                continue;
            }
            match v {
                Value::Text(s) => self.redact_in_place(s),
                Value::Bytes(b) => self.redact_bytes(b),
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

    /// Hides the secrets in an image's MIME type and bytes.
    pub(crate) fn redact_media(&self, media: &mut Media) {
        self.redact_in_place(&mut media.mime_type);
        self.redact_bytes(&mut media.data);
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
                    match part {
                        ContentPart::Text(t) | ContentPart::ImageUrl(t) => self.redact_in_place(t),
                        ContentPart::Image(m) => self.redact_media(m),
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

    /// [`PluginConfig::bind`] with the schema compiled as a manifest's is.
    fn bind(
        schema: Option<&Json>,
        supplied: Option<&Map<String, Json>>,
        secrets: &[String],
    ) -> Result<PluginConfig, Vec<String>> {
        let validator = schema.map(|s| sandwit_contract::schema::compile(s).unwrap().validator);
        PluginConfig::bind(schema.zip(validator.as_ref()), supplied, secrets)
    }

    fn map(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn checks_values_against_the_schema() {
        let ok = map(json!({"base_url": "http://x", "api_key": "k-12345678"}));
        let bound = bind(Some(&schema()), Some(&ok), &[]).unwrap();
        assert_eq!(bound.values.unwrap()["base_url"], "http://x");

        let bad = map(json!({"base_url": 3, "colour": "red"}));
        let problems = bind(Some(&schema()), Some(&bad), &[])
            .unwrap_err()
            .join("\n");
        for needle in ["\"api_key\" is a required property", "/base_url", "colour"] {
            assert!(problems.contains(needle), "{needle}: {problems}");
        }
        let none = bind(None, Some(&ok), &[]).unwrap_err();
        assert!(none[0].contains("declares no config schema"));
        assert!(bind(Some(&schema()), None, &[]).unwrap().values.is_none());
    }

    #[test]
    fn a_secret_never_appears_in_an_error() {
        let short = map(json!({"base_url": "http://x", "api_key": "hunter2"}));
        let problems = bind(Some(&schema()), Some(&short), &[])
            .unwrap_err()
            .join("\n");
        assert!(!problems.contains("hunter2"), "{problems}");
        assert!(problems.contains(REDACTED), "{problems}");
    }

    #[test]
    fn redacts_text_and_values() {
        let r = Redactor::new(vec![json!("s3cret-key"), json!("ab")]);
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

    #[test]
    fn every_leaf_of_a_secret_is_hidden_wherever_it_appears() {
        let schema = json!({"type": "object"});
        let supplied = map(json!({
            "creds": {"user": "admin-user", "token": ["tok-123456"]},
            "pin": 98765432,
            "base_url": "http://x",
        }));
        let names = ["creds".to_string(), "pin".to_string()];
        let bound = bind(Some(&schema), Some(&supplied), &names).unwrap();
        let r = &bound.redactor;
        assert_eq!(
            r.redact("u=admin-user t=tok-123456 p=98765432 http://x"),
            "u=[secret] t=[secret] p=[secret] http://x"
        );
        let mut v = Value::List(vec![
            Value::Int(98765432),
            Value::Float(98765432.0),
            Value::Int(7),
            Value::Bytes(b"\xff\xfetok-123456\xff".to_vec()),
        ]);
        r.redact_value(&mut v);
        assert_eq!(
            v,
            Value::List(vec![
                Value::Text(REDACTED.into()),
                Value::Text(REDACTED.into()),
                Value::Int(7),
                Value::Bytes(b"\xff\xfe[secret]\xff".to_vec()),
            ])
        );
        let mut media = Media {
            mime_type: "image/admin-user".into(),
            data: b"admin-user".to_vec(),
        };
        r.redact_media(&mut media);
        assert_eq!(
            (media.mime_type.as_str(), &media.data[..]),
            ("image/[secret]", &b"[secret]"[..])
        );
    }

    #[test]
    fn a_cut_never_leaves_the_tail_of_a_secret() {
        let r = Redactor::new(vec![json!("s3cret-key")]);
        let text = format!("{}s3cret-key{}", "a".repeat(4090), "b".repeat(1 << 20));
        let out = r.redact_cut(text, 4096);
        assert!(
            !out.contains("s3cret") && !out.contains("key"),
            "{}",
            &out[4000..]
        );
        assert!(out.len() <= 4096 + '…'.len_utf8());
    }
}
