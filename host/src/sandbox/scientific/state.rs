//! The store data of a scientific interpreter: a Python run's, and the WASI
//! preview 1 context its core module imports.

use wasmtime_wasi::p1::WasiP1Ctx;

use crate::sandbox::workspace::WorkspaceRun;

use crate::bindings::python::exports::sandwit::interpreter::runner;
use crate::runtime::guard::{HostMeter, Limited};
use crate::runtime::limits::StoreLimiter;
use crate::sandbox::run::calls::RunData;
use crate::sandbox::run::state::RunState;

pub(crate) struct SciData {
    /// Made afresh for every run (`Artifacts::wasi`): files a run left
    /// open are closed with its context, never seen by the next run.
    pub(crate) wasi: WasiP1Ctx,
    pub(crate) run: RunState,
    /// The run's code and methods, marshalled, until the guest asks for
    /// them (its `b` frame).
    pub(crate) pending: Option<Vec<u8>>,
    /// How the code ended, as the guest said (its `e` frame).
    pub(crate) ended: Option<runner::Outcome>,
    /// The run's chat workspace, if the sandbox has them.
    pub(crate) workspace: Option<WorkspaceRun>,
}

impl RunData for SciData {
    fn run_state(&mut self) -> &mut RunState {
        &mut self.run
    }
}

impl Limited for SciData {
    fn limiter(&self) -> &StoreLimiter {
        self.run.limiter()
    }

    fn limiter_mut(&mut self) -> &mut StoreLimiter {
        self.run.limiter_mut()
    }

    fn meter(&mut self) -> &mut HostMeter {
        self.run.meter()
    }
}
