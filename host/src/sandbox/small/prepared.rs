//! Interpreters instantiated ahead of their runs, and finished runs' stores
//! dropped after them, on a thread of the [`PythonSandbox`](super::PythonSandbox)'s
//! own, so a run's latency is its Python work.
//!
//! A prepared interpreter has run no code but sandwit's own: it is the
//! snapshot, instantiated in a store of its own, that has made the method
//! functions of the latest run's plugins and run a fixed warm-up snippet
//! (`runner.prepare`), which faults in the pages every run touches. The run
//! sets the store's data to its own (context, plugins, limits; the output
//! pipes emptied and given its cap) and its own fuel and deadline before
//! calling it.
//!
//! On the sandbox's own engine (`reusable.rs`) an interpreter's memory is
//! copied aside once prepared (`snapshot.rs`). A run that ends with the
//! interpreter's export returning (its code finished or raised) gives the
//! interpreter back, and the pages it wrote are restored, to serve the
//! next run as if just prepared: between runs nothing else of the instance
//! changes (see [`Prepared::reusable`]). One prepared for other plugins
//! than the latest run's (at the host's start, before any run named them)
//! makes the latest's functions once restored, and its memory is copied
//! aside again ([`Prepared::remade`]). Any other end (a handoff, which
//! traps the interpreter, a trap, a limit, cancellation, the run's future
//! dropped) leaves the instance unusable, and it is dropped: dropping a
//! finished store is work a run need not wait for, so the thread does it
//! when a core is free.
//!
//! Runs do not wake the thread while it has been busy lately: waking a
//! sleeping thread on an idle core costs the waker an inter-processor
//! interrupt, a large part of a short run (BENCHMARKS.md). The thread
//! polls instead, every [`MIN_POLL`] doubling to [`MAX_POLL`], and only
//! after [`PARK_AFTER`] with nothing to do sleeps until a run wakes it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime_wasi::WasiView;
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};

use super::reusable::{Pending, Reusable};
use crate::bindings::python::{PythonSandbox as Interpreter, PythonSandboxPre};
use crate::runtime::guard::apply_budget;
use crate::runtime::guard::limited_store;
use crate::runtime::limits::Budget;
use crate::sandbox::SandboxHost;
use crate::sandbox::run::state::RunState;
use crate::sandbox::snapshot::{Mapping, Snapshot};
use crate::toolbox::Toolbox;
use sandwit_contract::types::AgentCtx;

/// Finished stores waiting to be dropped beyond which a run drops its own,
/// so a busy host does not hold slots for runs that are over.
const MAX_RETIRED: usize = 16;
/// How long the thread waits before trying again when it could not prepare
/// an interpreter (the host's pool full, typically).
const RETRY_AFTER: Duration = Duration::from_millis(20);
/// The thread's first polling period after it worked or was woken.
const MIN_POLL: Duration = Duration::from_micros(100);
/// The longest polling period: each wake-up costs the idle core some CPU,
/// and a longer period only delays the thread seeing the end of a long run.
const MAX_POLL: Duration = Duration::from_millis(50);
/// How long the thread polls with nothing to do before it sleeps until a
/// run wakes it: longer than the seconds between an agent's runs. Tests set
/// a shorter one (`HostBuilder::park_after`, with the `internals` feature).
const PARK_AFTER: Duration = Duration::from_secs(10);

/// Resource handles the runs of one interpreter may leave behind, all told,
/// before it is dropped: a run may open streams or pollables it never
/// closes, unreachable once its memory is restored but still held in the
/// instance's and the store's tables (with workspaces, the store's are
/// deleted, and counted here for the instance's). (Runs that close what
/// they open, every run of sandwit's own runner, leave none.)
const MAX_LEFT_HANDLES: usize = 64;

/// An interpreter instantiated ahead of its run.
pub(crate) struct Prepared {
    pub(crate) store: Store<RunState>,
    pub(crate) interpreter: Interpreter,
    /// The plugins whose method functions it has made (`runner.prepare`).
    pub(crate) methods: Option<Toolbox>,
    /// Its memory as prepared, on the sandbox's own engine; `None` in the
    /// host's pool.
    pub(crate) snapshot: Option<Snapshot>,
    /// Runs it has served.
    pub(crate) runs: u32,
}

impl Prepared {
    /// Restores the interpreter after a run whose export returned, for the
    /// next run, dropping the plugin instances the run called; its store,
    /// to drop, if it cannot be (no snapshot, its memory grew, the run
    /// dropped a stream, or its runs left more than [`MAX_LEFT_HANDLES`]
    /// handles).
    ///
    /// Besides linear memory, which the restore puts back byte for byte,
    /// an instance holds its globals, tables and the component's resource
    /// handles. When an export returns, the interpreter's globals that
    /// change while it runs, its stack pointers, are back where they were
    /// (the others are addresses set at instantiation, and the WASI
    /// adapter's state pointer, set in its first call, while prepared); no
    /// code in it changes a table (it has no `table.set` or `table.grow`:
    /// CPython links no module at run time); the handles the run left are
    /// unreachable from the restored memory; and the handles that memory
    /// refers to, opened while prepared, are all streams or the workspace's
    /// preopen ([`prepare`] checks), which the run did not drop.
    pub(crate) fn reusable(mut self) -> Result<Self, Store<RunState>> {
        let data = self.store.data_mut();
        data.sessions.clear();
        let dropped = data.dropped_stream;
        // With workspaces, a resource the run left may reach its chat's
        // folder (a file or listing it did not close): those go.
        if data.workspaces.is_some() && !data.sever() {
            return Err(self.store);
        }
        let left = data.resources() + data.severed();
        let kept = data.prepared_handles.len();
        let Some(snapshot) = self.snapshot.as_mut() else {
            return Err(self.store);
        };
        // SAFETY: the store is ours alone and nothing runs in it.
        if dropped || left > kept + MAX_LEFT_HANDLES || !unsafe { snapshot.restore() } {
            return Err(self.store);
        }
        self.runs += 1;
        Ok(self)
    }

    /// Whether it has made the method functions of `plugins` (a run with
    /// them calls `exec_prepared`).
    pub(crate) fn made_for(&self, plugins: &Toolbox) -> bool {
        self.methods.as_ref().is_some_and(|m| m.same(plugins))
    }

    /// Makes the method functions of `methods` in the restored interpreter
    /// (`runner.prepare`, as [`prepare`] does) and takes its snapshot
    /// again, so that the runs of those plugins take `exec_prepared`
    /// instead of making their functions in the run; its store, to drop,
    /// if preparing failed or left the interpreter holding more than
    /// streams. It keeps its instance and count of runs.
    ///
    /// Runs restore the memory the interpreter was prepared in, so without
    /// this one prepared before any run named its plugins (at the host's
    /// start) would make them in every run it serves.
    async fn remade(mut self, host: &SandboxHost, methods: Toolbox) -> Result<Self, Retired> {
        let limits = &host.runtime().run_limits;
        let budget = Budget::new(limits.fuel, limits.time, Instant::now());
        let data = self.store.data_mut();
        let plugin_limits = &host.runtime().limits;
        let none = Toolbox::default();
        data.begin(
            &AgentCtx::default(),
            &none,
            limits,
            plugin_limits,
            budget.deadline,
            None,
        );
        apply_budget(&mut self.store, budget, host.runtime().metering);
        let made = (self.interpreter.sandwit_interpreter_runner())
            .call_prepare(&mut self.store, methods.specs())
            .await;
        let data = self.store.data_mut();
        data.end();
        let Some(snapshot) = self.snapshot.take() else {
            return Err(self.store);
        };
        if let Err(e) = made {
            tracing::debug!("making an interpreter's method functions again failed: {e:#}");
            return Err(self.store);
        }
        if data.dropped_stream || !holds_only_streams(data) {
            return Err(self.store);
        }
        data.prepared_handles = data.occupied();
        self.snapshot = Some(snapshot.retake());
        self.methods = Some(methods);
        Ok(self)
    }
}

/// The prepared interpreters of one sandbox and the thread that keeps them.
pub(crate) struct Preparer {
    shared: Arc<Shared>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Runs executing now.
    running: AtomicUsize,
    /// Whether the thread sleeps until woken (it polls otherwise).
    parked: AtomicBool,
    /// How long the thread polls with nothing to do before it parks.
    park_after: Duration,
    /// Counts the thread's waits until woken, for tests.
    #[cfg(feature = "internals")]
    parks: Option<Arc<AtomicUsize>>,
    /// The cores this process may use.
    cores: usize,
    /// Whether the thread has the interpreter on the sandbox's own engine
    /// (its interpreters are reusable).
    reusable: AtomicBool,
    /// That interpreter, for the runs that start or restore a session.
    own: std::sync::OnceLock<Reusable>,
    /// Wakes the runs waiting for `own` (or for it to be given up on).
    own_settled: tokio::sync::Notify,
    /// Whether that interpreter is still to come: set while it is loaded or
    /// compiled, cleared once it is there or cannot be (then runs go on in
    /// interpreters of the host's pool, and nothing is awaited).
    awaited: AtomicBool,
    /// Whether the next interpreter given back has its memory scribbled
    /// over before it is restored, for tests.
    #[cfg(feature = "internals")]
    scribble: AtomicBool,
    /// Wakes the tests waiting in [`Preparer::until`] each time the thread
    /// changed what it holds.
    #[cfg(feature = "internals")]
    changed: tokio::sync::Notify,
}

/// A finished run's store.
type Retired = Store<RunState>;

/// Counts a run as executing until dropped, and the reusable interpreter it
/// took, if any, as out (`Queue::out`) until the run gives it back or
/// retires it, or is dropped midway (its future dropped, or a panic
/// unwinding it): the thread keeps `target` interpreters counting those.
pub(crate) struct Running<'a> {
    shared: &'a Shared,
    /// Whether the run holds a reusable interpreter counted in `Queue::out`.
    lent: bool,
}

impl Running<'_> {
    /// Stops counting the run's reusable interpreter as out.
    fn settle(&mut self, queue: &mut Queue) {
        if std::mem::take(&mut self.lent) {
            queue.out -= 1;
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.lent {
            let mut queue = self.shared.lock();
            self.settle(&mut queue);
        }
        self.shared.running.fetch_sub(1, Ordering::SeqCst);
        self.shared.wake_if_parked();
    }
}

#[derive(Default)]
struct Queue {
    prepared: Vec<Prepared>,
    retired: Vec<Retired>,
    /// The plugins of the latest run: the next interpreters make their
    /// method functions ahead.
    latest: Option<Toolbox>,
    /// Reusable interpreters given back by their runs, to be restored (by
    /// the thread, or by a run that finds none prepared).
    dirty: Vec<Prepared>,
    /// Reusable interpreters runs hold: with `prepared` and `dirty`, what
    /// the thread keeps at `target`.
    out: usize,
    /// The interpreter on the sandbox's own engine, once the thread that
    /// compiles it for that engine is done.
    compiled: Option<Reusable>,
    closed: bool,
}

impl Preparer {
    /// Starts a thread that keeps `target` interpreters prepared (none when
    /// `target` is 0: runs instantiate and drop their own): in `resident`'s
    /// sandbox's own engine once `own` has its code (loaded, or compiled on
    /// the thread when it has nothing else to do), else of `pre`, in the
    /// host's pool.
    pub(crate) fn start(
        host: Arc<SandboxHost>,
        pre: PythonSandboxPre<RunState>,
        own: Option<Pending>,
        target: usize,
    ) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                closed: target == 0,
                ..Queue::default()
            }),
            wake: Condvar::new(),
            running: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
            #[cfg(not(feature = "internals"))]
            park_after: PARK_AFTER,
            #[cfg(feature = "internals")]
            park_after: host.park.as_ref().map_or(PARK_AFTER, |(after, _)| *after),
            #[cfg(feature = "internals")]
            parks: host.park.as_ref().map(|(_, parks)| parks.clone()),
            cores: host.runtime().cores,
            reusable: AtomicBool::new(false),
            own: std::sync::OnceLock::new(),
            own_settled: tokio::sync::Notify::new(),
            awaited: AtomicBool::new(target > 0 && own.is_some()),
            #[cfg(feature = "internals")]
            scribble: AtomicBool::new(false),
            #[cfg(feature = "internals")]
            changed: tokio::sync::Notify::new(),
        });
        if target > 0 {
            let keeper = shared.clone();
            std::thread::Builder::new()
                .name("sandwit-prepare".into())
                .spawn(move || keep(&keeper, &host, &pre, own, target))?;
        }
        Ok(Preparer { shared })
    }

    /// Counts a run as executing until the guard is dropped.
    pub(crate) fn running(&self) -> Running<'_> {
        self.shared.running.fetch_add(1, Ordering::SeqCst);
        Running {
            shared: &self.shared,
            lent: false,
        }
    }

    /// A prepared interpreter whose memory fits in `memory_bytes` (the run's
    /// cap), if one is ready: one that made the functions of `plugins` if
    /// there is one. Later ones make the functions of `plugins`. A reusable
    /// one is counted out until `running` ends.
    pub(crate) fn take(
        &self,
        running: &mut Running<'_>,
        memory_bytes: usize,
        plugins: &Toolbox,
    ) -> Option<Prepared> {
        // Declared first, dropped last: the set replaced may hold the last
        // handle to a plugin, whose spares are not dropped under the lock.
        let _replaced;
        let mut queue = self.shared.lock();
        _replaced = match queue.latest.as_ref().is_some_and(|l| l.same(plugins)) {
            true => None,
            false => queue.latest.replace(plugins.clone()),
        };
        let fits = |p: &Prepared| p.store.data().limiter.peak_memory <= memory_bytes;
        let at = queue
            .prepared
            .iter()
            .position(|p| fits(p) && p.made_for(plugins))
            .or_else(|| queue.prepared.iter().position(fits));
        let prepared = match at {
            Some(at) => {
                let prepared = queue.prepared.swap_remove(at);
                if prepared.snapshot.is_some() {
                    queue.out += 1;
                    running.lent = true;
                }
                drop(queue);
                prepared
            }
            None => {
                // Restoring one here costs this run less than instantiating.
                // It is counted out meanwhile, so the thread does not
                // prepare another in its place.
                let at = queue.dirty.iter().position(fits)?;
                let dirty = queue.dirty.swap_remove(at);
                queue.out += 1;
                running.lent = true;
                drop(queue);
                match dirty.reusable() {
                    Ok(restored) => restored,
                    Err(store) => {
                        running.settle(&mut self.shared.lock());
                        drop(store);
                        return None;
                    }
                }
            }
        };
        // The thread can replace it only beside this run on a host with
        // cores to spare; else the run's end wakes it if it sleeps.
        if self.shared.quiet(0) {
            self.shared.wake_if_parked();
        }
        Some(prepared)
    }

    /// Ends a run whose reusable interpreter's export returned: gives it to
    /// the thread to restore, waking it (a restore is a run's reset, which
    /// the thread does on a free core while the caller goes on).
    pub(crate) fn give_back(&self, mut running: Running<'_>, prepared: Prepared) {
        #[cfg(feature = "internals")]
        let prepared = self.scribbled(prepared);
        let mut queue = self.shared.lock();
        running.settle(&mut queue);
        if queue.closed {
            drop(queue);
            self.retire(running, prepared.store);
            return;
        }
        queue.dirty.push(prepared);
        drop(queue);
        drop(running);
        self.shared.wake.notify_one();
    }

    /// Ends a run: hands its store to the thread to drop, or drops it here
    /// when there is no thread, it is behind, or other runs keep it from
    /// working, and then one store of the thread's backlog too; then stops
    /// counting the run (and the reusable interpreter it took, which cannot
    /// be reused), which wakes the thread if it sleeps.
    pub(crate) fn retire(&self, mut running: Running<'_>, store: Store<RunState>) {
        let mut queue = self.shared.lock();
        running.settle(&mut queue);
        if queue.closed || queue.retired.len() >= MAX_RETIRED || !self.shared.quiet(1) {
            // The thread does not drop while runs keep the cores busy: take
            // one store of its backlog along, so the memory it holds comes
            // back.
            let backlog = queue.retired.pop();
            drop(queue);
            drop(store);
            drop(backlog);
        } else {
            queue.retired.push(store);
            drop(queue);
        }
        drop(running);
    }

    /// The interpreter on the sandbox's own engine, which sessions run in:
    /// awaited while it is being loaded (or compiled) for at most `wait`;
    /// `None` if it is not there by then, or never will be.
    pub(crate) async fn own(&self, wait: Duration) -> Option<Reusable> {
        let settled = async {
            loop {
                let notified = self.shared.own_settled.notified();
                let mut notified = std::pin::pin!(notified);
                // Registered before looking: a change after the look wakes it.
                notified.as_mut().enable();
                if let Some(own) = self.shared.own.get() {
                    return Some(own.clone());
                }
                if !self.awaits_reuse() {
                    return None;
                }
                notified.await;
            }
        };
        tokio::time::timeout(wait, settled).await.ok().flatten()
    }

    /// Whether its interpreters are reusable (the interpreter's code for the
    /// sandbox's own engine is loaded).
    pub(crate) fn reuses(&self) -> bool {
        self.shared.reusable.load(Ordering::SeqCst)
    }

    /// Whether its interpreters are not reusable yet but will be (the
    /// interpreter's code for the sandbox's own engine is being loaded or
    /// compiled). False for a sandbox that prepares none, or whose own
    /// engine failed: those never reuse, and waiting would be forever.
    pub(crate) fn awaits_reuse(&self) -> bool {
        self.shared.awaited.load(Ordering::SeqCst)
    }

    /// Has the memory of the next interpreter given back overwritten, every
    /// byte, before it is restored.
    #[cfg(feature = "internals")]
    pub(crate) fn scribble_next(&self) {
        self.shared.scribble.store(true, Ordering::SeqCst);
    }

    /// `prepared`, its memory overwritten if [`Preparer::scribble_next`]
    /// asked for it since the last interpreter given back.
    #[cfg(feature = "internals")]
    fn scribbled(&self, mut prepared: Prepared) -> Prepared {
        if self.shared.scribble.swap(false, Ordering::SeqCst)
            && let Some(snapshot) = &mut prepared.snapshot
        {
            // SAFETY: the store is ours alone and nothing runs in it.
            unsafe { snapshot.scribble() };
        }
        prepared
    }

    /// How many interpreters are prepared now.
    pub(crate) fn count(&self) -> usize {
        self.shared.lock().prepared.len()
    }

    /// Whether every prepared interpreter's memory is as it was prepared.
    #[cfg(feature = "internals")]
    pub(crate) fn intact(&self) -> bool {
        let queue = self.shared.lock();
        queue
            .prepared
            .iter()
            .all(|p| p.snapshot.as_ref().is_none_or(|s| s.intact()))
    }

    /// Returns once `done()` holds: it is checked now, and again each time
    /// the thread changed what it holds ([`Shared::changed`]).
    #[cfg(feature = "internals")]
    pub(crate) async fn until(&self, mut done: impl FnMut() -> bool) {
        loop {
            let mut changed = std::pin::pin!(self.shared.changed.notified());
            // Registered before `done` looks: a change made after it looked
            // wakes this waiter, one made before it is what it saw.
            changed.as_mut().enable();
            if done() {
                return;
            }
            changed.await;
        }
    }
}

impl Drop for Preparer {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says that what the thread holds changed (an interpreter prepared or
    /// restored, the interpreter for reuse there or given up on, a plugin
    /// instance made ahead, the thread asleep), to the tests waiting in
    /// [`Preparer::until`]. Called once the change can be seen.
    fn changed(&self) {
        #[cfg(feature = "internals")]
        self.changed.notify_waiters();
    }

    /// Wakes the thread if it sleeps until woken; a polling one sees the
    /// change by itself.
    fn wake_if_parked(&self) {
        // The thread raises the flag and then checks the runs and the queue,
        // all under the lock, and waits without letting go of it; the
        // callers change the runs or the queue before reading the flag. So
        // either the thread sees the change, or the caller sees the flag and
        // takes the lock only once the thread waits.
        if self.parked.load(Ordering::SeqCst) {
            drop(self.lock());
            self.wake.notify_one();
        }
    }

    /// Waits while the thread may do nothing: a polling period (doubled for
    /// the next time), or, after `park_after` ([`PARK_AFTER`]) of that,
    /// until a run wakes it; with `queue` unlocked meanwhile. Returns without
    /// waiting the first time it raises `parked`, for the caller to check
    /// again.
    fn idle<'a>(&self, queue: MutexGuard<'a, Queue>, poll: &mut Poll) -> MutexGuard<'a, Queue> {
        if poll.since.elapsed() < self.park_after {
            let queue = self.wait_for(queue, poll.period);
            poll.period = (poll.period * 2).min(MAX_POLL);
            return queue;
        }
        if !self.parked.swap(true, Ordering::SeqCst) {
            return queue;
        }
        // Counted under the lock, which `wait` lets go of only once the
        // thread waits: whoever reads the count and then takes the lock
        // finds the thread waiting.
        #[cfg(feature = "internals")]
        if let Some(parks) = &self.parks {
            parks.fetch_add(1, Ordering::SeqCst);
            self.changed();
        }
        let queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
        self.parked.store(false, Ordering::SeqCst);
        *poll = Poll::new();
        queue
    }

    /// Waits `time`, or until woken, with `queue` unlocked meanwhile.
    fn wait_for<'a>(&self, queue: MutexGuard<'a, Queue>, time: Duration) -> MutexGuard<'a, Queue> {
        self.wake
            .wait_timeout(queue, time)
            .unwrap_or_else(|p| p.into_inner())
            .0
    }

    /// Whether the runs executing now, but for `own` of the caller's, leave
    /// most cores idle. The thread works only then: its page-table work
    /// (slot resets, copy-on-write faults) interrupts every core that runs
    /// this process's code, and a run on another core slows down by as much
    /// as the thread saves it.
    fn quiet(&self, own: usize) -> bool {
        let others = self.running.load(Ordering::SeqCst).saturating_sub(own);
        others * 2 < self.cores
    }

    /// Whether a core is free of runs.
    fn core_free(&self) -> bool {
        self.running.load(Ordering::SeqCst) < self.cores
    }
}

/// The thread: while runs leave most cores idle, drops retired stores first
/// (they hold slots), then tops the prepared interpreters up to `target`,
/// then the instances the latest run's plugins keep made ahead (see
/// `plugin/spares.rs`), until the sandbox is dropped. On a busy host runs instantiate and drop
/// their own: preparing would only slow the runs down.
fn keep(
    shared: &Arc<Shared>,
    host: &SandboxHost,
    pre: &PythonSandboxPre<RunState>,
    own: Option<Pending>,
    target: usize,
) {
    yield_to_runs();
    let mut reusable = own.and_then(|pending| start_own(shared, pending));
    let Some(runtime) = thread_runtime(shared) else {
        return;
    };
    let keeper = Keeper {
        shared,
        host,
        pre,
        runtime,
    };
    let mut poll = Poll::new();
    let mut queue = shared.lock();
    loop {
        if queue.closed {
            // Drop what is left here, not in whoever drops the last handle.
            let prepared = std::mem::take(&mut queue.prepared);
            let dirty = std::mem::take(&mut queue.dirty);
            let retired = std::mem::take(&mut queue.retired);
            drop(queue);
            drop((prepared, dirty, retired));
            return;
        }
        if let Some(dirty) = queue.dirty.pop() {
            queue = keeper.restore(queue, dirty);
            poll = Poll::new();
            continue;
        }
        if !queue.retired.is_empty() && shared.quiet(0) {
            let retired = std::mem::take(&mut queue.retired);
            drop(queue);
            drop(retired);
            poll = Poll::new();
            queue = shared.lock();
            continue;
        }
        // Reusable interpreters are prepared once and serve many runs, so
        // the thread prepares them beside runs while a core is free of them.
        if let Some(compiled) = queue.compiled.take() {
            let _ = shared.own.set(compiled.clone());
            reusable = Some(compiled);
            shared.awaited.store(false, Ordering::SeqCst);
            shared.reusable.store(true, Ordering::SeqCst);
            shared.own_settled.notify_waiters();
            shared.changed();
        }
        if !shared.core_free() {
            queue = shared.idle(queue, &mut poll);
            continue;
        }
        queue = if queue.prepared.len() + queue.dirty.len() + queue.out >= target {
            keeper.make_spare(queue, &mut poll)
        } else {
            keeper.prepare_next(queue, reusable.as_ref(), &mut poll)
        };
    }
}

/// Readies `own`, the interpreter's code for the sandbox's own engine.
/// Loading cached code is quick: done here, before the first interpreter,
/// and returned. Compiling takes seconds, on a thread of its own at normal
/// priority (it is done once per cache, and at idle priority a busy host
/// would never finish it), which leaves it in [`Queue::compiled`];
/// meanwhile this one prepares interpreters in the host's pool.
fn start_own(shared: &Arc<Shared>, pending: Pending) -> Option<Reusable> {
    if !pending.compiles() {
        let reusable = ready(pending);
        if let Some(reusable) = &reusable {
            let _ = shared.own.set(reusable.clone());
        }
        // No longer awaited before reusable: whoever sees it reusable
        // (SeqCst) sees it not warming up.
        shared.awaited.store(false, Ordering::SeqCst);
        shared.reusable.store(reusable.is_some(), Ordering::SeqCst);
        shared.own_settled.notify_waiters();
        shared.changed();
        return reusable;
    }
    let compiler = shared.clone();
    let compiling = std::thread::Builder::new()
        .name("sandwit-compile".into())
        .spawn(move || {
            let compiled = ready(pending);
            let failed = compiled.is_none();
            compiler.lock().compiled = compiled;
            if failed {
                compiler.awaited.store(false, Ordering::SeqCst);
                compiler.own_settled.notify_waiters();
                compiler.changed();
            }
            compiler.wake.notify_one();
        });
    if let Err(e) = compiling {
        shared.awaited.store(false, Ordering::SeqCst);
        shared.own_settled.notify_waiters();
        shared.changed();
        tracing::warn!("the Python sandbox's interpreters serve one run each: {e}");
    }
    None
}

/// The interpreter's code for the sandbox's own engine, loaded or compiled;
/// `None`, warned of, if that failed.
fn ready(pending: Pending) -> Option<Reusable> {
    match pending.finish() {
        Ok(ready) => Some(ready),
        Err(e) => {
            tracing::warn!("the Python sandbox's interpreters serve one run each: {e:#}");
            None
        }
    }
}

/// The thread's runtime, with a timer: a plugin instance is made under its
/// call's deadline. `None`, warned of, if it could not be built: then no
/// interpreters are prepared.
fn thread_runtime(shared: &Shared) -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            shared.awaited.store(false, Ordering::SeqCst);
            shared.own_settled.notify_waiters();
            shared.changed();
            tracing::warn!("no interpreters are prepared ahead of runs: {e}");
            None
        }
    }
}

/// What the thread's steps work with. Each takes the queue's lock, lets go
/// of it while it works, and returns it taken again.
struct Keeper<'a> {
    shared: &'a Arc<Shared>,
    host: &'a SandboxHost,
    pre: &'a PythonSandboxPre<RunState>,
    runtime: tokio::runtime::Runtime,
}

impl<'a> Keeper<'a> {
    /// Restores `dirty`, given back by its run, into the prepared ones (or
    /// retires it): remade first if it was made for other plugins than the
    /// latest run's, and a core is free to make those.
    fn restore(&self, queue: MutexGuard<'a, Queue>, dirty: Prepared) -> MutexGuard<'a, Queue> {
        let shared = self.shared;
        let remake = (queue.latest.clone())
            .filter(|latest| !dirty.made_for(latest))
            .filter(|_| shared.core_free());
        drop(queue);
        let restored = match (dirty.reusable(), remake) {
            (Ok(restored), Some(latest)) => {
                (self.runtime).block_on(restored.remade(self.host, latest))
            }
            (restored, _) => restored,
        };
        let mut queue = shared.lock();
        match restored {
            Ok(restored) => queue.prepared.push(restored),
            Err(store) => queue.retired.push(store),
        }
        shared.changed();
        queue
    }

    /// With `target` interpreters there, makes an instance of one of the
    /// latest run's plugins ahead, for the next run's first calls; idles
    /// when none wants one, or there was no room.
    fn make_spare(&self, queue: MutexGuard<'a, Queue>, poll: &mut Poll) -> MutexGuard<'a, Queue> {
        let shared = self.shared;
        let wanting = queue.latest.as_ref().and_then(|latest| {
            let plugins = latest.plugins();
            plugins.into_iter().find(|p| p.wants_spare()).cloned()
        });
        let Some(plugin) = wanting else {
            return shared.idle(queue, poll);
        };
        drop(queue);
        let made = self.runtime.block_on(plugin.prepare_spare());
        drop(plugin);
        let queue = shared.lock();
        if made {
            shared.changed();
            *poll = Poll::new();
            queue
        } else {
            // No room (the host's pool, or its share for spares, is
            // full: runs need the slots more), or it failed: back off
            // as when there is nothing to do.
            shared.idle(queue, poll)
        }
    }

    /// Prepares one more interpreter, for the latest run's plugins: on
    /// `reusable`'s engine if there is one. If that fails, waits a while
    /// ([`RETRY_AFTER`]).
    fn prepare_next(
        &self,
        queue: MutexGuard<'a, Queue>,
        reusable: Option<&Reusable>,
        poll: &mut Poll,
    ) -> MutexGuard<'a, Queue> {
        let shared = self.shared;
        let methods = queue.latest.clone();
        drop(queue);
        match (self.runtime).block_on(prepare(self.host, self.pre, reusable, methods)) {
            Ok(prepared) => {
                *poll = Poll::new();
                let mut queue = shared.lock();
                queue.prepared.push(prepared);
                shared.changed();
                queue
            }
            Err(e) => {
                tracing::debug!("preparing an interpreter failed, trying again later: {e:#}");
                let mut queue = shared.lock();
                // Without method functions the next time, in case making
                // them failed: a later run names its plugins again.
                queue.latest = None;
                shared.wait_for(queue, RETRY_AFTER)
            }
        }
    }
}

/// The thread's polling while it may do nothing.
struct Poll {
    /// The next wait.
    period: Duration,
    /// When it last worked or was woken.
    since: Instant,
}

impl Poll {
    fn new() -> Self {
        Poll {
            period: MIN_POLL,
            since: Instant::now(),
        }
    }
}

/// Asks the kernel to run this thread only on a core that would otherwise be
/// idle, so preparing and dropping never delays a run that is executing: on
/// a busy host runs instantiate and drop their own, and the thread catches up
/// when the load drops.
fn yield_to_runs() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param for the call's duration, and
        // pid 0 means the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
            let e = std::io::Error::last_os_error();
            tracing::debug!("the interpreter-preparing thread keeps its priority: {e}");
        }
    }
}

/// Instantiates the snapshot in a store with the host's default run limits
/// (the run sets its own when it takes it), and has it make the functions
/// of `methods` and warm up (`runner.prepare`): on `reusable`'s engine, its
/// memory then copied aside, if there is one; else of `pre`, in the host's
/// pool.
async fn prepare(
    host: &SandboxHost,
    pre: &PythonSandboxPre<RunState>,
    reusable: Option<&Reusable>,
    methods: Option<Toolbox>,
) -> anyhow::Result<Prepared> {
    let (store, interpreter, memory) = match reusable {
        Some(reusable) => {
            let base = Base::No;
            let (store, interpreter, memory) =
                instantiate_prepared(host, reusable, methods.as_ref(), base).await?;
            (store, interpreter, Some(memory))
        }
        None => {
            let mut store = idle_store(host, pre);
            let interpreter = pre.instantiate_async(&mut store).await?;
            warm_up(&mut store, &interpreter, methods.as_ref()).await?;
            (store, interpreter, None)
        }
    };
    Ok(Prepared {
        store,
        interpreter,
        methods,
        snapshot: memory.flatten().map(Snapshot::take),
        runs: 0,
    })
}

/// Whether an interpreter is prepared as a session's base.
#[derive(Clone, Copy)]
pub(crate) enum Base {
    /// No: for runs of its own.
    No,
    /// Yes, its memory created at this many bytes if given (a session
    /// restored into it): what it draws from `wasi:random` while prepared
    /// is a fixed sequence, so every base is the same.
    Session(Option<usize>),
}

/// An interpreter on `reusable`'s engine prepared as [`prepare`] does, or
/// as a session's `base`, and its memory: `None` if it holds more than
/// streams and the workspace's preopen, or not one memory (then nothing
/// else of its state is known and it cannot be restored).
pub(crate) async fn instantiate_prepared(
    host: &SandboxHost,
    reusable: &Reusable,
    methods: Option<&Toolbox>,
    base: Base,
) -> anyhow::Result<(Store<RunState>, Interpreter, Option<Arc<Mapping>>)> {
    let mut store = idle_store(host, &reusable.pre);
    let memories = &reusable.memories;
    let instantiating = memories.instantiating.lock().await;
    // Those of an instantiation that failed.
    drop(memories.take_created());
    if let Base::Session(Some(size)) = base {
        memories.create_next_at(size);
    }
    let instantiated = reusable.pre.instantiate_async(&mut store).await;
    let created = memories.take_created();
    drop(instantiating);
    let interpreter = instantiated?;
    let fixed = matches!(base, Base::Session(_));
    store.data_mut().fix_random(fixed);
    let warmed = warm_up(&mut store, &interpreter, methods).await;
    store.data_mut().fix_random(false);
    warmed?;
    // The interpreter has one memory, and holds handles only to streams
    // (the stdout it opened) and the workspace's preopen, whose drops a
    // run's state notes; anything else is not restored.
    let memory = match <[_; 1]>::try_from(created) {
        Ok([memory]) if holds_only_streams(store.data_mut()) => Some(memory),
        _ => None,
    };
    Ok((store, interpreter, memory))
}

/// A store for an interpreter of `pre`, idle, with the host's default run
/// limits and budget.
fn idle_store(host: &SandboxHost, pre: &PythonSandboxPre<RunState>) -> Store<RunState> {
    let limits = &host.runtime().run_limits;
    let budget = Budget::new(limits.fuel, limits.time, Instant::now());
    let state = RunState::new(
        &AgentCtx::default(),
        &Default::default(),
        limits,
        &host.runtime().limits,
        budget.deadline,
        None,
        host.workspaces.as_ref(),
    );
    let mut store = limited_store(pre.engine(), state);
    apply_budget(&mut store, budget, host.runtime().metering);
    store
}

/// Has `interpreter` make the functions of `methods` and warm up
/// (`runner.prepare`), and notes the handles it then holds.
async fn warm_up(
    store: &mut Store<RunState>,
    interpreter: &Interpreter,
    methods: Option<&Toolbox>,
) -> anyhow::Result<()> {
    let specs = methods.map_or(&[][..], |m| m.specs());
    (interpreter.sandwit_interpreter_runner())
        .call_prepare(&mut *store, specs)
        .await?;
    let data = store.data_mut();
    data.prepared_handles = data.occupied();
    Ok(())
}

/// Whether every resource the interpreter holds a handle to is a stream
/// or a workspace preopen's descriptor.
fn holds_only_streams(state: &mut RunState) -> bool {
    let preopens = state.workspaces.as_ref().map_or(0, |w| w.preopens());
    let table = state.ctx().table;
    let others = table
        .iter_mut()
        .filter(|entry| !(entry.is::<DynOutputStream>() || entry.is::<DynInputStream>()))
        .count();
    others == preopens
}
