//! The store data of one Python run.

use std::collections::HashMap;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::PluginSet;
use super::outcome::{Event, Handoff};
use crate::capture::CallOutput;
use crate::limits::{LimitKind, Limits, RunLimits, StoreLimiter};
use crate::plugin::Session;
use crate::types::AgentCtx;

pub(crate) struct RunState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: StoreLimiter,
    pub(crate) stdout: CallOutput,
    pub(crate) stderr: CallOutput,
    pub(crate) ctx: AgentCtx,
    pub(crate) plugins: PluginSet,
    pub(crate) deadline: Instant,
    pub(crate) calls: u32,
    pub(crate) max_calls: u32,
    pub(crate) events: Vec<Event>,
    /// Set when an agent method ended the run.
    pub(crate) handoff: Option<Handoff>,
    /// Set when a run-wide limit ended the run inside a method call.
    pub(crate) stop: Option<(LimitKind, String)>,
    /// The run's instance of each plugin it called, by [`Plugin::key`](crate::Plugin).
    pub(crate) sessions: HashMap<usize, Session>,
}

impl RunState {
    /// A closed WASI context: no args, env, preopened files or network; empty
    /// stdin; stdout and stderr captured up to the cap.
    pub(crate) fn new(
        ctx: &AgentCtx,
        plugins: &PluginSet,
        limits: &RunLimits,
        plugin_limits: &Limits,
        deadline: Instant,
    ) -> Self {
        let stdout = CallOutput::new(limits.max_output_bytes);
        let stderr = CallOutput::new(limits.max_output_bytes);
        let wasi = WasiCtx::builder()
            .stdin(MemoryInputPipe::new(Vec::new()))
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        RunState {
            wasi,
            table: ResourceTable::new(),
            limiter: StoreLimiter::with_memory(plugin_limits, limits.memory_bytes),
            stdout,
            stderr,
            ctx: ctx.clone(),
            plugins: plugins.clone(),
            deadline,
            calls: 0,
            max_calls: limits.max_calls,
            events: Vec::new(),
            handoff: None,
            stop: None,
            sessions: HashMap::new(),
        }
    }

    /// Makes a prepared interpreter's store data `run`'s, keeping its WASI
    /// context, resource table and output buffers (emptied, with the run's
    /// cap): the guest may hold handles to what preparing opened.
    pub(crate) fn hand_over(&mut self, run: RunState) {
        let prepared = std::mem::replace(self, run);
        for (kept, own) in [
            (&prepared.stdout, &self.stdout),
            (&prepared.stderr, &self.stderr),
        ] {
            kept.reset(own.capacity());
        }
        self.wasi = prepared.wasi;
        self.table = prepared.table;
        self.stdout = prepared.stdout;
        self.stderr = prepared.stderr;
    }
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl crate::guard::Limited for RunState {
    fn limiter(&self) -> &StoreLimiter {
        &self.limiter
    }

    fn limiter_mut(&mut self) -> &mut StoreLimiter {
        &mut self.limiter
    }
}
