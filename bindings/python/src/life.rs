//! A host's runtime and the jobs running on it ([`Life`]), and the handle
//! by which the `Host` object, its plugins, its toolboxes and their
//! coroutines run jobs there ([`HostHandle`]).

use std::future::Future;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use sandwit::Host;

use crate::errors::SandwitError;
use crate::tasks::{Stop, Waiter};

/// What using a closed host raises.
pub(crate) const CLOSED: &str = "this Host is closed (its close() or aclose() was called, or its \
    `with` block ended): make a new Host";

/// A host's runtime, and the jobs running on it: `close()` shuts the
/// runtime down at once if none runs, else when the last one ends.
struct Life {
    state: Mutex<LifeState>,
}

struct LifeState {
    /// None once shut down.
    runtime: Option<tokio::runtime::Runtime>,
    closed: bool,
    /// Jobs started and not ended.
    running: usize,
}

impl Life {
    fn lock(&self) -> std::sync::MutexGuard<'_, LifeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The runtime's handle, unless the host is closed.
    fn handle(&self) -> PyResult<tokio::runtime::Handle> {
        let state = self.lock();
        match (&state.runtime, state.closed) {
            (Some(runtime), false) => Ok(runtime.handle().clone()),
            _ => Err(SandwitError::new_err(CLOSED)),
        }
    }

    /// The runtime's handle and the job's place among those running,
    /// unless the host is closed.
    fn start(self: &Arc<Self>) -> PyResult<(tokio::runtime::Handle, Running)> {
        let mut state = self.lock();
        let handle = match (&state.runtime, state.closed) {
            (Some(runtime), false) => runtime.handle().clone(),
            _ => return Err(SandwitError::new_err(CLOSED)),
        };
        state.running += 1;
        Ok((handle, Running(self.clone())))
    }

    /// Closes the host: no job starts any more, and the runtime is shut
    /// down now if none runs.
    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        let runtime = match state.running {
            0 => state.runtime.take(),
            _ => None,
        };
        drop(state);
        // Not waiting: a worker may be waiting for the GIL this thread holds.
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
    }
}

/// A job running on a host's runtime, until dropped (with the job).
pub(crate) struct Running(Arc<Life>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.running -= 1;
        if state.closed
            && state.running == 0
            && let Some(runtime) = state.runtime.take()
        {
            drop(state);
            // Maybe on one of the runtime's own threads, which cannot shut
            // it down.
            std::thread::spawn(move || runtime.shutdown_background());
        }
    }
}

/// A host as what runs jobs: the library's host and the runtime its jobs
/// run on. Clones share both. The `Host` object holds one, and so do its
/// plugins, the toolboxes it serves and their coroutines: the runtime
/// lives until the host is closed or the last of them is dropped. Jobs hold
/// a [`Running`], never a handle, so the last handle is never dropped by a
/// job on one of the runtime's own threads, which could not shut it down.
#[derive(Clone)]
pub(crate) struct HostHandle(Arc<Owned>);

struct Owned {
    host: Host,
    life: Arc<Life>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.life.close();
        // Jobs still running (their coroutines hold a handle, so only
        // synchronous ones a signal gave up on) end with the runtime.
        let runtime = self.life.lock().runtime.take();
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
    }
}

impl HostHandle {
    /// The handle of `host`, whose jobs run on `runtime`.
    pub(crate) fn new(host: Host, runtime: tokio::runtime::Runtime) -> Self {
        HostHandle(Arc::new(Owned {
            host,
            life: Arc::new(Life {
                state: Mutex::new(LifeState {
                    runtime: Some(runtime),
                    closed: false,
                    running: 0,
                }),
            }),
        }))
    }

    /// The library's host.
    pub(crate) fn core(&self) -> Host {
        self.0.host.clone()
    }

    /// The runtime's handle, unless the host is closed.
    pub(crate) fn handle(&self) -> PyResult<tokio::runtime::Handle> {
        self.0.life.handle()
    }

    /// The runtime's handle and a job's place among those running, unless
    /// the host is closed.
    pub(crate) fn start(&self) -> PyResult<(tokio::runtime::Handle, Running)> {
        self.0.life.start()
    }

    /// Closes the host's runtime: no job starts any more; it is shut down
    /// once none runs.
    pub(crate) fn close(&self) {
        self.0.life.close();
    }

    /// [`HostHandle::start`] for a coroutine that holds the handle (and so
    /// the runtime) until it is awaited (`tasks::coroutine`).
    pub(crate) fn runtime(
        &self,
    ) -> impl Fn() -> PyResult<(tokio::runtime::Handle, Running)> + Send + Sync + 'static {
        let handle = self.clone();
        move || handle.start()
    }

    /// Runs `work` on the runtime and waits for it with the GIL released;
    /// a signal (Ctrl-C) raised meanwhile ends the task and is raised.
    pub(crate) fn wait<T: Send + 'static>(
        &self,
        py: Python<'_>,
        work: impl Future<Output = T> + Send + 'static,
    ) -> PyResult<T> {
        self.wait_with(py, Waiter::default(), work, None, Stop::Abort)
    }

    /// [`Waiter::wait`] on the runtime, counted as running meanwhile.
    pub(crate) fn wait_with<T: Send + 'static>(
        &self,
        py: Python<'_>,
        waiter: Waiter<T>,
        work: impl Future<Output = T> + Send + 'static,
        on_event: Option<&Bound<'_, PyAny>>,
        stop: Stop,
    ) -> PyResult<T> {
        let (handle, running) = self.start()?;
        let work = async move {
            let _running = running;
            work.await
        };
        waiter.wait(py, &handle, work, on_event, stop)
    }
}
