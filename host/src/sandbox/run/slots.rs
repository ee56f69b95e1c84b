//! Admission of runs, the host's run queue: at most so many of a host's
//! runs execute at once, in all its sandboxes together; the others wait in
//! a bounded queue, each for a bounded time. A run's time limit counts from
//! when it gets its slot, so runs that outnumber the cores wait their turn
//! instead of sharing the cores and running out of time together.
//!
//! A front end that answers runs over connections (`sandwit serve`) has no
//! queue of its own: it takes a [`RunPlace`] in this one for each run it
//! admits, at once or refused ([`Host::run_place`](crate::Host::run_place)),
//! and holds it until the run's answer has gone out. The queue's places
//! are its slots and its waiting room together, so the runs admitted and
//! the answers still held for slow clients are never more than those.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

use crate::runtime::cancel::Cancel;

/// How many of a host's runs execute at once and how many may wait for a
/// slot ([`HostBuilder::run_slots`](crate::HostBuilder::run_slots)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSlots {
    /// Runs executing at once, in all the host's sandboxes together.
    /// Default: the cores this process may use, so a busy run has a core
    /// to itself and its time limit measures its own work.
    pub running: usize,
    /// Runs waiting for a slot at once; a run past them is refused at once
    /// ([`LimitKind::Queue`](crate::LimitKind::Queue)). Default [`DEFAULT_WAITING_RUNS`].
    /// With `running`, the places a front end takes ([`RunPlace`]).
    pub waiting: usize,
    /// How long a run waits for a slot before it is refused
    /// ([`LimitKind::Queue`](crate::LimitKind::Queue)). Default [`DEFAULT_MAX_WAIT`].
    pub max_wait: Duration,
}

/// Runs that may wait for a slot unless [`RunSlots::waiting`] says otherwise.
pub const DEFAULT_WAITING_RUNS: usize = 256;

/// How long a run waits for a slot unless [`RunSlots::max_wait`] says
/// otherwise.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(60);

impl RunSlots {
    /// One slot per core this process may use, [`DEFAULT_WAITING_RUNS`]
    /// waiting for at most [`DEFAULT_MAX_WAIT`] each.
    pub fn per_core() -> Self {
        RunSlots {
            running: std::thread::available_parallelism().map_or(1, |n| n.get()),
            waiting: DEFAULT_WAITING_RUNS,
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// The queue's places: its slots and its waiting room.
    pub fn places(&self) -> usize {
        self.running.saturating_add(self.waiting)
    }

    /// Checks the settings make sense (a slot at least).
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=Semaphore::MAX_PERMITS).contains(&self.running),
            "run slots: `running` is {}: at least one run must be able to execute",
            self.running
        );
        anyhow::ensure!(
            self.places() <= Semaphore::MAX_PERMITS,
            "run slots: `running` and `waiting` are {} in all, more than {} places",
            self.places(),
            Semaphore::MAX_PERMITS
        );
        Ok(())
    }
}

impl Default for RunSlots {
    fn default() -> Self {
        RunSlots::per_core()
    }
}

/// A host's run queue: its run slots, the runs waiting for them, and the
/// places front ends hold ([`RunPlace`]).
pub(crate) struct Admission {
    slots: Semaphore,
    waiting: AtomicUsize,
    /// [`RunSlots::places`] of them.
    places: Arc<Semaphore>,
    settings: RunSlots,
}

/// A run's slot, given back when dropped.
pub(crate) struct Slot<'a> {
    _permit: SemaphorePermit<'a>,
    /// How long the run waited for it.
    pub(crate) waited: Duration,
    /// When the run got it: its time limit counts from here.
    pub(crate) start: Instant,
}

/// Why a run got no slot.
pub(crate) enum Refused {
    /// Its cancel handle was cancelled while it waited.
    Cancelled,
    /// The queue was full or closed, or the run waited past the most it
    /// may: a [`LimitKind::Queue`](crate::LimitKind::Queue) with this
    /// message.
    Queue(String),
}

/// A place in a host's run queue, taken for a run by a front end that
/// answers it over a connection ([`Host::run_place`](crate::Host::run_place)),
/// from its request until its answer has gone out; given back when
/// dropped. The run itself waits for its slot as any run does. While the
/// answer is held (a client that reads slowly), the place still counts:
/// the runs admitted and the answers held are at most
/// [`RunSlots::places`].
#[derive(Debug)]
pub struct RunPlace {
    _permit: OwnedSemaphorePermit,
}

/// Why a front end got no [`RunPlace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRunPlace {
    /// Every place is taken, by runs executing, waiting for a slot, or
    /// whose answers are still going out: try again shortly.
    Full {
        /// The places ([`RunSlots::places`]).
        places: usize,
    },
    /// The host admits no more runs
    /// ([`Host::close_run_slots`](crate::Host::close_run_slots)).
    Closed,
}

impl fmt::Display for NoRunPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoRunPlace::Full { places } => write!(
                f,
                "every one of the host's {places} run places (run slots and queue) is taken, by \
                 runs executing, waiting, or whose answers are still going out; try again \
                 shortly"
            ),
            NoRunPlace::Closed => f.write_str("the host admits no more runs"),
        }
    }
}

impl std::error::Error for NoRunPlace {}

/// Undoes a waiter's count however its wait ends (a dropped future too).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a run waiting when the queue closes is told.
const CLOSED: &str = "the host admits no more runs (it is shutting down)";

impl Admission {
    pub(crate) fn new(settings: RunSlots) -> Self {
        Admission {
            slots: Semaphore::new(settings.running),
            waiting: AtomicUsize::new(0),
            places: Arc::new(Semaphore::new(settings.places())),
            settings,
        }
    }

    /// The settings.
    pub(crate) fn settings(&self) -> RunSlots {
        self.settings
    }

    /// Runs executing now.
    pub(crate) fn running(&self) -> usize {
        self.settings.running - self.slots.available_permits()
    }

    /// Runs waiting for a slot now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// A place for a front end's run, at once or refused.
    pub(crate) fn place(&self) -> Result<RunPlace, NoRunPlace> {
        use tokio::sync::TryAcquireError;
        match self.places.clone().try_acquire_owned() {
            Ok(permit) => Ok(RunPlace { _permit: permit }),
            Err(TryAcquireError::NoPermits) => Err(NoRunPlace::Full {
                places: self.settings.places(),
            }),
            Err(TryAcquireError::Closed) => Err(NoRunPlace::Closed),
        }
    }

    /// Admits no more runs: those waiting for a slot, and those asked for
    /// later, are refused; places are refused too. Runs executing go on.
    pub(crate) fn close(&self) {
        self.places.close();
        self.slots.close();
    }

    /// A slot for a run asked for at `asked`: at once if one is free, else
    /// after waiting in line (the semaphore is fair: first come, first
    /// served) for at most [`RunSlots::max_wait`].
    pub(crate) async fn slot(
        &self,
        asked: Instant,
        cancel: Option<&Cancel>,
    ) -> Result<Slot<'_>, Refused> {
        use tokio::sync::TryAcquireError;
        let slot = |permit| {
            let start = Instant::now();
            Slot {
                _permit: permit,
                waited: start.saturating_duration_since(asked),
                start,
            }
        };
        match self.slots.try_acquire() {
            Ok(permit) => return Ok(slot(permit)),
            Err(TryAcquireError::Closed) => return Err(Refused::Queue(CLOSED.to_string())),
            Err(TryAcquireError::NoPermits) => {}
        }
        let RunSlots {
            running,
            waiting,
            max_wait,
        } = self.settings;
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= waiting {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Refused::Queue(format!(
                "the host's {running} run slots are taken and {waiting} runs already wait for \
                 one, the most that may: try again later, or raise the host's run slots \
                 (HostBuilder::run_slots, Host(max_running=..., max_waiting=...), --max-runs, \
                 --queue)"
            )));
        }
        let _waiting = Waiting(&self.waiting);
        let left = max_wait.saturating_sub(asked.elapsed());
        let acquired = tokio::time::timeout(left, self.slots.acquire());
        let acquired = match cancel {
            Some(cancel) => tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(Refused::Cancelled),
                acquired = acquired => acquired,
            },
            None => acquired.await,
        };
        match acquired {
            Ok(Ok(permit)) => Ok(slot(permit)),
            Ok(Err(_closed)) => Err(Refused::Queue(CLOSED.to_string())),
            Err(_elapsed) => Err(Refused::Queue(format!(
                "waited {:.1} s for one of the host's {running} run slots, the most a run may \
                 wait: the host is busy; try again later, or raise the wait \
                 (HostBuilder::run_slots, Host(max_wait_s=...), --queue-wait-ms)",
                max_wait.as_secs_f64()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(running: usize, waiting: usize, max_wait_ms: u64) -> Admission {
        Admission::new(RunSlots {
            running,
            waiting,
            max_wait: Duration::from_millis(max_wait_ms),
        })
    }

    #[tokio::test]
    async fn runs_past_the_slots_wait_then_are_refused_past_the_queue_or_the_wait() {
        let admission = admission(1, 1, 200);
        let first = admission.slot(Instant::now(), None).await.ok().unwrap();
        assert_eq!(admission.running(), 1);
        // The second waits; the third finds the queue full at once.
        let second = admission.slot(Instant::now(), None);
        tokio::pin!(second);
        assert!(futures_poll(second.as_mut()).is_none());
        assert_eq!(admission.waiting(), 1);
        let third = admission.slot(Instant::now(), None).await;
        assert!(matches!(&third, Err(Refused::Queue(m)) if m.contains("1 runs already wait")));
        // The first's end hands its slot to the second, which waited.
        drop(first);
        let second = second.await.ok().unwrap();
        assert!(second.waited > Duration::ZERO);
        assert_eq!(admission.waiting(), 0);
        // With the slot held, a waiter is refused after the most it may wait.
        let late = admission.slot(Instant::now(), None).await;
        assert!(matches!(&late, Err(Refused::Queue(m)) if m.contains("waited 0.2 s")));
        assert_eq!(admission.waiting(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_waiter_leaves_the_queue() {
        let admission = admission(1, 4, 60_000);
        let _held = admission.slot(Instant::now(), None).await.ok().unwrap();
        let cancel = Cancel::new();
        let waiter = admission.slot(Instant::now(), Some(&cancel));
        tokio::pin!(waiter);
        assert!(futures_poll(waiter.as_mut()).is_none());
        cancel.cancel();
        assert!(matches!(waiter.await, Err(Refused::Cancelled)));
        assert_eq!(admission.waiting(), 0);
    }

    /// A front end's places are the slots and the waiting room together:
    /// held past its run (its answer going out), a place still counts, and
    /// once every one is held the next is refused at once.
    #[tokio::test]
    async fn places_are_the_slots_and_the_waiting_room_and_outlast_their_runs() {
        let admission = admission(1, 1, 60_000);
        let first = admission.place().unwrap();
        let run = admission.slot(Instant::now(), None).await.ok().unwrap();
        // The run ends; its answer still holds the place.
        drop(run);
        let second = admission.place().unwrap();
        assert_eq!(
            admission.place().unwrap_err(),
            NoRunPlace::Full { places: 2 }
        );
        // The slot is free for the second's run all the same.
        let run = admission.slot(Instant::now(), None).await.ok().unwrap();
        drop((first, run));
        let _third = admission.place().unwrap();
        drop(second);
    }

    /// Closed, the queue refuses places, waiting runs and new ones; a run
    /// executing keeps its slot.
    #[tokio::test]
    async fn a_closed_queue_refuses_places_and_waiters() {
        let admission = admission(1, 4, 60_000);
        let _held = admission.slot(Instant::now(), None).await.ok().unwrap();
        let waiter = admission.slot(Instant::now(), None);
        tokio::pin!(waiter);
        assert!(futures_poll(waiter.as_mut()).is_none());
        admission.close();
        assert!(matches!(waiter.await, Err(Refused::Queue(m)) if m == CLOSED));
        assert_eq!(admission.place().unwrap_err(), NoRunPlace::Closed);
        let late = admission.slot(Instant::now(), None).await;
        assert!(matches!(late, Err(Refused::Queue(m)) if m == CLOSED));
        assert_eq!(admission.running(), 1);
    }

    /// Polls `future` once.
    fn futures_poll<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        match future.poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        }
    }
}
