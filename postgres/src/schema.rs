//! sandwit's tables, and the migrations that make them: each a version
//! applied once, in order, in one transaction with its record in
//! `sandwit_schema`. Replicas starting together take an advisory lock, so
//! one migrates while the others wait and then find nothing to do.
//!
//! Free-form strings (owners, keys, tenants, chats, bucket names) are
//! `bytea`: PostgreSQL's `text` refuses NUL, which a chat-user owner holds,
//! and sorts by the database's collation, where the store's keys sort by
//! their bytes as in SQLite.

/// The migrations, by version (index + 1). Only ever appended to.
const MIGRATIONS: &[&str] = &[
    // 1: the plugin store and the controls' shared state.
    "CREATE TABLE sandwit_store_entries (
         plugin text NOT NULL,
         scope text NOT NULL,
         owner bytea NOT NULL,
         key bytea NOT NULL,
         is_text boolean NOT NULL,
         value bytea NOT NULL,
         -- The namespace whose quota the entry counts against.
         tenant bytea NOT NULL,
         PRIMARY KEY (plugin, scope, owner, key)
     );
     CREATE TABLE sandwit_store_usage (
         plugin text NOT NULL,
         tenant bytea NOT NULL,
         bytes bigint NOT NULL,
         PRIMARY KEY (plugin, tenant)
     );
     -- A token bucket: `tokens` as of `at`; a minute refills it whole, so a
     -- row older than a minute is a full bucket and may be deleted.
     CREATE TABLE sandwit_rate_buckets (
         bucket bytea PRIMARY KEY,
         tokens double precision NOT NULL,
         at timestamptz NOT NULL
     );
     CREATE INDEX sandwit_rate_buckets_at ON sandwit_rate_buckets (at);
     -- Millionths spent per chat.
     CREATE TABLE sandwit_chat_budgets (
         chat bytea PRIMARY KEY,
         spent bigint NOT NULL
     );",
    // 2: breakers a replica opened, for the others to obey.
    "CREATE TABLE sandwit_breakers (
         breaker bytea PRIMARY KEY,
         open_until timestamptz NOT NULL
     );",
];

/// The advisory lock migrations hold (an arbitrary constant: `sandwit` in
/// ASCII).
const MIGRATION_LOCK: i64 = 0x73_61_6e_64_77_69_74;

/// Applies the migrations the database has not had.
pub(crate) async fn migrate(client: &mut sandwit_postgres_connect::Conn) -> anyhow::Result<()> {
    let tx = client
        .transaction(tokio_postgres::IsolationLevel::ReadCommitted)
        .await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS sandwit_schema (version integer NOT NULL)")
        .await?;
    let current: i32 = tx
        .query_opt("SELECT max(version) FROM sandwit_schema", &[])
        .await?
        .and_then(|row| row.get::<_, Option<i32>>(0))
        .unwrap_or(0);
    let known = MIGRATIONS.len() as i32;
    anyhow::ensure!(
        current <= known,
        "the database's sandwit tables are at version {current}, newer than this sandwit \
         knows ({known}): upgrade sandwit"
    );
    for (version, sql) in (1..).zip(MIGRATIONS).skip(current as usize) {
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO sandwit_schema (version) VALUES ($1)",
            &[&version],
        )
        .await?;
        tracing::info!(version, "migrated sandwit's PostgreSQL tables");
    }
    tx.commit().await?;
    Ok(())
}

/// The newest version, for the tests.
#[cfg(test)]
pub(crate) const VERSION: i32 = MIGRATIONS.len() as i32;
