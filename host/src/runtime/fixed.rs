//! Entropy and time that are the same in every process: what an
//! interpreter is prepared with, so that its prepared memory is the same
//! byte for byte wherever it is prepared (a session stored over it is then
//! restored over another process's). A run never sees them: the first draw
//! a run makes comes from the host's entropy (`seed_random_on_first_use`).

use std::convert::Infallible;
use std::time::Duration;

use rand::rand_core::TryRng;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

/// SplitMix64 from a fixed state.
#[derive(Default)]
pub(crate) struct FixedRandom(u64);

impl TryRng for FixedRandom {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.try_next_u64()? as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Ok(z ^ (z >> 31))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(8) {
            let word = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        Ok(())
    }
}

/// A wall clock that always reads the same instant (2026-01-01T00:00:00Z).
pub(crate) struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        Duration::from_secs(1_767_225_600)
    }
}

/// A monotonic clock that moves one microsecond per reading: code that
/// waits for it to pass a mark still ends.
#[derive(Default)]
pub(crate) struct CountingClock(std::sync::atomic::AtomicU64);

impl HostMonotonicClock for CountingClock {
    fn resolution(&self) -> u64 {
        1_000
    }

    fn now(&self) -> u64 {
        let tick = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (tick + 1) * 1_000
    }
}
