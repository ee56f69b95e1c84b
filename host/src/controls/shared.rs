//! [`SharedControls`]: the state of rate limits, chat budgets and open
//! breakers kept outside the process, so that hosts running as replicas of
//! one service enforce them together (a method limited to 10 calls a minute
//! gets 10 across three replicas, not 30). Without it each host keeps that
//! state in its own memory.
//!
//! Breakers count per host (each replica the failures it sees), and tell
//! the others when they open: a breaker one replica opens, every replica
//! obeys within a second.

use std::time::Duration;

use sandwit_contract::types::ServiceFuture;

/// Why the shared state could not be read or written. A call whose controls
/// cannot reach it is refused (closed by default), with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SharedControlsError(pub String);

/// Where rate-limit buckets, chat budgets and open breakers live when
/// several hosts share them (e.g. [`sandwit-postgres`]'s PostgreSQL
/// tables). Each operation is atomic against every other host's.
///
/// [`sandwit-postgres`]: https://docs.rs/sandwit-postgres
pub trait SharedControls: Send + Sync {
    /// Takes one call from the bucket `bucket`, which holds `per_minute`
    /// calls and refills continuously (a minute refills it whole; a bucket
    /// never seen is full). `Ok(Err(wait))`: it is empty, and a call is
    /// allowed after `wait`.
    fn take_call<'a>(
        &'a self,
        bucket: &'a str,
        per_minute: u32,
    ) -> ServiceFuture<'a, Result<Result<(), Duration>, SharedControlsError>>;

    /// Reserves `cost` millionths of `chat`'s budget of `limit`.
    /// `Ok(Err(spent))`: it would go past the budget, of which `spent` is
    /// spent; nothing is reserved.
    fn reserve<'a>(
        &'a self,
        chat: &'a str,
        cost: u64,
        limit: u64,
    ) -> ServiceFuture<'a, Result<Result<(), u64>, SharedControlsError>>;

    /// Gives back `cost` millionths reserved for a call of `chat` that did
    /// not succeed.
    fn refund<'a>(
        &'a self,
        chat: &'a str,
        cost: u64,
    ) -> ServiceFuture<'a, Result<(), SharedControlsError>>;

    /// What `chat` has spent, in millionths.
    fn spent<'a>(&'a self, chat: &'a str) -> ServiceFuture<'a, Result<u64, SharedControlsError>>;

    /// Records that a host opened the breaker `breaker` for `recovery`
    /// from now (a later opening that ends sooner does not shorten it).
    fn open_breaker<'a>(
        &'a self,
        breaker: &'a str,
        recovery: Duration,
    ) -> ServiceFuture<'a, Result<(), SharedControlsError>>;

    /// How long the breaker `breaker` stays open, if a host opened it and
    /// it is still open.
    fn breaker_open_for<'a>(
        &'a self,
        breaker: &'a str,
    ) -> ServiceFuture<'a, Result<Option<Duration>, SharedControlsError>>;
}
