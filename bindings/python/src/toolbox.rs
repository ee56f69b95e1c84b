//! `sandwit.Toolbox`: the methods a run may call (of plugins, and host
//! methods written in Python), and which of them a context sees.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use sandwit::{Plugin, Toolbox};

use crate::convert::lit;
use crate::convert::{self, args_from_py, to_py, type_name};
use crate::errors;
use crate::errors::{Failure, SandwitError};
use crate::life::HostHandle;
use crate::methods::PyHostMethod;
use crate::plugin::PyPlugin;
use crate::tasks::{self, Feed, Job, Stop};
use crate::types::PyAgentCtx;
use crate::types::{PyMethodResult, ctx_or_default, result_to_py};

/// How many per-context sets a set with a `filter` rule keeps: a context
/// whose rule keeps the same methods as an earlier one's gets the same set,
/// so prepared interpreters reuse its method functions.
const MAX_CONTEXT_SETS: usize = 64;

/// The methods a run may call (plugins' and host methods), indexed by
/// name. Reuse one set for many runs: interpreters prepared ahead of runs
/// are made for the latest set.
#[pyclass(frozen, module = "sandwit", name = "Toolbox")]
pub struct PyToolbox {
    set: Toolbox,
    plugins: Vec<Plugin>,
    /// The `Host` whose limits, controls and runtime serve the set's direct
    /// calls (`call`): the one that made it (`Host.toolbox`), else the
    /// one that loaded its first plugin.
    host: Option<HostHandle>,
    methods: Vec<Py<PyHostMethod>>,
    /// Each method's provider and spec (a read-only mapping), in order, as
    /// filters are given them.
    specs: Vec<(Py<PyString>, Py<PyAny>)>,
    /// `filter(ctx, provider, method) -> bool`: the methods a context sees.
    rule: Option<Py<PyAny>>,
    /// The sets the rule made, by the methods they keep.
    by_ctx: Mutex<HashMap<Vec<bool>, Toolbox>>,
}

impl PyToolbox {
    fn make(
        py: Python<'_>,
        set: Toolbox,
        plugins: Vec<Plugin>,
        host: Option<HostHandle>,
        methods: Vec<Py<PyHostMethod>>,
        rule: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let proxy = py.import("types")?.getattr("MappingProxyType")?;
        let specs = set
            .methods()
            .map(|(provider, spec)| {
                let spec = proxy.call1((to_py(py, spec)?,))?;
                Ok((PyString::new(py, provider).unbind(), spec.unbind()))
            })
            .collect::<PyResult<_>>()?;
        Ok(PyToolbox {
            set,
            plugins,
            host,
            methods,
            specs,
            rule,
            by_ctx: Mutex::new(HashMap::new()),
        })
    }

    /// The set `ctx` (else the default context) sees: all of it without a
    /// rule, else the methods the rule keeps for it (asked now, for each
    /// method).
    pub fn for_ctx(
        &self,
        py: Python<'_>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<Toolbox> {
        let Some(rule) = &self.rule else {
            return Ok(self.set.clone());
        };
        let ctx = match ctx {
            Some(ctx) => ctx.clone(),
            None => Bound::new(
                py,
                PyAgentCtx {
                    ctx: ctx_or_default(None),
                },
            )?,
        };
        let rule = rule.bind(py);
        let mut keep = Vec::with_capacity(self.specs.len());
        for (provider, spec) in &self.specs {
            keep.push(rule.call1((&ctx, provider, spec))?.is_truthy()?);
        }
        let mut by_ctx = self.by_ctx.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = by_ctx.get(&keep) {
            return Ok(set.clone());
        }
        let kept: HashSet<&str> = self
            .set
            .methods()
            .zip(&keep)
            .filter(|(_, keep)| **keep)
            .map(|((_, spec), _)| spec.name.as_str())
            .collect();
        let set = self.set.filter(|_, spec| kept.contains(spec.name.as_str()));
        if by_ctx.len() >= MAX_CONTEXT_SETS {
            by_ctx.clear();
        }
        by_ctx.insert(keep, set.clone());
        Ok(set)
    }
}

#[pymethods]
impl PyToolbox {
    /// The methods of `plugins` and the host methods `methods` (after
    /// them); `filter(ctx, provider, method) -> bool`, if given, chooses
    /// the methods each context sees. Raises `ToolboxError` when two
    /// offer a method of the same name, two plugins share an id, or a host
    /// method's provider is a plugin's id.
    #[new]
    #[pyo3(signature = (plugins=None, *, methods=None, filter=None))]
    pub fn new(
        py: Python<'_>,
        plugins: Option<&Bound<'_, PyAny>>,
        methods: Option<&Bound<'_, PyAny>>,
        filter: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let (list, host) = match plugins.filter(|p| !p.is_none()) {
            Some(plugins) => plugins_and_host(plugins)?,
            None => (Vec::new(), None),
        };
        let methods = match methods.filter(|m| !m.is_none()) {
            Some(methods) => methods_arg(methods)?,
            None => Vec::new(),
        };
        let rule = match filter.filter(|f| !f.is_none()) {
            Some(rule) if !rule.is_callable() => {
                return Err(PyTypeError::new_err(format!(
                    "filter must be callable (ctx, provider, method) -> bool, not {}",
                    type_name(rule)
                )));
            }
            rule => rule.map(|r| r.clone().unbind()),
        };
        let host_methods: Vec<sandwit::HostMethod> =
            methods.iter().map(|m| m.get().method.clone()).collect();
        let set = Toolbox::with_host_methods(&list, &host_methods)
            .map_err(|e| errors::toolbox_error(py, &e))?;
        Self::make(py, set, list, host, methods, rule)
    }

    /// The set of the methods `keep(provider, method) -> bool` keeps: the
    /// prompt and the runs given it list and offer only those, and a run's
    /// code cannot call the others at all. `provider` is a plugin's id or a
    /// host method's provider, `method` its spec as a read-only mapping
    /// (name, kind, description, docstring, params, returns). Build it once
    /// per kind of context and keep it. The set's `filter` rule, if any,
    /// still applies.
    fn filter(&self, py: Python<'_>, keep: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mut kept = HashSet::new();
        for (provider, spec) in &self.specs {
            if keep.call1((provider, spec))?.is_truthy()? {
                kept.insert(spec.bind(py).get_item("name")?.extract::<String>()?);
            }
        }
        let set = self.set.filter(|_, spec| kept.contains(&spec.name));
        let providers: HashSet<&str> = set.methods().map(|(provider, _)| provider).collect();
        let plugins = (self.plugins.iter())
            .filter(|p| providers.contains(p.id()))
            .cloned()
            .collect();
        let methods = (self.methods.iter())
            .filter(|m| kept.contains(&m.get().method.spec().name))
            .map(|m| m.clone_ref(py))
            .collect();
        let rule = self.rule.as_ref().map(|r| r.clone_ref(py));
        let host = self.host.clone();
        Self::make(py, set, plugins, host, methods, rule)
    }

    /// Calls `method` (of the methods `ctx` sees) with `args` (a dict of
    /// parameter names to values) directly, with no Python run: for an
    /// application whose model asks for a tool by name, as in an
    /// OpenAI-style tool-call loop (`openai_tools` lists them). Under the
    /// set's host (the one whose `toolbox` made it, else the one that
    /// loaded its first plugin): its call limits and execution controls, a
    /// plugin's method as `Plugin.call` calls it, a host method's function
    /// with its arguments checked. Returns the typed result; raises
    /// `CallError` (kind `unknown_method` for a method the set does not
    /// offer `ctx`), or `SandwitError` for a set with no host.
    #[pyo3(signature = (method, args=None, *, ctx=None))]
    fn call(
        &self,
        py: Python<'_>,
        method: String,
        args: Option<&Bound<'_, PyAny>>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<PyMethodResult> {
        let (job, host) = self.call_job(py, method, args, ctx)?;
        let result = host.wait(py, job)?;
        PyMethodResult::new(py, &result.map_err(|f| f.into_pyerr(py))?)
    }

    /// `call`, awaitable (cancelling it ends the call).
    #[pyo3(signature = (method, args=None, *, ctx=None))]
    fn call_async<'py>(
        &self,
        py: Python<'py>,
        method: String,
        args: Option<&Bound<'_, PyAny>>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (job, host) = self.call_job(py, method, args, ctx)?;
        let runtime = host.runtime();
        let (stop, feed) = (Stop::Abort, Feed::default());
        tasks::coroutine(py, runtime, job, result_to_py, stop, feed, None)
    }

    /// The plugins' ids, in order.
    #[getter]
    fn ids(&self) -> Vec<String> {
        self.plugins.iter().map(|p| p.id().to_string()).collect()
    }

    /// The method names (plugins', then host methods'), in order, before
    /// any `filter` rule.
    #[getter]
    fn methods(&self) -> Vec<String> {
        self.set.methods().map(|(_, m)| m.name.clone()).collect()
    }

    /// The listing an LLM is given (what `sandwit prompt` prints) of the
    /// methods `ctx` sees: each method's Python signature, kind, provider
    /// and docstring, then what the plugins' lifecycle hooks inject for
    /// `ctx` (`ContextSet::prompt`).
    #[pyo3(signature = (ctx=None))]
    fn prompt(&self, py: Python<'_>, ctx: Option<&Bound<'_, PyAgentCtx>>) -> PyResult<String> {
        Ok(self.in_context(py, ctx)?.prompt())
    }

    /// OpenAI function-calling definitions of the methods `ctx` sees: a
    /// list of `{"type": "function", "function": {"name", "description",
    /// "parameters"}}`.
    #[pyo3(signature = (ctx=None))]
    fn openai_tools<'py>(
        &self,
        py: Python<'py>,
        ctx: Option<&Bound<'py, PyAgentCtx>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        convert::json_to_py(py, &self.in_context(py, ctx)?.methods.openai_tools())
    }

    fn __len__(&self) -> usize {
        self.set.methods().count()
    }

    fn __repr__(&self) -> String {
        let ids: Vec<String> = self.plugins.iter().map(|p| lit(p.id())).collect();
        let mut out = format!("Toolbox([{}]", ids.join(", "));
        if !self.methods.is_empty() {
            let names: Vec<String> = (self.methods.iter())
                .map(|m| lit(&m.get().method.spec().name))
                .collect();
            out.push_str(&format!(", methods=[{}]", names.join(", ")));
        }
        if self.rule.is_some() {
            out.push_str(", filter=...");
        }
        out.push(')');
        out
    }
}

impl PyToolbox {
    /// The set as `ctx` (else the default context) sees it: [`for_ctx`]'s
    /// methods, then what its plugins' lifecycle hooks offer and inject
    /// there (asked on the host's runtime, the GIL released). A set with
    /// no host has no plugin with hooks to ask.
    ///
    /// [`for_ctx`]: PyToolbox::for_ctx
    fn in_context(
        &self,
        py: Python<'_>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<sandwit::ContextSet> {
        let set = self.for_ctx(py, ctx)?;
        let Some(host) = &self.host else {
            return Ok(sandwit::ContextSet {
                methods: set,
                injected: Vec::new(),
                failed: Vec::new(),
                lost_prompts: Vec::new(),
            });
        };
        let ctx = ctx_or_default(ctx);
        host.wait(py, async move { set.in_context(&ctx).await })
    }

    /// The set with `host` serving its direct calls.
    pub(crate) fn served_by(mut self, host: HostHandle) -> Self {
        self.host = Some(host);
        self
    }

    /// A direct call's job, and the host that serves it.
    fn call_job(
        &self,
        py: Python<'_>,
        method: String,
        args: Option<&Bound<'_, PyAny>>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<(Job<sandwit::MethodResult>, HostHandle)> {
        let host = self.host.as_ref().ok_or_else(|| {
            SandwitError::new_err(
                "this Toolbox has no Host to call its methods under (their limits and \
                 controls are a host's): make it with host.toolbox(...)",
            )
        })?;
        let set = self.for_ctx(py, ctx)?;
        let call = match set.plugin_for(&method) {
            Some(plugin) => format!("plugin `{}`, method `{method}`", plugin.id()),
            None => format!("method `{method}`"),
        };
        let args = args_from_py(args, &call)?;
        let ctx = ctx_or_default(ctx);
        let core = host.core();
        let job: Job<sandwit::MethodResult> = Box::pin(async move {
            core.call(&set, &ctx, &method, args)
                .await
                .map_err(Failure::Call)
        });
        Ok((job, host.clone()))
    }
}

/// A list (or other iterable) of `Plugin`s.
pub fn plugins_arg(plugins: &Bound<'_, PyAny>) -> PyResult<Vec<Plugin>> {
    plugins_and_host(plugins).map(|(list, _)| list)
}

/// A list (or other iterable, read once) of `Plugin`s, and the `Host` that
/// loaded the first.
fn plugins_and_host(plugins: &Bound<'_, PyAny>) -> PyResult<(Vec<Plugin>, Option<HostHandle>)> {
    if plugins.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("plugins must be a list of Plugins"));
    }
    let (mut list, mut host) = (Vec::new(), None);
    for item in plugins.try_iter()? {
        let item = item?;
        let plugin = item.cast::<PyPlugin>().map_err(|_| {
            PyTypeError::new_err(format!(
                "plugins must be Plugins (from Host.load_plugin), not {}",
                type_name(&item)
            ))
        })?;
        let plugin = plugin.get();
        if host.is_none() {
            host = Some(plugin.host.clone());
        }
        list.push(plugin.plugin.clone());
    }
    Ok((list, host))
}

/// A list (or other iterable) of `HostMethod`s.
fn methods_arg(methods: &Bound<'_, PyAny>) -> PyResult<Vec<Py<PyHostMethod>>> {
    if methods.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "methods must be a list of HostMethods",
        ));
    }
    let mut list = Vec::new();
    for item in methods.try_iter()? {
        let item = item?;
        let method = item.cast::<PyHostMethod>().map_err(|_| {
            PyTypeError::new_err(format!(
                "methods must be HostMethods (from @sandwit.method), not {}",
                type_name(&item)
            ))
        })?;
        list.push(method.clone().unbind());
    }
    Ok(list)
}
