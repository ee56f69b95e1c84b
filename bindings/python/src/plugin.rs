//! `sandwit.Plugin`: a plugin a host loaded, whose methods may be called
//! directly.

use pyo3::prelude::*;
use sandwit::Plugin;

use crate::convert::{args_from_py, lit, to_py};
use crate::errors::Failure;
use crate::life::HostHandle;
use crate::tasks::{self, Feed, Job, Stop};
use crate::types::{PyAgentCtx, PyMethodResult, ctx_or_default, result_to_py};

/// A loaded, checked plugin.
#[pyclass(frozen, module = "sandwit", name = "Plugin")]
pub(crate) struct PyPlugin {
    pub(crate) plugin: Plugin,
    /// The host that loaded it: its runtime runs the plugin's calls.
    pub(crate) host: HostHandle,
}

impl PyPlugin {
    fn call_job(
        &self,
        method: String,
        args: Option<&Bound<'_, PyAny>>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<Job<sandwit::MethodResult>> {
        let call = format!("plugin `{}`, method `{method}`", self.plugin.id());
        let args = args_from_py(args, &call)?;
        let ctx = ctx_or_default(ctx);
        let plugin = self.plugin.clone();
        Ok(Box::pin(async move {
            plugin
                .call(&ctx, &method, args)
                .await
                .map_err(Failure::Call)
        }))
    }
}

#[pymethods]
impl PyPlugin {
    /// The plugin's id.
    #[getter]
    fn id(&self) -> &str {
        self.plugin.id()
    }

    /// The component's SHA-256, hex (what a policy pins).
    #[getter]
    fn sha256(&self) -> &str {
        self.plugin.hash()
    }

    /// The checked manifest as a dict (id, name, version, author,
    /// description, methods with kinds, parameter schemas and docstrings,
    /// config_schema, capabilities).
    #[getter]
    fn manifest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.plugin.manifest())
    }

    /// The capabilities it may use: those requested that the policy
    /// grants.
    #[getter]
    fn grants(&self) -> Vec<String> {
        self.plugin.grants().iter().map(|c| c.to_string()).collect()
    }

    /// The component's imports, by name.
    #[getter]
    fn imports(&self) -> Vec<String> {
        self.plugin.imports().to_vec()
    }

    /// Instances made ahead of the calls that need a new one, ready now.
    #[getter]
    fn prepared_instances(&self) -> usize {
        self.plugin.prepared_instances()
    }

    /// Calls `method` with `args` (a dict of parameter names to values) in
    /// a fresh instance, under the host's call limits; returns the typed
    /// result. Raises `CallError`.
    #[pyo3(signature = (method, args=None, *, ctx=None))]
    fn call(
        &self,
        py: Python<'_>,
        method: String,
        args: Option<&Bound<'_, PyAny>>,
        ctx: Option<&Bound<'_, PyAgentCtx>>,
    ) -> PyResult<PyMethodResult> {
        let job = self.call_job(method, args, ctx)?;
        let result = self.host.wait(py, job)?.map_err(|f| f.into_pyerr(py))?;
        PyMethodResult::new(py, &result)
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
        let job = self.call_job(method, args, ctx)?;
        let runtime = self.host.runtime();
        tasks::coroutine(
            py,
            runtime,
            job,
            result_to_py,
            Stop::Abort,
            Feed::default(),
            None,
        )
    }

    fn __repr__(&self) -> String {
        let m = self.plugin.manifest();
        format!("Plugin(id={}, version={})", lit(&m.id), lit(&m.version))
    }
}
