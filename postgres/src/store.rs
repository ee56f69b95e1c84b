//! The plugin store in PostgreSQL: the SQLite store's rows, quotas and
//! atomicity. Each write is one SERIALIZABLE transaction (run again when it
//! loses to a concurrent one), so two replicas writing one plugin's data
//! never let a tenant past its quota, and a `set` that returned is
//! committed.

use sandwit::ServiceFuture;
use sandwit::policy::StoreLimits;
use sandwit::store::{Entry, Namespace, StoreBackend, StoreError};
use tokio_postgres::IsolationLevel;

use crate::Postgres;
use crate::error::PgError;

/// How often a transaction that lost to a concurrent one is run again
/// before the operation fails.
const RETRIES: usize = 8;

impl Postgres {
    /// Runs `op` on a connection of the pool, again from the start (on
    /// another connection) when the server says its transaction lost to a
    /// concurrent one. `op` runs one SERIALIZABLE transaction ([`begin`]),
    /// committed when it returns `Ok(Ok(_))`.
    async fn serializable<T, F>(
        &self,
        op: impl Fn(deadpool_postgres::Client) -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<Result<T, StoreError>, PgError>>,
    {
        let mut tries = 0;
        loop {
            match op(self.client().await?).await {
                Ok(result) => return result,
                Err(e) if e.is_retryable() && tries < RETRIES => tries += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A SERIALIZABLE transaction on `client`: rolled back if dropped
/// uncommitted (a refused write).
async fn begin(
    client: &mut deadpool_postgres::Client,
) -> Result<deadpool_postgres::Transaction<'_>, PgError> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .start()
        .await?)
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

/// The size of the entry a write replaces, and the tenant it counts for.
const SELECT_OLD: &str = "SELECT octet_length(key) + octet_length(value), tenant
     FROM sandwit_store_entries
     WHERE plugin = $1 AND scope = $2 AND owner = $3 AND key = $4";

const SELECT_USAGE: &str =
    "SELECT bytes FROM sandwit_store_usage WHERE plugin = $1 AND tenant = $2";

const UPSERT_ENTRY: &str = "INSERT INTO sandwit_store_entries
         (plugin, scope, owner, key, is_text, value, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (plugin, scope, owner, key)
     DO UPDATE SET is_text = excluded.is_text, value = excluded.value,
                   tenant = excluded.tenant";

const SET_USAGE: &str = "INSERT INTO sandwit_store_usage (plugin, tenant, bytes)
     VALUES ($1, $2, $3)
     ON CONFLICT (plugin, tenant) DO UPDATE SET bytes = excluded.bytes";

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
            let stmt = client
                .prepare_cached(SELECT_ENTRY)
                .await
                .map_err(PgError::from)?;
            let row = client
                .query_opt(
                    &stmt,
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
        let (is_text, value) = bytes(value);
        let (owner, key, tenant) = (ns.owner.as_bytes(), key.as_bytes(), ns.tenant.as_bytes());
        let scope = ns.scope.as_str();
        let written = ns.entry_bytes((key.len() + value.len()) as u64);
        Box::pin(self.serializable(move |mut client| async move {
            let tx = begin(&mut client).await?;
            let old = tx
                .query_opt(
                    &tx.prepare_cached(SELECT_OLD).await?,
                    &[&ns.plugin, &scope, &owner, &key],
                )
                .await?
                .map(|row| {
                    let key_value: i32 = row.get(0);
                    let tenant: Vec<u8> = row.get(1);
                    (to_i64(ns.entry_bytes(key_value.max(0) as u64)), tenant)
                });
            let used: i64 = tx
                .query_opt(
                    &tx.prepare_cached(SELECT_USAGE).await?,
                    &[&ns.plugin, &tenant],
                )
                .await?
                .map_or(0, |row| row.get(0));
            let replaced = match &old {
                Some((old_bytes, old_tenant)) if old_tenant == tenant => *old_bytes,
                _ => 0,
            };
            let new_used = (used - replaced).max(0) + to_i64(written);
            if new_used as u64 > limits.max_plugin_bytes {
                return Ok(Err(ns.over_quota(new_used as u64, limits)));
            }
            tx.execute(
                &tx.prepare_cached(UPSERT_ENTRY).await?,
                &[&ns.plugin, &scope, &owner, &key, &is_text, &value, &tenant],
            )
            .await?;
            tx.execute(
                &tx.prepare_cached(SET_USAGE).await?,
                &[&ns.plugin, &tenant, &new_used],
            )
            .await?;
            // An entry another tenant had written leaves that tenant's quota.
            if let Some((old_bytes, old_tenant)) = old.filter(|(_, t)| t != tenant) {
                tx.execute(
                    &tx.prepare_cached(RELEASE).await?,
                    &[&ns.plugin, &old_tenant, &old_bytes],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(Ok(()))
        }))
    }

    fn delete<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
    ) -> ServiceFuture<'a, Result<bool, StoreError>> {
        let (owner, key) = (ns.owner.as_bytes(), key.as_bytes());
        let scope = ns.scope.as_str();
        Box::pin(self.serializable(move |mut client| async move {
            let tx = begin(&mut client).await?;
            let old = tx
                .query_opt(
                    &tx.prepare_cached(DELETE_ENTRY).await?,
                    &[&ns.plugin, &scope, &owner, &key],
                )
                .await?;
            let Some(row) = old else {
                return Ok(Ok(false));
            };
            let key_value: i32 = row.get(0);
            let tenant: Vec<u8> = row.get(1);
            let freed = to_i64(ns.entry_bytes(key_value.max(0) as u64));
            tx.execute(
                &tx.prepare_cached(RELEASE).await?,
                &[&ns.plugin, &tenant, &freed],
            )
            .await?;
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
            let stmt = client
                .prepare_cached(
                    "SELECT key FROM sandwit_store_entries
                     WHERE plugin = $1 AND scope = $2 AND owner = $3
                     ORDER BY key LIMIT $4",
                )
                .await
                .map_err(PgError::from)?;
            let max = i64::try_from(max).unwrap_or(i64::MAX);
            let rows = client
                .query(
                    &stmt,
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
            let stmt = client
                .prepare_cached(
                    "SELECT coalesce(sum(bytes), 0)::bigint FROM sandwit_store_usage
                     WHERE plugin = $1",
                )
                .await
                .map_err(PgError::from)?;
            let row = client
                .query_one(&stmt, &[&plugin])
                .await
                .map_err(PgError::from)?;
            Ok(row.get::<_, i64>(0).max(0) as u64)
        })
    }
}
