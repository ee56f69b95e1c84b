//! [`SqliteStore`]: the plugin store in one SQLite file, in WAL mode with full
//! sync, so a committed write survives a crash of the process (or several
//! processes sharing the file).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::backend::{Entry, Namespace, StoreBackend, StoreError};
use sandwit_contract::policy::StoreLimits;
use sandwit_contract::types::ServiceFuture;

// An entry records the tenant whose quota it counts against (the writer's
// namespace, `''` without one); `tenant_usage` sums each tenant's entries
// per plugin.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    plugin TEXT NOT NULL,
    scope TEXT NOT NULL,
    owner TEXT NOT NULL,
    key TEXT NOT NULL,
    is_text INTEGER NOT NULL,
    value BLOB NOT NULL,
    tenant TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (plugin, scope, owner, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tenant_usage (
    plugin TEXT NOT NULL,
    tenant TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (plugin, tenant)
) WITHOUT ROWID;
";

/// Brings a store made before tenants had quotas of their own up to
/// [`SCHEMA`]: its entries and usage were all the tenant `''`'s. Idempotent.
fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let has_tenant: bool = tx.query_row(
        "SELECT count(*) FROM pragma_table_info('entries') WHERE name = 'tenant'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !has_tenant {
        tx.execute_batch("ALTER TABLE entries ADD COLUMN tenant TEXT NOT NULL DEFAULT '';")?;
    }
    let old_usage: bool = tx.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'usage'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if old_usage {
        tx.execute_batch(
            "INSERT OR IGNORE INTO tenant_usage (plugin, tenant, bytes)
                 SELECT plugin, '', bytes FROM usage;
             DROP TABLE usage;",
        )?;
    }
    tx.commit()
}

/// The embedded plugin store. Cheap to share behind an `Arc`; operations are
/// serialised on one connection, each on tokio's blocking threads (a
/// commit waits for the disk).
pub struct SqliteStore {
    db: Arc<Db>,
}

/// The connection, and the operations on it.
struct Db {
    conn: Mutex<Connection>,
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let conn = Connection::open(path)
            .map_err(|e| StoreError::Backend(format!("cannot open {}: {e}", path.display())))?;
        Self::init(conn, true)
    }

    /// A store in memory, gone when dropped.
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::init(Connection::open_in_memory().map_err(backend)?, false)
    }

    fn init(conn: Connection, wal: bool) -> Result<Self, StoreError> {
        conn.busy_timeout(Duration::from_secs(5)).map_err(backend)?;
        if wal {
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(backend)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError::Backend(format!(
                    "the database would not switch to WAL mode (it is in {mode} mode)"
                )));
            }
        }
        conn.execute_batch("PRAGMA synchronous = FULL;")
            .map_err(backend)?;
        conn.execute_batch(SCHEMA).map_err(backend)?;
        let mut conn = conn;
        migrate(&mut conn).map_err(backend)?;
        Ok(SqliteStore {
            db: Arc::new(Db {
                conn: Mutex::new(conn),
            }),
        })
    }

    /// Runs `op` on the connection on a blocking thread.
    fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    ) -> ServiceFuture<'static, Result<T, StoreError>> {
        let db = self.db.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || op(&db))
                .await
                .map_err(|e| StoreError::Backend(format!("the store's thread failed: {e}")))?
        })
    }
}

impl StoreBackend for SqliteStore {
    fn get<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
    ) -> ServiceFuture<'a, Result<Option<Entry>, StoreError>> {
        let (ns, key) = (ns.clone(), key.to_owned());
        self.blocking(move |db| db.get(&ns, &key))
    }

    fn set<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
        value: &'a Entry,
        limits: &'a StoreLimits,
    ) -> ServiceFuture<'a, Result<(), StoreError>> {
        let (ns, key, value, limits) = (ns.clone(), key.to_owned(), value.clone(), *limits);
        self.blocking(move |db| db.write(&ns, &key, None, &value, &limits).map(drop))
    }

    fn swap<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
        current: Option<&'a Entry>,
        value: Option<&'a Entry>,
        limits: &'a StoreLimits,
    ) -> ServiceFuture<'a, Result<bool, StoreError>> {
        let (ns, key, value, limits) = (ns.clone(), key.to_owned(), value.cloned(), *limits);
        let current = Some(current.cloned());
        self.blocking(move |db| match &value {
            Some(value) => db.write(&ns, &key, current.as_ref(), value, &limits),
            None => db.remove(&ns, &key, current.as_ref()),
        })
    }

    fn delete<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
    ) -> ServiceFuture<'a, Result<bool, StoreError>> {
        let (ns, key) = (ns.clone(), key.to_owned());
        self.blocking(move |db| db.remove(&ns, &key, None))
    }

    fn keys<'a>(
        &'a self,
        ns: &'a Namespace,
        max: usize,
    ) -> ServiceFuture<'a, Result<Vec<String>, StoreError>> {
        let ns = ns.clone();
        self.blocking(move |db| db.keys(&ns, max))
    }

    fn usage<'a>(&'a self, plugin: &'a str) -> ServiceFuture<'a, Result<u64, StoreError>> {
        let plugin = plugin.to_owned();
        self.blocking(move |db| db.usage(&plugin))
    }
}

/// What an entry of `ns` counts for ([`Namespace::entry_bytes`]), with
/// `key_value` as SQL's `length` of the key and value as BLOBs: their bytes.
fn entry_bytes(ns: &Namespace, key_value: i64) -> i64 {
    ns.entry_bytes(key_value.max(0) as u64) as i64
}

/// Takes `bytes` off `tenant`'s usage of `plugin`.
fn release(
    tx: &rusqlite::Transaction<'_>,
    plugin: &str,
    tenant: &str,
    bytes: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE tenant_usage SET bytes = max(0, bytes - ?3) WHERE plugin = ?1 AND tenant = ?2",
        params![plugin, tenant, bytes],
    )
    .map(drop)
    .map_err(backend)
}

/// The entry of `ns` under `key`, if any.
fn read(conn: &Connection, ns: &Namespace, key: &str) -> Result<Option<Entry>, StoreError> {
    conn.query_row(
        "SELECT is_text, value FROM entries
         WHERE plugin = ?1 AND scope = ?2 AND owner = ?3 AND key = ?4",
        params![ns.plugin, ns.scope.as_str(), ns.owner, key],
        |r| {
            let is_text: bool = r.get(0)?;
            let bytes: Vec<u8> = r.get(1)?;
            Ok((is_text, bytes))
        },
    )
    .optional()
    .map_err(backend)?
    .map(|(is_text, bytes)| {
        if is_text {
            String::from_utf8(bytes)
                .map(Entry::Text)
                .map_err(|_| StoreError::Backend("a text value is not UTF-8".into()))
        } else {
            Ok(Entry::Bytes(bytes))
        }
    })
    .transpose()
}

impl Db {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn)
    }

    fn get(&self, ns: &Namespace, key: &str) -> Result<Option<Entry>, StoreError> {
        self.with(|conn| read(conn, ns, key))
    }

    /// Stores `value` under `key`, if `expected` is `None` or holds the
    /// key's value now (`Some(None)`: none): whether it did.
    fn write(
        &self,
        ns: &Namespace,
        key: &str,
        expected: Option<&Option<Entry>>,
        value: &Entry,
        limits: &StoreLimits,
    ) -> Result<bool, StoreError> {
        let (is_text, bytes) = match value {
            Entry::Text(t) => (true, t.as_bytes()),
            Entry::Bytes(b) => (false, b.as_slice()),
        };
        self.with(|conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            // The transaction holds the write lock: nothing changes the
            // entry between this read and the write.
            if let Some(expected) = expected
                && read(&tx, ns, key)? != *expected
            {
                return Ok(false);
            }
            // The entry it replaces, and whose quota that one counted in.
            let old: Option<(i64, String)> = tx
                .query_row(
                    "SELECT length(CAST(key AS BLOB)) + length(value), tenant FROM entries
                     WHERE plugin = ?1 AND scope = ?2 AND owner = ?3 AND key = ?4",
                    params![ns.plugin, ns.scope.as_str(), ns.owner, key],
                    |r| Ok((entry_bytes(ns, r.get(0)?), r.get(1)?)),
                )
                .optional()
                .map_err(backend)?;
            let used: i64 = tx
                .query_row(
                    "SELECT bytes FROM tenant_usage WHERE plugin = ?1 AND tenant = ?2",
                    params![ns.plugin, ns.tenant],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?
                .unwrap_or(0);
            let replaced = match &old {
                Some((old_bytes, tenant)) if *tenant == ns.tenant => *old_bytes,
                _ => 0,
            };
            let new_used = used - replaced + entry_bytes(ns, (key.len() + bytes.len()) as i64);
            if new_used as u64 > limits.max_plugin_bytes {
                return Err(ns.over_quota(new_used as u64, limits));
            }
            tx.execute(
                "INSERT INTO entries (plugin, scope, owner, key, is_text, value, tenant)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (plugin, scope, owner, key)
                 DO UPDATE SET is_text = excluded.is_text, value = excluded.value,
                               tenant = excluded.tenant",
                params![
                    ns.plugin,
                    ns.scope.as_str(),
                    ns.owner,
                    key,
                    is_text,
                    bytes,
                    ns.tenant
                ],
            )
            .map_err(backend)?;
            tx.execute(
                "INSERT INTO tenant_usage (plugin, tenant, bytes) VALUES (?1, ?2, ?3)
                 ON CONFLICT (plugin, tenant) DO UPDATE SET bytes = excluded.bytes",
                params![ns.plugin, ns.tenant, new_used],
            )
            .map_err(backend)?;
            // An entry another tenant had written (a trusted caller may
            // write in any namespace's chats) leaves that tenant's quota.
            if let Some((old_bytes, tenant)) = old.filter(|(_, t)| *t != ns.tenant) {
                release(&tx, &ns.plugin, &tenant, old_bytes)?;
            }
            tx.commit().map_err(backend)?;
            Ok(true)
        })
    }

    /// Removes `key`, if `expected` is `None` (then: whether it was there)
    /// or holds the key's value now (then: whether it did).
    fn remove(
        &self,
        ns: &Namespace,
        key: &str,
        expected: Option<&Option<Entry>>,
    ) -> Result<bool, StoreError> {
        self.with(|conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            if let Some(expected) = expected
                && read(&tx, ns, key)? != *expected
            {
                return Ok(false);
            }
            let old: Option<(i64, String)> = tx
                .query_row(
                    "DELETE FROM entries
                     WHERE plugin = ?1 AND scope = ?2 AND owner = ?3 AND key = ?4
                     RETURNING length(CAST(key AS BLOB)) + length(value), tenant",
                    params![ns.plugin, ns.scope.as_str(), ns.owner, key],
                    |r| Ok((entry_bytes(ns, r.get(0)?), r.get(1)?)),
                )
                .optional()
                .map_err(backend)?;
            if let Some((old_bytes, tenant)) = &old {
                release(&tx, &ns.plugin, tenant, *old_bytes)?;
            }
            tx.commit().map_err(backend)?;
            Ok(expected.is_some() || old.is_some())
        })
    }

    fn keys(&self, ns: &Namespace, max: usize) -> Result<Vec<String>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT key FROM entries WHERE plugin = ?1 AND scope = ?2 AND owner = ?3
                     ORDER BY key LIMIT ?4",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map(
                    params![ns.plugin, ns.scope.as_str(), ns.owner, max as i64],
                    |r| r.get(0),
                )
                .map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)
        })
    }

    fn usage(&self, plugin: &str) -> Result<u64, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT coalesce(sum(bytes), 0) FROM tenant_usage WHERE plugin = ?1",
                [plugin],
                |r| r.get::<_, i64>(0),
            )
            .map_err(backend)
            .map(|b| b.max(0) as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::store::Scope;

    fn ns(plugin: &str, scope: Scope, owner: &str) -> Namespace {
        Namespace {
            plugin: plugin.into(),
            scope,
            owner: owner.into(),
            tenant: String::new(),
        }
    }

    #[tokio::test]
    async fn passes_the_backend_checks() {
        let store = SqliteStore::in_memory().unwrap();
        crate::store::conformance::check_backend(&store, "").await;
    }

    /// A store made before tenants had quotas keeps its entries and their
    /// usage, as the tenant `''`'s.
    #[test]
    fn a_store_from_before_tenant_quotas_is_migrated() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE entries (plugin TEXT NOT NULL, scope TEXT NOT NULL,
                 owner TEXT NOT NULL, key TEXT NOT NULL, is_text INTEGER NOT NULL,
                 value BLOB NOT NULL, PRIMARY KEY (plugin, scope, owner, key)) WITHOUT ROWID;
             CREATE TABLE usage (plugin TEXT PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO entries VALUES ('notes', 'chat', 'c', 'k', 1, CAST('v' AS BLOB));
             INSERT INTO usage VALUES ('notes', 67);",
        )
        .unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let s = SqliteStore::init(conn, false).unwrap().db;
        let c = ns("notes", Scope::Chat, "c");
        assert_eq!(s.get(&c, "k").unwrap(), Some(Entry::Text("v".into())));
        assert_eq!(s.usage("notes").unwrap(), 67);
        assert!(s.remove(&c, "k", None).unwrap());
        assert_eq!(s.usage("notes").unwrap(), 0);
    }
}
