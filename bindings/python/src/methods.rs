//! Host methods written in Python (`sandwit.HostMethod`, which
//! `@sandwit.method` makes): a sandbox method answered by a Python
//! function.
//!
//! A call runs the function on a blocking thread of the host's runtime
//! with the GIL (never on a runtime worker). A coroutine it returns runs on
//! the asyncio loop the run was awaited in (`run_async`), else on sandwit's
//! own loop (`sandwit._methods.own_loop`), and the call waits for it
//! without a thread; dropping the call (the run's deadline, a cancelled
//! run) cancels it. A plain function runs to its end even then: Python
//! cannot stop a thread.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyDict, PyList, PyModule, PyString, PyTuple};
use sandwit::{AgentCtx, ContentPart, MethodKind, MethodResult, MethodSpec, Param, Value};
use tokio::sync::oneshot;

use crate::convert::lit;
use crate::convert::{json_from_py, result_from_py, to_py, type_name, value_to_py};
use crate::errors;
use crate::gil::with_python_kept;
use crate::tasks::RUN_LOOP;
use crate::types::{PyAgentCtx, PyContentPart};

/// `sandwit._methods`: the Python side of host methods.
static HELPERS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
/// `inspect.iscoroutine`.
static IS_COROUTINE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn helpers(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    HELPERS
        .get_or_try_init(py, || Ok(py.import("sandwit._methods")?.unbind()))
        .map(|m| m.bind(py))
}

/// A sandbox method answered by a Python function: made by
/// `@sandwit.method` from the function's type hints and docstring, or
/// directly with the parameters' JSON Schemas. Calling it calls the
/// function. Or a method of a tool source of the policy
/// (`Host.tool_sources()`), which the host answers and has no function.
#[pyclass(frozen, module = "sandwit", name = "HostMethod")]
pub struct PyHostMethod {
    pub method: sandwit::HostMethod,
    func: Option<Py<PyAny>>,
}

impl PyHostMethod {
    /// A tool source's method.
    pub(crate) fn of_source(method: sandwit::HostMethod) -> Self {
        PyHostMethod { method, func: None }
    }
}

#[pymethods]
impl PyHostMethod {
    /// `func(ctx, **args)` answers the method `name` of `kind`; `params`
    /// are dicts `{"name", "schema", "required"}` (a JSON Schema;
    /// `required` defaults to True), required ones first; `description`
    /// defaults to the docstring's first line. Raises `MethodSpecError`
    /// listing what the host refuses in the spec.
    #[new]
    #[pyo3(signature = (func, *, name, kind, docstring, params=None, description=None, returns=None, provider="host"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        func: &Bound<'_, PyAny>,
        name: String,
        kind: &str,
        docstring: String,
        params: Option<&Bound<'_, PyAny>>,
        description: Option<String>,
        returns: Option<&Bound<'_, PyAny>>,
        provider: &str,
    ) -> PyResult<Self> {
        if !func.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "func must be callable, not {}",
                type_name(func)
            )));
        }
        let kind = method_kind(kind)?;
        let params = match params.filter(|p| !p.is_none()) {
            Some(params) => params_arg(params)?,
            None => Vec::new(),
        };
        let returns = match returns.filter(|r| !r.is_none()) {
            Some(schema) => Some(json_from_py(schema, "returns")?),
            None => None,
        };
        // The docstring's first line when not given. A blank docstring
        // has none, and is refused for itself: a stand-in keeps that one
        // problem from being reported again as the description's.
        let description = description.unwrap_or_else(|| {
            let first = docstring.trim().lines().next().unwrap_or_default();
            match first.trim() {
                "" => format!("{name} (no docstring)"),
                first => first.to_string(),
            }
        });
        let spec = MethodSpec {
            name: name.clone(),
            kind,
            description,
            docstring,
            params,
            returns,
        };
        let function = Arc::new(Function {
            func: func.clone().unbind(),
            name: name.clone(),
            kind,
        });
        let method = sandwit::HostMethod::new(provider, spec, move |ctx, args| {
            // Read while the run's task polls this call.
            let run_loop = RUN_LOOP.try_with(Arc::clone).ok();
            function.clone().call(ctx, args, run_loop)
        })
        .map_err(|problems| errors::method_spec_error(py, provider, &name, problems))?;
        Ok(PyHostMethod {
            method,
            func: Some(func.clone().unbind()),
        })
    }

    /// `HostMethod[P, R]`: generic, for annotations, in the function's
    /// parameters and result (the stubs' `Generic[P, R]`).
    #[classmethod]
    fn __class_getitem__<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        item: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = cls.py();
        py.import("types")?
            .getattr("GenericAlias")?
            .call1((cls, item))
    }

    /// The name the AI calls it by.
    #[getter]
    fn name(&self) -> &str {
        &self.method.spec().name
    }

    /// `tool`, `agent`, `behavior` or `multimodal-agent`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.method.spec().kind.as_str()
    }

    /// Who offers it (named in events, errors and handoffs).
    #[getter]
    fn provider(&self) -> &str {
        self.method.provider()
    }

    /// The Python function (None for a tool source's method).
    #[getter]
    fn func(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.func.as_ref().map(|f| f.clone_ref(py))
    }

    /// The checked spec as a dict: name, kind, description, docstring,
    /// params (name, schema, required) and returns, as a plugin manifest's
    /// methods have them.
    #[getter]
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.method.spec())
    }

    /// Calls the function.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match &self.func {
            Some(func) => func.bind(py).call(args, kwargs),
            None => Err(PyTypeError::new_err(format!(
                "`{}` is a method of the tool source `{}`, which the host answers: call it in \
                 a run, or with Toolbox.call",
                self.name(),
                self.method.provider()
            ))),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "HostMethod({}, kind={}, provider={})",
            lit(self.name()),
            lit(self.kind()),
            lit(self.provider())
        )
    }
}

fn method_kind(kind: &str) -> PyResult<MethodKind> {
    Ok(match kind {
        "tool" => MethodKind::Tool,
        "agent" => MethodKind::Agent,
        "behavior" => MethodKind::Behavior,
        "multimodal-agent" => MethodKind::MultimodalAgent,
        other => {
            return Err(PyValueError::new_err(format!(
                "kind must be tool, agent, behavior or multimodal-agent, not {}",
                lit(other)
            )));
        }
    })
}

/// The `params` argument: a list of `{"name", "schema", "required"}`.
fn params_arg(params: &Bound<'_, PyAny>) -> PyResult<Vec<Param>> {
    let mut out = Vec::new();
    for (i, item) in params.try_iter()?.enumerate() {
        let item = item?;
        let dict = item.cast::<PyDict>().map_err(|_| {
            PyTypeError::new_err(format!(
                "params[{i}] must be a dict with name, schema and required, not {}",
                type_name(&item)
            ))
        })?;
        let name: String = dict
            .get_item("name")?
            .ok_or_else(|| PyTypeError::new_err(format!("params[{i}] has no name")))?
            .extract()?;
        let schema = match dict.get_item("schema")? {
            Some(schema) => json_from_py(&schema, &format!("params[{i}]['schema']"))?,
            None => serde_json::json!({}),
        };
        let required = match dict.get_item("required")? {
            Some(required) => required.extract()?,
            None => true,
        };
        out.push(Param {
            name,
            schema,
            required,
        });
    }
    Ok(out)
}

/// The Python function behind a host method.
struct Function {
    func: Py<PyAny>,
    name: String,
    kind: MethodKind,
}

/// What calling the function gave.
enum Started {
    /// Its result (or why there is none).
    Done(Result<MethodResult, String>),
    /// A coroutine, running on a loop; its result comes on `result`.
    Awaiting {
        result: oneshot::Receiver<Result<MethodResult, String>>,
        /// Its `concurrent.futures.Future`.
        future: Py<PyAny>,
    },
}

impl Function {
    /// Answers a call for `ctx` with checked `args`, running coroutines on
    /// `run_loop` (else sandwit's own loop).
    async fn call(
        self: Arc<Self>,
        ctx: AgentCtx,
        args: Value,
        run_loop: Option<Arc<Py<PyAny>>>,
    ) -> Result<MethodResult, String> {
        // Armed before the coroutine is scheduled: a call dropped while
        // the blocking thread schedules it must still cancel it.
        let guard = CancelOnDrop {
            handoff: Arc::default(),
            handle: tokio::runtime::Handle::current(),
        };
        let handoff = guard.handoff.clone();
        let started = tokio::task::spawn_blocking(move || {
            with_python_kept(|py| {
                let started = self.start(py, ctx, args, run_loop.as_deref());
                if let Started::Awaiting { future, .. } = &started {
                    let mut handoff = handoff.lock().unwrap_or_else(|e| e.into_inner());
                    if handoff.dropped {
                        let _ = future.bind(py).call_method0("cancel");
                    } else {
                        handoff.future = Some(future.clone_ref(py));
                    }
                }
                started
            })
        })
        .await
        .map_err(|e| format!("its thread failed: {e}"))?
        .ok_or_else(|| "the Python interpreter is exiting".to_string())?;
        let result = match started {
            Started::Done(result) => result,
            Started::Awaiting { result, .. } => result
                .await
                .unwrap_or_else(|_| Err("its coroutine was cancelled".to_string())),
        };
        guard.disarm();
        result
    }

    /// Calls the function (with the GIL, on a blocking thread).
    fn start(
        self: &Arc<Self>,
        py: Python<'_>,
        ctx: AgentCtx,
        args: Value,
        run_loop: Option<&Py<PyAny>>,
    ) -> Started {
        let called = (|| -> PyResult<Bound<'_, PyAny>> {
            let ctx = Bound::new(py, PyAgentCtx { ctx })?;
            let kwargs = value_to_py(py, &args)?.cast_into::<PyDict>()?;
            self.func.bind(py).call((ctx,), Some(&kwargs))
        })();
        let value = match called {
            Ok(value) => value,
            Err(e) => return Started::Done(Err(self.failure(py, e))),
        };
        match self.schedule(py, &value, run_loop) {
            Ok(Some((result, future))) => Started::Awaiting { result, future },
            Ok(None) => Started::Done(self.result(&value)),
            Err(e) => Started::Done(Err(self.failure(py, e))),
        }
    }

    /// If `value` is a coroutine: runs it on `run_loop` (else sandwit's
    /// own loop) and returns where its result comes and its future.
    #[allow(clippy::type_complexity)]
    fn schedule(
        self: &Arc<Self>,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        run_loop: Option<&Py<PyAny>>,
    ) -> PyResult<Option<(oneshot::Receiver<Result<MethodResult, String>>, Py<PyAny>)>> {
        let is_coroutine = IS_COROUTINE.get_or_try_init(py, || {
            PyResult::Ok(py.import("inspect")?.getattr("iscoroutine")?.unbind())
        })?;
        if !is_coroutine.bind(py).call1((value,))?.is_truthy()? {
            return Ok(None);
        }
        let (tx, rx) = oneshot::channel();
        let tx = Mutex::new(Some(tx));
        let this = self.clone();
        let done = PyCFunction::new_closure(
            py,
            Some(c"done"),
            None,
            move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
                let py = args.py();
                let future = args.get_item(0)?;
                // Cancelled: the call was dropped, nobody waits.
                if future.call_method0("cancelled")?.is_truthy()? {
                    return Ok(());
                }
                let result = match future.call_method0("result") {
                    Ok(value) => this.result(&value),
                    Err(e) => Err(this.failure(py, e)),
                };
                if let Some(tx) = tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = tx.send(result);
                }
                Ok(())
            },
        )?;
        let run_loop = run_loop.map_or_else(|| py.None(), |l| l.clone_ref(py));
        let future = helpers(py)?.call_method1("schedule", (value, run_loop, done))?;
        Ok(Some((rx, future.unbind())))
    }

    /// The function's return value as the method's result, by kind.
    fn result(&self, value: &Bound<'_, PyAny>) -> Result<MethodResult, String> {
        match self.kind {
            MethodKind::Tool => result_from_py(value).map(MethodResult::Tool).map_err(|e| {
                let e = e.value(value.py());
                format!("returned a value that cannot be sent: {e}")
            }),
            MethodKind::Agent | MethodKind::Behavior => {
                let text = value
                    .cast::<PyString>()
                    .map_err(|_| {
                        let article = if self.kind == MethodKind::Agent {
                            "an"
                        } else {
                            "a"
                        };
                        format!(
                            "returned {}: {article} {} method returns a str",
                            type_name(value),
                            self.kind
                        )
                    })?
                    .to_str()
                    .map_err(|_| "returned a str with a lone surrogate (not UTF-8)".to_string())?
                    .to_string();
                Ok(match self.kind {
                    MethodKind::Agent => MethodResult::Agent(text),
                    _ => MethodResult::Behavior(text),
                })
            }
            MethodKind::MultimodalAgent => parts_from_py(value)
                .map(MethodResult::MultimodalAgent)
                .map_err(|e| format!("returned {e}")),
        }
    }

    /// What the run's code is told of an exception the function raised
    /// (`sandwit._methods.failure`: its type and message; the traceback goes
    /// to the `sandwit` logger).
    fn failure(&self, py: Python<'_>, err: PyErr) -> String {
        let told = helpers(py).and_then(|h| {
            h.call_method1("failure", (self.name.as_str(), err.value(py)))?
                .extract::<String>()
        });
        told.unwrap_or_else(|_| format!("raised {err}"))
    }
}

/// A multimodal agent's result: a str (one text part), or a list of parts,
/// each a str, a `ContentPart` or its dict.
fn parts_from_py(value: &Bound<'_, PyAny>) -> Result<Vec<ContentPart>, String> {
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(vec![ContentPart::Text(text.to_string())]);
    }
    if !(value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>()) {
        return Err(format!(
            "{}: a multimodal-agent method returns a list of parts (str, ContentPart or \
             their dicts) or a str",
            type_name(value)
        ));
    }
    let mut parts = Vec::new();
    for (i, item) in value.try_iter().map_err(|e| e.to_string())?.enumerate() {
        let item = item.map_err(|e| e.to_string())?;
        let part = if let Ok(text) = item.cast::<PyString>() {
            Ok(ContentPart::Text(text.to_string()))
        } else if let Ok(part) = item.cast::<PyContentPart>() {
            Ok(part.get().part(item.py()))
        } else if let Ok(dict) = item.cast::<PyDict>() {
            PyContentPart::from_dict(dict).map(|p| p.part(item.py()))
        } else {
            Err(PyTypeError::new_err(format!(
                "a {} is not a part (str, ContentPart or dict)",
                type_name(&item)
            )))
        };
        parts.push(part.map_err(|e| format!("part {i}: {}", e.value(item.py())))?);
    }
    Ok(parts)
}

/// Cancels a coroutine's future if the call waiting for it is dropped
/// first (the run's deadline, a cancelled run), from a blocking thread of
/// the runtime the call ran on: it needs the GIL, and the call may be
/// dropped on a thread of no runtime (with the run's store, later). The
/// call may be dropped while the coroutine is being scheduled: whichever of
/// the two comes second cancels it ([`Handoff`]).
struct CancelOnDrop {
    handoff: Arc<Mutex<Handoff>>,
    handle: tokio::runtime::Handle,
}

/// Between a call and the blocking thread that schedules its coroutine.
#[derive(Default)]
struct Handoff {
    /// The coroutine's `concurrent.futures.Future`, once scheduled.
    future: Option<Py<PyAny>>,
    /// Whether the call was dropped.
    dropped: bool,
}

impl CancelOnDrop {
    /// The call got its answer: nothing to cancel.
    fn disarm(self) {
        self.handoff
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .future = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let future = {
            let mut handoff = self.handoff.lock().unwrap_or_else(|e| e.into_inner());
            handoff.dropped = true;
            handoff.future.take()
        };
        if let Some(future) = future {
            self.handle.spawn_blocking(move || {
                with_python_kept(|py| {
                    let _ = future.bind(py).call_method0("cancel");
                })
            });
        }
    }
}
