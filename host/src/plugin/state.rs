//! The store data of a plugin instance, serving one call or the calls of one
//! Python run, and the linker that gives plugins WASI (closed), `wasi:http`
//! (through the gate) and sandwit's own interfaces.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Engine;
use wasmtime::component::Linker;
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use crate::capabilities;
use crate::capabilities::chat::interface::{ChatCtx, ChatData, Sent};
use crate::capabilities::env::PluginEnv;
use crate::capabilities::events::{CallEvents, PluginEvent};
use crate::capabilities::http::interface::PluginHttp;
use crate::capabilities::scope::{CallData, CallScope};
use crate::runtime::capture::CallOutput;
use crate::runtime::guard::HostMeter;
use crate::runtime::guest::Guest;
use crate::runtime::limits::StoreLimiter;
use sandwit_contract::limits::CallLimits;
use sandwit_contract::types::AgentCtx;

/// The most a plugin's stdout and stderr keep of one call, together; the
/// text goes to the log, and what is printed past it is dropped (and said
/// so in a `warn` line).
pub(crate) const MAX_PLUGIN_STDIO_BYTES: usize = 64 << 10;

/// A plugin instance's store data.
pub(crate) type PluginState = Guest<PluginCall>;

/// What a plugin's store adds to every guest's: its environment, the
/// current call, and each capability's state in that call.
pub(crate) struct PluginCall {
    env: Arc<PluginEnv>,
    /// The context of the call; `None` while the host asks for the manifest.
    ctx: Option<AgentCtx>,
    /// The call's events, within [`CallLimits::max_event_bytes`].
    events: CallEvents,
    sent: Sent,
    http: PluginHttp,
    /// What the plugin printed to stdout and stderr in the call.
    output: CallOutput,
}

/// What a plugin said last in a call ([`Guest::last_said`]).
pub(crate) enum Said {
    /// An error-level log line: the SDK's report of what traps it.
    Error(String),
    /// The last lines it printed.
    Printed(String),
    Nothing,
}

/// A plugin's linker on `engine`.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<PluginState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    capabilities::http::interface::add_to_linker(&mut linker)?;
    capabilities::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// A plugin's store data for a call with `ctx` (none while it describes
/// itself) ending at `deadline`.
pub(crate) fn new(
    env: Arc<PluginEnv>,
    ctx: Option<AgentCtx>,
    limits: &CallLimits,
    deadline: Instant,
) -> PluginState {
    let meter = HostMeter::new(deadline);
    let output = CallOutput::cutting(MAX_PLUGIN_STDIO_BYTES, meter.tab().clone());
    let call = PluginCall {
        http: PluginHttp::new(env.clone(), deadline, meter.tab().clone()),
        env,
        ctx,
        events: CallEvents::new(limits.max_event_bytes),
        sent: Sent::default(),
        output: output.clone(),
    };
    Guest::closed(
        output.clone(),
        output,
        StoreLimiter::new(limits),
        meter,
        call,
    )
}

impl Guest<PluginCall> {
    /// What the plugin said last in the call, for a trap that follows:
    /// the last error-level line it logged (an SDK's report of the
    /// exception or panic that is about to trap it), else the last two lines
    /// it printed (where a runtime without the SDK writes a panic), secrets
    /// hidden.
    pub(crate) fn last_said(&self) -> Said {
        if let Some(said) = self.state.events.last_error() {
            return Said::Error(said.to_string());
        }
        let printed = self.state.output.last_lines(2);
        if printed.is_empty() {
            return Said::Nothing;
        }
        Said::Printed(self.state.env.config.redactor.redact_cut(printed, 2_000))
    }

    /// Makes the store ready for another call of the same instance: the
    /// call's context, the per-call caps afresh, HTTP with the new deadline.
    pub(crate) fn begin_call(&mut self, ctx: &AgentCtx, deadline: Instant) {
        self.meter.reset(deadline);
        let call = &mut self.state;
        call.ctx = Some(ctx.clone());
        call.events.reset();
        call.sent = Sent::default();
        call.http.begin_call(deadline);
    }

    /// Gives a store made with nothing granted (an instance made ahead)
    /// the plugin's environment, and drops what the instance printed
    /// meanwhile: from here on, as a store made for a call.
    pub(crate) fn hand_over(&mut self, env: Arc<PluginEnv>, deadline: Instant) {
        let call = &mut self.state;
        call.http = PluginHttp::new(env.clone(), deadline, self.meter.tab().clone());
        call.env = env;
        call.output.take();
    }

    /// The call's events, leaving none: what it recorded, the gate's
    /// refusals, then what it printed, line by line, as `info` log lines.
    pub(crate) fn take_events(&mut self) -> Vec<PluginEvent> {
        let call = &mut self.state;
        let env = &*call.env;
        call.events.add_denied(env, call.http.gate.take_denied());
        let (text, dropped) = call.output.take();
        for line in String::from_utf8_lossy(&text).lines() {
            call.events.push_log(env, "info", line.to_string());
        }
        if dropped > 0 {
            let cut = format!(
                "output cut: {dropped} more bytes printed past the cap of \
                 {MAX_PLUGIN_STDIO_BYTES} bytes per call were dropped"
            );
            call.events.push_log(env, "warn", cut);
        }
        call.events.take(env)
    }
}

impl CallData for Guest<PluginCall> {
    fn scope(&mut self) -> CallScope<'_> {
        CallScope {
            env: &self.state.env,
            ctx: self.state.ctx.as_ref(),
            meter: &mut self.meter,
            events: &mut self.state.events,
        }
    }
}

impl ChatData for Guest<PluginCall> {
    fn chat(&mut self) -> ChatCtx<'_> {
        ChatCtx {
            call: CallScope {
                env: &self.state.env,
                ctx: self.state.ctx.as_ref(),
                meter: &mut self.meter,
                events: &mut self.state.events,
            },
            sent: &mut self.state.sent,
        }
    }
}

impl WasiHttpView for Guest<PluginCall> {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let (table, call) = self.table_and_state();
        call.http.view(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::config::PluginConfig;
    use crate::capabilities::env::Services;
    use sandwit_contract::capability::Grants;

    #[test]
    fn wasi_output_and_http_bodies_charge_the_meter_of_their_store() {
        let services = Services::for_tests();
        let env = PluginEnv::new("p", Grants::default(), PluginConfig::default(), services);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let mut state = new(env, None, &CallLimits::default(), deadline);
        let mut stdout = wasmtime_wasi::cli::StdoutStream::p2_stream(&state.state.output);
        stdout.write(bytes::Bytes::from_static(b"12345")).unwrap();
        assert_eq!(state.meter.tab().take(), 5);
        // The HTTP gate charges the same tab; a new call keeps them shared.
        state.begin_call(&AgentCtx::new("c"), deadline);
        assert!(state.state.http.gate.charges(state.meter.tab()));
        stdout.write(bytes::Bytes::from_static(b"123")).unwrap();
        assert_eq!(state.meter.tab().take(), 3);
    }
}
