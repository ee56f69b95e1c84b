//! A run's calls of methods, for either interpreter: the run's call and
//! event caps, the method filter of its toolbox, the arguments decoded
//! under the method's limits, the execution controls, and the provider's
//! answer marshalled back. Each interpreter links its own import to
//! [`call`] (`small/linker.rs`, `scientific/host_call.rs`).

use std::time::{Duration, Instant};

use tracing::{Instrument, Span};
use wasmtime::component::WasmList;
use wasmtime::{AsContextMut, StoreContextMut};

use crate::bindings::python::sandwit::interpreter::methods::Marshalled;
use crate::bindings::wit;
use crate::controls::{ControlEvent, Permit, Refused};
use crate::plugin::CallReport;
use crate::runtime::engine::deadline_ticks;
use crate::runtime::limits::Budget;
use crate::sandbox::pauses::Resume;
use crate::sandbox::pauses::journal::{
    ArgsDigest, PendingCall, Resumed, Standing, Step, args_digest,
};
use crate::sandbox::run::functions::CLIENT_FUNCTIONS;
use crate::sandbox::run::outcome::{Event, Handoff};
use crate::sandbox::run::state::RunState;
use crate::toolbox::set::Provider;
use crate::trace;
use sandwit_contract::error::{CallError, CallErrorKind};
use sandwit_contract::json::summary;
use sandwit_contract::limits::{CallLimits, LimitKind};
use sandwit_contract::manifest::MAX_NAME_LEN;
use sandwit_contract::text::{cut, quote};
use sandwit_contract::types::{AgentCtx, ContentPart, MethodKind, MethodResult, Value};
use sandwit_value::marshal_text_tuple;

/// A call's answer as the interpreters read it: the method's value, or,
/// for a call that failed or was refused, a tuple of two strings `(kind,
/// message)`, which no value is (values' arrays are lists), so
/// `crossing.invoke` tells them apart after one `marshal.loads`. (A WIT
/// `result` would make the interpreter build an `Ok` object per call.)
pub(crate) fn answer(result: Result<Marshalled, wit::CallError>) -> Marshalled {
    let error = match result {
        Ok(value) => return value,
        Err(error) => error,
    };
    let (kind, message) = match &error {
        wit::CallError::InvalidArguments(m) => ("invalid_arguments", m),
        wit::CallError::UnknownMethod(m) => ("unknown_method", m),
        wit::CallError::Failed(m) => ("failed", m),
        wit::CallError::Denied(m) => ("denied", m),
        wit::CallError::LimitExceeded(m) => ("limit_exceeded", m),
    };
    marshal_text_tuple(&[kind, message])
}

/// The store data of an interpreter whose code calls plugin methods: a
/// run's state, in it or beside what that kind of interpreter adds.
pub(crate) trait RunData: Send + 'static {
    fn run_state(&mut self) -> &mut RunState;
}

impl RunData for RunState {
    fn run_state(&mut self) -> &mut RunState {
        self
    }
}

/// A call's marshalled arguments, wherever the interpreter left them.
pub(crate) trait Arguments<T: 'static> {
    fn len(&self) -> usize;
    fn bytes<'a>(&'a self, store: &'a StoreContextMut<'_, T>) -> &'a [u8];
}

/// In the component interpreter's memory, where the call left them: they
/// are decoded from there, not copied out first.
impl<T: 'static> Arguments<T> for WasmList<u8> {
    fn len(&self) -> usize {
        WasmList::len(self)
    }

    fn bytes<'a>(&'a self, store: &'a StoreContextMut<'_, T>) -> &'a [u8] {
        self.as_le_slice(store)
    }
}

/// Copied out of a core module's memory.
impl<T: 'static> Arguments<T> for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn bytes<'a>(&'a self, _store: &'a StoreContextMut<'_, T>) -> &'a [u8] {
        self
    }
}

/// Calls `method` with `args` for the run in `store`: the run's call and
/// event caps, the method filter of its toolbox, the arguments decoded
/// under the method's limits, the execution controls, the plugin under the
/// smaller of its own and the run's remaining budget (charged back), and
/// its result kind (an agent or multimodal result ends the run: `Err`).
pub(crate) async fn call<T: RunData>(
    mut store: StoreContextMut<'_, T>,
    method: String,
    args: impl Arguments<T>,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    let metered = store.get_fuel().ok();
    let keeps = store.data_mut().run_state().journal.keeps();
    let digest = keeps.then(|| args_digest(args.bytes(&store.as_context_mut())));
    let state = store.data_mut().run_state();
    state.calls += 1;
    if state.calls > state.max_calls {
        // The name is whatever the code sent: quoted from a bounded prefix.
        let message = format!(
            "made more than {} method calls (the next was {})",
            state.max_calls,
            quote(&method, MAX_NAME_LEN)
        );
        return Err(stop(state, LimitKind::Calls, message));
    }
    // The arguments are read out of the interpreter.
    state.meter.charge(args.len());
    let resumed_here = match state.journal.step(&method, digest.as_ref()) {
        Step::Live => false,
        Step::Replayed(answer) => {
            state.journal.keep(&method, digest, &answer);
            return Ok(answer);
        }
        Step::Diverged(message) => {
            let err = wasmtime::format_err!("{message}");
            state.journal.diverged = Some(message);
            return Err(err);
        }
        Step::Resumed(resumed) => {
            resume_standing(&mut store, resumed.standing, resumed.epochs)?;
            match answer_resumed(store.data_mut().run_state(), &resumed)? {
                Some(answer) => {
                    let state = store.data_mut().run_state();
                    state.journal.keep(&method, digest, &answer);
                    return Ok(answer);
                }
                None => true,
            }
        }
    };
    let state = store.data_mut().run_state();
    let Some(provider) = state.plugins.provider(&method).cloned() else {
        // The guest's error names the method already.
        return Ok(Err(wit::CallError::UnknownMethod(
            "no method of this run has that name".into(),
        )));
    };
    let kind = match &provider {
        Provider::Plugin(plugin) => plugin.manifest().method(&method).expect("indexed").kind,
        Provider::Host(host) => host.spec().kind,
    };
    let span = trace::plugin_call(provider.id(), &method, kind);
    // Boxed: the call's future holds the plugin's (wasmtime's call, the
    // timer, the controls), and every wrapper and await would otherwise
    // copy all of it, a call's largest cost after the guests' own.
    let called = Call {
        provider,
        method,
        kind,
        digest,
        resumed_here,
    };
    let result = Box::pin(dispatch(
        store.as_context_mut(),
        &called,
        args,
        metered,
        &span,
    ))
    .instrument(span.clone())
    .await?;
    let state = store.data_mut().run_state();
    state.journal.keep(&called.method, digest, &result);
    Ok(result)
}

/// A call [`call`] found the provider of.
struct Call {
    provider: Provider,
    method: String,
    kind: MethodKind,
    /// Its arguments' digest, where the run keeps a journal.
    digest: Option<ArgsDigest>,
    /// Whether it is the call a resumed run paused at, approved.
    resumed_here: bool,
}

/// Has the resumed run go on from where its pause left it: no more fuel,
/// time or budget than it had then.
fn resume_standing<T: RunData>(
    store: &mut StoreContextMut<'_, T>,
    standing: Standing,
    epochs: bool,
) -> wasmtime::Result<()> {
    if let (Some(left), Ok(now)) = (standing.fuel_left, store.get_fuel()) {
        store.set_fuel(now.min(left))?;
    }
    let time_left = Duration::from_millis(standing.time_left_ms);
    let state = store.data_mut().run_state();
    state.meter.deadline = state.meter.deadline.min(Instant::now() + time_left);
    state.controls.resume_spent(standing.spent_micros);
    if epochs {
        store.set_epoch_deadline(deadline_ticks(time_left));
    }
    Ok(())
}

/// What the call `resumed` paused at returns on the person's answer:
/// `None` to make it now (approved).
fn answer_resumed(
    state: &mut RunState,
    resumed: &Resumed,
) -> wasmtime::Result<Option<Result<Marshalled, wit::CallError>>> {
    let (id, method) = (&resumed.plugin, &resumed.method);
    let (name, answer) = match &resumed.decision {
        Resume::Approve => ("approve", None),
        Resume::Deny(reason) => {
            let message = format!("a person denied this call of `{method}`: {reason}");
            ("deny", Some(Err(wit::CallError::Denied(message))))
        }
        Resume::Result(value) => {
            let marshalled = value.to_marshal();
            state.meter.charge(marshalled.len());
            ("result", Some(Ok(marshalled)))
        }
        // Answered as a failed call, of the kind `crossing.plugin_error`
        // raises as the named type.
        Resume::Raise { name, message } => {
            let kind = format!("raised:{name}");
            let answer = marshal_text_tuple(&[&kind, message]);
            state.meter.charge(answer.len());
            ("raise", Some(Ok(answer)))
        }
    };
    let event = ControlEvent::Resumed {
        answer: name.to_string(),
    };
    record_control(state, id, method, event)?;
    Ok(answer)
}

/// Makes the call [`call`] found the provider of, in the call's `span`:
/// `metered` is the run's fuel left when its store meters fuel. The steps:
/// the arguments decoded, the call's budget, the execution controls'
/// admission, the provider's call, its events recorded, its result handed
/// back to the code.
async fn dispatch<T: RunData>(
    mut store: StoreContextMut<'_, T>,
    called: &Call,
    args: impl Arguments<T>,
    metered: Option<u64>,
    span: &Span,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    let (provider, method, kind) = (called.provider.clone(), called.method.clone(), called.kind);
    // Without fuel metering the plugin's own budget is all there is.
    let fuel_left = metered.unwrap_or(u64::MAX);
    let id = provider.id().to_string();
    let state = store.data_mut().run_state();
    let limits = match &provider {
        Provider::Plugin(plugin) => plugin.limits().clone(),
        Provider::Host(_) => state.call_limits.clone(),
    };
    let args = match decode(&store, &args, &limits) {
        Ok(args) => args,
        Err(kind) => {
            trace::call_ended(span, Some(&kind), 0);
            return Ok(Err(to_wit_error(kind)));
        }
    };
    let state = store.data_mut().run_state();
    let ctx = state.ctx.clone();
    let client = matches!(&provider, Provider::Host(host) if host.client_function().is_some());
    if !called.resumed_here && (client || state.controls.pauses(&id, &method, &ctx)) {
        // A person or the application is shown the arguments the call
        // would take, never ones it would refuse.
        let checked = match &provider {
            Provider::Plugin(plugin) => plugin.check_args(&method, &args),
            Provider::Host(host) => host.check_args(&args),
        };
        if let Err(refused) = checked {
            trace::call_ended(span, Some(&refused), 0);
            return refused_call(state, (id, method, kind), refused);
        }
        return pause(state, (id, method, kind), args, called.digest, metered);
    }
    let (budget, bound) = call_budget(state, fuel_left, &limits);
    let admitted = (state.controls)
        .admit(&id, &method, &ctx, &args, budget.deadline)
        .await;
    let permit = match admitted {
        Ok((permit, approved)) => {
            if let Some(event) = approved {
                record_control(state, &id, &method, event)?;
            }
            permit
        }
        Err(refused) => {
            trace::call_ended(span, Some(&refused.kind), 0);
            return refuse(state, (id, method, kind), refused);
        }
    };
    let called = (&*id, &*method);
    let report = call_provider(&mut store, provider, called, ctx, args, budget, &limits).await;
    let error = report.result.as_ref().err().map(|e| &e.kind);
    trace::call_ended(span, error, report.fuel_used);
    if metered.is_some() {
        store.set_fuel(fuel_left.saturating_sub(report.fuel_used))?;
    }
    let state = store.data_mut().run_state();
    let result = record_call(state, (&id, &method, kind), report, permit, bound)?;
    hand_back(state, (id, method), result, bound)
}

/// Pauses the run at the call of `id`'s `method` with `args` (the run's
/// fuel left was `metered`), or refuses the call if the run cannot pause.
fn pause(
    state: &mut RunState,
    (id, method, kind): (String, String, MethodKind),
    args: Value,
    digest: Option<ArgsDigest>,
    metered: Option<u64>,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    let unpausable = state.journal.cannot_pause();
    let (Some(digest), None) = (digest, &unpausable) else {
        let why = unpausable.unwrap_or_else(|| "it keeps no journal".into());
        let message = match id == CLIENT_FUNCTIONS {
            true => format!(
                "function `{method}` is the application's, answered when the run pauses at it, \
                 and this run cannot pause: {why}"
            ),
            false => format!(
                "plugin `{id}`, method `{method}` waits for a person's answer (the policy pauses \
                 its calls), and this run cannot pause: {why}"
            ),
        };
        let refused = Refused {
            kind: CallErrorKind::NotApproved {
                flags: Vec::new(),
                message,
            },
            event: ControlEvent::ApprovalRefused {
                flags: Vec::new(),
                reason: why,
            },
        };
        return refuse(state, (id, method, kind), refused);
    };
    let standing = Standing {
        fuel_left: metered,
        time_left_ms: (state
            .meter
            .deadline
            .saturating_duration_since(Instant::now()))
        .as_millis() as u64,
        spent_micros: state.controls.spent_micros(),
    };
    record_control(state, &id, &method, ControlEvent::Paused)?;
    let err = wasmtime::format_err!("the run paused at plugin `{id}`, method `{method}`");
    state.journal.paused = Some(PendingCall {
        plugin: id,
        method,
        args,
        digest,
        standing,
    });
    Err(err)
}

/// Whether a call's running out of fuel, or of time, means the run's own
/// budget is spent: the call had no more of it than the run had left.
#[derive(Clone, Copy)]
struct RunBound {
    fuel: bool,
    time: bool,
}

impl RunBound {
    /// Whether a call that ran into `limit` ran into the run's own.
    fn spent(self, limit: LimitKind) -> bool {
        (limit == LimitKind::Fuel && self.fuel) || (limit == LimitKind::Time && self.time)
    }
}

/// The call's marshalled `args`, decoded under the provider's `limits`.
fn decode<T: 'static>(
    store: &StoreContextMut<'_, T>,
    args: &impl Arguments<T>,
    limits: &CallLimits,
) -> Result<Value, CallErrorKind> {
    Value::from_marshal(args.bytes(store), &limits.decode_limits()).map_err(|e| {
        CallErrorKind::InvalidArguments {
            message: e.to_string(),
        }
    })
}

/// The call's budget: the provider's own `limits`, or what is left of the
/// run's (`fuel_left`, its deadline), whichever is less; and which of them
/// the run's bound.
fn call_budget(state: &RunState, fuel_left: u64, limits: &CallLimits) -> (Budget, RunBound) {
    let own = Budget::from_limits(limits);
    let budget = Budget {
        fuel: fuel_left.min(own.fuel),
        deadline: state.meter.deadline.min(own.deadline),
    };
    let bound = RunBound {
        fuel: fuel_left <= own.fuel,
        time: state.meter.deadline <= own.deadline,
    };
    (budget, bound)
}

/// Calls `provider`'s method with `args` within `budget`: a plugin in the
/// run's session of it (kept in the run's state for the next call), a
/// host method under `limits`.
async fn call_provider<T: RunData>(
    store: &mut StoreContextMut<'_, T>,
    provider: Provider,
    (id, method): (&str, &str),
    ctx: AgentCtx,
    args: Value,
    budget: Budget,
    limits: &CallLimits,
) -> CallReport {
    match provider {
        Provider::Plugin(plugin) => {
            let key = plugin.key();
            let mut session = store.data_mut().run_state().sessions.remove(&key);
            let report = plugin
                .call_in(&mut session, &ctx, method, args, budget)
                .await;
            if let Some(session) = session {
                store.data_mut().run_state().sessions.insert(key, session);
            }
            report
        }
        Provider::Host(host) => {
            let (result, elapsed) = host.call(ctx, args, budget.deadline, limits).await;
            let error = |kind| CallError {
                plugin: id.to_string(),
                method: method.to_string(),
                kind,
            };
            CallReport {
                result: result.map_err(error),
                events: Vec::new(),
                fuel_used: 0,
                elapsed,
            }
        }
    }
}

/// Records what the call of `id`'s `method` reported (the plugin's events,
/// the call, a control it tripped), releasing its `permit`, and returns its
/// result.
fn record_call(
    state: &mut RunState,
    (id, method, kind): (&str, &str, MethodKind),
    report: CallReport,
    permit: Option<Permit>,
    bound: RunBound,
) -> wasmtime::Result<Result<MethodResult, CallError>> {
    // A call that ran into the run's own fuel or time is dropped
    // unfinished: it tells nothing of the method's health.
    let run_bound = matches!(
        &report.result,
        Err(CallError { kind: CallErrorKind::LimitExceeded { limit, .. }, .. })
            if bound.spent(*limit)
    );
    let tripped = if run_bound {
        None
    } else {
        state.controls.finish(permit, &report.result)
    };
    let call = Event::Call {
        plugin: id.to_string(),
        method: method.to_string(),
        kind,
        ms: report.elapsed.as_secs_f64() * 1e3,
        fuel: report.fuel_used,
        ok: report.result.is_ok(),
        summary: match &report.result {
            Ok(result) => summarize(result),
            Err(e) => cut(e.kind.to_string(), 200),
        },
    };
    let events = report.events.into_iter().map(|event| Event::Plugin {
        plugin: id.to_string(),
        event,
    });
    let tripped = tripped.map(|event| Event::Control {
        plugin: id.to_string(),
        method: method.to_string(),
        event,
    });
    for event in events.chain([call]).chain(tripped) {
        record(state, id, method, event)?;
    }
    Ok(report.result)
}

/// What the code gets back from the call of `id`'s `method` that returned
/// `result`: a tool's value or a behavior's text (recorded as a system
/// message); an agent or multimodal result, or a failure that spent the
/// run's own budget, ends the run (`Err`).
fn hand_back(
    state: &mut RunState,
    (id, method): (String, String),
    result: Result<MethodResult, CallError>,
    bound: RunBound,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    match result {
        Ok(MethodResult::Tool(value)) => {
            let marshalled = value.to_marshal();
            state.meter.charge(marshalled.len());
            Ok(Ok(marshalled))
        }
        Ok(MethodResult::Behavior(text)) => {
            state.meter.charge(text.len());
            let message = Event::SystemMessage {
                plugin: id.clone(),
                method: method.clone(),
                text: text.clone(),
            };
            record(state, &id, &method, message)?;
            Ok(Ok(Value::Text(text).to_marshal()))
        }
        Ok(result) => {
            // The script stops here: end the interpreter now, so nothing after
            // the call runs, whatever the code catches.
            state.handoff = Some(Handoff {
                plugin: id,
                method: method.clone(),
                result,
            });
            Err(wasmtime::format_err!("agent handoff at `{method}`"))
        }
        Err(e) => match e.kind {
            // The run's own budget is spent: the run ends.
            CallErrorKind::LimitExceeded { limit, message } if bound.spent(limit) => {
                let message = format!("plugin `{id}`, method `{method}`: {message}");
                Err(stop(state, limit, message))
            }
            kind => Ok(Err(to_wit_error(kind))),
        },
    }
}

/// Records `event` of a call of `id`'s `method` in the run; past the run's
/// event caps, the run ends (the error returned ends it).
fn record(state: &mut RunState, id: &str, method: &str, event: Event) -> wasmtime::Result<()> {
    if let Event::Control { event, .. } = &event {
        event.trace(id, method);
    }
    state.record(event).map_err(|full| {
        let message = format!("plugin `{id}`, method `{method}`: the run recorded {full}");
        stop(state, LimitKind::Events, message)
    })
}

/// Records a control's event of a call of the run, as [`record`] does.
fn record_control(
    state: &mut RunState,
    id: &str,
    method: &str,
    event: ControlEvent,
) -> wasmtime::Result<()> {
    let event = Event::Control {
        plugin: id.to_string(),
        method: method.to_string(),
        event,
    };
    record(state, id, method, event)
}

/// Fails a call a control refused: its event and the call's are recorded,
/// and the code gets the error.
fn refuse(
    state: &mut RunState,
    (id, method, kind): (String, String, MethodKind),
    refused: Refused,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    record_control(state, &id, &method, refused.event)?;
    refused_call(state, (id, method, kind), refused.kind)
}

/// Records a call refused before it was made (`refused` says why) and
/// returns the error the code's call raises.
fn refused_call(
    state: &mut RunState,
    (id, method, kind): (String, String, MethodKind),
    refused: CallErrorKind,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    let call = Event::Call {
        plugin: id.clone(),
        method: method.clone(),
        kind,
        ms: 0.0,
        fuel: 0,
        ok: false,
        summary: cut(refused.to_string(), 200),
    };
    record(state, &id, &method, call)?;
    Ok(Err(to_wit_error(refused)))
}

/// Records a run-wide limit and returns the error that ends the run.
fn stop(state: &mut RunState, kind: LimitKind, message: String) -> wasmtime::Error {
    let err = wasmtime::format_err!("{kind} limit: {message}");
    state.stop = Some((kind, message));
    err
}

fn to_wit_error(kind: CallErrorKind) -> wit::CallError {
    match kind {
        CallErrorKind::UnknownMethod => wit::CallError::UnknownMethod("no such method".into()),
        CallErrorKind::InvalidArguments { message } => wit::CallError::InvalidArguments(message),
        CallErrorKind::Denied { message } => wit::CallError::Denied(message),
        CallErrorKind::LimitExceeded { limit, message } => {
            wit::CallError::LimitExceeded(format!("{limit} limit exceeded: {message}"))
        }
        CallErrorKind::Failed { message } => wit::CallError::Failed(message),
        CallErrorKind::NotApproved { message, .. } => wit::CallError::Denied(message),
        other @ (CallErrorKind::Trapped { .. }
        | CallErrorKind::BadResult { .. }
        | CallErrorKind::Unavailable { .. }) => wit::CallError::Failed(cut(other.to_string(), 500)),
    }
}

/// A one-line summary of a result for the events.
pub(crate) fn summarize(result: &MethodResult) -> String {
    let text = match result {
        MethodResult::Tool(v) => summary(v, 200),
        MethodResult::Agent(t) | MethodResult::Behavior(t) => cut(t.clone(), 200),
        MethodResult::MultimodalAgent(parts) => parts
            .iter()
            .map(|p| match p {
                ContentPart::Text(t) => cut(t.clone(), 100),
                ContentPart::Image(m) => format!("[{} image, {} bytes]", m.mime_type, m.data.len()),
                ContentPart::ImageUrl(u) => format!("[image at {u}]"),
            })
            .collect::<Vec<_>>()
            .join(" "),
    };
    text.replace('\n', " ")
}
