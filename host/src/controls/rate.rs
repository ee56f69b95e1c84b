//! Rate limits: token buckets that hold a minute's calls and refill
//! continuously, one for everyone or one per chat or user.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use sandwit_contract::control_settings::RateScope;
use sandwit_contract::types::AgentCtx;

/// The most buckets one limiter keeps for chats or users. Past it, full
/// buckets (which a new bucket equals) are dropped, and if none is full, the
/// one used longest ago: memory stays bounded however many chats call.
pub(crate) const MAX_BUCKETS: usize = 10_000;

/// One rate limit and its buckets.
pub(crate) struct RateLimiter {
    per_minute: u32,
    scope: RateScope,
    /// What names its buckets in [`SharedControls`](super::SharedControls):
    /// the namespace, plugin and method (empty for a plugin-wide limit).
    name: String,
    buckets: Mutex<Buckets>,
}

struct Buckets {
    shared: Bucket,
    keyed: HashMap<String, Bucket>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Duration,
}

impl RateLimiter {
    /// `per_minute` calls a minute, shared as `scope` says; every bucket
    /// starts full. `name` is unique to the limit among a host's.
    pub(crate) fn new(per_minute: u32, scope: RateScope, name: String) -> Self {
        RateLimiter {
            per_minute,
            scope,
            name,
            buckets: Mutex::new(Buckets {
                shared: Bucket {
                    tokens: f64::from(per_minute),
                    at: Duration::ZERO,
                },
                keyed: HashMap::new(),
            }),
        }
    }

    /// The calls a minute.
    pub(crate) fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Who shares a bucket.
    pub(crate) fn scope(&self) -> RateScope {
        self.scope
    }

    /// Which of its buckets a call for `ctx` takes from: none of its own
    /// for a limit shared by all, else the chat's or the user's (a call
    /// without a user counts as its chat's).
    fn key(&self, ctx: &AgentCtx) -> Option<String> {
        match (self.scope, &ctx.user_id) {
            (RateScope::Plugin, _) => None,
            (RateScope::User, Some(user)) => Some(format!("user:{user}")),
            (RateScope::Chat | RateScope::User, _) => Some(format!("chat:{}", ctx.chat_key)),
        }
    }

    /// The name of `ctx`'s bucket among every host's that share them.
    pub(crate) fn shared_bucket(&self, ctx: &AgentCtx) -> String {
        let key = self.key(ctx).unwrap_or_default();
        format!("{}\u{1f}{key}", self.name)
    }

    /// Takes a call's token from `ctx`'s bucket at `now`, or says how long
    /// until there is one.
    pub(crate) fn take(&self, ctx: &AgentCtx, now: Duration) -> Result<(), Duration> {
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = match self.key(ctx) {
            None => &mut buckets.shared,
            Some(key) => buckets.keyed_for(key, capacity, now),
        };
        bucket.refill(capacity, per_second, now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
        }
    }
}

impl Bucket {
    fn refill(&mut self, capacity: f64, per_second: f64, now: Duration) {
        let elapsed = now.saturating_sub(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_second).min(capacity);
        self.at = self.at.max(now);
    }
}

impl Buckets {
    /// The bucket for `key`, a full one if it has none, making room first
    /// if there are [`MAX_BUCKETS`].
    fn keyed_for(&mut self, key: String, capacity: f64, now: Duration) -> &mut Bucket {
        if !self.keyed.contains_key(&key) && self.keyed.len() >= MAX_BUCKETS {
            let per_second = capacity / 60.0;
            self.keyed.retain(|_, bucket| {
                let mut bucket = *bucket;
                bucket.refill(capacity, per_second, now);
                bucket.tokens < capacity
            });
            if self.keyed.len() >= MAX_BUCKETS
                && let Some(oldest) = self
                    .keyed
                    .iter()
                    .min_by_key(|(_, bucket)| bucket.at)
                    .map(|(key, _)| key.clone())
            {
                self.keyed.remove(&oldest);
            }
        }
        self.keyed.entry(key).or_insert(Bucket {
            tokens: capacity,
            at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(chat: &str, user: Option<&str>) -> AgentCtx {
        AgentCtx {
            user_id: user.map(str::to_string),
            ..AgentCtx::new(chat)
        }
    }

    #[test]
    fn a_bucket_holds_a_minutes_calls_and_refills_continuously() {
        let limiter = RateLimiter::new(60, RateScope::Plugin, String::new());
        let a = ctx("a", None);
        let t0 = Duration::from_secs(5);
        for _ in 0..60 {
            limiter.take(&a, t0).unwrap();
        }
        let wait = limiter.take(&a, t0).unwrap_err();
        assert_eq!(wait, Duration::from_secs(1), "one call a second refills");
        // Half a second gives half a token: still none to take.
        let wait = limiter
            .take(&a, t0 + Duration::from_millis(500))
            .unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        limiter.take(&a, t0 + Duration::from_secs(1)).unwrap();
        limiter.take(&a, t0 + Duration::from_secs(1)).unwrap_err();
        // A long pause refills to a minute's calls, not more.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..60 {
            limiter.take(&a, later).unwrap();
        }
        limiter.take(&a, later).unwrap_err();
    }

    #[test]
    fn scopes_share_or_split_buckets() {
        let t = Duration::ZERO;
        let plugin = RateLimiter::new(1, RateScope::Plugin, String::new());
        plugin.take(&ctx("a", None), t).unwrap();
        plugin.take(&ctx("b", None), t).unwrap_err();

        let chat = RateLimiter::new(1, RateScope::Chat, String::new());
        chat.take(&ctx("a", Some("u")), t).unwrap();
        chat.take(&ctx("a", Some("v")), t).unwrap_err();
        chat.take(&ctx("b", Some("u")), t).unwrap();

        let user = RateLimiter::new(1, RateScope::User, String::new());
        user.take(&ctx("a", Some("u")), t).unwrap();
        user.take(&ctx("b", Some("u")), t).unwrap_err();
        user.take(&ctx("a", Some("v")), t).unwrap();
        // No user id: the chat's bucket.
        user.take(&ctx("a", None), t).unwrap();
        user.take(&ctx("a", None), t).unwrap_err();
    }

    #[test]
    fn buckets_stay_bounded_and_full_ones_go_first() {
        let limiter = RateLimiter::new(4, RateScope::Chat, String::new());
        let t = Duration::ZERO;
        // One chat has used its bucket, the others one token each.
        for _ in 0..4 {
            limiter.take(&ctx("busy", None), t).unwrap();
        }
        for i in 0..MAX_BUCKETS - 1 {
            limiter.take(&ctx(&format!("c{i}"), None), t).unwrap();
        }
        // 30 s refill two tokens: the others are full again, `busy` is not.
        let later = t + Duration::from_secs(30);
        limiter.take(&ctx("new", None), later).unwrap();
        let buckets = limiter.buckets.lock().unwrap();
        assert_eq!(buckets.keyed.len(), 2, "the full buckets were dropped");
        assert!(buckets.keyed.contains_key("chat:busy"));
        drop(buckets);
        limiter.take(&ctx("busy", None), later).unwrap();
        limiter.take(&ctx("busy", None), later).unwrap();
        limiter.take(&ctx("busy", None), later).unwrap_err();
    }
}
