//! The data of one store: one plugin instance for one call.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::error::cut;
use crate::limits::{Limits, StoreLimiter};

/// The most a plugin may write to its stdout and stderr in one call; the
/// text goes to the log.
pub(crate) const MAX_PLUGIN_STDIO_BYTES: usize = 64 << 10;
/// The most log lines a plugin may write in one call; later ones are dropped.
pub(crate) const MAX_LOG_LINES: usize = 1_000;
/// The longest log line kept; longer ones are cut.
pub(crate) const MAX_LOG_LINE_BYTES: usize = 4 << 10;

/// One line a plugin logged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLine {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The text, cut at 4 KiB.
    pub message: String,
}

/// Store data for a plugin instance.
pub(crate) struct PluginState {
    pub(crate) plugin: String,
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: StoreLimiter,
    pub(crate) logs: Vec<LogLine>,
    pub(crate) dropped_logs: usize,
    pub(crate) stderr: MemoryOutputPipe,
}

impl PluginState {
    /// A closed WASI context: no env, no args, no preopens, no network; stdout
    /// and stderr captured up to a cap.
    pub(crate) fn new(plugin: &str, limits: &Limits) -> Self {
        let stderr = MemoryOutputPipe::new(MAX_PLUGIN_STDIO_BYTES);
        let wasi = WasiCtx::builder()
            .stdout(stderr.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        PluginState {
            plugin: plugin.to_string(),
            wasi,
            table: ResourceTable::new(),
            limiter: StoreLimiter::new(limits),
            logs: Vec::new(),
            dropped_logs: 0,
            stderr,
        }
    }

    /// Records a log line within the caps and forwards it to `tracing`.
    pub(crate) fn push_log(&mut self, level: &'static str, message: String) {
        if self.logs.len() >= MAX_LOG_LINES {
            self.dropped_logs += 1;
            return;
        }
        let message = cut(message, MAX_LOG_LINE_BYTES);
        match level {
            "error" => tracing::error!(plugin = %self.plugin, "{message}"),
            "warn" => tracing::warn!(plugin = %self.plugin, "{message}"),
            "info" => tracing::info!(plugin = %self.plugin, "{message}"),
            "debug" => tracing::debug!(plugin = %self.plugin, "{message}"),
            _ => tracing::trace!(plugin = %self.plugin, "{message}"),
        }
        self.logs.push(LogLine { level, message });
    }

    /// Moves what the plugin printed into the log, one line each, and says
    /// how many lines went over the cap.
    pub(crate) fn finish_logs(&mut self) {
        let text = self.stderr.contents();
        for line in String::from_utf8_lossy(&text).lines() {
            self.push_log("info", line.to_string());
        }
        if self.dropped_logs > 0 {
            tracing::warn!(
                plugin = %self.plugin,
                dropped = self.dropped_logs,
                "dropped log lines over the cap of {MAX_LOG_LINES} per call"
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

impl crate::guard::Limited for PluginState {
    fn limiter(&self) -> &StoreLimiter {
        &self.limiter
    }
}
