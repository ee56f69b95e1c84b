//! What a failed database operation says: the server's own message and
//! SQLSTATE when it gave one, never the connection's URL or password.

use sandwit::controls::SharedControlsError;
use sandwit::store::StoreError;

/// A database operation's failure.
#[derive(Debug)]
pub(crate) struct PgError {
    message: String,
    /// SQLSTATE, when the server answered with an error.
    code: Option<String>,
}

impl PgError {
    /// A transaction that found, by its own checks, that a concurrent one
    /// changed what it read: to be run again.
    pub(crate) fn lost_race() -> Self {
        PgError {
            message: "PostgreSQL: concurrent writes of one entry kept changing it".into(),
            code: Some("40001".into()),
        }
    }

    /// Whether the transaction lost to a concurrent one (a serialization
    /// failure or a deadlock) and can be run again.
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(self.code.as_deref(), Some("40001" | "40P01"))
    }
}

impl From<sandwit_postgres_connect::Error> for PgError {
    fn from(e: sandwit_postgres_connect::Error) -> Self {
        let e = match e {
            sandwit_postgres_connect::Error::Postgres(e) => e,
            // What the pool says names the server and the timeout.
            other => {
                return PgError {
                    message: other.to_string(),
                    code: None,
                };
            }
        };
        match e.as_db_error() {
            Some(db) => PgError {
                message: format!("PostgreSQL: {} ({})", db.message(), db.code().code()),
                code: Some(db.code().code().to_string()),
            },
            None => {
                // The client's own errors (a closed connection, a refused
                // one) say more in their source than in their text.
                let source = std::error::Error::source(&e)
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default();
                PgError {
                    message: format!("PostgreSQL: {e}{source}"),
                    code: None,
                }
            }
        }
    }
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PgError {}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> Self {
        StoreError::Backend(e.message)
    }
}

impl From<PgError> for SharedControlsError {
    fn from(e: PgError) -> Self {
        SharedControlsError(e.message)
    }
}
