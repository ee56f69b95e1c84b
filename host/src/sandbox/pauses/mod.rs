//! Durable pauses: a run that calls a method the policy marks to wait for
//! a person (`[approval] pause_for`, or a method's `pause = true`) ends
//! with [`RunStatus::Paused`](crate::RunStatus::Paused), naming the call
//! and a token; [`PythonSandbox::resume`](crate::PythonSandbox::resume) with the person's
//! answer continues it, in this process or any other that shares the store
//! and the session key, hours later.
//!
//! How: the journal (`journal.rs`). The run's interpreter cannot be kept
//! across processes mid-call (its wasm stack is native code), so a resumed
//! run runs the code again from its start on a fresh interpreter, and every
//! call the paused run made gets the answer it got then, without being
//! made again (no effect is doubled), as do its random draws and clock
//! readings (`runtime/tape.rs`); the call it paused at gets the person's
//! answer, and the run goes on live from there with the fuel, time and
//! budget it had left. A resumed run whose code makes other calls than the
//! paused one made (it read a file changed since) ends with
//! `ResumeDiverged` before any call of it is made.

pub(crate) mod journal;
pub(crate) mod record;

use sandwit_contract::types::Value;

/// The call a paused run waits at ([`RunOutcome::paused`](crate::RunOutcome::paused)).
#[derive(Debug, Clone, PartialEq)]
pub struct Paused {
    /// The plugin's id (or a host method's provider, a tool source's id).
    pub plugin: String,
    /// The method called.
    pub method: String,
    /// Its arguments, checked against the method's schema.
    pub args: Value,
    /// What resumes the run ([`PythonSandbox::resume`](crate::PythonSandbox::resume)): opaque,
    /// good once, until `expires_at`.
    pub token: String,
    /// When the token expires, in seconds since the Unix epoch
    /// ([`SessionLimits::pause_ttl`](crate::SessionLimits::pause_ttl) after
    /// the pause).
    pub expires_at: u64,
}

/// A person's answer to a paused call.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// Make the call now, under the controls, as if it had not paused
    /// (not for an application's own function, which only the application
    /// can answer).
    Approve,
    /// Refuse it: the code's call raises `PluginError` (kind `denied`) with
    /// this reason.
    Deny(String),
    /// Do not make it: the call returns this value to the code.
    Result(Value),
    /// Do not make it: the call raises an exception of the type `name` (a
    /// dotted Python identifier, as an application's own function raised
    /// it) with `message`. A builtin exception's name raises that class
    /// (`except ValueError` catches it); any other a `PluginError`
    /// subclass of that name.
    Raise {
        /// The exception's type, as `type(e).__name__` (or its qualified
        /// name) gives it.
        name: String,
        /// Its message (the code's `e.message`; `str(e)` of a builtin
        /// one).
        message: String,
    },
}
