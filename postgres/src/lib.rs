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

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

pub use sandwit::controls::SharedControls;
pub use sandwit::store::StoreBackend;

/// Connections a replica keeps to the database at most.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

/// How long an operation waits for a connection of the pool, and to make
/// one, before it fails: a database that does not answer fails the call
/// (the call's own deadline also bounds it), never hangs it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one statement may run on the server.
const STATEMENT_TIMEOUT: &str = "5s";

/// A pool of connections to one PostgreSQL database, with sandwit's tables
/// in it.
pub struct Postgres {
    pool: Pool,
}

impl Postgres {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// libpq's parameters such as `sslmode=require` after `?`), checks that it
    /// answers and brings sandwit's tables up to date. TLS, when the URL asks
    /// for it, checks the server's certificate against the web PKI's roots.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// [`Postgres::connect`], keeping at most `max_connections`.
    pub async fn connect_with(url: &str, max_connections: usize) -> anyhow::Result<Self> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| anyhow::anyhow!("the PostgreSQL URL is not valid: {e}"))?;
        let shown = shown(&config);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let options = config.get_options().unwrap_or_default().to_string();
        config.options(format!("{options} -c statement_timeout={STATEMENT_TIMEOUT}").trim());
        if config.get_application_name().is_none() {
            config.application_name("sandwit");
        }
        let manager = Manager::from_config(
            config,
            tls(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_connections.max(1))
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .runtime(Runtime::Tokio1)
            .build()
            .context("making the PostgreSQL connection pool")?;
        let pg = Postgres { pool };
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
    async fn client(&self) -> Result<deadpool_postgres::Client, error::PgError> {
        self.pool.get().await.map_err(error::PgError::from_pool)
    }
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("Postgres")
            .field("connections", &status.size)
            .field("max_connections", &status.max_size)
            .finish()
    }
}

/// The server and database `config` names, for messages: never the password.
fn shown(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().or(config.get_user()).unwrap_or("");
    format!("{host}:{port}/{db}")
}

/// TLS for the connections that ask for it: the web PKI's roots, ring.
fn tls() -> tokio_postgres_rustls::MakeRustlsConnect {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

#[cfg(test)]
mod tests;
