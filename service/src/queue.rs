//! A bounded queue of work: at most `running` at once and `waiting` more
//! admitted; past that a request is refused at once (503 with
//! Retry-After), so load never grows memory without bound. The service
//! keeps one for runs and one for whatever else instantiates a plugin for
//! a request: direct method calls, and the lifecycle hooks asked for a
//! chat's listing or prompt.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::error::ApiError;

/// What a client is told to wait before trying again, in seconds.
const RETRY_AFTER_S: u64 = 1;

/// Admission and concurrency of runs (or calls).
pub struct RunQueue {
    /// What it admits (`run`, `call`), as its refusals name it.
    what: &'static str,
    admitted: Arc<Semaphore>,
    running: Arc<Semaphore>,
    max_running: usize,
    waiting: AtomicUsize,
    max_wait: Duration,
}

/// A place in the queue: the work runs while this is held.
pub struct RunSlot {
    admitted: OwnedSemaphorePermit,
    _running: OwnedSemaphorePermit,
    /// How long it was waited for.
    pub(crate) waited: std::time::Duration,
}

/// A finished run's place in the queue, kept while its answer goes out
/// (crate::answer): the running slot is free for the next run, but the
/// queue admits no more runs than its places while answers are held.
pub struct Answering {
    _admitted: OwnedSemaphorePermit,
}

impl RunSlot {
    /// Frees the running slot and keeps the place for the answer.
    pub fn answering(self) -> Answering {
        Answering {
            _admitted: self.admitted,
        }
    }
}

impl RunQueue {
    /// At most `running` of `what` at once, `waiting` more waiting, each
    /// for at most `max_wait`.
    pub fn new(what: &'static str, running: usize, waiting: usize, max_wait: Duration) -> Self {
        RunQueue {
            what,
            admitted: Arc::new(Semaphore::new(running + waiting)),
            running: Arc::new(Semaphore::new(running)),
            max_running: running,
            waiting: AtomicUsize::new(0),
            max_wait,
        }
    }

    /// A slot to run in, after waiting for one if the queue has room.
    pub async fn enter(&self) -> Result<RunSlot, ApiError> {
        let admitted = self
            .admitted
            .clone()
            .try_acquire_owned()
            .map_err(|e| match e {
                TryAcquireError::Closed => ApiError::unavailable(
                    "shutting-down",
                    "the server is shutting down",
                    RETRY_AFTER_S,
                ),
                TryAcquireError::NoPermits => ApiError::unavailable(
                    "queue-full",
                    format!(
                        "every {} slot and queue place is taken; try again shortly",
                        self.what
                    ),
                    RETRY_AFTER_S,
                ),
            })?;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let asked = std::time::Instant::now();
        let running =
            tokio::time::timeout(self.max_wait, self.running.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        match running {
            Ok(Ok(running)) => Ok(RunSlot {
                admitted,
                _running: running,
                waited: asked.elapsed(),
            }),
            Ok(Err(_)) => Err(ApiError::unavailable(
                "shutting-down",
                "the server is shutting down",
                RETRY_AFTER_S,
            )),
            Err(_) => Err(ApiError::unavailable(
                "queue-timeout",
                format!(
                    "no {} slot came free within {} ms",
                    self.what,
                    self.max_wait.as_millis()
                ),
                RETRY_AFTER_S,
            )),
        }
    }

    /// Runs running now.
    pub fn running(&self) -> usize {
        self.max_running - self.running.available_permits()
    }

    /// Runs waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The most runs at once.
    pub fn max_running(&self) -> usize {
        self.max_running
    }

    /// Admits no more runs (those waiting are refused).
    pub fn close(&self) {
        self.admitted.close();
        self.running.close();
    }
}
