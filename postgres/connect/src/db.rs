//! The pool as its users see it: [`Db::get`] hands out a [`Conn`], whose
//! statements (and those of its transactions, [`Tx`]) are each bounded by
//! the client-side statement timeout.
//!
//! A connection that got no answer to a statement is closed when its
//! `Conn` is dropped, never handed out again: the statement may still be
//! queued in its socket or running on the server, and the next statement
//! would wait behind it (so none is sent on it meanwhile: a rollback fails
//! at once). The same holds for a statement whose operation was dropped
//! before the answer came (a call cancelled at its deadline).
//!
//! After a timeout the server is taken as not answering: for
//! [`REFUSED_FOR`] every operation is refused at once, with the timeout's
//! error, instead of each waiting out a timeout of its own (a hung server
//! would otherwise hold every caller for that long, and fill the queues of
//! callers that need no database). Then one operation tries the server; an
//! answer to any statement ends the refusals, another timeout renews them.
//! A refused connection (a stopped server) fails at once anyway, and
//! refuses nothing after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool, PoolError, TimeoutType};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, Row};

/// How long, after the server did not answer in time, operations are
/// refused without trying it.
pub const REFUSED_FOR: Duration = Duration::from_secs(1);

/// A pool of connections to one database (see [`crate::pool`]); clones
/// share it.
#[derive(Clone)]
pub struct Db(Arc<Inner>);

struct Inner {
    pool: Pool,
    /// `host:port/db`, for messages.
    shown: String,
    wait: Duration,
    answer_timeout: Duration,
    /// When `retry_at` counts from.
    epoch: Instant,
    /// 0 while the server answers; else when operations may try it again,
    /// in milliseconds since `epoch`, plus 1.
    retry_at: AtomicU64,
    /// Whether what went unanswered last was a connection (else a
    /// statement).
    connect_unanswered: AtomicBool,
}

/// Why an operation failed.
#[derive(Debug)]
pub enum Error {
    /// The server answered with an error, refused the connection or closed
    /// it: tokio-postgres's error.
    Postgres(tokio_postgres::Error),
    /// The server did not answer in time, now or within [`REFUSED_FOR`]
    /// before: the message names the server and the timeout.
    Unanswered(String),
    /// No connection of the pool was free in time, or the pool is closed.
    Pool(String),
}

impl Error {
    /// Whether the server did not answer in time.
    pub fn is_unanswered(&self) -> bool {
        matches!(self, Error::Unanswered(_))
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Postgres(e) => e.fmt(f),
            Error::Unanswered(m) | Error::Pool(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Postgres(e) => e.source(),
            _ => None,
        }
    }
}

/// A duration as messages show it: `2 s`, `1.5 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s} s")
    } else {
        format!("{s:.1} s")
    }
}

impl Db {
    pub(crate) fn new(pool: Pool, shown: String, settings: &crate::Settings) -> Self {
        Db(Arc::new(Inner {
            pool,
            shown,
            wait: settings.wait,
            answer_timeout: settings.answer_timeout,
            epoch: Instant::now(),
            retry_at: AtomicU64::new(0),
            connect_unanswered: AtomicBool::new(false),
        }))
    }

    /// The server and database, for messages (`host:port/db`, no password).
    pub fn shown(&self) -> &str {
        &self.0.shown
    }

    /// The pool's connections: made, idle, at most.
    pub fn status(&self) -> deadpool_postgres::Status {
        self.0.pool.status()
    }

    /// A connection of the pool, made if none is idle. Refused at once
    /// while the server is taken as not answering.
    pub async fn get(&self) -> Result<Conn, Error> {
        self.admit()?;
        let object = self.0.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => Error::Postgres(e),
            PoolError::Timeout(TimeoutType::Wait) => Error::Pool(format!(
                "no connection to PostgreSQL at {} was free within {}",
                self.0.shown,
                seconds(self.0.wait)
            )),
            PoolError::Timeout(TimeoutType::Create) => self.unanswered(true),
            // Only a recycling query waits for the server, and the pool
            // makes none.
            PoolError::Timeout(TimeoutType::Recycle) => self.unanswered(false),
            other => Error::Pool(format!(
                "no connection to PostgreSQL at {}: {other}",
                self.0.shown
            )),
        })?;
        Ok(Conn {
            object: Some(object),
            guard: Guard {
                db: self.clone(),
                pending: AtomicUsize::new(0),
                lost: AtomicBool::new(false),
            },
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.0.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Ok unless operations are refused; past the refusal, the first
    /// operation to come tries the server and the others are refused for
    /// [`REFUSED_FOR`] more.
    fn admit(&self) -> Result<(), Error> {
        let retry_at = self.0.retry_at.load(Ordering::Relaxed);
        if retry_at == 0 {
            return Ok(());
        }
        let now = self.now();
        let next = now + REFUSED_FOR.as_millis() as u64;
        if now >= retry_at
            && (self.0.retry_at)
                .compare_exchange(retry_at, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Ok(());
        }
        let connect = self.0.connect_unanswered.load(Ordering::Relaxed);
        Err(Error::Unanswered(format!(
            "{}; operations are refused without trying it for {} after that",
            self.timeout_message(connect),
            seconds(REFUSED_FOR)
        )))
    }

    /// Takes the server as not answering (a connection, or a statement).
    fn unanswered(&self, connect: bool) -> Error {
        self.0.connect_unanswered.store(connect, Ordering::Relaxed);
        let retry_at = self.now() + REFUSED_FOR.as_millis() as u64;
        self.0.retry_at.store(retry_at, Ordering::Relaxed);
        Error::Unanswered(self.timeout_message(connect))
    }

    /// Takes the server as answering.
    fn answered(&self) {
        if self.0.retry_at.load(Ordering::Relaxed) != 0 {
            self.0.retry_at.store(0, Ordering::Relaxed);
        }
    }

    fn timeout_message(&self, connect: bool) -> String {
        let which = if connect {
            "the connect timeout"
        } else {
            "the client-side statement timeout"
        };
        format!(
            "PostgreSQL at {} did not answer within {} ({which})",
            self.0.shown,
            seconds(self.0.answer_timeout)
        )
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.status();
        f.debug_struct("Db")
            .field("server", &self.0.shown)
            .field("connections", &status.size)
            .field("max_connections", &status.max_size)
            .finish()
    }
}

/// A connection of the pool, back in it when dropped unless a statement
/// of it went unanswered (then closed).
pub struct Conn {
    object: Option<Object>,
    guard: Guard,
}

/// What bounds a connection's statements.
struct Guard {
    db: Db,
    /// Statements sent whose answers have not come (more than 0 when the
    /// connection is dropped: one timed out, or its operation was dropped).
    pending: AtomicUsize,
    /// A statement's answer did not come in time, or the connection is to
    /// be closed: no statement is sent on it again.
    lost: AtomicBool,
}

impl Guard {
    /// `statement`, failed if the server does not answer it in time, or at
    /// once when an earlier statement's answer never came (this one would
    /// queue behind it: a rollback after a timeout).
    async fn bounded<T>(
        &self,
        statement: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Error> {
        if self.lost.load(Ordering::Relaxed) {
            return Err(Error::Unanswered(self.db.timeout_message(false)));
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        let Ok(answer) = tokio::time::timeout(self.db.0.answer_timeout, statement).await else {
            self.lost.store(true, Ordering::Relaxed);
            return Err(self.db.unanswered(false));
        };
        self.pending.fetch_sub(1, Ordering::Relaxed);
        match &answer {
            Ok(_) => self.db.answered(),
            Err(e) if e.as_db_error().is_some() => self.db.answered(),
            // A broken connection is closed: the pool drops it.
            Err(_) => {}
        }
        answer.map_err(Error::Postgres)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let guard = &self.guard;
        if (guard.lost.load(Ordering::Relaxed) || guard.pending.load(Ordering::Relaxed) > 0)
            && let Some(object) = self.object.take()
        {
            drop(Object::take(object));
        }
    }
}

impl Conn {
    fn client(&self) -> &Object {
        self.object
            .as_ref()
            .expect("a Conn holds its connection until dropped")
    }

    /// Starts a transaction at `isolation`, rolled back if dropped
    /// uncommitted.
    pub async fn transaction(&mut self, isolation: IsolationLevel) -> Result<Tx<'_>, Error> {
        let Conn { object, guard } = self;
        let client = object
            .as_mut()
            .expect("a Conn holds its connection until dropped");
        let tx = guard
            .bounded(
                client
                    .build_transaction()
                    .isolation_level(isolation)
                    .start(),
            )
            .await?;
        Ok(Tx { tx, guard })
    }

    /// Closes the connection instead of giving it back to the pool (its
    /// state is not known: a transaction that did not end).
    pub fn close(self) {
        self.guard.lost.store(true, Ordering::Relaxed);
    }
}

/// A transaction of a [`Conn`].
pub struct Tx<'c> {
    tx: deadpool_postgres::Transaction<'c>,
    guard: &'c Guard,
}

impl Tx<'_> {
    fn client(&self) -> &deadpool_postgres::Transaction<'_> {
        &self.tx
    }

    /// Commits it.
    pub async fn commit(self) -> Result<(), Error> {
        let Tx { tx, guard } = self;
        guard.bounded(tx.commit()).await
    }
}

/// The statements of a connection or a transaction, each prepared (once
/// per connection) and run under the client-side statement timeout.
macro_rules! statements {
    ($type:ty) => {
        impl $type {
            /// Runs a statement: how many rows it changed.
            pub async fn execute(
                &self,
                sql: &str,
                params: &[&(dyn ToSql + Sync)],
            ) -> Result<u64, Error> {
                let client = self.client();
                self.guard
                    .bounded(async {
                        let statement = client.prepare_cached(sql).await?;
                        client.execute(&statement, params).await
                    })
                    .await
            }

            /// Runs a query: its rows.
            pub async fn query(
                &self,
                sql: &str,
                params: &[&(dyn ToSql + Sync)],
            ) -> Result<Vec<Row>, Error> {
                let client = self.client();
                self.guard
                    .bounded(async {
                        let statement = client.prepare_cached(sql).await?;
                        client.query(&statement, params).await
                    })
                    .await
            }

            /// Runs a query that answers at most one row.
            pub async fn query_opt(
                &self,
                sql: &str,
                params: &[&(dyn ToSql + Sync)],
            ) -> Result<Option<Row>, Error> {
                let client = self.client();
                self.guard
                    .bounded(async {
                        let statement = client.prepare_cached(sql).await?;
                        client.query_opt(&statement, params).await
                    })
                    .await
            }

            /// Runs a query that answers exactly one row.
            pub async fn query_one(
                &self,
                sql: &str,
                params: &[&(dyn ToSql + Sync)],
            ) -> Result<Row, Error> {
                let client = self.client();
                self.guard
                    .bounded(async {
                        let statement = client.prepare_cached(sql).await?;
                        client.query_one(&statement, params).await
                    })
                    .await
            }

            /// Runs statements without parameters, unprepared.
            pub async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
                self.guard.bounded(self.client().batch_execute(sql)).await
            }
        }
    };
}

statements!(Conn);
statements!(Tx<'_>);
