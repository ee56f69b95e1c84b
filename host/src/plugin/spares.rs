//! Instances of a plugin made ahead of the calls that need a new one (a
//! run's first call of the plugin, a direct call), so that instantiating
//! (most of a Python plugin's first call: its CPython's memory image) is not
//! on the call's path.
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
//! The preparing thread of a Python sandbox makes them (`python/prepared.rs`,
//! for the plugins of its latest run, while a core is free of runs): this
//! module only keeps them and counts those on the way, so that several
//! sandboxes' threads do not make more than wanted.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// A plugin's spare instances (`T`: an instance with its store).
pub(crate) struct Spares<T> {
    /// How many the plugin keeps (`HostBuilder::prepared_plugin_instances`).
    target: usize,
    queue: Mutex<Queue<T>>,
    /// Set once making one failed for a reason other than a full pool (the
    /// plugin traps or runs out of a limit while instantiating): its calls
    /// instantiate their own, and report why.
    failed: AtomicBool,
    /// Spares taken by calls, for tests.
    #[cfg(feature = "internals")]
    taken: std::sync::atomic::AtomicUsize,
}

struct Queue<T> {
    ready: Vec<T>,
    /// Being made now.
    making: usize,
}

/// The right to make one spare, given back when dropped unfilled.
pub(crate) struct Making<'a, T> {
    spares: &'a Spares<T>,
}

impl<T> Spares<T> {
    pub(crate) fn new(target: usize) -> Self {
        Spares {
            target,
            queue: Mutex::new(Queue {
                ready: Vec::new(),
                making: 0,
            }),
            failed: AtomicBool::new(false),
            #[cfg(feature = "internals")]
            taken: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A spare, if one is ready.
    pub(crate) fn take(&self) -> Option<T> {
        let spare = self.lock().ready.pop();
        #[cfg(feature = "internals")]
        if spare.is_some() {
            self.taken.fetch_add(1, Ordering::SeqCst);
        }
        spare
    }

    /// Whether the plugin wants one more (and making them has not failed).
    pub(crate) fn wanted(&self) -> bool {
        if self.failed.load(Ordering::SeqCst) {
            return false;
        }
        let queue = self.lock();
        queue.ready.len() + queue.making < self.target
    }

    /// The right to make one, if the plugin wants one more and making them
    /// has not failed.
    pub(crate) fn start(&self) -> Option<Making<'_, T>> {
        if self.failed.load(Ordering::SeqCst) {
            return None;
        }
        let mut queue = self.lock();
        if queue.ready.len() + queue.making >= self.target {
            return None;
        }
        queue.making += 1;
        Some(Making { spares: self })
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

impl<T> Making<'_, T> {
    /// Keeps `spare` ready.
    pub(crate) fn fill(self, spare: T) {
        self.spares.lock().ready.push(spare);
        // `drop` gives back the count of those on the way.
    }

    /// Stops making spares of this plugin.
    pub(crate) fn fail(self) {
        self.spares.failed.store(true, Ordering::SeqCst);
    }
}

impl<T> Drop for Making<'_, T> {
    fn drop(&mut self) {
        self.spares.lock().making -= 1;
    }
}
