//! The execution controls' shared state in PostgreSQL: each operation one
//! statement, atomic under the row lock its upsert takes, so replicas
//! taking from one bucket or one chat's budget at once never overspend it.
//! Time is the server's (`now()`), one clock for every replica.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sandwit::ServiceFuture;
use sandwit::controls::{SharedControls, SharedControlsError};

use crate::Postgres;
use crate::error::PgError;

/// Every this many calls a replica deletes the buckets untouched for over a
/// minute: full again, so the same as none.
const SWEEP_EVERY: u64 = 1024;

static CALLS: AtomicU64 = AtomicU64::new(0);

/// Takes a token if the bucket, refilled to now, has one. A bucket never
/// seen starts full. `at` never goes back (a transaction that started
/// earlier may commit later).
const TAKE: &str = "INSERT INTO sandwit_rate_buckets AS b (bucket, tokens, at)
     VALUES ($1, $2::float8 - 1, now())
     ON CONFLICT (bucket) DO UPDATE
         SET tokens = least($2::float8, b.tokens
                 + greatest(extract(epoch FROM now() - b.at)::float8, 0) * $2 / 60) - 1,
             at = greatest(b.at, now())
         WHERE least($2::float8, b.tokens
                 + greatest(extract(epoch FROM now() - b.at)::float8, 0) * $2 / 60) >= 1
     RETURNING tokens";

/// The tokens of a bucket refilled to now.
const TOKENS: &str = "SELECT least($2::float8, tokens
         + greatest(extract(epoch FROM now() - at)::float8, 0) * $2 / 60)
     FROM sandwit_rate_buckets WHERE bucket = $1";

const SWEEP: &str = "DELETE FROM sandwit_rate_buckets WHERE at < now() - interval '61 seconds'";

const RESERVE: &str = "INSERT INTO sandwit_chat_budgets AS c (chat, spent) VALUES ($1, $2)
     ON CONFLICT (chat) DO UPDATE SET spent = c.spent + $2 WHERE c.spent + $2 <= $3
     RETURNING spent";

const SPENT: &str = "SELECT spent FROM sandwit_chat_budgets WHERE chat = $1";

const REFUND: &str =
    "UPDATE sandwit_chat_budgets SET spent = greatest(0, spent - $2) WHERE chat = $1";

/// Opens a breaker until `$2` seconds from now, unless it is open longer.
const OPEN_BREAKER: &str = "INSERT INTO sandwit_breakers AS b (breaker, open_until)
     VALUES ($1, now() + make_interval(secs => $2))
     ON CONFLICT (breaker) DO UPDATE
         SET open_until = greatest(b.open_until, excluded.open_until)";

/// The seconds a breaker stays open, if it is.
const BREAKER_OPEN_FOR: &str = "SELECT extract(epoch FROM open_until - now())::float8
     FROM sandwit_breakers WHERE breaker = $1 AND open_until > now()";

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Postgres {
    /// What `chat` has spent, in millionths (0 for a chat never charged).
    async fn chat_spent(&self, chat: &str) -> Result<u64, PgError> {
        let client = self.client().await?;
        let row = client.query_opt(SPENT, &[&chat.as_bytes()]).await?;
        Ok(row.map_or(0, |row| row.get::<_, i64>(0).max(0) as u64))
    }

    /// Deletes the buckets a minute has refilled, on a task of its own.
    fn sweep(&self) {
        let db = self.db.clone();
        tokio::spawn(async move {
            let swept = async {
                let client = db.get().await.map_err(PgError::from)?;
                client.execute(SWEEP, &[]).await.map_err(PgError::from)
            };
            if let Err(e) = swept.await {
                tracing::warn!("deleting full rate-limit buckets failed: {e}");
            }
        });
    }
}

impl SharedControls for Postgres {
    fn take_call<'a>(
        &'a self,
        bucket: &'a str,
        per_minute: u32,
    ) -> ServiceFuture<'a, Result<Result<(), Duration>, SharedControlsError>> {
        Box::pin(async move {
            if CALLS.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
                self.sweep();
            }
            let capacity = f64::from(per_minute);
            let client = self.client().await?;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] =
                [&bucket.as_bytes(), &capacity];
            let taken = client
                .query_opt(TAKE, &params)
                .await
                .map_err(PgError::from)?;
            if taken.is_some() {
                return Ok(Ok(()));
            }
            let tokens: f64 = client
                .query_opt(TOKENS, &params)
                .await
                .map_err(PgError::from)?
                .map_or(0.0, |row| row.get(0));
            let per_second = capacity / 60.0;
            let wait = ((1.0 - tokens) / per_second).max(0.0);
            Ok(Err(Duration::from_secs_f64(wait)))
        })
    }

    fn reserve<'a>(
        &'a self,
        chat: &'a str,
        cost: u64,
        limit: u64,
    ) -> ServiceFuture<'a, Result<Result<(), u64>, SharedControlsError>> {
        Box::pin(async move {
            if cost > limit {
                return Ok(Err(self.chat_spent(chat).await?));
            }
            let client = self.client().await?;
            let reserved = client
                .query_opt(RESERVE, &[&chat.as_bytes(), &to_i64(cost), &to_i64(limit)])
                .await
                .map_err(PgError::from)?;
            match reserved {
                Some(_) => Ok(Ok(())),
                None => Ok(Err(self.chat_spent(chat).await?)),
            }
        })
    }

    fn refund<'a>(
        &'a self,
        chat: &'a str,
        cost: u64,
    ) -> ServiceFuture<'a, Result<(), SharedControlsError>> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(REFUND, &[&chat.as_bytes(), &to_i64(cost)])
                .await
                .map_err(PgError::from)?;
            Ok(())
        })
    }

    fn spent<'a>(&'a self, chat: &'a str) -> ServiceFuture<'a, Result<u64, SharedControlsError>> {
        Box::pin(async move { Ok(self.chat_spent(chat).await?) })
    }

    fn open_breaker<'a>(
        &'a self,
        breaker: &'a str,
        recovery: Duration,
    ) -> ServiceFuture<'a, Result<(), SharedControlsError>> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    OPEN_BREAKER,
                    &[&breaker.as_bytes(), &recovery.as_secs_f64()],
                )
                .await
                .map_err(PgError::from)?;
            Ok(())
        })
    }

    fn breaker_open_for<'a>(
        &'a self,
        breaker: &'a str,
    ) -> ServiceFuture<'a, Result<Option<Duration>, SharedControlsError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(BREAKER_OPEN_FOR, &[&breaker.as_bytes()])
                .await
                .map_err(PgError::from)?;
            Ok(row.map(|row| Duration::from_secs_f64(row.get::<_, f64>(0).max(0.0))))
        })
    }
}
