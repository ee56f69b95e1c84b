//! A loaded plugin and calls of its methods under limits: arguments checked
//! against the declared schemas before the plugin runs, the result's kind and
//! size after.

pub(crate) mod compile;
pub(crate) mod installed;
pub(crate) mod lifecycle;
mod load;
pub(crate) mod shared;
pub(crate) mod spares;
pub(crate) mod state;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmtime::Store;

use crate::bindings::plugin::{SandboxMethod, SandboxMethodPre};
use crate::bindings::wit;
use crate::capabilities::config::PluginConfig;
use crate::capabilities::env::PluginEnv;
use crate::capabilities::events::PluginEvent;
use crate::plugin::shared::PluginHost;
use crate::runtime::cache::CodeSource;
use crate::runtime::guard::{Stopped, apply_budget, fuel_used, guarded, limited_store};
use crate::runtime::limits::Budget;
use sandwit_contract::args::ArgChecker;
use sandwit_contract::capability::Grants;
use sandwit_contract::error::{CallError, CallErrorKind, MAX_MESSAGE_BYTES};
use sandwit_contract::limits::{CallLimits, LimitKind};
use sandwit_contract::manifest::Manifest;
use sandwit_contract::results::{check_kind, check_parts, check_size, parts_bytes, too_large};
use sandwit_contract::text::cut;
use sandwit_contract::types::{AgentCtx, ContentPart, MethodResult, Value};
use state::PluginState;

/// A loaded, checked plugin, ready to call. Cheap to clone.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

struct PluginInner {
    host: Arc<PluginHost>,
    manifest: Manifest,
    env: Arc<PluginEnv>,
    checkers: HashMap<String, ArgChecker>,
    pre: SandboxMethodPre<PluginState>,
    /// The lifecycle export of a 0.2 plugin; `None` for a 0.1 plugin.
    lifecycle: Option<crate::bindings::lifecycle_api::GuestIndices>,
    imports: Vec<String>,
    code_source: CodeSource,
    hash: String,
    /// Instances made ahead of the calls that need a new one.
    spares: spares::Spares<Session>,
}

/// Everything a call produced.
#[derive(Debug)]
pub struct CallReport {
    /// The typed result, or why there is none.
    pub result: Result<MethodResult, CallError>,
    /// What the plugin logged, printed, sent to the chat and was refused, in
    /// order (secrets hidden).
    pub events: Vec<PluginEvent>,
    /// Fuel the call used.
    pub fuel_used: u64,
    /// Wall-clock time the call took.
    pub elapsed: Duration,
}

impl crate::controls::CallAnswer for CallReport {
    type Value = MethodResult;
    fn result(&self) -> &Result<MethodResult, CallError> {
        &self.result
    }
}

impl Plugin {
    /// The checked manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    /// The plugin's id.
    pub fn id(&self) -> &str {
        &self.inner.manifest.id
    }

    /// The component's imports, by name.
    pub fn imports(&self) -> &[String] {
        &self.inner.imports
    }

    /// Where its machine code came from when it was loaded.
    pub fn code_source(&self) -> CodeSource {
        self.inner.code_source
    }

    /// The capabilities it may use: those it requested that the policy
    /// grants.
    pub fn grants(&self) -> &Grants {
        &self.inner.env.grants
    }

    /// The limits its calls run under.
    pub fn limits(&self) -> &CallLimits {
        &self.inner.host.runtime.limits
    }

    /// The SHA-256 of the component, hex-encoded.
    pub fn hash(&self) -> &str {
        &self.inner.hash
    }

    /// Calls `method` with `args` (an object of parameter names to values)
    /// under the host's limits, in a fresh instance.
    pub async fn call(
        &self,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
    ) -> Result<MethodResult, CallError> {
        let budget = Budget::from_limits(&self.inner.host.runtime.limits);
        self.call_within(ctx, method, args, budget).await.result
    }

    /// Like [`Plugin::call`], within a given budget (the rest of a run's), and
    /// reporting logs, fuel and time. The policy's execution controls apply
    /// (rate limit, breaker, the chat's budget, approval by the host's
    /// approver); a refused call reports no events and uses nothing.
    pub async fn call_within(
        &self,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
        budget: Budget,
    ) -> CallReport {
        let controls = &self.inner.host.controls;
        // Controls keep state per method, and the trace names methods:
        // only those that exist.
        let Some(spec) = self.manifest().method(method) else {
            return self.call_in(&mut None, ctx, method, args, budget).await;
        };
        let span = crate::trace::plugin_call(self.id(), method, spec.kind);
        let call = async |args| self.call_in(&mut None, ctx, method, args, budget).await;
        let admitted = controls
            .call_outside_run(self.id(), method, ctx, args, budget.deadline, call)
            .instrument(span.clone())
            .await;
        let report = admitted.unwrap_or_else(|refused| CallReport {
            result: Err(CallError {
                plugin: self.id().to_string(),
                method: method.to_string(),
                kind: refused.kind,
            }),
            events: Vec::new(),
            fuel_used: 0,
            elapsed: Duration::ZERO,
        });
        let error = report.result.as_ref().err().map(|e| &e.kind);
        crate::trace::call_ended(&span, error, report.fuel_used);
        report
    }

    /// Checks `args` against `method`'s parameters' schemas, as a call does
    /// first: what a paused call shows a person is what the call would take.
    pub(crate) fn check_args(&self, method: &str, args: &Value) -> Result<(), CallErrorKind> {
        match self.inner.checkers.get(method) {
            Some(checker) => Ok(checker.check(args)?),
            None => Err(CallErrorKind::UnknownMethod),
        }
    }

    /// Calls `method` in `session`'s instance, or in a new one (left in
    /// `session`) when it has none. The session is emptied when the call
    /// stopped the instance (a trap or a limit).
    pub(crate) async fn call_in(
        &self,
        session: &mut Option<Session>,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
        budget: Budget,
    ) -> CallReport {
        let start = Instant::now();
        let env = &self.inner.env;
        let host = &self.inner.host;
        // The run's instance, else one made ahead (given the plugin's
        // environment): either way the store is the call's from here on.
        let kept = session.take().or_else(|| {
            let mut spare = self.inner.spares.take()?;
            spare
                .store
                .data_mut()
                .hand_over(env.clone(), budget.deadline);
            Some(spare)
        });
        let mut current = match kept {
            Some(mut kept) => {
                kept.store.data_mut().begin_call(ctx, budget.deadline);
                apply_budget(&mut kept.store, budget, host.runtime.metering);
                kept
            }
            None => Session {
                store: new_store(host, env.clone(), Some(ctx.clone()), budget),
                instance: None,
            },
        };
        let mut result = self.invoke(&mut current, ctx, method, args, budget).await;
        let store = &mut current.store;
        let events = store.data_mut().take_events();
        let fuel_used = fuel_used(store, budget.fuel);
        let redactor = &env.config.redactor;
        match &mut result {
            Ok(r) => redactor.redact_result(r),
            // Secrets hidden before the cut, which could leave a part of
            // one.
            Err(kind) => {
                if let Some(m) = kind.message_mut() {
                    *m = redactor.redact_cut(std::mem::take(m), MAX_MESSAGE_BYTES);
                }
            }
        }
        let error = |kind| CallError {
            plugin: self.id().to_string(),
            method: method.to_string(),
            kind,
        };
        if current.instance.is_some() {
            *session = Some(current);
        }
        CallReport {
            result: result.map_err(error),
            events,
            fuel_used,
            elapsed: start.elapsed(),
        }
    }

    /// Instances of the plugin made ahead of the calls that need a new one
    /// (a run's first call of it, a direct call), ready now: see
    /// [`HostBuilder::prepared_plugin_instances`](crate::HostBuilder::prepared_plugin_instances).
    pub fn prepared_instances(&self) -> usize {
        self.inner.spares.ready()
    }

    /// How many calls took an instance made ahead. Only with the
    /// `internals` feature.
    #[cfg(feature = "internals")]
    pub fn prepared_instances_taken(&self) -> usize {
        self.inner.spares.taken()
    }

    /// Whether the plugin wants another instance made ahead.
    pub(crate) fn wants_spare(&self) -> bool {
        self.inner.spares.wanted()
    }

    /// Makes an instance ahead if the plugin wants one more, and has it
    /// describe itself (the host asks a fresh instance the same at load):
    /// most of what a first call costs beyond the later ones is the
    /// plugin's code and data touched for the first time, which `describe`
    /// touches too. That runs in a store with the call limits, no context
    /// and nothing granted (the call that takes the instance gives it
    /// those, `hand_over`), so the plugin can do nothing there but compute
    /// (the WIT asks `describe` to leave nothing behind). Whether one was
    /// made: not when the plugin wants none, the host has no room for it
    /// (its pool full, or its share for spares), or making it failed; a
    /// plugin that fails [`spares::MAX_FAILURES`] times is made no more
    /// spares, its calls instantiate their own and report why.
    pub(crate) async fn prepare_spare(&self) -> bool {
        let inner = &self.inner;
        let Some(making) = inner.spares.start() else {
            return false;
        };
        let (store, made) = described_instance(&inner.host, self.id(), &inner.pre).await;
        match made {
            Ok((instance, _)) => {
                making.fill(Session {
                    store,
                    instance: Some(instance),
                });
                true
            }
            Err(Stopped::Limit(LimitKind::Instances, _)) => false,
            Err(stopped) => {
                let why = stopped_to_error(stopped);
                let failures = making.fail();
                tracing::warn!(
                    plugin = %self.id(),
                    "making an instance ahead of calls failed ({failures} of at most {}): {why}",
                    spares::MAX_FAILURES
                );
                false
            }
        }
    }

    /// Whether `host` loaded this plugin: its grants, configuration and
    /// store are that host's.
    pub(crate) fn loaded_by(&self, host: &Arc<PluginHost>) -> bool {
        Arc::ptr_eq(&self.inner.host, host)
    }

    /// Why a host that did not load this plugin refuses to call it, for a
    /// run's `ForeignPlugin` error and a direct call's denial alike.
    pub(crate) fn foreign_message(&self) -> String {
        format!(
            "plugin `{}` was loaded by another Host: load it with this one (its grants, \
             configuration and store are the host's that loaded it)",
            self.id()
        )
    }

    /// A key that tells this loaded plugin from every other one.
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    async fn invoke(
        &self,
        session: &mut Session,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
        budget: Budget,
    ) -> Result<MethodResult, CallErrorKind> {
        let inner = &self.inner;
        let limits = &inner.host.runtime.limits;
        let spec = inner
            .manifest
            .method(method)
            .ok_or(CallErrorKind::UnknownMethod)?;
        inner.checkers[method].check(&args)?;
        let nodes = args.into_nodes();
        let size = sandwit_value::encoded_size(&nodes);
        check_size("the arguments take", size, limits.max_value_bytes)?;
        let args = crate::bindings::convert::nodes_to_wit(nodes);
        let ctx = wit::AgentCtx::from(ctx);
        let pre = &inner.pre;
        let instance = &mut session.instance;
        let returned = guarded(&mut session.store, budget, async |store| {
            if instance.is_none() {
                *instance = Some(pre.instantiate_async(&mut *store).await?);
            }
            let plugin = instance.as_ref().expect("instantiated above");
            plugin
                .sandwit_plugin_plugin()
                .call_invoke(&mut *store, &ctx, method, &args)
                .await
        })
        .await;
        let returned = match returned {
            Ok(returned) => returned,
            Err(stopped) => {
                // An instance stopped mid-call is not fit to call again.
                session.instance = None;
                let said = session.store.data().last_said();
                return Err(stopped_to_error_said(stopped, said));
            }
        };
        let result = match returned {
            Ok(result) => check_result(result, limits)?,
            Err(e) => return Err(plugin_error(e)),
        };
        check_kind(result.kind(), spec.kind)?;
        Ok(result)
    }
}

/// A store for one plugin instance with the call limits and `budget`
/// applied.
pub(crate) fn new_store(
    host: &PluginHost,
    env: Arc<PluginEnv>,
    ctx: Option<AgentCtx>,
    budget: Budget,
) -> Store<PluginState> {
    let state = state::new(env, ctx, &host.runtime.limits, budget.deadline);
    let mut store = limited_store(&host.runtime.engine, state);
    apply_budget(&mut store, budget, host.runtime.metering);
    store
}

/// One plugin instance and its store, serving the calls of one Python run:
/// instantiated at the run's first call to the plugin and kept for its later
/// calls (each with its own budget, caps and events), dropped with the run or
/// after a call that stopped it.
pub(crate) struct Session {
    store: Store<PluginState>,
    instance: Option<SandboxMethod>,
}

/// `stopped` as a call's error, a trap named by what the plugin said last
/// (`said`): the SDKs log an uncaught Python exception (type, message, the
/// plugin's own frames) or a Rust panic's message at error level before
/// they trap, which says more than the trap; a plugin without them may have
/// printed its panic, which goes beside the trap. The trap itself, with
/// its backtrace, is logged at debug level.
fn stopped_to_error_said(stopped: Stopped, said: state::Said) -> CallErrorKind {
    match (stopped, said) {
        (Stopped::Trap(err), state::Said::Error(said)) => {
            tracing::debug!("the plugin trapped: {err:?}");
            CallErrorKind::Trapped { message: said }
        }
        (Stopped::Trap(err), state::Said::Printed(printed)) => CallErrorKind::Trapped {
            message: format!("{}; it printed last: {printed}", trap_message(&err)),
        },
        (stopped, _) => stopped_to_error(stopped),
    }
}

fn stopped_to_error(stopped: Stopped) -> CallErrorKind {
    match stopped {
        Stopped::Limit(limit, message) => CallErrorKind::LimitExceeded { limit, message },
        // Only a run is cancelled, and its plugin calls end with it (their
        // futures are dropped): no call reports this, but it is named.
        Stopped::Cancelled => CallErrorKind::Failed {
            message: "the call was cancelled".to_string(),
        },
        Stopped::Trap(err) => CallErrorKind::Trapped {
            message: trap_message(&err),
        },
    }
}

/// What a trap says, without wasmtime's backtrace of the guest (logged at
/// debug level instead): the trap and its causes, cut to 2,000 bytes.
pub(crate) fn trap_message(err: &wasmtime::Error) -> String {
    tracing::debug!("trapped: {err:?}");
    let mut text = String::new();
    for link in err.chain().take(5) {
        let link = link.to_string();
        // wasmtime's backtrace is a context whose text ends with it.
        let link = link.split("wasm backtrace:").next().unwrap_or_default();
        let link = link.trim().trim_end_matches(" at").trim_end_matches(':');
        if !link.is_empty() && !text.contains(link) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(link);
        }
    }
    cut(text, 2_000)
}

fn plugin_error(e: wit::CallError) -> CallErrorKind {
    match e {
        wit::CallError::InvalidArguments(message) => CallErrorKind::InvalidArguments { message },
        wit::CallError::UnknownMethod(_) => CallErrorKind::UnknownMethod,
        wit::CallError::Failed(message) | wit::CallError::LimitExceeded(message) => {
            CallErrorKind::Failed { message }
        }
        wit::CallError::Denied(message) => CallErrorKind::Denied { message },
    }
}

fn check_result(
    result: wit::MethodResult,
    limits: &CallLimits,
) -> Result<MethodResult, CallErrorKind> {
    let max = limits.max_value_bytes;
    let result_size = |size: usize| check_size("the result takes", size, max);
    Ok(match result {
        wit::MethodResult::Tool(value) => {
            let value = crate::bindings::convert::value_from_wit(value, &limits.decode_limits())
                .map_err(|e| match e {
                    sandwit_value::DecodeError::TooLarge { bytes, max } => {
                        too_large("the result takes", bytes, max)
                    }
                    other => CallErrorKind::BadResult {
                        message: format!("malformed value: {other}"),
                    },
                })?;
            MethodResult::Tool(value)
        }
        wit::MethodResult::Agent(text) => {
            result_size(text.len())?;
            MethodResult::Agent(text)
        }
        wit::MethodResult::Behavior(text) => {
            result_size(text.len())?;
            MethodResult::Behavior(text)
        }
        wit::MethodResult::MultimodalAgent(parts) => {
            let parts: Vec<ContentPart> = parts.into_iter().map(ContentPart::from).collect();
            result_size(parts_bytes(&parts))?;
            check_parts(&parts)?;
            MethodResult::MultimodalAgent(parts)
        }
    })
}

/// A fresh instance of `plugin`'s `pre` that has described itself, in a
/// store of its own with no context and nothing granted, under the hooks'
/// budget: what loading asks, and what an instance made ahead of calls
/// does first. The store, and the instance with its manifest or how it
/// stopped.
pub(crate) async fn described_instance(
    host: &PluginHost,
    plugin: &str,
    pre: &SandboxMethodPre<state::PluginState>,
) -> (
    Store<state::PluginState>,
    Result<(SandboxMethod, wit::PluginManifest), Stopped>,
) {
    let budget = Budget::for_hooks(&host.runtime.limits);
    let env = PluginEnv::new(
        plugin,
        Grants::default(),
        PluginConfig::default(),
        host.services.clone(),
    );
    let mut store = new_store(host, env, None, budget);
    let described = guarded(&mut store, budget, async |store| {
        let instance: SandboxMethod = pre.instantiate_async(&mut *store).await?;
        let manifest = instance
            .sandwit_plugin_plugin()
            .call_describe(&mut *store)
            .await?;
        Ok((instance, manifest))
    })
    .await;
    (store, described)
}
