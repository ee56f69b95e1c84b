//! Rate limits: a token bucket per key (a client address, a token), in memory.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};
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

/// The most keys (addresses or tokens) tracked: beyond it, the least
/// recently used is forgotten. Clearing them all instead would hand a fresh
/// burst to every client, including the one that filled the map.
pub const MAX_KEYS: usize = 100_000;

/// The key an address is limited by: an IPv4 address (or an IPv4-mapped
/// IPv6 one) as it is, an IPv6 address by its /64: one subnet, which a
/// single host can fill with addresses, so one client cannot get a fresh
/// bucket per address of its subnet. (A site is usually given a /48 to a
/// /56, many /64s: a client with a whole prefix still gets a bucket per
/// subnet.)
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Token buckets, one per key, at most `capacity` keys (the least recently
/// used is evicted).
pub struct Buckets<K> {
    limit: RateLimit,
    capacity: usize,
    state: Mutex<State<K>>,
}

struct State<K> {
    buckets: HashMap<K, Bucket>,
    /// Each key by the stamp of its last use: the first is the least
    /// recently used.
    by_use: BTreeMap<u64, K>,
    next_stamp: u64,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    stamp: u64,
}

impl<K: Hash + Eq + Clone> Buckets<K> {
    /// Buckets for `limit`, tracking at most [`MAX_KEYS`] keys.
    pub fn new(limit: RateLimit) -> Self {
        Self::with_capacity(limit, MAX_KEYS)
    }

    /// Buckets for `limit`, tracking at most `capacity` keys (at least one).
    pub fn with_capacity(limit: RateLimit, capacity: usize) -> Self {
        Buckets {
            limit,
            capacity: capacity.max(1),
            state: Mutex::new(State {
                buckets: HashMap::new(),
                by_use: BTreeMap::new(),
                next_stamp: 0,
            }),
        }
    }

    /// Takes one request from `key`'s bucket, or says how long until one is
    /// there.
    pub fn take(&self, key: K) -> Result<(), Duration> {
        self.take_at(key, Instant::now())
    }

    fn take_at(&self, key: K, now: Instant) -> Result<(), Duration> {
        let burst = f64::from(self.limit.burst.max(1));
        let per_sec = f64::from(self.limit.per_minute.max(1)) / 60.0;
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let State {
            buckets,
            by_use,
            next_stamp,
        } = &mut *state;
        let stamp = *next_stamp;
        *next_stamp += 1;
        if !buckets.contains_key(&key) {
            while buckets.len() >= self.capacity {
                let Some((_, oldest)) = by_use.pop_first() else {
                    break;
                };
                buckets.remove(&oldest);
            }
            buckets.insert(
                key.clone(),
                Bucket {
                    tokens: burst,
                    at: now,
                    stamp,
                },
            );
        }
        let bucket = buckets.get_mut(&key).expect("inserted above");
        by_use.remove(&bucket.stamp);
        by_use.insert(stamp, key);
        bucket.stamp = stamp;
        bucket.tokens = (bucket.tokens
            + now.saturating_duration_since(bucket.at).as_secs_f64() * per_sec)
            .min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_sec))
        }
    }

    /// How many keys are tracked.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.state.lock().unwrap().buckets.len()
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

    /// A full map forgets the least recently used key, not every key: the
    /// client that filled it keeps its empty bucket.
    #[test]
    fn a_full_map_evicts_the_least_recently_used_key() {
        let now = Instant::now();
        let buckets = Buckets::with_capacity(
            RateLimit {
                per_minute: 1,
                burst: 1,
            },
            3,
        );
        assert!(buckets.take_at("abuser", now).is_ok());
        assert!(buckets.take_at("abuser", now).is_err());
        assert!(buckets.take_at("b", now).is_ok());
        assert!(buckets.take_at("c", now).is_ok());
        // "abuser" is used again, so "b" is now the least recently used.
        assert!(buckets.take_at("abuser", now).is_err());
        assert!(buckets.take_at("d", now).is_ok());
        assert_eq!(buckets.len(), 3);
        // Still refused: it was not forgotten.
        assert!(buckets.take_at("abuser", now).is_err());
        // "b" was: it starts again with a full bucket.
        assert!(buckets.take_at("b", now).is_ok());
        assert_eq!(buckets.len(), 3);
        // Unused while three new keys arrive, it is the least recently used
        // and is forgotten in its turn.
        for k in ["e", "f", "g"] {
            assert!(buckets.take_at(k, now).is_ok());
        }
        assert!(buckets.take_at("abuser", now).is_ok());
    }

    /// IPv6 clients share a bucket per /64; IPv4 ones are per address, and
    /// an IPv4-mapped IPv6 address counts as its IPv4 address.
    #[test]
    fn ipv6_addresses_are_limited_per_64() {
        let key = |s: &str| address_key(s.parse().unwrap());
        assert_eq!(
            key("2001:db8:1:2::1"),
            key("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(
            key("2001:db8:1:2::1"),
            "2001:db8:1:2::".parse::<IpAddr>().unwrap()
        );
        assert_ne!(key("192.0.2.1"), key("192.0.2.2"));
        assert_eq!(key("::ffff:192.0.2.1"), key("192.0.2.1"));
        let buckets = Buckets::new(RateLimit {
            per_minute: 1,
            burst: 1,
        });
        assert!(buckets.take(key("2001:db8::1")).is_ok());
        assert!(buckets.take(key("2001:db8::2")).is_err());
        assert!(buckets.take(key("2001:db8:0:1::1")).is_ok());
    }
}
