//! The data of one store: one plugin instance for one call, or for the calls
//! of one Python run, and what the plugin did through the host's interfaces
//! in the current call.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::capture::CallOutput;
use crate::chat::ChatMessage;
use crate::env::{MAX_DENIED_PER_CALL, MAX_REQUEST_TEXT, PluginEnv};
use crate::guard::HostMeter;
use crate::interfaces::http::HttpGate;
use crate::limits::{CappedEvents, EventSize, Limits, StoreLimiter};
use crate::types::AgentCtx;

/// The most a plugin may write to its stdout and stderr in one call; the
/// text goes to the log.
pub(crate) const MAX_PLUGIN_STDIO_BYTES: usize = 64 << 10;
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

/// Store data for a plugin instance.
pub(crate) struct PluginState {
    pub(crate) env: Arc<PluginEnv>,
    /// The context of the call; `None` while the host asks for the manifest.
    pub(crate) ctx: Option<AgentCtx>,
    wasi: WasiCtx,
    table: ResourceTable,
    http_ctx: WasiHttpCtx,
    pub(crate) http: HttpGate,
    pub(crate) limiter: StoreLimiter,
    pub(crate) meter: HostMeter,
    /// The call's events, within [`Limits::max_event_bytes`].
    pub(crate) events: CappedEvents<PluginEvent>,
    pub(crate) logged: usize,
    pub(crate) dropped_logs: usize,
    denied: usize,
    dropped_denied: usize,
    pub(crate) messages: usize,
    stderr: CallOutput,
}

impl PluginState {
    /// A closed WASI context: no env, no args, no preopens, no sockets; stdout
    /// and stderr captured up to a cap. HTTP goes through the gate.
    pub(crate) fn new(
        env: Arc<PluginEnv>,
        ctx: Option<AgentCtx>,
        limits: &Limits,
        deadline: Instant,
    ) -> Self {
        let meter = HostMeter::new(deadline);
        let stderr = CallOutput::new(MAX_PLUGIN_STDIO_BYTES, meter.tab().clone());
        let wasi = WasiCtx::builder()
            .stdout(stderr.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let http = HttpGate::new(env.clone(), deadline, meter.tab().clone());
        PluginState {
            env,
            ctx,
            wasi,
            table: ResourceTable::new(),
            http_ctx: WasiHttpCtx::new(),
            http,
            limiter: StoreLimiter::new(limits),
            meter,
            events: CappedEvents::new(usize::MAX, limits.max_event_bytes),
            logged: 0,
            dropped_logs: 0,
            denied: 0,
            dropped_denied: 0,
            messages: 0,
            stderr,
        }
    }

    /// Makes the state ready for another call of the same instance: the
    /// call's context, the per-call caps afresh, HTTP with the new deadline.
    pub(crate) fn begin_call(&mut self, ctx: &AgentCtx, deadline: Instant) {
        self.ctx = Some(ctx.clone());
        self.meter.reset(deadline);
        self.events.take();
        self.logged = 0;
        self.dropped_logs = 0;
        self.denied = 0;
        self.dropped_denied = 0;
        self.messages = 0;
        self.http = HttpGate::new(self.env.clone(), deadline, self.meter.tab().clone());
    }

    /// Records a log line within the caps (secrets hidden, then cut at
    /// [`MAX_LOG_LINE_BYTES`], so no tail of a secret survives the cut) and
    /// forwards it to `tracing` within the plugin's rate.
    pub(crate) fn push_log(&mut self, level: &'static str, message: String) {
        if self.logged >= MAX_LOG_LINES {
            self.dropped_logs += 1;
            return;
        }
        let message = self
            .env
            .config
            .redactor
            .redact_cut(message, MAX_LOG_LINE_BYTES);
        let line = PluginEvent::Log(LogLine {
            level,
            message: message.clone(),
        });
        if self.events.push(line).is_err() {
            self.dropped_logs += 1;
            return;
        }
        self.logged += 1;
        if self.env.may_log() {
            let plugin = &self.env.id;
            match level {
                "error" => tracing::error!(%plugin, "{message}"),
                "warn" => tracing::warn!(%plugin, "{message}"),
                "info" => tracing::info!(%plugin, "{message}"),
                "debug" => tracing::debug!(%plugin, "{message}"),
                _ => tracing::trace!(%plugin, "{message}"),
            }
        }
    }

    /// Records a refused request (its text cut and secrets hidden) within
    /// the per-call cap, and logs it within the plugin's rate.
    pub(crate) fn push_denied(&mut self, capability: String, request: String) {
        if self.denied >= MAX_DENIED_PER_CALL {
            self.dropped_denied += 1;
            return;
        }
        let request = self
            .env
            .config
            .redactor
            .redact_cut(request, MAX_REQUEST_TEXT);
        let capability = self
            .env
            .config
            .redactor
            .redact_cut(capability, MAX_REQUEST_TEXT);
        if self.env.may_log() {
            tracing::warn!(plugin = %self.env.id, %capability, "denied: {request}");
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

    /// Moves what the plugin printed and the gate's refusals into the
    /// events, and says how many log lines and refusals went over the caps.
    pub(crate) fn finish_events(&mut self) {
        let (denied, dropped) = self.http.take_denied();
        self.dropped_denied += dropped;
        for (capability, request) in denied {
            self.push_denied(capability, request);
        }
        let text = self.stderr.take();
        for line in String::from_utf8_lossy(&text).lines() {
            self.push_log("info", line.to_string());
        }
        if self.dropped_logs > 0 {
            tracing::warn!(
                plugin = %self.env.id,
                dropped = self.dropped_logs,
                "dropped log lines over the caps of {MAX_LOG_LINES} lines and {} bytes of events per call",
                self.events.max_bytes()
            );
        }
        if self.dropped_denied > 0 {
            tracing::warn!(
                plugin = %self.env.id,
                dropped = self.dropped_denied,
                "dropped refused requests over the cap of {MAX_DENIED_PER_CALL} per call"
            );
        }
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

impl crate::guard::Limited for PluginState {
    fn limiter(&self) -> &StoreLimiter {
        &self.limiter
    }

    fn limiter_mut(&mut self) -> &mut StoreLimiter {
        &mut self.limiter
    }

    fn meter(&mut self) -> &mut HostMeter {
        &mut self.meter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::Grants;
    use crate::config::PluginConfig;
    use crate::env::Services;

    #[test]
    fn wasi_output_and_http_bodies_charge_the_meter_of_their_store() {
        let services = Services::for_tests();
        let env = PluginEnv::new("p", Grants::default(), PluginConfig::default(), services);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let mut state = PluginState::new(env, None, &Limits::default(), deadline);
        let mut stdout = wasmtime_wasi::cli::StdoutStream::p2_stream(&state.stderr);
        stdout.write(bytes::Bytes::from_static(b"12345")).unwrap();
        assert_eq!(state.meter.tab().take(), 5);
        // The HTTP gate charges the same tab; a new call keeps them shared.
        state.begin_call(&AgentCtx::new("c"), deadline);
        assert!(state.http.charges(state.meter.tab()));
        stdout.write(bytes::Bytes::from_static(b"123")).unwrap();
        assert_eq!(state.meter.tab().take(), 3);
    }
}
