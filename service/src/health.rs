//! `GET /healthz`, `GET /readyz` and `GET /metrics`.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

use crate::Shared;
use crate::auth::Caller;
use crate::error::ApiError;

/// The process serves.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, body = crate::api::Health)))]
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// The service takes runs: not shutting down, and a slot or queue place
/// free. Says which interpreters runs may ask for, and the default.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, body = crate::api::Ready),
              (status = 503, description = "Shutting down", body = crate::api::ErrorBody)))]
pub async fn readyz(State(state): State<Shared>) -> Result<impl IntoResponse, ApiError> {
    if state.shutting_down.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable(
            "shutting-down",
            "the server is shutting down",
            1,
        ));
    }
    let plugins = state.catalog.read().expect("catalog lock").plugins().len();
    Ok(axum::Json(json!({
        "status": "ready",
        "plugins": plugins,
        "runs_running": state.queue.running(),
        "runs_waiting": state.queue.waiting(),
        "interpreters": state.interpreters.loaded(),
        "default_interpreter": state.interpreters.default_kind(),
    })))
}

/// The Prometheus text exposition, for admins: it counts every caller's
/// runs and calls, across namespaces.
#[utoipa::path(get, path = "/metrics", tag = "health", security(("token" = [])),
    responses((status = 200, description = "Prometheus text", content_type = "text/plain",
               body = String),
              (status = 401, body = crate::api::ErrorBody),
              (status = 403, description = "A user token: the metrics are an admin's",
               body = crate::api::ErrorBody)))]
pub async fn metrics(
    State(state): State<Shared>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_admin()?;
    let text = state.metrics.render(
        state.queue.running(),
        state.queue.waiting(),
        state.queue.max_running(),
        state.interpreters.small().prepared(),
        state.interpreters.small().reuses_interpreters(),
        &state.host.controls_snapshot(),
    );
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    ))
}
