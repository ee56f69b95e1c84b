//! The registry's web page: a listing with search and filters, a page per
//! plugin version, and an upload form. Server-rendered HTML without
//! JavaScript: every page is sent with a Content-Security-Policy that
//! allows no script at all, only the registry's own stylesheet, and forms
//! posting back to the registry. Everything shown comes from the same
//! [`Registry`] methods the JSON API calls; an upload runs the same publish.
//!
//! Mount it with [`router`] as the `extra` routes of [`crate::serve`]: it
//! needs the service's layers (rate limits, the token resolver of the
//! upload form).

mod allowance;
mod error;
mod html;
mod listing;
mod plugin;
mod upload;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::Registry;

/// What every page may load: its stylesheet; forms post back here; no
/// script, frame or plugin anywhere.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// The stylesheet.
const STYLE: &str = include_str!("style.css");

/// How much an upload form may carry beyond the component: the token, the
/// signature and the multipart framing.
const FORM_OVERHEAD: usize = 64 * 1024;

/// The web page's routes: `/` (listing and search), `/plugins/{id}` and
/// `/plugins/{id}/{version}`, `/upload` (the form and its post) and
/// `/style.css`.
pub fn router(registry: Registry) -> Router {
    Router::new()
        .route("/", get(listing::listing))
        .route("/plugins/{id}", get(plugin::latest))
        .route("/plugins/{id}/{version}", get(plugin::version))
        .route(
            "/upload",
            get(upload::form)
                .post(upload::upload)
                .layer(DefaultBodyLimit::max(
                    sandwit_contract::MAX_COMPONENT_BYTES + FORM_OVERHEAD,
                )),
        )
        .route("/style.css", get(style))
        .layer(middleware::map_response(security_headers))
        .with_state(registry)
}

async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        STYLE,
    )
        .into_response()
}

/// The headers of every page: the CSP, no MIME sniffing, no framing, no
/// referrer beyond the registry.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}
