//! A run of AI code, whichever interpreter runs it: what it is given
//! ([`RunOptions`]), its admission ([`Run::admit`]: the host's plugins only,
//! the toolbox as the run's context sees it, good inputs, a run slot), its
//! state in the interpreter's store (`state.rs`), its calls of methods
//! (`calls.rs`) and its end ([`Run::end`], `finish.rs`, [`RunOutcome`]).
//! `small/` and `scientific/` each bring an interpreter and its store, and
//! leave the rest of a run to this module.

pub(crate) mod calls;
mod fence;
mod finish;
pub(crate) mod functions;
mod options;
pub(crate) mod outcome;
pub(crate) mod slots;
pub(crate) mod state;

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use crate::bindings::python::exports::sandwit::interpreter::runner;
use crate::controls::RunControls;
use crate::runtime::guard::{Stopped, apply_budget};
use crate::runtime::limits::Budget;
use crate::runtime::tape::Readings;
use crate::sandbox::SandboxHost;
use crate::sandbox::pauses::journal::{Journal, Resumed};
use crate::sandbox::pauses::record::{self, Record};
use crate::sandbox::sessions::saved::{now_secs, sandwit_version};
use crate::sandbox::values::marshal_inputs;
use crate::toolbox::Toolbox;
use calls::RunData;
pub use fence::strip_code_fence;
pub use functions::{CLIENT_FUNCTIONS, ClientFunction, is_exception_type_name};
pub use options::RunOptions;
use outcome::{RunOutcome, WorkspaceFile};
use sandwit_contract::limits::{LimitKind, RunLimits};
use sandwit_contract::types::{AgentCtx, Value};
use slots::Slot;
use state::RunState;

/// A run that got its run slot: what either interpreter needs to execute
/// its code, and to end it ([`Run::end`]).
pub(crate) struct Run<'a> {
    host: &'a Arc<SandboxHost>,
    options: &'a RunOptions,
    /// Held until the run ends.
    slot: Slot<'a>,
    /// The methods the code may call: the toolbox it was given, as its
    /// context sees it (the plugins' lifecycle hooks applied).
    pub(crate) plugins: Toolbox,
    /// The code, a markdown fence around all of it stripped.
    pub(crate) code: &'a str,
    /// Its inputs, marshalled (empty for none).
    pub(crate) inputs: Vec<u8>,
    /// Its fuel and deadline, counted from when it got the slot.
    pub(crate) budget: Budget,
    pub(crate) limits: &'a RunLimits,
}

impl<'a> Run<'a> {
    /// What every run of either interpreter goes through before its code
    /// runs: its plugins must be `host`'s; its toolbox is seen in `ctx`'s
    /// context ([`Toolbox::in_context`], unless it was made for that
    /// context already), so a method a plugin withholds from the chat is
    /// not callable; its inputs must be good; then it waits for a run slot
    /// (the host's [`RunSlots`](crate::RunSlots)). The outcome of a run
    /// refused on the way.
    pub(crate) async fn admit(
        host: &'a Arc<SandboxHost>,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        code: &'a str,
        limits: &'a RunLimits,
        options: &'a RunOptions,
    ) -> Result<Run<'a>, RunOutcome> {
        if let Some(plugin) = plugins.foreign_plugin(&host.plugins) {
            let message = plugin.foreign_message();
            return Err(RunOutcome::not_run(
                "ForeignPlugin",
                message,
                Instant::now(),
            ));
        }
        let plugins = plugins.for_context(ctx).await;
        let plugins = match options.functions.is_empty() {
            true => plugins,
            false => functions::methods(&options.functions)
                .and_then(|methods| {
                    plugins
                        .with_functions(&methods)
                        .map_err(|e| format!("a function cannot be given to the run: {e}"))
                })
                .map_err(|message| {
                    RunOutcome::not_run("InvalidFunction", message, Instant::now())
                })?,
        };
        // The wait for a slot counts from here: the hooks' time is not
        // queueing.
        let asked = Instant::now();
        let inputs = match &options.inputs {
            Some(given @ Value::Object(entries)) if !entries.is_empty() => marshal_inputs(
                given,
                |name| plugins.provider(name).is_some(),
                &host.runtime().limits,
            )
            .map_err(|message| RunOutcome::not_run("InvalidInput", message, asked))?,
            _ => Vec::new(),
        };
        let slot = (host.admission)
            .slot(asked, options.cancel.as_ref())
            .await
            .map_err(|refused| RunOutcome::no_slot(refused, asked))?;
        let budget = Budget::new(limits.fuel, limits.time, slot.start);
        Ok(Run {
            host,
            options,
            slot,
            plugins,
            code: strip_code_fence(code),
            inputs,
            budget,
            limits,
        })
    }

    /// The paused run this one resumes, if it resumes one.
    pub(crate) fn resumed(&self) -> Option<&Resumed> {
        self.options.resumed.as_deref()
    }

    /// The handle that cancels the run, if it was given one.
    pub(crate) fn cancel(&self) -> Option<&'a crate::runtime::cancel::Cancel> {
        self.options.cancel.as_ref()
    }

    /// When the run got its slot: its time counts from here.
    pub(crate) fn start(&self) -> Instant {
        self.slot.start
    }

    /// Makes `state`, an interpreter's state kept from its last run, this
    /// run's (for `ctx`, its toolbox, limits, deadline and listener).
    pub(crate) fn begin(&self, state: &mut RunState, ctx: &AgentCtx) {
        let call_limits = &self.host.runtime().limits;
        let listener = self.options.on_event.clone();
        let deadline = self.budget.deadline;
        state.begin(
            ctx,
            &self.plugins,
            self.limits,
            call_limits,
            deadline,
            listener,
        );
    }

    /// A state made for this run, for an interpreter instantiated for it.
    pub(crate) fn new_state(&self, ctx: &AgentCtx) -> RunState {
        RunState::new(
            ctx,
            &self.plugins,
            self.limits,
            &self.host.runtime().limits,
            self.budget.deadline,
            self.options.on_event.clone(),
            self.host.workspaces.as_ref(),
        )
    }

    /// Readies the run's state in `store` (begun for this run by its
    /// interpreter) for the code: the run's cancel handle watched, its
    /// execution controls, its journal (kept where the policy pauses calls
    /// and the run can pause: `unpausable` says why it cannot), its fuel
    /// and deadline.
    pub(crate) fn arm<T: RunData>(&self, store: &mut Store<T>, unpausable: Option<&str>) {
        let state = store.data_mut().run_state();
        state.meter.watch(self.options.cancel.clone());
        state.controls = RunControls::new(
            self.host.plugins.controls.clone(),
            self.options.approver.clone(),
        );
        let resumed = self.options.resumed.clone();
        state.journal = match (unpausable, resumed) {
            (None, Some(resumed)) => {
                state.tape.record(resumed.readings.clone());
                Journal::pausable(Some(resumed))
            }
            (None, None) if state.controls.pauses_any() || !self.options.functions.is_empty() => {
                state.tape.record(Readings::default());
                Journal::pausable(None)
            }
            (None, None) => Journal::default(),
            (Some(why), _) => Journal::unpausable(why),
        };
        apply_budget(store, self.budget, self.host.runtime().metering);
    }

    /// Ends the run whose code ended with `result`, using `fuel_used`:
    /// `workspace` is the quota the run's workspace writes hit, if any,
    /// and the files it created or changed. A refused write ends the run
    /// with the quota, whatever the code made of the `OSError`. `state` is
    /// left idle ([`RunState::end`]). `reuse`: whether the interpreter was
    /// prepared ahead, and had served a run before.
    pub(crate) fn end(
        self,
        state: &mut RunState,
        result: Result<runner::Outcome, Stopped>,
        fuel_used: u64,
        workspace: Option<(Option<String>, Vec<WorkspaceFile>)>,
        reuse: (bool, bool),
    ) -> (RunOutcome, Option<Record>) {
        let (hit, files) = workspace.unwrap_or_default();
        let result = match hit {
            Some(quota) => Err(Stopped::Limit(LimitKind::Workspace, quota)),
            None => result,
        };
        let start = self.start();
        let mut outcome = finish::finish(state, result, self.limits, fuel_used, reuse, start);
        outcome.files = files;
        outcome.queued = self.slot.waited;
        let record = self.pause_record(state, &mut outcome);
        state.end();
        (outcome, record)
    }

    /// What keeps the run if it paused (its interpreter's hash left for the
    /// interpreter to give): `outcome` becomes an error if what it read
    /// cannot be kept.
    fn pause_record(&self, state: &mut RunState, outcome: &mut RunOutcome) -> Option<Record> {
        let pending = state.journal.paused.take()?;
        let readings = match state.tape.readings() {
            Ok(readings) => readings,
            Err(why) => {
                let message = format!(
                    "plugin `{}`, method `{}` pauses the run, and it cannot be paused: {why}",
                    pending.plugin, pending.method
                );
                outcome.refuse_pause(message);
                return None;
            }
        };
        let inputs = self.options.inputs.as_ref().map(Value::to_marshal);
        let now = now_secs();
        Some(Record {
            format: record::FORMAT,
            sandwit: sandwit_version().to_string(),
            interpreter: String::new(),
            ctx: state.ctx.clone(),
            code: self.code.to_string(),
            inputs: inputs.unwrap_or_default(),
            limits: self.limits.into(),
            answers: state.journal.take_answers(),
            readings,
            plugin: pending.plugin,
            args: pending.args.to_marshal(),
            method: pending.method,
            digest: pending.digest,
            standing: pending.standing,
            paused_at: now,
            expires_at: now + self.host.session_limits.pause_ttl.as_secs(),
            session: None,
            functions: self.options.functions.clone(),
        })
    }
}
