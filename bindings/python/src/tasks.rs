//! Jobs on a host's runtime as Python sees them: waited for by the calling
//! thread with the GIL released (`run`, `call`), or completing an asyncio
//! future (`run_async`, `call_async`); and a run's live events on their way
//! to its `on_event` callback, in order and before its outcome.
//!
//! No runtime worker holds the GIL: the waiting thread shows events itself,
//! and an asyncio future's events and result are handed to its loop
//! (`call_soon_threadsafe`) from a blocking thread of the runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyDict, PyList, PyTuple};
use sandwit::{Cancel, LiveEvent};
use tokio::runtime::Handle;

use crate::convert::to_py;
use crate::errors::{Failure, SandwitError};
use crate::gil::with_python_kept;

/// A job for a host's runtime, not started yet.
pub type Job<T> = Pin<Box<dyn Future<Output = Result<T, Failure>> + Send>>;

/// Shown a run's live events as it records them (on the run's thread: it
/// only sends them on).
pub type Listener = Arc<dyn Fn(&LiveEvent) + Send + Sync>;

tokio::task_local! {
    /// The asyncio loop a `run_async` was awaited in, for the tasks of that
    /// run: its Python host methods' coroutines run there.
    pub static RUN_LOOP: Arc<Py<PyAny>>;
}

/// What a job sends whoever waits for it, in order: the run's live events,
/// then its result, or word that it was dropped unfinished.
enum Msg<T> {
    Event(LiveEvent),
    Done(T),
    /// The job was dropped before it finished: its task was aborted or
    /// panicked.
    Gone,
}

/// How a job is stopped when Python gives up waiting for it (Ctrl-C, a
/// cancelled task).
pub enum Stop {
    /// Through its `Cancel` handle, made for this job alone: the run ends
    /// as `cancelled`, its interpreter retired as after any run.
    Cancel(Cancel),
    /// By aborting its task, which drops the job and so ends the run or
    /// call in it: for a job whose handle is the caller's (cancelling that
    /// would end the caller's other runs too) or that has none.
    Abort,
}

impl Stop {
    /// A run's `Cancel` handle and how to stop it: `given` (the caller's),
    /// else one of its own.
    pub fn for_run(given: Option<&Cancel>) -> (Cancel, Stop) {
        match given {
            Some(cancel) => (cancel.clone(), Stop::Abort),
            None => {
                let cancel = Cancel::new();
                (cancel.clone(), Stop::Cancel(cancel))
            }
        }
    }

    fn stop(&self, task: &tokio::task::AbortHandle) {
        match self {
            Stop::Cancel(cancel) => cancel.cancel(),
            Stop::Abort => task.abort(),
        }
    }
}

/// Where a job's messages go.
trait Outbox<T>: Send + 'static {
    fn put(&self, msg: Msg<T>);
}

impl<T: Send + 'static> Outbox<T> for std::sync::mpsc::Sender<Msg<T>> {
    fn put(&self, msg: Msg<T>) {
        // Nobody waits any more (Ctrl-C): nothing to do.
        let _ = self.send(msg);
    }
}

/// Sends a job's result, or [`Msg::Gone`] if the job is dropped first.
struct Finish<T, O: Outbox<T>> {
    outbox: Option<O>,
    _result: std::marker::PhantomData<fn(T)>,
}

impl<T, O: Outbox<T>> Finish<T, O> {
    fn new(outbox: O) -> Self {
        Finish {
            outbox: Some(outbox),
            _result: std::marker::PhantomData,
        }
    }

    fn done(mut self, value: T) {
        if let Some(outbox) = self.outbox.take() {
            outbox.put(Msg::Done(value));
        }
    }
}

impl<T, O: Outbox<T>> Drop for Finish<T, O> {
    fn drop(&mut self) {
        if let Some(outbox) = self.outbox.take() {
            outbox.put(Msg::Gone);
        }
    }
}

/// A listener that puts each event in `outbox`.
fn listener<T: Send + 'static>(outbox: impl Outbox<T> + Sync) -> Listener {
    Arc::new(move |event: &LiveEvent| outbox.put(Msg::Event(event.clone())))
}

/// A Python callback shown a run's live events. An `Exception` it raises
/// is reported once through `sys.unraisablehook` and the run's later events
/// are not shown; a `BaseException` that is not an `Exception`
/// (`KeyboardInterrupt`, `SystemExit`) is returned, to be raised.
struct Callback {
    callback: Py<PyAny>,
    failed: AtomicBool,
}

impl Callback {
    fn new(callback: Py<PyAny>) -> Self {
        Callback {
            callback,
            failed: AtomicBool::new(false),
        }
    }

    fn show(&self, event: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let py = event.py();
        let callback = self.callback.bind(py);
        match callback.call1((event,)) {
            Ok(_) => Ok(()),
            Err(e) => {
                self.failed.store(true, Ordering::Relaxed);
                if e.is_instance_of::<PyException>(py) {
                    e.write_unraisable(py, Some(callback));
                    Ok(())
                } else {
                    Err(e)
                }
            }
        }
    }
}

// ---- waiting on the calling thread ----------------------------------------------

/// A job's messages on their way to the thread that waits for it.
pub struct Waiter<T> {
    tx: std::sync::mpsc::Sender<Msg<T>>,
    rx: std::sync::mpsc::Receiver<Msg<T>>,
}

impl<T> Default for Waiter<T> {
    fn default() -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        Waiter { tx, rx }
    }
}

impl<T: Send + 'static> Waiter<T> {
    /// A listener whose events the waiting thread shows.
    pub fn listener(&self) -> Listener {
        listener(self.tx.clone())
    }

    /// Runs `work` on `handle`'s runtime and waits for it with the GIL
    /// released, showing `on_event` the events sent by [`Waiter::listener`]
    /// on this thread as they come. A signal (Ctrl-C), or a
    /// `KeyboardInterrupt` out of `on_event`, stops the job as `stop` says
    /// and is raised.
    pub fn wait(
        self,
        py: Python<'_>,
        handle: &Handle,
        work: impl Future<Output = T> + Send + 'static,
        on_event: Option<&Bound<'_, PyAny>>,
        stop: Stop,
    ) -> PyResult<T> {
        let Waiter { tx, mut rx } = self;
        let task = handle.spawn(async move {
            let finish = Finish::new(tx);
            finish.done(work.await);
        });
        let task = task.abort_handle();
        let on_event = on_event.map(|c| Callback::new(c.clone().unbind()));
        loop {
            let (received, back) = py.detach(move || {
                let received = rx.recv_timeout(Duration::from_millis(100));
                (received, rx)
            });
            rx = back;
            let mut msg = match received {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        stop.stop(&task);
                        return Err(e);
                    }
                    continue;
                }
                // The job holds a sender until it sends its last message.
                Err(RecvTimeoutError::Disconnected) => Msg::Gone,
            };
            // Everything there is, while attached.
            loop {
                match msg {
                    Msg::Done(value) => return Ok(value),
                    Msg::Gone => return Err(panicked()),
                    Msg::Event(event) => {
                        if let Some(callback) = &on_event
                            && let Err(e) = to_py(py, &event).and_then(|e| callback.show(&e))
                        {
                            stop.stop(&task);
                            return Err(e);
                        }
                    }
                }
                match rx.try_recv() {
                    Ok(next) => msg = next,
                    Err(_) => break,
                }
            }
        }
    }
}

fn panicked() -> PyErr {
    SandwitError::new_err("the task ended without a result (a bug in sandwit: it panicked)")
}

// ---- completing an asyncio future ----------------------------------------------

/// A job's messages on their way to an asyncio loop: queued by whoever
/// sends them (the run's thread), and handed to the loop in order by one
/// blocking thread at a time (it needs the GIL). Not by a tokio task: one
/// the run's worker wakes waits in that worker's own slot, which no other
/// worker takes from, until the run yields, and a run writing output may
/// not yield for its whole time.
pub struct Feed<T> {
    shared: Arc<FeedShared<T>>,
}

struct FeedShared<T> {
    queue: Mutex<Queue<T>>,
    /// Where the messages go, set when the coroutine is awaited (before
    /// the job starts, so before anything is sent).
    target: OnceLock<Target<T>>,
}

struct Queue<T> {
    msgs: Vec<Msg<Result<T, Failure>>>,
    /// Whether a blocking thread is handing messages over.
    draining: bool,
}

struct Target<T> {
    handle: Handle,
    event_loop: Py<PyAny>,
    /// `on_loop(events, done)` (see [`on_loop`]).
    on_loop: Py<PyAny>,
    convert: Convert<T>,
}

impl<T> Default for Feed<T> {
    fn default() -> Self {
        Feed {
            shared: Arc::new(FeedShared {
                queue: Mutex::new(Queue {
                    msgs: Vec::new(),
                    draining: false,
                }),
                target: OnceLock::new(),
            }),
        }
    }
}

impl<T: Send + 'static> Feed<T> {
    /// A listener whose events the loop's thread shows.
    pub fn listener(&self) -> Listener {
        listener(self.shared.clone())
    }
}

impl<T: Send + 'static> Outbox<Result<T, Failure>> for Arc<FeedShared<T>> {
    fn put(&self, msg: Msg<Result<T, Failure>>) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.msgs.push(msg);
        if queue.draining {
            return;
        }
        let Some(target) = self.target.get() else {
            return;
        };
        queue.draining = true;
        drop(queue);
        let shared = self.clone();
        target.handle.spawn_blocking(move || shared.drain());
    }
}

impl<T: Send + 'static> FeedShared<T> {
    /// Hands the queued messages to the loop until there are none.
    fn drain(&self) {
        let Some(target) = self.target.get() else {
            return;
        };
        loop {
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                if queue.msgs.is_empty() {
                    queue.draining = false;
                    return;
                }
                std::mem::take(&mut queue.msgs)
            };
            let handed = with_python_kept(|py| {
                hand_over(
                    py,
                    batch,
                    target.convert,
                    &target.event_loop,
                    &target.on_loop,
                )
            });
            // The interpreter is exiting: nothing is handed over any more
            // (`draining` stays set).
            if handed.is_none() {
                return;
            }
        }
    }
}

/// Makes a job's result Python.
pub type Convert<T> = fn(Python<'_>, T) -> PyResult<Py<PyAny>>;

/// `async def _lazy(start): return await start()`: the coroutine
/// `run_async` and `call_async` return (set when the module is made).
pub static LAZY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A coroutine that, once awaited, starts `work` on the runtime of `handle`
/// (got from `runtime` then, so the host lives while it is awaited, with
/// the job's place among the host's running ones, `R`, held until the job
/// ends, or the error of a closed host) and
/// returns its result (made Python by `convert`), showing `on_event` the
/// events of `feed` on the loop's thread first. Cancelling it (its task)
/// stops the job as `stop` says; a coroutine never awaited never starts it.
pub fn coroutine<'py, T: Send + 'static, R: Send + 'static>(
    py: Python<'py>,
    runtime: impl Fn() -> PyResult<(Handle, R)> + Send + Sync + 'static,
    work: Job<T>,
    convert: Convert<T>,
    stop: Stop,
    feed: Feed<T>,
    on_event: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let on_event = on_event.map(|c| c.clone().unbind());
    let start = Mutex::new(Some((work, stop, feed, on_event)));
    let start = PyCFunction::new_closure(
        py,
        Some(c"start"),
        None,
        move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<Py<PyAny>> {
            let py = args.py();
            let (work, stop, feed, on_event) = start
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .ok_or_else(|| PyRuntimeError::new_err("this coroutine was awaited already"))?;
            let (handle, running) = runtime()?;
            let work: Job<T> = Box::pin(async move {
                let _running = running;
                work.await
            });
            Ok(spawn_future(py, &handle, work, convert, stop, feed, on_event)?.unbind())
        },
    )?;
    let lazy = LAZY
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("the module is not initialised"))?;
    lazy.bind(py).call1((start,))
}

/// Runs `work` on `handle`'s runtime, within the running asyncio loop's
/// [`RUN_LOOP`], and returns a future of that loop which its result
/// completes after `on_event` was shown the events of `feed`; cancelling
/// the future stops the job as `stop` says.
fn spawn_future<'py, T: Send + 'static>(
    py: Python<'py>,
    handle: &Handle,
    work: Job<T>,
    convert: Convert<T>,
    stop: Stop,
    feed: Feed<T>,
    on_event: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    let on_loop = on_loop(py, future.clone().unbind(), on_event)?;
    let target = Target {
        handle: handle.clone(),
        event_loop: event_loop.clone().unbind(),
        on_loop,
        convert,
    };
    let shared = feed.shared;
    if shared.target.set(target).is_err() {
        return Err(PyRuntimeError::new_err(
            "this run's events have a loop already",
        ));
    }
    let run_loop = Arc::new(event_loop.unbind());
    let task = handle.spawn(RUN_LOOP.scope(run_loop, async move {
        let finish = Finish::new(shared);
        finish.done(work.await);
    }));
    let abort = task.abort_handle();
    let on_done = PyCFunction::new_closure(
        py,
        Some(c"on_done"),
        None,
        move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
            if args.get_item(0)?.call_method0("cancelled")?.is_truthy()? {
                stop.stop(&abort);
            }
            Ok(())
        },
    )?;
    future.call_method1("add_done_callback", (on_done,))?;
    Ok(future)
}

/// Schedules `on_loop(events, done)` on `event_loop` for a batch of
/// messages: `events` a list of the events as dicts, `done` `(ok, value)`
/// for a result, else None.
fn hand_over<T>(
    py: Python<'_>,
    batch: Vec<Msg<Result<T, Failure>>>,
    convert: Convert<T>,
    event_loop: &Py<PyAny>,
    on_loop: &Py<PyAny>,
) {
    let events = PyList::empty(py);
    let mut done = py.None().into_bound(py);
    for msg in batch {
        match msg {
            Msg::Event(event) => {
                if let Ok(event) = to_py(py, &event) {
                    let _ = events.append(event);
                }
            }
            Msg::Done(result) => {
                let converted = result.map_err(|f| f.into_pyerr(py));
                let (ok, value) = match converted.and_then(|value| convert(py, value)) {
                    Ok(value) => (true, value),
                    Err(e) => (false, e.into_value(py).into_any()),
                };
                done = (ok, value).into_pyobject(py).map_or(done, Bound::into_any);
            }
            // Aborted: the future was cancelled, nobody waits.
            Msg::Gone => {}
        }
    }
    // A closed loop cannot be given anything: nobody waits any more.
    let _ = event_loop
        .bind(py)
        .call_method1("call_soon_threadsafe", (on_loop, events, done));
}

/// `on_loop(events, done)`, run by the loop: shows `on_event` the events
/// and completes `future` with `done`, unless the future was cancelled.
fn on_loop(py: Python<'_>, future: Py<PyAny>, on_event: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
    let callback = on_event.map(Callback::new);
    let function = PyCFunction::new_closure(
        py,
        Some(c"on_loop"),
        None,
        move |args: &Bound<'_, PyTuple>, _: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
            let py = args.py();
            let future = future.bind(py);
            if future.call_method0("done")?.is_truthy()? {
                return Ok(());
            }
            let mut raised = None;
            if let Some(callback) = &callback {
                for event in args.get_item(0)?.try_iter()? {
                    if let Err(e) = callback.show(&event?) {
                        raised = Some(e);
                        break;
                    }
                }
            }
            let done = args.get_item(1)?;
            if !done.is_none() {
                let (ok, value): (bool, Bound<'_, PyAny>) = done.extract()?;
                let method = if ok { "set_result" } else { "set_exception" };
                future.call_method1(method, (value,))?;
            }
            raised.map_or(Ok(()), Err)
        },
    )?;
    Ok(function.into_any().unbind())
}
