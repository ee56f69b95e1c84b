//! Execution controls on method calls, as the operator's policy sets them
//! per plugin and per method: rate limits, circuit breakers, cost budgets
//! and approval of flagged methods. A [`Host`](crate::Host) keeps their
//! state for its life, and counters per method an exporter can read
//! ([`Host::controls_snapshot`](crate::Host::controls_snapshot)).
//!
//! A call is admitted before it runs, whoever provides it (a plugin, a
//! host method, a tool source) and whether a run makes it or not: one path,
//! `RunControls::admit`, in this order: the rate limit, the breaker, the
//! budgets (the call's cost reserved), then the approver for a flagged
//! method (last, so no one is asked about a call that would be refused
//! anyway). Its outcome is then recorded (`RunControls::finish`): a
//! failure counts towards the breaker and gives the reserved cost back.
//! The state of a method lives in one entry found under two read locks;
//! each control takes one uncontended mutex, so a call with every control
//! on adds well under a microsecond. Hosts that run as replicas keep rate-limit buckets and chat
//! budgets in [`SharedControls`] instead, one round trip each, and the end
//! of an open breaker there too (read at most once a second per breaker).

mod breaker;
mod budget;
mod clock;
mod rate;
mod shared;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use breaker::{Breaker, Ticket};
use budget::ChatBudgets;
use rate::RateLimiter;
use sandwit_contract::control_settings::{from_micros, to_micros};
use sandwit_contract::error::CallErrorKind;
use sandwit_contract::limits::LimitKind;
use sandwit_contract::policy::Policy;
use sandwit_contract::types::{AgentCtx, ServiceFuture, Value};

pub use breaker::BreakerState;
pub use clock::{Clock, ManualClock, SystemClock};
pub use sandwit_contract::control_settings::{
    Approval, BreakerSettings, Budgets, ControlSettings, Flag, RateScope,
};
pub use shared::{SharedControls, SharedControlsError};

/// A call of a flagged method, for the approver to decide.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    /// The plugin's id (or a host method's provider).
    pub plugin: &'a str,
    /// The method.
    pub method: &'a str,
    /// Its flags that the policy requires approval for.
    pub flags: &'a [Flag],
    /// Who the call is made for.
    pub ctx: &'a AgentCtx,
    /// The arguments, checked against nothing yet.
    pub args: &'a Value,
}

/// Decides whether a call of a method flagged `dangerous` or
/// `requires_auth` may go ahead, when the policy's `[approval]` requires it.
/// With no approver such calls are refused. The answer must come before the
/// call's deadline (the run's time goes on while it waits); a late one is a
/// refusal.
///
/// A closure `Fn(&ApprovalRequest) -> bool` is an approver that answers at
/// once.
pub trait Approver: Send + Sync {
    /// Whether the call `request` describes may go ahead.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ServiceFuture<'a, bool>;
}

impl<F: Fn(&ApprovalRequest<'_>) -> bool + Send + Sync> Approver for F {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ServiceFuture<'a, bool> {
        let approved = self(request);
        Box::pin(async move { approved })
    }
}

/// Which budget a call would have gone past.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// The run's (`budgets.per_run`).
    Run,
    /// The chat's (`budgets.per_chat`).
    Chat,
}

/// What an execution control did about a call: recorded as an
/// [`Event::Control`](crate::Event::Control) of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "control", rename_all = "snake_case")]
pub enum ControlEvent {
    /// Refused: the rate limit's bucket was empty.
    RateLimited {
        /// Calls a minute allowed.
        per_minute: u32,
        /// Who shares the bucket.
        scope: RateScope,
        /// Milliseconds until the next call would be allowed.
        retry_after_ms: u64,
    },
    /// Refused at once: the method's circuit breaker is open (or half-open
    /// with its probe call in flight).
    BreakerOpen {
        /// Milliseconds until a probe call is let through, if known.
        retry_after_ms: Option<u64>,
    },
    /// This call's failure opened the breaker.
    BreakerTripped {
        /// What opened it.
        reason: String,
        /// Seconds it stays open.
        recovery_s: u64,
    },
    /// Refused: the call's cost would go past a budget.
    BudgetExceeded {
        /// Which budget.
        budget: BudgetScope,
        /// The budget.
        limit: f64,
        /// What was spent already.
        spent: f64,
        /// What the call costs.
        cost: f64,
    },
    /// Refused: the method's flags need approval and none was given.
    ApprovalRefused {
        /// The flags.
        flags: Vec<Flag>,
        /// Why: no approver, the approver said no, or it did not answer in
        /// time.
        reason: String,
    },
    /// The approver approved a call of a flagged method.
    Approved {
        /// The flags.
        flags: Vec<Flag>,
    },
    /// The call paused the run for a person's answer (the policy's
    /// `pause_for`, or the method's `pause`).
    Paused,
    /// A person answered the call the run paused at: `approve`, `deny` or
    /// `result`.
    Resumed {
        /// The answer's kind.
        answer: String,
    },
    /// Refused: a control's state is shared with other hosts
    /// ([`SharedControls`]) and could not be reached.
    SharedStateUnreachable {
        /// What failed.
        message: String,
    },
}

impl ControlEvent {
    /// The event's text bytes, as the run's event caps count them.
    pub(crate) fn text_bytes(&self) -> usize {
        match self {
            ControlEvent::BreakerTripped { reason, .. }
            | ControlEvent::ApprovalRefused { reason, .. } => reason.len(),
            ControlEvent::SharedStateUnreachable { message } => message.len(),
            _ => 0,
        }
    }

    /// Records the decision in the trace ([`crate::trace::control`]), for
    /// a call of `plugin`'s `method`.
    pub(crate) fn trace(&self, plugin: &str, method: &str) {
        let (control, decision) = match self {
            ControlEvent::RateLimited { .. } => ("rate_limit", "rate_limited"),
            ControlEvent::BreakerOpen { .. } => ("breaker", "breaker_open"),
            ControlEvent::BreakerTripped { .. } => ("breaker", "breaker_tripped"),
            ControlEvent::BudgetExceeded { .. } => ("budget", "budget_exceeded"),
            ControlEvent::ApprovalRefused { .. } => ("approval", "refused"),
            ControlEvent::Approved { .. } => ("approval", "approved"),
            ControlEvent::Paused => ("approval", "paused"),
            ControlEvent::Resumed { .. } => ("approval", "resumed"),
            ControlEvent::SharedStateUnreachable { .. } => ("shared_state", "unreachable"),
        };
        crate::trace::control(plugin, method, control, decision);
    }
}

/// A call refused by a control: the error the caller gets, and the event.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) kind: CallErrorKind,
    pub(crate) event: ControlEvent,
}

/// The execution controls of a host: the policy's settings, resolved per
/// method on its first call, and their state.
pub(crate) struct Controls {
    clock: Arc<dyn Clock>,
    policy: Policy,
    approver: Option<Arc<dyn Approver>>,
    run_budget: Option<u64>,
    chats: Option<Arc<ChatBudgets>>,
    /// Where rate-limit buckets live when hosts share them.
    shared: Option<Arc<dyn SharedControls>>,
    /// Whether the policy pauses any call ([`Policy::pauses_any`]).
    pauses_any: bool,
    /// By namespace and plugin: what a plugin's chats share (a plugin- or
    /// method-wide rate limit's bucket, a breaker) is kept per namespace
    /// ([`AgentCtx::namespace`]), so one tenant cannot spend or trip
    /// another's. Namespaces come from the embedder, never from a plugin
    /// or the code run, so the map grows with them alone.
    plugins: RwLock<PluginEntries>,
}

/// The plugins' entries, by namespace and plugin id: looked up by `&str`
/// without allocating (every call looks one up), the keys made once, with
/// the entry.
#[derive(Default)]
struct PluginEntries {
    /// Calls without a namespace.
    unscoped: HashMap<String, Arc<PluginEntry>>,
    by_namespace: HashMap<String, HashMap<String, Arc<PluginEntry>>>,
}

impl PluginEntries {
    fn get(&self, namespace: Option<&str>, plugin: &str) -> Option<&Arc<PluginEntry>> {
        match namespace {
            None => self.unscoped.get(plugin),
            Some(ns) => self.by_namespace.get(ns)?.get(plugin),
        }
    }

    /// The entry of `plugin` in `namespace`, made by `make` if it has none.
    fn get_or_insert(
        &mut self,
        namespace: Option<&str>,
        plugin: &str,
        make: impl FnOnce() -> PluginEntry,
    ) -> Arc<PluginEntry> {
        let by_id = match namespace {
            None => &mut self.unscoped,
            Some(ns) => self.by_namespace.entry(ns.to_string()).or_default(),
        };
        by_id
            .entry(plugin.to_string())
            .or_insert_with(|| Arc::new(make()))
            .clone()
    }

    /// Every entry with its namespace and plugin id.
    fn iter(&self) -> impl Iterator<Item = (Option<&String>, &String, &Arc<PluginEntry>)> {
        let unscoped = self.unscoped.iter().map(|(id, e)| (None, id, e));
        let scoped = self
            .by_namespace
            .iter()
            .flat_map(|(ns, by_id)| by_id.iter().map(move |(id, e)| (Some(ns), id, e)));
        unscoped.chain(scoped)
    }
}

/// A plugin's controls: those its `controls` set (shared by the methods
/// that do not set their own) and each method's entry.
struct PluginEntry {
    rate: Option<Arc<RateLimiter>>,
    breaker: Option<Arc<Breaker>>,
    methods: RwLock<HashMap<String, Arc<MethodEntry>>>,
}

/// One method's controls and counters.
struct MethodEntry {
    rate: Option<Arc<RateLimiter>>,
    breaker: Option<Arc<Breaker>>,
    /// Millionths.
    cost: u64,
    /// Its flags that need approval.
    approval: Vec<Flag>,
    /// Whether a call of it pauses the run (`pause`, or a flag of
    /// `[approval] pause_for`).
    pauses: bool,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    rate_limited: AtomicU64,
    breaker_refused: AtomicU64,
    budget_refused: AtomicU64,
    approvals_granted: AtomicU64,
    approvals_refused: AtomicU64,
    cost: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A call the controls let through; give it back with
/// [`Controls::finish`]. Dropped unfinished (the call's future was
/// dropped), it gives back its reservation and its probe.
pub(crate) struct Permit {
    entry: Arc<MethodEntry>,
    /// The chat whose budget holds a reservation of the call's cost.
    chat: Option<(Arc<ChatBudgets>, String)>,
    /// The call's cost, in millionths.
    cost: u64,
    ticket: Option<Ticket>,
    finished: bool,
}

/// A run's share of the controls: its approver and what it has spent.
/// Every call is admitted through one ([`RunControls::admit`]): a call
/// outside a run has one of its own.
#[derive(Default)]
pub(crate) struct RunControls {
    /// None only for an interpreter being prepared, which calls no method.
    controls: Option<Arc<Controls>>,
    approver: Option<Arc<dyn Approver>>,
    /// What the run's calls have cost, in millionths; none for a call
    /// outside a run, which no run budget bounds.
    spent: Option<u64>,
}

/// A call on its way through the admission's steps: what each reads.
struct Asked<'a> {
    plugin: &'a str,
    method: &'a str,
    ctx: &'a AgentCtx,
    entry: Arc<MethodEntry>,
    /// When it was asked for, by the controls' clock.
    now: Duration,
}

impl Asked<'_> {
    /// The refusal of the call because its `control`'s shared state could
    /// not be reached ([`unreachable_state`]).
    fn unreachable(&self, control: &str, e: &SharedControlsError) -> Refused {
        unreachable_state(&self.entry.counters, self.plugin, self.method, control, e)
    }
}

impl Controls {
    /// The controls `policy` sets, reading `clock`, asking `approver`,
    /// keeping rate limits and chat budgets in `shared` if given.
    pub(crate) fn new(
        policy: &Policy,
        clock: Arc<dyn Clock>,
        approver: Option<Arc<dyn Approver>>,
        shared: Option<Arc<dyn SharedControls>>,
    ) -> Self {
        Controls {
            clock,
            policy: policy.clone(),
            approver,
            run_budget: policy.budgets.per_run.map(to_micros),
            chats: (policy.budgets.per_chat)
                .map(|budget| Arc::new(ChatBudgets::new(to_micros(budget), shared.clone()))),
            shared,
            pauses_any: policy.pauses_any(),
            plugins: RwLock::new(PluginEntries::default()),
        }
    }

    /// A call of `plugin`'s `method` (which must exist: entries are made
    /// for the methods called) for `ctx` on its way in, counted.
    fn asked<'a>(&self, plugin: &'a str, method: &'a str, ctx: &'a AgentCtx) -> Asked<'a> {
        let entry = self.entry(ctx.namespace.as_deref(), plugin, method);
        bump(&entry.counters.calls);
        Asked {
            plugin,
            method,
            ctx,
            entry,
            now: self.clock.now(),
        }
    }

    /// The first step of a call's admission: a token from its rate limit's
    /// bucket (this host's, or the one hosts share), if it has one.
    async fn check_rate_limit(&self, asked: &Asked<'_>) -> Result<(), Refused> {
        let Some(rate) = &asked.entry.rate else {
            return Ok(());
        };
        let taken = match &self.shared {
            None => rate.take(asked.ctx, asked.now),
            Some(shared) => shared
                .take_call(&rate.shared_bucket(asked.ctx), rate.per_minute())
                .await
                .map_err(|e| asked.unreachable("rate limit", &e))?,
        };
        let Err(wait) = taken else {
            return Ok(());
        };
        bump(&asked.entry.counters.rate_limited);
        let per = match rate.scope() {
            RateScope::Plugin => "",
            RateScope::Chat => " per chat",
            RateScope::User => " per user",
        };
        Err(Refused {
            kind: CallErrorKind::LimitExceeded {
                limit: LimitKind::Rate,
                message: format!(
                    "at most {} calls a minute{per}; the next is allowed in {:.1} s",
                    rate.per_minute(),
                    wait.as_secs_f64()
                ),
            },
            event: ControlEvent::RateLimited {
                per_minute: rate.per_minute(),
                scope: rate.scope(),
                retry_after_ms: millis(wait),
            },
        })
    }

    /// The second step: the method's circuit breaker, if it has one, lets
    /// the call through (closed, or half-open and this the probe; an open
    /// one of another host sharing it refuses too). Its ticket goes into
    /// `permit`.
    async fn check_breaker(&self, asked: &Asked<'_>, permit: &mut Permit) -> Result<(), Refused> {
        let Some(breaker) = &asked.entry.breaker else {
            return Ok(());
        };
        let (counters, now) = (&asked.entry.counters, asked.now);
        if let Some(shared) = &self.shared {
            let open_until = match breaker.shared_view(now) {
                Some(open_until) => open_until,
                None => {
                    let open_for = shared
                        .breaker_open_for(breaker.name())
                        .await
                        .map_err(|e| asked.unreachable("breaker", &e))?;
                    breaker.remember_shared(now, open_for)
                }
            };
            if let Some(until) = open_until.filter(|until| *until > now) {
                bump(&counters.breaker_refused);
                return Err(breaker_refusal(breaker::Refusal::Open(until - now)));
            }
        }
        match breaker.admit(now) {
            Ok(ticket) => {
                permit.ticket = Some(ticket);
                Ok(())
            }
            Err(refusal) => {
                bump(&counters.breaker_refused);
                Err(breaker_refusal(refusal))
            }
        }
    }

    /// A call outside a run (`Plugin::call`, `Host::call`) of `provider`'s
    /// `method`: admitted for `ctx` by `deadline` as a run's call is
    /// ([`RunControls::admit`], with no run budget and the host's approver;
    /// refused: the refusal, and `call` is not made), made with `args`, and
    /// finished with its result. A breaker it trips is logged: there is no
    /// run to record it in. Each control's decision is traced.
    pub(crate) async fn call_outside_run<R: CallAnswer>(
        self: &Arc<Self>,
        provider: &str,
        method: &str,
        ctx: &AgentCtx,
        args: Value,
        deadline: Instant,
        call: impl AsyncFnOnce(Value) -> R,
    ) -> Result<R, Refused> {
        let mut controls = RunControls::outside_run(self.clone());
        let admitted = controls.admit(provider, method, ctx, &args, deadline).await;
        let (permit, approved) = admitted.inspect_err(|r| r.event.trace(provider, method))?;
        if let Some(approved) = approved {
            approved.trace(provider, method);
        }
        let answer = call(args).await;
        if let Some(tripped) = controls.finish(permit, answer.result()) {
            tripped.trace(provider, method);
            tracing::warn!(provider, method, "{tripped}");
        }
        Ok(answer)
    }

    /// Records the outcome of a call `permit` let through: a success is
    /// charged its cost, a failure gets its cost back, and a failure of the
    /// method or its plugin (not the caller's) counts towards the breaker.
    /// Returns the cost to give back to the run's spending, and the event
    /// if the call opened the breaker.
    fn finish<T>(
        &self,
        mut permit: Permit,
        result: &Result<T, crate::CallError>,
    ) -> (u64, Option<ControlEvent>) {
        permit.finished = true;
        let entry = permit.entry.clone();
        let failed = result.as_ref().err().is_some_and(|e| e.kind.is_failure());
        if result.is_ok() {
            bump(&entry.counters.succeeded);
            entry
                .counters
                .cost
                .fetch_add(permit.cost, Ordering::Relaxed);
        } else {
            bump(&entry.counters.failed);
        }
        let mut event = None;
        if let (Some(breaker), Some(ticket)) = (&entry.breaker, permit.ticket.take()) {
            let tripped = match result {
                // A call refused for the caller's fault tells nothing of the
                // method's health: a probe is given back.
                Err(_) if !failed => {
                    breaker.release(ticket);
                    None
                }
                _ => breaker.record(ticket, failed, self.clock.now()),
            };
            if tripped.is_some()
                && let Some(shared) = &self.shared
            {
                let recovery = Duration::from_secs(breaker.settings().recovery_s);
                tell_others(shared, breaker.name(), recovery);
            }
            event = tripped.map(|reason| ControlEvent::BreakerTripped {
                reason,
                recovery_s: breaker.settings().recovery_s,
            });
        }
        let mut refund = 0;
        if result.is_err() {
            permit.refund_chat();
            refund = permit.cost;
        }
        (refund, event)
    }

    /// The counters and states of every method called so far.
    pub(crate) fn snapshot(&self) -> ControlsSnapshot {
        let now = self.clock.now();
        let plugins = self.plugins.read().unwrap_or_else(|e| e.into_inner());
        let mut methods = Vec::new();
        for (namespace, plugin, entry) in plugins.iter() {
            let entries = entry.methods.read().unwrap_or_else(|e| e.into_inner());
            for (method, entry) in entries.iter() {
                let c = &entry.counters;
                let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
                methods.push(MethodStats {
                    namespace: namespace.cloned(),
                    plugin: plugin.clone(),
                    method: method.clone(),
                    calls: read(&c.calls),
                    succeeded: read(&c.succeeded),
                    failed: read(&c.failed),
                    rate_limited: read(&c.rate_limited),
                    breaker: entry.breaker.as_ref().map(|b| BreakerStats {
                        state: b.state(now),
                        trips: b.trips(),
                    }),
                    breaker_refused: read(&c.breaker_refused),
                    budget_refused: read(&c.budget_refused),
                    approvals_granted: read(&c.approvals_granted),
                    approvals_refused: read(&c.approvals_refused),
                    cost: from_micros(read(&c.cost)),
                });
            }
        }
        methods.sort_by(|a, b| {
            (&a.plugin, &a.method, &a.namespace).cmp(&(&b.plugin, &b.method, &b.namespace))
        });
        ControlsSnapshot { methods }
    }

    /// What `chat` has spent of its budget.
    pub(crate) async fn chat_spent(&self, chat: &str) -> Result<f64, SharedControlsError> {
        match &self.chats {
            Some(chats) => Ok(from_micros(chats.spent(chat).await?)),
            None => Ok(0.0),
        }
    }

    /// The entry of `plugin`'s `method` in `namespace`, made on its first
    /// call there.
    fn entry(&self, namespace: Option<&str>, plugin: &str, method: &str) -> Arc<MethodEntry> {
        let plugin_entry = {
            let plugins = self.plugins.read().unwrap_or_else(|e| e.into_inner());
            plugins.get(namespace, plugin).cloned()
        };
        let plugin_entry = plugin_entry.unwrap_or_else(|| {
            self.plugins
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(namespace, plugin, || self.plugin_entry(namespace, plugin))
        });
        if let Some(entry) = plugin_entry
            .methods
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(method)
        {
            return entry.clone();
        }
        let mut methods = plugin_entry
            .methods
            .write()
            .unwrap_or_else(|e| e.into_inner());
        methods
            .entry(method.to_string())
            .or_insert_with(|| {
                Arc::new(self.method_entry(&plugin_entry, namespace, plugin, method))
            })
            .clone()
    }

    fn plugin_entry(&self, namespace: Option<&str>, plugin: &str) -> PluginEntry {
        let settings = self.policy.controls_of(plugin).map(|(c, _)| c);
        let settings = settings.cloned().unwrap_or_default();
        PluginEntry {
            rate: rate_limiter(&settings, namespace, plugin, ""),
            breaker: (settings.breaker)
                .map(|b| Arc::new(Breaker::new(b, control_name(namespace, plugin, "")))),
            methods: RwLock::new(HashMap::new()),
        }
    }

    fn method_entry(
        &self,
        shared: &PluginEntry,
        namespace: Option<&str>,
        plugin: &str,
        method: &str,
    ) -> MethodEntry {
        let policy = self.policy.controls_of(plugin);
        let plugin_settings = policy.map(|(c, _)| c.clone()).unwrap_or_default();
        let own = policy
            .and_then(|(_, methods)| methods.get(method))
            .cloned()
            .unwrap_or_default();
        let settings = plugin_settings.overridden_by(&own);
        // A limit or breaker the method sets is its own; otherwise it shares
        // its plugin's.
        let rate = if own.rate_limit.is_some() || own.rate_limit_scope.is_some() {
            rate_limiter(&settings, namespace, plugin, method)
        } else {
            shared.rate.clone()
        };
        let breaker = match own.breaker {
            Some(b) => Some(Arc::new(Breaker::new(
                b,
                control_name(namespace, plugin, method),
            ))),
            None => shared.breaker.clone(),
        };
        let approval = &self.policy.approval;
        let pauses = settings.pause == Some(true)
            || settings.flags().any(|f| approval.pause_for.contains(&f));
        MethodEntry {
            rate,
            breaker,
            cost: settings.cost_micros(),
            approval: (settings.flags())
                .filter(|f| approval.require_for.contains(f))
                .collect(),
            pauses,
            counters: Counters::default(),
        }
    }
}

/// The rate limit `settings` set, for `plugin`'s `method` in `namespace`
/// (`method` empty: the plugin's, shared by its methods).
fn rate_limiter(
    settings: &ControlSettings,
    namespace: Option<&str>,
    plugin: &str,
    method: &str,
) -> Option<Arc<RateLimiter>> {
    let per_minute = settings.rate_limit?;
    let scope = settings.rate_limit_scope.unwrap_or_default();
    let name = control_name(namespace, plugin, method);
    Some(Arc::new(RateLimiter::new(per_minute, scope, name)))
}

/// What names a control of `plugin`'s `method` in `namespace` (`method`
/// empty: the plugin's, shared by its methods) among every host's that
/// share controls.
fn control_name(namespace: Option<&str>, plugin: &str, method: &str) -> String {
    // A namespace is told apart from none: `None` is not `Some("")`.
    let namespace = namespace.map_or_else(String::new, |ns| format!("={ns}"));
    format!("{namespace}\u{1f}{plugin}\u{1f}{method}")
}

/// The refusal of a call by its breaker (this host's, or another's it
/// obeys).
fn breaker_refusal(refusal: breaker::Refusal) -> Refused {
    let (message, retry) = match refusal {
        breaker::Refusal::Open(wait) => (
            format!(
                "its circuit breaker is open after repeated failures; a call is tried again in \
                 {:.1} s",
                wait.as_secs_f64()
            ),
            Some(millis(wait)),
        ),
        breaker::Refusal::Probing => (
            "its circuit breaker is half-open and a probe call is in flight; try again shortly"
                .to_string(),
            None,
        ),
    };
    Refused {
        kind: CallErrorKind::Unavailable { message },
        event: ControlEvent::BreakerOpen {
            retry_after_ms: retry,
        },
    }
}

/// Tells the hosts sharing `shared` that the breaker `name` opened for
/// `recovery`, on a task of its own (the call's outcome is not held up by
/// it); if that fails, the others go on counting their own failures.
fn tell_others(shared: &Arc<dyn SharedControls>, name: &str, recovery: Duration) {
    let (shared, name) = (shared.clone(), name.to_string());
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            if let Err(e) = shared.open_breaker(&name, recovery).await {
                tracing::warn!("telling the other hosts that a breaker opened failed: {e}");
            }
        });
    }
}

/// The refusal of a call whose controls could not reach their shared state:
/// closed, as a limit that cannot be checked is not known to allow it.
fn unreachable_state(
    counters: &Counters,
    plugin: &str,
    method: &str,
    control: &str,
    e: &SharedControlsError,
) -> Refused {
    bump(&counters.failed);
    let message = format!(
        "plugin `{plugin}`, method `{method}`: its {control}'s shared state could not be \
         reached, so the call is refused: {e}"
    );
    Refused {
        kind: CallErrorKind::Unavailable {
            message: message.clone(),
        },
        event: ControlEvent::SharedStateUnreachable { message },
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Permit {
    fn refund_chat(&mut self) {
        if let Some((chats, chat)) = self.chat.take() {
            chats.refund(&chat, self.cost);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.refund_chat();
        if let (Some(breaker), Some(ticket)) = (&self.entry.breaker, self.ticket.take()) {
            breaker.release(ticket);
        }
    }
}

impl RunControls {
    /// A run's share of `controls`, asking `approver` (else the host's).
    pub(crate) fn new(controls: Arc<Controls>, approver: Option<Arc<dyn Approver>>) -> Self {
        RunControls {
            controls: Some(controls),
            approver,
            spent: Some(0),
        }
    }

    /// The share of `controls` of one call outside a run: no run budget
    /// bounds it, and the host's approver decides.
    fn outside_run(controls: Arc<Controls>) -> Self {
        RunControls {
            controls: Some(controls),
            approver: None,
            spent: None,
        }
    }

    /// What the run's calls have cost.
    pub(crate) fn spent(&self) -> f64 {
        from_micros(self.spent.unwrap_or(0))
    }

    /// What the run's calls have cost, in millionths.
    pub(crate) fn spent_micros(&self) -> u64 {
        self.spent.unwrap_or(0)
    }

    /// Has the run's calls cost `micros` so far: a resumed run's budget
    /// goes on from where its pause left it.
    pub(crate) fn resume_spent(&mut self, micros: u64) {
        if let Some(spent) = &mut self.spent {
            *spent = micros;
        }
    }

    /// Whether a call of any method may pause a run (the policy's
    /// [`Policy::pauses_any`]).
    pub(crate) fn pauses_any(&self) -> bool {
        self.controls.as_ref().is_some_and(|c| c.pauses_any)
    }

    /// Whether a call of `plugin`'s `method` for `ctx` pauses the run.
    pub(crate) fn pauses(&self, plugin: &str, method: &str, ctx: &AgentCtx) -> bool {
        self.controls.as_ref().is_some_and(|c| {
            c.pauses_any && c.entry(ctx.namespace.as_deref(), plugin, method).pauses
        })
    }

    /// Admits a call of `plugin`'s `method` (which must exist: entries are
    /// made for the methods called) for `ctx`, or refuses it: every call
    /// comes in here, a run's (its plugins', host methods', tool sources')
    /// and one made outside a run ([`Controls::call_outside_run`]). The
    /// steps, in order: [`Controls::check_rate_limit`],
    /// [`Controls::check_breaker`], [`RunControls::check_budgets`] and
    /// [`RunControls::check_approval`], which must have its answer by
    /// `deadline`. The permit (none without controls: an interpreter being
    /// prepared) goes back to [`RunControls::finish`] with the call's
    /// result; the event says the call was approved.
    pub(crate) async fn admit(
        &mut self,
        plugin: &str,
        method: &str,
        ctx: &AgentCtx,
        args: &Value,
        deadline: Instant,
    ) -> Result<(Option<Permit>, Option<ControlEvent>), Refused> {
        let Some(controls) = &self.controls else {
            return Ok((None, None));
        };
        let asked = controls.asked(plugin, method, ctx);
        controls.check_rate_limit(&asked).await?;
        let mut permit = Permit {
            entry: asked.entry.clone(),
            chat: None,
            cost: asked.entry.cost,
            ticket: None,
            finished: false,
        };
        controls.check_breaker(&asked, &mut permit).await?;
        self.check_budgets(controls, &asked, &mut permit).await?;
        let approved = self
            .check_approval(controls, &asked, args, deadline)
            .await?;
        // A run makes one call at a time: what it spends is added once the
        // call is admitted, and taken back if the call fails.
        if let Some(spent) = &mut self.spent {
            *spent += permit.cost;
        }
        Ok((Some(permit), approved))
    }

    /// The third step: the call's cost fits in what is left of the run's
    /// budget, and is reserved in the chat's (given back if the call
    /// fails, or is dropped unfinished: `permit` holds the reservation).
    async fn check_budgets(
        &self,
        controls: &Controls,
        asked: &Asked<'_>,
        permit: &mut Permit,
    ) -> Result<(), Refused> {
        let cost = permit.cost;
        if cost == 0 {
            return Ok(());
        }
        let over = |budget, limit: u64, spent: u64| {
            bump(&asked.entry.counters.budget_refused);
            let whose = match budget {
                BudgetScope::Run => "the run's",
                BudgetScope::Chat => "the chat's",
            };
            Refused {
                kind: CallErrorKind::LimitExceeded {
                    limit: LimitKind::Budget,
                    message: format!(
                        "the call costs {}, and {whose} budget of {} has {} left",
                        from_micros(cost),
                        from_micros(limit),
                        from_micros(limit.saturating_sub(spent))
                    ),
                },
                event: ControlEvent::BudgetExceeded {
                    budget,
                    limit: from_micros(limit),
                    spent: from_micros(spent),
                    cost: from_micros(cost),
                },
            }
        };
        if let (Some(limit), Some(spent)) = (controls.run_budget, self.spent)
            && spent + cost > limit
        {
            return Err(over(BudgetScope::Run, limit, spent));
        }
        if let Some(chats) = &controls.chats {
            let chat = &asked.ctx.chat_key;
            chats
                .reserve(chat, cost)
                .await
                .map_err(|e| asked.unreachable("chat budget", &e))?
                .map_err(|spent| over(BudgetScope::Chat, chats.limit(), spent))?;
            permit.chat = Some((chats.clone(), chat.clone()));
        }
        Ok(())
    }

    /// The last step (so that no one is asked about a call refused
    /// anyway): a method whose flags the policy requires approval for is
    /// approved by the run's approver, else the host's, by `deadline`.
    /// `Approved` for a flagged method approved, nothing for another.
    async fn check_approval(
        &self,
        controls: &Controls,
        asked: &Asked<'_>,
        args: &Value,
        deadline: Instant,
    ) -> Result<Option<ControlEvent>, Refused> {
        let Asked {
            plugin,
            method,
            ctx,
            entry,
            ..
        } = asked;
        if entry.approval.is_empty() {
            return Ok(None);
        }
        let flags = entry.approval.clone();
        let request = ApprovalRequest {
            plugin,
            method,
            flags: &flags,
            ctx,
            args,
        };
        let refusal = match self.approver.as_ref().or(controls.approver.as_ref()) {
            None => Some("no approver is set".to_string()),
            Some(approver) => {
                let answer =
                    tokio::time::timeout_at(deadline.into(), approver.approve(&request)).await;
                match answer {
                    Ok(true) => None,
                    Ok(false) => Some("the approver refused it".to_string()),
                    Err(_) => Some("the approver did not answer before the deadline".to_string()),
                }
            }
        };
        let Some(reason) = refusal else {
            bump(&entry.counters.approvals_granted);
            return Ok(Some(ControlEvent::Approved { flags }));
        };
        bump(&entry.counters.approvals_refused);
        let names = flags
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(" and ");
        Err(Refused {
            kind: CallErrorKind::NotApproved {
                flags: flags.clone(),
                message: format!(
                    "plugin `{plugin}`, method `{method}` is {names}, and the policy requires \
                     approval for each call: {reason}"
                ),
            },
            event: ControlEvent::ApprovalRefused { flags, reason },
        })
    }

    /// Records the outcome of a call [`RunControls::admit`] let through
    /// with `permit` ([`Controls::finish`]), giving a failed call's cost
    /// back to the run; the event if the call opened the breaker.
    pub(crate) fn finish<T>(
        &mut self,
        permit: Option<Permit>,
        result: &Result<T, crate::CallError>,
    ) -> Option<ControlEvent> {
        let (controls, permit) = self.controls.as_ref().zip(permit)?;
        let (refund, event) = controls.finish(permit, result);
        if let Some(spent) = &mut self.spent {
            *spent -= refund;
        }
        event
    }
}

/// What a call outside a run answers ([`Controls::call_outside_run`]): the
/// call's result is in it.
pub(crate) trait CallAnswer {
    /// What the call returns when it succeeds.
    type Value;
    /// The call's result.
    fn result(&self) -> &Result<Self::Value, crate::CallError>;
}

impl<T> CallAnswer for Result<T, crate::CallError> {
    type Value = T;
    fn result(&self) -> &Self {
        self
    }
}

/// The execution controls' counters and states, per method called so far:
/// what an exporter reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlsSnapshot {
    /// Per method, by plugin and method name.
    pub methods: Vec<MethodStats>,
}

/// One method's counters in one namespace. `calls` counts every call that
/// reached the controls; each refused one is in one of the refusal
/// counters, each other in `succeeded` or `failed`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MethodStats {
    /// The namespace of the calls ([`AgentCtx::namespace`]); `None` for
    /// calls made without one.
    pub namespace: Option<String>,
    /// The plugin's id (or a host method's provider).
    pub plugin: String,
    /// The method.
    pub method: String,
    /// Calls.
    pub calls: u64,
    /// Calls that returned a result.
    pub succeeded: u64,
    /// Calls that ran (or were refused by the method's checks) and failed,
    /// and calls refused because their controls' shared state could not be
    /// reached.
    pub failed: u64,
    /// Calls refused by the rate limit.
    pub rate_limited: u64,
    /// The breaker guarding the method (its plugin's, or its own), if any.
    pub breaker: Option<BreakerStats>,
    /// Calls refused because the breaker was open.
    pub breaker_refused: u64,
    /// Calls refused because they would have gone past a budget.
    pub budget_refused: u64,
    /// Calls of a flagged method approved.
    pub approvals_granted: u64,
    /// Calls of a flagged method refused approval.
    pub approvals_refused: u64,
    /// What its successful calls cost in all.
    pub cost: f64,
}

/// A breaker's state and how often it opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BreakerStats {
    /// Its state now.
    pub state: BreakerState,
    /// Times it opened.
    pub trips: u64,
}

/// On one line, as `sandwit run` prints it: `rate limited: 60 calls a
/// minute per chat, next in 1.2 s`, `breaker open`, ...
impl std::fmt::Display for ControlEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seconds = |ms: u64| ms as f64 / 1e3;
        match self {
            ControlEvent::RateLimited {
                per_minute,
                scope,
                retry_after_ms,
            } => write!(
                f,
                "rate limited: {per_minute} calls a minute per {}, next in {:.1} s",
                match scope {
                    RateScope::Plugin => "method or plugin",
                    RateScope::Chat => "chat",
                    RateScope::User => "user",
                },
                seconds(*retry_after_ms)
            ),
            ControlEvent::BreakerOpen {
                retry_after_ms: Some(ms),
            } => write!(
                f,
                "breaker open: refused, a call is tried in {:.1} s",
                seconds(*ms)
            ),
            ControlEvent::BreakerOpen {
                retry_after_ms: None,
            } => write!(f, "breaker half-open: refused while a probe call runs"),
            ControlEvent::BreakerTripped { reason, recovery_s } => {
                write!(f, "breaker opened for {recovery_s} s: {reason}")
            }
            ControlEvent::BudgetExceeded {
                budget,
                limit,
                spent,
                cost,
            } => write!(
                f,
                "over budget: the call costs {cost}, the {} budget of {limit} has {spent} spent",
                match budget {
                    BudgetScope::Run => "run's",
                    BudgetScope::Chat => "chat's",
                }
            ),
            ControlEvent::ApprovalRefused { flags, reason } => {
                write!(f, "not approved ({}): {reason}", flag_list(flags))
            }
            ControlEvent::Approved { flags } => write!(f, "approved ({})", flag_list(flags)),
            ControlEvent::Paused => write!(f, "paused for a person's answer"),
            ControlEvent::Resumed { answer } => write!(f, "resumed: {answer}"),
            ControlEvent::SharedStateUnreachable { message } => {
                write!(f, "refused: {message}")
            }
        }
    }
}

fn flag_list(flags: &[Flag]) -> String {
    flags
        .iter()
        .map(Flag::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
