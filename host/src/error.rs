//! The errors of the host's public API. Each names the plugin (and the method)
//! it is about.

use serde::Serialize;

use crate::limits::LimitKind;

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
    /// The host failed (e.g. the compiled-code cache could not be written).
    #[error("plugin {plugin}: {source:#}")]
    Host {
        /// The file name or id.
        plugin: String,
        /// The cause.
        source: anyhow::Error,
    },
}

fn list(problems: &[String]) -> String {
    problems.iter().map(|p| format!("\n  - {p}")).collect()
}

/// Why a method call returned no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize)]
#[error("plugin `{plugin}`, method `{method}`: {kind}")]
pub struct CallError {
    /// The plugin's id.
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
}

impl CallErrorKind {
    /// The message, if the kind carries one.
    pub(crate) fn message_mut(&mut self) -> Option<&mut String> {
        match self {
            CallErrorKind::UnknownMethod => None,
            CallErrorKind::InvalidArguments { message }
            | CallErrorKind::Failed { message }
            | CallErrorKind::Denied { message }
            | CallErrorKind::LimitExceeded { message, .. }
            | CallErrorKind::Trapped { message }
            | CallErrorKind::BadResult { message } => Some(message),
        }
    }
}

/// Cuts `s` to at most `max` bytes (on a character boundary), marking the cut
/// with `…`.
pub(crate) fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut at = max;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
        s.push('…');
    }
    s
}
