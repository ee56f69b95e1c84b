//! What every plugin and run of a host shares: the engine, the plugin
//! linker, the compiled-code cache, the limits, the policy and the services.
//! Loading and calling plugins (`plugin.rs`) and the Python sandbox
//! (`sandbox/small/`) build on it; the [`Host`](crate::Host) facade owns it.

use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::cache::CodeCache;
use crate::controls::Controls;
use crate::engine::{Pool, new_engine};
use crate::env::Services;
use crate::limits::Metering;
use crate::plugin::state::PluginState;
use crate::sandbox::admission::Admission;
use sandwit_contract::limits::{Limits, RunLimits};
use sandwit_contract::policy::Policy;

/// The shared state of a host.
pub(crate) struct HostInner {
    pub(crate) engine: Engine,
    pub(crate) plugin_linker: Linker<PluginState>,
    pub(crate) cache: CodeCache,
    pub(crate) limits: Limits,
    pub(crate) run_limits: RunLimits,
    pub(crate) metering: Metering,
    pub(crate) prepared_interpreters: usize,
    /// Instances each plugin keeps made ahead of its calls.
    pub(crate) prepared_plugin_instances: usize,
    /// The share of the pool those of all plugins may hold.
    pub(crate) spare_room: crate::plugin::spares::Room,
    /// How long a Python sandbox's preparing thread polls with nothing to
    /// do before it sleeps until a run wakes it, and a count of those
    /// sleeps (`HostBuilder::park_after`); the thread's default otherwise.
    #[cfg(feature = "internals")]
    pub(crate) park: Option<(
        std::time::Duration,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
    )>,
    /// The cores this process may use.
    pub(crate) cores: usize,
    pub(crate) policy: Policy,
    pub(crate) services: Services,
    /// The chats' workspaces, if the host keeps them.
    pub(crate) workspaces: Option<crate::sandbox::workspace::HostWorkspaces>,
    /// The execution controls' state, for the host's life.
    pub(crate) controls: std::sync::Arc<Controls>,
    /// The run slots all its sandboxes' runs take turns in.
    pub(crate) admission: Admission,
}

impl HostInner {
    /// The most memory a call or a run may have: what each instance slot of
    /// the host's pool holds.
    pub(crate) fn max_memory(&self) -> usize {
        self.limits.memory_bytes.max(self.run_limits.memory_bytes)
    }

    /// An engine with the host's settings and a pool of its own (its code is
    /// compatible with the host's engine).
    pub(crate) fn engine_with(&self, pool: Pool) -> anyhow::Result<Engine> {
        engine(&self.limits, &self.run_limits, self.metering, pool)
    }
}

/// An engine for calls under `limits` and runs under `run_limits`: memory
/// slots fit the larger of their memory limits.
pub(crate) fn engine(
    limits: &Limits,
    run_limits: &RunLimits,
    metering: Metering,
    pool: Pool,
) -> anyhow::Result<Engine> {
    let max_memory = limits.memory_bytes.max(run_limits.memory_bytes);
    new_engine(max_memory, limits.table_elements, metering, pool)
}
