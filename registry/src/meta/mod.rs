//! The registry's metadata (accounts, tokens, keys, plugins, owners,
//! versions, yanks, blob holds): in a SQLite file by default, or in a
//! PostgreSQL database that several replicas share. The registry's logic
//! runs on either through [`Conn`]; only the SQL each backend speaks, and
//! its schema and migrations, differ.

pub(crate) mod conn;
mod postgres;
mod sqlite;

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) use conn::params;
pub use conn::{Conn, Param};

use sandwit_contract::capability::Capability;

use crate::driver::Driver;
use crate::error::Result;

/// Where the metadata is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Database {
    /// The SQLite file `registry.db` in the registry's directory.
    #[default]
    Sqlite,
    /// The PostgreSQL database at this URL
    /// (`postgres://user[:password]@host[:port]/database`).
    Postgres(String),
}

impl std::str::FromStr for Database {
    type Err = String;

    /// `postgres://...` or `postgresql://...`: that database; `sqlite`:
    /// the file in the registry's directory.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "sqlite" {
            Ok(Database::Sqlite)
        } else if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Ok(Database::Postgres(s.to_string()))
        } else {
            Err(format!(
                "{} is neither a PostgreSQL URL (postgres://user@host:port/database) nor \
                 `sqlite`",
                crate::names::quote(s)
            ))
        }
    }
}

/// An open metadata database.
pub enum Meta {
    /// A SQLite file.
    Sqlite(sqlite::Sqlite),
    /// A PostgreSQL database.
    Postgres(postgres::Postgres),
}

impl Meta {
    /// Opens `database` (creating its tables if need be): SQLite's file is
    /// `dir/registry.db`; PostgreSQL's connections get a [`Driver`] of their
    /// own. Call it where [`Driver::block_on`] may be called.
    pub fn open(database: &Database, dir: &Path) -> anyhow::Result<Self> {
        Ok(match database {
            Database::Sqlite => Meta::Sqlite(sqlite::Sqlite::open(&dir.join("registry.db"))?),
            Database::Postgres(url) => {
                Meta::Postgres(postgres::Postgres::open(url, Arc::new(Driver::new()?))?)
            }
        })
    }

    /// The registry's id, made with its database.
    pub fn id(&self) -> &str {
        match self {
            Meta::Sqlite(db) => db.id(),
            Meta::Postgres(db) => db.id(),
        }
    }

    /// Runs `f` on a connection, each statement committed on its own. Call
    /// it where [`Driver::block_on`] may be called (`f` may block).
    pub fn read<T>(&self, f: impl FnOnce(&mut dyn Conn) -> Result<T>) -> Result<T> {
        match self {
            Meta::Sqlite(db) => db.read(f),
            Meta::Postgres(db) => db.read(f),
        }
    }

    /// Runs `f` in a write transaction, committed when `f` returns `Ok` and
    /// rolled back otherwise. Write transactions run one at a time on the
    /// database, from any process: what `f` reads stays true until it
    /// commits. Call it where [`Driver::block_on`] may be called.
    pub fn write<T>(&self, f: impl FnOnce(&mut dyn Conn) -> Result<T>) -> Result<T> {
        match self {
            Meta::Sqlite(db) => db.write(f),
            Meta::Postgres(db) => db.write(f),
        }
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Seconds since the Unix epoch as RFC 3339 (UTC).
pub fn rfc3339(secs: i64) -> String {
    let time = UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string()
}

/// A version to commit, as its row of `versions` holds it.
pub struct NewVersion {
    /// The plugin id.
    pub plugin: String,
    /// The version.
    pub version: String,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// The component's size in bytes.
    pub size: u64,
    /// The registered key the signature verified with.
    pub signer: String,
    /// The signature (base64).
    pub signature: String,
    /// The publishing account's id.
    pub publisher: i64,
    /// The manifest's name.
    pub name: String,
    /// The manifest's description.
    pub description: String,
    /// The manifest, as JSON text.
    pub manifest: String,
    /// The kinds of its methods, sorted, each once.
    pub kinds: Vec<String>,
    /// Its capabilities, as the manifest lists them.
    pub capabilities: Vec<Capability>,
    /// The lowercased text a search matches against.
    pub search_text: String,
}

/// Inserts `version`, published now; with `new_plugin`, its plugin too
/// (no latest version yet), owned by the publisher. The caller has
/// checked, in the same write transaction, that the publisher may publish
/// it.
pub fn insert_version(conn: &mut dyn Conn, version: &NewVersion, new_plugin: bool) -> Result<()> {
    let now = now();
    if new_plugin {
        conn.execute(
            "INSERT INTO plugins (id, latest, created_at) VALUES (?1, NULL, ?2)",
            params![&version.plugin, now],
        )?;
        conn.execute(
            "INSERT INTO owners (plugin, account) VALUES (?1, ?2)",
            params![&version.plugin, version.publisher],
        )?;
    }
    conn.execute(
        "INSERT INTO versions (plugin, version, digest, size, signer, signature,
             publisher, published_at, name, description, manifest, kinds,
             capabilities, search_text)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            &version.plugin,
            &version.version,
            &version.digest,
            version.size as i64,
            &version.signer,
            &version.signature,
            version.publisher,
            now,
            &version.name,
            &version.description,
            &version.manifest,
            serde_json::to_string(&version.kinds).map_err(anyhow::Error::from)?,
            serde_json::to_string(&version.capabilities).map_err(anyhow::Error::from)?,
            &version.search_text,
        ],
    )?;
    Ok(())
}
