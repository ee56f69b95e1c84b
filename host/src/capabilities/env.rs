//! What one loaded plugin may use, shared by all its calls: its grants, its
//! checked configuration, the host's services, and its rate in the host's
//! log; and the caps on what a call may record of its refused requests.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::capabilities::chat::ChatSink;
use crate::capabilities::config::PluginConfig;
use crate::capabilities::store::StoreBackend;
use sandwit_contract::capability::Grants;
use sandwit_contract::policy::{HttpLimits, StoreLimits};

/// The most refused requests recorded per call; later ones are counted.
pub(crate) const MAX_DENIED_PER_CALL: usize = 100;
/// The longest description of a refused request; a key or URL in it is cut.
pub(crate) const MAX_REQUEST_TEXT: usize = 200;
/// Log lines a plugin may send to the host's `tracing` log in a burst...
const LOG_BURST: f64 = 200.0;
/// ...and per second after it; the rest are counted and summarised.
const LOG_LINES_PER_SEC: f64 = 50.0;

/// The services of the host every plugin shares.
#[derive(Clone)]
pub(crate) struct Services {
    pub(crate) store: Arc<dyn StoreBackend>,
    pub(crate) store_limits: StoreLimits,
    pub(crate) http_limits: HttpLimits,
    pub(crate) chat: Option<Arc<dyn ChatSink>>,
}

#[cfg(test)]
impl Services {
    /// An in-memory store, the default caps, no chat sink.
    pub(crate) fn for_tests() -> Self {
        Services {
            store: Arc::new(
                crate::capabilities::store::SqliteStore::in_memory().expect("an in-memory store"),
            ),
            store_limits: StoreLimits::default(),
            http_limits: HttpLimits::default(),
            chat: None,
        }
    }
}

/// What one loaded plugin may use, shared by all its calls.
pub(crate) struct PluginEnv {
    pub(crate) id: String,
    pub(crate) grants: Grants,
    pub(crate) config: PluginConfig,
    pub(crate) services: Services,
    /// Shared by all its calls: lines to the host log (plugin logs and
    /// refusals) at a bounded rate.
    log_bucket: Mutex<LogBucket>,
}

impl PluginEnv {
    /// Whether the plugin's lines may go to the host log now (within its
    /// rate, shared by its calls); reports lines dropped before.
    pub(crate) fn may_log(&self) -> bool {
        let (send, dropped_before) = self
            .log_bucket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if dropped_before > 0 {
            tracing::warn!(plugin = %self.id, dropped = dropped_before, "dropped host log lines over the rate of {LOG_LINES_PER_SEC} per second");
        }
        send
    }

    pub(crate) fn new(
        id: &str,
        grants: Grants,
        config: PluginConfig,
        services: Services,
    ) -> Arc<Self> {
        Arc::new(PluginEnv {
            id: id.to_string(),
            grants,
            config,
            services,
            log_bucket: Mutex::new(LogBucket {
                tokens: LOG_BURST,
                at: Instant::now(),
                dropped: 0,
            }),
        })
    }
}

/// A token bucket for the plugin's lines in the host log.
struct LogBucket {
    tokens: f64,
    at: Instant,
    dropped: u64,
}

impl LogBucket {
    /// Whether a line may go out now; when lines were dropped before it,
    /// also how many.
    fn take(&mut self) -> (bool, u64) {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * LOG_LINES_PER_SEC;
        self.tokens = (self.tokens + refill).min(LOG_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            (true, std::mem::take(&mut self.dropped))
        } else {
            self.dropped += 1;
            (false, 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rate_refills_and_counts_what_it_drops() {
        let mut bucket = LogBucket {
            tokens: 2.0,
            at: Instant::now(),
            dropped: 0,
        };
        assert_eq!(bucket.take(), (true, 0));
        assert_eq!(bucket.take(), (true, 0));
        assert_eq!(bucket.take(), (false, 0));
        assert_eq!(bucket.take(), (false, 0));
        // A second later, 50 lines' worth is back, and the next line reports
        // the two dropped before it.
        bucket.at -= std::time::Duration::from_secs(1);
        assert_eq!(bucket.take(), (true, 2));
        assert_eq!(bucket.dropped, 0);
    }
}
