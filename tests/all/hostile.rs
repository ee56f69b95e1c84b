//! A hostile plugin that traps, spins, sleeps, hogs memory and lies: each
//! gives a clear error naming the plugin, method and limit, and the host goes
//! on serving.

use std::time::Duration;

use sandwit::{CallError, CallErrorKind, CallLimits, Host, LimitKind, Metering};
use serde_json::json;

use crate::common::{
    args, artifacts, assert_ended_soon_after, assert_still_serving, cache_dir, ctx, load, logs,
    tight_host,
};

async fn call_hostile(host: &Host, method: &str, a: serde_json::Value) -> sandwit::CallReport {
    let hostile = load(host, artifacts::HOSTILE).await;
    let budget = sandwit::Budget::from_limits(host.limits());
    hostile.call_within(&ctx(), method, args(a), budget).await
}

async fn hostile_error(host: &Host, method: &str, a: serde_json::Value) -> CallError {
    let err = call_hostile(host, method, a)
        .await
        .result
        .expect_err("the hostile method must fail");
    assert_eq!(
        (err.plugin.as_str(), err.method.as_str()),
        ("hostile", method)
    );
    err
}

fn limit(err: &CallError) -> LimitKind {
    match &err.kind {
        CallErrorKind::LimitExceeded { limit, .. } => *limit,
        other => panic!("not a limit: {other:?}"),
    }
}

#[tokio::test]
async fn a_trap_is_reported_with_what_the_plugin_printed() {
    let report = call_hostile(tight_host(), "trap", json!({})).await;
    let err = report.result.unwrap_err();
    assert!(matches!(err.kind, CallErrorKind::Trapped { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with("plugin `hostile`, method `trap`: trapped"),
        "{message}"
    );
    // One line, for the AI and the embedder: the trap and the panic the
    // plugin printed, not a trap dump.
    assert!(
        !message.contains('\n') && !message.contains("wasm backtrace"),
        "{message}"
    );
    assert!(message.contains("the hostile plugin panics"), "{message}");
    assert!(
        logs(&report.events)
            .iter()
            .any(|l| l.message.contains("the hostile plugin panics")),
        "{:?}",
        report.events
    );
    assert_still_serving(tight_host()).await;
}

#[tokio::test]
async fn an_endless_loop_runs_out_of_fuel() {
    let err = hostile_error(tight_host(), "spin", json!({})).await;
    assert_eq!(limit(&err), LimitKind::Fuel);
    assert!(
        err.to_string()
            .contains("fuel limit exceeded: used all of its 300000000 units"),
        "{err}"
    );
    assert_still_serving(tight_host()).await;
}

fn slow_host() -> Host {
    slow_host_metered(Metering::default())
}

/// The deadline of [`slow_host`]'s calls.
const SLOW_DEADLINE: Duration = Duration::from_millis(300);

fn slow_host_metered(metering: Metering) -> Host {
    Host::builder()
        .cache_dir(cache_dir())
        .metering(metering)
        .limits(CallLimits {
            fuel: None,
            time: SLOW_DEADLINE,
            ..CallLimits::default()
        })
        .build()
        .unwrap()
}

/// Calls a hostile method that must hit [`SLOW_DEADLINE`] on `host`, and
/// checks it ended soon after it (the plugin loaded first, untimed).
async fn hits_the_deadline(host: &Host, method: &str) {
    let hostile = load(host, artifacts::HOSTILE).await;
    let budget = sandwit::Budget::from_limits(host.limits());
    let start = std::time::Instant::now();
    let report = hostile
        .call_within(&ctx(), method, args(json!({})), budget)
        .await;
    let elapsed = start.elapsed();
    let err = report.result.expect_err("the hostile method must fail");
    assert_eq!(limit(&err), LimitKind::Time, "{err}");
    assert_ended_soon_after(elapsed, SLOW_DEADLINE);
}

#[tokio::test]
async fn an_endless_loop_with_fuel_to_spare_hits_the_deadline() {
    let host = slow_host();
    hits_the_deadline(&host, "spin").await;
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn an_endless_loop_hits_the_epoch_deadline_without_fuel() {
    let host = slow_host_metered(Metering::DeadlineOnly);
    hits_the_deadline(&host, "spin").await;
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn sleeping_in_the_host_hits_the_deadline() {
    // The plugin sleeps an hour.
    let host = slow_host();
    hits_the_deadline(&host, "sleep").await;
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn growing_memory_without_end_hits_the_memory_cap() {
    let err = hostile_error(tight_host(), "grow_memory", json!({})).await;
    assert_eq!(limit(&err), LimitKind::Memory, "{err}");
    assert!(
        err.to_string().contains("past the limit of 33554432 bytes"),
        "{err}"
    );
    assert_still_serving(tight_host()).await;
}

#[tokio::test]
async fn a_result_of_the_wrong_kind_is_refused() {
    let err = hostile_error(tight_host(), "wrong_kind", json!({})).await;
    let CallErrorKind::BadResult { message } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(
        message,
        "a result of kind agent from a method declared as tool"
    );
    assert_still_serving(tight_host()).await;
}

#[tokio::test]
async fn an_oversized_result_is_refused() {
    let err = hostile_error(tight_host(), "huge_result", json!({"size": 2 << 20})).await;
    assert_eq!(limit(&err), LimitKind::ValueSize, "{err}");
    assert!(err.to_string().contains("the result takes"), "{err}");
    // Under the cap it is fine.
    let ok = call_hostile(tight_host(), "huge_result", json!({"size": 1000})).await;
    assert!(ok.result.is_ok());
    assert_still_serving(tight_host()).await;
}

#[tokio::test]
async fn a_cyclic_value_is_refused() {
    let err = hostile_error(tight_host(), "cyclic_value", json!({})).await;
    let CallErrorKind::BadResult { message } = &err.kind else {
        panic!("{err}")
    };
    assert!(
        message.contains("malformed value: node 0 refers to node 0"),
        "{message}"
    );
    assert_still_serving(tight_host()).await;
}

#[tokio::test]
async fn the_plugins_own_failure_is_passed_on() {
    let err = hostile_error(tight_host(), "fail", json!({})).await;
    assert_eq!(
        err.kind,
        CallErrorKind::Failed {
            message: "the plugin's own failure".into()
        }
    );
}

#[tokio::test]
async fn a_log_flood_is_capped() {
    let report = call_hostile(tight_host(), "log_flood", json!({})).await;
    assert!(report.result.is_ok(), "{:?}", report.result);
    let lines = logs(&report.events);
    assert_eq!(lines.len(), 1_000);
    assert_eq!(lines[999].message, "line 999");
}

#[tokio::test]
async fn a_reused_instance_slot_holds_nothing_of_the_previous_call() {
    // A host of its own, so consecutive calls reuse the same pooled slot
    // (memory kept resident and reset in place, not unmapped).
    let host = Host::builder().cache_dir(cache_dir()).build().unwrap();
    let hostile = load(&host, artifacts::HOSTILE).await;
    let peek = async |method: &str| match hostile.call(&ctx(), method, args(json!({}))).await {
        Ok(sandwit::MethodResult::Tool(sandwit::Value::Text(text))) => text,
        other => panic!("{method}: {other:?}"),
    };
    let fresh = peek("peek").await;
    assert!(fresh.starts_with("static=0x0 "), "{fresh}");
    let scribbled = peek("scribble").await;
    assert!(scribbled.starts_with("static=0xdead "), "{scribbled}");
    let run: usize = scribbled.rsplit('=').next().unwrap().parse().unwrap();
    assert!(run >= 16 * 65_536, "the marks were written: {scribbled}");
    for _ in 0..3 {
        assert_eq!(peek("peek").await, fresh, "after a scribbling call");
    }
}
