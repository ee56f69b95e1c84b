//! The Python sandbox: AI-written code runs in a CPython component and calls
//! plugin methods through the `sandwit:plugin/methods` import.

pub(crate) mod methods;
pub(crate) mod outcome;
mod prepared;
mod reusable;
pub(crate) mod snapshot;
pub(crate) mod state;
pub(crate) mod workspace;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bindings::python::{
    PythonSandbox as Interpreter, PythonSandboxPre, exports::sandwit::interpreter::runner,
};
use crate::controls::{Approver, RunControls};
use crate::plugin::trap_message;
use crate::runtime::cache::CodeSource;
use crate::runtime::cancel::Cancel;
use crate::runtime::guard::{Stopped, guarded_until, limited_store};
use crate::runtime::guard::{apply_budget, fuel_used};
use crate::runtime::limits::Budget;
use crate::runtime::loader::{self, Source, World};
use crate::sandbox::SandboxHost;
use crate::sandbox::admission::Slot;
use crate::sandbox::values::{decode_result, marshal_inputs};
use crate::toolbox::PluginSet;
use outcome::{LimitHit, LiveEvent, RunError, RunOutcome, RunStatus};
use prepared::{Prepared, Preparer};
use reusable::Pending;
use sandwit_contract::error::{LoadError, MAX_MESSAGE_BYTES};
use sandwit_contract::limits::{LimitKind, RunLimits};
use sandwit_contract::text::cut;
use sandwit_contract::types::{AgentCtx, Value};
use state::{EventListener, RunState};
use wasmtime_wasi::I32Exit;

/// The world of the interpreter component: it runs code (the `runner`
/// export) with WASI, linked closed, and the plugin methods of the run.
const PYTHON_SANDBOX: World = World {
    name: "python-sandbox",
    what: "a sandwit Python sandbox",
    export_prefix: "sandwit:interpreter/runner@0.2.",
    imports: &[
        "sandwit:plugin/types@0.1.",
        "sandwit:interpreter/methods@0.2.",
    ],
};
/// The error type of a run whose interpreter trapped (a bug, not the code).
const TRAP_TYPE: &str = "InterpreterTrap";
/// A loaded CPython component, ready to run code. Cheap to clone.
///
/// Every run gets a fresh interpreter, with no files, environment,
/// network or processes, whose only way out is the plugin methods of the
/// run: one instantiated for it, or one a thread of the sandbox prepared
/// ahead ([`HostBuilder::prepared_interpreters`]). A prepared interpreter
/// whose run ended with its code finished (or raising) has its memory put
/// back, byte for byte, as it was before any run, and serves the next;
/// others (a handoff, which ends the interpreter, a trap, a limit,
/// cancellation, a closed stream) are dropped after their runs.
///
/// [`HostBuilder::prepared_interpreters`]: crate::HostBuilder::prepared_interpreters
#[derive(Clone)]
pub struct PythonSandbox {
    inner: Arc<PythonInner>,
}

struct PythonInner {
    host: Arc<SandboxHost>,
    /// The interpreter in the host's pool.
    pre: PythonSandboxPre<RunState>,
    code_source: CodeSource,
    preparer: Preparer,
}

impl PythonSandbox {
    /// Where the interpreter's machine code came from when it was loaded.
    pub fn code_source(&self) -> CodeSource {
        self.inner.code_source
    }

    /// Whether its prepared interpreters are reused across runs yet (the
    /// interpreter compiled for the sandbox's own engine, once per cache, on
    /// an idle-priority thread; see
    /// [`HostBuilder::prepared_interpreters`](crate::HostBuilder::prepared_interpreters)).
    /// Until then every run instantiates an interpreter.
    pub fn reuses_interpreters(&self) -> bool {
        self.inner.preparer.reuses()
    }

    /// Whether its prepared interpreters will be reused across runs but are
    /// not yet: the interpreter's code for the sandbox's own engine is being
    /// loaded or compiled. False once they are, and for a sandbox that will
    /// never reuse them (none prepared, or that code failed: a warning says
    /// why), so a readiness check waits only for what will come.
    pub fn warming_up(&self) -> bool {
        self.inner.preparer.awaits_reuse()
    }

    /// Whether every interpreter prepared now, restored after a run or not,
    /// has its memory exactly as it was prepared. Only with the `internals`
    /// feature.
    #[cfg(feature = "internals")]
    pub fn prepared_intact(&self) -> bool {
        self.inner.preparer.intact()
    }

    /// Has the next run whose interpreter is given back for reuse end with
    /// every byte of that interpreter's memory overwritten (with its
    /// complement in the snapshot), as by a run that wrote every page,
    /// before the memory is restored. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub fn scribble_after_next_run(&self) {
        self.inner.preparer.scribble_next();
    }

    /// The pages every restore of a prepared interpreter's memory in this
    /// process found written since its run began, and of those the ones it
    /// copied back (they differed from the snapshot). Zero where the
    /// kernel gives no write tracking (the whole memory is copied back
    /// instead). Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub fn restored_pages() -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let [written, copied] = &snapshot::RESTORED_PAGES;
        (written.load(Relaxed), copied.load(Relaxed))
    }

    /// Returns once `done()` holds. It is checked now, and again each time
    /// the sandbox's preparing thread has changed what it holds: prepared
    /// or restored an interpreter, loaded or compiled the interpreter for
    /// reuse (or given up on it), made a plugin instance ahead, or gone to
    /// sleep (`HostBuilder::park_after`). Tests await the thread's work so
    /// instead of polling for it, and go on as soon as it is done; it has
    /// no timeout of its own (the thread works only on an idle core, and
    /// never prepares for a sandbox that prepares none), so a caller bounds
    /// it. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub async fn wait_for_preparer(&self, done: impl FnMut() -> bool) {
        self.inner.preparer.until(done).await;
    }

    /// How many interpreters are instantiated and waiting for a run now
    /// (at most [`HostBuilder::prepared_interpreters`](crate::HostBuilder::prepared_interpreters)):
    /// a gauge of how far ahead of its load the sandbox is.
    pub fn prepared(&self) -> usize {
        self.inner.preparer.count()
    }

    /// Runs `code` for `ctx` with the methods of `plugins`, under the host's
    /// [`RunLimits`].
    pub async fn run(&self, ctx: &AgentCtx, plugins: &PluginSet, code: &str) -> RunOutcome {
        let limits = self.inner.host.runtime().run_limits.clone();
        self.run_with_limits(ctx, plugins, code, &limits).await
    }

    /// Runs `code` under the given limits. A markdown code fence around the
    /// whole code is stripped first.
    pub async fn run_with_limits(
        &self,
        ctx: &AgentCtx,
        plugins: &PluginSet,
        code: &str,
        limits: &RunLimits,
    ) -> RunOutcome {
        let options = RunOptions::new().limits(limits.clone());
        self.run_with(ctx, plugins, code, &options).await
    }

    /// Runs `code` as `options` say: its limits (else the host's), a
    /// handle that cancels it, a listener to its output and events as they
    /// happen. A markdown code fence around the whole code is stripped
    /// first.
    pub async fn run_with(
        &self,
        ctx: &AgentCtx,
        plugins: &PluginSet,
        code: &str,
        options: &RunOptions,
    ) -> RunOutcome {
        RunOutcome::traced("small", self.execute(ctx, plugins, code, options)).await
    }

    /// [`PythonSandbox::run_with`], in the run's span.
    async fn execute(
        &self,
        ctx: &AgentCtx,
        plugins: &PluginSet,
        code: &str,
        options: &RunOptions,
    ) -> RunOutcome {
        let host = &self.inner.host;
        let limits = options
            .limits
            .as_ref()
            .unwrap_or(&host.runtime().run_limits);
        let most = host.runtime().max_memory();
        if limits.memory_bytes > most {
            // Granting it would cap it at the pool's slots silently.
            let message = format!(
                "the run asks for {} MiB of memory, more than the {} MiB this host's instances \
                 hold: raise the host's run limits (HostBuilder::run_limits, \
                 Host(limits=RunLimits(memory_mib=...)), --memory-mib)",
                limits.memory_bytes >> 20,
                most >> 20
            );
            return RunOutcome::not_run("LimitUnavailable", message, Instant::now());
        }
        let Admitted {
            slot,
            inputs,
            budget,
        } = match admit(host, plugins, limits, options).await {
            Ok(admitted) => admitted,
            Err(refused) => return refused,
        };
        let start = slot.start;
        let code = strip_code_fence(code);
        let preparer = &self.inner.preparer;
        let mut running = preparer.running();
        let prepared = preparer.take(&mut running, limits.memory_bytes, plugins);
        let was_prepared = prepared.is_some();
        let reused = prepared.as_ref().is_some_and(|p| p.runs > 0);
        let functions_made = prepared.as_ref().is_some_and(|p| p.made_for(plugins));
        let inner = &*self.inner;
        let (mut store, interpreter, reusable) = match prepared {
            Some(Prepared {
                mut store,
                interpreter,
                methods,
                snapshot,
                runs,
            }) => {
                store.data_mut().begin(
                    ctx,
                    plugins,
                    limits,
                    &host.runtime().limits,
                    budget.deadline,
                    options.on_event.clone(),
                );
                // What gives it back for the next run, if it can be.
                let reusable = snapshot.map(|snapshot| (methods, snapshot, runs));
                (store, Start::Prepared(interpreter), reusable)
            }
            None => {
                let pre = &inner.pre;
                let listener = options.on_event.clone();
                let state = RunState::new(
                    ctx,
                    plugins,
                    limits,
                    &host.runtime().limits,
                    budget.deadline,
                    listener,
                    host.workspaces.as_ref(),
                );
                let store = limited_store(pre.engine(), state);
                (store, Start::Instantiate(pre), None)
            }
        };
        if let Err(e) = store.data_mut().open_workspace(ctx) {
            store.data_mut().end();
            preparer.retire(running, store);
            return RunOutcome::failed(e.context("opening the chat's workspace"), start);
        }
        apply_budget(&mut store, budget, host.runtime().metering);
        store.data_mut().meter.watch(options.cancel.clone());
        store.data_mut().controls =
            RunControls::new(host.plugins.controls.clone(), options.approver.clone());
        let specs = plugins.specs();
        let cancel = options.cancel.as_ref();
        let result = guarded_until(&mut store, budget, cancel, async |store| {
            let interpreter = match interpreter {
                Start::Prepared(interpreter) => interpreter,
                Start::Instantiate(pre) => pre.instantiate_async(&mut *store).await?,
            };
            let runner = interpreter.sandwit_interpreter_runner();
            let outcome = if functions_made {
                runner
                    .call_exec_prepared(&mut *store, code, &inputs)
                    .await?
            } else {
                runner.call_exec(&mut *store, code, &inputs, specs).await?
            };
            Ok((outcome, interpreter))
        })
        .await;
        // The interpreter's export returned: the instance is as consistent
        // as it was before the run (a trap, a limit or cancellation leave
        // it stopped midway).
        let (result, returned) = match result {
            Ok((outcome, interpreter)) => (Ok(outcome), Some(interpreter)),
            Err(stopped) => (Err(stopped), None),
        };
        let fuel_used = fuel_used(&store, budget.fuel);
        let workspace = store.data_mut().close_workspace();
        // A write the quotas refused ends the run with the quota, whatever
        // the code made of the `OSError`.
        let result = match workspace.as_ref().and_then(|(hit, _)| hit.clone()) {
            Some(quota) => Err(Stopped::Limit(LimitKind::Workspace, quota)),
            None => result,
        };
        let mut outcome = finish(
            store.data_mut(),
            result,
            limits,
            fuel_used,
            (was_prepared, reused),
            start,
        );
        if let Some((_, files)) = workspace {
            outcome.files = files;
        }
        outcome.queued = slot.waited;
        store.data_mut().end();
        // Still counted as running: the store goes to the thread only when
        // another core is free of runs.
        match (reusable, returned) {
            (Some((methods, snapshot, runs)), Some(interpreter)) => {
                let prepared = Prepared {
                    store,
                    interpreter,
                    methods,
                    snapshot: Some(snapshot),
                    runs,
                };
                preparer.give_back(running, prepared);
            }
            _ => preparer.retire(running, store),
        }
        outcome
    }
}

/// How one run goes beyond its code: its limits, a handle that cancels it,
/// and a listener to what it does as it happens. The default: the host's
/// limits, no handle, no listener.
#[derive(Clone, Default)]
pub struct RunOptions {
    pub(crate) limits: Option<RunLimits>,
    pub(crate) cancel: Option<Cancel>,
    pub(crate) on_event: Option<EventListener>,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    /// A [`Value::Object`] of the inputs' names to their values, if any.
    pub(crate) inputs: Option<Value>,
}

impl RunOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Limits for this run instead of the host's [`RunLimits`].
    pub fn limits(mut self, limits: RunLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Values the code finds as variables of these names (ASCII
    /// identifiers, not keywords, a method's name nor `__`-prefixed), as a method's
    /// result would be: `None`, `bool`, `int`, `float`, `str`, `bytes`,
    /// `list` and `dict`. All together within the host's value limits
    /// ([`Limits::max_value_bytes`](crate::Limits), and the node and depth
    /// caps); a run whose inputs are not ends with an `InvalidInput` error,
    /// its code not run.
    pub fn inputs(mut self, inputs: impl IntoIterator<Item = (String, Value)>) -> Self {
        self.inputs = Some(Value::Object(inputs.into_iter().collect()));
        self
    }

    /// A handle that ends the run from outside; the run then ends with
    /// [`RunStatus::Cancelled`] (see [`Cancel`] for how soon).
    pub fn cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Asks `approver`, instead of the host's
    /// ([`HostBuilder::approver`](crate::HostBuilder::approver)), about
    /// this run's calls of methods whose flags the policy requires approval
    /// for.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Calls `listener` with the run's stdout and stderr as the code writes
    /// them and with each [`Event`](crate::Event) as the run records it (a
    /// plugin's log lines and chat messages when its call returns), in
    /// order, on the run's thread: keep it quick (a task it wakes on the
    /// same runtime thread may wait until the run yields). The outcome is
    /// the same with or without it. A listener that panics is not called
    /// again; the run goes on.
    pub fn on_event(mut self, listener: impl Fn(&LiveEvent) + Send + Sync + 'static) -> Self {
        let failed = std::sync::atomic::AtomicBool::new(false);
        self.on_event = Some(Arc::new(move |event: &LiveEvent| {
            use std::sync::atomic::Ordering::Relaxed;
            if failed.load(Relaxed) {
                return;
            }
            let shown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(event)));
            if shown.is_err() {
                failed.store(true, Relaxed);
                tracing::error!("a run's event listener panicked; it is not called again");
            }
        }));
        self
    }
}

/// What a run has once it may execute.
pub(crate) struct Admitted<'h> {
    /// Its run slot, held until it ends.
    pub(crate) slot: Slot<'h>,
    /// Its inputs, marshalled (empty for none).
    pub(crate) inputs: Vec<u8>,
    /// Its fuel and deadline, counted from when it got the slot.
    pub(crate) budget: Budget,
}

/// What every run of either interpreter goes through before its code runs:
/// its plugins must be `host`'s and its inputs good; then it waits for a run
/// slot (the host's [`RunSlots`](crate::RunSlots)). The outcome of a run
/// refused on the way.
pub(crate) async fn admit<'h>(
    host: &'h Arc<SandboxHost>,
    plugins: &PluginSet,
    limits: &RunLimits,
    options: &RunOptions,
) -> Result<Admitted<'h>, RunOutcome> {
    let asked = Instant::now();
    if let Some(plugin) = plugins.foreign_plugin(&host.plugins) {
        let message = plugin.foreign_message();
        return Err(RunOutcome::not_run("ForeignPlugin", message, asked));
    }
    let inputs = match &options.inputs {
        Some(given @ Value::Object(entries)) if !entries.is_empty() => marshal_inputs(
            given,
            |name| plugins.provider(name).is_some(),
            &host.runtime().limits,
        )
        .map_err(|message| RunOutcome::not_run("InvalidInput", message, asked))?,
        _ => Vec::new(),
    };
    let slot = (host.admission)
        .slot(asked, options.cancel.as_ref())
        .await
        .map_err(|refused| RunOutcome::no_slot(refused, asked))?;
    let budget = Budget::new(limits.fuel, limits.time, slot.start);
    Ok(Admitted {
        slot,
        inputs,
        budget,
    })
}

/// Where a run's interpreter comes from.
enum Start<'a> {
    /// Prepared ahead of the run.
    Prepared(Interpreter),
    /// Instantiated by the run.
    Instantiate(&'a PythonSandboxPre<RunState>),
}

pub(crate) fn finish(
    state: &mut RunState,
    result: Result<runner::Outcome, Stopped>,
    limits: &RunLimits,
    fuel_used: u64,
    #[cfg_attr(not(feature = "internals"), expect(unused_variables))] (prepared, reused): (
        bool,
        bool,
    ),
    start: Instant,
) -> RunOutcome {
    let stdout = String::from_utf8_lossy(&state.stdout.take().0).into_owned();
    let stderr = String::from_utf8_lossy(&state.stderr.take().0).into_owned();
    let output_full = stdout.len().max(stderr.len()) >= limits.max_output_bytes;
    // Every limit that ends a run is reported here, its message cut as a
    // call error's is (it may quote what the code or a plugin sent).
    let limit = |kind, message: String| {
        let message = cut(message, MAX_MESSAGE_BYTES);
        Some(LimitHit { kind, message })
    };
    let output_limit = || {
        limit(
            LimitKind::Output,
            format!(
                "printed {} bytes, the limit for stdout and for stderr",
                limits.max_output_bytes
            ),
        )
    };
    let mut value = None;
    let (status, error, limit) = match result {
        _ if state.handoff.is_some() => (RunStatus::AgentHandoff, None, None),
        Ok(runner::Outcome::Ok(_)) if output_full => {
            (RunStatus::LimitExceeded, None, output_limit())
        }
        Ok(runner::Outcome::Ok(None)) => (RunStatus::Ok, None, None),
        Ok(runner::Outcome::Ok(Some(bytes))) => match decode_result(&bytes, &state.call_limits) {
            Ok(result) => {
                value = Some(result);
                (RunStatus::Ok, None, None)
            }
            Err(message) => (
                RunStatus::LimitExceeded,
                None,
                limit(LimitKind::ValueSize, message),
            ),
        },
        Ok(runner::Outcome::Error(info)) => {
            // The exception is the code's output too: under the same cap.
            let max = limits.max_output_bytes;
            let error = RunError {
                type_name: cut(info.type_name, 200),
                message: cut(info.message, max),
                line: info.line,
                traceback: cut(info.traceback, max),
            };
            match error.type_name.as_str() {
                "MemoryError" => {
                    let hit = limit(LimitKind::Memory, "Python ran out of memory".into());
                    (RunStatus::LimitExceeded, Some(error), hit)
                }
                _ if output_full => (RunStatus::LimitExceeded, Some(error), output_limit()),
                _ => (RunStatus::Error, Some(error), None),
            }
        }
        Err(_) if state.stop.is_some() => {
            let (kind, message) = state.stop.take().expect("checked");
            (RunStatus::LimitExceeded, None, limit(kind, message))
        }
        Err(Stopped::Cancelled) => (RunStatus::Cancelled, None, None),
        Err(Stopped::Limit(kind, message)) => {
            (RunStatus::LimitExceeded, None, limit(kind, message))
        }
        // The code ended the interpreter itself (`os._exit(n)`): as
        // `sys.exit(n)` ends a run, 0 is a success and any other status a
        // `SystemExit` error. (WASI 0.2's `exit` says only success or
        // failure: the small interpreter's failures are all status 1.) The
        // instance is not reused either way.
        Err(Stopped::Trap(err)) if err.is::<I32Exit>() => match err.downcast_ref() {
            Some(I32Exit(0)) if output_full => (RunStatus::LimitExceeded, None, output_limit()),
            Some(I32Exit(0)) => (RunStatus::Ok, None, None),
            exit => {
                let status = exit.map_or(1, |&I32Exit(status)| status);
                let error = RunError {
                    type_name: "SystemExit".to_string(),
                    message: format!("the code exited with status {status} (os._exit)"),
                    line: None,
                    traceback: String::new(),
                };
                (RunStatus::Error, Some(error), None)
            }
        },
        Err(Stopped::Trap(err)) => {
            let error = RunError {
                type_name: TRAP_TYPE.to_string(),
                message: trap_message(&err),
                line: None,
                traceback: String::new(),
            };
            (RunStatus::Error, Some(error), None)
        }
    };
    RunOutcome {
        status,
        stdout,
        stderr,
        error,
        limit,
        files: Vec::new(),
        events: state.events.take(),
        handoff: state.handoff.take(),
        result: value,
        fuel_used,
        cost: state.controls.spent(),
        #[cfg(feature = "internals")]
        prepared,
        #[cfg(feature = "internals")]
        reused,
        elapsed: start.elapsed(),
        queued: Duration::ZERO,
    }
}

/// Strips one markdown code fence (```` ``` ```` or ```` ```python ````) around
/// the whole code, as LLMs often add one.
pub fn strip_code_fence(code: &str) -> &str {
    let trimmed = code.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return code;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return code;
    };
    // The rest of the opening line is the language tag.
    match body.split_once('\n') {
        Some((tag, body)) if !tag.contains('`') && !tag.trim().contains(' ') => body,
        _ => code,
    }
}

impl PythonSandbox {
    /// Loads and checks the interpreter component from `source`, and starts
    /// preparing interpreters ahead of runs.
    pub(crate) fn load(host: &Arc<SandboxHost>, source: Source<'_>) -> Result<Self, LoadError> {
        let compiled = loader::compile(host.runtime(), source)?;
        let linker = methods::linker(&host.runtime().engine)
            .map_err(|e| compiled.rejected(vec![format!("cannot be linked: {e:#}")]))?;
        let pre = compiled.link(
            host.runtime(),
            &PYTHON_SANDBOX,
            &linker,
            PythonSandboxPre::new,
        )?;
        let target = host.prepared_interpreters;
        // Without it (an engine it cannot make, say) runs are only slower:
        // prepared interpreters come from the host's pool, one per run.
        let own = (target > 0)
            .then(|| Pending::new(host, &source, &compiled.hash))
            .transpose()
            .unwrap_or_else(|e| {
                tracing::warn!("the Python sandbox's interpreters serve one run each: {e:#}");
                None
            });
        let preparer =
            Preparer::start(host.clone(), pre.clone(), own, target).map_err(|source| {
                LoadError::Host {
                    plugin: compiled.label.clone(),
                    source,
                }
            })?;
        let code_source = compiled.code_source;
        tracing::info!(?code_source, "loaded the Python sandbox");
        Ok(PythonSandbox {
            inner: Arc::new(PythonInner {
                host: host.clone(),
                pre,
                code_source,
                preparer,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::strip_code_fence;

    #[test]
    fn strips_one_fence() {
        assert_eq!(strip_code_fence("```python\nprint(1)\n```"), "print(1)\n");
        assert_eq!(strip_code_fence("  ```\nx = 1\n```  \n"), "x = 1\n");
        assert_eq!(strip_code_fence("```py\nx = 1```"), "x = 1");
        assert_eq!(strip_code_fence("print('```')"), "print('```')");
        assert_eq!(strip_code_fence("x = 1"), "x = 1");
        assert_eq!(strip_code_fence("```not closed\nx"), "```not closed\nx");
    }
}
