//! Entering Python from the threads of a host's runtime: never once the
//! interpreter has begun to exit (an `atexit` hook, [`_at_exit`], says so),
//! and from a runtime's blocking threads with a Python thread state kept
//! across calls.

use std::sync::RwLock;

use pyo3::prelude::*;

/// Set (under the write lock) when the interpreter begins to exit (an
/// `atexit` hook): from then on no thread of ours enters Python. A thread
/// holds the read lock while it is in Python, so the hook waits for those
/// already inside (it releases the GIL while it waits).
static PYTHON_EXITING: RwLock<bool> = RwLock::new(false);

/// Runs `f` in Python from a thread of ours, unless the interpreter is
/// exiting.
fn with_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    let exiting = PYTHON_EXITING.read().unwrap_or_else(|e| e.into_inner());
    if *exiting {
        return None;
    }
    Python::try_attach(f)
}

/// [`with_python`] for a thread of a host's runtime's blocking pool (never
/// one Python made): the thread keeps the Python thread state it makes the
/// first time, until it exits, rather than making and dropping one per
/// call, which took most of a host method's call.
pub(crate) fn with_python_kept<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    let exiting = PYTHON_EXITING.read().unwrap_or_else(|e| e.into_inner());
    if *exiting {
        return None;
    }
    KEPT_STATE.with(KeptState::keep);
    Python::try_attach(f)
}

thread_local! {
    static KEPT_STATE: KeptState = const { KeptState(std::cell::Cell::new(None)) };
}

/// The thread state a thread of ours keeps (see [`with_python_kept`]): what
/// `PyGILState_Ensure` gave and the state `PyEval_SaveThread` saved.
struct KeptState(
    std::cell::Cell<Option<(pyo3::ffi::PyGILState_STATE, *mut pyo3::ffi::PyThreadState)>>,
);

impl KeptState {
    /// Makes this thread's state, unless it has one. Called with the read
    /// lock of [`PYTHON_EXITING`] held and the interpreter not exiting.
    fn keep(&self) {
        if self.0.get().is_some() {
            return;
        }
        // SAFETY: the interpreter is initialised and not finalising (the
        // atexit hook, which runs first, has not run). The thread has no
        // Python thread state (checked), so `PyGILState_Ensure` makes one and
        // takes the GIL, and `PyEval_SaveThread` releases the GIL and keeps
        // the state (its count stays 1), as the thread found things.
        unsafe {
            if pyo3::ffi::Py_IsInitialized() == 0
                || !pyo3::ffi::PyGILState_GetThisThreadState().is_null()
            {
                return;
            }
            let state = pyo3::ffi::PyGILState_Ensure();
            let saved = pyo3::ffi::PyEval_SaveThread();
            self.0.set(Some((state, saved)));
        }
    }
}

impl Drop for KeptState {
    /// At the thread's exit: drops its state, unless the interpreter is
    /// exiting (then it is left to the interpreter's finalisation).
    fn drop(&mut self) {
        let Some((state, saved)) = self.0.take() else {
            return;
        };
        let exiting = PYTHON_EXITING.read().unwrap_or_else(|e| e.into_inner());
        if *exiting {
            return;
        }
        // SAFETY: `saved` is this thread's state, saved by `keep` without
        // the GIL held since; restoring it takes the GIL, and releasing
        // `state` (the count back to 0) deletes it and releases the GIL.
        unsafe {
            pyo3::ffi::PyEval_RestoreThread(saved);
            pyo3::ffi::PyGILState_Release(state);
        }
    }
}

/// The `atexit` hook: no thread of ours enters Python after it.
#[pyfunction]
pub(crate) fn _at_exit(py: Python<'_>) {
    py.detach(|| *PYTHON_EXITING.write().unwrap_or_else(|e| e.into_inner()) = true);
}

/// Writes `text` to Python's `sys.stderr` (else the process's), flushed.
pub(crate) fn say(text: &str) {
    let written = with_python(|py| -> PyResult<()> {
        let stderr = py.import("sys")?.getattr("stderr")?;
        stderr.call_method1("write", (text,))?;
        stderr.call_method0("flush")?;
        Ok(())
    });
    if !matches!(written, Some(Ok(()))) {
        eprint!("{text}");
    }
}
