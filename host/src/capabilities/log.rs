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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::capabilities::config::PluginConfig;
    use crate::capabilities::env::Services;
    use crate::capabilities::events::{
        CallEvents, LogLine, MAX_LOG_LINE_BYTES, MAX_LOG_LINES, PluginEvent,
    };
    use crate::capabilities::testing::{TestCall, config, ctx, env};

    /// A call of plugin `chatty`, granted nothing, configured with `config`.
    fn call(config: PluginConfig) -> TestCall {
        let env = env("chatty", &[], config, Services::for_tests());
        TestCall::new(&env, Some(ctx("chat-1", None)))
    }

    fn log(call: &mut TestCall, level: Level, message: &str) {
        LogCtx(call.scope()).log(level, message.into()).unwrap();
    }

    /// The log lines among the call's events, leaving none.
    fn lines(call: &mut TestCall) -> Vec<LogLine> {
        call.take_events()
            .into_iter()
            .map(|e| match e {
                PluginEvent::Log(line) => line,
                other => panic!("not a log line: {other:?}"),
            })
            .collect()
    }

    fn line(level: &'static str, message: &str) -> LogLine {
        LogLine {
            level,
            message: message.into(),
        }
    }

    #[test]
    fn lines_are_recorded_at_their_level_without_any_grant() {
        let mut call = call(PluginConfig::default());
        let levels = [
            (Level::Trace, "trace"),
            (Level::Debug, "debug"),
            (Level::Info, "info"),
            (Level::Warn, "warn"),
            (Level::Error, "error"),
        ];
        for (level, name) in levels {
            log(&mut call, level, &format!("at {name}"));
        }
        let want: Vec<LogLine> = levels
            .iter()
            .map(|(_, name)| line(name, &format!("at {name}")))
            .collect();
        assert_eq!(call.events.last_error(), Some("at error"));
        assert_eq!(lines(&mut call), want);
    }

    #[test]
    fn a_line_has_its_secrets_hidden_then_is_cut() {
        let config = config(json!({"token": "tok-123456"}), &["token"]);
        let mut call = call(config);
        log(&mut call, Level::Info, "the token is tok-123456");
        // The secret straddles the cut: no part of it survives.
        let long = format!(
            "{}tok-123456{}",
            "a".repeat(MAX_LOG_LINE_BYTES - 4),
            "b".repeat(1 << 16)
        );
        log(&mut call, Level::Warn, &long);
        let got = lines(&mut call);
        assert_eq!(got[0], line("info", "the token is [secret]"));
        let cut = &got[1].message;
        assert!(
            cut.len() <= MAX_LOG_LINE_BYTES + '…'.len_utf8(),
            "{}",
            cut.len()
        );
        assert!(cut.ends_with('…'), "marked as cut");
        assert!(
            !cut.contains("tok-") && !cut.contains("123456"),
            "{}",
            &cut[4000..]
        );
    }

    #[test]
    fn a_call_records_at_most_its_cap_of_lines_but_keeps_its_last_error() {
        let config = config(json!({"token": "tok-123456"}), &["token"]);
        let mut call = call(config);
        for i in 0..MAX_LOG_LINES + 10 {
            log(&mut call, Level::Info, &format!("line {i}"));
        }
        // Past the cap, the error an SDK logs before it traps is still
        // what the call's error names, its secret hidden.
        log(&mut call, Level::Error, "panicked with tok-123456");
        assert_eq!(call.events.last_error(), Some("panicked with [secret]"));
        let got = lines(&mut call);
        assert_eq!(got.len(), MAX_LOG_LINES);
        assert_eq!(
            got[MAX_LOG_LINES - 1],
            line("info", &format!("line {}", MAX_LOG_LINES - 1))
        );

        // Within the line cap, the call's event bytes cap them too.
        call.events = CallEvents::new(300);
        for _ in 0..10 {
            log(&mut call, Level::Info, &"x".repeat(100));
        }
        assert_eq!(
            lines(&mut call).len(),
            1,
            "one 100-byte line fits in 300 bytes"
        );
    }
}
