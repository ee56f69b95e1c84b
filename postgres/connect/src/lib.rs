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

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

pub use deadpool_postgres;
pub use tokio_postgres;

/// How a process's pool behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Connections kept at most.
    pub max_connections: usize,
    /// How long an operation waits for a connection of the pool, or to make
    /// one (a server that does not answer fails it, never hangs it).
    pub wait: Duration,
    /// The name the server shows for these connections (`pg_stat_activity`),
    /// unless the URL gives one.
    pub application_name: &'static str,
    /// How long one statement may run on the server (`statement_timeout`,
    /// e.g. `"5s"`), if bounded.
    pub statement_timeout: Option<&'static str>,
}

/// A pool of connections to the database at `url` under `settings`, and
/// the server's name for messages (`host:port/db`, no password). No
/// connection is made yet: the first `get` makes one.
pub fn pool(url: &str, settings: &Settings) -> anyhow::Result<(Pool, String)> {
    let (url, root_cert) = take_root_cert(url);
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| anyhow::anyhow!("the PostgreSQL URL is not valid: {e}"))?;
    let shown = shown(&config);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(settings.wait);
    }
    if let Some(timeout) = settings.statement_timeout {
        let options = config.get_options().unwrap_or_default().to_string();
        config.options(format!("{options} -c statement_timeout={timeout}").trim());
    }
    if config.get_application_name().is_none() {
        config.application_name(settings.application_name);
    }
    let tls = tls(root_cert.as_deref())
        .with_context(|| format!("the TLS settings of the PostgreSQL URL for {shown}"))?;
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
        .create_timeout(Some(settings.wait))
        .recycle_timeout(Some(settings.wait))
        .runtime(Runtime::Tokio1)
        .build()
        .context("making the PostgreSQL connection pool")?;
    Ok((pool, shown))
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
