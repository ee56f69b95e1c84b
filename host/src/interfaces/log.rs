//! `sandwit:plugin/log`: plugin log lines, capped, to `tracing` and the call's events.

use crate::bindings::log_api::{Host, Level};
use crate::state::PluginState;

impl Host for PluginState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.meter.charge(message.len());
        self.push_log(level, message);
        Ok(())
    }
}
