//! The store data of one Python run.

use std::collections::HashMap;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::outcome::{Event, Handoff};
use super::plugin_set::PluginSet;
use crate::capture::CallOutput;
use crate::guard::HostMeter;
use crate::limits::{CappedEvents, LimitKind, Limits, RunLimits, StoreLimiter};
use crate::plugin::Session;
use crate::types::AgentCtx;

pub(crate) struct RunState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: StoreLimiter,
    /// Keeps the run's deadline for every host call and method call.
    pub(crate) meter: HostMeter,
    pub(crate) stdout: CallOutput,
    pub(crate) stderr: CallOutput,
    pub(crate) ctx: AgentCtx,
    pub(crate) plugins: PluginSet,
    pub(crate) calls: u32,
    pub(crate) max_calls: u32,
    /// The run's events, within [`RunLimits::max_events`] and
    /// [`RunLimits::max_event_bytes`].
    pub(crate) events: CappedEvents<Event>,
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
        let meter = HostMeter::new(deadline);
        let stdout = CallOutput::new(limits.max_output_bytes, meter.tab().clone());
        let stderr = CallOutput::new(limits.max_output_bytes, meter.tab().clone());
        let wasi = WasiCtx::builder()
            .stdin(MemoryInputPipe::new(Vec::new()))
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        // The run's own fields are set by `begin`.
        let mut state = RunState {
            wasi,
            table: ResourceTable::new(),
            limiter: StoreLimiter::with_memory(plugin_limits, 0),
            meter,
            stdout,
            stderr,
            ctx: AgentCtx::default(),
            plugins: PluginSet::default(),
            calls: 0,
            max_calls: 0,
            events: CappedEvents::new(0, 0),
            handoff: None,
            stop: None,
            sessions: HashMap::new(),
        };
        state.begin(ctx, plugins, limits, plugin_limits, deadline);
        state
    }

    /// Makes a prepared interpreter's store data the run's, keeping its WASI
    /// context, resource table and output buffers (emptied, with the run's
    /// cap): the guest may hold handles to what preparing opened, and a run
    /// need not pay for building a new WASI context.
    pub(crate) fn begin(
        &mut self,
        ctx: &AgentCtx,
        plugins: &PluginSet,
        limits: &RunLimits,
        plugin_limits: &Limits,
        deadline: Instant,
    ) {
        self.stdout.reset(limits.max_output_bytes);
        self.stderr.reset(limits.max_output_bytes);
        self.limiter = self.limiter.recapped(plugin_limits, limits.memory_bytes);
        self.meter.reset(deadline);
        self.ctx = ctx.clone();
        self.plugins = plugins.clone();
        self.calls = 0;
        self.max_calls = limits.max_calls;
        self.events = CappedEvents::new(limits.max_events, limits.max_event_bytes);
        self.handoff = None;
        self.stop = None;
        self.sessions.clear();
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

    fn meter(&mut self) -> &mut HostMeter {
        &mut self.meter
    }
}
