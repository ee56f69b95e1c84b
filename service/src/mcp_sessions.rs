//! MCP sessions over HTTP, bounded: each is bound to the token that made
//! it, a token and the server may hold only so many at once, and a session
//! ends once idle (sooner if it never made a request past `initialize`).
//!
//! Two parts, because neither alone sees everything. The middleware around
//! `/mcp` ([`guard`]) knows the caller's token: it refuses a session id the
//! token did not make (404, as rmcp answers an unknown id, so ids of other
//! tokens are not told apart from ids that never were) before rmcp sees the
//! request, and reserves a slot for an `initialize`, which the session
//! rmcp creates for it takes (bound to the token the moment it exists, so
//! a client that leaves before its answer leaves no session uncounted).
//! The session manager ([`Sessions`], wrapping
//! rmcp's `LocalSessionManager`) sees rmcp's own events: every request past
//! `initialize` (a session that makes one is in use), every response stream
//! opened and closed (a session with one open is never idle), and every end
//! of a session, by `DELETE`, by its worker stopping or by the sweeper, which
//! frees its slot, so the caps count live sessions only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use crate::error::ApiError;

/// The header that carries a session's id.
const SESSION_HEADER: &str = "mcp-session-id";

/// The bounds on MCP sessions over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpSessionLimits {
    /// Sessions one token may hold at once.
    pub per_token: usize,
    /// Sessions the server holds at once, all tokens together.
    pub total: usize,
    /// How long a session that made a request past `initialize` lives
    /// without one (and without a response stream open).
    pub idle: Duration,
    /// How long a session that only initialised (never made a request past
    /// `initialize` and `notifications/initialized`) lives.
    pub init_idle: Duration,
}

impl Default for McpSessionLimits {
    /// 16 sessions a token, 1,024 in all, 5 minutes idle, 30 seconds for a
    /// session that only initialised.
    fn default() -> Self {
        McpSessionLimits {
            per_token: 16,
            total: 1024,
            idle: Duration::from_secs(300),
            init_idle: Duration::from_secs(30),
        }
    }
}

/// A live session, as the table knows it.
#[derive(Debug)]
struct Entry {
    /// The name of the token that made it.
    token: String,
    /// Whether it made a request past `initialize`.
    used: bool,
    /// Response streams open now: while one is, the session is not idle.
    open: usize,
    /// When it last saw a request or closed a stream.
    since: Instant,
}

/// Sessions by id, and how many each token holds (reserved slots of
/// `initialize` requests in flight included).
#[derive(Debug, Default)]
struct Table {
    sessions: HashMap<SessionId, Entry>,
    per_token: HashMap<String, usize>,
    /// Every session and reservation: the sum of `per_token`.
    total: usize,
}

/// Why an `initialize` is refused.
#[derive(Debug, PartialEq, Eq)]
enum Full {
    /// The token holds its cap.
    Token(usize),
    /// The server holds its cap.
    Server(usize),
}

impl Table {
    /// Takes a slot for `token`, or says which cap is full.
    fn reserve(&mut self, token: &str, limits: &McpSessionLimits) -> Result<(), Full> {
        let held = self.per_token.get(token).copied().unwrap_or(0);
        if held >= limits.per_token {
            return Err(Full::Token(limits.per_token));
        }
        if self.total >= limits.total {
            return Err(Full::Server(limits.total));
        }
        *self.per_token.entry(token.to_string()).or_insert(0) += 1;
        self.total += 1;
        Ok(())
    }

    /// Gives back a slot of `token`.
    fn release(&mut self, token: &str) {
        if let Some(held) = self.per_token.get_mut(token) {
            *held -= 1;
            self.total -= 1;
            if *held == 0 {
                self.per_token.remove(token);
            }
        }
    }

    /// Turns a reserved slot of `token` into the session `id`.
    fn bind(&mut self, id: SessionId, token: &str, now: Instant) {
        self.sessions.insert(
            id,
            Entry {
                token: token.to_string(),
                used: false,
                open: 0,
                since: now,
            },
        );
    }

    /// Forgets session `id` and frees its slot; false if it was not here.
    fn remove(&mut self, id: &str) -> bool {
        match self.sessions.remove(id) {
            Some(entry) => {
                self.release(&entry.token);
                true
            }
            None => false,
        }
    }

    /// Whether `id` is a session of `token`; if so it saw a request now.
    fn touch(&mut self, id: &str, token: &str, now: Instant) -> bool {
        match self.sessions.get_mut(id) {
            Some(entry) if entry.token == token => {
                entry.since = now;
                true
            }
            _ => false,
        }
    }

    /// The sessions idle past their time at `now`: open no stream, and saw
    /// nothing for `limits.idle` (`limits.init_idle` if never used).
    fn expired(&self, limits: &McpSessionLimits, now: Instant) -> Vec<SessionId> {
        self.sessions
            .iter()
            .filter(|(_, e)| {
                let allowed = if e.used {
                    limits.idle
                } else {
                    limits.init_idle
                };
                e.open == 0 && now.saturating_duration_since(e.since) >= allowed
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// rmcp's local session manager with the table of who holds which session.
pub(crate) struct Sessions {
    inner: LocalSessionManager,
    table: Mutex<Table>,
    limits: McpSessionLimits,
}

impl Sessions {
    /// Sessions within `limits`; rmcp's own idle timer is `limits.idle`
    /// too, a backstop should a session never be bound.
    pub(crate) fn new(limits: McpSessionLimits) -> Arc<Self> {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.idle);
        Arc::new(Sessions {
            inner,
            table: Mutex::new(Table::default()),
            limits,
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a response stream of session `id` open until the stream is
    /// dropped; `used` marks the session as having made a request.
    fn watch<S>(
        self: &Arc<Self>,
        id: &SessionId,
        used: bool,
        stream: S,
    ) -> impl Stream<Item = S::Item> + Send + Sync + 'static
    where
        S: Stream + Send + Sync + 'static,
    {
        if let Some(entry) = self.table().sessions.get_mut(id) {
            entry.open += 1;
            entry.used |= used;
        }
        let open = OpenStream {
            sessions: Arc::downgrade(self),
            id: id.clone(),
        };
        stream.map(move |item| {
            let _ = &open;
            item
        })
    }

    /// Ends the sessions idle past their time and forgets those rmcp ended
    /// on its own; every `tick`, for as long as the sessions are served.
    pub(crate) fn sweep_every(self: &Arc<Self>, tick: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let sessions = Arc::downgrade(self);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(tick).await;
                let Some(sessions) = sessions.upgrade() else {
                    break;
                };
                sessions.sweep(Instant::now()).await;
            }
        });
    }

    async fn sweep(&self, now: Instant) {
        let expired = self.table().expired(&self.limits, now);
        for id in expired {
            tracing::info!(session = %id, "mcp session idle past its time: ended");
            self.table().remove(&id);
            if let Err(e) = self.inner.close_session(&id).await {
                tracing::warn!(session = %id, "ending an idle mcp session: {e}");
            }
        }
        let ids: Vec<SessionId> = self.table().sessions.keys().cloned().collect();
        for id in ids {
            if !self.inner.has_session(&id).await.unwrap_or(false) {
                self.table().remove(&id);
            }
        }
    }
}

/// A response stream of a session, open while this lives.
struct OpenStream {
    sessions: Weak<Sessions>,
    id: SessionId,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        if let Some(sessions) = self.sessions.upgrade()
            && let Some(entry) = sessions.table().sessions.get_mut(&self.id)
        {
            entry.open = entry.open.saturating_sub(1);
            entry.since = Instant::now();
        }
    }
}

// rmcp calls the manager through an `Arc<Sessions>`; the methods that open a
// stream need the `Arc` to count it, so the trait is implemented on a
// newtype holding one.
/// The [`SessionManager`] rmcp is given: [`Sessions`] behind an `Arc`.
pub(crate) struct Manager(pub(crate) Arc<Sessions>);

impl SessionManager for Manager {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    /// Binds the new session to the reservation of the `initialize` that
    /// asked for it (rmcp creates it in that request's task).
    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.0.inner.create_session().await?;
        let bound = RESERVED.try_with(|reservation| {
            if !reservation.bound.swap(true, Ordering::SeqCst) {
                self.0
                    .table()
                    .bind(id.clone(), &reservation.token, Instant::now());
            }
        });
        if bound.is_err() {
            tracing::warn!(session = %id, "an mcp session made outside an initialize request");
        }
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.0.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.0.inner.has_session(id).await
    }

    /// A `DELETE`, or rmcp's end of the session's worker: its slot is free.
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.0.table().remove(id);
        self.0.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.0.inner.create_stream(id, message).await?;
        Ok(self.0.watch(id, true, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.0.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.0.inner.create_standalone_stream(id).await?;
        Ok(self.0.watch(id, false, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.0.inner.resume(id, last_event_id).await?;
        Ok(self.0.watch(id, false, stream))
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.0.inner.event_store()
    }
}

/// A reserved slot of `token`, given back when dropped unless a session
/// took it.
struct Reservation {
    sessions: Arc<Sessions>,
    token: String,
    bound: AtomicBool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.bound.load(Ordering::SeqCst) {
            self.sessions.table().release(&self.token);
        }
    }
}

tokio::task_local! {
    /// The reservation of the `initialize` request this task serves.
    static RESERVED: Arc<Reservation>;
}

/// The middleware around `/mcp`, once the token was checked (`token` is
/// its name): a request naming a session is refused unless the session is
/// the token's; a `POST` naming none (an `initialize`) takes a slot,
/// refused past a cap, that the session rmcp creates for it takes.
pub(crate) async fn guard(
    sessions: &Arc<Sessions>,
    token: String,
    request: Request,
    next: Next,
) -> Response {
    if let Some(id) = request.headers().get(SESSION_HEADER) {
        let known = id
            .to_str()
            .is_ok_and(|id| sessions.table().touch(id, &token, Instant::now()));
        if !known {
            return ApiError::not_found(
                "unknown-session",
                "no MCP session of this token has that Mcp-Session-Id; initialize a new one",
            )
            .into_response();
        }
        return next.run(request).await;
    }
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let reserved = sessions.table().reserve(&token, &sessions.limits);
    if let Err(full) = reserved {
        return refusal(&full, &token, &sessions.limits);
    }
    let reservation = Arc::new(Reservation {
        sessions: sessions.clone(),
        token,
        bound: AtomicBool::new(false),
    });
    RESERVED.scope(reservation, next.run(request)).await
}

/// The answer to an `initialize` past a cap: 429 past the token's, 503 past
/// the server's, with `Retry-After` the time an unused session lives.
fn refusal(full: &Full, token: &str, limits: &McpSessionLimits) -> Response {
    let (status, message) = match full {
        Full::Token(cap) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "the token `{token}` holds {cap} MCP sessions, its limit \
                 (--mcp-sessions-per-token): end one with DELETE /mcp or let one expire"
            ),
        ),
        Full::Server(cap) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the server holds {cap} MCP sessions, its limit (--mcp-sessions)"),
        ),
    };
    let mut response = ApiError::new(status, "too-many-sessions", message).into_response();
    let seconds = limits.init_idle.as_secs_f64().ceil().max(1.0) as u64;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> McpSessionLimits {
        McpSessionLimits {
            per_token: 2,
            total: 3,
            idle: Duration::from_secs(60),
            init_idle: Duration::from_secs(5),
        }
    }

    #[test]
    fn the_caps_count_slots_per_token_and_in_all() {
        let (mut table, limits) = (Table::default(), limits());
        assert_eq!(table.reserve("a", &limits), Ok(()));
        assert_eq!(table.reserve("a", &limits), Ok(()));
        assert_eq!(table.reserve("a", &limits), Err(Full::Token(2)));
        assert_eq!(table.reserve("b", &limits), Ok(()));
        assert_eq!(table.reserve("c", &limits), Err(Full::Server(3)));
        // A reservation given back (its `initialize` failed) frees its slot.
        table.release("b");
        assert_eq!(table.reserve("c", &limits), Ok(()));
        // So does a session's end.
        let now = Instant::now();
        table.bind("s1".into(), "a", now);
        assert!(table.remove("s1"));
        assert!(!table.remove("s1"), "a session is freed once");
        assert_eq!(table.reserve("a", &limits), Ok(()));
        assert_eq!(table.total, 3);
    }

    #[test]
    fn a_session_answers_only_the_token_that_made_it() {
        let mut table = Table::default();
        table.reserve("a", &limits()).unwrap();
        let now = Instant::now();
        table.bind("s1".into(), "a", now);
        assert!(table.touch("s1", "a", now));
        assert!(!table.touch("s1", "b", now));
        assert!(!table.touch("s2", "a", now));
    }

    #[test]
    fn an_unused_session_expires_sooner_and_an_open_stream_keeps_one_alive() {
        let (mut table, limits) = (Table::default(), limits());
        let start = Instant::now();
        for id in ["fresh", "used", "busy"] {
            table.reserve(id, &limits).unwrap();
            table.bind(id.into(), id, start);
        }
        table.sessions.get_mut("used").unwrap().used = true;
        let busy = table.sessions.get_mut("busy").unwrap();
        busy.used = true;
        busy.open = 1;
        let names = |ids: Vec<SessionId>| {
            let mut ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
            ids.sort();
            ids
        };
        assert!(
            table
                .expired(&limits, start + Duration::from_secs(4))
                .is_empty()
        );
        assert_eq!(
            names(table.expired(&limits, start + Duration::from_secs(5))),
            ["fresh"]
        );
        assert_eq!(
            names(table.expired(&limits, start + Duration::from_secs(600))),
            ["fresh", "used"]
        );
    }

    #[tokio::test]
    async fn a_stream_counts_as_open_until_dropped() {
        let sessions = Sessions::new(limits());
        sessions.table().reserve("a", &limits()).unwrap();
        let id: SessionId = "s1".into();
        let start = Instant::now();
        sessions.table().bind(id.clone(), "a", start);
        let stream = sessions.watch(&id, true, futures_util::stream::iter([1, 2]));
        {
            let table = sessions.table();
            let entry = &table.sessions[&id];
            assert_eq!((entry.open, entry.used), (1, true));
        }
        assert!(
            sessions
                .table()
                .expired(&limits(), start + Duration::from_secs(600))
                .is_empty()
        );
        drop(stream);
        assert_eq!(sessions.table().sessions[&id].open, 0);
        // rmcp never knew this session: the sweep forgets it.
        sessions.sweep(start).await;
        assert!(sessions.table().sessions.is_empty());
        assert_eq!(sessions.table().total, 0);
    }
}
