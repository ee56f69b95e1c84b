//! The wasmtime [`Engine`]s of a host: fuel or epoch interruption as its
//! [`Metering`] says, instances from a [`Pool`], and, for epochs, a ticker
//! thread per engine that stops when the engine is dropped.

use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::limits::Metering;

/// How often the shared ticker advances the engine's epoch; deadlines are
/// accurate to about this much.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The most core instances, memories and tables one component may have.
const MAX_CORE_INSTANCES: u32 = 64;
const MAX_MEMORIES: u32 = 8;
const MAX_TABLES: u32 = 16;

/// How an engine's pooling allocator resets a memory slot for its next
/// instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pool {
    /// The host's engine: `instances` slots. A reset copies
    /// the image back over the slot's private pages (found with the
    /// `PAGEMAP_SCAN` ioctl: those this instance or an earlier one in the
    /// slot wrote, since a reset keeps them private), keeping them resident,
    /// up to wasmtime's 32 runs of pages; the rest goes back to the
    /// copy-on-write image, to be faulted in again. Memory is held only
    /// where it was written.
    Shared {
        /// Component instances the pool holds.
        instances: u32,
    },
    /// A Python sandbox's own (`python/resident.rs`): `instances` slots of
    /// one component, whose first `keep_resident` bytes of memory (the
    /// image) a reset copies back whole, so they stay resident and an
    /// instance in the slot takes no page fault there. Each slot holds that
    /// much memory once used.
    Resident {
        /// Component instances the pool holds.
        instances: u32,
        /// Memories and tables of the component.
        memories: u32,
        tables: u32,
        /// Bytes of each memory kept resident and copied back on reset.
        keep_resident: usize,
    },
}

/// Builds an engine whose instances come from wasmtime's pooling allocator
/// (memories and tables reserved up front, initialised copy-on-write from the
/// compiled image, reset on reuse rather than unmapped), each memory at most
/// `max_memory` bytes and each table `table_elements` long. Engines that
/// differ only in their [`Pool`] run the same compiled code.
pub(crate) fn new_engine(
    max_memory: usize,
    table_elements: usize,
    metering: Metering,
    kind: Pool,
) -> anyhow::Result<Engine> {
    // Core instances, memories and tables: in the shared pool, an average
    // per component instance (sandwit's interpreter has 9 core instances, a
    // plugin 2 to 4) and room for one component as large as any may be, so
    // a small pool still holds the interpreter; in a resident one, which
    // must hold its interpreters whatever they are made of, the most core
    // instances a component may have and its own memories and tables.
    let (instances, totals, keep_resident, pagemap) = match kind {
        Pool::Shared { instances } => (
            instances,
            (
                instances * 8 + MAX_CORE_INSTANCES,
                instances * 2 + MAX_MEMORIES,
                instances * 4 + MAX_TABLES,
            ),
            64 << 20,
            wasmtime::Enabled::Auto,
        ),
        Pool::Resident {
            instances,
            memories,
            tables,
            keep_resident,
        } => (
            instances,
            (
                instances * MAX_CORE_INSTANCES,
                instances * memories,
                instances * tables,
            ),
            keep_resident,
            wasmtime::Enabled::No,
        ),
    };
    let (core_instances, memories, tables) = totals;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        .total_core_instances(core_instances)
        .total_memories(memories)
        .total_tables(tables)
        .total_stacks(instances)
        .max_core_instances_per_component(MAX_CORE_INSTANCES)
        .max_memories_per_component(MAX_MEMORIES)
        .max_tables_per_component(MAX_TABLES)
        .max_memory_size(max_memory)
        .table_elements(table_elements)
        // Keep the first pages of each reused memory resident: reset by
        // copying instead of madvise, so the next instance does not fault
        // them in again.
        .linear_memory_keep_resident(keep_resident)
        .table_keep_resident(1 << 20)
        .pagemap_scan(pagemap);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(metering.fuel())
        .epoch_interruption(metering.epochs())
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .parallel_compilation(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config)?;
    if metering.epochs() {
        start_epoch_ticker(&engine);
    }
    Ok(engine)
}

/// The number of epoch ticks that make up `time`, rounded up.
pub(crate) fn deadline_ticks(time: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos();
    (time.as_nanos().div_ceil(tick) as u64).max(1)
}

fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("sandwit-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch ticker thread");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_share_compiled_code() {
        let engine = |kind| new_engine(64 << 20, 20_000, Metering::default(), kind).unwrap();
        let shared = engine(Pool::Shared { instances: 400 });
        let resident = engine(Pool::Resident {
            instances: 4,
            memories: 3,
            tables: 2,
            keep_resident: 16 << 20,
        });
        let key = |engine: &Engine| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(key(&shared), key(&resident));
    }

    #[test]
    fn ticks_round_up() {
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
        assert_eq!(deadline_ticks(Duration::from_micros(1500)), 2);
        assert_eq!(deadline_ticks(Duration::from_secs(1)), 1000);
    }
}
