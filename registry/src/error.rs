//! The registry's errors: each has an HTTP status and a kebab-case code, and
//! its message names what was wrong. The JSON handlers send them as
//! `{"error", "message"}` (and `report` for a rejected plugin).

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No token, or one the registry does not know.
    #[error("{0}")]
    Unauthorized(String),
    /// The account may not do this (its role does not allow it).
    #[error("{0}")]
    Forbidden(String),
    /// The plugin id belongs to other accounts.
    #[error("{0}")]
    NotAnOwner(String),
    /// A path or query parameter, header or body that is malformed; the
    /// code names which (`invalid-id`, `invalid-version`, ...).
    #[error("{message}")]
    BadRequest {
        /// The kebab-case code.
        code: &'static str,
        /// What was wrong.
        message: String,
    },
    /// No `Sandwit-Signature` header on a publish.
    #[error(
        "a publish needs the header Sandwit-Signature: the base64 ed25519 signature of the component's digest"
    )]
    MissingSignature,
    /// The signature is malformed or verifies against none of the account's
    /// keys.
    #[error("{0}")]
    BadSignature(String),
    /// Nothing at this id, version or digest.
    #[error("{0}")]
    NotFound(String),
    /// The (id, version) is already published.
    #[error("{0}")]
    VersionExists(String),
    /// A public key registered by another account.
    #[error("{0}")]
    KeyTaken(String),
    /// Registering a key its account revoked.
    #[error("{0}")]
    KeyRevoked(String),
    /// Removing the last owner of a plugin.
    #[error("{0}")]
    LastOwner(String),
    /// The upload would take the account past its storage quota.
    #[error(
        "the upload of {size} bytes would take account {account} past its storage quota of \
         {quota} bytes ({used} bytes used; a version's manifest and search text count with its \
         component)"
    )]
    QuotaExceeded {
        /// The account.
        account: String,
        /// What the upload stores: its component's size, and once checked
        /// its manifest's and search text's too.
        size: u64,
        /// What the account's versions take already.
        used: u64,
        /// The quota.
        quota: u64,
    },
    /// The upload form sent more than it may before its token was read, or
    /// a part's headers longer than they may be.
    #[error("{0}")]
    FormTooLarge(String),
    /// The body is larger than the registry accepts.
    #[error("the body is larger than the limit of {0} bytes")]
    TooLarge(usize),
    /// The plugin failed the host's load check: the report lists every
    /// problem (`sandwit validate --json`'s JSON).
    #[error("the plugin failed the load check: {summary}")]
    InvalidPlugin {
        /// The first problems, for the message.
        summary: String,
        /// The whole report.
        report: serde_json::Value,
    },
    /// Too many requests from this address or token.
    #[error("too many requests from this {0}; retry later")]
    RateLimited(&'static str, Duration),
    /// The account has as many uploads in flight as one account may.
    #[error(
        "account {account} already has {max} uploads being read or checked, the most one \
         account may; retry when one has finished"
    )]
    TooManyUploads {
        /// The account.
        account: String,
        /// The most one account may have at once.
        max: usize,
        /// When to retry.
        after: Duration,
    },
    /// As many validations as the registry allows are running.
    #[error("the registry is checking as many plugins as it can; retry later")]
    Busy(Duration),
    /// The blob store holds other bytes under a published digest than the
    /// digest's (changed behind the registry's back): they are not served.
    #[error("{0}")]
    BlobMismatch(String),
    /// Something failed inside the registry (logged; not shown in detail).
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl Error {
    /// A [`Error::BadRequest`].
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Error::BadRequest {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) | Error::NotAnOwner(_) => StatusCode::FORBIDDEN,
            Error::BadRequest { .. } | Error::MissingSignature | Error::BadSignature(_) => {
                StatusCode::BAD_REQUEST
            }
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::VersionExists(_)
            | Error::KeyTaken(_)
            | Error::KeyRevoked(_)
            | Error::LastOwner(_) => StatusCode::CONFLICT,
            Error::TooLarge(_) | Error::FormTooLarge(_) | Error::QuotaExceeded { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Error::InvalidPlugin { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Error::RateLimited(..) | Error::TooManyUploads { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::BlobMismatch(_) | Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The kebab-case code of the JSON error.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Unauthorized(_) => "unauthorized",
            Error::Forbidden(_) => "forbidden",
            Error::NotAnOwner(_) => "not-an-owner",
            Error::BadRequest { code, .. } => code,
            Error::MissingSignature => "missing-signature",
            Error::BadSignature(_) => "bad-signature",
            Error::NotFound(_) => "not-found",
            Error::VersionExists(_) => "version-exists",
            Error::KeyTaken(_) => "key-taken",
            Error::KeyRevoked(_) => "key-revoked",
            Error::LastOwner(_) => "last-owner",
            Error::QuotaExceeded { .. } => "quota-exceeded",
            Error::TooLarge(_) | Error::FormTooLarge(_) => "too-large",
            Error::InvalidPlugin { .. } => "invalid-plugin",
            Error::RateLimited(..) => "rate-limited",
            Error::TooManyUploads { .. } => "too-many-uploads",
            Error::Busy(_) => "busy",
            Error::BlobMismatch(_) => "blob-mismatch",
            Error::Internal(_) => "internal",
        }
    }

    /// How long a client should wait before retrying, for 429 and 503.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited(_, after)
            | Error::Busy(after)
            | Error::TooManyUploads { after, .. } => Some(*after),
            _ => None,
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        match &self {
            Error::Internal(e) => tracing::error!("internal error: {e:#}"),
            Error::BlobMismatch(e) => tracing::error!("{e}"),
            _ => {}
        }
        let mut body = serde_json::json!({"error": self.code(), "message": self.to_string()});
        if let Error::InvalidPlugin { report, .. } = &self {
            body["report"] = report.clone();
        }
        let mut response = (self.status(), axum::Json(body)).into_response();
        if let Some(after) = self.retry_after() {
            // Whole seconds, rounded up: a client retrying at once would be
            // refused again.
            let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        response
    }
}

/// The registry's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
