//! The host's trace: `tracing` spans of runs, method calls, the host calls
//! plugins make and the execution controls' decisions, all under the
//! target [`TARGET`] at `DEBUG` level, for an embedder to export
//! (`sandwit --otlp-endpoint` sends them over OTLP).
//!
//! | span | for | fields |
//! | --- | --- | --- |
//! | `sandwit.run` | a run of either interpreter | `interpreter` (`small`, `scientific`); when it ends `outcome` (the run's status: `ok`, `error`, `agent_handoff`, `limit_exceeded`, `cancelled`), `limit` (the limit that stopped it, if one did) and `fuel` (used) |
//! | `sandwit.plugin_call` | a call of a plugin's or host method, in a run or direct | `plugin`, `method`, `kind` (`tool`, `agent`, ...); when it ends `outcome` (`ok`, or the error's kind: `failed`, `limit_exceeded`, `unavailable`, ...), `limit` (for `limit_exceeded`) and `fuel` |
//! | `sandwit.host_call` | a service call a plugin makes in its call | `capability` (`store.get`, `store.set`, `store.delete`, `store.list_keys`, `config.get`, `chat.send_text`, `chat.send_image`, `chat.push_system`, `http.request`), for a granted HTTP request `grant` (the policy's grant it went through, e.g. `http:api.example.com`); when it ends `outcome` (`ok`, or `denied`, `invalid`, `limit_exceeded`, `unavailable`, `failed`) |
//! | `sandwit.control` | an execution control's decision on a call (no duration) | `plugin`, `method`, `control` (`rate_limit`, `breaker`, `budget`, `approval`), `decision` (`rate_limited`, `breaker_open`, `breaker_tripped`, `budget_exceeded`, `refused`, `approved`) |
//!
//! A run's method calls are children of its span; a call's host calls and
//! control decisions are children of the call's. A span that failed has
//! `otel.status_code = "error"`.
//!
//! Every field holds a name the host, the plugin's manifest or the
//! operator's policy chose, a kind or a count: never a call's arguments or
//! result, a store key or value, a URL (only the policy's grant it matched),
//! a header or body, a message, configuration, a chat key or a user id,
//! since what the code or a plugin passes may be secret. The `tracing`
//! events the host logs inside these spans may quote more (a refused
//! request, a plugin's log line): an exporter takes the spans of [`TARGET`]
//! alone, not the events.
//!
//! With no subscriber interested in them (none installed, or filtered out)
//! a span is a disabled handle: nothing is recorded or allocated.

use tracing::Span;
use tracing::field::Empty;

use crate::bindings::wit::ServiceError;
use sandwit_contract::error::CallErrorKind;
use sandwit_contract::limits::LimitKind;
use sandwit_contract::types::MethodKind;

/// The `tracing` target of the host's trace spans.
pub const TARGET: &str = "sandwit::trace";

/// A span for a run in `interpreter`; end it with [`run_ended`].
pub(crate) fn run(interpreter: &'static str) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "sandwit.run",
        interpreter,
        outcome = Empty,
        limit = Empty,
        fuel = Empty,
        otel.status_code = Empty,
    )
}

/// Records how a run ended: its status (`failed` for an error or a limit),
/// the limit that stopped it and the fuel it used.
pub(crate) fn run_ended(
    span: &Span,
    (status, failed): (&'static str, bool),
    limit: Option<LimitKind>,
    fuel: u64,
) {
    span.record("outcome", status);
    if let Some(limit) = limit {
        span.record("limit", limit.as_str());
    }
    span.record("fuel", as_i64(fuel));
    if failed {
        span.record("otel.status_code", "error");
    }
}

/// A span for a call of `plugin`'s `method`, of `kind`; end it with
/// [`call_ended`].
pub(crate) fn plugin_call(plugin: &str, method: &str, kind: MethodKind) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "sandwit.plugin_call",
        plugin,
        method,
        kind = kind.as_str(),
        outcome = Empty,
        limit = Empty,
        fuel = Empty,
        otel.status_code = Empty,
    )
}

/// Records how a method call ended: its error's kind, if it failed, and
/// the fuel it used.
pub(crate) fn call_ended(span: &Span, error: Option<&CallErrorKind>, fuel: u64) {
    span.record("outcome", error.map_or("ok", error_name));
    if let Some(CallErrorKind::LimitExceeded { limit, .. }) = error {
        span.record("limit", limit.as_str());
    }
    span.record("fuel", as_i64(fuel));
    if error.is_some() {
        span.record("otel.status_code", "error");
    }
}

/// `fuel` as OTLP's integers are (signed): a `u64` field would be exported
/// as text.
fn as_i64(fuel: u64) -> i64 {
    i64::try_from(fuel).unwrap_or(i64::MAX)
}

/// An error kind's name, as its JSON's `type` spells it.
fn error_name(kind: &CallErrorKind) -> &'static str {
    match kind {
        CallErrorKind::UnknownMethod => "unknown_method",
        CallErrorKind::InvalidArguments { .. } => "invalid_arguments",
        CallErrorKind::Failed { .. } => "failed",
        CallErrorKind::Denied { .. } => "denied",
        CallErrorKind::LimitExceeded { .. } => "limit_exceeded",
        CallErrorKind::Trapped { .. } => "trapped",
        CallErrorKind::BadResult { .. } => "bad_result",
        CallErrorKind::Unavailable { .. } => "unavailable",
        CallErrorKind::NotApproved { .. } => "not_approved",
    }
}

/// What a host call of a plugin answers: the plugin's result, or a trap.
type Answer<T> = wasmtime::Result<Result<T, ServiceError>>;

/// Makes the host call `capability` (`store.get`, ...) in a span of its own.
pub(crate) async fn host_call<T>(
    capability: &'static str,
    call: impl Future<Output = Answer<T>>,
) -> Answer<T> {
    use tracing::Instrument;
    let span = host_call_span(capability);
    let answer = call.instrument(span.clone()).await;
    host_call_ended(&span, answered(&answer));
    answer
}

/// [`host_call`] for a host call that does not wait.
pub(crate) fn host_call_now<T>(
    capability: &'static str,
    call: impl FnOnce() -> Answer<T>,
) -> Answer<T> {
    let span = host_call_span(capability);
    let answer = span.in_scope(call);
    host_call_ended(&span, answered(&answer));
    answer
}

/// A span for an outbound HTTP request, which `grant` let through (`None`:
/// none did); end it with [`host_call_ended`].
pub(crate) fn http_request(grant: Option<&str>) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "sandwit.host_call",
        capability = "http.request",
        grant,
        outcome = Empty,
        otel.status_code = Empty,
    )
}

fn host_call_span(capability: &'static str) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "sandwit.host_call",
        capability,
        outcome = Empty,
        otel.status_code = Empty,
    )
}

/// The outcome of a host call's answer.
fn answered<T>(answer: &Answer<T>) -> &'static str {
    match answer {
        Ok(Ok(_)) => "ok",
        Ok(Err(ServiceError::Denied(_))) => "denied",
        Ok(Err(ServiceError::Invalid(_))) => "invalid",
        Ok(Err(ServiceError::LimitExceeded(_))) => "limit_exceeded",
        Ok(Err(ServiceError::Unavailable(_))) => "unavailable",
        Err(_) => "failed",
    }
}

/// Records a host call's outcome: `ok`, or why it failed.
pub(crate) fn host_call_ended(span: &Span, outcome: &'static str) {
    span.record("outcome", outcome);
    if outcome != "ok" {
        span.record("otel.status_code", "error");
    }
}

/// Records that `control` (`rate_limit`, ...) decided `decision`
/// (`rate_limited`, ...) about a call of `plugin`'s `method`: a span without
/// duration, a child of the call's.
pub(crate) fn control(plugin: &str, method: &str, control: &'static str, decision: &'static str) {
    let _decided = tracing::debug_span!(
        target: TARGET,
        "sandwit.control",
        plugin,
        method,
        control,
        decision,
    );
}
