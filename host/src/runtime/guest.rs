//! The data of every store sandwit makes, whatever runs in it: the closed
//! WASI context, its resource table, the memory limiter and the host meter,
//! beside `S`, what that kind of guest adds (a plugin call's capabilities, a
//! Python run's method calls).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::Rng as _;
use rand::rand_core::TryRng;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::runtime::capture::CallOutput;
use crate::runtime::fixed::FixedRandom;
use crate::runtime::guard::{HostMeter, Limited};
use crate::runtime::limits::StoreLimiter;
use crate::runtime::tape::{MonotonicClock, Tape, WallClock};

/// A store's data: what every guest gets, and its own state `S`.
pub(crate) struct Guest<S> {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: StoreLimiter,
    /// Keeps the deadline of the current call or run at every host call.
    pub(crate) meter: HostMeter,
    pub(crate) state: S,
    /// Set while the guest draws the fixed sequence ([`HostRandom`]).
    fixed_random: Arc<AtomicBool>,
    /// What the guest reads of random bytes and the clocks, recorded while
    /// a run that may pause runs.
    pub(crate) tape: Tape,
}

impl<S> Guest<S> {
    /// A guest with a closed WASI context: no args, env, preopened files,
    /// sockets or name lookups; empty stdin; stdout and stderr captured up
    /// to their caps (and charged to `meter`'s tab, as they should be).
    pub(crate) fn closed(
        stdout: CallOutput,
        stderr: CallOutput,
        limiter: StoreLimiter,
        meter: HostMeter,
        state: S,
    ) -> Self {
        let fixed_random = Arc::new(AtomicBool::new(false));
        let tape = Tape::default();
        let random = HostRandom {
            fixed: fixed_random.clone(),
            sequence: FixedRandom::default(),
            tape: tape.clone(),
        };
        let wasi = WasiCtx::builder()
            .secure_random(random)
            .wall_clock(WallClock(tape.clone()))
            .monotonic_clock(MonotonicClock(tape.clone()))
            .stdin(MemoryInputPipe::new(Vec::new()))
            .stdout(stdout)
            .stderr(stderr)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Guest {
            wasi,
            table: ResourceTable::new(),
            limiter,
            meter,
            state,
            fixed_random,
            tape,
        }
    }

    /// Has the guest's `wasi:random` draw a fixed sequence while `fixed`
    /// holds, the thread's generator otherwise (the default). An
    /// interpreter prepared as a session's base draws the fixed one, so
    /// that every base (in any process of the same build) has the same
    /// memory, byte for byte: what it drew while prepared (the seed of
    /// `random`'s generator) is drawn again from the host's entropy by the
    /// first run that uses it.
    pub(crate) fn fix_random(&mut self, fixed: bool) {
        self.fixed_random.store(fixed, Ordering::Relaxed);
    }

    /// The resources the guest holds handles to.
    pub(crate) fn resources(&mut self) -> usize {
        self.table.iter_mut().count()
    }

    /// The reps of the resources the guest holds handles to.
    pub(crate) fn occupied(&mut self) -> Vec<u32> {
        let mut left = self.resources();
        let mut reps = Vec::with_capacity(left);
        let mut rep = 0;
        while left > 0 && rep < u32::MAX {
            if self.table.get_any_mut(rep).is_ok() {
                reps.push(rep);
                left -= 1;
            }
            rep += 1;
        }
        reps
    }

    /// The resource table and the guest's own state, borrowed together (for
    /// views such as `wasi:http`'s that need both).
    pub(crate) fn table_and_state(&mut self) -> (&mut ResourceTable, &mut S) {
        (&mut self.table, &mut self.state)
    }
}

/// The guest's own state reads as the store data's: `state.calls` for
/// `state.state.calls`.
impl<S> std::ops::Deref for Guest<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.state
    }
}

impl<S> std::ops::DerefMut for Guest<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.state
    }
}

impl<S: Send + 'static> WasiView for Guest<S> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl<S: Send + 'static> Limited for Guest<S> {
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

/// The random source of a guest's `wasi:random/random`: the thread's
/// generator (cryptographically secure, as wasmtime-wasi's default) read
/// through the guest's tape, or, while `fixed` holds, a fixed sequence
/// ([`FixedRandom`]).
struct HostRandom {
    fixed: Arc<AtomicBool>,
    sequence: FixedRandom,
    tape: Tape,
}

impl TryRng for HostRandom {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.try_next_u64()? as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        if !self.fixed.load(Ordering::Relaxed) {
            let mut word = [0; 8];
            self.tape.fill(&mut word, |d| rand::rng().fill_bytes(d));
            return Ok(u64::from_le_bytes(word));
        }
        self.sequence.try_next_u64()
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        if !self.fixed.load(Ordering::Relaxed) {
            self.tape.fill(dst, |d| rand::rng().fill_bytes(d));
            return Ok(());
        }
        self.sequence.try_fill_bytes(dst)
    }
}
