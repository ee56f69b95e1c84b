//! Errors as every endpoint answers them: a status and
//! `{"error": "<kebab-code>", "message": "..."}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Every error: a status and this body (`Retry-After` with 503 and 429).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// A kebab-case code: `unauthorized`, `admin-only`,
    /// `outside-namespace`, `not-found`,
    /// `unknown-plugin`, `unknown-method`, `unknown-tool`, `bad-json`,
    /// `bad-query`, `bad-request`, `bad-body`, `bad-result`,
    /// `limit-too-high`, `interpreter-not-loaded`, `bad-format`,
    /// `bad-path`, `no-workspaces`, `no-such-file`, `reload-failed`,
    /// `request-timeout`, `queue-full`, `queue-timeout`, `shutting-down`,
    /// `warming-up`, `rate-limited`, `workspace-failed`, `bad-listing`.
    pub error: String,
    /// A sentence naming what was wrong.
    pub message: String,
}

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    /// An answer of `status` with `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: the request is malformed or out of range.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404: no such plugin, method or tool.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 503 with `Retry-After: seconds`.
    pub fn unavailable(code: &'static str, message: impl Into<String>, seconds: u64) -> Self {
        ApiError {
            retry_after: Some(seconds),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
        }
    }

    /// The kebab-case code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.code.to_string(),
            message: self.message,
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// A JSON body that failed to parse, as an [`ApiError`] naming what was
/// wrong (axum's own rejection answers in plain text).
impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        ApiError::new(rejection.status(), "bad-json", rejection.body_text())
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::new(rejection.status(), "bad-query", rejection.body_text())
    }
}
