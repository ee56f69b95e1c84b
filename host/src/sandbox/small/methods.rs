//! `sandwit:interpreter/methods`: the Python sandbox's calls to plugin methods.
//!
//! Linked by hand rather than through a generated `Host` trait because a call
//! needs the store itself: the plugin runs on the run's remaining fuel, which
//! is read from the interpreter's store and charged back to it.

use tracing::{Instrument, Span};
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceType, WasmList};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::p2::bindings::io::streams::{HostInputStream, HostOutputStream};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};

use crate::bindings::python::sandwit::interpreter::methods::Marshalled;
use crate::bindings::wit;
use crate::controls::{ControlEvent, Refused};
use crate::plugin::CallReport;
use crate::runtime::limits::Budget;
use crate::sandbox::small::outcome::{Event, Handoff};
use crate::sandbox::small::state::RunState;
use crate::toolbox::plugin_set::Provider;
use crate::trace;
use sandwit_contract::error::{CallError, CallErrorKind};
use sandwit_contract::json::summary;
use sandwit_contract::limits::LimitKind;
use sandwit_contract::manifest::MAX_NAME_LEN;
use sandwit_contract::text::{cut, quote};
use sandwit_contract::types::{ContentPart, MethodKind, MethodResult, Value};
use sandwit_value::marshal_text_tuple;

/// A linker for the interpreter on `engine`: WASI, its streams' drops
/// noted in the run's state, and the plugin methods.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<RunState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    note_stream_drops(&mut linker)?;
    super::workspace::add_to_linker(&mut linker)?;
    add_to_linker(&mut linker)?;
    Ok(linker)
}

/// The `wasi:io/streams` wasmtime-wasi defines (the interpreter's imports of
/// earlier 0.2 versions resolve to it).
const STREAMS: &str = "wasi:io/streams@0.2.12";

/// Redefines the stream resources of [`STREAMS`] so that dropping one the
/// interpreter held since it was prepared also sets
/// [`Run::dropped_stream`](super::state::Run): the interpreter's memory,
/// restored after a run, refers to the stdout stream it opened while
/// prepared, and a run that closed that stream (and maybe opened another,
/// which the instance's handle table would put in its place) must not
/// leave it to the next run. The drop itself is wasmtime-wasi's.
fn note_stream_drops(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut streams = linker.instance(STREAMS)?;
    streams.resource_async(
        "output-stream",
        ResourceType::host::<DynOutputStream>(),
        |mut store, rep| {
            Box::new(async move {
                store.data_mut().note_drop(rep);
                let table = store.data_mut().ctx().table;
                HostOutputStream::drop(table, Resource::new_own(rep)).await
            })
        },
    )?;
    streams.resource_async(
        "input-stream",
        ResourceType::host::<DynInputStream>(),
        |mut store, rep| {
            Box::new(async move {
                store.data_mut().note_drop(rep);
                let table = store.data_mut().ctx().table;
                HostInputStream::drop(table, Resource::new_own(rep)).await
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Adds `sandwit:interpreter/methods@0.2.0` to a Python run's linker.
pub(crate) fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    let mut methods = linker.instance("sandwit:interpreter/methods@0.2.0")?;
    methods.func_wrap_async(
        "call",
        |store: StoreContextMut<'_, RunState>, (method, args): (String, WasmList<u8>)| {
            Box::new(async move { Ok((answer(call(store, method, args).await?),)) })
        },
    )
}

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
/// event caps, the method filter of its plugin set, the arguments decoded
/// under the method's limits, the execution controls, the plugin under the
/// smaller of its own and the run's remaining budget (charged back), and
/// its result kind (an agent or multimodal result ends the run: `Err`).
pub(crate) async fn call<T: RunData>(
    mut store: StoreContextMut<'_, T>,
    method: String,
    args: impl Arguments<T>,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    let metered = store.get_fuel().ok();
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
    Box::pin(dispatch(
        store,
        (provider, method, kind),
        args,
        metered,
        &span,
    ))
    .instrument(span.clone())
    .await
}

/// Makes the call [`call`] found the provider of, in the call's `span`:
/// `metered` is the run's fuel left when its store meters fuel.
async fn dispatch<T: RunData>(
    mut store: StoreContextMut<'_, T>,
    (provider, method, kind): (Provider, String, MethodKind),
    args: impl Arguments<T>,
    metered: Option<u64>,
    span: &Span,
) -> wasmtime::Result<Result<Marshalled, wit::CallError>> {
    // Without fuel metering the plugin's own budget is all there is.
    let fuel_left = metered.unwrap_or(u64::MAX);
    let id = provider.id().to_string();
    let state = store.data_mut().run_state();
    let limits = match &provider {
        Provider::Plugin(plugin) => plugin.limits().clone(),
        Provider::Host(_) => state.call_limits.clone(),
    };
    let args = match Value::from_marshal(args.bytes(&store), &limits.decode_limits()) {
        Ok(args) => args,
        Err(e) => {
            let kind = CallErrorKind::InvalidArguments {
                message: e.to_string(),
            };
            trace::call_ended(span, Some(&kind), 0);
            return Ok(Err(to_wit_error(kind)));
        }
    };
    let state = store.data_mut().run_state();
    // The plugin's own limits, or what is left of the run's, whichever is less.
    let own = Budget::from_limits(&limits);
    let budget = Budget {
        fuel: fuel_left.min(own.fuel),
        deadline: state.meter.deadline.min(own.deadline),
    };
    // Whether running out of fuel or time means the run's budget is spent.
    let run_fuel_bound = fuel_left <= own.fuel;
    let run_time_bound = state.meter.deadline <= own.deadline;
    let ctx = state.ctx.clone();
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
    let report = match provider {
        Provider::Plugin(plugin) => {
            let key = plugin.key();
            let mut session = state.sessions.remove(&key);
            let report = plugin
                .call_in(&mut session, &ctx, &method, args, budget)
                .await;
            if let Some(session) = session {
                store.data_mut().run_state().sessions.insert(key, session);
            }
            report
        }
        Provider::Host(host) => {
            let (result, elapsed) = host.call(ctx, args, budget.deadline, &limits).await;
            let error = |kind| CallError {
                plugin: id.clone(),
                method: method.clone(),
                kind,
            };
            CallReport {
                result: result.map_err(error),
                events: Vec::new(),
                fuel_used: 0,
                elapsed,
            }
        }
    };
    let error = report.result.as_ref().err().map(|e| &e.kind);
    trace::call_ended(span, error, report.fuel_used);
    if metered.is_some() {
        store.set_fuel(fuel_left.saturating_sub(report.fuel_used))?;
    }

    let state = store.data_mut().run_state();
    // A call that ran into the run's own fuel or time is dropped
    // unfinished: it tells nothing of the method's health.
    let run_bound = matches!(
        &report.result,
        Err(CallError { kind: CallErrorKind::LimitExceeded { limit, .. }, .. })
            if (*limit == LimitKind::Fuel && run_fuel_bound)
                || (*limit == LimitKind::Time && run_time_bound)
    );
    let tripped = if run_bound {
        None
    } else {
        state.controls.finish(permit, &report.result)
    };
    let call = Event::Call {
        plugin: id.clone(),
        method: method.clone(),
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
        plugin: id.clone(),
        event,
    });
    let tripped = tripped.map(|event| Event::Control {
        plugin: id.clone(),
        method: method.clone(),
        event,
    });
    for event in events.chain([call]).chain(tripped) {
        record(state, &id, &method, event)?;
    }
    match report.result {
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
            CallErrorKind::LimitExceeded {
                limit: limit @ (LimitKind::Fuel | LimitKind::Time),
                message,
            } if (limit == LimitKind::Fuel && run_fuel_bound)
                || (limit == LimitKind::Time && run_time_bound) =>
            {
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
    let call = Event::Call {
        plugin: id.clone(),
        method: method.clone(),
        kind,
        ms: 0.0,
        fuel: 0,
        ok: false,
        summary: cut(refused.kind.to_string(), 200),
    };
    record(state, &id, &method, call)?;
    Ok(Err(to_wit_error(refused.kind)))
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
