//! Functions the application gives one run ([`RunOptions::functions`]):
//! the host does not hold them (a framework's tool, a tool of an MCP
//! client's browser), so a run calling one pauses there, as at a call the
//! policy pauses (`sandbox/pauses`), and the application's answer (a value,
//! or an exception of a type it names) is what the call returns or raises
//! when the run is resumed.
//!
//! [`RunOptions::functions`]: crate::RunOptions::functions

use serde::{Deserialize, Serialize};

use crate::toolbox::host_method::HostMethod;
use sandwit_contract::manifest::{MethodSpec, Param};
use sandwit_contract::types::MethodKind;

pub use crate::toolbox::host_method::CLIENT_FUNCTIONS;

/// A function given to one run: the code calls it by `name`, the run
/// pauses at the call, and [`Resume::Result`](crate::Resume::Result) or
/// [`Resume::Raise`](crate::Resume::Raise) answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientFunction {
    name: String,
    docstring: String,
    /// Its parameters, or none for a function taking any arguments.
    params: Option<Vec<Param>>,
}

impl ClientFunction {
    /// A function `name` (a Python identifier, no builtin's or keyword)
    /// taking any arguments: a call's
    /// [`Paused::args`](crate::Paused::args) is `{"args": [...], "kwargs":
    /// {...}}`, each argument a plain value as a method's are.
    pub fn new(name: impl Into<String>, docstring: impl Into<String>) -> Self {
        ClientFunction {
            name: name.into(),
            docstring: docstring.into(),
            params: None,
        }
    }

    /// A function `name` with `params` (required ones first), whose
    /// arguments are checked against their schemas before the run pauses:
    /// a call's `args` is an object of the parameters' names to values.
    pub fn with_params(
        name: impl Into<String>,
        docstring: impl Into<String>,
        params: Vec<Param>,
    ) -> Self {
        ClientFunction {
            params: Some(params),
            ..Self::new(name, docstring)
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host method a run offers it as; the problems of a function
    /// that is not one (its name, its parameters' schemas) listed.
    pub(crate) fn method(&self) -> Result<HostMethod, Vec<String>> {
        let docstring = match self.docstring.trim() {
            "" => "A function the application answers.".to_string(),
            given => given.to_string(),
        };
        let description = docstring.lines().next().unwrap_or_default().to_string();
        let (params, variadic) = match &self.params {
            Some(params) => (params.clone(), false),
            None => (
                vec![
                    param("args", serde_json::json!({"type": "array"})),
                    param("kwargs", serde_json::json!({"type": "object"})),
                ],
                true,
            ),
        };
        let spec = MethodSpec {
            name: self.name.clone(),
            kind: MethodKind::Tool,
            description,
            docstring,
            params,
            returns: None,
        };
        HostMethod::client(CLIENT_FUNCTIONS, spec, variadic)
    }
}

fn param(name: &str, schema: serde_json::Value) -> Param {
    Param {
        name: name.to_string(),
        schema,
        required: true,
    }
}

/// The host methods of `functions`, or a message naming the first that is
/// not one.
pub(crate) fn methods(functions: &[ClientFunction]) -> Result<Vec<HostMethod>, String> {
    functions
        .iter()
        .map(|function| {
            function.method().map_err(|problems| {
                format!(
                    "function `{}` cannot be given to a run: {}",
                    function.name,
                    problems.join("; ")
                )
            })
        })
        .collect()
}

/// Whether `name` can name an exception's type in
/// [`Resume::Raise`](crate::Resume::Raise): a dotted Python identifier
/// (`ValueError`, `httpx.HTTPError`) of at most 128 ASCII characters.
pub fn is_exception_type_name(name: &str) -> bool {
    name.len() <= 128
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}
