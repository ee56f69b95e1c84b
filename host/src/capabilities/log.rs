//! `sandwit:plugin/log`: plugin log lines, capped, to `tracing` and the call's events.

use wasmtime::component::{HasData, Linker};

use super::scope::{CallData, CallScope};
use crate::bindings::log_api::{self, Host, Level};

/// The context of `log`: the call's scope.
pub(crate) struct LogCtx<'a>(CallScope<'a>);

struct Log;

impl HasData for Log {
    type Data<'a> = LogCtx<'a>;
}

pub(crate) fn add_to_linker<T: CallData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    log_api::add_to_linker::<T, Log>(linker, |data| LogCtx(data.scope()))
}

impl Host for LogCtx<'_> {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        let call = &mut self.0;
        call.meter.charge(message.len());
        call.events.push_log(call.env, level, message);
        Ok(())
    }
}
