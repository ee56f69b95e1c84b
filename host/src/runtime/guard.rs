//! Running guest code under a budget, and telling a breached limit from a trap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use wasmtime::{CallHook, Engine, Store, StoreContextMut};

use crate::runtime::cancel::Cancel;
use crate::runtime::engine::deadline_ticks;
use crate::runtime::limits::{Budget, Metering, StoreLimiter, YIELD_FUEL};
use sandwit_contract::limits::LimitKind;

/// Store data whose memory and table caps are enforced by a [`StoreLimiter`]
/// and whose host calls are metered by a [`HostMeter`].
pub(crate) trait Limited: Send + 'static {
    fn limiter(&self) -> &StoreLimiter;
    fn limiter_mut(&mut self) -> &mut StoreLimiter;
    fn meter(&mut self) -> &mut HostMeter;
}

/// Fuel a call into the host costs before the bytes it copies: about what
/// the guest would spend on a small function call of its own.
pub(crate) const HOST_CALL_FUEL: u64 = 100;

/// What the host's own functions cost a guest, settled at every crossing
/// from and back to the guest.
///
/// Invariant: a guest cannot stay in or return from a host function past its
/// deadline, nor copy bytes through the host without paying fuel for them.
/// The deadline's timer ([`guarded`]) only fires when the guest yields to
/// the async runtime, which a loop of quick synchronous host calls never
/// does; this meter is what bounds such a loop.
#[derive(Debug)]
pub(crate) struct HostMeter {
    /// When the current call (or run) must have finished.
    pub(crate) deadline: Instant,
    /// Fuel the host functions charged since the last crossing.
    owed: u64,
    /// Fuel charged by the store's WASI streams and HTTP bodies.
    tab: FuelTab,
    /// The run's handle, checked at every crossing: code that calls the
    /// host often (printing in a loop) has its fuel settled there, which
    /// restarts wasmtime's yield interval, so it may never yield to let
    /// [`guarded_until`] see the handle.
    cancel: Option<Cancel>,
}

/// Fuel owed for bytes that cross through host objects living outside the
/// store data (WASI output streams, HTTP request and response bodies): one
/// unit a byte, settled with the meter at the next crossing. Clones share
/// the count.
#[derive(Debug, Clone, Default)]
pub(crate) struct FuelTab(Arc<AtomicU64>);

impl FuelTab {
    /// Charges `bytes` bytes copied.
    pub(crate) fn charge(&self, bytes: usize) {
        self.0.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Whether `other` is this tab (not a copy of its count).
    #[cfg(test)]
    pub(crate) fn same_as(&self, other: &FuelTab) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// What was charged since the last take.
    pub(crate) fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

impl HostMeter {
    pub(crate) fn new(deadline: Instant) -> Self {
        HostMeter {
            deadline,
            owed: 0,
            tab: FuelTab::default(),
            cancel: None,
        }
    }

    /// The tab the store's streams and bodies charge.
    pub(crate) fn tab(&self) -> &FuelTab {
        &self.tab
    }

    /// Charges a host call that copied `bytes` in or out of the guest: one
    /// unit of fuel per byte on top of [`HOST_CALL_FUEL`].
    pub(crate) fn charge(&mut self, bytes: usize) {
        self.owed = self
            .owed
            .saturating_add(HOST_CALL_FUEL)
            .saturating_add(bytes as u64);
    }

    /// Starts a new call with a new deadline, nothing owed and no handle.
    pub(crate) fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        self.owed = 0;
        self.tab.take();
        self.cancel = None;
    }

    /// Ends the guest at its next crossing once `cancel` is cancelled.
    pub(crate) fn watch(&mut self, cancel: Option<Cancel>) {
        self.cancel = cancel;
    }
}

/// A store of `data` whose memories and tables grow only as its limiter
/// allows, and whose every host call checks the deadline and pays its fuel.
pub(crate) fn limited_store<S: Limited>(engine: &Engine, data: S) -> Store<S> {
    let mut store = Store::new(engine, data);
    store.limiter(|s| s.limiter_mut());
    store.call_hook(settle_host_call);
    store
}

/// The call hook of every store: on entering and leaving the host, a passed
/// deadline traps (as an interrupt, reported as the time limit) and the fuel
/// the host functions charged is taken (running out traps as fuel does).
fn settle_host_call<S: Limited>(
    mut cx: StoreContextMut<'_, S>,
    hook: CallHook,
) -> wasmtime::Result<()> {
    if !matches!(hook, CallHook::CallingHost | CallHook::ReturningFromHost) {
        return Ok(());
    }
    let meter = cx.data_mut().meter();
    let owed = std::mem::take(&mut meter.owed).saturating_add(meter.tab.take());
    if Instant::now() >= meter.deadline || meter.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
        return Err(wasmtime::Trap::Interrupt.into());
    }
    if owed > 0
        && let Ok(left) = cx.get_fuel()
    {
        if owed > left {
            cx.set_fuel(0)?;
            return Err(wasmtime::Trap::OutOfFuel.into());
        }
        cx.set_fuel(left - owed)?;
    }
    Ok(())
}

/// Gives a store the budget's fuel, yielding every [`YIELD_FUEL`] units so
/// that [`guarded`]'s timer can end it at the deadline, or an epoch deadline
/// at the deadline, as the host meters them.
///
pub(crate) fn apply_budget<T>(store: &mut Store<T>, budget: Budget, metering: Metering) {
    if metering.fuel() {
        store.set_fuel(budget.fuel).expect("fuel is enabled");
        store
            .fuel_async_yield_interval(Some(YIELD_FUEL))
            .expect("fuel is enabled and the interval is not 0");
    }
    if metering.epochs() {
        let time_left = budget.deadline.saturating_duration_since(Instant::now());
        store.set_epoch_deadline(deadline_ticks(time_left));
        store.epoch_deadline_trap();
    }
}

/// The fuel a store used of `budget` (0 where fuel is not metered).
pub(crate) fn fuel_used<T>(store: &Store<T>, budget: u64) -> u64 {
    store
        .get_fuel()
        .map_or(0, |left| budget.saturating_sub(left))
}

/// Why guest code stopped without returning.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// It ran into a limit.
    Limit(LimitKind, String),
    /// It trapped, or a host function ended it.
    Trap(wasmtime::Error),
    /// Its [`Cancel`] handle was cancelled.
    Cancelled,
}

/// Runs `call` on `store` with the budget's deadline enforced by a timer,
/// which ends code blocked in the host and running code at its next yield
/// (every [`YIELD_FUEL`](crate::runtime::limits::YIELD_FUEL) units of fuel; under
/// [`Metering::DeadlineOnly`](crate::Metering::DeadlineOnly) epoch
/// interruption traps it), and turns traps into the limit they stand for
/// where they stand for one.
pub(crate) async fn guarded<S: Limited, T>(
    store: &mut Store<S>,
    budget: Budget,
    call: impl AsyncFnOnce(&mut Store<S>) -> wasmtime::Result<T>,
) -> Result<T, Stopped> {
    guarded_until(store, budget, None, call).await
}

/// [`guarded`], also ended by `cancel` (the call's future is dropped, as at
/// the deadline).
pub(crate) async fn guarded_until<S: Limited, T>(
    store: &mut Store<S>,
    budget: Budget,
    cancel: Option<&Cancel>,
    call: impl AsyncFnOnce(&mut Store<S>) -> wasmtime::Result<T>,
) -> Result<T, Stopped> {
    if cancel.is_some_and(Cancel::is_cancelled) {
        return Err(Stopped::Cancelled);
    }
    // The deadline as it is: one clock read fewer per call than a duration.
    let timed = tokio::time::timeout_at(budget.deadline.into(), call(store));
    let finished = match cancel {
        // The handle first: a run cancelled while it was running does not
        // get another poll.
        Some(cancel) => tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            finished = timed => Some(finished),
        },
        None => Some(timed.await),
    };
    let Some(finished) = finished else {
        return Err(Stopped::Cancelled);
    };
    match finished {
        Ok(Ok(value)) => Ok(value),
        // The call hook traps a guest whose handle was cancelled.
        Ok(Err(_)) if cancel.is_some_and(Cancel::is_cancelled) => Err(Stopped::Cancelled),
        Ok(Err(err)) => Err(classify(err, store.data().limiter(), budget)),
        Err(_elapsed) => Err(time_exceeded()),
    }
}

fn time_exceeded() -> Stopped {
    Stopped::Limit(
        LimitKind::Time,
        "ran past its wall-clock deadline".to_string(),
    )
}

fn classify(err: wasmtime::Error, limiter: &StoreLimiter, budget: Budget) -> Stopped {
    if let Some(what) = &limiter.hit {
        return Stopped::Limit(LimitKind::Memory, what.clone());
    }
    if let Some(full) = err.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
        return Stopped::Limit(
            LimitKind::Instances,
            format!("could not be instantiated: the host's pool is full ({full})"),
        );
    }
    match err.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => Stopped::Limit(
            LimitKind::Fuel,
            format!("used all of its {} units of fuel", budget.fuel),
        ),
        Some(wasmtime::Trap::Interrupt) => time_exceeded(),
        Some(wasmtime::Trap::StackOverflow) => {
            Stopped::Limit(LimitKind::Memory, "exhausted the call stack".to_string())
        }
        _ => Stopped::Trap(err),
    }
}
