//! What a Python run gives back: its status, output, error, limit, events and
//! agent handoff.

use std::fmt;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::capabilities::events::PluginEvent;
use crate::controls::ControlEvent;
use crate::runtime::limits::EventSize;
use crate::sandbox::pauses::Paused;
use crate::sandbox::run::slots::Refused;
use crate::sandbox::sessions::{Refusal, SessionReport};
use sandwit_contract::limits::LimitKind;
use sandwit_contract::types::{MethodKind, MethodResult, Value};

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
    /// Its [`Cancel`](crate::Cancel) handle ended it.
    Cancelled,
    /// It waits at a call for a person's answer: see
    /// [`RunOutcome::paused`].
    Paused,
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
    /// What an execution control did about a call (refused it, opened its
    /// breaker, or had it approved). In JSON, the control event's fields
    /// (`control` names which) with `plugin` and `method`.
    Control {
        /// The plugin's id (or a host method's provider).
        plugin: String,
        /// The method.
        method: String,
        /// What the control did.
        #[serde(flatten)]
        event: ControlEvent,
    },
    /// Something a plugin did in a call: logged a line, sent a chat
    /// message, or was refused a capability. In JSON, the plugin event's
    /// fields with a `plugin` field.
    #[serde(untagged)]
    Plugin {
        /// The plugin's id.
        plugin: String,
        /// What it did.
        #[serde(flatten)]
        event: PluginEvent,
    },
}

/// What a run's [`RunOptions::on_event`](crate::RunOptions::on_event)
/// callback receives as it happens, in order: output as the code writes it
/// and every [`Event`] as it is recorded. The outcome holds the same output
/// and events.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LiveEvent {
    /// Text the code wrote to stdout (a chunk of it; UTF-8 sequences are
    /// never split between chunks).
    Stdout {
        /// The chunk.
        text: String,
    },
    /// Text the code wrote to stderr.
    Stderr {
        /// The chunk.
        text: String,
    },
    /// A call, system message, log line, chat message or refusal.
    #[serde(untagged)]
    Event(Event),
}

/// The event on one line, as `sandwit run` prints it.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Call {
                plugin,
                method,
                kind,
                ms,
                ok,
                summary,
                ..
            } => {
                let mark = if *ok { "→" } else { "✗" };
                write!(
                    f,
                    "call {plugin}.{method} [{kind}] {ms:.2} ms {mark} {summary}"
                )
            }
            Event::SystemMessage { text, .. } => write!(f, "system message: {text}"),
            Event::Control {
                plugin,
                method,
                event,
            } => write!(f, "control [{plugin}.{method}] {event}"),
            Event::Plugin { plugin, event } => write!(f, "{}", event.line(plugin)),
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
            Event::Control {
                plugin,
                method,
                event,
            } => plugin.len() + method.len() + event.text_bytes(),
            Event::Plugin { plugin, event } => plugin.len() + event.text_bytes(),
        }
    }
}

/// A file of a chat's workspace (scientific sandboxes), as a run left it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkspaceFile {
    /// Its path in the workspace, `/`-separated.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
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
    /// reported as an exception, `MemoryError`).
    pub error: Option<RunError>,
    /// The limit, for [`RunStatus::LimitExceeded`].
    pub limit: Option<LimitHit>,
    /// The files of the chat's workspace the run created or changed, in
    /// either interpreter; empty when the host keeps no workspaces.
    pub files: Vec<WorkspaceFile>,
    /// What happened, in order.
    pub events: Vec<Event>,
    /// The handoff, for [`RunStatus::AgentHandoff`].
    pub handoff: Option<Handoff>,
    /// For [`RunStatus::Ok`], the value of the code's last statement if it
    /// is an expression whose value is not `None`, else of its `result`
    /// variable if it set one; `None` otherwise (and for any other status).
    pub result: Option<Value>,
    /// Fuel used by the interpreter and the plugins it called.
    pub fuel_used: u64,
    /// What its successful method calls cost in all (`cost_per_use` in the
    /// policy).
    pub cost: f64,
    /// Whether the interpreter was instantiated ahead of the run (see
    /// [`PythonSandbox`](crate::PythonSandbox)); `elapsed` then leaves out
    /// instantiating it. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub prepared: bool,
    /// Whether that interpreter had served a run before, its memory then
    /// restored. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub reused: bool,
    /// Wall-clock time of the run, from when it got its run slot.
    pub elapsed: Duration,
    /// How long it waited for a run slot ([`RunSlots`](crate::RunSlots))
    /// before that.
    pub queued: Duration,
    /// The session the run was in, if it named one
    /// ([`RunOptions::session`](crate::RunOptions::session)).
    pub session: Option<SessionReport>,
    /// For [`RunStatus::Paused`], the call it waits at and the token that
    /// resumes it ([`PythonSandbox::resume`](crate::PythonSandbox::resume)).
    pub paused: Option<Paused>,
}

impl RunStatus {
    /// The status's name, as its JSON spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::AgentHandoff => "agent_handoff",
            RunStatus::LimitExceeded => "limit_exceeded",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Paused => "paused",
        }
    }
}

impl RunOutcome {
    /// Records how the run ended in its trace `span`
    /// ([`crate::trace::run_ended`]).
    /// Runs `run` in a run's span (`sandwit.run` of `interpreter`), and
    /// records in it how the run ended.
    pub(crate) async fn traced(
        interpreter: &'static str,
        run: impl Future<Output = RunOutcome>,
    ) -> RunOutcome {
        use tracing::Instrument;
        let span = crate::trace::run(interpreter);
        let outcome = run.instrument(span.clone()).await;
        outcome.trace(&span);
        outcome
    }

    fn trace(&self, span: &tracing::Span) {
        let failed = matches!(self.status, RunStatus::Error | RunStatus::LimitExceeded);
        let limit = self.limit.as_ref().map(|hit| hit.kind);
        crate::trace::run_ended(span, (self.status.as_str(), failed), limit, self.fuel_used);
    }

    /// Makes a paused run's outcome an error of type `PauseRefused`: the
    /// pause could not be kept, for the reason `message` gives.
    pub(crate) fn refuse_pause(&mut self, message: String) {
        self.paused = None;
        self.fail_after("PauseRefused", message);
    }

    /// Makes the outcome of a run whose session another run stored while
    /// it ran an error of type `SessionConflict` saying `message`: the
    /// run's output and result stay, what it changed in the session does
    /// not.
    pub(crate) fn conflicted(&mut self, message: String) {
        self.fail_after("SessionConflict", message);
    }

    /// Makes the outcome of a run that ended an error of type `type_name`
    /// saying `message`.
    fn fail_after(&mut self, type_name: &str, message: String) {
        self.status = RunStatus::Error;
        self.error = Some(RunError {
            type_name: type_name.into(),
            message,
            line: None,
            traceback: String::new(),
        });
    }

    /// The outcome of a run the host could not start (no interpreter, no
    /// workspace).
    pub(crate) fn failed(error: anyhow::Error, start: Instant) -> RunOutcome {
        tracing::error!("a run could not start: {error:#}");
        let message = format!("the host could not start the run: {error:#}");
        RunOutcome::not_run("InterpreterUnavailable", message, start)
    }

    /// The outcome of a run refused before it started: an error of type
    /// `type_name` saying `message`.
    pub(crate) fn not_run(type_name: &str, message: String, start: Instant) -> RunOutcome {
        let error = RunError {
            type_name: type_name.into(),
            message,
            line: None,
            traceback: String::new(),
        };
        RunOutcome::unrun(RunStatus::Error, Some(error), None, start.elapsed())
    }

    /// The outcome of a run that got no run slot: cancelled, or the
    /// [`LimitKind::Queue`] limit; `queued` is the time it waited.
    pub(crate) fn no_slot(refused: Refused, asked: Instant) -> RunOutcome {
        let (status, limit) = match refused {
            Refused::Cancelled => (RunStatus::Cancelled, None),
            Refused::Queue(message) => {
                let kind = LimitKind::Queue;
                (RunStatus::LimitExceeded, Some(LimitHit { kind, message }))
            }
        };
        let mut outcome = RunOutcome::unrun(status, None, limit, Duration::ZERO);
        outcome.queued = asked.elapsed();
        outcome
    }

    /// The outcome of a run that could not have the session it named: an
    /// error (`InvalidSession`, `SessionBusy`), or the [`LimitKind::Session`]
    /// limit.
    pub(crate) fn no_session(refusal: Refusal, start: Instant) -> RunOutcome {
        match refusal {
            Refusal::Invalid(message) => RunOutcome::not_run("InvalidSession", message, start),
            Refusal::Busy(message) => RunOutcome::not_run("SessionBusy", message, start),
            Refusal::Limit(message) => {
                let kind = LimitKind::Session;
                let limit = Some(LimitHit { kind, message });
                RunOutcome::unrun(RunStatus::LimitExceeded, None, limit, start.elapsed())
            }
        }
    }

    /// The outcome of a run whose code never ran, `elapsed` after it was
    /// asked for.
    fn unrun(
        status: RunStatus,
        error: Option<RunError>,
        limit: Option<LimitHit>,
        elapsed: Duration,
    ) -> RunOutcome {
        RunOutcome {
            status,
            stdout: String::new(),
            stderr: String::new(),
            error,
            limit,
            files: Vec::new(),
            events: Vec::new(),
            handoff: None,
            result: None,
            fuel_used: 0,
            cost: 0.0,
            #[cfg(feature = "internals")]
            prepared: false,
            #[cfg(feature = "internals")]
            reused: false,
            elapsed,
            queued: Duration::ZERO,
            session: None,
            paused: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::chat::ChatMessage;
    use crate::capabilities::events::LogLine;

    #[test]
    fn a_plugin_event_is_its_own_fields_with_the_plugin_in_json_and_text() {
        let log = Event::Plugin {
            plugin: "weather".into(),
            event: PluginEvent::Log(LogLine {
                level: "info",
                message: "sunny".into(),
            }),
        };
        assert_eq!(
            serde_json::to_value(&log).unwrap(),
            serde_json::json!({"type": "log", "plugin": "weather", "level": "info", "message": "sunny"})
        );
        assert_eq!(log.to_string(), "log [weather info] sunny");
        let chat = Event::Plugin {
            plugin: "notes".into(),
            event: PluginEvent::Chat {
                message: ChatMessage::Text("hi".into()),
            },
        };
        assert_eq!(
            serde_json::to_value(&chat).unwrap(),
            serde_json::json!({"type": "chat", "plugin": "notes", "message": {"kind": "text", "text": "hi"}})
        );
        assert_eq!(chat.to_string(), "chat [notes] text: hi");
        let denied = Event::Plugin {
            plugin: "x".into(),
            event: PluginEvent::Denied {
                capability: "store".into(),
                request: "store.get(chat, \"k\")".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&denied).unwrap()["type"],
            serde_json::json!("denied")
        );
        assert_eq!(
            denied.to_string(),
            "denied [x] store.get(chat, \"k\"): capability `store` not granted"
        );
    }
}
