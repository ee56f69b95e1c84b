//! The store data of one Python run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::controls::RunControls;
use crate::plugin::Session;
use crate::runtime::capture::CallOutput;
use crate::runtime::guard::HostMeter;
use crate::runtime::guest::Guest;
use crate::runtime::limits::{CappedEvents, EventsFull, StoreLimiter};
use crate::sandbox::pauses::journal::Journal;
use crate::sandbox::run::outcome::{Event, Handoff, LiveEvent};
use crate::sandbox::workspace::{HostWorkspaces, Workspaces};
use crate::toolbox::Toolbox;
use sandwit_contract::limits::{CallLimits, LimitKind, RunLimits};
use sandwit_contract::types::AgentCtx;

/// The interpreter's store data.
pub(crate) type RunState = Guest<Run>;

/// Who is shown a run's output and events as they happen.
pub(crate) type EventListener = Arc<dyn Fn(&LiveEvent) + Send + Sync>;

/// What the interpreter's store adds to every guest's: the run's output,
/// context, methods, events and the plugin instances it called.
pub(crate) struct Run {
    pub(crate) stdout: CallOutput,
    pub(crate) stderr: CallOutput,
    pub(crate) ctx: AgentCtx,
    pub(crate) plugins: Toolbox,
    /// The limits of one method call (a host method's too).
    pub(crate) call_limits: CallLimits,
    pub(crate) calls: u32,
    pub(crate) max_calls: u32,
    /// The run's events, within [`RunLimits::max_events`] and
    /// [`RunLimits::max_event_bytes`].
    pub(crate) events: CappedEvents<Event>,
    /// Set when an agent method ended the run.
    pub(crate) handoff: Option<Handoff>,
    /// Set when a run-wide limit ended the run inside a method call.
    pub(crate) stop: Option<(LimitKind, String)>,
    /// The run's instance of each plugin it called, by [`Plugin::key`](crate::Plugin).
    pub(crate) sessions: HashMap<usize, Session>,
    /// Shown every event recorded, if anyone is.
    listener: Option<EventListener>,
    /// The execution controls of its calls, and what they cost (set by the
    /// run after `begin`).
    pub(crate) controls: RunControls,
    /// Set when the run's code dropped a stream or a preopen's descriptor
    /// the prepared interpreter opened, which its restored memory still
    /// refers to.
    pub(crate) dropped_stream: bool,
    /// The resources the store held once its interpreter was prepared
    /// (their reps; none for one a run instantiated).
    pub(crate) prepared_handles: Vec<u32>,
    /// The sandbox's workspaces, if it has them (`workspace.rs`).
    pub(crate) workspaces: Option<Workspaces>,
    /// The answers its calls got, kept if it may pause (set by the run
    /// after `begin`), and what a resumed run replays.
    pub(crate) journal: Journal,
}

impl Run {
    /// Records `event` within the run's caps and shows it to the listener.
    pub(crate) fn record(&mut self, event: Event) -> Result<(), EventsFull> {
        let shown = self.listener.as_ref().map(|_| event.clone());
        self.events.push(event)?;
        if let (Some(listener), Some(event)) = (&self.listener, shown) {
            listener(&LiveEvent::Event(event));
        }
        Ok(())
    }
}

/// What an interpreter keeps from run to run, whatever the runs: its output
/// buffers (the WASI context's streams write into them), the handles its
/// prepared state holds and its workspaces' bookkeeping.
struct Kept {
    stdout: CallOutput,
    stderr: CallOutput,
    prepared_handles: Vec<u32>,
    workspaces: Option<Workspaces>,
}

impl Run {
    /// Moves out what the interpreter keeps between runs, leaving this
    /// state to be replaced.
    fn kept(&mut self) -> Kept {
        Kept {
            stdout: self.stdout.clone(),
            stderr: self.stderr.clone(),
            prepared_handles: std::mem::take(&mut self.prepared_handles),
            workspaces: self.workspaces.take(),
        }
    }

    /// The state of an interpreter between runs: what it keeps, the plugin
    /// instances the last run called (`sessions`: dropping them takes
    /// longer, so [`Prepared::reusable`] does) and whether that run dropped
    /// a handle of the prepared state (`dropped_stream`, which the same
    /// check reads). Nothing of the embedder's (context, plugins, listener,
    /// approver) is kept alive.
    ///
    /// A run's state is a whole value, made here or in [`Run::for_run`],
    /// never reset field by field: a new field must be given in both, so no
    /// part of one run's state can reach the next by being forgotten.
    ///
    /// [`Prepared::reusable`]: super::prepared::Prepared::reusable
    fn idle(
        kept: Kept,
        call_limits: CallLimits,
        sessions: HashMap<usize, Session>,
        dropped_stream: bool,
    ) -> Run {
        let Kept {
            stdout,
            stderr,
            prepared_handles,
            workspaces,
        } = kept;
        stdout.reset(0, None);
        stderr.reset(0, None);
        Run {
            stdout,
            stderr,
            ctx: AgentCtx::default(),
            plugins: Toolbox::default(),
            call_limits,
            calls: 0,
            max_calls: 0,
            events: CappedEvents::new(0, 0),
            handoff: None,
            stop: None,
            sessions,
            listener: None,
            controls: RunControls::default(),
            dropped_stream,
            prepared_handles,
            workspaces,
            journal: Journal::default(),
        }
    }

    /// The state of a run of `ctx` with `plugins` under `limits`, showing
    /// `listener` what it does, in an interpreter that keeps `kept`. Its
    /// controls are set by the run after `begin`.
    fn for_run(
        kept: Kept,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        limits: &RunLimits,
        plugin_limits: &CallLimits,
        listener: Option<EventListener>,
    ) -> Run {
        let Kept {
            stdout,
            stderr,
            prepared_handles,
            workspaces,
        } = kept;
        let tap = |wrap: fn(String) -> LiveEvent| {
            listener.clone().map(|listener| {
                Arc::new(move |text| listener(&wrap(text))) as crate::runtime::capture::Listener
            })
        };
        stdout.reset(
            limits.max_output_bytes,
            tap(|text| LiveEvent::Stdout { text }),
        );
        stderr.reset(
            limits.max_output_bytes,
            tap(|text| LiveEvent::Stderr { text }),
        );
        Run {
            stdout,
            stderr,
            ctx: ctx.clone(),
            plugins: plugins.clone(),
            call_limits: plugin_limits.clone(),
            calls: 0,
            max_calls: limits.max_calls,
            events: CappedEvents::new(limits.max_events, limits.max_event_bytes),
            handoff: None,
            stop: None,
            sessions: HashMap::new(),
            listener,
            controls: RunControls::default(),
            dropped_stream: false,
            prepared_handles,
            workspaces,
            journal: Journal::default(),
        }
    }
}

impl Guest<Run> {
    /// The store data of a run of `ctx` with `plugins` under `limits`,
    /// showing `listener` what it does.
    pub(crate) fn new(
        ctx: &AgentCtx,
        plugins: &Toolbox,
        limits: &RunLimits,
        plugin_limits: &CallLimits,
        deadline: Instant,
        listener: Option<EventListener>,
        workspaces: Option<&HostWorkspaces>,
    ) -> RunState {
        let meter = HostMeter::new(deadline);
        let stdout = CallOutput::new(limits.max_output_bytes, meter.tab().clone());
        let stderr = CallOutput::new(limits.max_output_bytes, meter.tab().clone());
        let kept = Kept {
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            prepared_handles: Vec::new(),
            workspaces: workspaces.map(Workspaces::new),
        };
        let run = Run::for_run(kept, ctx, plugins, limits, plugin_limits, listener);
        let limiter = StoreLimiter::with_memory(plugin_limits, limits.memory_bytes);
        Guest::closed(stdout, stderr, limiter, meter, run)
    }

    /// Makes a prepared interpreter's store data the run's, keeping its WASI
    /// context, resource table and output buffers (emptied, with the run's
    /// cap): the guest may hold handles to what preparing opened, and a run
    /// need not pay for building a new WASI context. The plugin instances
    /// of the last run are dropped here if [`Run::idle`] still held them.
    pub(crate) fn begin(
        &mut self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        limits: &RunLimits,
        plugin_limits: &CallLimits,
        deadline: Instant,
        listener: Option<EventListener>,
    ) {
        self.limiter = self.limiter.recapped(plugin_limits, limits.memory_bytes);
        self.meter.reset(deadline);
        let kept = self.state.kept();
        self.state = Run::for_run(kept, ctx, plugins, limits, plugin_limits, listener);
    }

    /// Notes the drop of the resource `rep` if the interpreter held it
    /// since it was prepared.
    pub(crate) fn note_drop(&mut self, rep: u32) {
        if self.prepared_handles.contains(&rep) {
            self.dropped_stream = true;
        }
    }

    /// Lets go of what the run that just ended brought, but for its plugin
    /// instances (see [`Run::idle`]), so an interpreter waiting for its next
    /// run keeps none of it alive: the embedder's listener (also in the
    /// output taps) and cancel handle, the context, the plugins and the
    /// run's controls (with the embedder's approver).
    pub(crate) fn end(&mut self) {
        self.meter.watch(None);
        self.tape.stop();
        let run = &mut self.state;
        let (kept, sessions) = (run.kept(), std::mem::take(&mut run.sessions));
        let (call_limits, dropped_stream) = (run.call_limits.clone(), run.dropped_stream);
        self.state = Run::idle(kept, call_limits, sessions, dropped_stream);
    }
}
