//! Running guest code: the engine and its pool (`engine`), compiling and
//! checking components (`loader`, `cache`), the data of every store
//! (`guest`), budgets and the call hook (`guard`, `limits`, `cancel`) and
//! captured output (`capture`). What every guest of a host shares is the
//! [`Runtime`]; the capabilities (`capabilities/`), plugins (`plugin/`) and
//! the sandboxes (`sandbox/`) build on it.

pub(crate) mod cache;
pub(crate) mod cancel;
pub(crate) mod capture;
pub(crate) mod engine;
pub(crate) mod fixed;
pub(crate) mod guard;
pub(crate) mod guest;
pub(crate) mod limits;
pub(crate) mod loader;
pub(crate) mod tape;

use wasmtime::Engine;

use crate::runtime::cache::CodeCache;
use crate::runtime::engine::{Pool, new_engine};
use crate::runtime::limits::Metering;
use sandwit_contract::limits::{CallLimits, RunLimits};

/// What every guest of a host shares: the engine, the compiled-code cache,
/// the limits and how they are metered.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) cache: CodeCache,
    pub(crate) limits: CallLimits,
    pub(crate) run_limits: RunLimits,
    pub(crate) metering: Metering,
    /// The cores this process may use.
    pub(crate) cores: usize,
}

impl Runtime {
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
    limits: &CallLimits,
    run_limits: &RunLimits,
    metering: Metering,
    pool: Pool,
) -> anyhow::Result<Engine> {
    let max_memory = limits.memory_bytes.max(run_limits.memory_bytes);
    new_engine(max_memory, limits.table_elements, metering, pool)
}
