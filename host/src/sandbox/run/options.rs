//! How one run goes beyond its code ([`RunOptions`]).

use std::sync::Arc;

use crate::controls::Approver;
use crate::runtime::cancel::Cancel;
use crate::sandbox::pauses::journal::Resumed;
use crate::sandbox::run::functions::ClientFunction;
use crate::sandbox::run::outcome::LiveEvent;
use crate::sandbox::run::state::EventListener;
use sandwit_contract::limits::RunLimits;
use sandwit_contract::types::Value;

/// How one run goes beyond its code: its limits, a handle that cancels it,
/// and a listener to what it does as it happens. The default: the host's
/// limits, no handle, no listener.
#[derive(Clone, Default)]
pub struct RunOptions {
    pub(crate) limits: Option<RunLimits>,
    pub(crate) cancel: Option<Cancel>,
    pub(crate) on_event: Option<EventListener>,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    /// A [`Value::Object`] of the inputs' names to their values, if any.
    pub(crate) inputs: Option<Value>,
    /// The session the run is in, if any.
    pub(crate) session: Option<String>,
    /// The paused run this one resumes, if any.
    pub(crate) resumed: Option<Arc<Resumed>>,
    /// The application's own functions for this run.
    pub(crate) functions: Vec<ClientFunction>,
}

impl RunOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Limits for this run instead of the host's [`RunLimits`].
    pub fn limits(mut self, limits: RunLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Values the code finds as variables of these names (ASCII
    /// identifiers, not keywords, a method's name nor `__`-prefixed), as a method's
    /// result would be: `None`, `bool`, `int`, `float`, `str`, `bytes`,
    /// `list` and `dict`. All together within the host's value limits
    /// ([`CallLimits::max_value_bytes`](crate::CallLimits), and the node and depth
    /// caps); a run whose inputs are not ends with an `InvalidInput` error,
    /// its code not run.
    pub fn inputs(mut self, inputs: impl IntoIterator<Item = (String, Value)>) -> Self {
        self.inputs = Some(Value::Object(inputs.into_iter().collect()));
        self
    }

    /// Runs the code in the session `name` of the run's chat (its namespace
    /// and chat key): it finds the globals, imports and objects the
    /// session's last run left, and leaves its own for the next; the first
    /// run starts it. Both interpreters keep sessions, each its own. A
    /// session is kept live in this process between its runs, one run at a
    /// time, and in the host's store after each run that ends well, so
    /// another host over the store (or this one after a restart) resumes
    /// it; a run that stops midway (a trap, a limit, cancellation) leaves
    /// it as its last good run made it. It ends when closed
    /// ([`PythonSandbox::close_session`](crate::PythonSandbox::close_session))
    /// or idle past [`SessionLimits::idle`](crate::SessionLimits). The outcome's [`RunOutcome::session`](crate::RunOutcome::session)
    /// reports it. A name is 1 to 64 ASCII letters, digits, `-`, `_` or
    /// `.`; a run given another is refused (`InvalidSession`).
    pub fn session(mut self, name: impl Into<String>) -> Self {
        self.session = Some(name.into());
        self
    }

    /// Functions the application gives this run, besides the toolbox's
    /// methods (names none of theirs): the code calls them as methods,
    /// and a call pauses the run there (status
    /// [`RunStatus::Paused`](crate::RunStatus::Paused), the outcome's
    /// [`paused`](crate::RunOutcome::paused) naming the function, provider
    /// [`CLIENT_FUNCTIONS`](crate::CLIENT_FUNCTIONS), and its arguments),
    /// until the application answers it with
    /// [`PythonSandbox::resume`](crate::PythonSandbox::resume) and a value
    /// ([`Resume::Result`](crate::Resume::Result)), an exception
    /// ([`Resume::Raise`](crate::Resume::Raise)) or a refusal; the resumed
    /// run keeps them. The wait counts in no limit of the run's (a pause
    /// lasts up to [`SessionLimits::pause_ttl`](crate::SessionLimits)).
    /// A function that is not one (a name taken or not an identifier, a
    /// bad schema) ends the run with an `InvalidFunction` error, its code
    /// not run. Small interpreter: the scientific one refuses the call.
    pub fn functions(mut self, functions: impl IntoIterator<Item = ClientFunction>) -> Self {
        self.functions = functions.into_iter().collect();
        self
    }

    /// A handle that ends the run from outside; the run then ends with
    /// [`RunStatus::Cancelled`](crate::RunStatus::Cancelled) (see [`Cancel`] for how soon).
    pub fn cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Asks `approver`, instead of the host's
    /// ([`HostBuilder::approver`](crate::HostBuilder::approver)), about
    /// this run's calls of methods whose flags the policy requires approval
    /// for.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Calls `listener` with the run's stdout and stderr as the code writes
    /// them and with each [`Event`](crate::Event) as the run records it (a
    /// plugin's log lines and chat messages when its call returns), in
    /// order, on the run's thread: keep it quick (a task it wakes on the
    /// same runtime thread may wait until the run yields). The outcome is
    /// the same with or without it. A listener that panics is not called
    /// again; the run goes on.
    pub fn on_event(mut self, listener: impl Fn(&LiveEvent) + Send + Sync + 'static) -> Self {
        let failed = std::sync::atomic::AtomicBool::new(false);
        self.on_event = Some(Arc::new(move |event: &LiveEvent| {
            use std::sync::atomic::Ordering::Relaxed;
            if failed.load(Relaxed) {
                return;
            }
            let shown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(event)));
            if shown.is_err() {
                failed.store(true, Relaxed);
                tracing::error!("a run's event listener panicked; it is not called again");
            }
        }));
        self
    }
}
