//! What the attribute macros make of a function, seen as the host sees it:
//! the spec `describe` lists, and the calls `invoke` decodes and answers.
//! On the host target: nothing here calls a WIT import.

use sandwit_sdk::__private::wit::sandwit::plugin::types as t;
use sandwit_sdk::__private::{CallFn, Method, MethodResult, MethodSpec, invoke};
use sandwit_sdk::{AgentCtx, Bytes, ContentPart, Error, Value, agent, behavior, tool};
use sandwit_value::Node;

/// Add two integers.
///
/// Args:
///     num1: The first number.
///     num2: The second number; 1 if left out.
///
/// Returns:
///     int: The sum.
#[tool]
fn add(num1: i64, num2: Option<i64>) -> Result<i64, Error> {
    num1.checked_add(num2.unwrap_or(1))
        .ok_or_else(|| Error::failed("the sum overflows 64 bits"))
}

/// Greet the user
///   of the chat, by name.
///
/// Args:
///     greeting: How.
#[agent]
fn greet(ctx: &AgentCtx, greeting: String) -> String {
    format!(
        "{greeting}, {}",
        ctx.user_id.as_deref().unwrap_or("stranger")
    )
}

/// Refuse whatever is asked.
#[behavior]
fn refuse(data: Bytes) -> Result<String, Error> {
    Err(Error::denied(format!("not with {} bytes", data.0.len())))
}

/// Draw a picture.
#[sandwit_sdk::multimodal_agent]
fn draw() -> Vec<ContentPart> {
    vec![ContentPart::Text("a cat".into())]
}

/// Return nothing.
#[tool]
fn nothing() {}

const METHODS: &[(&str, CallFn)] = &[
    (add::NAME, add::call),
    (greet::NAME, greet::call),
    (refuse::NAME, refuse::call),
    (draw::NAME, draw::call),
    (nothing::NAME, nothing::call),
];

fn ctx() -> AgentCtx {
    AgentCtx {
        chat_key: "chat-1".into(),
        user_id: Some("ada".into()),
        channel_id: None,
        channel_name: None,
        channel_type: None,
        adapter_key: None,
    }
}

/// `value` as the host sends it.
fn to_wit(value: Value) -> t::Value {
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

fn object(entries: &[(&str, Value)]) -> Value {
    Value::Object(
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

fn call(method: &str, args: Value) -> Result<MethodResult, t::CallError> {
    invoke(&ctx(), method, to_wit(args), METHODS)
}

/// The error of a call that must fail, as `kind: message`.
fn error(method: &str, args: Value) -> String {
    match call(method, args) {
        Ok(r) => panic!("{method} returned {r:?}"),
        Err(t::CallError::InvalidArguments(m)) => format!("invalid-arguments: {m}"),
        Err(t::CallError::UnknownMethod(m)) => format!("unknown-method: {m}"),
        Err(t::CallError::Failed(m)) => format!("failed: {m}"),
        Err(t::CallError::Denied(m)) => format!("denied: {m}"),
        Err(other) => panic!("{method}: {other:?}"),
    }
}

fn params(spec: &MethodSpec) -> Vec<(&str, &str, bool)> {
    spec.params
        .iter()
        .map(|p| (p.name.as_str(), p.schema.as_str(), p.required))
        .collect()
}

#[test]
fn the_spec_comes_from_the_signature_and_the_doc_comment() {
    let spec = add::spec();
    assert_eq!(spec.name, "add");
    assert!(matches!(spec.kind, t::MethodKind::Tool));
    assert_eq!(spec.description, "Add two integers.");
    assert_eq!(
        spec.docstring,
        "Add two integers.\n\nArgs:\n    num1: The first number.\n    num2: The second \
         number; 1 if left out.\n\nReturns:\n    int: The sum."
    );
    assert_eq!(
        params(&spec),
        [
            ("num1", r#"{"type":"integer"}"#, true),
            (
                "num2",
                r#"{"anyOf":[{"type":"integer"},{"type":"null"}]}"#,
                false
            ),
        ]
    );
    assert_eq!(spec.returns.as_deref(), Some(r#"{"type":"integer"}"#));

    // The context is no parameter; the first paragraph, on one line, is the
    // description; only a tool declares what it returns.
    let spec = greet::spec();
    assert!(matches!(spec.kind, t::MethodKind::Agent));
    assert_eq!(spec.description, "Greet the user of the chat, by name.");
    assert_eq!(params(&spec), [("greeting", r#"{"type":"string"}"#, true)]);
    assert_eq!(spec.returns, None);
    assert!(matches!(refuse::spec().kind, t::MethodKind::Behavior));
    assert!(matches!(draw::spec().kind, t::MethodKind::MultimodalAgent));
    assert_eq!(
        nothing::spec().returns.as_deref(),
        Some(r#"{"type":"null"}"#)
    );
}

#[test]
fn a_call_decodes_its_arguments_and_encodes_the_result() {
    let int = |i| Value::Int(i);
    let result = call("add", object(&[("num1", int(40)), ("num2", int(2))])).unwrap();
    assert!(
        matches!(&result, MethodResult::Tool(v) if matches!(v.nodes[..], [t::Node::Integer(42)])),
        "{result:?}"
    );
    // An optional parameter left out, or given null, is `None`.
    for args in [
        object(&[("num1", int(41))]),
        object(&[("num1", int(41)), ("num2", Value::Null)]),
    ] {
        let result = call("add", args).unwrap();
        assert!(
            matches!(&result, MethodResult::Tool(v) if matches!(v.nodes[..], [t::Node::Integer(42)])),
            "{result:?}"
        );
    }
    let result = call("greet", object(&[("greeting", Value::Text("hi".into()))])).unwrap();
    assert!(
        matches!(&result, MethodResult::Agent(s) if s == "hi, ada"),
        "{result:?}"
    );
    let result = call("draw", object(&[])).unwrap();
    assert!(
        matches!(&result, MethodResult::MultimodalAgent(parts)
            if matches!(&parts[..], [ContentPart::Text(s)] if s == "a cat")),
        "{result:?}"
    );
    let result = call("nothing", object(&[])).unwrap();
    assert!(
        matches!(&result, MethodResult::Tool(v) if matches!(v.nodes[..], [t::Node::Null])),
        "{result:?}"
    );
}

#[test]
fn a_call_that_does_not_fit_says_why() {
    let int = |i| Value::Int(i);
    assert_eq!(
        error("add", object(&[])),
        "invalid-arguments: missing required argument `num1`"
    );
    assert_eq!(
        error("add", object(&[("num1", Value::Text("1".into()))])),
        "invalid-arguments: argument `num1`: expected an integer, got str"
    );
    assert_eq!(
        error("add", object(&[("num1", int(1)), ("num3", int(1))])),
        "invalid-arguments: unexpected argument `num3`"
    );
    assert_eq!(
        error("add", Value::List(vec![int(1)])),
        "invalid-arguments: arguments must be an object, not list"
    );
    assert_eq!(error("subtract", object(&[])), "unknown-method: subtract");
    // The function's own errors keep their kind.
    assert_eq!(
        error("add", object(&[("num1", int(i64::MAX))])),
        "failed: the sum overflows 64 bits"
    );
    assert_eq!(
        error("refuse", object(&[("data", Value::Text("abc".into()))])),
        "denied: not with 3 bytes"
    );
    // Nodes no value decodes from (a cycle) are refused before any decoding.
    let cyclic = t::Value {
        nodes: vec![t::Node::Array(vec![0])],
    };
    assert!(matches!(
        invoke(&ctx(), "add", cyclic, METHODS),
        Err(t::CallError::InvalidArguments(_))
    ));
}

#[test]
fn a_library_error_becomes_a_failure_with_its_message() {
    fn parse(s: &str) -> Result<i64, Error> {
        Ok(s.parse::<i64>()?)
    }
    let e = parse("x").unwrap_err();
    assert_eq!(e.message(), "invalid digit found in string");
    assert_eq!(e, Error::failed("invalid digit found in string"));
    assert_eq!(e.to_string(), e.message());
}
