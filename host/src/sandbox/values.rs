//! Values into and out of a run: its inputs, which the code finds as
//! variables, and its result, the value of the code's last expression (or
//! of its `result` variable). Both cross as `marshal` bytes, as a method's
//! arguments and results do, and are held to the host's value limits.

use std::collections::HashSet;

use sandwit_contract::limits::CallLimits;
use sandwit_contract::types::Value;

/// A run's inputs, `object` (a [`Value::Object`] of names to values),
/// checked, as the interpreter reads them: `marshal` of the object.
/// `is_method` says whether a name is one of the run's methods, which an
/// input must not hide.
pub(crate) fn marshal_inputs(
    object: &Value,
    is_method: impl Fn(&str) -> bool,
    limits: &CallLimits,
) -> Result<Vec<u8>, String> {
    let Value::Object(inputs) = object else {
        return Err(format!(
            "the inputs are a {}, not an object",
            object.type_name()
        ));
    };
    let mut seen = HashSet::with_capacity(inputs.len());
    for (name, _) in inputs {
        if !is_identifier(name) {
            return Err(format!(
                "input `{name}` is not an ASCII identifier: an input becomes a variable of the \
                 code"
            ));
        }
        if KEYWORDS.contains(&name.as_str()) {
            return Err(format!(
                "input `{name}` is a Python keyword, which no code can name as a variable"
            ));
        }
        if name.starts_with("__") {
            return Err(format!(
                "input `{name}` starts with `__`: those names are Python's own"
            ));
        }
        if is_method(name) {
            return Err(format!(
                "input `{name}` has the name of a method of the run, which it would hide"
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(format!("input `{name}` is given twice"));
        }
    }
    let nodes = object.node_count();
    let decode = limits.decode_limits();
    if nodes > decode.max_nodes {
        return Err(format!(
            "the inputs hold {nodes} values, more than the {} a value may (the host's \
             max_value_nodes)",
            decode.max_nodes
        ));
    }
    let bytes = object.to_marshal();
    if bytes.len() > decode.max_bytes {
        return Err(format!(
            "the inputs take {} bytes, more than the {} a value may (the host's max_value_bytes)",
            bytes.len(),
            decode.max_bytes
        ));
    }
    // Depth past the limit is refused as the interpreter's decoding would.
    Value::from_marshal(&bytes, &decode).map_err(|e| format!("the inputs cannot be given: {e}"))?;
    Ok(bytes)
}

/// A run's result from the interpreter's `marshal` bytes, within the host's
/// value limits; the error says which it broke.
pub(crate) fn decode_result(bytes: &[u8], limits: &CallLimits) -> Result<Value, String> {
    Value::from_marshal(bytes, &limits.decode_limits())
        .map_err(|e| format!("the run's result cannot be returned: {e}"))
}

/// Whether `name` is an ASCII identifier (letters, digits and `_`, not
/// starting with a digit). Python takes Unicode ones too, but normalises
/// them (NFKC): an input named `ℌ` would be a variable the code names `H`.
fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

/// Python's keywords: identifiers no code can use as a variable.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(pairs: &[(&str, Value)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn inputs_are_checked_names_within_the_value_limits() {
        let set = |name: &str| name == "calculate_sum";
        let limits = CallLimits::default();
        let ok = inputs(&[("x", Value::Int(1)), ("_n2", Value::Text("a".into()))]);
        let bytes = marshal_inputs(&ok, set, &limits).unwrap();
        assert_eq!(
            Value::from_marshal(&bytes, &limits.decode_limits()).unwrap(),
            ok
        );
        for (name, why) in [
            ("2x", "not an ASCII identifier"),
            ("a-b", "not an ASCII identifier"),
            ("", "not an ASCII identifier"),
            ("ünï", "not an ASCII identifier"),
            ("lambda", "a Python keyword"),
            ("__builtins__", "starts with `__`"),
            ("calculate_sum", "the name of a method of the run"),
        ] {
            let err = marshal_inputs(&inputs(&[(name, Value::Null)]), set, &limits).unwrap_err();
            assert!(err.contains(why), "{name}: {err}");
        }
        let twice = inputs(&[("x", Value::Null), ("x", Value::Null)]);
        assert!(
            marshal_inputs(&twice, set, &limits)
                .unwrap_err()
                .contains("twice")
        );
        let small = CallLimits {
            max_value_bytes: 100,
            ..CallLimits::default()
        };
        let big = inputs(&[("x", Value::Text("y".repeat(200)))]);
        let err = marshal_inputs(&big, set, &small).unwrap_err();
        assert!(err.contains("max_value_bytes"), "{err}");
    }
}
