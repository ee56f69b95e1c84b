//! Checks a call's arguments against the method's declared parameters before
//! the plugin runs.

use crate::error::CallErrorKind;
use crate::json::{BytesAs, value_to_json};
use crate::limits::LimitKind;
use crate::schema::{self, Compiled};
use crate::types::Value;

/// A method's parameters with their schemas compiled; none for a schema that
/// accepts any value, so such an argument is not copied into JSON to check.
pub struct ArgChecker {
    params: Vec<(String, bool, Option<Compiled>)>,
}

/// Why arguments were refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// They do not match the parameters; the message names the argument.
    Invalid(String),
    /// Checking one would take more work than a check may.
    TooCostly(String),
}

/// A refusal is the call's error: arguments that do not match, or whose
/// check would cost too much (the `value_size` limit).
impl From<Refused> for CallErrorKind {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Invalid(message) => CallErrorKind::InvalidArguments { message },
            Refused::TooCostly(message) => CallErrorKind::LimitExceeded {
                limit: LimitKind::ValueSize,
                message,
            },
        }
    }
}

/// Keywords that do not constrain a value.
const ANNOTATIONS: &[&str] = &[
    "$comment",
    "$id",
    "$schema",
    "default",
    "deprecated",
    "description",
    "examples",
    "readOnly",
    "title",
    "writeOnly",
];

/// Whether `schema` accepts every value: `true`, `{}` or annotations only.
fn accepts_anything(schema: &serde_json::Value) -> bool {
    match schema {
        serde_json::Value::Bool(accepts) => *accepts,
        serde_json::Value::Object(keywords) => {
            keywords.keys().all(|k| ANNOTATIONS.contains(&k.as_str()))
        }
        _ => false,
    }
}

impl ArgChecker {
    /// The checker of parameters given as (schema, (name, required, its
    /// compiled schema)); a parameter whose schema did not compile (the
    /// manifest is then refused) or accepts anything is not checked.
    pub fn new<'a>(
        params: impl Iterator<Item = (&'a serde_json::Value, (String, bool, Option<Compiled>))>,
    ) -> Self {
        let params = params
            .map(|(json, (name, required, compiled))| {
                (name, required, compiled.filter(|_| !accepts_anything(json)))
            })
            .collect();
        ArgChecker { params }
    }

    /// Checks `args`, an object of parameter names to values: no unknown or
    /// repeated names, every required one present, each value valid for its
    /// schema, each check within [`schema::MAX_CHECK_WORK`]. The message
    /// names the argument.
    pub fn check(&self, args: &Value) -> Result<(), Refused> {
        let invalid = |m: String| Err(Refused::Invalid(m));
        let Value::Object(entries) = args else {
            return invalid(format!(
                "arguments must be an object of names to values, not {}",
                args.type_name()
            ));
        };
        for (i, (name, _)) in entries.iter().enumerate() {
            let shown = || crate::text::quote(name, 80);
            if !self.params.iter().any(|(p, _, _)| p == name) {
                return invalid(format!("unexpected argument {}", shown()));
            }
            if entries[..i].iter().any(|(n, _)| n == name) {
                return invalid(format!("argument {} given more than once", shown()));
            }
        }
        for (name, required, compiled) in &self.params {
            match (entries.iter().find(|(n, _)| n == name), compiled) {
                (None, _) if *required => {
                    return invalid(format!("missing required argument `{name}`"));
                }
                (None, _) | (Some(_), None) => {}
                (Some((_, value)), Some(compiled)) => {
                    schema::check_work(compiled.expanded, value.node_count())
                        .map_err(|e| Refused::TooCostly(format!("argument `{name}`: {e}")))?;
                    let json = value_to_json(value, BytesAs::String);
                    if let Err(e) = compiled.validator.validate(&json) {
                        let got = value.type_name();
                        let e = crate::text::cut(e.to_string(), 500);
                        return invalid(format!("argument `{name}` ({got}): {e}"));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker_of(params: &[(&str, serde_json::Value, bool)]) -> ArgChecker {
        ArgChecker::new(params.iter().map(|(name, schema, required)| {
            let compiled = schema::compile(schema).unwrap();
            (schema, (name.to_string(), *required, Some(compiled)))
        }))
    }

    fn checker() -> ArgChecker {
        checker_of(&[
            ("n", serde_json::json!({"type": "integer"}), true),
            ("s", serde_json::json!({"type": "string"}), false),
        ])
    }

    fn obj(entries: &[(&str, Value)]) -> Value {
        Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn schemas_that_accept_anything_are_not_checked() {
        use serde_json::json;
        for schema in [json!(true), json!({}), json!({"description": "any value"})] {
            assert!(accepts_anything(&schema), "{schema}");
        }
        for schema in [json!(false), json!({"type": "string"}), json!({"not": {}})] {
            assert!(!accepts_anything(&schema), "{schema}");
        }
    }

    #[test]
    fn checks_names_presence_and_types() {
        let c = checker();
        assert!(c.check(&obj(&[("n", Value::Int(1))])).is_ok());
        assert!(
            c.check(&obj(&[
                ("n", Value::Int(1)),
                ("s", Value::Bytes(b"x".to_vec()))
            ]))
            .is_ok()
        );
        let err = |v: Value| match c.check(&v).unwrap_err() {
            Refused::Invalid(m) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(err(obj(&[])), "missing required argument `n`");
        assert_eq!(
            err(obj(&[("n", Value::Int(1)), ("zz", Value::Null)])),
            "unexpected argument \"zz\""
        );
        assert!(err(obj(&[("n", Value::Text("x".into()))])).starts_with("argument `n` (str):"));
        assert!(err(Value::List(vec![])).contains("not list"));
        assert!(err(obj(&[("n", Value::Int(1)), ("n", Value::Int(2))])).contains("more than once"));
    }

    #[test]
    fn a_check_too_costly_is_refused_before_it_starts() {
        let mut defs = serde_json::Map::new();
        for i in 0..10 {
            let next = format!("#/$defs/l{}", i + 1);
            defs.insert(
                format!("l{i}"),
                serde_json::json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert("l10".into(), serde_json::json!({"type": "integer"}));
        let schema =
            serde_json::json!({"$defs": defs, "type": "array", "items": {"$ref": "#/$defs/l0"}});
        let c = checker_of(&[("xs", schema, true)]);
        let few = obj(&[("xs", Value::List(vec![Value::Int(1); 10]))]);
        assert!(c.check(&few).is_ok());
        let many = obj(&[("xs", Value::List(vec![Value::Int(1); 100_000]))]);
        match c.check(&many).unwrap_err() {
            Refused::TooCostly(m) => assert!(
                m.starts_with("argument `xs`: checking a value of 100001 nodes"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
