//! What the handlers share ([`State`]): the host, the interpreters, the
//! plugins, the queues, the metrics, the runs in flight. Every handler,
//! extractor and middleware depends on this module; it depends on none of
//! them.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use sandwit::{Cancel, Host};

use crate::catalog::Catalog;
use crate::config::Config;
use crate::error::ApiError;
use crate::interpreters::{Interpreter, Interpreters};
use crate::metrics::Metrics;
use crate::queue::{Answering, RunQueue, RunSlot};
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
    pub(crate) queue: RunQueue,
    /// Direct method calls and the lifecycle hooks asked for a listing:
    /// a queue of their own, bounded as the runs' is, so that no request
    /// instantiates a plugin outside a bound. Not the runs' queue, which a
    /// shutdown closes: calls keep answering then (a run in flight may
    /// wait on one) and are short, bounded by the host's call limits.
    pub(crate) calls: RunQueue,
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
        Ok(State {
            host,
            interpreters,
            catalog: RwLock::new(catalog),
            sources,
            queue,
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
    pub(crate) fn enabled(&self) -> sandwit::PluginSet {
        self.catalog.read().expect("catalog lock").enabled().clone()
    }

    // A run's admission and end, the same for `/v1/runs` and MCP's
    // `run_python`: the bounded queue, the list of runs in flight that a
    // shutdown cancels and names, and the metrics.

    /// Waits for a run slot; a refusal (the queue full, the wait too long)
    /// is counted in the metrics by its code.
    pub(crate) async fn enter_queue(&self) -> Result<RunSlot, ApiError> {
        let slot = self.queue.enter().await;
        if let Err(e) = &slot {
            self.metrics.record_rejected(e.code());
        }
        slot
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

    /// Runs the registered run `id` in `slot` with `interpreter`, then
    /// frees the running slot, takes the run off the list and counts its
    /// outcome; the run's place in the queue is handed back, to be held
    /// while its answer goes out.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_registered(
        &self,
        id: u64,
        slot: RunSlot,
        interpreter: &Interpreter,
        ctx: &sandwit::AgentCtx,
        plugins: &sandwit::PluginSet,
        code: &str,
        options: &sandwit::RunOptions,
    ) -> (sandwit::RunOutcome, Answering) {
        let mut outcome = interpreter.run_with(ctx, plugins, code, options).await;
        // The wait for the service's slot, before the host's.
        outcome.queued += slot.waited;
        let answering = slot.answering();
        self.in_flight.lock().expect("in-flight lock").remove(&id);
        self.metrics.record_run(&outcome);
        (outcome, answering)
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
        self.queue.close();
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
