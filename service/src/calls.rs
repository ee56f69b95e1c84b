//! `POST /v1/plugins/{id}/methods/{method}:call`: one method call, in a
//! fresh instance under the host's limits and the policy's controls.

use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use sandwit::json::value_from_json;
use sandwit::{AgentCtx, Budget};
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use crate::Shared;
use crate::auth::Caller;
use crate::error::ApiError;

/// The body of a call.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    #[serde(default)]
    args: Map<String, Json>,
    chat_key: String,
    user_id: Option<String>,
}

/// `POST /v1/plugins/{id}/methods/{method}:call`: `{"ok", "result" or
/// "error", "events", "fuel_used", "ms"}`, the JSON of `sandwit call
/// --json`, with status 200 whether the method succeeded or not.
pub async fn call(
    State(state): State<Shared>,
    _caller: Caller,
    Path((id, target)): Path<(String, String)>,
    body: Result<axum::Json<CallRequest>, JsonRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Some(method) = target.strip_suffix(":call") else {
        return Err(ApiError::not_found(
            "not-found",
            format!(
                "no endpoint `{target}`: call a method at /v1/plugins/{{id}}/methods/{{method}}:call"
            ),
        ));
    };
    let axum::Json(request) = body?;
    let plugin = state
        .catalog
        .read()
        .expect("catalog lock")
        .plugin(&id)
        .cloned()
        .ok_or_else(|| {
            ApiError::not_found("unknown-plugin", format!("no enabled plugin `{id}`"))
        })?;
    if plugin.manifest().method(method).is_none() {
        return Err(ApiError::not_found(
            "unknown-method",
            format!("plugin `{id}` has no method `{method}`"),
        ));
    }
    let ctx = AgentCtx {
        user_id: request.user_id,
        ..AgentCtx::new(&request.chat_key)
    };
    let start = Instant::now();
    let report = plugin
        .call_within(
            &ctx,
            method,
            value_from_json(Json::Object(request.args)),
            Budget::from_limits(state.host.limits()),
        )
        .await;
    state
        .metrics
        .record_call(&id, method, start.elapsed().as_secs_f64());
    let result = report
        .result
        .as_ref()
        .ok()
        .map(|r| crate::outcome::result_json(r, &mut crate::outcome::inline_image))
        .transpose()
        .map_err(|e| ApiError::bad_request("bad-result", e.to_string()))?;
    Ok(axum::Json(crate::outcome::call_json(&report, result)))
}
