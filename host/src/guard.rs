//! Running guest code under a budget, and telling a breached limit from a trap.

use std::time::Instant;

use wasmtime::{Engine, Store};

use crate::limits::{LimitKind, StoreLimiter};
use crate::plugin::Budget;

/// Store data whose memory and table caps are enforced by a [`StoreLimiter`].
pub(crate) trait Limited: Send + 'static {
    fn limiter(&self) -> &StoreLimiter;
    fn limiter_mut(&mut self) -> &mut StoreLimiter;
}

/// A store of `data` whose memories and tables grow only as its limiter allows.
pub(crate) fn limited_store<S: Limited>(engine: &Engine, data: S) -> Store<S> {
    let mut store = Store::new(engine, data);
    store.limiter(|s| s.limiter_mut());
    store
}

/// Why guest code stopped without returning.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// It ran into a limit.
    Limit(LimitKind, String),
    /// It trapped, or a host function ended it.
    Trap(wasmtime::Error),
}

/// Runs `call` on `store` with the budget's deadline enforced by a timer,
/// which ends code blocked in the host and running code at its next yield
/// (every [`YIELD_FUEL`](crate::limits::YIELD_FUEL) units of fuel; under
/// [`Metering::DeadlineOnly`](crate::Metering::DeadlineOnly) epoch
/// interruption traps it), and turns traps into the limit they stand for
/// where they stand for one.
pub(crate) async fn guarded<S: Limited, T>(
    store: &mut Store<S>,
    budget: Budget,
    call: impl AsyncFnOnce(&mut Store<S>) -> wasmtime::Result<T>,
) -> Result<T, Stopped> {
    let time_left = budget.deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(time_left, call(store)).await {
        Ok(Ok(value)) => Ok(value),
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
