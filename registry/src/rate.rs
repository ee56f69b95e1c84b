//! Rate limits: a token bucket per client address and per token, in memory.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A rate: `per_minute` requests a minute on average, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests a minute, sustained.
    pub per_minute: u32,
    /// Requests at once, after a pause.
    pub burst: u32,
}

/// The most keys (addresses or tokens) tracked: beyond it, the buckets that
/// have refilled are forgotten (they are as good as new), and if that is not
/// enough, all are.
const MAX_KEYS: usize = 100_000;

/// Token buckets, one per key.
pub struct Buckets<K> {
    limit: RateLimit,
    buckets: Mutex<HashMap<K, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl<K: Hash + Eq> Buckets<K> {
    /// Buckets for `limit`.
    pub fn new(limit: RateLimit) -> Self {
        Buckets {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from `key`'s bucket, or says how long until one is
    /// there.
    pub fn take(&self, key: K) -> Result<(), Duration> {
        let burst = f64::from(self.limit.burst.max(1));
        let per_sec = f64::from(self.limit.per_minute.max(1)) / 60.0;
        let now = Instant::now();
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= MAX_KEYS {
            buckets
                .retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec < burst);
            if buckets.len() >= MAX_KEYS {
                buckets.clear();
            }
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        bucket.tokens =
            (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * per_sec).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_sec))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_with_the_wait() {
        let buckets = Buckets::new(RateLimit {
            per_minute: 60,
            burst: 3,
        });
        for _ in 0..3 {
            assert!(buckets.take("a").is_ok());
        }
        let wait = buckets.take("a").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        // Another key has its own bucket.
        assert!(buckets.take("b").is_ok());
    }
}
