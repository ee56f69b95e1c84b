//! `POST /v1/runs`: runs Python code with the enabled plugins' methods.
//! Answers with the outcome (the JSON of `sandwit run --json`), or, for
//! `Accept: text/event-stream`, streams the run's live events and ends with
//! the outcome. A client that goes away cancels its run.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use sandwit::json::value_from_json;
use sandwit::{
    AgentCtx, Cancel, Interpreter, InterpreterKind, LiveEvent, RunError, RunLimits, RunOptions,
    RunOutcome, RunPlace, RunStatus,
};
use serde::Deserialize;
use serde_json::Value as Json;
use tokio::sync::{mpsc, oneshot};
use utoipa::ToSchema;

use crate::answer::Holding;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::{Shared, Work};
use crate::wire::Outcome;

/// The body of a run request.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The Python code to run.
    code: String,
    /// The chat the run is for (not empty): plugins' lifecycle hooks choose
    /// its methods by it, and stored data is kept per chat.
    #[schema(min_length = 1, max_length = 256)]
    chat_key: String,
    /// The user the run is for.
    #[schema(max_length = 256)]
    user_id: Option<String>,
    /// Only these plugins' methods (ids); all enabled ones when absent.
    plugins: Option<Vec<String>>,
    /// Lower limits than the server's.
    limits: Option<LimitsRequest>,
    /// Values the code finds as variables of these names (ASCII
    /// identifiers, not keywords nor a method's name): JSON values, as Python's `None`,
    /// `bool`, `int`, `float`, `str`, `list` and `dict`. Bad names or values
    /// past the server's value limits make an `InvalidInput` error outcome.
    #[schema(value_type = Option<Object>)]
    inputs: Option<serde_json::Map<String, Json>>,
    /// The interpreter to run in; the server's default when absent
    /// (`GET /readyz` lists those loaded). Asking for one the server did
    /// not load is 400 `interpreter-not-loaded`.
    interpreter: Option<InterpreterKind>,
    /// The session of the chat to run in (1 to 64 ASCII letters, digits,
    /// `-`, `_`, `.`): the run finds the globals, imports and objects the
    /// session's last run left, and the first run starts it. Stored after
    /// each run that ends well, so any replica over the same store resumes
    /// it, in either interpreter (each has its own sessions); a run that
    /// fails leaves the last good state. See docs/SERVICE.md, "Sessions".
    #[schema(min_length = 1, max_length = 64)]
    session: Option<String>,
    /// The client's own functions for this run: the code calls each as
    /// `name(*args, **kwargs)`, and a call pauses the run (status
    /// `paused`, `paused.plugin` `client`, `paused.args` `{"args": [...],
    /// "kwargs": {...}}`) until `POST /v1/runs/{token}:resume` answers it
    /// with a `result` or a `raise`. Names that are not identifiers, or are
    /// a method's, make an `InvalidFunction` error outcome.
    #[schema(max_items = 64)]
    functions: Option<Vec<FunctionRequest>>,
}

/// A function the client answers (`functions` of a run).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FunctionRequest {
    /// The name the code calls it by: a Python identifier.
    #[schema(min_length = 1, max_length = 64)]
    name: String,
    /// What the function does, as the code's `help()` shows it.
    #[schema(max_length = 4096)]
    description: Option<String>,
}

/// An exception the client's function raised (`raise` of a resume).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RaiseRequest {
    /// Its type's name (`ValueError`, `httpx.HTTPError`): a builtin
    /// exception's raises that class in the code, any other a
    /// `PluginError` subclass of that name.
    #[schema(min_length = 1, max_length = 128)]
    r#type: String,
    /// Its message.
    message: String,
}

/// Limits a request may lower (never raise) below the server's.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsRequest {
    /// Fuel for the run: a deterministic CPU budget, about
    /// `FUEL_PER_CPU_SECOND` (8e9) units a CPU-second. The server's has none
    /// unless `--fuel` set one: the time limit bounds busy code.
    fuel: Option<u64>,
    /// Wall-clock milliseconds for the run.
    time_ms: Option<u64>,
    /// Method calls the run may make.
    max_calls: Option<u32>,
}

/// The run's limits: the server's, lowered as the request asks; asking for
/// more than the server allows is an error naming the limit.
fn limits(server: &RunLimits, asked: Option<LimitsRequest>) -> Result<RunLimits, ApiError> {
    let mut limits = server.clone();
    let Some(asked) = asked else {
        return Ok(limits);
    };
    let over = |name: &str, asked: u128, max: u128| {
        ApiError::bad_request(
            "limit-too-high",
            format!("limits.{name} {asked} is above the server's {max}"),
        )
    };
    if let Some(fuel) = asked.fuel {
        if let Some(max) = server.fuel.filter(|&max| fuel > max) {
            return Err(over("fuel", fuel.into(), max.into()));
        }
        limits.fuel = Some(fuel);
    }
    if let Some(ms) = asked.time_ms {
        if u128::from(ms) > server.time.as_millis() {
            return Err(over("time_ms", ms.into(), server.time.as_millis()));
        }
        limits.time = Duration::from_millis(ms);
    }
    if let Some(calls) = asked.max_calls {
        if calls > server.max_calls {
            return Err(over("max_calls", calls.into(), server.max_calls.into()));
        }
        limits.max_calls = calls;
    }
    Ok(limits)
}

/// Cancels its run when dropped before the run finished: the request's
/// future or the event stream was dropped, so the client went away.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A run ready to start: its place in the host's run queue, inputs and
/// cancel handle.
struct Prepared {
    state: Shared,
    place: RunPlace,
    id: u64,
    interpreter: Interpreter,
    ctx: AgentCtx,
    plugins: sandwit::Toolbox,
    work: Work,
    options: RunOptions,
}

impl Prepared {
    /// Runs on its own task (so that it ends, and is counted, whatever the
    /// connection does) and gives back the outcome, the refusal if the
    /// host's run queue refused the run ([`crate::state::State::refusal`]),
    /// and the run's place in the queue to hold while the answer goes out.
    async fn run(self) -> Ended {
        let Prepared {
            state,
            place,
            id,
            interpreter,
            ctx,
            plugins,
            work,
            options,
        } = self;
        let task = tokio::spawn(async move {
            let (outcome, place) = state
                .run_registered(id, place, &interpreter, &ctx, &plugins, &work, &options)
                .await;
            Ended {
                outcome: render(&outcome),
                refused: state.refusal(&outcome),
                place: Some(place),
            }
        });
        task.await.unwrap_or_else(|e| Ended {
            outcome: server_error(e.to_string()),
            refused: None,
            place: None,
        })
    }
}

/// How a run ended, as its answer needs it.
struct Ended {
    outcome: Outcome,
    /// The host's run queue refused it: the code never ran.
    refused: Option<ApiError>,
    /// Its place in the host's run queue, to hold while the answer goes
    /// out (none if its task failed).
    place: Option<RunPlace>,
}

fn render(outcome: &RunOutcome) -> Outcome {
    crate::outcome::outcome_body(outcome, &mut crate::outcome::inline_image)
        .expect("inline images always render")
}

/// The outcome of a run whose task failed (it panicked): an error outcome
/// naming a `ServerError`, with nothing else to report.
fn server_error(message: String) -> Outcome {
    Outcome {
        status: RunStatus::Error,
        result: None,
        stdout: String::new(),
        stderr: String::new(),
        error: Some(RunError {
            type_name: "ServerError".to_string(),
            message,
            line: None,
            traceback: String::new(),
        }),
        limit: None,
        files: Vec::new(),
        events: Vec::new(),
        handoff: None,
        fuel_used: 0,
        cost: 0.0,
        ms: 0.0,
        queued_ms: 0.0,
        session: None,
        paused: None,
    }
}

/// Runs Python code with the enabled plugins' methods (those the chat's
/// lifecycle hooks make available). Answers the outcome as JSON, or with
/// `Accept: text/event-stream` streams `stdout`, `stderr` and `event`
/// events and ends with one `outcome`. A client that goes away cancels the
/// run.
#[utoipa::path(
    post, path = "/v1/runs", tag = "runs", request_body = RunRequest,
    security(("token" = [])),
    responses(
        (status = 200, description = "The outcome (whatever the code did)",
         content((Outcome = "application/json"),
                 (String = "text/event-stream"))),
        (status = 400, description = "A limit above the server's, an empty chat key, or an \
                                      interpreter the server did not load",
         body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = ErrorBody),
        (status = 404, description = "A plugin asked for is not enabled",
         body = ErrorBody),
        (status = 408, description = "The exchange outlasted its time limit; the run is cancelled",
         body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "The body is not a run request",
         body = ErrorBody),
        (status = 500, description = "A plugin's lifecycle hook failed",
         body = ErrorBody),
        (status = 503, description = "Queue full, no slot in time, or shutting down",
         body = ErrorBody),
    )
)]
pub async fn run(
    State(state): State<Shared>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<axum::Json<RunRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(request) = body?;
    if state.shutting_down.load(Ordering::SeqCst) {
        return Err(crate::state::shutting_down());
    }
    let interpreter = state.interpreters.choose(request.interpreter)?;
    let limits = limits(&interpreter.limits(state.host.run_limits()), request.limits)?;
    let chat = (request.chat_key.as_str(), request.user_id);
    let (ctx, place, plugins, id, cancel) =
        admit(&state, &caller, chat, request.plugins.as_deref()).await?;
    let inputs = request.inputs.unwrap_or_default().into_iter();
    let mut options = RunOptions::new()
        .limits(limits)
        .cancel(cancel.clone())
        .inputs(inputs.map(|(name, json)| (name, value_from_json(json))));
    if let Some(session) = request.session {
        options = options.session(session);
    }
    if let Some(functions) = request.functions {
        if functions.len() > 64 {
            return Err(ApiError::bad_request(
                "bad-request",
                "a run takes at most 64 functions",
            ));
        }
        options = options.functions(
            functions
                .into_iter()
                .map(|f| sandwit::ClientFunction::new(f.name, f.description.unwrap_or_default())),
        );
    }
    let streaming = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    let prepared = |options| Prepared {
        state: state.clone(),
        place,
        id,
        interpreter,
        ctx,
        plugins,
        work: Work::Run(request.code),
        options,
    };
    let guard = CancelOnDrop(cancel);
    if !streaming {
        return answered(prepared(options), guard).await;
    }
    // At most `EVENTS_WAITING` events wait for the client: one that falls
    // further behind has its run cancelled, so a client that stops reading
    // holds no more than that of the server's memory.
    let (tx, rx) = mpsc::channel::<SseEvent>(EVENTS_WAITING);
    let calls = tx.clone();
    let behind = Arc::new(AtomicBool::new(false));
    let (fell_behind, cancel) = (behind.clone(), guard.0.clone());
    let options = options.on_event(move |event: &LiveEvent| {
        let name = match event {
            LiveEvent::Stdout { .. } => "stdout",
            LiveEvent::Stderr { .. } => "stderr",
            LiveEvent::Event(_) => "event",
        };
        if fell_behind.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(sse) = SseEvent::default().event(name).json_data(event)
            && let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(sse)
        {
            fell_behind.store(true, Ordering::SeqCst);
            tracing::warn!(
                run = id,
                "the client of a streamed run fell behind: run cancelled"
            );
            cancel.cancel();
        }
    });
    let run = prepared(options);
    let (outcome_tx, outcome_rx) = oneshot::channel();
    tokio::spawn(async move {
        // A run the host's queue refused ends the stream as any run does,
        // with its outcome (its `queue` limit): the stream has begun.
        let ended = run.run().await;
        // A run paused at one of the client's functions says so first, as
        // the call to answer: `{name, args, kwargs, call_id}`.
        if let Some(call) = client_call(&ended.outcome)
            && let Ok(sse) = SseEvent::default().event("call").json_data(call)
        {
            let _ = calls.send(sse).await;
        }
        drop(calls);
        if let Ok(sse) = SseEvent::default()
            .event("outcome")
            .json_data(ended.outcome)
        {
            let _ = outcome_tx.send((sse, ended.place));
        }
    });
    let feed = Feed {
        rx,
        outcome: Some(outcome_rx),
        _place: None,
        tail: Vec::new(),
        behind,
        _guard: guard,
    };
    // The feed holds the run's place once the run is over, until its last
    // event has been handed to the connection.
    let answer = Holding {
        body: Sse::new(events(feed)),
        hold: (),
    };
    Ok(answer.into_response())
}

/// The enabled plugins a run asked for (`ids`), else all of them; an id
/// that names no enabled plugin is a 404 naming it.
fn chosen_plugins(state: &Shared, ids: Option<&[String]>) -> Result<sandwit::Toolbox, ApiError> {
    let catalog = state.catalog.read().expect("catalog lock");
    let enabled = catalog.enabled();
    let Some(ids) = ids else {
        return Ok(enabled.clone());
    };
    if let Some(missing) = ids.iter().find(|id| catalog.plugin(id).is_none()) {
        return Err(ApiError::not_found(
            "unknown-plugin",
            format!("no enabled plugin `{missing}`"),
        ));
    }
    Ok(enabled.filter(|provider, _| ids.iter().any(|id| id == provider)))
}

/// The most events of a streamed run that wait for its client; past them
/// the run is cancelled.
const EVENTS_WAITING: usize = 1024;

/// What a streamed run's client is sent: its live events, then, if it fell
/// behind, an `error` event saying so, then the outcome.
struct Feed {
    rx: mpsc::Receiver<SseEvent>,
    /// The outcome, until it arrives.
    outcome: Option<oneshot::Receiver<(SseEvent, Option<RunPlace>)>>,
    /// The run's place in the host's run queue, once the run is over.
    _place: Option<RunPlace>,
    /// What follows the live events, last first.
    tail: Vec<SseEvent>,
    /// Whether the client fell more than [`EVENTS_WAITING`] events behind.
    behind: Arc<AtomicBool>,
    /// Cancels the run if the stream is dropped before it ended.
    _guard: CancelOnDrop,
}

impl Feed {
    async fn next(&mut self) -> Option<SseEvent> {
        if let Some(outcome) = &mut self.outcome {
            tokio::select! {
                // Events first: every event of the run was sent before its
                // outcome, and goes out before it.
                biased;
                Some(event) = self.rx.recv() => return Some(event),
                outcome = outcome => {
                    self.outcome = None;
                    self.rx.close();
                    if let Ok((outcome, place)) = outcome {
                        self.tail.push(outcome);
                        self._place = place;
                    }
                    if self.behind.load(Ordering::SeqCst) {
                        self.tail.push(behind_event());
                    }
                }
            }
        }
        // Closed: what is left of the live events, then the tail.
        match self.rx.recv().await {
            Some(event) => Some(event),
            None => self.tail.pop(),
        }
    }
}

/// The event that tells a client it fell behind and its run was cancelled.
fn behind_event() -> SseEvent {
    let body = ErrorBody {
        error: "client-too-slow".to_string(),
        message: format!(
            "the client fell more than {EVENTS_WAITING} events behind the run; the run was \
             cancelled"
        ),
    };
    SseEvent::default()
        .event("error")
        .json_data(body)
        .expect("an error body is JSON")
}

/// The call a streamed run's `outcome` waits at, as its `call` event
/// gives it, if it paused at one of the client's functions.
fn client_call(outcome: &crate::wire::Outcome) -> Option<serde_json::Value> {
    let paused = outcome.paused.as_ref()?;
    if paused.plugin != sandwit::CLIENT_FUNCTIONS {
        return None;
    }
    Some(serde_json::json!({
        "name": paused.method,
        "args": paused.args.get("args").cloned().unwrap_or_else(|| serde_json::json!([])),
        "kwargs": paused.args.get("kwargs").cloned().unwrap_or_else(|| serde_json::json!({})),
        "call_id": paused.token,
    }))
}

/// The stream of a run's events, ending after its outcome; dropping it
/// (the client went away) cancels the run.
fn events(feed: Feed) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok(event), feed))
    })
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    /// What a client gets: the events waiting, then, if it fell behind, the
    /// `client-too-slow` error, then the outcome; and the run cancelled
    /// once the stream is dropped.
    async fn sent(behind: bool) -> (Vec<String>, Cancel) {
        let (tx, rx) = mpsc::channel(EVENTS_WAITING);
        let (outcome_tx, outcome_rx) = oneshot::channel();
        let cancel = Cancel::new();
        for i in 0..3 {
            tx.try_send(SseEvent::default().event("stdout").data(format!("{i}")))
                .unwrap();
        }
        outcome_tx
            .send((SseEvent::default().event("outcome").data("{}"), None))
            .unwrap_or_else(|_| panic!("the feed's receiver is alive"));
        let feed = Feed {
            rx,
            outcome: Some(outcome_rx),
            _place: None,
            tail: Vec::new(),
            behind: Arc::new(AtomicBool::new(behind)),
            _guard: CancelOnDrop(cancel.clone()),
        };
        let events = events(feed)
            .map(|event| format!("{:?}", event.unwrap()))
            .collect()
            .await;
        (events, cancel)
    }

    #[tokio::test]
    async fn a_client_that_fell_behind_is_told_before_the_outcome() {
        let (events, cancel) = sent(false).await;
        assert_eq!(events.len(), 4, "{events:?}");
        assert!(events[3].contains("outcome"), "{events:?}");
        assert!(cancel.is_cancelled());

        let (events, _) = sent(true).await;
        assert_eq!(events.len(), 5, "{events:?}");
        assert!(events[0].contains("stdout"), "{events:?}");
        assert!(events[3].contains("client-too-slow"), "{events:?}");
        assert!(events[4].contains("outcome"), "{events:?}");
    }
}

/// `POST /v1/runs/{token}:resume` ([`resume`]) or `:discard`
/// ([`discard`]).
pub async fn action(
    State(state): State<Shared>,
    caller: Caller,
    axum::extract::Path(target): axum::extract::Path<String>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    use axum::extract::FromRequest;
    if let Some(token) = target.strip_suffix(":resume") {
        let body = axum::Json::from_request(request, &state).await;
        return resume(state, caller, token, body).await;
    }
    if let Some(token) = target.strip_suffix(":discard") {
        let body = axum::Json::from_request(request, &state).await;
        return discard(state, caller, token, body).await;
    }
    Err(ApiError::not_found(
        "not-found",
        format!("no endpoint `/v1/runs/{target}`: POST /v1/runs/{{token}}:resume or :discard"),
    ))
}

/// The body of a discard: the chat the run was paused in.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscardRequest {
    /// The chat the run was paused in.
    #[schema(min_length = 1, max_length = 256)]
    chat_key: String,
    /// The user the run is for.
    #[schema(max_length = 256)]
    user_id: Option<String>,
}

/// A discarded run: the call it waited at, never made.
#[derive(serde::Serialize, ToSchema)]
pub struct Discarded {
    /// The call the run waited at.
    pub discarded: crate::wire::Paused,
}

/// `POST /v1/runs/{token}:discard`: ends the run that paused with `token`
/// without resuming it, on any replica over the same store and session
/// key: the answer names the call it waited at, which is never made. The
/// token is spent and the chat's place for a paused run freed (a person
/// who closed the question, a client that will not answer its call).
#[utoipa::path(
    post, path = "/v1/runs/{token}:discard", tag = "runs", security(("token" = [])),
    params(("token" = String, Path, description = "The paused run's token")),
    request_body = DiscardRequest,
    responses(
        (status = 200, description = "The run is ended", body = Discarded),
        (status = 400, description = "An empty chat key", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = ErrorBody),
        (status = 404, description = "No paused run of this chat has the token (forged, \
                                      spent, expired or another chat's)",
         body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "The body is not a discard request", body = ErrorBody),
    )
)]
pub async fn discard(
    state: Shared,
    caller: Caller,
    token: &str,
    body: Result<axum::Json<DiscardRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(request) = body?;
    let ctx = crate::chat::agent_ctx(&caller, &request.chat_key, request.user_id, "bad-request")?;
    let interpreter = state.interpreters.choose(Some(InterpreterKind::Small))?;
    match interpreter.discard(&ctx, token).await {
        Ok(paused) => {
            tracing::info!(
                plugin = paused.plugin,
                method = paused.method,
                "paused run discarded"
            );
            let discarded = crate::wire::Paused {
                plugin: paused.plugin,
                method: paused.method,
                args: sandwit::json::value_to_json(&paused.args, sandwit::json::BytesAs::Base64),
                token: paused.token,
                expires_at: paused.expires_at,
            };
            Ok(axum::Json(Discarded { discarded }).into_response())
        }
        Err(message) => Err(ApiError::not_found("no-paused-run", message)),
    }
}

/// The body of a resume: the chat the run was paused in and exactly one
/// answer.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// The chat the run was paused in.
    #[schema(min_length = 1, max_length = 256)]
    chat_key: String,
    /// The user the run is for.
    #[schema(max_length = 256)]
    user_id: Option<String>,
    /// Only these plugins' methods (ids); all enabled ones when absent.
    plugins: Option<Vec<String>>,
    /// `true`: make the paused call now, as if it had not paused.
    approve: Option<bool>,
    /// Refuse the call: the code's call raises `PluginError` (kind
    /// `denied`) with this reason.
    deny: Option<String>,
    /// Do not make the call: it returns this JSON value to the code
    /// (`null` too: the call returns `None`).
    #[schema(value_type = Option<Object>)]
    #[serde(default, deserialize_with = "present")]
    result: Option<Json>,
    /// Do not make the call: it raises this exception in the code (the
    /// answer of a client function that failed).
    r#raise: Option<RaiseRequest>,
}

/// A field that is there, `null` or not: `result: null` is the answer
/// `None`, where an absent `result` is no answer.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Json>, D::Error> {
    Json::deserialize(deserializer).map(Some)
}

/// `POST /v1/runs/{token}:resume`: resumes the run that paused with
/// `token` (its outcome's `paused.token`) with a person's answer, on any
/// replica over the same store and session key. The code runs again to the
/// paused call without making any call twice, then goes on; the answer is
/// the run's outcome, as for `POST /v1/runs`. A token resumes once; a
/// forged, spent, expired or other chat's token gives an error outcome of
/// type `ResumeRefused`.
#[utoipa::path(
    post, path = "/v1/runs/{token}:resume", tag = "runs", security(("token" = [])),
    params(("token" = String, Path, description = "The paused run's token")),
    request_body = ResumeRequest,
    responses(
        (status = 200, description = "The outcome (whatever the code did)", body = Outcome),
        (status = 400, description = "Not exactly one of approve, deny, result and raise, \
                                      or an empty chat key",
         body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = ErrorBody),
        (status = 404, description = "Not `{token}:resume`, or a plugin asked for is not enabled",
         body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "The body is not a resume request", body = ErrorBody),
        (status = 500, description = "A plugin's lifecycle hook failed", body = ErrorBody),
        (status = 503, description = "Queue full, no slot in time, or shutting down",
         body = ErrorBody),
    )
)]
pub async fn resume(
    state: Shared,
    caller: Caller,
    token: &str,
    body: Result<axum::Json<ResumeRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(request) = body?;
    if state.shutting_down.load(Ordering::SeqCst) {
        return Err(crate::state::shutting_down());
    }
    let answer = match (
        request.approve,
        request.deny,
        request.result,
        request.r#raise,
    ) {
        (Some(true), None, None, None) => sandwit::Resume::Approve,
        (None, Some(reason), None, None) => sandwit::Resume::Deny(reason),
        (None, None, Some(value), None) => sandwit::Resume::Result(value_from_json(value)),
        (None, None, None, Some(raised)) => sandwit::Resume::Raise {
            name: raised.r#type,
            message: raised.message,
        },
        _ => {
            return Err(ApiError::bad_request(
                "bad-request",
                "give exactly one of `approve: true`, `deny` (a reason), `result` (a value) and \
                 `raise` (a type and message)",
            ));
        }
    };
    let interpreter = state.interpreters.choose(Some(InterpreterKind::Small))?;
    let chat = (request.chat_key.as_str(), request.user_id);
    let (ctx, place, plugins, id, cancel) =
        admit(&state, &caller, chat, request.plugins.as_deref()).await?;
    let options = RunOptions::new().cancel(cancel.clone());
    let prepared = Prepared {
        state: state.clone(),
        place,
        id,
        interpreter,
        ctx,
        plugins,
        work: Work::Resume(token.to_string(), answer),
        options,
    };
    answered(prepared, CancelOnDrop(cancel)).await
}

/// What a run request goes through before its run: the context of its
/// chat (`chat_key`, user id), the `plugins` asked for, a place in the
/// host's run queue (503 at once without one: the run waits for its slot
/// in the host, and the answer holds the place until it has gone out,
/// `crate::answer`), the methods the chat sees (as `sandwit run` gives
/// them: a plugin's lifecycle hooks may leave some out; asked holding the
/// place, so the hooks' instances are bounded by the run queue as runs
/// are), and the run's id and cancel handle.
async fn admit(
    state: &Shared,
    caller: &Caller,
    (chat_key, user_id): (&str, Option<String>),
    plugins: Option<&[String]>,
) -> Result<(AgentCtx, RunPlace, sandwit::Toolbox, u64, Cancel), ApiError> {
    let ctx = crate::chat::agent_ctx(caller, chat_key, user_id, "bad-request")?;
    let plugins = chosen_plugins(state, plugins)?;
    let place = state.take_place()?;
    let plugins = plugins.in_context(&ctx).await.methods;
    let (id, cancel) = state.register_run(&caller.name);
    Ok((ctx, place, plugins, id, cancel))
}

/// The JSON answer of `prepared`'s run, once it ended (`guard` cancels it
/// if the request goes away first).
async fn answered(prepared: Prepared, guard: CancelOnDrop) -> Result<Response, ApiError> {
    let ended = prepared.run().await;
    // Finished: cancelling it now does nothing.
    drop(guard);
    if let Some(refused) = ended.refused {
        return Err(refused);
    }
    let answer = Holding {
        body: axum::Json(ended.outcome),
        hold: ended.place,
    };
    Ok(answer.into_response())
}
