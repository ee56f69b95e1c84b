//! The calls' queue ([`CallQueue`]): whatever instantiates a plugin for a
//! request outside a run (a direct method call, the lifecycle hooks asked
//! for a chat's listing or prompt) waits in it, at most `running` at once
//! and `waiting` more admitted; past that a request is refused at once
//! (503 with Retry-After), so load never grows memory without bound.
//!
//! Runs have no queue here: each takes a place in the host's run queue
//! ([`sandwit::Host::run_place`]), held until its answer has gone out, and
//! waits for the host's run slot as any run does.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// What a client is told to wait before trying again, in seconds.
pub(crate) const RETRY_AFTER_S: u64 = 1;

/// Admission and concurrency of calls.
pub struct CallQueue {
    admitted: Arc<Semaphore>,
    running: Arc<Semaphore>,
    max_wait: Duration,
}

/// A call's place in the queue and its running slot: the call runs while
/// this is held.
pub struct CallSlot {
    admitted: OwnedSemaphorePermit,
    _running: OwnedSemaphorePermit,
}

/// A finished call's place in the queue, kept while its answer goes out
/// (crate::answer): the running slot is free for the next call, but the
/// queue admits no more calls than its places while answers are held.
pub struct CallPlace {
    _admitted: OwnedSemaphorePermit,
}

impl CallSlot {
    /// Frees the running slot and keeps the place for the answer.
    pub fn answering(self) -> CallPlace {
        CallPlace {
            _admitted: self.admitted,
        }
    }
}

/// A place held in a queue: a call's slot, or a run's place in the host's
/// run queue. What a request holds while plugins are instantiated for it
/// (their lifecycle hooks).
pub(crate) trait Held {}

impl Held for CallSlot {}

impl Held for sandwit::RunPlace {}

impl CallQueue {
    /// At most `running` calls at once, `waiting` more waiting, each for
    /// at most `max_wait`.
    pub fn new(running: usize, waiting: usize, max_wait: Duration) -> Self {
        CallQueue {
            admitted: Arc::new(Semaphore::new(running.saturating_add(waiting))),
            running: Arc::new(Semaphore::new(running)),
            max_wait,
        }
    }

    /// A slot to call in, after waiting for one if the queue has room.
    pub async fn enter(&self) -> Result<CallSlot, ApiError> {
        let admitted = self.admitted.clone().try_acquire_owned().map_err(|_| {
            ApiError::unavailable(
                "queue-full",
                "every call slot and queue place is taken; try again shortly",
                RETRY_AFTER_S,
            )
        })?;
        match tokio::time::timeout(self.max_wait, self.running.clone().acquire_owned()).await {
            Ok(Ok(running)) => Ok(CallSlot {
                admitted,
                _running: running,
            }),
            // The queue is never closed.
            Ok(Err(_closed)) => unreachable!("the calls' queue is never closed"),
            Err(_elapsed) => Err(ApiError::unavailable(
                "queue-timeout",
                format!(
                    "no call slot came free within {} ms",
                    self.max_wait.as_millis()
                ),
                RETRY_AFTER_S,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past its slot and its waiting room a call is refused at once; a
    /// finished call's answer keeps its place until it has gone out.
    #[tokio::test]
    async fn calls_past_the_places_are_refused_and_answers_keep_theirs() {
        let queue = CallQueue::new(1, 1, Duration::from_millis(50));
        let first = queue.enter().await.unwrap();
        // The second waits past the most it may.
        let late = queue.enter().await.err().unwrap();
        assert_eq!(late.code(), "queue-timeout");
        let answering = first.answering();
        let second = queue.enter().await.unwrap();
        let full = queue.enter().await.err().unwrap();
        assert_eq!(full.code(), "queue-full");
        drop((answering, second));
        queue.enter().await.unwrap();
    }
}
