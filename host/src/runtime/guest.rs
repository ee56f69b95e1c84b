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
use crate::runtime::guard::{HostMeter, Limited};
use crate::runtime::limits::StoreLimiter;

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
        let random = HostRandom {
            fixed: fixed_random.clone(),
            state: 0,
        };
        let wasi = WasiCtx::builder()
            .secure_random(random)
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
/// generator (cryptographically secure, as wasmtime-wasi's default), or,
/// while `fixed` holds, a fixed sequence (SplitMix64 from zero).
struct HostRandom {
    fixed: Arc<AtomicBool>,
    /// The fixed sequence's state.
    state: u64,
}

impl TryRng for HostRandom {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.try_next_u64()? as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        if !self.fixed.load(Ordering::Relaxed) {
            return Ok(rand::rng().next_u64());
        }
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Ok(z ^ (z >> 31))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        if !self.fixed.load(Ordering::Relaxed) {
            rand::rng().fill_bytes(dst);
            return Ok(());
        }
        for chunk in dst.chunks_mut(8) {
            let word = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        Ok(())
    }
}
