//! `GET /healthz`, `GET /readyz` and `GET /metrics`.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::Shared;
use crate::wire::{Health, Ready};

/// The process serves.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, body = Health)))]
pub async fn healthz() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".to_string(),
    })
}

/// The service takes runs at full speed: not shutting down, and the small
/// interpreter not warming up (503 `warming-up` while its code for reuse
/// across runs is being compiled, unless the server was told to be ready
/// before; runs are taken meanwhile; a host that prepares no interpreters
/// has nothing to wait for). Says which interpreters runs may ask for, and the default.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, body = Ready),
              (status = 503, description = "Shutting down, or warming up (the interpreter's \
                                            code for reuse across runs is being compiled)",
               body = ErrorBody)))]
pub async fn readyz(State(state): State<Shared>) -> Result<axum::Json<Ready>, ApiError> {
    if state.shutting_down.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable(
            "shutting-down",
            "the server is shutting down",
            1,
        ));
    }
    if !state.config.ready_before_reuse && state.interpreters.small().warming_up() {
        return Err(ApiError::unavailable(
            "warming-up",
            "the interpreter's code for reuse across runs is being compiled (once per cache, \
             about 10-30 s); runs are taken meanwhile, each in an interpreter of its own, \
             several times slower. `sandwit prepare` compiles it ahead into the cache; \
             `--ready-before-reuse` makes the server ready at once",
            5,
        ));
    }
    let plugins = state.catalog.read().expect("catalog lock").plugins().len();
    let (running, waiting) = state.host.runs_now();
    Ok(axum::Json(Ready {
        status: "ready".to_string(),
        plugins: plugins as u64,
        runs_running: running as u64,
        runs_waiting: waiting as u64,
        interpreters: state.interpreters.loaded(),
        default_interpreter: state.interpreters.default_kind(),
    }))
}

/// The Prometheus text exposition, for admins: it counts every caller's
/// runs and calls, across namespaces.
#[utoipa::path(get, path = "/metrics", tag = "health", security(("token" = [])),
    responses((status = 200, description = "Prometheus text", content_type = "text/plain",
               body = String),
              (status = 401, body = ErrorBody),
              (status = 403, description = "A user token: the metrics are an admin's",
               body = ErrorBody)))]
pub async fn metrics(
    State(state): State<Shared>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_admin()?;
    let (running, waiting) = state.host.runs_now();
    let text = state.metrics.render(
        running,
        waiting,
        state.host.run_slots().running,
        crate::metrics::InterpreterGauges {
            ready: state.interpreters.small().prepared(),
            reused: state.interpreters.small().reuses_interpreters(),
            scientific_ready: state.interpreters.scientific().map(|s| s.prepared()),
            sessions_live: state.interpreters.small().live_sessions(),
            scientific_sessions_live: state.interpreters.scientific().map(|s| s.live_sessions()),
        },
        state.host.controls_snapshot(),
    );
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        text,
    ))
}
