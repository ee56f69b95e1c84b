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
