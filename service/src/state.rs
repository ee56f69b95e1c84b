//! What the handlers share ([`State`]): the host (whose run queue runs
//! take their places in), the interpreters, the plugins, the calls' queue,
//! the metrics, the runs in flight. Every handler,
//! extractor and middleware depends on this module; it depends on none of
//! them.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use sandwit::{Cancel, Host, Interpreter, LimitKind, NoRunPlace, RunPlace, RunStatus};

use crate::catalog::Catalog;
use crate::config::Config;
use crate::error::ApiError;
use crate::interpreters::Interpreters;
use crate::metrics::Metrics;
use crate::queue::{CallQueue, RETRY_AFTER_S};
use crate::rate::TokenRate;

/// What the handlers share.
pub(crate) struct State {
    pub(crate) host: Host,
    pub(crate) interpreters: Interpreters,
    pub(crate) config: Config,
    pub(crate) catalog: RwLock<Catalog>,
    /// The policy's tool sources: an MCP server's methods change when it
    /// lists its tools again.
    pub(crate) sources: sandwit::sources::ToolSources,
    /// Direct method calls and the lifecycle hooks asked for a listing:
    /// a queue of their own, bounded as the host's run queue is, so that no
    /// request instantiates a plugin outside a bound. Not the runs' queue,
    /// which a shutdown closes: calls keep answering then (a run in flight
    /// may wait on one) and are short, bounded by the host's call limits.
    pub(crate) calls: CallQueue,
    pub(crate) metrics: Metrics,
    /// The requests each token may still make.
    pub(crate) rate: TokenRate,
    /// The runs in flight, by id, with the handle that cancels each.
    pub(crate) in_flight: Mutex<HashMap<u64, InFlight>>,
    next_run: AtomicU64,
    pub(crate) shutting_down: AtomicBool,
}

/// A run in flight.
pub(crate) struct InFlight {
    pub(crate) cancel: Cancel,
    pub(crate) caller: String,
}

/// The state as the handlers hold it.
pub(crate) type Shared = Arc<State>;

impl State {
    /// The state over `host`, running code in `interpreters`, with the
    /// plugins of `config.plugin_dir` loaded, all enabled, and the
    /// methods of the policy's tool sources.
    pub(crate) async fn new(
        host: Host,
        interpreters: Interpreters,
        config: Config,
    ) -> anyhow::Result<Self> {
        let plugins = Catalog::load(&host, &config.plugin_dir).await?;
        let sources = host.tool_sources().await?;
        let (tools, reports) = sources.snapshot();
        for report in reports {
            tracing::info!(
                source = report.source,
                digest = report.digest,
                methods = report.methods.len(),
                "loaded a tool source"
            );
            for (operation, why) in &report.skipped {
                tracing::warn!(
                    source = report.source,
                    operation,
                    why,
                    "an operation is not offered"
                );
            }
        }
        let catalog = Catalog::new(plugins, tools, BTreeSet::new())?;
        let slots = host.run_slots();
        let calls = CallQueue::new(slots.running, slots.waiting, slots.max_wait);
        Ok(State {
            host,
            interpreters,
            catalog: RwLock::new(catalog),
            sources,
            calls,
            metrics: Metrics::default(),
            rate: TokenRate::new(config.rate),
            in_flight: Mutex::new(HashMap::new()),
            next_run: AtomicU64::new(1),
            shutting_down: AtomicBool::new(false),
            config,
        })
    }

    /// Follows the tool sources' changes (an MCP server that lists its
    /// tools again): each one's methods replace the catalog's, unless they
    /// clash with a plugin's, which keeps the old ones (and says so). Ends
    /// with the state.
    pub(crate) fn follow_tool_sources(state: &Shared) {
        let mut changes = state.sources.changes();
        let state = Arc::downgrade(state);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(state) = state.upgrade() else { return };
                let tools = state.sources.methods();
                let mut catalog = state.catalog.write().expect("catalog lock");
                match catalog.set_tools(tools) {
                    Ok(()) => tracing::info!("the tool sources' methods changed"),
                    Err(error) => tracing::warn!(
                        %error,
                        "a tool source's new methods clash with a plugin's; the old ones are kept"
                    ),
                }
            }
        });
    }

    /// The enabled plugins' methods now (a run keeps the set it started
    /// with).
    pub(crate) fn enabled(&self) -> sandwit::Toolbox {
        self.catalog.read().expect("catalog lock").enabled().clone()
    }

    // A run's admission and end, the same for `/v1/runs` and MCP's
    // `run_python`: a place in the host's run queue, the list of runs in
    // flight that a shutdown cancels and names, and the metrics.

    /// A place in the host's run queue, at once, or the refusal (every
    /// place taken: 503 `queue-full`; closed: `shutting-down`), counted in
    /// the metrics by its code. The run waits for its slot in the host.
    pub(crate) fn take_place(&self) -> Result<RunPlace, ApiError> {
        let place = self.host.run_place().map_err(|refused| match refused {
            NoRunPlace::Full { .. } => ApiError::unavailable(
                "queue-full",
                format!("{refused} (--max-runs plus --queue)"),
                RETRY_AFTER_S,
            ),
            NoRunPlace::Closed => shutting_down(),
        });
        if let Err(e) = &place {
            self.metrics.record_rejected(e.code());
        }
        place
    }

    /// The answer to a run the host's run queue refused, which never ran
    /// (its [`LimitKind::Queue`] limit: no slot came free in time, or the
    /// host closed the queue): 503 `queue-timeout` or `shutting-down`.
    /// None for any other outcome.
    pub(crate) fn refusal(&self, outcome: &sandwit::RunOutcome) -> Option<ApiError> {
        let limit = outcome.limit.as_ref()?;
        if outcome.status != RunStatus::LimitExceeded || limit.kind != LimitKind::Queue {
            return None;
        }
        if self.shutting_down.load(Ordering::SeqCst) {
            return Some(shutting_down());
        }
        // Refused before it waited its time: the waiting room was full.
        let code = if outcome.queued < self.host.run_slots().max_wait {
            "queue-full"
        } else {
            "queue-timeout"
        };
        Some(ApiError::unavailable(
            code,
            limit.message.clone(),
            RETRY_AFTER_S,
        ))
    }

    /// Numbers a run and lists it in flight under `caller`; the handle
    /// cancels it.
    pub(crate) fn register_run(&self, caller: &str) -> (u64, Cancel) {
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

    /// Runs the registered run `id` with `interpreter` (it waits for the
    /// host's run slot, and frees it when it ends), holding `place`, then
    /// takes the run off the list and counts its outcome, or the refusal
    /// of a run the host's queue refused ([`State::refusal`]); the place is
    /// handed back, to be held while the answer goes out.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_registered(
        &self,
        id: u64,
        place: RunPlace,
        interpreter: &Interpreter,
        ctx: &sandwit::AgentCtx,
        plugins: &sandwit::Toolbox,
        work: &Work,
        options: &sandwit::RunOptions,
    ) -> (sandwit::RunOutcome, RunPlace) {
        let outcome = match work {
            Work::Run(code) => interpreter.run_with(ctx, plugins, code, options).await,
            Work::Resume(token, answer) => {
                (interpreter.resume(ctx, plugins, token, answer.clone(), options)).await
            }
        };
        self.in_flight.lock().expect("in-flight lock").remove(&id);
        match self.refusal(&outcome) {
            Some(refused) => self.metrics.record_rejected(refused.code()),
            None => self.metrics.record_run(&outcome),
        }
        (outcome, place)
    }

    /// Runs in flight now.
    pub(crate) fn runs_in_flight(&self) -> usize {
        self.in_flight.lock().expect("in-flight lock").len()
    }

    /// Cancels every run in flight now.
    pub(crate) fn cancel_runs(&self) {
        for run in self.in_flight.lock().expect("in-flight lock").values() {
            run.cancel.cancel();
        }
    }

    /// Stops admitting runs (`/readyz` then answers 503), gives those in
    /// flight `grace` to finish, then cancels the rest. Returns the ids and
    /// callers of the runs it cancelled, by id.
    pub(crate) async fn shut_down(&self, grace: Duration) -> Vec<(u64, String)> {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.host.close_run_slots();
        let deadline = tokio::time::Instant::now() + grace;
        while self.runs_in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let in_flight = self.in_flight.lock().expect("in-flight lock");
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
}

/// The refusal of a run asked for while the service shuts down.
pub(crate) fn shutting_down() -> ApiError {
    ApiError::unavailable(
        "shutting-down",
        "the server is shutting down",
        RETRY_AFTER_S,
    )
}

/// What a registered run does: run code, or resume a paused run with a
/// person's answer.
pub(crate) enum Work {
    Run(String),
    Resume(String, sandwit::Resume),
}
