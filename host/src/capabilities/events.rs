//! What plugins do through the host, as events: the public [`PluginEvent`]
//! and [`LogLine`], and the recorder that keeps one call's events within
//! its caps (secrets hidden, texts cut, refusals counted).

use std::fmt;

use serde::Serialize;

use crate::capabilities::chat::ChatMessage;
use crate::capabilities::env::{MAX_DENIED_PER_CALL, MAX_REQUEST_TEXT, PluginEnv};
use crate::runtime::limits::{CappedEvents, EventSize, EventsFull};

/// The most log lines a plugin may write in one call; later ones are dropped.
pub(crate) const MAX_LOG_LINES: usize = 1_000;
/// The longest log line kept; longer ones are cut.
pub(crate) const MAX_LOG_LINE_BYTES: usize = 4 << 10;

/// One line a plugin logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The text, cut at 4 KiB, secrets hidden.
    pub message: String,
}

/// Something a plugin did during a call, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PluginEvent {
    /// A log line (or a line it printed).
    Log(LogLine),
    /// A message it sent to the chat.
    Chat {
        /// The message (secrets hidden).
        message: ChatMessage,
    },
    /// A request refused because a capability was not granted.
    Denied {
        /// The capability it needed, e.g. `store` or `http:example.com:443`.
        capability: String,
        /// What it tried.
        request: String,
    },
}

impl PluginEvent {
    /// The event on one line, attributed to `plugin`: `log [weather info]
    /// ...`, `chat [notes] text: ...`, `denied [x] store.get(...): ...`.
    pub fn line<'a>(&'a self, plugin: &'a str) -> impl fmt::Display + 'a {
        EventLine {
            plugin,
            event: self,
        }
    }
}

struct EventLine<'a> {
    plugin: &'a str,
    event: &'a PluginEvent,
}

impl fmt::Display for EventLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plugin = self.plugin;
        match self.event {
            PluginEvent::Log(line) => write!(f, "log [{plugin} {}] {}", line.level, line.message),
            PluginEvent::Chat { message } => write!(f, "chat [{plugin}] {message}"),
            PluginEvent::Denied {
                capability,
                request,
            } => write!(
                f,
                "denied [{plugin}] {request}: capability `{capability}` not granted"
            ),
        }
    }
}

impl EventSize for PluginEvent {
    fn text_bytes(&self) -> usize {
        match self {
            PluginEvent::Log(line) => line.message.len(),
            PluginEvent::Chat { message } => message.bytes(),
            PluginEvent::Denied {
                capability,
                request,
            } => capability.len() + request.len(),
        }
    }
}

/// The events of one plugin call, within their caps: at most
/// [`MAX_LOG_LINES`] log lines and [`MAX_DENIED_PER_CALL`] refusals, all
/// within the call's event bytes; what went over is counted and reported in
/// the host's log when the call ends.
pub(crate) struct CallEvents {
    events: CappedEvents<PluginEvent>,
    /// The last error-level line the plugin logged (secrets hidden, cut),
    /// kept even past the caps: the SDKs log an uncaught exception or a
    /// panic there just before they trap, and the call's error names it.
    last_error: Option<String>,
    logged: usize,
    dropped_logs: usize,
    denied: usize,
    dropped_denied: usize,
}

impl CallEvents {
    /// No events yet, within `max_bytes` of event text.
    pub(crate) fn new(max_bytes: usize) -> Self {
        CallEvents {
            events: CappedEvents::new(usize::MAX, max_bytes),
            last_error: None,
            logged: 0,
            dropped_logs: 0,
            denied: 0,
            dropped_denied: 0,
        }
    }

    /// The last error-level line the plugin logged in the call, if any.
    pub(crate) fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Empties the record for the next call of the same instance.
    pub(crate) fn reset(&mut self) {
        *self = CallEvents::new(self.events.max_bytes());
    }

    /// Records a log line of `env`'s plugin within the caps (secrets hidden,
    /// then cut at [`MAX_LOG_LINE_BYTES`], so no tail of a secret survives
    /// the cut) and forwards it to `tracing` within the plugin's rate.
    pub(crate) fn push_log(&mut self, env: &PluginEnv, level: &'static str, message: String) {
        let redact = |message| env.config.redactor.redact_cut(message, MAX_LOG_LINE_BYTES);
        // An error line is kept past the caps, so it is redacted first; the
        // others only once they are to be recorded.
        let error = level == "error";
        let message = if error { redact(message) } else { message };
        if error {
            self.last_error = Some(message.clone());
        }
        if self.logged >= MAX_LOG_LINES {
            self.dropped_logs += 1;
            return;
        }
        let message = if error { message } else { redact(message) };
        let line = PluginEvent::Log(LogLine {
            level,
            message: message.clone(),
        });
        if self.events.push(line).is_err() {
            self.dropped_logs += 1;
            return;
        }
        self.logged += 1;
        if env.may_log() {
            let plugin = &env.id;
            match level {
                "error" => tracing::error!(%plugin, "{message}"),
                "warn" => tracing::warn!(%plugin, "{message}"),
                "info" => tracing::info!(%plugin, "{message}"),
                "debug" => tracing::debug!(%plugin, "{message}"),
                _ => tracing::trace!(%plugin, "{message}"),
            }
        }
    }

    /// Records a refused request of `env`'s plugin (its text cut and secrets
    /// hidden) within the per-call cap, and logs it within the plugin's rate.
    pub(crate) fn push_denied(&mut self, env: &PluginEnv, capability: String, request: String) {
        if self.denied >= MAX_DENIED_PER_CALL {
            self.dropped_denied += 1;
            return;
        }
        let redactor = &env.config.redactor;
        let request = redactor.redact_cut(request, MAX_REQUEST_TEXT);
        let capability = redactor.redact_cut(capability, MAX_REQUEST_TEXT);
        if env.may_log() {
            tracing::warn!(plugin = %env.id, %capability, "denied: {request}");
        }
        let event = PluginEvent::Denied {
            capability,
            request,
        };
        match self.events.push(event) {
            Ok(()) => self.denied += 1,
            Err(_) => self.dropped_denied += 1,
        }
    }

    /// Refusals recorded elsewhere (by the HTTP gate) and how many more it
    /// dropped.
    pub(crate) fn add_denied(
        &mut self,
        env: &PluginEnv,
        (denied, dropped): (Vec<(String, String)>, usize),
    ) {
        self.dropped_denied += dropped;
        for (capability, request) in denied {
            self.push_denied(env, capability, request);
        }
    }

    /// Ok if `event` fits in what is left of the call's event bytes.
    pub(crate) fn room(&self, event: &PluginEvent) -> Result<(), EventsFull> {
        self.events.room(event)
    }

    /// Records `event` if it fits.
    pub(crate) fn push(&mut self, event: PluginEvent) -> Result<(), EventsFull> {
        self.events.push(event)
    }

    /// The call's events, leaving none, after saying in the host's log how
    /// many went over the caps.
    pub(crate) fn take(&mut self, env: &PluginEnv) -> Vec<PluginEvent> {
        if self.dropped_logs > 0 {
            tracing::warn!(
                plugin = %env.id,
                dropped = self.dropped_logs,
                "dropped log lines over the caps of {MAX_LOG_LINES} lines and {} bytes of events per call",
                self.events.max_bytes()
            );
        }
        if self.dropped_denied > 0 {
            tracing::warn!(
                plugin = %env.id,
                dropped = self.dropped_denied,
                "dropped refused requests over the cap of {MAX_DENIED_PER_CALL} per call"
            );
        }
        let events = self.events.take();
        self.reset();
        events
    }
}
