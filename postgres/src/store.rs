//! The plugin store in PostgreSQL: the SQLite store's rows, quotas and
//! atomicity, and a `set` that returned is committed.
//!
//! A write is one transaction that first locks its tenant's usage row
//! (`FOR UPDATE`, made if missing), so the writes counted against one quota
//! queue behind each other on any replica and each reads the usage the last
//! one left; then the entry it replaces. Under READ COMMITTED each statement
//! sees what committed before it, so a queued writer reads fresh values
//! instead of failing as a SERIALIZABLE one would (many writers of one
//! tenant made most of them fail). The one race row locks cannot close, two
//! tenants inserting one new key at once, is seen (the upsert updated a row
//! the transaction did not find) and the transaction runs again, as it does
//! after a deadlock.

use sandwit::ServiceFuture;
use sandwit::policy::StoreLimits;
use sandwit::store::{Entry, Namespace, StoreBackend, StoreError};
use sandwit_postgres_connect::{Conn, Tx};
use tokio_postgres::IsolationLevel;

use crate::Postgres;
use crate::error::PgError;

/// How often a transaction that lost to a concurrent one is run again
/// before the operation fails.
const RETRIES: usize = 16;

impl Postgres {
    /// Runs `op` on a connection of the pool, again from the start (on
    /// another connection, after a short random pause) when its transaction
    /// lost to a concurrent one. `op` runs one transaction ([`begin`]),
    /// committed when it returns `Ok(Ok(_))`.
    async fn transaction<T, F>(&self, op: impl Fn(Conn) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<Result<T, StoreError>, PgError>>,
    {
        let mut tries = 0;
        loop {
            match op(self.client().await?).await {
                Ok(result) => return result,
                Err(e) if e.is_retryable() && tries < RETRIES => {
                    tries += 1;
                    tokio::time::sleep(backoff(tries)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Stores `value` under `key`, if `expected` is `None` or holds the
    /// key's value now (`Some(None)`: none): whether it did.
    async fn write(
        &self,
        ns: &Namespace,
        key: &str,
        expected: Option<Option<&Entry>>,
        value: &Entry,
        limits: &StoreLimits,
    ) -> Result<bool, StoreError> {
        let (is_text, value) = bytes(value);
        let (owner, key, tenant) = (ns.owner.as_bytes(), key.as_bytes(), ns.tenant.as_bytes());
        let scope = ns.scope.as_str();
        let written = ns.entry_bytes((key.len() + value.len()) as u64);
        self.transaction(move |mut client| async move {
            let tx = begin(&mut client).await?;
            tx.execute(ENSURE_USAGE, &[&ns.plugin, &tenant]).await?;
            let used: i64 = tx
                .query_one(LOCK_USAGE, &[&ns.plugin, &tenant])
                .await?
                .get(0);
            // The entry is locked until the write commits; a key inserted
            // meanwhile is the race below, and the run again compares
            // with what was inserted.
            if let Some(expected) = expected {
                match holds(&tx, (ns, key), expected).await? {
                    Ok(true) => {}
                    Ok(false) => return Ok(Ok(false)),
                    Err(e) => return Ok(Err(e)),
                }
            }
            let old = tx
                .query_opt(SELECT_OLD, &[&ns.plugin, &scope, &owner, &key])
                .await?
                .map(|row| {
                    let key_value: i32 = row.get(0);
                    let tenant: Vec<u8> = row.get(1);
                    (to_i64(ns.entry_bytes(key_value.max(0) as u64)), tenant)
                });
            let replaced = match &old {
                Some((old_bytes, old_tenant)) if old_tenant == tenant => *old_bytes,
                _ => 0,
            };
            let new_used = (used - replaced).max(0) + to_i64(written);
            if new_used as u64 > limits.max_plugin_bytes {
                return Ok(Err(ns.over_quota(new_used as u64, limits)));
            }
            let inserted: bool = tx
                .query_one(
                    UPSERT_ENTRY,
                    &[&ns.plugin, &scope, &owner, &key, &is_text, &value, &tenant],
                )
                .await?
                .get(0);
            if old.is_none() && !inserted {
                // Another transaction inserted the key after this one
                // looked: what it replaced is not counted. Run again.
                return Err(PgError::lost_race());
            }
            tx.execute(SET_USAGE, &[&ns.plugin, &tenant, &new_used])
                .await?;
            // An entry another tenant had written leaves that tenant's quota.
            if let Some((old_bytes, old_tenant)) = old.filter(|(_, t)| t != tenant) {
                tx.execute(RELEASE, &[&ns.plugin, &old_tenant, &old_bytes])
                    .await?;
            }
            tx.commit().await?;
            Ok(Ok(true))
        })
        .await
    }
}

impl Postgres {
    /// Removes `key` if its value is `expected` now (`None`: it has none):
    /// whether it did. Its tenant's usage row is locked first, as a write
    /// locks it, so a write and this queue in one order.
    async fn remove_if(
        &self,
        ns: &Namespace,
        key: &str,
        expected: Option<&Entry>,
    ) -> Result<bool, StoreError> {
        let (owner, key, tenant) = (ns.owner.as_bytes(), key.as_bytes(), ns.tenant.as_bytes());
        let scope = ns.scope.as_str();
        self.transaction(move |mut client| async move {
            let tx = begin(&mut client).await?;
            tx.execute(ENSURE_USAGE, &[&ns.plugin, &tenant]).await?;
            tx.query_one(LOCK_USAGE, &[&ns.plugin, &tenant]).await?;
            match holds(&tx, (ns, key), expected).await? {
                Ok(true) => {}
                Ok(false) => return Ok(Ok(false)),
                Err(e) => return Ok(Err(e)),
            }
            if let Some(row) =
                (tx.query_opt(DELETE_ENTRY, &[&ns.plugin, &scope, &owner, &key])).await?
            {
                let key_value: i32 = row.get(0);
                let tenant: Vec<u8> = row.get(1);
                let freed = to_i64(ns.entry_bytes(key_value.max(0) as u64));
                tx.execute(RELEASE, &[&ns.plugin, &tenant, &freed]).await?;
            }
            tx.commit().await?;
            Ok(Ok(true))
        })
        .await
    }
}

/// Whether the entry of `ns` under `key` (its bytes) is `expected` now
/// (`None`: there is none), locking it until `tx` ends.
async fn holds(
    tx: &Tx<'_>,
    (ns, key): (&Namespace, &[u8]),
    expected: Option<&Entry>,
) -> Result<Result<bool, StoreError>, PgError> {
    let (scope, owner) = (ns.scope.as_str(), ns.owner.as_bytes());
    let row = tx
        .query_opt(LOCK_ENTRY, &[&ns.plugin, &scope, &owner, &key])
        .await?;
    Ok(row
        .map(|row| entry(row.get(0), row.get(1)))
        .transpose()
        .map(|now| now.as_ref() == expected))
}

/// A READ COMMITTED transaction on `client`: rolled back if dropped
/// uncommitted (a refused write).
async fn begin(client: &mut Conn) -> Result<Tx<'_>, PgError> {
    Ok(client.transaction(IsolationLevel::ReadCommitted).await?)
}

/// The pause before the `tries`th run of a transaction: random, up to a
/// millisecond doubled each time (at most 64 ms), so transactions that
/// collided do not collide again in step.
fn backoff(tries: usize) -> std::time::Duration {
    let cap_us = 1000u64 << tries.min(6);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    std::time::Duration::from_micros(u64::from(nanos) % cap_us)
}

fn bytes(entry: &Entry) -> (bool, &[u8]) {
    match entry {
        Entry::Text(t) => (true, t.as_bytes()),
        Entry::Bytes(b) => (false, b.as_slice()),
    }
}

/// The entry a row holds.
fn entry(is_text: bool, value: Vec<u8>) -> Result<Entry, StoreError> {
    if is_text {
        String::from_utf8(value)
            .map(Entry::Text)
            .map_err(|_| StoreError::Backend("a text value is not UTF-8".into()))
    } else {
        Ok(Entry::Bytes(value))
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const SELECT_ENTRY: &str = "SELECT is_text, value FROM sandwit_store_entries
     WHERE plugin = $1 AND scope = $2 AND owner = $3 AND key = $4";

/// The entry a conditional write compares, locked until the write commits.
const LOCK_ENTRY: &str = "SELECT is_text, value FROM sandwit_store_entries
     WHERE plugin = $1 AND scope = $2 AND owner = $3 AND key = $4
     FOR UPDATE";

/// The size of the entry a write replaces, and the tenant it counts for,
/// locked until the write commits.
const SELECT_OLD: &str = "SELECT octet_length(key) + octet_length(value), tenant
     FROM sandwit_store_entries
     WHERE plugin = $1 AND scope = $2 AND owner = $3 AND key = $4
     FOR UPDATE";

/// Makes a tenant's usage row if it has none, so that there is a row to lock.
const ENSURE_USAGE: &str = "INSERT INTO sandwit_store_usage (plugin, tenant, bytes)
     VALUES ($1, $2, 0) ON CONFLICT (plugin, tenant) DO NOTHING";

/// A tenant's usage, locked until the write commits: writers of one quota
/// queue here.
const LOCK_USAGE: &str = "SELECT bytes FROM sandwit_store_usage
     WHERE plugin = $1 AND tenant = $2 FOR UPDATE";

const UPSERT_ENTRY: &str = "INSERT INTO sandwit_store_entries
         (plugin, scope, owner, key, is_text, value, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (plugin, scope, owner, key)
     DO UPDATE SET is_text = excluded.is_text, value = excluded.value,
                   tenant = excluded.tenant
     RETURNING xmax = 0";

const SET_USAGE: &str =
    "UPDATE sandwit_store_usage SET bytes = $3 WHERE plugin = $1 AND tenant = $2";

const RELEASE: &str = "UPDATE sandwit_store_usage SET bytes = greatest(0, bytes - $3)
     WHERE plugin = $1 AND tenant = $2";

const DELETE_ENTRY: &str = "DELETE FROM sandwit_store_entries
     WHERE plugin = $1 AND scope = $2 AND owner = $3 AND key = $4
     RETURNING octet_length(key) + octet_length(value), tenant";

impl StoreBackend for Postgres {
    fn get<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
    ) -> ServiceFuture<'a, Result<Option<Entry>, StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    SELECT_ENTRY,
                    &[
                        &ns.plugin,
                        &ns.scope.as_str(),
                        &ns.owner.as_bytes(),
                        &key.as_bytes(),
                    ],
                )
                .await
                .map_err(PgError::from)?;
            row.map(|row| entry(row.get(0), row.get(1))).transpose()
        })
    }

    fn set<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
        value: &'a Entry,
        limits: &'a StoreLimits,
    ) -> ServiceFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.write(ns, key, None, value, limits).await.map(drop) })
    }

    fn swap<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
        current: Option<&'a Entry>,
        value: Option<&'a Entry>,
        limits: &'a StoreLimits,
    ) -> ServiceFuture<'a, Result<bool, StoreError>> {
        match value {
            Some(value) => Box::pin(self.write(ns, key, Some(current), value, limits)),
            None => Box::pin(self.remove_if(ns, key, current)),
        }
    }

    fn delete<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
    ) -> ServiceFuture<'a, Result<bool, StoreError>> {
        let (owner, key) = (ns.owner.as_bytes(), key.as_bytes());
        let scope = ns.scope.as_str();
        Box::pin(self.transaction(move |mut client| async move {
            let tx = begin(&mut client).await?;
            let old = tx
                .query_opt(DELETE_ENTRY, &[&ns.plugin, &scope, &owner, &key])
                .await?;
            let Some(row) = old else {
                return Ok(Ok(false));
            };
            let key_value: i32 = row.get(0);
            let tenant: Vec<u8> = row.get(1);
            let freed = to_i64(ns.entry_bytes(key_value.max(0) as u64));
            tx.execute(RELEASE, &[&ns.plugin, &tenant, &freed]).await?;
            tx.commit().await?;
            Ok(Ok(true))
        }))
    }

    fn keys<'a>(
        &'a self,
        ns: &'a Namespace,
        max: usize,
    ) -> ServiceFuture<'a, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let max = i64::try_from(max).unwrap_or(i64::MAX);
            let rows = client
                .query(
                    "SELECT key FROM sandwit_store_entries
                     WHERE plugin = $1 AND scope = $2 AND owner = $3
                     ORDER BY key LIMIT $4",
                    &[&ns.plugin, &ns.scope.as_str(), &ns.owner.as_bytes(), &max],
                )
                .await
                .map_err(PgError::from)?;
            rows.into_iter()
                .map(|row| {
                    String::from_utf8(row.get(0))
                        .map_err(|_| StoreError::Backend("a stored key is not UTF-8".into()))
                })
                .collect()
        })
    }

    fn usage<'a>(&'a self, plugin: &'a str) -> ServiceFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT coalesce(sum(bytes), 0)::bigint FROM sandwit_store_usage
                     WHERE plugin = $1",
                    &[&plugin],
                )
                .await
                .map_err(PgError::from)?;
            Ok(row.get::<_, i64>(0).max(0) as u64)
        })
    }
}
