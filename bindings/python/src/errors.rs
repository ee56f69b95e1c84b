//! The package's exceptions, each with the fields of the Rust error it
//! stands for.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyList;

pyo3::create_exception!(
    sandwit,
    SandwitError,
    PyException,
    "The base of every exception sandwit raises."
);
pyo3::create_exception!(
    sandwit,
    LoadError,
    SandwitError,
    "A plugin (or the Python interpreter) could not be loaded: `.plugin` names it, \
     `.kind` says why (`io`, `rejected`, `config`, `unpinned`, `host`) and `.problems` \
     lists every problem found."
);
pyo3::create_exception!(
    sandwit,
    CallError,
    SandwitError,
    "A method call returned no result: `.plugin`, `.method`, `.kind` (`unknown_method`, \
     `invalid_arguments`, `failed`, `denied`, `limit_exceeded`, `trapped`, `bad_result`), \
     `.message` (None for `unknown_method`) and `.limit` (the limit's kind, for \
     `limit_exceeded`)."
);
pyo3::create_exception!(
    sandwit,
    ToolboxError,
    SandwitError,
    "Plugins cannot make one set: two offer a method of the same name (`.kind` `method`, \
     `.method`, `.first`, `.second`), claim the same id (`.kind` `id`, `.id`, and the \
     components' SHA-256 digests as `.first` and `.second`), or a host method's provider \
     is a plugin's id (`.kind` `provider`, `.id`, `.method`)."
);
pyo3::create_exception!(
    sandwit,
    MethodSpecError,
    SandwitError,
    "A host method's spec does not pass the checks a plugin's manifest does (a Python \
     identifier that is no builtin, a docstring, one-line description, valid JSON Schemas, \
     required parameters first): `.provider`, `.method` and `.problems`, every problem found."
);
pyo3::create_exception!(
    sandwit,
    PolicyError,
    SandwitError,
    "The policy file cannot be read or is not a valid policy: `.path` and the message."
);

/// `err` with `fields` set on its exception object.
fn with_fields<'py>(py: Python<'py>, err: PyErr, fields: &[(&str, Bound<'py, PyAny>)]) -> PyErr {
    let value = err.value(py);
    for (name, field) in fields {
        if let Err(e) = value.setattr(*name, field) {
            return e;
        }
    }
    err
}

fn str_py<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyAny> {
    pyo3::types::PyString::new(py, s).into_any()
}

fn opt_py<'py>(py: Python<'py>, s: Option<&str>) -> Bound<'py, PyAny> {
    s.map_or_else(|| py.None().into_bound(py), |s| str_py(py, s))
}

fn list_py<'py>(py: Python<'py>, items: &[String]) -> Bound<'py, PyAny> {
    PyList::new(py, items)
        .map(Bound::into_any)
        .unwrap_or_else(|_| py.None().into_bound(py))
}

/// A [`sandwit::LoadError`] as a [`LoadError`].
pub fn load_error(py: Python<'_>, err: &sandwit::LoadError) -> PyErr {
    use sandwit::LoadError as E;
    let message = err.to_string();
    let (kind, plugin, problems, digest) = match err {
        E::Io { plugin, error } => ("io", plugin, vec![error.to_string()], None),
        E::Rejected { plugin, problems } => ("rejected", plugin, problems.clone(), None),
        E::Config { plugin, problems } => ("config", plugin, problems.clone(), None),
        E::Unpinned { plugin, digest, .. } => {
            ("unpinned", plugin, vec![message.clone()], Some(digest))
        }
        E::Tampered { plugin, actual, .. } => {
            ("tampered", plugin, vec![message.clone()], Some(actual))
        }
        E::Unsigned { plugin, .. } => ("unsigned", plugin, vec![message.clone()], None),
        E::Lock { plugin, error } => ("lock", plugin, vec![error.to_string()], None),
        E::Host { plugin, source } => ("host", plugin, vec![format!("{source:#}")], None),
    };
    with_fields(
        py,
        LoadError::new_err(message),
        &[
            ("kind", str_py(py, kind)),
            ("plugin", str_py(py, plugin)),
            ("problems", list_py(py, &problems)),
            ("digest", opt_py(py, digest.map(String::as_str))),
        ],
    )
}

/// A [`sandwit::CallError`] as a [`CallError`].
pub fn call_error(py: Python<'_>, err: &sandwit::CallError) -> PyErr {
    // The kind's JSON: {"type": ..., "message": ..., "limit": ...}.
    let kind = serde_json::to_value(&err.kind).unwrap_or_default();
    let field = |name: &str| kind.get(name).and_then(|v| v.as_str());
    with_fields(
        py,
        CallError::new_err(err.to_string()),
        &[
            ("plugin", str_py(py, &err.plugin)),
            ("method", str_py(py, &err.method)),
            ("kind", opt_py(py, field("type"))),
            ("message", opt_py(py, field("message"))),
            ("limit", opt_py(py, field("limit"))),
        ],
    )
}

/// A [`sandwit::ToolboxError`] as a [`ToolboxError`].
pub fn toolbox_error(py: Python<'_>, err: &sandwit::ToolboxError) -> PyErr {
    use sandwit::ToolboxError as E;
    let none = || py.None().into_bound(py);
    let fields = match err {
        E::Method {
            method,
            first,
            second,
        } => [
            ("kind", str_py(py, "method")),
            ("method", str_py(py, method)),
            ("id", none()),
            ("first", str_py(py, first)),
            ("second", str_py(py, second)),
        ],
        E::Id { id, first, second } => [
            ("kind", str_py(py, "id")),
            ("method", none()),
            ("id", str_py(py, id)),
            ("first", str_py(py, first)),
            ("second", str_py(py, second)),
        ],
        E::Reserved { id, method } => [
            ("kind", str_py(py, "reserved")),
            ("method", str_py(py, method)),
            ("id", str_py(py, id)),
            ("first", none()),
            ("second", none()),
        ],
        E::Provider { id, method } => [
            ("kind", str_py(py, "provider")),
            ("method", str_py(py, method)),
            ("id", str_py(py, id)),
            ("first", none()),
            ("second", none()),
        ],
    };
    with_fields(py, ToolboxError::new_err(err.to_string()), &fields)
}

/// The problems [`sandwit::HostMethod::new`] found in a spec, as a
/// [`MethodSpecError`].
pub fn method_spec_error(
    py: Python<'_>,
    provider: &str,
    method: &str,
    problems: Vec<String>,
) -> PyErr {
    let message = format!(
        "host method `{method}` of `{provider}`: {}",
        problems.join("; ")
    );
    with_fields(
        py,
        MethodSpecError::new_err(message),
        &[
            ("provider", str_py(py, provider)),
            ("method", str_py(py, method)),
            ("problems", list_py(py, &problems)),
        ],
    )
}

/// A [`sandwit::policy::PolicyError`] as a [`PolicyError`].
pub fn policy_error(py: Python<'_>, err: &sandwit::policy::PolicyError) -> PyErr {
    use sandwit::policy::PolicyError as E;
    let path = match err {
        E::Io { path, .. } => Some(path.display().to_string()),
        E::Invalid { path, .. } => path.as_ref().map(|p| p.display().to_string()),
    };
    with_fields(
        py,
        PolicyError::new_err(err.to_string()),
        &[("path", opt_py(py, path.as_deref()))],
    )
}

/// Why a job on the host's runtime gave no result, until it is raised in
/// Python.
#[derive(Debug)]
pub enum Failure {
    /// Loading the interpreter or a plugin failed.
    Load(sandwit::LoadError),
    /// A call failed.
    Call(sandwit::CallError),
    /// A file the host was told to use is not there.
    File(FileProblem),
    /// Anything else, as a [`SandwitError`].
    Other(String),
}

/// A file that is missing or a directory: raised as `FileNotFoundError` or
/// `IsADirectoryError` with `.filename` set and a message saying which file
/// it is.
#[derive(Debug)]
pub struct FileProblem {
    errno: i32,
    what: String,
    path: String,
}

impl FileProblem {
    pub fn not_found(what: String, path: &std::path::Path) -> Self {
        FileProblem {
            errno: 2,
            what,
            path: path.display().to_string(),
        }
    }

    pub fn is_a_directory(what: String, path: &std::path::Path) -> Self {
        FileProblem {
            errno: 21,
            what,
            path: path.display().to_string(),
        }
    }

    pub fn into_pyerr(self) -> PyErr {
        let FileProblem { errno, what, path } = self;
        match errno {
            21 => pyo3::exceptions::PyIsADirectoryError::new_err((errno, what, path)),
            _ => pyo3::exceptions::PyFileNotFoundError::new_err((errno, what, path)),
        }
    }
}

impl Failure {
    /// The exception to raise.
    pub fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Load(e) => load_error(py, &e),
            Failure::Call(e) => call_error(py, &e),
            Failure::File(problem) => problem.into_pyerr(),
            Failure::Other(message) => SandwitError::new_err(message),
        }
    }
}
