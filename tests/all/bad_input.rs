//! Wrong, missing, extra, mistyped and oversized arguments; unknown methods.
//! Each is a clear error naming the argument, and the host goes on serving.

use sandwit::{CallErrorKind, LimitKind};
use serde_json::json;

use crate::common::{args, artifacts, assert_still_serving, ctx, host, load, tight_host};

async fn sum_error(a: serde_json::Value) -> CallErrorKind {
    let calc = load(host(), artifacts::CALC).await;
    let err = calc
        .call(&ctx(), "calculate_sum", args(a))
        .await
        .expect_err("bad arguments");
    assert_eq!(
        (err.plugin.as_str(), err.method.as_str()),
        ("calc", "calculate_sum")
    );
    err.kind
}

fn invalid(kind: CallErrorKind) -> String {
    match kind {
        CallErrorKind::InvalidArguments { message } => message,
        other => panic!("not invalid-arguments: {other:?}"),
    }
}

#[tokio::test]
async fn missing_extra_and_mistyped_arguments() {
    assert_eq!(
        invalid(sum_error(json!({"num1": 1})).await),
        "missing required argument `num2`"
    );
    assert_eq!(
        invalid(sum_error(json!({"num1": 1, "num2": 2, "num3": 3})).await),
        "unexpected argument \"num3\""
    );
    let msg = invalid(sum_error(json!({"num1": "one", "num2": 2})).await);
    assert!(msg.starts_with("argument `num1` (str):"), "{msg}");
    let msg = invalid(sum_error(json!({"num1": 1.5, "num2": 2})).await);
    assert!(msg.starts_with("argument `num1` (float):"), "{msg}");
    assert_still_serving(host()).await;
}

#[tokio::test]
async fn arguments_must_be_an_object() {
    let calc = load(host(), artifacts::CALC).await;
    let err = calc
        .call(&ctx(), "calculate_sum", args(json!([1, 2])))
        .await
        .unwrap_err();
    assert!(invalid(err.kind).contains("not list"));
}

#[tokio::test]
async fn unknown_method() {
    let calc = load(host(), artifacts::CALC).await;
    let err = calc
        .call(&ctx(), "calculate_product", args(json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.kind, CallErrorKind::UnknownMethod);
    assert_eq!(
        err.to_string(),
        "plugin `calc`, method `calculate_product`: no such method"
    );
    assert_still_serving(host()).await;
}

#[tokio::test]
async fn the_plugins_own_failures_come_back_for_the_ai() {
    let err = sum_error(json!({"num1": i64::MAX, "num2": 1})).await;
    let CallErrorKind::Failed { message } = err else {
        panic!("not failed: {err:?}")
    };
    assert!(message.contains("overflows"), "{message}");

    let kb = load(host(), artifacts::KNOWLEDGE).await;
    let err = kb
        .call(
            &ctx(),
            "search_knowledge_base",
            args(json!({"query": "fuel", "max_results": 9})),
        )
        .await
        .unwrap_err();
    assert!(invalid(err.kind).contains("between 1 and 5"));
    assert_still_serving(host()).await;
}

#[tokio::test]
async fn oversized_arguments_are_refused_before_the_plugin_runs() {
    let kb = load(tight_host(), artifacts::KNOWLEDGE).await;
    let query = "fuel ".repeat(300_000);
    let err = kb
        .call(
            &ctx(),
            "search_knowledge_base",
            args(json!({ "query": query })),
        )
        .await
        .unwrap_err();
    let CallErrorKind::LimitExceeded { limit, message } = err.kind else {
        panic!("not a limit: {err:?}")
    };
    assert_eq!(limit, LimitKind::ValueSize);
    assert!(
        message.contains("more than the limit of 1048576 bytes"),
        "{message}"
    );
    assert_still_serving(tight_host()).await;
}
