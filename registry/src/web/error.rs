//! A registry error as a page, for every handler of the web pages.

use axum::response::{IntoResponse, Response};

use super::html::{Esc, Page};
use crate::error::Error;

/// A registry error as a page: its status, its message, and `Retry-After`
/// for 429 and 503.
pub(crate) struct WebError(pub Error);

impl From<Error> for WebError {
    fn from(e: Error) -> Self {
        WebError(e)
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        error_page(&self.0, String::new()).into_response()
    }
}

/// The page for `error`, followed by `more` (HTML).
pub(super) fn error_page(error: &Error, more: String) -> Page {
    if let Error::Internal(e) = error {
        tracing::error!("internal error: {e:#}");
    }
    let status = error.status();
    let title = status.canonical_reason().unwrap_or("Error");
    Page {
        status,
        title: title.to_string(),
        main: format!(
            "<h1>{}</h1>\n<p class=\"error\" role=\"alert\">{}</p>\n{more}",
            Esc(title),
            Esc(&error.to_string())
        ),
        retry_after: error
            .retry_after()
            .map(|after| (after.as_secs() + u64::from(after.subsec_nanos() > 0)).max(1)),
    }
}
