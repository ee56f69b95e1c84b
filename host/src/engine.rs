//! The one wasmtime [`Engine`] of a host: fuel and epoch interruption as its
//! [`Metering`] says, and one shared epoch ticker thread that stops when the
//! engine is dropped.

use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::limits::Metering;

/// How often the shared ticker advances the engine's epoch; deadlines are
/// accurate to about this much.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Instances the pool holds at once; more concurrent instantiations fail
/// (and are reported as traps) until slots are free. Each memory slot
/// reserves (not commits) wasmtime's default 4 GiB of address space plus
/// guards, so this also bounds a host's virtual reservation (~3.5 TiB).
const POOL_COMPONENT_INSTANCES: u32 = 400;

/// Builds the engine every store of a host shares: instances come from
/// wasmtime's pooling allocator (memories and tables reserved up front,
/// initialised copy-on-write from the compiled image, reset on reuse rather
/// than unmapped), each memory at most `max_memory` bytes and each table
/// `table_elements` long.
pub(crate) fn new_engine(
    max_memory: usize,
    table_elements: usize,
    metering: Metering,
) -> anyhow::Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_COMPONENT_INSTANCES)
        .total_core_instances(POOL_COMPONENT_INSTANCES * 8)
        .total_memories(POOL_COMPONENT_INSTANCES * 2)
        .total_tables(POOL_COMPONENT_INSTANCES * 4)
        .total_stacks(POOL_COMPONENT_INSTANCES)
        .max_core_instances_per_component(64)
        .max_memories_per_component(8)
        .max_tables_per_component(16)
        .max_memory_size(max_memory)
        .table_elements(table_elements)
        // Keep the first pages of each reused memory resident: reset by
        // memset instead of madvise, so the next instance does not fault
        // them in again.
        .linear_memory_keep_resident(64 << 20)
        .table_keep_resident(1 << 20)
        .pagemap_scan(wasmtime::Enabled::Auto);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(metering.fuel())
        .epoch_interruption(metering.deadline())
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .parallel_compilation(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config)?;
    start_epoch_ticker(&engine);
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
    fn ticks_round_up() {
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
        assert_eq!(deadline_ticks(Duration::from_micros(1500)), 2);
        assert_eq!(deadline_ticks(Duration::from_secs(1)), 1000);
    }
}
