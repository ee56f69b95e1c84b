//! The data of every store sandwit makes, whatever runs in it: the closed
//! WASI context, its resource table, the memory limiter and the host meter,
//! beside `S`, what that kind of guest adds (a plugin call's capabilities, a
//! Python run's method calls).

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
        let wasi = WasiCtx::builder()
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
        }
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
