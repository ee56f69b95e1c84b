//! The HTTP service: the API's routes behind the request log, the rate
//! limits and authentication, with a request timeout and a graceful
//! shutdown.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::TimeoutLayer;

use crate::error::Error;
use crate::{Account, Registry};
use sandwit_net::{Buckets, ConnLimits, RateLimit, address_key};

/// How the service runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Requests per client address (per /64 for IPv6).
    pub per_address: RateLimit,
    /// Requests per token.
    pub per_token: RateLimit,
    /// The longest a request may take, upload and check included.
    pub request_timeout: Duration,
    /// How long a shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// The bounds on connections: how many, from one address, how long
    /// their headers and stalled answers may take.
    pub connections: ConnLimits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            per_address: RateLimit {
                per_minute: 600,
                burst: 100,
            },
            per_token: RateLimit {
                per_minute: 600,
                burst: 100,
            },
            request_timeout: Duration::from_secs(300),
            shutdown_grace: Duration::from_secs(300),
            connections: ConnLimits::default(),
        }
    }
}

struct Guard {
    registry: Registry,
    /// Keyed by [`address_key`]: IPv6 clients by their /64.
    per_address: Buckets<IpAddr>,
    /// Keyed by the token's SHA-256, never the token.
    per_token: Buckets<[u8; 32]>,
}

/// The account name of a request, for the log (never its token).
#[derive(Clone)]
struct LoggedAccount(String);

/// The service's router: [`crate::api::router`] behind the request log,
/// rate limits, authentication, timeout and panic guard. Merge other routes
/// (the web page) into `extra`; they get the same layers.
pub fn app(registry: Registry, config: &Config, extra: Router) -> Router {
    let guard = Arc::new(Guard {
        registry: registry.clone(),
        per_address: Buckets::new(config.per_address),
        per_token: Buckets::new(config.per_token),
    });
    crate::api::router(registry)
        .merge(extra)
        .layer(middleware::from_fn_with_state(guard, authenticate))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .layer(CatchPanicLayer::custom(|_| {
            Error::Internal(anyhow::anyhow!("a handler panicked")).into_response()
        }))
        .layer(middleware::from_fn(log))
        // Outermost: a refusal before the body was read (a cross-site form,
        // a stranger's upload) still reaches a client sending it.
        .layer(middleware::from_fn(sandwit_net::linger::drain_unread))
}

/// Serves `registry` (and the routes of `extra`, see [`app`]) on
/// `listener`, each connection within the config's bounds, until
/// `shutdown` resolves, then stops accepting, and waits up to the grace
/// period for requests in flight (uploads finish their check).
pub async fn serve(
    registry: Registry,
    config: Config,
    extra: Router,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = app(registry, &config, extra);
    let stop = async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; finishing requests in flight");
    };
    sandwit_net::serve(
        listener,
        app,
        config.connections,
        stop,
        config.shutdown_grace,
    )
    .await;
    Ok(())
}

/// Logs every request with its outcome: method, path (not the query),
/// status, latency and account. Never a header (tokens are in one).
async fn log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let start = Instant::now();
    let response = next.run(request).await;
    let account = response
        .extensions()
        .get::<LoggedAccount>()
        .map(|a| a.0.as_str());
    tracing::info!(
        %method,
        path = ?path,
        status = response.status().as_u16(),
        latency_ms = start.elapsed().as_millis() as u64,
        account = account.unwrap_or("-"),
        peer = ?peer,
        "request"
    );
    response
}

/// Rate-limits by address, then resolves the bearer token (if any) to its
/// account and rate-limits by token. A token that is present but unknown
/// is refused whatever the route.
async fn authenticate(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    let tokens = Tokens(guard.clone());
    request.extensions_mut().insert(tokens.clone());
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>()
        && let Err(wait) = guard.per_address.take(address_key(peer.ip()))
    {
        return Error::RateLimited("address", wait).into_response();
    }
    let token = match bearer(&request) {
        Ok(token) => token,
        Err(e) => return e.into_response(),
    };
    let Some(token) = token else {
        return next.run(request).await;
    };
    let account: Account = match tokens.account(&token).await {
        Ok(account) => account,
        Err(e) => return e.into_response(),
    };
    let name = LoggedAccount(account.name.clone());
    request.extensions_mut().insert(account);
    let mut response = next.run(request).await;
    response.extensions_mut().insert(name);
    response
}

/// The bearer token of the request, if it has an `Authorization` header.
fn bearer(request: &Request) -> Result<Option<String>, Error> {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let malformed =
        || Error::Unauthorized("the Authorization header is not `Bearer <token>`".into());
    let value = value.to_str().map_err(|_| malformed())?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(malformed)?;
    Ok(Some(token.trim().to_string()))
}

/// Resolves a token a request carries elsewhere than in its
/// `Authorization` header (the web page's upload form has it in a field),
/// with the same per-token rate limit. Every request has one in its
/// extensions.
#[derive(Clone)]
pub(crate) struct Tokens(Arc<Guard>);

impl Tokens {
    /// The account of `token`, after taking one request from its budget.
    /// The budget is taken only once the token authenticates: a bucket per
    /// made-up token would let anyone churn the buckets until a real
    /// token's is forgotten, refilling it. Failed attempts are limited by
    /// the per-address buckets.
    pub(crate) async fn account(&self, token: &str) -> Result<Account, Error> {
        let account = self.0.registry.authenticate(token).await?;
        let hash: [u8; 32] = sha2::Digest::finalize(
            <sha2::Sha256 as sha2::Digest>::new_with_prefix(token.as_bytes()),
        )
        .into();
        self.0
            .per_token
            .take(hash)
            .map_err(|wait| Error::RateLimited("token", wait))?;
        Ok(account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    /// Made-up tokens take no per-token bucket: however many, they cannot
    /// make the buckets forget a real token's exhausted one.
    #[tokio::test]
    async fn bogus_tokens_do_not_reset_a_real_tokens_bucket() {
        let dir = crate::scratch::ScratchDir::new("tokens");
        let registry = Registry::open(&dir).unwrap();
        let limit = RateLimit {
            per_minute: 1,
            burst: 1,
        };
        let tokens = Tokens(Arc::new(Guard {
            registry: registry.clone(),
            per_address: Buckets::new(limit),
            per_token: Buckets::with_capacity(limit, 2),
        }));
        let token = registry.create_token("alice", Role::Publisher).unwrap();
        assert_eq!(tokens.account(&token).await.unwrap().name, "alice");
        let limited = tokens.account(&token).await.unwrap_err();
        assert!(
            matches!(limited, Error::RateLimited("token", _)),
            "{limited:?}"
        );
        for i in 0..10 {
            // Well formed (43 base64url characters), never issued.
            let bogus = format!("swr_{i:0>43}");
            let refused = tokens.account(&bogus).await.unwrap_err();
            assert!(matches!(refused, Error::Unauthorized(_)), "{refused:?}");
        }
        let limited = tokens.account(&token).await.unwrap_err();
        assert!(
            matches!(limited, Error::RateLimited("token", _)),
            "{limited:?}"
        );
    }
}
