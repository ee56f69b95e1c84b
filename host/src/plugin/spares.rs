//! Instances of a plugin made ahead of the calls that need a new one (a
//! run's first call of the plugin, a direct call), so that instantiating,
//! and the first touch of the plugin's code and data, are not on the
//! call's path.
//!
//! A spare is a fresh instance that has run none of the plugin's methods,
//! only `describe` (as every plugin does at load), which touches most of
//! what a first call would touch for the first time, in a store of its own
//! with no context and nothing granted: the call that takes it gives the
//! store the plugin's environment (`hand_over`), its context, caps and
//! budget (`begin_call`, as for the later calls of a run's instance), and
//! from then on it is that call's (or run's) instance, dropped with it. So
//! what a run can learn of earlier runs through a plugin is what it could
//! without spares: nothing.
//!
//! The preparing thread of a Python sandbox makes them (`sandbox/small/prepared.rs`,
//! for the plugins of its latest run, while a core is free of runs): this
//! module only keeps them and counts those on the way, so that several
//! sandboxes' threads do not make more than wanted, and the spares of all
//! the host's plugins within a share of its pool ([`Room`]), so that spares
//! of plugins no run calls now cannot take the slots the calls need.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Times making a spare of a plugin may fail (the plugin traps or runs out
/// of a limit while it is instantiated or describes itself; a busy host can
/// starve the preparing thread past the time limit) before it is made no
/// more: its calls then instantiate their own, and report why.
pub(crate) const MAX_FAILURES: usize = 3;

/// The room a host has for spares, shared by its plugins: spares held and
/// being made, at most a quarter of the pool's instances.
#[derive(Clone)]
pub(crate) struct Room {
    held: Arc<AtomicUsize>,
    max: usize,
}

impl Room {
    /// The room of a pool of `instances` component instances.
    pub(crate) fn of_pool(instances: usize) -> Self {
        Room {
            held: Arc::default(),
            max: instances / 4,
        }
    }

    fn reserve(&self) -> bool {
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held < self.max).then_some(held + 1)
            })
            .is_ok()
    }

    fn free(&self, count: usize) {
        self.held.fetch_sub(count, Ordering::SeqCst);
    }
}

/// A plugin's spare instances (`T`: an instance with its store).
pub(crate) struct Spares<T> {
    /// How many the plugin keeps (`HostBuilder::prepared_plugin_instances`).
    target: usize,
    room: Room,
    queue: Mutex<Queue<T>>,
    /// Times making one failed, up to [`MAX_FAILURES`].
    failures: AtomicUsize,
    /// Spares taken by calls, for tests.
    #[cfg(feature = "internals")]
    taken: AtomicUsize,
}

struct Queue<T> {
    ready: Vec<T>,
    /// Being made now.
    making: usize,
}

/// The right to make one spare (its place in the host's room held), given
/// back when dropped unfilled.
pub(crate) struct Making<'a, T> {
    spares: &'a Spares<T>,
    filled: bool,
}

impl<T> Spares<T> {
    /// Up to `target` spares, within the host's `room`.
    pub(crate) fn new(target: usize, room: Room) -> Self {
        Spares {
            target,
            room,
            queue: Mutex::new(Queue {
                ready: Vec::new(),
                making: 0,
            }),
            failures: AtomicUsize::new(0),
            #[cfg(feature = "internals")]
            taken: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A spare, if one is ready.
    pub(crate) fn take(&self) -> Option<T> {
        let spare = self.lock().ready.pop()?;
        self.room.free(1);
        #[cfg(feature = "internals")]
        self.taken.fetch_add(1, Ordering::SeqCst);
        Some(spare)
    }

    /// Whether the plugin wants one more (and making them has not failed
    /// [`MAX_FAILURES`] times).
    pub(crate) fn wanted(&self) -> bool {
        self.wants(&self.lock())
    }

    fn wants(&self, queue: &Queue<T>) -> bool {
        self.failures.load(Ordering::SeqCst) < MAX_FAILURES
            && queue.ready.len() + queue.making < self.target
    }

    /// The right to make one, if the plugin wants one more and the host
    /// has room for it.
    pub(crate) fn start(&self) -> Option<Making<'_, T>> {
        let mut queue = self.lock();
        if !self.wants(&queue) || !self.room.reserve() {
            return None;
        }
        queue.making += 1;
        Some(Making {
            spares: self,
            filled: false,
        })
    }

    /// How many are ready now.
    pub(crate) fn ready(&self) -> usize {
        self.lock().ready.len()
    }

    /// How many calls took one.
    #[cfg(feature = "internals")]
    pub(crate) fn taken(&self) -> usize {
        self.taken.load(Ordering::SeqCst)
    }
}

impl<T> Drop for Spares<T> {
    fn drop(&mut self) {
        let ready = self.lock().ready.len();
        self.room.free(ready);
    }
}

impl<T> Making<'_, T> {
    /// Keeps `spare` ready (its place in the room held until it is taken).
    pub(crate) fn fill(mut self, spare: T) {
        self.spares.lock().ready.push(spare);
        self.filled = true;
    }

    /// Counts a failure; returns how many there were.
    pub(crate) fn fail(self) -> usize {
        self.spares.failures.fetch_add(1, Ordering::SeqCst) + 1
    }
}

impl<T> Drop for Making<'_, T> {
    fn drop(&mut self) {
        self.spares.lock().making -= 1;
        if !self.filled {
            self.spares.room.free(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_of_all_plugins_stay_within_a_quarter_of_the_pool() {
        let room = Room::of_pool(8);
        let [a, b, c] = [(); 3].map(|()| Spares::<u32>::new(1, room.clone()));
        a.start().unwrap().fill(1);
        assert!(a.start().is_none(), "one per plugin");
        b.start().unwrap().fill(2);
        assert!(c.start().is_none(), "two in a pool of 8");
        // Taking one frees its place; one made and dropped unfilled too.
        assert_eq!(a.take(), Some(1));
        drop(c.start().unwrap());
        c.start().unwrap().fill(3);
        assert_eq!((a.ready(), b.ready(), c.ready()), (0, 1, 1));
        // A plugin dropped with its spare gives the place back.
        drop(b);
        a.start().unwrap().fill(4);
        assert!(Spares::<u32>::new(1, Room::of_pool(3)).start().is_none());
    }

    #[test]
    fn a_plugin_that_keeps_failing_is_made_no_more_spares() {
        let spares = Spares::<u32>::new(1, Room::of_pool(400));
        for failures in 1..=MAX_FAILURES {
            assert!(spares.wanted());
            assert_eq!(spares.start().unwrap().fail(), failures);
        }
        assert!(!spares.wanted() && spares.start().is_none());
        assert_eq!(spares.room.held.load(Ordering::SeqCst), 0);
    }
}
