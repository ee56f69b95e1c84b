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
mod tools;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use sandwit::{Cancel, Host};

pub use auth::{NAMESPACE_SEPARATORS, Role, Tokens, token_digest_hex};
pub use error::ApiError;
pub use interpreters::{InterpreterKind, Interpreters};
pub use mcp_sessions::McpSessionLimits;
pub use rate::DEFAULT_TOKEN_RATE;
pub use sandwit_net::RateLimit;

use catalog::Catalog;
use metrics::Metrics;
use queue::RunQueue;

/// How the service runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The folder of `.wasm` plugins offered (and reloaded on request).
    pub plugin_dir: PathBuf,
    /// The tokens accepted.
    pub tokens: Tokens,
    /// Runs at once.
    pub max_running: usize,
    /// Runs waiting for a slot, beyond those running; past them a run is
    /// refused with 503.
    pub max_waiting: usize,
    /// How long a run waits for a slot before it is refused with 503.
    pub max_wait: Duration,
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Requests a token may make, on every endpoint but `/healthz`,
    /// `/readyz` and `/openapi.json` ([`DEFAULT_TOKEN_RATE`] by default).
    pub rate: RateLimit,
    /// The bounds on MCP sessions over HTTP.
    pub mcp_sessions: McpSessionLimits,
    /// Whether `/readyz` answers 200 before the small interpreter reuses
    /// its prepared interpreters (`PythonSandbox::reuses_interpreters`;
    /// until then every run instantiates one, several times slower). Set
    /// it for a host that prepares none (`HostBuilder::prepared_interpreters(0)`):
    /// reuse never comes there. Runs are taken either way.
    pub ready_before_reuse: bool,
}

/// The service: its state, shared by the handlers.
#[derive(Clone)]
pub struct Service {
    state: Arc<State>,
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

/// What the handlers share.
struct State {
    host: Host,
    interpreters: Interpreters,
    config: Config,
    catalog: RwLock<Catalog>,
    queue: RunQueue,
    /// Direct method calls and the lifecycle hooks asked for a listing:
    /// a queue of their own, bounded as the runs' is, so that no request
    /// instantiates a plugin outside a bound. Not the runs' queue, which a
    /// shutdown closes: calls keep answering then (a run in flight may
    /// wait on one) and are short, bounded by the host's call limits.
    calls: RunQueue,
    metrics: Metrics,
    /// The requests each token may still make.
    rate: rate::TokenRate,
    /// The runs in flight, by id, with the handle that cancels each.
    in_flight: Mutex<HashMap<u64, InFlight>>,
    next_run: AtomicU64,
    shutting_down: AtomicBool,
}

/// A run in flight.
struct InFlight {
    cancel: Cancel,
    caller: String,
}

type Shared = Arc<State>;

impl State {
    /// The enabled plugins' methods now (a run keeps the set it started
    /// with).
    fn enabled(&self) -> sandwit::PluginSet {
        self.catalog.read().expect("catalog lock").enabled().clone()
    }

    // A run's admission and end, the same for `/v1/runs` and MCP's
    // `run_python`: the bounded queue, the list of runs in flight that a
    // shutdown cancels and names, and the metrics.

    /// Waits for a run slot; a refusal (the queue full, the wait too long)
    /// is counted in the metrics by its code.
    async fn enter_queue(&self) -> Result<queue::RunSlot, error::ApiError> {
        let slot = self.queue.enter().await;
        if let Err(e) = &slot {
            self.metrics.record_rejected(e.code());
        }
        slot
    }

    /// Numbers a run and lists it in flight under `caller`; the handle
    /// cancels it.
    fn register_run(&self, caller: &str) -> (u64, Cancel) {
        let cancel = Cancel::new();
        let id = self.next_run.fetch_add(1, Ordering::Relaxed);
        self.in_flight.lock().expect("in-flight lock").insert(
            id,
            InFlight {
                cancel: cancel.clone(),
                caller: caller.to_string(),
            },
        );
        (id, cancel)
    }

    /// Runs the registered run `id` in `slot` with `interpreter`, then
    /// frees the running slot, takes the run off the list and counts its
    /// outcome; the run's place in the queue is handed back, to be held
    /// while its answer goes out.
    #[allow(clippy::too_many_arguments)]
    async fn run_registered(
        &self,
        id: u64,
        slot: queue::RunSlot,
        interpreter: &interpreters::Interpreter,
        ctx: &sandwit::AgentCtx,
        plugins: &sandwit::PluginSet,
        code: &str,
        options: &sandwit::RunOptions,
    ) -> (sandwit::RunOutcome, queue::Answering) {
        let mut outcome = interpreter.run_with(ctx, plugins, code, options).await;
        // The wait for the service's slot, before the host's.
        outcome.queued += slot.waited;
        let answering = slot.answering();
        self.in_flight.lock().expect("in-flight lock").remove(&id);
        self.metrics.record_run(&outcome);
        (outcome, answering)
    }
}

impl Service {
    /// The service over `host`, running code in `interpreters` (a
    /// `PythonSandbox` alone: the small interpreter only) with the plugins
    /// of `config.plugin_dir`.
    pub async fn new(
        host: Host,
        interpreters: impl Into<Interpreters>,
        config: Config,
    ) -> anyhow::Result<Self> {
        let plugins = Catalog::load(&host, &config.plugin_dir).await?;
        let catalog = Catalog::new(plugins, BTreeSet::new())?;
        let queue = RunQueue::new(
            "run",
            config.max_running.max(1),
            config.max_waiting,
            config.max_wait,
        );
        let calls = RunQueue::new(
            "call",
            config.max_running.max(1),
            config.max_waiting,
            config.max_wait,
        );
        let request_timeout = config.max_wait
            + host.run_limits().time.max(host.limits().time)
            + REQUEST_TIMEOUT_MARGIN;
        Ok(Service {
            request_timeout,
            state: Arc::new(State {
                host,
                interpreters: interpreters.into(),
                catalog: RwLock::new(catalog),
                queue,
                calls,
                metrics: Metrics::default(),
                rate: rate::TokenRate::new(config.rate),
                in_flight: Mutex::new(HashMap::new()),
                next_run: AtomicU64::new(1),
                shutting_down: AtomicBool::new(false),
                config,
            }),
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
                move |request: axum::extract::Request, next: axum::middleware::Next| async move {
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
                rate::limit,
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
    /// callers of the runs it cancelled.
    pub async fn shut_down(&self, grace: Duration) -> Vec<(u64, String)> {
        self.state.shutting_down.store(true, Ordering::SeqCst);
        self.state.queue.close();
        let deadline = tokio::time::Instant::now() + grace;
        while !self
            .state
            .in_flight
            .lock()
            .expect("in-flight lock")
            .is_empty()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let in_flight = self.state.in_flight.lock().expect("in-flight lock");
        let mut cancelled: Vec<(u64, String)> = in_flight
            .iter()
            .map(|(id, run)| {
                run.cancel.cancel();
                (*id, run.caller.clone())
            })
            .collect();
        cancelled.sort();
        cancelled
    }

    /// Runs in flight now.
    pub fn in_flight(&self) -> usize {
        self.state.in_flight.lock().expect("in-flight lock").len()
    }
}
