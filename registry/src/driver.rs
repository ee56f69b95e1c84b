//! A private tokio runtime that drives the async clients of remote stores
//! (PostgreSQL connections, S3 requests) for the registry's blocking code.
//!
//! The registry's data access is blocking: SQLite calls block, so every
//! transaction runs as a closure on a blocking thread. The remote stores'
//! clients are async; their futures are run here with [`Driver::block_on`]
//! from such a thread. Their background tasks (a PostgreSQL connection's
//! I/O, an HTTP pool's) live on this runtime's own worker, so they keep
//! running whatever runtime the caller has, or none (the CLI's token
//! command, a test's runtime that ends with the test).

use std::future::Future;

use anyhow::Context;

/// The runtime, shut down without waiting when the registry is dropped.
pub struct Driver {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Driver {
    /// A runtime with one worker thread.
    pub fn new() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sandwit-registry-io")
            .enable_all()
            .build()
            .context("starting the registry's I/O runtime")?;
        Ok(Driver {
            runtime: Some(runtime),
        })
    }

    /// Runs `future` to completion on this thread, its spawned tasks on the
    /// runtime. The thread must not be a runtime's worker (tokio refuses to
    /// block one): call it from a blocking task or from [`off_runtime`].
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("the runtime lives until the driver is dropped")
            .block_on(future)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Dropping a runtime blocks until its tasks end, which tokio refuses
        // within another runtime (where a registry is often dropped).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `f` on a thread where [`Driver::block_on`] may be called: this one
/// when it runs no tokio runtime, else a thread of its own, waited for.
pub fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| match scope.spawn(f).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}
