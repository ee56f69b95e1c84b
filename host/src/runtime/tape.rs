//! What a run's interpreter reads of the world through WASI besides its
//! method calls: random bytes and the clocks. A run that may pause records
//! them ([`Tape::record`]), so that when it is resumed, replayed from its
//! start on another interpreter (`sandbox/pauses`), the code reads the same
//! values again and takes the same path to its pause. Past the recorded
//! values it reads live ones; the monotonic clock is shifted so it never
//! goes back across the pause.
//!
//! A tape that is not recording costs a guest one relaxed atomic load per
//! read: plugins' stores and runs that cannot pause read the world as
//! wasmtime-wasi would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

/// The most bytes of readings a run records; one that reads more cannot
/// be paused (its pause is refused, naming this).
pub(crate) const MAX_READINGS_BYTES: usize = 4 << 20;

/// The monotonic clock's zero: the first reading in this process.
static MONOTONIC_ZERO: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The values a run read, in order of reading, by source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Readings {
    /// Random bytes, as drawn.
    pub(crate) random: Vec<u8>,
    /// Wall-clock readings, in nanoseconds since the Unix epoch.
    pub(crate) wall: Vec<u64>,
    /// Monotonic-clock readings, in nanoseconds.
    pub(crate) monotonic: Vec<u64>,
}

impl Readings {
    fn bytes(&self) -> usize {
        self.random.len() + 8 * (self.wall.len() + self.monotonic.len())
    }
}

/// A store's tape: shared by its WASI random source and clocks.
#[derive(Clone, Default)]
pub(crate) struct Tape(Arc<TapeInner>);

#[derive(Default)]
struct TapeInner {
    on: AtomicBool,
    reel: Mutex<Reel>,
}

#[derive(Default)]
struct Reel {
    recorded: Readings,
    /// Set once the run read more than [`MAX_READINGS_BYTES`].
    overflowed: bool,
    replay: Readings,
    /// How far the replay has been read, by source.
    at: (usize, usize, usize),
    /// Added to live monotonic readings.
    shift: u64,
}

impl Tape {
    /// Starts recording a run's readings, handing out `replay`'s first.
    pub(crate) fn record(&self, replay: Readings) {
        let mut reel = self.reel();
        let live = monotonic_now();
        let last = replay.monotonic.last().copied().unwrap_or(0);
        *reel = Reel {
            shift: last.saturating_sub(live),
            replay,
            ..Reel::default()
        };
        self.0.on.store(true, Ordering::Relaxed);
    }

    /// Stops recording; what was recorded is dropped.
    pub(crate) fn stop(&self) {
        self.0.on.store(false, Ordering::Relaxed);
        *self.reel() = Reel::default();
    }

    /// What the run has read so far, unless it read too much to keep.
    pub(crate) fn readings(&self) -> Result<Readings, String> {
        let reel = self.reel();
        if reel.overflowed {
            return Err(format!(
                "the run read more than {} MiB of random bytes and clock readings, more than \
                 a paused run may replay",
                MAX_READINGS_BYTES >> 20
            ));
        }
        Ok(reel.recorded.clone())
    }

    fn reel(&self) -> std::sync::MutexGuard<'_, Reel> {
        self.0.reel.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn on(&self) -> bool {
        self.0.on.load(Ordering::Relaxed)
    }

    /// Fills `dst` with random bytes: replayed ones first, then `live`'s.
    pub(crate) fn fill(&self, dst: &mut [u8], live: impl FnOnce(&mut [u8])) {
        if !self.on() {
            return live(dst);
        }
        let mut reel = self.reel();
        let Reel { replay, at, .. } = &mut *reel;
        let replayed = (replay.random.len() - at.0).min(dst.len());
        dst[..replayed].copy_from_slice(&replay.random[at.0..at.0 + replayed]);
        at.0 += replayed;
        live(&mut dst[replayed..]);
        reel.keep(|r| r.random.extend_from_slice(dst), dst.len());
    }

    fn wall(&self) -> u64 {
        let live = || {
            let since = SystemTime::now().duration_since(UNIX_EPOCH);
            since.map_or(0, |d| d.as_nanos() as u64)
        };
        if !self.on() {
            return live();
        }
        let mut reel = self.reel();
        let value = match reel.replay.wall.get(reel.at.1) {
            Some(&value) => {
                reel.at.1 += 1;
                value
            }
            None => live(),
        };
        reel.keep(|r| r.wall.push(value), 8);
        value
    }

    fn monotonic(&self) -> u64 {
        if !self.on() {
            return monotonic_now();
        }
        let mut reel = self.reel();
        let value = match reel.replay.monotonic.get(reel.at.2) {
            Some(&value) => {
                reel.at.2 += 1;
                value
            }
            None => monotonic_now().saturating_add(reel.shift),
        };
        reel.keep(|r| r.monotonic.push(value), 8);
        value
    }
}

impl Reel {
    /// Records a reading of `bytes` with `push`, within the cap.
    fn keep(&mut self, push: impl FnOnce(&mut Readings), bytes: usize) {
        if self.overflowed {
            return;
        }
        if self.recorded.bytes() + bytes > MAX_READINGS_BYTES {
            self.overflowed = true;
            self.recorded = Readings::default();
            return;
        }
        push(&mut self.recorded);
    }
}

fn monotonic_now() -> u64 {
    MONOTONIC_ZERO.elapsed().as_nanos() as u64
}

/// A guest's `wasi:clocks/wall-clock`, read through its tape.
pub(crate) struct WallClock(pub(crate) Tape);

impl HostWallClock for WallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.wall())
    }
}

/// A guest's `wasi:clocks/monotonic-clock`, read through its tape.
pub(crate) struct MonotonicClock(pub(crate) Tape);

impl HostMonotonicClock for MonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.0.monotonic()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_hands_back_what_was_recorded_then_live_values_recorded_too() {
        let tape = Tape::default();
        tape.record(Readings::default());
        let mut first = [0u8; 24];
        tape.fill(&mut first, |d| d.fill(7));
        let (wall, mono) = (tape.wall(), tape.monotonic());
        let recorded = tape.readings().unwrap();
        assert_eq!(recorded.random, vec![7; 24]);
        assert_eq!(
            (recorded.wall.clone(), recorded.monotonic.clone()),
            (vec![wall], vec![mono])
        );

        let again = Tape::default();
        again.record(recorded.clone());
        let mut replayed = [0u8; 30];
        again.fill(&mut replayed, |d| d.fill(9));
        assert_eq!(&replayed[..24], &[7; 24]);
        assert_eq!(&replayed[24..], &[9; 6]);
        assert_eq!(again.wall(), wall);
        assert_eq!(again.monotonic(), mono);
        assert!(again.monotonic() >= mono, "the monotonic clock went back");
        let kept = again.readings().unwrap();
        assert_eq!(kept.random.len(), 30);
        assert_eq!(kept.monotonic.len(), 2);
    }

    #[test]
    fn a_stopped_tape_records_nothing_and_too_much_is_refused() {
        let tape = Tape::default();
        let mut bytes = [0u8; 8];
        tape.fill(&mut bytes, |d| d.fill(1));
        assert_eq!(bytes, [1; 8]);
        tape.record(Readings::default());
        let mut big = vec![0u8; MAX_READINGS_BYTES + 1];
        tape.fill(&mut big, |d| d.fill(2));
        let refused = tape.readings().unwrap_err();
        assert!(refused.contains("MiB of random bytes"), "{refused}");
        tape.stop();
        assert_eq!(tape.readings().unwrap(), Readings::default());
    }
}
