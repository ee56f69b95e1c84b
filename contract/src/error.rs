//! The errors of the host's public API. Each names the plugin (and the method)
//! it is about.

use serde::Serialize;

use crate::control_settings::Flag;
use crate::limits::LimitKind;
use crate::text::cut;

/// The most bytes of a call error's message, and of a limit's message
/// that ends a run. Such a message quotes text a guest chose (a plugin's
/// error, a tool server's answer, an embedder's handler, a name the code
/// sent): cut to this where the error is made, it is bounded on every
/// surface it reaches (a run's outcome, a direct call's answer, MCP,
/// events, logs).
pub const MAX_MESSAGE_BYTES: usize = 4 << 10;

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("plugin {plugin}: cannot read it: {error}")]
    Io {
        /// The file.
        plugin: String,
        /// What the OS said (in the message, so not repeated as its source).
        error: std::io::Error,
    },
    /// The plugin is not acceptable; every problem found is listed.
    #[error("plugin {plugin} was rejected:{}", list(problems))]
    Rejected {
        /// The file name, or the plugin's id once known.
        plugin: String,
        /// Each problem, one sentence each.
        problems: Vec<String>,
    },
    /// The operator's configuration for the plugin does not match its config
    /// schema; every problem is listed (secret values hidden).
    #[error("plugin `{plugin}`: its configuration is invalid:{}", list(problems))]
    Config {
        /// The plugin's id.
        plugin: String,
        /// Each problem, with the JSON pointer of the value.
        problems: Vec<String>,
    },
    /// The operator's policy grants or configures the plugin's id, but for
    /// other components than this one: a plugin names its own id, so only
    /// the components the policy pins by digest get what it gives.
    #[error(
        "plugin `{plugin}`: the policy grants or configures `{plugin}` only for {} pinned component(s), and this component's SHA-256 ({digest}) is not one of them; add it to `sha256` in the policy's `[plugins.{plugin}]` if you trust it",
        pinned
    )]
    Unpinned {
        /// The id the plugin claims.
        plugin: String,
        /// The component's SHA-256, hex.
        digest: String,
        /// How many digests the policy pins for the id.
        pinned: usize,
    },
    /// A plugin file whose bytes do not have the digest its folder's lock
    /// file records: changed since it was installed.
    #[error(
        "plugin `{plugin}` ({file}): its bytes have the digest {actual}, not the {expected} \
         recorded in {lock}; it changed since it was installed: reinstall it, or remove its \
         entry from the lock file if you changed it on purpose"
    )]
    Tampered {
        /// The plugin's id, as the lock file records it.
        plugin: String,
        /// The file.
        file: String,
        /// The digest the lock file records.
        expected: String,
        /// The digest of the file's bytes.
        actual: String,
        /// The lock file.
        lock: String,
    },
    /// The policy requires a signature from a trusted key
    /// (`[registry] require_signature`) and the plugin has none.
    #[error(
        "plugin {plugin}: the policy requires a signature from a trusted key \
         (`[registry] require_signature`), and {why}"
    )]
    Unsigned {
        /// The file, or the name it was loaded under.
        plugin: String,
        /// Why it has no such signature.
        why: String,
    },
    /// The lock file of the plugin's folder could not be read.
    #[error("plugin {plugin}: {error}")]
    Lock {
        /// The file.
        plugin: String,
        /// Why.
        error: crate::lock::LockError,
    },
    /// The host failed (e.g. the compiled-code cache could not be written).
    #[error("plugin {plugin}: {source:#}")]
    Host {
        /// The file name or id.
        plugin: String,
        /// The cause.
        source: anyhow::Error,
    },
}

/// "plugin `id`, " for a call's provider; nothing for none.
fn provider(id: &str) -> String {
    if id.is_empty() {
        String::new()
    } else {
        format!("plugin `{id}`, ")
    }
}

fn list(problems: &[String]) -> String {
    problems.iter().map(|p| format!("\n  - {p}")).collect()
}

/// Why a method call returned no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[error("{}method `{method}`: {kind}", provider(.plugin))]
pub struct CallError {
    /// The plugin's id (or a host method's provider); empty for a method
    /// no provider offers.
    pub plugin: String,
    /// The method called.
    pub method: String,
    /// What went wrong.
    pub kind: CallErrorKind,
}

/// What went wrong in a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CallErrorKind {
    /// No such method.
    #[error("no such method")]
    UnknownMethod,
    /// The arguments do not match the parameters.
    #[error("invalid arguments: {message}")]
    InvalidArguments {
        /// Which argument and why.
        message: String,
    },
    /// The method ran and reported a failure; the message is for the AI.
    #[error("failed: {message}")]
    Failed {
        /// The plugin's message.
        message: String,
    },
    /// A capability the call needs is not granted.
    #[error("denied: {message}")]
    Denied {
        /// Which capability.
        message: String,
    },
    /// A limit was reached.
    #[error("{limit} limit exceeded: {message}")]
    LimitExceeded {
        /// Which limit.
        limit: LimitKind,
        /// The detail, with the limit's value.
        message: String,
    },
    /// The plugin trapped (a bug in the plugin).
    #[error("trapped: {message}")]
    Trapped {
        /// The trap.
        message: String,
    },
    /// The plugin returned something its manifest does not allow.
    #[error("returned a bad result: {message}")]
    BadResult {
        /// What was wrong with it.
        message: String,
    },
    /// The method's circuit breaker is open: the call was refused without
    /// running, and a later one may succeed.
    #[error("unavailable: {message}")]
    Unavailable {
        /// Why, and when a call is tried again.
        message: String,
    },
    /// The method is flagged (`dangerous`, `requires_auth`), the policy
    /// requires approval for such calls, and the embedder's approver did
    /// not give it.
    #[error("not approved: {message}")]
    NotApproved {
        /// The method's flags that need approval.
        flags: Vec<Flag>,
        /// The plugin, the method, the flags and why.
        message: String,
    },
}

impl CallErrorKind {
    /// The message, if the kind carries one.
    pub fn message_mut(&mut self) -> Option<&mut String> {
        match self {
            CallErrorKind::UnknownMethod => None,
            CallErrorKind::InvalidArguments { message }
            | CallErrorKind::Failed { message }
            | CallErrorKind::Denied { message }
            | CallErrorKind::LimitExceeded { message, .. }
            | CallErrorKind::Trapped { message }
            | CallErrorKind::BadResult { message }
            | CallErrorKind::Unavailable { message }
            | CallErrorKind::NotApproved { message, .. } => Some(message),
        }
    }

    /// This kind with its message cut to [`MAX_MESSAGE_BYTES`].
    pub fn bounded(mut self) -> Self {
        if let Some(message) = self.message_mut() {
            *message = cut(std::mem::take(message), MAX_MESSAGE_BYTES);
        }
        self
    }

    /// Whether the method or its plugin failed (what a circuit breaker
    /// counts), rather than the caller (bad arguments, a capability not
    /// granted), the run (its own fuel, time or caps) or the host's
    /// controls.
    pub fn is_failure(&self) -> bool {
        match self {
            CallErrorKind::Failed { .. }
            | CallErrorKind::Trapped { .. }
            | CallErrorKind::BadResult { .. } => true,
            CallErrorKind::LimitExceeded { limit, .. } => matches!(
                limit,
                LimitKind::Fuel | LimitKind::Time | LimitKind::Memory | LimitKind::ValueSize
            ),
            CallErrorKind::UnknownMethod
            | CallErrorKind::InvalidArguments { .. }
            | CallErrorKind::Denied { .. }
            | CallErrorKind::Unavailable { .. }
            | CallErrorKind::NotApproved { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_a_message_and_keeps_a_short_one() {
        let long = CallErrorKind::Failed {
            message: "x".repeat(20 << 20),
        }
        .bounded();
        let CallErrorKind::Failed { message } = long else {
            unreachable!()
        };
        assert!(message.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
        assert!(message.ends_with('…'));
        let limit = CallErrorKind::LimitExceeded {
            limit: LimitKind::Calls,
            message: "short".into(),
        };
        assert_eq!(limit.clone().bounded(), limit);
        assert_eq!(
            CallErrorKind::UnknownMethod.bounded(),
            CallErrorKind::UnknownMethod
        );
    }
}
