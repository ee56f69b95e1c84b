//! The one wasmtime [`Engine`] of a host: fuel and epoch interruption on, and
//! one shared epoch ticker thread that stops when the engine is dropped.

use std::time::Duration;

use wasmtime::{Config, Engine};

/// How often the shared ticker advances the engine's epoch; deadlines are
/// accurate to about this much.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Builds the engine every store of a host shares.
pub(crate) fn new_engine() -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .parallel_compilation(true);
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
