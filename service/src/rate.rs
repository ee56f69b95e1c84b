//! Requests per token: a token bucket per token name, on every endpoint but
//! `/healthz`, `/readyz` and `/openapi.json`; past it 429 `rate-limited`
//! with `Retry-After`.
//!
//! Only requests that carry a valid token are counted. There is no limit
//! per address: a request without a valid token is refused (401) before it
//! does any work, and what strangers can hold (connections, per address
//! and in all, and how long they may take) is bounded where connections are
//! accepted (`sandwit_net::serve`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sandwit_net::{Buckets, RateLimit};

use crate::error::ApiError;

/// Requests a token may make by default: 6,000 a minute, 600 at once.
pub const DEFAULT_TOKEN_RATE: RateLimit = RateLimit {
    per_minute: 6_000,
    burst: 600,
};

/// The endpoints anyone may ask without a limit: probes and the API's
/// description, which do no work a caller could multiply.
pub(crate) const UNLIMITED: [&str; 3] = ["/healthz", "/readyz", "/openapi.json"];

/// The buckets of the tokens, by name.
pub(crate) struct TokenRate {
    limit: RateLimit,
    buckets: Buckets<String>,
}

impl TokenRate {
    /// A bucket per token, within `limit`.
    pub(crate) fn new(limit: RateLimit) -> Self {
        TokenRate {
            limit,
            buckets: Buckets::new(limit),
        }
    }

    /// Takes a request from `token`'s bucket; `None`, or the refusal
    /// (429) when it is empty.
    pub(crate) fn refuse(&self, token: &str) -> Option<Response> {
        self.buckets.take(token.to_string()).err().map(|wait| {
            let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
            let mut response = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate-limited",
                format!(
                    "the token `{token}` made more requests than its limit of {} a minute \
                     ({} at once; --rate-per-minute, --rate-burst): retry in {seconds} s",
                    self.limit.per_minute, self.limit.burst
                ),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_past_its_burst_is_refused_with_429_and_retry_after() {
        let rate = TokenRate::new(RateLimit {
            per_minute: 60,
            burst: 2,
        });
        assert!(rate.refuse("app").is_none());
        assert!(rate.refuse("app").is_none());
        let refusal = rate.refuse("app").unwrap();
        assert_eq!(refusal.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refusal.headers()[header::RETRY_AFTER], "1");
        // Another token has its own bucket.
        assert!(rate.refuse("ops").is_none());
    }
}
