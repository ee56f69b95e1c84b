//! The package's value classes: the agent context, limits, method results
//! and run outcomes.

use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyTuple};

use crate::convert::{lit, to_py, value_to_py};

/// `x` as Python's `repr` writes a float.
pub fn float_lit(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

fn opt_lit(s: &Option<String>) -> String {
    s.as_deref().map_or_else(|| "None".to_string(), lit)
}

/// A duration from seconds given in Python.
pub(crate) fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    if s > 0.0
        && let Ok(d) = Duration::try_from_secs_f64(s)
    {
        return Ok(d);
    }
    Err(PyValueError::new_err(format!(
        "{what} must be a positive number of seconds, not {s}"
    )))
}

/// Bytes from MiB given in Python.
fn mib(what: &str, m: u64) -> PyResult<usize> {
    match usize::try_from(m).ok().and_then(|m| m.checked_mul(1 << 20)) {
        Some(bytes) if m > 0 => Ok(bytes),
        _ => Err(PyValueError::new_err(format!(
            "{what} must be a positive number of MiB, not {m}"
        ))),
    }
}

// ---- AgentCtx --------------------------------------------------------------

/// Who and where the AI code runs for; every method call receives it.
#[pyclass(frozen, eq, module = "sandwit", name = "AgentCtx")]
#[derive(Clone, PartialEq)]
pub struct PyAgentCtx {
    pub ctx: sandwit::AgentCtx,
}

#[pymethods]
impl PyAgentCtx {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "AgentCtx", self.state(py)?)
    }

    #[new]
    #[pyo3(signature = (chat_key, user_id=None, *, channel_id=None, channel_name=None, channel_type=None, adapter_key=None))]
    fn new(
        chat_key: String,
        user_id: Option<String>,
        channel_id: Option<String>,
        channel_name: Option<String>,
        channel_type: Option<String>,
        adapter_key: Option<String>,
    ) -> Self {
        PyAgentCtx {
            ctx: sandwit::AgentCtx {
                chat_key,
                user_id,
                channel_id,
                channel_name,
                channel_type,
                adapter_key,
                namespace: None,
            },
        }
    }

    #[getter]
    fn chat_key(&self) -> &str {
        &self.ctx.chat_key
    }

    #[getter]
    fn user_id(&self) -> Option<&str> {
        self.ctx.user_id.as_deref()
    }

    #[getter]
    fn channel_id(&self) -> Option<&str> {
        self.ctx.channel_id.as_deref()
    }

    #[getter]
    fn channel_name(&self) -> Option<&str> {
        self.ctx.channel_name.as_deref()
    }

    #[getter]
    fn channel_type(&self) -> Option<&str> {
        self.ctx.channel_type.as_deref()
    }

    #[getter]
    fn adapter_key(&self) -> Option<&str> {
        self.ctx.adapter_key.as_deref()
    }

    fn __repr__(&self) -> String {
        let c = &self.ctx;
        let mut out = format!("AgentCtx({}", lit(&c.chat_key));
        for (name, value) in [
            ("user_id", &c.user_id),
            ("channel_id", &c.channel_id),
            ("channel_name", &c.channel_name),
            ("channel_type", &c.channel_type),
            ("adapter_key", &c.adapter_key),
        ] {
            if value.is_some() {
                out.push_str(&format!(", {name}={}", opt_lit(value)));
            }
        }
        out.push(')');
        out
    }
}

/// The context of a call or run: `ctx`, else the chat `default`.
pub fn ctx_or_default(ctx: Option<&Bound<'_, PyAgentCtx>>) -> sandwit::AgentCtx {
    ctx.map_or_else(
        || sandwit::AgentCtx::new("default"),
        |c| c.get().ctx.clone(),
    )
}

// ---- RunLimits -------------------------------------------------------------

/// Limits on one Python run.
#[pyclass(frozen, eq, module = "sandwit", name = "RunLimits")]
#[derive(Clone)]
pub struct PyRunLimits {
    pub limits: sandwit::RunLimits,
    /// The fields given when it was made: a run's limits override only
    /// those of the interpreter's defaults ([`PyRunLimits::over`]).
    given: Given,
}

/// A fuel budget as Python writes it: `None` for none.
fn fuel_lit(fuel: Option<u64>) -> String {
    fuel.map_or_else(|| "None".to_string(), |f| f.to_string())
}

/// Which of [`PyRunLimits`]' fields were given.
#[derive(Clone, Copy, Default)]
struct Given {
    time: bool,
    memory: bool,
    fuel: bool,
    calls: bool,
    output: bool,
    events: bool,
    event_bytes: bool,
}

/// Limits are equal when their values are, whichever fields were given.
impl PartialEq for PyRunLimits {
    fn eq(&self, other: &Self) -> bool {
        self.limits == other.limits
    }
}

impl PyRunLimits {
    /// `base` with the fields this one was given.
    pub fn over(&self, base: &sandwit::RunLimits) -> sandwit::RunLimits {
        let (g, l) = (self.given, &self.limits);
        sandwit::RunLimits {
            time: if g.time { l.time } else { base.time },
            memory_bytes: if g.memory {
                l.memory_bytes
            } else {
                base.memory_bytes
            },
            fuel: if g.fuel { l.fuel } else { base.fuel },
            max_calls: if g.calls { l.max_calls } else { base.max_calls },
            max_output_bytes: if g.output {
                l.max_output_bytes
            } else {
                base.max_output_bytes
            },
            max_events: if g.events {
                l.max_events
            } else {
                base.max_events
            },
            max_event_bytes: if g.event_bytes {
                l.max_event_bytes
            } else {
                base.max_event_bytes
            },
        }
    }

    /// Limits with every field given.
    pub fn whole(limits: sandwit::RunLimits) -> Self {
        let all = Given {
            time: true,
            memory: true,
            fuel: true,
            calls: true,
            output: true,
            events: true,
            event_bytes: true,
        };
        PyRunLimits { limits, given: all }
    }
}

#[pymethods]
impl PyRunLimits {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "RunLimits", self.state(py)?)
    }

    #[new]
    #[pyo3(signature = (*, timeout_s=None, memory_mib=None, fuel=None, max_calls=None, max_output_bytes=None, max_events=None, max_event_bytes=None))]
    fn new(
        timeout_s: Option<f64>,
        memory_mib: Option<u64>,
        fuel: Option<u64>,
        max_calls: Option<u32>,
        max_output_bytes: Option<usize>,
        max_events: Option<usize>,
        max_event_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let d = sandwit::RunLimits::default();
        let given = Given {
            time: timeout_s.is_some(),
            memory: memory_mib.is_some(),
            fuel: fuel.is_some(),
            calls: max_calls.is_some(),
            output: max_output_bytes.is_some(),
            events: max_events.is_some(),
            event_bytes: max_event_bytes.is_some(),
        };
        Ok(PyRunLimits {
            given,
            limits: sandwit::RunLimits {
                fuel: fuel.or(d.fuel),
                time: timeout_s.map_or(Ok(d.time), |s| seconds("timeout_s", s))?,
                memory_bytes: memory_mib.map_or(Ok(d.memory_bytes), |m| mib("memory_mib", m))?,
                max_output_bytes: max_output_bytes.unwrap_or(d.max_output_bytes),
                max_calls: max_calls.unwrap_or(d.max_calls),
                max_events: max_events.unwrap_or(d.max_events),
                max_event_bytes: max_event_bytes.unwrap_or(d.max_event_bytes),
            },
        })
    }

    #[getter]
    fn timeout_s(&self) -> f64 {
        self.limits.time.as_secs_f64()
    }

    #[getter]
    fn memory_mib(&self) -> f64 {
        self.limits.memory_bytes as f64 / f64::from(1 << 20)
    }

    #[getter]
    fn fuel(&self) -> Option<u64> {
        self.limits.fuel
    }

    #[getter]
    fn max_calls(&self) -> u32 {
        self.limits.max_calls
    }

    #[getter]
    fn max_output_bytes(&self) -> usize {
        self.limits.max_output_bytes
    }

    #[getter]
    fn max_events(&self) -> usize {
        self.limits.max_events
    }

    #[getter]
    fn max_event_bytes(&self) -> usize {
        self.limits.max_event_bytes
    }

    fn __repr__(&self) -> String {
        let l = &self.limits;
        format!(
            "RunLimits(timeout_s={}, memory_mib={}, fuel={}, max_calls={}, max_output_bytes={}, \
             max_events={}, max_event_bytes={})",
            float_lit(self.timeout_s()),
            float_lit(self.memory_mib()),
            fuel_lit(l.fuel),
            l.max_calls,
            l.max_output_bytes,
            l.max_events,
            l.max_event_bytes
        )
    }
}

// ---- CallLimits ------------------------------------------------------------

/// Limits on every plugin call (a direct call, or one a run makes, within
/// what is left of the run's fuel and time).
#[pyclass(frozen, eq, module = "sandwit", name = "CallLimits")]
#[derive(Clone, PartialEq)]
pub struct PyCallLimits {
    pub limits: sandwit::CallLimits,
}

#[pymethods]
impl PyCallLimits {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "CallLimits", self.state(py)?)
    }

    #[new]
    #[pyo3(signature = (*, timeout_s=None, memory_mib=None, fuel=None, table_elements=None, max_core_instances=None, max_value_bytes=None, max_value_nodes=None, max_value_depth=None, max_event_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        timeout_s: Option<f64>,
        memory_mib: Option<u64>,
        fuel: Option<u64>,
        table_elements: Option<usize>,
        max_core_instances: Option<usize>,
        max_value_bytes: Option<usize>,
        max_value_nodes: Option<usize>,
        max_value_depth: Option<usize>,
        max_event_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let d = sandwit::CallLimits::default();
        Ok(PyCallLimits {
            limits: sandwit::CallLimits {
                fuel: fuel.or(d.fuel),
                time: timeout_s.map_or(Ok(d.time), |s| seconds("timeout_s", s))?,
                memory_bytes: memory_mib.map_or(Ok(d.memory_bytes), |m| mib("memory_mib", m))?,
                table_elements: table_elements.unwrap_or(d.table_elements),
                max_core_instances: max_core_instances.unwrap_or(d.max_core_instances),
                max_value_bytes: max_value_bytes.unwrap_or(d.max_value_bytes),
                max_value_nodes: max_value_nodes.unwrap_or(d.max_value_nodes),
                max_value_depth: max_value_depth.unwrap_or(d.max_value_depth),
                max_event_bytes: max_event_bytes.unwrap_or(d.max_event_bytes),
            },
        })
    }

    #[getter]
    fn timeout_s(&self) -> f64 {
        self.limits.time.as_secs_f64()
    }

    #[getter]
    fn memory_mib(&self) -> f64 {
        self.limits.memory_bytes as f64 / f64::from(1 << 20)
    }

    #[getter]
    fn fuel(&self) -> Option<u64> {
        self.limits.fuel
    }

    #[getter]
    fn table_elements(&self) -> usize {
        self.limits.table_elements
    }

    #[getter]
    fn max_core_instances(&self) -> usize {
        self.limits.max_core_instances
    }

    #[getter]
    fn max_value_bytes(&self) -> usize {
        self.limits.max_value_bytes
    }

    #[getter]
    fn max_value_nodes(&self) -> usize {
        self.limits.max_value_nodes
    }

    #[getter]
    fn max_value_depth(&self) -> usize {
        self.limits.max_value_depth
    }

    #[getter]
    fn max_event_bytes(&self) -> usize {
        self.limits.max_event_bytes
    }

    fn __repr__(&self) -> String {
        let l = &self.limits;
        format!(
            "CallLimits(timeout_s={}, memory_mib={}, fuel={}, table_elements={}, \
             max_core_instances={}, max_value_bytes={}, max_value_nodes={}, \
             max_value_depth={}, max_event_bytes={})",
            float_lit(self.timeout_s()),
            float_lit(self.memory_mib()),
            fuel_lit(l.fuel),
            l.table_elements,
            l.max_core_instances,
            l.max_value_bytes,
            l.max_value_nodes,
            l.max_value_depth,
            l.max_event_bytes
        )
    }
}

// ---- MethodResult and ContentPart -------------------------------------------

/// One part of a multimodal agent's result.
#[pyclass(frozen, module = "sandwit", name = "ContentPart")]
pub struct PyContentPart {
    /// `text`, `image` or `image_url`.
    #[pyo3(get, name = "type")]
    kind: &'static str,
    #[pyo3(get)]
    text: Option<String>,
    #[pyo3(get)]
    mime_type: Option<String>,
    #[pyo3(get)]
    data: Option<Py<PyBytes>>,
    #[pyo3(get)]
    url: Option<String>,
}

impl PyContentPart {
    fn from_part(py: Python<'_>, part: &sandwit::ContentPart) -> Self {
        let empty = PyContentPart {
            kind: "text",
            text: None,
            mime_type: None,
            data: None,
            url: None,
        };
        match part {
            sandwit::ContentPart::Text(t) => PyContentPart {
                text: Some(t.clone()),
                ..empty
            },
            sandwit::ContentPart::Image(m) => PyContentPart {
                kind: "image",
                mime_type: Some(m.mime_type.clone()),
                data: Some(PyBytes::new(py, &m.data).unbind()),
                ..empty
            },
            sandwit::ContentPart::ImageUrl(u) => PyContentPart {
                kind: "image_url",
                url: Some(u.clone()),
                ..empty
            },
        }
    }

    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("type", self.kind)?;
        match self.kind {
            "text" => d.set_item("text", &self.text)?,
            "image" => {
                d.set_item("mime_type", &self.mime_type)?;
                d.set_item("data", &self.data)?;
            }
            _ => d.set_item("url", &self.url)?,
        }
        Ok(d)
    }

    /// The part, for a host method's result.
    pub fn part(&self, py: Python<'_>) -> sandwit::ContentPart {
        let text = |t: &Option<String>| t.clone().unwrap_or_default();
        match self.kind {
            "text" => sandwit::ContentPart::Text(text(&self.text)),
            "image" => sandwit::ContentPart::Image(sandwit::Media {
                mime_type: text(&self.mime_type),
                data: self
                    .data
                    .as_ref()
                    .map_or_else(Vec::new, |d| d.bind(py).as_bytes().to_vec()),
            }),
            _ => sandwit::ContentPart::ImageUrl(text(&self.url)),
        }
    }

    /// A part from its dict (`to_dict`'s form).
    pub fn from_dict(dict: &Bound<'_, PyDict>) -> PyResult<Self> {
        let field = |name: &str| dict.get_item(name);
        let kind: String = field("type")?
            .ok_or_else(|| PyValueError::new_err("a part's dict has no 'type'"))?
            .extract()?;
        for key in dict.keys() {
            let key: String = key.extract()?;
            if !["type", "text", "mime_type", "data", "url"].contains(&key.as_str()) {
                return Err(PyValueError::new_err(format!(
                    "a part's dict has an unknown key {}",
                    lit(&key)
                )));
            }
        }
        let text = |name: &str| -> PyResult<Option<String>> {
            field(name)?.map(|v| v.extract()).transpose()
        };
        let data = field("data")?.map(|d| d.extract::<Vec<u8>>()).transpose()?;
        Self::make(
            dict.py(),
            &kind,
            text("text")?,
            text("mime_type")?,
            data,
            text("url")?,
        )
    }

    fn make(
        py: Python<'_>,
        kind: &str,
        text: Option<String>,
        mime_type: Option<String>,
        data: Option<Vec<u8>>,
        url: Option<String>,
    ) -> PyResult<Self> {
        let given = [
            ("text", text.is_some()),
            ("mime_type", mime_type.is_some()),
            ("data", data.is_some()),
            ("url", url.is_some()),
        ];
        let (kind, fields): (&'static str, &[&str]) = match kind {
            "text" => ("text", &["text"]),
            "image" => ("image", &["mime_type", "data"]),
            "image_url" => ("image_url", &["url"]),
            other => {
                return Err(PyValueError::new_err(format!(
                    "a part's type is text, image or image_url, not {}",
                    lit(other)
                )));
            }
        };
        for (name, is_given) in given {
            if is_given != fields.contains(&name) {
                return Err(PyValueError::new_err(format!(
                    "a part of type {kind} takes {}",
                    fields.join(" and ")
                )));
            }
        }
        Ok(PyContentPart {
            kind,
            text,
            mime_type,
            data: data.map(|d| PyBytes::new(py, &d).unbind()),
            url,
        })
    }
}

#[pymethods]
impl PyContentPart {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "ContentPart", self.state(py)?)
    }

    /// Equal to another of its class with equal fields.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        state_eq(py, |v: &PyContentPart| v.state(py), self, other)
    }

    /// A part for a multimodal agent's result: `ContentPart("text",
    /// text=...)`, `ContentPart("image", mime_type=..., data=...)` or
    /// `ContentPart("image_url", url=...)`.
    #[new]
    #[pyo3(signature = (r#type, /, *, text=None, mime_type=None, data=None, url=None))]
    fn new(
        py: Python<'_>,
        r#type: &str,
        text: Option<String>,
        mime_type: Option<String>,
        data: Option<Vec<u8>>,
        url: Option<String>,
    ) -> PyResult<Self> {
        Self::make(py, r#type, text, mime_type, data, url)
    }

    /// The part as a dict: `{"type": "text", "text": ...}`, `{"type":
    /// "image", "mime_type": ..., "data": bytes}` or `{"type": "image_url",
    /// "url": ...}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.kind {
            "text" => format!("ContentPart(type='text', text={})", opt_lit(&self.text)),
            "image" => format!(
                "ContentPart(type='image', mime_type={}, data=<{} bytes>)",
                opt_lit(&self.mime_type),
                self.data
                    .as_ref()
                    .map_or(0, |d| d.bind(py).as_bytes().len())
            ),
            _ => format!("ContentPart(type='image_url', url={})", opt_lit(&self.url)),
        }
    }
}

/// A method's typed result.
#[pyclass(frozen, module = "sandwit", name = "MethodResult")]
pub struct PyMethodResult {
    /// `tool`, `agent`, `behavior` or `multimodal-agent`.
    #[pyo3(get)]
    kind: &'static str,
    /// A tool's value.
    #[pyo3(get)]
    value: Py<PyAny>,
    /// An agent's or behavior's text.
    #[pyo3(get)]
    text: Option<String>,
    /// A multimodal agent's parts.
    #[pyo3(get)]
    parts: Option<Py<PyList>>,
}

impl PyMethodResult {
    pub fn new(py: Python<'_>, result: &sandwit::MethodResult) -> PyResult<Self> {
        use sandwit::MethodResult as R;
        let kind = result.kind().as_str();
        let none = || py.None();
        Ok(match result {
            R::Tool(v) => PyMethodResult {
                kind,
                value: value_to_py(py, v)?.unbind(),
                text: None,
                parts: None,
            },
            R::Agent(t) | R::Behavior(t) => PyMethodResult {
                kind,
                value: none(),
                text: Some(t.clone()),
                parts: None,
            },
            R::MultimodalAgent(parts) => {
                let list = PyList::empty(py);
                for part in parts {
                    list.append(Py::new(py, PyContentPart::from_part(py, part))?)?;
                }
                PyMethodResult {
                    kind,
                    value: none(),
                    text: None,
                    parts: Some(list.unbind()),
                }
            }
        })
    }

    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("kind", self.kind)?;
        match self.kind {
            "tool" => d.set_item("value", &self.value)?,
            "agent" | "behavior" => d.set_item("text", &self.text)?,
            _ => {
                let parts = PyList::empty(py);
                if let Some(list) = &self.parts {
                    for part in list.bind(py).iter() {
                        parts.append(part.cast::<PyContentPart>()?.get().dict(py)?)?;
                    }
                }
                d.set_item("parts", parts)?;
            }
        }
        Ok(d)
    }
}

/// A method's result as a Python `MethodResult` (what a call's coroutine
/// completes with).
pub(crate) fn result_to_py(py: Python<'_>, result: sandwit::MethodResult) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, PyMethodResult::new(py, &result)?)?.into_any())
}

#[pymethods]
impl PyMethodResult {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "MethodResult", self.state(py)?)
    }

    /// Equal to another of its class with equal fields.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        state_eq(py, |v: &PyMethodResult| v.state(py), self, other)
    }

    /// The result as a dict: `{"kind": "tool", "value": ...}`, `{"kind":
    /// "agent" or "behavior", "text": ...}` or `{"kind":
    /// "multimodal-agent", "parts": [part dicts]}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match self.kind {
            "tool" => format!(
                "MethodResult(kind='tool', value={})",
                self.value.bind(py).repr()?
            ),
            "agent" | "behavior" => format!(
                "MethodResult(kind='{}', text={})",
                self.kind,
                opt_lit(&self.text)
            ),
            _ => format!(
                "MethodResult(kind='multimodal-agent', parts={})",
                self.parts.as_ref().map_or(Ok(String::from("[]")), |p| p
                    .bind(py)
                    .repr()
                    .map(|r| r.to_string()))?
            ),
        })
    }
}

// ---- RunOutcome and its parts ----------------------------------------------

/// The Python exception that escaped a run's code: a record, not an
/// exception object.
#[pyclass(frozen, module = "sandwit", name = "RunError")]
pub struct PyRunError {
    /// The exception's type, e.g. `ZeroDivisionError`.
    #[pyo3(get, name = "type")]
    type_name: String,
    #[pyo3(get)]
    message: String,
    /// The line of the code it was raised at, if it was raised there.
    #[pyo3(get)]
    line: Option<u32>,
    /// The traceback, restricted to the code's own frames.
    #[pyo3(get)]
    traceback: String,
}

#[pymethods]
impl PyRunError {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "RunError", self.state(py)?)
    }

    /// Equal to another of its class with equal fields.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        state_eq(py, |v: &PyRunError| v.state(py), self, other)
    }

    fn __repr__(&self) -> String {
        format!(
            "RunError(type={}, message={}, line={})",
            lit(&self.type_name),
            lit(&self.message),
            self.line.map_or("None".to_string(), |l| l.to_string())
        )
    }
}

/// The limit that stopped a run.
#[pyclass(frozen, module = "sandwit", name = "LimitHit")]
pub struct PyLimitHit {
    /// `fuel`, `time`, `memory`, `value_size`, `output`, `calls`, `events`,
    /// `instances`, `rate`, `budget`, `workspace` or `queue`.
    #[pyo3(get)]
    kind: String,
    #[pyo3(get)]
    message: String,
}

#[pymethods]
impl PyLimitHit {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "LimitHit", self.state(py)?)
    }

    /// Equal to another of its class with equal fields.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        state_eq(py, |v: &PyLimitHit| v.state(py), self, other)
    }

    fn __repr__(&self) -> String {
        format!(
            "LimitHit(kind={}, message={})",
            lit(&self.kind),
            lit(&self.message)
        )
    }
}

/// The agent handoff that ended a run.
#[pyclass(frozen, module = "sandwit", name = "Handoff")]
pub struct PyHandoff {
    #[pyo3(get)]
    plugin: String,
    #[pyo3(get)]
    method: String,
    #[pyo3(get)]
    result: Py<PyMethodResult>,
}

#[pymethods]
impl PyHandoff {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "Handoff", self.state(py)?)
    }

    /// Equal to another of its class with equal fields.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        state_eq(py, |v: &PyHandoff| v.state(py), self, other)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Handoff(plugin={}, method={}, result={})",
            lit(&self.plugin),
            lit(&self.method),
            self.result.bind(py).repr()?
        ))
    }
}

/// Everything a run gives back.
#[pyclass(frozen, module = "sandwit", name = "RunOutcome")]
pub struct PyRunOutcome {
    /// `ok`, `error`, `agent_handoff`, `limit_exceeded`, `cancelled` or
    /// `paused`.
    #[pyo3(get)]
    status: String,
    #[pyo3(get)]
    stdout: String,
    #[pyo3(get)]
    stderr: String,
    #[pyo3(get)]
    error: Option<Py<PyRunError>>,
    #[pyo3(get)]
    limit: Option<Py<PyLimitHit>>,
    #[pyo3(get)]
    handoff: Option<Py<PyHandoff>>,
    /// The events as dicts, in order (the JSON of `sandwit::Event`).
    #[pyo3(get)]
    events: Py<PyList>,
    /// The files of the chat's workspace the run created or changed, as
    /// dicts `{"path", "size"}` (a scientific sandbox with workspaces;
    /// empty otherwise).
    #[pyo3(get)]
    files: Py<PyList>,
    /// The value of the code's last expression, else of its `result`
    /// variable; None for none (and for any status but `ok`).
    #[pyo3(get)]
    result: Py<PyAny>,
    #[pyo3(get)]
    fuel_used: u64,
    /// Milliseconds from when the run got a run slot to its end.
    #[pyo3(get)]
    elapsed_ms: f64,
    /// Milliseconds it waited for a run slot before that.
    #[pyo3(get)]
    queued_ms: f64,
    /// The session the run was in, if it named one: a dict `{"name",
    /// "started", "runs", "memory_bytes", "kept"}` (`kept` False: the run
    /// stopped midway, which ended the session); else None.
    #[pyo3(get)]
    session: Py<PyAny>,
    /// For status `paused`, the call the run waits at: a dict `{"plugin",
    /// "method", "args", "token", "expires_at"}` (`Host.resume(token, ...)`
    /// continues it); else None.
    #[pyo3(get)]
    paused: Py<PyAny>,
}

impl PyRunOutcome {
    pub fn new(py: Python<'_>, outcome: &sandwit::RunOutcome) -> PyResult<Self> {
        let status = json_name(&outcome.status);
        let error = match &outcome.error {
            Some(e) => Some(Py::new(
                py,
                PyRunError {
                    type_name: e.type_name.clone(),
                    message: e.message.clone(),
                    line: e.line,
                    traceback: e.traceback.clone(),
                },
            )?),
            None => None,
        };
        let limit = match &outcome.limit {
            Some(l) => Some(Py::new(
                py,
                PyLimitHit {
                    kind: json_name(&l.kind),
                    message: l.message.clone(),
                },
            )?),
            None => None,
        };
        let handoff = match &outcome.handoff {
            Some(h) => Some(Py::new(
                py,
                PyHandoff {
                    plugin: h.plugin.clone(),
                    method: h.method.clone(),
                    result: Py::new(py, PyMethodResult::new(py, &h.result)?)?,
                },
            )?),
            None => None,
        };
        let events = to_py(py, &outcome.events)?.cast_into::<PyList>()?.unbind();
        let files = to_py(py, &outcome.files)?.cast_into::<PyList>()?.unbind();
        Ok(PyRunOutcome {
            status,
            stdout: outcome.stdout.clone(),
            stderr: outcome.stderr.clone(),
            error,
            limit,
            handoff,
            events,
            files,
            result: match &outcome.result {
                Some(value) => value_to_py(py, value)?.unbind(),
                None => py.None(),
            },
            fuel_used: outcome.fuel_used,
            elapsed_ms: outcome.elapsed.as_secs_f64() * 1e3,
            queued_ms: outcome.queued.as_secs_f64() * 1e3,
            session: to_py(py, &outcome.session)?.unbind(),
            paused: match &outcome.paused {
                Some(p) => paused_to_py(py, p)?,
                None => py.None(),
            },
        })
    }
}

#[pymethods]
impl PyRunOutcome {
    /// Pickles it (and copies it) by value.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, "RunOutcome", self.state(py)?)
    }

    /// Equal to another of its class with equal fields.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        state_eq(py, |v: &PyRunOutcome| v.state(py), self, other)
    }

    /// The outcome as a dict of plain values (what `sandwit run --json`
    /// prints, with `elapsed_ms` for `ms` and a multimodal handoff's image
    /// data as bytes).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("status", &self.status)?;
        d.set_item("result", self.result.bind(py))?;
        d.set_item("stdout", &self.stdout)?;
        d.set_item("stderr", &self.stderr)?;
        let error = match &self.error {
            Some(e) => {
                let e = e.get();
                let ed = PyDict::new(py);
                ed.set_item("type", &e.type_name)?;
                ed.set_item("message", &e.message)?;
                ed.set_item("line", e.line)?;
                ed.set_item("traceback", &e.traceback)?;
                Some(ed)
            }
            None => None,
        };
        d.set_item("error", error)?;
        let limit = match &self.limit {
            Some(l) => {
                let l = l.get();
                let ld = PyDict::new(py);
                ld.set_item("kind", &l.kind)?;
                ld.set_item("message", &l.message)?;
                Some(ld)
            }
            None => None,
        };
        d.set_item("limit", limit)?;
        d.set_item("files", self.files.bind(py))?;
        d.set_item("events", self.events.bind(py))?;
        let handoff = match &self.handoff {
            Some(h) => {
                let h = h.get();
                let hd = PyDict::new(py);
                hd.set_item("plugin", &h.plugin)?;
                hd.set_item("method", &h.method)?;
                hd.set_item("result", h.result.get().dict(py)?)?;
                Some(hd)
            }
            None => None,
        };
        d.set_item("handoff", handoff)?;
        d.set_item("fuel_used", self.fuel_used)?;
        d.set_item("elapsed_ms", self.elapsed_ms)?;
        d.set_item("queued_ms", self.queued_ms)?;
        d.set_item("session", self.session.bind(py))?;
        d.set_item("paused", self.paused.bind(py))?;
        Ok(d)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut out = format!(
            "RunOutcome(status={}, stdout={}",
            lit(&self.status),
            lit(&self.stdout)
        );
        if !self.stderr.is_empty() {
            out.push_str(&format!(", stderr={}", lit(&self.stderr)));
        }
        if let Some(e) = &self.error {
            out.push_str(&format!(", error={}", e.bind(py).repr()?));
        }
        if let Some(l) = &self.limit {
            out.push_str(&format!(", limit={}", l.bind(py).repr()?));
        }
        if let Some(h) = &self.handoff {
            out.push_str(&format!(", handoff={}", h.bind(py).repr()?));
        }
        if !self.result.is_none(py) {
            out.push_str(&format!(", result={}", self.result.bind(py).repr()?));
        }
        out.push_str(&format!(
            ", events=<{}>, fuel_used={}, elapsed_ms={:.3})",
            self.events.bind(py).len(),
            self.fuel_used,
            self.elapsed_ms
        ));
        Ok(out)
    }
}

/// A unit-like enum's name as it serialises (`limit_exceeded`, `value_size`).
fn json_name(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => format!("{other:?}"),
    }
}

// ---- Cancel ----------------------------------------------------------------

/// A handle that ends the runs it is given to (`cancel=`), from any thread:
/// each ends with status `cancelled`. Cancelling is final: a run given a
/// cancelled handle ends at once.
#[pyclass(frozen, module = "sandwit", name = "Cancel")]
pub struct PyCancel {
    pub cancel: sandwit::Cancel,
}

#[pymethods]
impl PyCancel {
    #[new]
    fn new() -> Self {
        PyCancel {
            cancel: sandwit::Cancel::new(),
        }
    }

    /// Ends every run given this handle, and every later one.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Whether `cancel()` was called.
    #[getter]
    fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    fn __repr__(&self) -> String {
        format!(
            "Cancel(cancelled={})",
            if self.cancel.is_cancelled() {
                "True"
            } else {
                "False"
            }
        )
    }
}

// ---- pickling and equality ---------------------------------------------------

/// What `__reduce__` returns: `sandwit._sandwit._restore(name, state)`
/// makes the value again.
fn reduce<'py>(
    py: Python<'py>,
    name: &str,
    state: Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyTuple>> {
    let restore = py.import("sandwit._sandwit")?.getattr("_restore")?;
    (restore, (name, state)).into_pyobject(py)
}

/// `a.state() == b.state()` when `other` is of `a`'s class, else
/// `NotImplemented`.
fn state_eq<'py, T>(
    py: Python<'py>,
    state: impl Fn(&T) -> PyResult<Bound<'py, PyTuple>>,
    this: &T,
    other: &Bound<'py, PyAny>,
) -> PyResult<Py<PyAny>>
where
    T: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync,
{
    match other.cast::<T>() {
        Ok(other) => {
            let equal = state(this)?.eq(state(other.get())?)?;
            Ok(PyBool::new(py, equal).to_owned().into_any().unbind())
        }
        Err(_) => Ok(py.NotImplemented()),
    }
}

/// A state's field `i`.
fn item<'py, T: FromPyObjectOwned<'py>>(state: &Bound<'py, PyTuple>, i: usize) -> PyResult<T> {
    state.get_item(i)?.extract().map_err(Into::into)
}

/// Makes a value of the class `name` again from its `__reduce__` state
/// (pickling).
#[pyfunction]
pub fn _restore(py: Python<'_>, name: &str, state: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
    let s = state;
    let duration = |i: usize| -> PyResult<Duration> {
        let (secs, nanos): (u64, u32) = item(s, i)?;
        Ok(Duration::new(secs, nanos))
    };
    Ok(match name {
        "AgentCtx" => Py::new(
            py,
            PyAgentCtx {
                ctx: sandwit::AgentCtx {
                    chat_key: item(s, 0)?,
                    user_id: item(s, 1)?,
                    channel_id: item(s, 2)?,
                    channel_name: item(s, 3)?,
                    channel_type: item(s, 4)?,
                    adapter_key: item(s, 5)?,
                    namespace: item(s, 6)?,
                },
            },
        )?
        .into_any(),
        "RunLimits" => {
            let g: [bool; 7] = item(s, 7)?;
            Py::new(
                py,
                PyRunLimits {
                    limits: sandwit::RunLimits {
                        time: duration(0)?,
                        memory_bytes: item(s, 1)?,
                        fuel: item(s, 2)?,
                        max_calls: item(s, 3)?,
                        max_output_bytes: item(s, 4)?,
                        max_events: item(s, 5)?,
                        max_event_bytes: item(s, 6)?,
                    },
                    given: Given {
                        time: g[0],
                        memory: g[1],
                        fuel: g[2],
                        calls: g[3],
                        output: g[4],
                        events: g[5],
                        event_bytes: g[6],
                    },
                },
            )?
            .into_any()
        }
        "CallLimits" => Py::new(
            py,
            PyCallLimits {
                limits: sandwit::CallLimits {
                    time: duration(0)?,
                    memory_bytes: item(s, 1)?,
                    fuel: item(s, 2)?,
                    table_elements: item(s, 3)?,
                    max_core_instances: item(s, 4)?,
                    max_value_bytes: item(s, 5)?,
                    max_value_nodes: item(s, 6)?,
                    max_value_depth: item(s, 7)?,
                    max_event_bytes: item(s, 8)?,
                },
            },
        )?
        .into_any(),
        "ContentPart" => {
            let kind: String = item(s, 0)?;
            let data: Option<Vec<u8>> = item(s, 3)?;
            Py::new(
                py,
                PyContentPart::make(py, &kind, item(s, 1)?, item(s, 2)?, data, item(s, 4)?)?,
            )?
            .into_any()
        }
        "MethodResult" => {
            let kind: String = item(s, 0)?;
            let kind = match kind.as_str() {
                "tool" => "tool",
                "agent" => "agent",
                "behavior" => "behavior",
                "multimodal-agent" => "multimodal-agent",
                other => {
                    return Err(PyValueError::new_err(format!(
                        "not a method's kind: {}",
                        lit(other)
                    )));
                }
            };
            Py::new(
                py,
                PyMethodResult {
                    kind,
                    value: item(s, 1)?,
                    text: item(s, 2)?,
                    parts: item(s, 3)?,
                },
            )?
            .into_any()
        }
        "RunError" => Py::new(
            py,
            PyRunError {
                type_name: item(s, 0)?,
                message: item(s, 1)?,
                line: item(s, 2)?,
                traceback: item(s, 3)?,
            },
        )?
        .into_any(),
        "LimitHit" => Py::new(
            py,
            PyLimitHit {
                kind: item(s, 0)?,
                message: item(s, 1)?,
            },
        )?
        .into_any(),
        "Handoff" => Py::new(
            py,
            PyHandoff {
                plugin: item(s, 0)?,
                method: item(s, 1)?,
                result: item(s, 2)?,
            },
        )?
        .into_any(),
        "RunOutcome" => {
            // A tuple holds at most 12 items as one state: the last
            // fields are one.
            let (queued_ms, session, paused): (f64, Py<PyAny>, Py<PyAny>) = item(s, 11)?;
            Py::new(
                py,
                PyRunOutcome {
                    status: item(s, 0)?,
                    stdout: item(s, 1)?,
                    stderr: item(s, 2)?,
                    error: item(s, 3)?,
                    limit: item(s, 4)?,
                    handoff: item(s, 5)?,
                    events: item(s, 6)?,
                    files: item(s, 7)?,
                    result: item(s, 8)?,
                    fuel_used: item(s, 9)?,
                    elapsed_ms: item(s, 10)?,
                    queued_ms,
                    session,
                    paused,
                },
            )?
            .into_any()
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "sandwit has no class {} to restore",
                lit(other)
            )));
        }
    })
}

fn duration_state(d: Duration) -> (u64, u32) {
    (d.as_secs(), d.subsec_nanos())
}

impl PyAgentCtx {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let c = &self.ctx;
        (
            &c.chat_key,
            &c.user_id,
            &c.channel_id,
            &c.channel_name,
            &c.channel_type,
            &c.adapter_key,
            &c.namespace,
        )
            .into_pyobject(py)
    }
}

impl PyRunLimits {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (l, g) = (&self.limits, self.given);
        let given = [
            g.time,
            g.memory,
            g.fuel,
            g.calls,
            g.output,
            g.events,
            g.event_bytes,
        ];
        (
            duration_state(l.time),
            l.memory_bytes,
            l.fuel,
            l.max_calls,
            l.max_output_bytes,
            l.max_events,
            l.max_event_bytes,
            given,
        )
            .into_pyobject(py)
    }
}

impl PyCallLimits {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let l = &self.limits;
        (
            duration_state(l.time),
            l.memory_bytes,
            l.fuel,
            l.table_elements,
            l.max_core_instances,
            l.max_value_bytes,
            l.max_value_nodes,
            l.max_value_depth,
            l.max_event_bytes,
        )
            .into_pyobject(py)
    }
}

impl PyContentPart {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (
            self.kind,
            &self.text,
            &self.mime_type,
            &self.data,
            &self.url,
        )
            .into_pyobject(py)
    }
}

impl PyMethodResult {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (self.kind, &self.value, &self.text, &self.parts).into_pyobject(py)
    }
}

impl PyRunError {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (&self.type_name, &self.message, self.line, &self.traceback).into_pyobject(py)
    }
}

impl PyLimitHit {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (&self.kind, &self.message).into_pyobject(py)
    }
}

impl PyHandoff {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (&self.plugin, &self.method, &self.result).into_pyobject(py)
    }
}

impl PyRunOutcome {
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (
            &self.status,
            &self.stdout,
            &self.stderr,
            &self.error,
            &self.limit,
            &self.handoff,
            &self.events,
            &self.files,
            &self.result,
            self.fuel_used,
            self.elapsed_ms,
            (self.queued_ms, &self.session, &self.paused),
        )
            .into_pyobject(py)
    }
}

/// A paused call as the dict `{"plugin", "method", "args", "token",
/// "expires_at"}` (`RunOutcome.paused`, `Host.pending`).
pub(crate) fn paused_to_py(py: Python<'_>, p: &sandwit::Paused) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    d.set_item("plugin", &p.plugin)?;
    d.set_item("method", &p.method)?;
    d.set_item("args", value_to_py(py, &p.args)?)?;
    d.set_item("token", &p.token)?;
    d.set_item("expires_at", p.expires_at)?;
    Ok(d.into_any().unbind())
}
