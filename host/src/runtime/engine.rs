//! The wasmtime [`Engine`]s of a host: fuel or epoch interruption as its
//! [`Metering`] says, instances from a [`Pool`], and, for epochs, a ticker
//! thread per engine that stops when the engine is dropped.

use std::time::Duration;

use std::sync::Arc;

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, MemoryCreator, PoolingAllocationConfig,
};

use crate::runtime::limits::Metering;

/// How often the shared ticker advances the engine's epoch; deadlines are
/// accurate to about this much.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The most core instances, memories and tables one component may have.
const MAX_CORE_INSTANCES: u32 = 64;
const MAX_MEMORIES: u32 = 8;
const MAX_TABLES: u32 = 16;

/// Where an engine's instances come from.
#[derive(Clone)]
pub(crate) enum Pool {
    /// The host's engine: wasmtime's pooling allocator, of `instances`
    /// slots. A reset copies the image back over the slot's private pages
    /// (found with the `PAGEMAP_SCAN` ioctl: those this instance or an
    /// earlier one in the slot wrote, since a reset keeps them private),
    /// keeping them resident, up to wasmtime's 32 runs of pages; the rest
    /// goes back to the copy-on-write image, to be faulted in again. Memory
    /// is held only where it was written.
    Shared {
        /// Component instances the pool holds.
        instances: u32,
    },
    /// A Python sandbox's own (`sandbox/small/reusable.rs`): instances allocated
    /// one by one, their memories created by `memories`
    /// (`sandbox/snapshot.rs`), which sandwit restores itself so an instance
    /// serves many runs.
    Owned { memories: Arc<dyn MemoryCreator> },
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pool::Shared { instances } => write!(f, "Pool::Shared {{ instances: {instances} }}"),
            Pool::Owned { .. } => f.write_str("Pool::Owned"),
        }
    }
}

/// Builds an engine whose instances come from `kind`, each memory at most
/// `max_memory` bytes and each table `table_elements` long. Engines of
/// [`Pool::Shared`] run the same compiled code whatever their size; those
/// of [`Pool::Owned`] need code of their own.
pub(crate) fn new_engine(
    max_memory: usize,
    table_elements: usize,
    metering: Metering,
    kind: Pool,
) -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(metering.fuel())
        .epoch_interruption(metering.epochs())
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .parallel_compilation(true)
        // Plugins and the component interpreter are accepted without the GC
        // proposals (and exceptions, which need them in wasmtime 48): the
        // surface a plugin may use stays what it was before the scientific
        // interpreter needed the `gc` feature compiled in.
        .gc_support(false);
    match kind {
        Pool::Shared { instances } => {
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(
                instances,
                max_memory,
                table_elements,
            )));
        }
        Pool::Owned { memories } => {
            // Copy-on-write images need memory wasmtime maps itself: the
            // data segments are copied in instead (once per instance, which
            // then serves many runs). Its code is compiled on the preparing
            // thread, which yields to runs: on that thread alone.
            config
                .allocation_strategy(InstanceAllocationStrategy::OnDemand)
                .memory_init_cow(false)
                .parallel_compilation(false)
                .with_host_memory(memories);
        }
    }
    let engine = Engine::new(&config)?;
    if metering.epochs() {
        start_epoch_ticker(&engine);
    }
    Ok(engine)
}

/// The engine of a scientific sandbox (`sandbox/scientific`): a core
/// module that needs wasm exceptions (so wasmtime's GC runtime, with the
/// deferred reference-counting collector, which frees the exception objects
/// a call leaves behind), metered as `metering` says, its memories created
/// by `memories`, and a wasm stack of `max_stack` bytes (CPython's parser
/// and numpy's C recurse deeper than wasmtime's 512 KiB default).
pub(crate) fn new_exceptions_engine(
    metering: Metering,
    memories: Arc<dyn MemoryCreator>,
    max_stack: usize,
) -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config
        .consume_fuel(metering.fuel())
        .epoch_interruption(metering.epochs())
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .parallel_compilation(true)
        .wasm_exceptions(true)
        .collector(wasmtime::Collector::DeferredReferenceCounting)
        .max_wasm_stack(max_stack)
        // Room for the host functions' own frames above the guest's.
        .async_stack_size(max_stack + (2 << 20))
        .allocation_strategy(InstanceAllocationStrategy::OnDemand)
        .memory_init_cow(false)
        .with_host_memory(memories);
    let engine = Engine::new(&config)?;
    if metering.epochs() {
        start_epoch_ticker(&engine);
    }
    Ok(engine)
}

/// wasmtime's pooling allocator (memories and tables reserved up front,
/// initialised copy-on-write from the compiled image, reset on reuse rather
/// than unmapped) of `instances` component instances.
fn pooling(instances: u32, max_memory: usize, table_elements: usize) -> PoolingAllocationConfig {
    // Core instances, memories and tables: an average per component
    // instance (sandwit's interpreter has 9 core instances, a plugin 2 to
    // 4) and room for one component as large as any may be, so a small pool
    // still holds the interpreter.
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        .total_core_instances(instances * 8 + MAX_CORE_INSTANCES)
        .total_memories(instances * 2 + MAX_MEMORIES)
        .total_tables(instances * 4 + MAX_TABLES)
        .total_stacks(instances)
        .max_core_instances_per_component(MAX_CORE_INSTANCES)
        .max_memories_per_component(MAX_MEMORIES)
        .max_tables_per_component(MAX_TABLES)
        .max_memory_size(max_memory)
        .table_elements(table_elements)
        // Keep the first pages of each reused memory resident: reset by
        // copying instead of madvise, so the next instance does not fault
        // them in again.
        .linear_memory_keep_resident(64 << 20)
        .table_keep_resident(1 << 20)
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
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
    fn shared_pools_share_compiled_code_and_owned_ones_have_their_own() {
        let engine = |kind| new_engine(64 << 20, 20_000, Metering::default(), kind).unwrap();
        let small = engine(Pool::Shared { instances: 4 });
        let shared = engine(Pool::Shared { instances: 400 });
        let owned = engine(Pool::Owned {
            memories: Arc::new(crate::sandbox::snapshot::Memories::default()),
        });
        let key = |engine: &Engine| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(key(&small), key(&shared));
        // So the code cache keeps each engine's in a directory of its own.
        assert_ne!(key(&shared), key(&owned));
    }

    #[test]
    fn ticks_round_up() {
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
        assert_eq!(deadline_ticks(Duration::from_micros(1500)), 2);
        assert_eq!(deadline_ticks(Duration::from_secs(1)), 1000);
    }
}
