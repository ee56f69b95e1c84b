//! What a Python run gives back: its status, output, error, limit, events and
//! agent handoff.

use std::time::Duration;

use serde::Serialize;

use crate::chat::ChatMessage;
use crate::limits::{EventSize, LimitKind};
use crate::state::PluginEvent;
use crate::types::{MethodKind, MethodResult};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The code ran to the end.
    Ok,
    /// An exception escaped the code (or the interpreter trapped).
    Error,
    /// An agent or multimodal-agent method stopped the script; its result is
    /// in [`RunOutcome::handoff`].
    AgentHandoff,
    /// A limit stopped the run; see [`RunOutcome::limit`].
    LimitExceeded,
}

/// A Python exception that escaped the code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunError {
    /// The exception's type, e.g. `ZeroDivisionError`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Its message.
    pub message: String,
    /// The line of the code it was raised at, if it was raised in the code.
    pub line: Option<u32>,
    /// The traceback, restricted to the code's own frames.
    pub traceback: String,
}

/// The limit that stopped a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitHit {
    /// Which limit.
    pub kind: LimitKind,
    /// What happened, with the limit's value and the plugin and method if a
    /// plugin call ran into it.
    pub message: String,
}

/// The agent handoff that ended a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Handoff {
    /// The plugin's id.
    pub plugin: String,
    /// The method called.
    pub method: String,
    /// Its result: [`MethodResult::Agent`] or [`MethodResult::MultimodalAgent`].
    pub result: MethodResult,
}

/// Something that happened during a run, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A method call.
    Call {
        /// The plugin's id.
        plugin: String,
        /// The method.
        method: String,
        /// Its kind.
        kind: MethodKind,
        /// Wall-clock milliseconds it took.
        ms: f64,
        /// Fuel it used.
        fuel: u64,
        /// Whether it returned a result.
        ok: bool,
        /// A short summary of the result or the error.
        summary: String,
    },
    /// A behavior's system message.
    SystemMessage {
        /// The plugin's id.
        plugin: String,
        /// The method.
        method: String,
        /// The message.
        text: String,
    },
    /// A line a plugin logged.
    Log {
        /// The plugin's id.
        plugin: String,
        /// `trace` to `error`.
        level: &'static str,
        /// The line.
        message: String,
    },
    /// A message a plugin sent to the chat.
    Chat {
        /// The plugin's id.
        plugin: String,
        /// The message.
        message: ChatMessage,
    },
    /// A plugin's request refused because a capability was not granted.
    Denied {
        /// The plugin's id.
        plugin: String,
        /// The capability it needed.
        capability: String,
        /// What it tried.
        request: String,
    },
}

impl Event {
    /// The run's event for something plugin `plugin` did in a call.
    pub(crate) fn from_plugin(plugin: &str, event: PluginEvent) -> Self {
        let plugin = plugin.to_string();
        match event {
            PluginEvent::Log(line) => Event::Log {
                plugin,
                level: line.level,
                message: line.message,
            },
            PluginEvent::Chat { message } => Event::Chat { plugin, message },
            PluginEvent::Denied {
                capability,
                request,
            } => Event::Denied {
                plugin,
                capability,
                request,
            },
        }
    }
}

impl EventSize for Event {
    fn text_bytes(&self) -> usize {
        match self {
            Event::Call {
                plugin,
                method,
                summary,
                ..
            } => plugin.len() + method.len() + summary.len(),
            Event::SystemMessage {
                plugin,
                method,
                text,
            } => plugin.len() + method.len() + text.len(),
            Event::Log {
                plugin, message, ..
            } => plugin.len() + message.len(),
            Event::Chat { plugin, message } => plugin.len() + message.bytes(),
            Event::Denied {
                plugin,
                capability,
                request,
            } => plugin.len() + capability.len() + request.len(),
        }
    }
}

/// Everything a run gives back.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// How it ended.
    pub status: RunStatus,
    /// What the code printed to stdout (up to the cap).
    pub stdout: String,
    /// What it printed to stderr (up to the cap).
    pub stderr: String,
    /// The exception, for [`RunStatus::Error`] (and for a limit that Python
    /// reported as an exception, such as `MemoryError` or `RecursionError`).
    pub error: Option<RunError>,
    /// The limit, for [`RunStatus::LimitExceeded`].
    pub limit: Option<LimitHit>,
    /// What happened, in order.
    pub events: Vec<Event>,
    /// The handoff, for [`RunStatus::AgentHandoff`].
    pub handoff: Option<Handoff>,
    /// Fuel used by the interpreter and the plugins it called.
    pub fuel_used: u64,
    /// Whether the interpreter was instantiated ahead of the run (see
    /// [`PythonSandbox`](crate::PythonSandbox)); `elapsed` then leaves out
    /// instantiating it.
    pub prepared: bool,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}
