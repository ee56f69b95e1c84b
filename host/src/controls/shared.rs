//! [`SharedControls`]: the state of rate limits and chat budgets kept
//! outside the process, so that hosts running as replicas of one service
//! enforce them together (a method limited to 10 calls a minute gets 10
//! across three replicas, not 30). Without it each host keeps that state in
//! its own memory.
//!
//! Breakers stay per host: each replica opens its own on the failures it
//! sees, which bounds the calls a failing method gets to a breaker's worth
//! per replica.

use std::time::Duration;

use sandwit_contract::types::ServiceFuture;

/// Why the shared state could not be read or written. A call whose controls
/// cannot reach it is refused (closed by default), with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SharedControlsError(pub String);

/// Where rate-limit buckets and chat budgets live when several hosts share
/// them (e.g. [`sandwit-postgres`]'s PostgreSQL tables). Each operation is
/// atomic against every other host's.
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
}
