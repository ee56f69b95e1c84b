//! PostgreSQL behind a sandwit host, for hosts that run as replicas of one
//! service: [`Postgres`] is a plugin store ([`StoreBackend`]) with the same
//! scopes, quotas and atomicity as the embedded SQLite one, and the shared
//! state of the execution controls ([`SharedControls`]: rate-limit buckets,
//! chat budgets, open breakers), so that every replica on one database
//! enforces them together.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! let pg = Arc::new(sandwit_postgres::Postgres::connect("postgres://sandwit@db/sandwit").await?);
//! let host = sandwit::Host::builder()
//!     .store(pg.clone())
//!     .shared_controls(pg)
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! The tables are the database's `sandwit_*` tables, brought up to date by
//! [`Postgres::connect`] (`schema.rs`); several replicas starting at once
//! migrate one at a time.

mod controls;
mod error;
mod schema;
mod store;

use std::time::Duration;

use anyhow::Context;
use sandwit_postgres_connect::{Conn, Db};

pub use sandwit::controls::SharedControls;
pub use sandwit::store::StoreBackend;

/// Connections a replica keeps to the database at most.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// How long the database has to answer: to make a connection, and each
/// statement (the client-side statement timeout). A database that does not
/// answer fails the operation that waits for it within this (after at most
/// [`POOL_WAIT`] for a free connection), and so the call or run that made
/// it well within its own deadline (10 s by default), and the operations
/// of the next second at once (`sandwit_postgres_connect::REFUSED_FOR`).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an operation waits for one of the pool's connections to be
/// free.
const POOL_WAIT: Duration = Duration::from_secs(2);

/// How long one statement may run on the server: below
/// [`ANSWER_TIMEOUT`], so a slow statement of a server that answers is
/// cancelled by the server (its connection kept) before the client gives
/// up on it.
const STATEMENT_TIMEOUT: &str = "1500ms";

/// A pool of connections to one PostgreSQL database, with sandwit's tables
/// in it.
pub struct Postgres {
    db: Db,
}

impl Postgres {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// libpq's parameters such as `sslmode=require` and `sslrootcert=FILE`
    /// after `?`, as `sandwit_postgres_connect` reads them), checks that it
    /// answers and brings sandwit's tables up to date.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// [`Postgres::connect`], keeping at most `max_connections`.
    pub async fn connect_with(url: &str, max_connections: usize) -> anyhow::Result<Self> {
        let settings = sandwit_postgres_connect::Settings {
            max_connections,
            wait: POOL_WAIT,
            answer_timeout: ANSWER_TIMEOUT,
            application_name: "sandwit",
            statement_timeout: Some(STATEMENT_TIMEOUT),
        };
        let db = sandwit_postgres_connect::pool(url, &settings)?;
        let shown = db.shown().to_string();
        let pg = Postgres { db };
        let mut client = pg
            .client()
            .await
            .with_context(|| format!("connecting to PostgreSQL at {shown}"))?;
        schema::migrate(&mut client)
            .await
            .with_context(|| format!("bringing sandwit's tables in {shown} up to date"))?;
        Ok(pg)
    }

    /// A connection of the pool.
    async fn client(&self) -> Result<Conn, error::PgError> {
        Ok(self.db.get().await?)
    }
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.db.status();
        f.debug_struct("Postgres")
            .field("connections", &status.size)
            .field("max_connections", &status.max_size)
            .finish()
    }
}

#[cfg(test)]
mod tests;
