//! `sandwit serve`: the sandwit runtime over HTTP. Runs of AI-written Python
//! (`POST /v1/runs`, as JSON or a stream of server-sent events), direct
//! method calls, tool discovery in the shapes LLM APIs take, health and
//! Prometheus metrics, and the plugins enabled or disabled at runtime.
//! docs/SERVICE.md describes the endpoints.
//!
//! Every `/v1` endpoint and `/metrics` needs a bearer token ([`Tokens`]);
//! `/healthz`, `/readyz` and `/openapi.json` answer anyone. Every exchange
//! is bounded in wall-clock time ([`Service::with_request_timeout`]).
#![deny(missing_docs)]

mod answer;
mod api;
mod auth;
mod body;
mod calls;
mod catalog;
mod chat;
mod config;
mod error;
mod files;
mod health;
mod interpreters;
pub mod mcp;
mod mcp_sessions;
mod metrics;
pub mod outcome;
mod plugins;
mod queue;
mod rate;
mod runs;
mod state;
mod tokens;
mod tools;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRequestParts, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sandwit::Host;

pub use config::Config;
pub use error::ApiError;
pub use interpreters::Interpreters;
pub use mcp_sessions::McpSessionLimits;
pub use rate::DEFAULT_TOKEN_RATE;
pub use sandwit::InterpreterKind;
pub use sandwit_net::RateLimit;
pub use tokens::{NAMESPACE_SEPARATORS, Role, Tokens, token_digest_hex};

use auth::Caller;
use state::{Shared, State};

/// The service: its state, shared by the handlers.
#[derive(Clone)]
pub struct Service {
    state: Shared,
    /// The longest an exchange may take, from its request to its
    /// response's head.
    request_timeout: Duration,
}

/// How long connections get, once the service has shut down its runs, to
/// take their answers (the outcomes of the runs it cancelled among them).
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// What a request's time limit allows beyond waiting for a slot and the
/// longest run or call, by default.
pub const REQUEST_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

impl Service {
    /// The service over `host`, running code in `interpreters` (a
    /// `PythonSandbox` alone: the small interpreter only) with the plugins
    /// of `config.plugin_dir`.
    pub async fn new(
        host: Host,
        interpreters: impl Into<Interpreters>,
        config: Config,
    ) -> anyhow::Result<Self> {
        let request_timeout = host.run_slots().max_wait
            + host.run_limits().time.max(host.limits().time)
            + REQUEST_TIMEOUT_MARGIN;
        let state = Arc::new(State::new(host, interpreters.into(), config).await?);
        State::follow_tool_sources(&state);
        Ok(Service {
            request_timeout,
            state,
        })
    }

    /// Bounds every exchange to `limit`, from its request to its
    /// response's head: past it the client gets 408 `request-timeout` and
    /// its run is cancelled. The default is the queue's wait, plus the
    /// longer of the host's run and call time limits, plus
    /// [`REQUEST_TIMEOUT_MARGIN`]; a streamed run's events, once they
    /// flow, are bounded by the run's own limits.
    pub fn with_request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// The longest an exchange may take.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The routes.
    pub fn router(&self) -> Router {
        let limit = self.request_timeout;
        Router::new()
            .route("/healthz", get(health::healthz))
            .route("/openapi.json", get(api::openapi_json))
            .route("/readyz", get(health::readyz))
            .route("/metrics", get(health::metrics))
            .route("/v1/runs", post(runs::run))
            .route("/v1/runs/{target}", post(runs::action))
            .route("/v1/plugins", get(plugins::list))
            .route("/v1/plugins:reload", post(plugins::reload))
            .route("/v1/plugins/{target}", post(plugins::action))
            .route("/v1/plugins/{id}/methods/{target}", post(calls::call))
            .route("/v1/tools", get(tools::list))
            .route("/v1/tools/{name}/schema", get(tools::schema))
            .route("/v1/tools/{name}/metadata", get(tools::metadata))
            .route("/v1/prompt", get(tools::prompt))
            .route("/v1/chats/{chat}/files", get(files::list))
            .route("/v1/chats/{chat}/files/{*path}", get(files::read))
            .merge(mcp::routes(&self.state))
            .fallback(|| async {
                ApiError::not_found("not-found", "no such endpoint; see docs/SERVICE.md")
            })
            .layer(axum::extract::DefaultBodyLimit::max(
                self.state.config.max_body_bytes,
            ))
            .layer(axum::middleware::from_fn(
                move |request: Request, next: Next| async move {
                    // Dropping the handler's future cancels its run.
                    match tokio::time::timeout(limit, next.run(request)).await {
                        Ok(response) => response,
                        Err(_) => ApiError::new(
                            axum::http::StatusCode::REQUEST_TIMEOUT,
                            "request-timeout",
                            format!(
                                "the exchange took more than the server's limit of {} ms",
                                limit.as_millis()
                            ),
                        )
                        .into_response(),
                    }
                },
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                limit_per_token,
            ))
            // Outside the timeout and the rate limit: a 408 or 429 given
            // before the body was read closes the connection too.
            .layer(axum::middleware::from_fn(body::close_unless_read))
            .with_state(self.state.clone())
    }

    /// Serves on `listener`, each connection within `connections`, until
    /// `shutdown` completes; then tells `stopping` how many runs are in
    /// flight, shuts down as [`Service::shut_down`] does (connections are
    /// still accepted meanwhile, so a client is told rather than refused),
    /// gives the connections open [`SHUTDOWN_DRAIN`] to take their answers,
    /// and returns the runs it cancelled.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        connections: sandwit_net::ConnLimits,
        shutdown: impl Future<Output = ()> + Send + 'static,
        grace: Duration,
        stopping: impl FnOnce(usize) + Send + 'static,
    ) -> Vec<(u64, String)> {
        let service = self.clone();
        let (cancelled_tx, cancelled_rx) = tokio::sync::oneshot::channel();
        let stop = async move {
            shutdown.await;
            stopping(service.in_flight());
            let _ = cancelled_tx.send(service.shut_down(grace).await);
        };
        sandwit_net::serve(listener, self.router(), connections, stop, SHUTDOWN_DRAIN).await;
        cancelled_rx.await.unwrap_or_default()
    }

    /// Stops admitting runs (`/readyz` then answers 503), gives those in
    /// flight `grace` to finish, then cancels the rest. Returns the ids and
    /// callers of the runs it cancelled. The service's run queue is its
    /// host's: this closes the host's run slots for good
    /// ([`Host::close_run_slots`](sandwit::Host::close_run_slots)), so runs
    /// waiting for one end refused, and so does any later run of that host
    /// (an embedder that goes on running code shuts the service down with
    /// a host of its own).
    pub async fn shut_down(&self, grace: Duration) -> Vec<(u64, String)> {
        self.state.shut_down(grace).await
    }

    /// Runs in flight now.
    pub fn in_flight(&self) -> usize {
        self.state.runs_in_flight()
    }

    /// Serves MCP over stdin and stdout until the client closes stdin;
    /// then cancels the runs still in flight and returns them (id and
    /// caller). Calls that name no chat key use `chat_key`.
    pub async fn serve_mcp_stdio(&self, chat_key: &str) -> anyhow::Result<Vec<(u64, String)>> {
        mcp::serve_stdio(&self.state, chat_key).await?;
        Ok(self.shut_down(Duration::ZERO).await)
    }
}

/// The middleware of the limit per token ([`rate`]): a request with a valid
/// token takes one from its bucket; one without is passed on, to be
/// refused by its endpoint.
async fn limit_per_token(
    axum::extract::State(state): axum::extract::State<Shared>,
    request: Request,
    next: Next,
) -> Response {
    if rate::UNLIMITED.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    if let Ok(caller) = Caller::from_request_parts(&mut parts, &state).await
        && let Some(refusal) = state.rate.refuse(&caller.name)
    {
        return refusal;
    }
    next.run(Request::from_parts(parts, body)).await
}
