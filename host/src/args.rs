//! Checks a call's arguments against the method's declared parameters before
//! the plugin runs.

use jsonschema::Validator;

use crate::json::{BytesAs, value_to_json};
use crate::manifest::MethodSpec;
use crate::types::Value;

/// A method's parameters with their schemas compiled; none for a schema that
/// accepts any value, so such an argument is not copied into JSON to check.
pub(crate) struct ArgChecker {
    params: Vec<(String, bool, Option<Validator>)>,
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
    /// Compiles the schemas; they were already checked with the manifest.
    pub(crate) fn new(spec: &MethodSpec) -> anyhow::Result<Self> {
        let params = spec
            .params
            .iter()
            .map(|p| {
                let v = jsonschema::validator_for(&p.schema)
                    .map_err(|e| anyhow::anyhow!("parameter `{}`: {e}", p.name))?;
                let v = (!accepts_anything(&p.schema)).then_some(v);
                Ok((p.name.clone(), p.required, v))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(ArgChecker { params })
    }

    /// Checks `args`, an object of parameter names to values: no unknown or
    /// repeated names, every required one present, each value valid for its
    /// schema. The message names the argument.
    pub(crate) fn check(&self, args: &Value) -> Result<(), String> {
        let Value::Object(entries) = args else {
            return Err(format!(
                "arguments must be an object of names to values, not {}",
                args.type_name()
            ));
        };
        for (i, (name, _)) in entries.iter().enumerate() {
            if !self.params.iter().any(|(p, _, _)| p == name) {
                return Err(format!("unexpected argument `{name}`"));
            }
            if entries[..i].iter().any(|(n, _)| n == name) {
                return Err(format!("argument `{name}` given more than once"));
            }
        }
        for (name, required, validator) in &self.params {
            match (entries.iter().find(|(n, _)| n == name), validator) {
                (None, _) if *required => {
                    return Err(format!("missing required argument `{name}`"));
                }
                (None, _) | (Some(_), None) => {}
                (Some((_, value)), Some(validator)) => {
                    let json = value_to_json(value, BytesAs::String);
                    if let Err(e) = validator.validate(&json) {
                        let got = value.type_name();
                        return Err(format!("argument `{name}` ({got}): {e}"));
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
    use crate::manifest::Param;
    use crate::types::MethodKind;

    fn checker() -> ArgChecker {
        let spec = MethodSpec {
            name: "f".into(),
            kind: MethodKind::Tool,
            description: "d".into(),
            docstring: "d".into(),
            params: vec![
                Param {
                    name: "n".into(),
                    schema: serde_json::json!({"type": "integer"}),
                    required: true,
                },
                Param {
                    name: "s".into(),
                    schema: serde_json::json!({"type": "string"}),
                    required: false,
                },
            ],
            returns: None,
        };
        ArgChecker::new(&spec).unwrap()
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
        let err = |v: Value| c.check(&v).unwrap_err();
        assert_eq!(err(obj(&[])), "missing required argument `n`");
        assert_eq!(
            err(obj(&[("n", Value::Int(1)), ("zz", Value::Null)])),
            "unexpected argument `zz`"
        );
        assert!(err(obj(&[("n", Value::Text("x".into()))])).starts_with("argument `n` (str):"));
        assert!(err(Value::List(vec![])).contains("not list"));
        assert!(err(obj(&[("n", Value::Int(1)), ("n", Value::Int(2))])).contains("more than once"));
    }
}
