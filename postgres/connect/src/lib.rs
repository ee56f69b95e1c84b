//! How sandwit's servers connect to PostgreSQL: a pool of connections with
//! bounded waits, TLS that checks the server's certificate, and messages
//! that name the server, never the password. The runtime's backends
//! (`sandwit-postgres`) and the registry's metadata both connect through
//! [`pool`], so a URL means the same to each.
//!
//! The URL is libpq's (`postgres://user:password@host:port/db?...`), with
//! its parameters as tokio-postgres reads them, and one more:
//! `sslrootcert=FILE`, the PEM certificates of the authority that signed the
//! server's (a managed database's own CA, a private one). Without it the
//! server's certificate is checked against the web PKI's roots. TLS is used
//! when the server offers it (`sslmode=prefer`, the default) or required
//! (`sslmode=require`); either way a certificate that does not check out
//! fails the connection, never falls back to plain text.
//!
//! A server that stops answering (a network partition, a hung host) fails
//! operations instead of stalling them: making a connection and each
//! statement are bounded on the client ([`Settings::answer_timeout`]),
//! whatever the network does; a connection whose statement got no answer
//! is closed, never handed out again; and for [`REFUSED_FOR`] after such a
//! timeout operations are refused at once (`db.rs`). TCP keepalives and
//! `TCP_USER_TIMEOUT` let the kernel close the idle connections of a peer
//! that is gone, so the pool does not hand them out.

mod db;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

pub use db::{Conn, Db, Error, REFUSED_FOR, Tx};
pub use tokio_postgres;

/// How a process's pool behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Connections kept at most.
    pub max_connections: usize,
    /// How long an operation waits for one of the pool's connections to be
    /// free.
    pub wait: Duration,
    /// How long the server has to answer: to make a connection (TCP, TLS
    /// and authentication: the connect timeout), and to answer each
    /// statement (the client-side statement timeout, which holds when the
    /// server or the network says nothing at all).
    pub answer_timeout: Duration,
    /// The name the server shows for these connections (`pg_stat_activity`),
    /// unless the URL gives one.
    pub application_name: &'static str,
    /// How long one statement may run on the server (`statement_timeout`,
    /// e.g. `"5s"`), if bounded: below `answer_timeout`, so that the server
    /// cancels a slow statement (the connection stays usable) before the
    /// client gives up on it.
    pub statement_timeout: Option<&'static str>,
}

/// Idle time before the kernel probes a connection, the time between
/// probes, and the probes unanswered before it closes the connection: an
/// idle connection to a peer that is gone is closed within 25 s.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;

/// How long data sent may stay unacknowledged before the kernel closes the
/// connection (Linux's `TCP_USER_TIMEOUT`; it also bounds the keepalive
/// probes above).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(25);

/// A pool of connections to the database at `url` under `settings`. No
/// connection is made yet: the first [`Db::get`] makes one. The URL's own
/// `connect_timeout`, `keepalives*` and `tcp_user_timeout` are kept.
pub fn pool(url: &str, settings: &Settings) -> anyhow::Result<Db> {
    let (config, root_cert) = config(url, settings)?;
    let shown = shown(&config);
    let tls = tls(root_cert.as_deref())
        .with_context(|| format!("the TLS settings of the PostgreSQL URL for {shown}"))?;
    // A connection is handed out again unless it is closed: one whose
    // statement went unanswered is closed by `Conn` (`db.rs`), one whose
    // peer vanished while it was idle by the kernel (the keepalives).
    let manager = Manager::from_config(
        config,
        tls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(settings.max_connections.max(1))
        .wait_timeout(Some(settings.wait))
        .create_timeout(Some(settings.answer_timeout))
        .recycle_timeout(Some(settings.answer_timeout))
        .runtime(Runtime::Tokio1)
        .build()
        .context("making the PostgreSQL connection pool")?;
    Ok(Db::new(pool, shown, settings))
}

/// The client's configuration for `url` under `settings`, and the file
/// its `sslrootcert` names.
fn config(
    url: &str,
    settings: &Settings,
) -> anyhow::Result<(tokio_postgres::Config, Option<String>)> {
    let (url, root_cert) = take_root_cert(url);
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| anyhow::anyhow!("the PostgreSQL URL is not valid: {e}"))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(settings.answer_timeout);
    }
    if !url.contains("keepalives_idle") {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if !url.contains("keepalives_interval") {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if !url.contains("keepalives_retries") {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    if let Some(timeout) = settings.statement_timeout {
        let options = config.get_options().unwrap_or_default().to_string();
        config.options(format!("{options} -c statement_timeout={timeout}").trim());
    }
    if config.get_application_name().is_none() {
        config.application_name(settings.application_name);
    }
    Ok((config, root_cert))
}

/// `url` without its `sslrootcert` parameter (which tokio-postgres does not
/// read), and that parameter's file.
fn take_root_cert(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut root_cert = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("sslrootcert=") {
            Some(file) => {
                root_cert = Some(file.to_string());
                false
            }
            None => true,
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, root_cert)
}

/// The server and database `config` names, for messages: never the password.
pub fn shown(config: &tokio_postgres::Config) -> String {
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

/// TLS for the connections that use it: the certificates in `root_cert`
/// (PEM) if given, else the web PKI's roots; ring.
fn tls(root_cert: Option<&str>) -> anyhow::Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let roots = match root_cert {
        None => rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        },
        Some(file) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(file)
                .with_context(|| format!("reading sslrootcert {file}"))?;
            for cert in certs {
                let cert = cert.with_context(|| format!("reading sslrootcert {file}"))?;
                roots
                    .add(cert)
                    .with_context(|| format!("a certificate of sslrootcert {file}"))?;
            }
            anyhow::ensure!(!roots.is_empty(), "sslrootcert {file} holds no certificate");
            roots
        }
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests;
