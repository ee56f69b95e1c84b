//! The Python sandbox: AI-written code runs in a CPython component and calls
//! plugin methods through the `sandwit:plugin/methods` import.

mod linker;
mod pause_run;
mod prepared;
mod reusable;
mod session;
mod session_run;
pub(crate) mod workspace;

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use crate::bindings::python::{PythonSandbox as Interpreter, PythonSandboxPre};
use crate::runtime::cache::CodeSource;
use crate::runtime::guard::{fuel_used, guarded_until, limited_store};
use crate::runtime::loader::{self, Source, World};
use crate::sandbox::SandboxHost;
use crate::sandbox::pauses::record::{Pauses, Record};
use crate::sandbox::run::outcome::RunOutcome;
use crate::sandbox::run::state::RunState;
use crate::sandbox::run::{Run, RunOptions};
use crate::sandbox::sessions::Sessions;
use crate::sandbox::sessions::keeper::Keeper;
use crate::sandbox::sessions::stored::SMALL_SESSIONS;
use crate::sandbox::snapshot::Snapshot;
use crate::toolbox::Toolbox;
use prepared::{Prepared, Preparer, Running};
use reusable::Pending;
use sandwit_contract::error::LoadError;
use sandwit_contract::limits::RunLimits;
use sandwit_contract::types::AgentCtx;
use session::{Durable, Live};

/// The world of the interpreter component: it runs code (the `runner`
/// export) with WASI, linked closed, and the plugin methods of the run.
const PYTHON_SANDBOX: World = World {
    name: "python-sandbox",
    what: "a sandwit Python sandbox",
    export_prefix: "sandwit:interpreter/runner@0.3.",
    imports: &[
        "sandwit:plugin/types@0.1.",
        "sandwit:interpreter/methods@0.3.",
    ],
};
/// The small interpreter: a loaded CPython component (componentize-py's),
/// ready to run code. Cheap to clone.
///
/// A run's interpreter has no environment, network or processes; its only
/// way out is the methods of the run's toolbox. Its files are its chat's
/// workspace when the host keeps them ([`HostBuilder::workspaces`]), else
/// none. It is one instantiated for the run, or one a thread of the sandbox
/// prepared ahead ([`HostBuilder::prepared_interpreters`]): nothing of an
/// earlier run is left in it, since a prepared interpreter whose run ended
/// with its code finished (or raising) has its memory put back, byte for
/// byte, as it was before any run, before it serves the next; others (a
/// handoff, which ends the interpreter, a trap, a limit, cancellation, a
/// closed stream) are dropped after their runs.
///
/// [`HostBuilder::workspaces`]: crate::HostBuilder::workspaces
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
    sessions: Sessions<Live>,
    durable: Durable,
    /// The runs paused, in the host's store.
    pauses: Pauses,
    /// The interpreter component's hash.
    hash: String,
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
        let [written, copied] = &crate::sandbox::snapshot::RESTORED_PAGES;
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
    pub async fn run(&self, ctx: &AgentCtx, plugins: &Toolbox, code: &str) -> RunOutcome {
        let limits = self.inner.host.runtime().run_limits.clone();
        self.run_with_limits(ctx, plugins, code, &limits).await
    }

    /// Runs `code` under the given limits. A markdown code fence around the
    /// whole code is stripped first.
    pub async fn run_with_limits(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
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
        plugins: &Toolbox,
        code: &str,
        options: &RunOptions,
    ) -> RunOutcome {
        RunOutcome::traced("small", self.execute(ctx, plugins, code, options)).await
    }

    /// [`PythonSandbox::run_with`], in the run's span.
    async fn execute(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        code: &str,
        options: &RunOptions,
    ) -> RunOutcome {
        let host = &self.inner.host;
        let limits = options
            .limits
            .as_ref()
            .unwrap_or(&host.runtime().run_limits);
        if let Some(refused) = memory_refused(host, limits) {
            return refused;
        }
        let run = match Run::admit(host, ctx, plugins, code, limits, options).await {
            Ok(run) => run,
            Err(refused) => return refused,
        };
        if let Some(name) = options.session.as_deref() {
            return self.execute_in_session(ctx, run, name).await;
        }
        let preparer = &self.inner.preparer;
        let mut running = preparer.running();
        let Chosen {
            store,
            interpreter,
            reusable,
            reuse,
            functions_made,
        } = self.choose(ctx, &run, &mut running);
        let exec = if functions_made {
            Exec::Prepared
        } else {
            Exec::Fresh
        };
        let Ended {
            outcome,
            store,
            returned,
            pause,
        } = exec_run(ctx, run, store, interpreter, exec, reuse).await;
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
        match pause {
            Some(record) => self.keep_pause(record, outcome).await,
            None => outcome,
        }
    }

    /// The interpreter `run` runs in: a prepared one, else one instantiated
    /// for it.
    fn choose<'p>(
        &'p self,
        ctx: &AgentCtx,
        run: &Run<'_>,
        running: &mut Running<'_>,
    ) -> Chosen<'p> {
        let preparer = &self.inner.preparer;
        let prepared = preparer.take(running, run.limits.memory_bytes, &run.plugins);
        let reuse = (
            prepared.is_some(),
            prepared.as_ref().is_some_and(|p| p.runs > 0),
        );
        let made = prepared.as_ref().is_some_and(|p| p.made_for(&run.plugins));
        let (store, interpreter, reusable) = self.store_for(ctx, run, prepared);
        Chosen {
            store,
            interpreter,
            reusable,
            reuse,
            functions_made: made,
        }
    }

    /// The store `run` runs in, its state begun for the run, and where its
    /// interpreter comes from: `prepared`, else an instance made for it;
    /// with what gives a prepared one back for the next run, if it can be.
    fn store_for<'p>(
        &'p self,
        ctx: &AgentCtx,
        run: &Run<'_>,
        prepared: Option<Prepared>,
    ) -> (Store<RunState>, Start<'p>, Option<Reusable>) {
        match prepared {
            Some(Prepared {
                mut store,
                interpreter,
                methods,
                snapshot,
                runs,
            }) => {
                run.begin(store.data_mut(), ctx);
                let reusable = snapshot.map(|snapshot| (methods, snapshot, runs));
                (store, Start::Prepared(interpreter), reusable)
            }
            None => {
                let pre = &self.inner.pre;
                let state = run.new_state(ctx);
                let store = limited_store(pre.engine(), state);
                (store, Start::Instantiate(pre), None)
            }
        }
    }
}

/// How a run calls the interpreter.
#[derive(Clone, Copy)]
enum Exec {
    /// `exec`: it makes the run's method functions.
    Fresh,
    /// `exec-prepared`: it made them while prepared.
    Prepared,
    /// `exec-in-session`: in the session's namespace; why the run cannot
    /// pause, if it cannot.
    Session(Option<&'static str>),
}

/// A run's end in its interpreter.
struct Ended {
    outcome: RunOutcome,
    store: Store<RunState>,
    /// The interpreter, if its export returned (the instance is then as
    /// consistent as before the run; a trap, a limit or cancellation leave
    /// it stopped midway).
    returned: Option<Interpreter>,
    /// What keeps the run, if it paused.
    pause: Option<Record>,
}

/// Runs `run`'s code in `interpreter`, in `store` (its state begun for the
/// run), with its chat's workspace open.
async fn exec_run(
    ctx: &AgentCtx,
    run: Run<'_>,
    mut store: Store<RunState>,
    interpreter: Start<'_>,
    exec: Exec,
    reuse: (bool, bool),
) -> Ended {
    if let Err(e) = store.data_mut().open_workspace(ctx) {
        store.data_mut().end();
        let outcome = RunOutcome::failed(e.context("opening the chat's workspace"), run.start());
        return Ended {
            outcome,
            store,
            returned: None,
            pause: None,
        };
    }
    let unpausable = match exec {
        Exec::Session(why) => why,
        Exec::Fresh | Exec::Prepared => None,
    };
    run.arm(&mut store, unpausable);
    let (code, inputs, specs) = (run.code, &run.inputs, run.plugins.specs());
    let result = guarded_until(&mut store, run.budget, run.cancel(), async |store| {
        let interpreter = match interpreter {
            Start::Prepared(interpreter) => interpreter,
            Start::Instantiate(pre) => pre.instantiate_async(&mut *store).await?,
        };
        let runner = interpreter.sandwit_interpreter_runner();
        let outcome = match exec {
            Exec::Session(_) => {
                runner
                    .call_exec_in_session(&mut *store, code, inputs, specs)
                    .await?
            }
            Exec::Prepared => runner.call_exec_prepared(&mut *store, code, inputs).await?,
            Exec::Fresh => runner.call_exec(&mut *store, code, inputs, specs).await?,
        };
        Ok((outcome, interpreter))
    })
    .await;
    let (result, returned) = match result {
        Ok((outcome, interpreter)) => (Ok(outcome), Some(interpreter)),
        Err(stopped) => (Err(stopped), None),
    };
    let fuel_used = fuel_used(&store, run.budget.fuel);
    let workspace = store.data_mut().close_workspace();
    let (outcome, pause) = run.end(store.data_mut(), result, fuel_used, workspace, reuse);
    Ended {
        outcome,
        store,
        returned,
        pause,
    }
}

/// The interpreter a run runs in, and how it was had.
struct Chosen<'a> {
    store: Store<RunState>,
    interpreter: Start<'a>,
    /// What gives it back for the next run, if it can be.
    reusable: Option<Reusable>,
    /// Whether it was prepared ahead, and had served a run before.
    reuse: (bool, bool),
    /// Whether it made the run's method functions ahead (`exec-prepared`).
    functions_made: bool,
}

/// The outcome of a run whose memory limit is refused: this host's
/// instances hold less (granting it would cap it at the pool's slots
/// silently).
fn memory_refused(host: &SandboxHost, limits: &RunLimits) -> Option<RunOutcome> {
    let most = host.runtime().max_memory();
    if limits.memory_bytes <= most {
        return None;
    }
    let message = format!(
        "the run asks for {} MiB of memory, more than the {} MiB this host's instances \
         hold: raise the host's run limits (HostBuilder::run_limits, \
         Host(limits=RunLimits(memory_mib=...)), --memory-mib)",
        limits.memory_bytes >> 20,
        most >> 20
    );
    Some(RunOutcome::not_run(
        "LimitUnavailable",
        message,
        Instant::now(),
    ))
}

/// What gives a prepared interpreter back after its run: the toolbox its
/// method functions were made for, its memory's snapshot, its runs so far.
type Reusable = (Option<Toolbox>, Snapshot, u32);

/// Where a run's interpreter comes from.
enum Start<'a> {
    /// Prepared ahead of the run.
    Prepared(Interpreter),
    /// Instantiated by the run.
    Instantiate(&'a PythonSandboxPre<RunState>),
}

impl PythonSandbox {
    /// Loads and checks the interpreter component from `source`, and starts
    /// preparing interpreters ahead of runs.
    pub(crate) fn load(host: &Arc<SandboxHost>, source: Source<'_>) -> Result<Self, LoadError> {
        let compiled = loader::compile(host.runtime(), source)?;
        let linker = linker::linker(&host.runtime().engine)
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
        let durable = Durable::new(Keeper::new(
            (host.plugins.services.store.clone(), SMALL_SESSIONS),
            host.session_key.clone(),
            &compiled.hash,
            host.session_limits,
        ));
        Ok(PythonSandbox {
            inner: Arc::new(PythonInner {
                host: host.clone(),
                pre,
                code_source,
                preparer,
                sessions: Sessions::new(host.session_limits),
                durable,
                pauses: Pauses::new(
                    host.plugins.services.store.clone(),
                    host.session_key.clone(),
                    host.session_limits.pauses_per_chat,
                ),
                hash: compiled.hash.clone(),
            }),
        })
    }
}
