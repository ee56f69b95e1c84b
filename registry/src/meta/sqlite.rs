//! The metadata in one SQLite file, `DIR/registry.db` (the default), in WAL
//! mode (readers never wait for the writer, and a killed process loses no
//! committed publish), with its schema's version in `schema_version`.

use std::path::Path;
use std::sync::Mutex;

use anyhow::Context;
use rusqlite::Connection;

use super::conn::{Conn, Dialect, Param, Row, Value, new_registry_id};
use crate::error::{Error, Result};

/// The schema this code reads and writes.
const SCHEMA_VERSION: i64 = 4;

const SCHEMA: &str = r#"
CREATE TABLE accounts (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('admin', 'publisher')),
    created_at INTEGER NOT NULL
);
-- Tokens are kept only as their SHA-256.
CREATE TABLE tokens (
    hash BLOB PRIMARY KEY,
    account INTEGER NOT NULL REFERENCES accounts(id),
    created_at INTEGER NOT NULL
);
-- A key belongs to one account: it names the signer of what it signed.
CREATE TABLE keys (
    public_key TEXT PRIMARY KEY,
    account INTEGER NOT NULL REFERENCES accounts(id),
    created_at INTEGER NOT NULL
);
-- `latest`: the highest version not yanked (NULL when all are), kept
-- up to date by publish, yank and unyank, so search is one query.
CREATE TABLE plugins (
    id TEXT PRIMARY KEY,
    latest TEXT,
    created_at INTEGER NOT NULL
);
CREATE TABLE owners (
    plugin TEXT NOT NULL REFERENCES plugins(id),
    account INTEGER NOT NULL REFERENCES accounts(id),
    PRIMARY KEY (plugin, account)
);
-- One row per published (id, version), immutable but for `yanked`.
-- `search_text`: id, name, description, method names and docstrings,
-- lowercased; `kinds` and `capabilities`: JSON arrays of strings.
CREATE TABLE versions (
    plugin TEXT NOT NULL REFERENCES plugins(id),
    version TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    signer TEXT NOT NULL,
    signature TEXT NOT NULL,
    publisher INTEGER NOT NULL REFERENCES accounts(id),
    yanked INTEGER NOT NULL DEFAULT 0,
    published_at INTEGER NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    manifest TEXT NOT NULL,
    kinds TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    search_text TEXT NOT NULL,
    PRIMARY KEY (plugin, version)
);
CREATE INDEX versions_by_digest ON versions(digest);
"#;

/// From version 1 to 2: owners are invited and accept, rather than added.
const TO_2: &str = r#"
-- An invitation to own a plugin, until its account accepts (then it is
-- an owner) or an owner withdraws it.
CREATE TABLE owner_invitations (
    plugin TEXT NOT NULL REFERENCES plugins(id),
    account INTEGER NOT NULL REFERENCES accounts(id),
    invited_by INTEGER NOT NULL REFERENCES accounts(id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (plugin, account)
);
"#;

/// From version 2 to 3: the registry's id (what key registrations sign),
/// key revocation, and search through an FTS5 index.
const TO_3: &str = r#"
-- One row: the id key registrations name, so a proof made for another
-- registry is refused here.
CREATE TABLE registry (id TEXT NOT NULL);
-- When the account revoked the key (NULL: not revoked). A revoked key
-- stays the account's: it names the signer of what it signed.
ALTER TABLE keys ADD COLUMN revoked_at INTEGER;
-- Search over `versions.search_text` (an external-content index kept by
-- the triggers below). The trigram tokenizer matches any substring of at
-- least three characters, as the search did before the index.
CREATE VIRTUAL TABLE versions_search USING fts5(
    search_text, content='versions', content_rowid='rowid', tokenize='trigram'
);
INSERT INTO versions_search (versions_search) VALUES ('rebuild');
CREATE TRIGGER versions_search_insert AFTER INSERT ON versions BEGIN
    INSERT INTO versions_search (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
CREATE TRIGGER versions_search_delete AFTER DELETE ON versions BEGIN
    INSERT INTO versions_search (versions_search, rowid, search_text)
        VALUES ('delete', old.rowid, old.search_text);
END;
CREATE TRIGGER versions_search_update AFTER UPDATE OF search_text ON versions BEGIN
    INSERT INTO versions_search (versions_search, rowid, search_text)
        VALUES ('delete', old.rowid, old.search_text);
    INSERT INTO versions_search (rowid, search_text) VALUES (new.rowid, new.search_text);
END;
"#;

/// From version 3 to 4: blobs held by publishes under way, so a failed
/// publish removes its blob only when no other holds it.
const TO_4: &str = r#"
-- One row per publish between writing its blob and committing its version
-- (or giving up): a blob with a hold is never removed. A row left by a
-- process that died keeps its blob for good (stored bytes, never a
-- version naming missing ones).
CREATE TABLE blob_holds (
    id INTEGER PRIMARY KEY,
    digest TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX blob_holds_by_digest ON blob_holds(digest);
"#;

/// Moves a version 2 database to version 3 (within `tx`).
fn to_3(tx: &rusqlite::Transaction<'_>) -> anyhow::Result<()> {
    tx.execute_batch(TO_3)?;
    tx.execute(
        "INSERT INTO registry (id) VALUES (?1)",
        [new_registry_id()?],
    )?;
    Ok(())
}

/// The registry's id (made when its database was made, or moved to schema
/// version 3).
fn registry_id(conn: &Connection) -> rusqlite::Result<String> {
    conn.query_row("SELECT id FROM registry", [], |r| r.get(0))
}

/// Opens (creating if need be) the metadata database at `path`.
fn open(path: &Path) -> anyhow::Result<Connection> {
    let mut conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    anyhow::ensure!(
        mode.eq_ignore_ascii_case("wal"),
        "{}: SQLite refused WAL mode (got {mode})",
        path.display()
    );
    conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;")?;
    migrate(&mut conn).with_context(|| format!("the schema of {}", path.display()))?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
    let version: Option<i64> =
        tx.query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))?;
    // Each step moves the schema one version up; a new database takes
    // them all.
    let from = match version {
        None => {
            tx.execute_batch(SCHEMA)?;
            1
        }
        Some(v) if (1..=SCHEMA_VERSION).contains(&v) => v,
        Some(v) => anyhow::bail!(
            "schema version {v} is not {SCHEMA_VERSION}, the one this sandwit knows \
             (made by a newer sandwit?)"
        ),
    };
    if from < 2 {
        tx.execute_batch(TO_2)?;
    }
    if from < 3 {
        to_3(&tx)?;
    }
    if from < 4 {
        tx.execute_batch(TO_4)?;
    }
    if from < SCHEMA_VERSION {
        tx.execute("INSERT INTO schema_version VALUES (?1)", [SCHEMA_VERSION])?;
    }
    tx.commit()?;
    Ok(())
}

/// The metadata in a SQLite file: one connection, its calls made one at a
/// time.
pub struct Sqlite {
    conn: Mutex<Connection>,
    id: String,
}

impl Sqlite {
    /// Opens (creating, or moving to the current schema, if need be) the
    /// database at `path`.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let conn = open(path)?;
        let id = registry_id(&conn)
            .with_context(|| format!("reading the registry's id in {}", path.display()))?;
        Ok(Sqlite {
            conn: Mutex::new(conn),
            id,
        })
    }

    /// The registry's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Runs `f` on the connection, each statement committed on its own.
    pub fn read<T>(&self, f: impl FnOnce(&mut dyn Conn) -> Result<T>) -> Result<T> {
        let conn = self.lock();
        f(&mut SqliteConn(&conn))
    }

    /// Runs `f` in an immediate transaction (SQLite's write lock, taken at
    /// its start: writers run one at a time, in this process or any other
    /// on the file), committed when `f` returns `Ok`.
    pub fn write<T>(&self, f: impl FnOnce(&mut dyn Conn) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let value = f(&mut SqliteConn(&tx))?;
        tx.commit()?;
        Ok(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (every
        // change is in a transaction, rolled back when dropped): the lock is
        // still usable.
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A connection (or a transaction, which derefs to one).
struct SqliteConn<'a>(&'a Connection);

impl Conn for SqliteConn<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Param]) -> Result<u64> {
        let changed = self
            .0
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(params))?;
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &str, params: &[Param]) -> Result<Vec<Row>> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let columns = stmt.column_count();
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params), |r| {
                (0..columns)
                    .map(|i| {
                        Ok(match r.get_ref(i)? {
                            rusqlite::types::ValueRef::Null => Value::Null,
                            rusqlite::types::ValueRef::Integer(v) => Value::Int(v),
                            rusqlite::types::ValueRef::Text(t) => {
                                Value::Text(String::from_utf8_lossy(t).into_owned())
                            }
                            // The registry reads no bytes (token hashes are
                            // only compared) and stores no real numbers.
                            rusqlite::types::ValueRef::Blob(_) => {
                                return Err(rusqlite::Error::InvalidColumnType(
                                    i,
                                    "bytes".into(),
                                    rusqlite::types::Type::Blob,
                                ));
                            }
                            rusqlite::types::ValueRef::Real(_) => {
                                return Err(rusqlite::Error::InvalidColumnType(
                                    i,
                                    "a real number".into(),
                                    rusqlite::types::Type::Real,
                                ));
                            }
                        })
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(Row)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }
}

impl rusqlite::ToSql for Param {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Param::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Param::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Param::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Param::Bytes(v) => ToSqlOutput::Borrowed(ValueRef::Blob(v)),
            Param::Bool(v) => ToSqlOutput::Borrowed(ValueRef::Integer(i64::from(*v))),
        })
    }
}

/// A SQLite failure as an internal error.
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Internal(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made by schema version 1 gets version 2's table of owner
    /// invitations, version 3's registry id, key revocation and search
    /// index (of the versions it had), and version 4's blob holds, keeping
    /// its rows.
    #[test]
    fn a_version_1_database_is_migrated() {
        let dir = crate::scratch::ScratchDir::new("migrate");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("registry.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            conn.execute_batch(
                "CREATE TABLE schema_version (version INTEGER NOT NULL);
                 INSERT INTO schema_version VALUES (1);
                 INSERT INTO accounts (name, role, created_at) VALUES ('alice', 'publisher', 0);
                 INSERT INTO plugins (id, latest, created_at) VALUES ('calc', '1.0.0', 0);
                 INSERT INTO versions (plugin, version, digest, size, signer, signature,
                     publisher, published_at, name, description, manifest, kinds,
                     capabilities, search_text)
                 VALUES ('calc', '1.0.0', 'sha256:0', 1, '', '', 1, 0, 'Calc', '', '{}',
                     '[]', '[]', 'calc\nadds numbers');",
            )
            .unwrap();
        }
        let conn = open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let invitations: i64 = conn
            .query_row("SELECT count(*) FROM owner_invitations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(invitations, 0);
        let accounts: i64 = conn
            .query_row("SELECT count(*) FROM accounts", [], |r| r.get(0))
            .unwrap();
        assert_eq!(accounts, 1);
        assert!(registry_id(&conn).unwrap().starts_with("swreg_"));
        let found: i64 = conn
            .query_row(
                "SELECT count(*) FROM versions_search WHERE versions_search MATCH '\"numb\"'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(found, 1, "the version the database had is indexed");
        let revoked: Option<i64> = conn
            .query_row("SELECT max(revoked_at) FROM keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(revoked, None);
        let holds: i64 = conn
            .query_row("SELECT count(*) FROM blob_holds", [], |r| r.get(0))
            .unwrap();
        assert_eq!(holds, 0);
        let id = registry_id(&conn).unwrap();
        drop(conn);
        // Opened again: already at the current version, with the same id.
        assert_eq!(Sqlite::open(&path).unwrap().id(), id);
    }
}
