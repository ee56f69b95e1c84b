//! `POST /v1/plugins/{id}/methods/{method}:call`: one method call, in a
//! fresh instance under the host's limits and the policy's controls.

use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use sandwit::Budget;
use sandwit::json::value_from_json;
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use utoipa::ToSchema;

use crate::answer::Holding;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::queue::{CallPlace, CallSlot};
use crate::state::Shared;
use crate::wire::CallReport;

/// The body of a call.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    /// The arguments by name [default: none].
    #[serde(default)]
    #[schema(value_type = Object)]
    args: Map<String, Json>,
    /// The chat the call is for (not empty).
    #[schema(min_length = 1, max_length = 256)]
    chat_key: String,
    /// The user the call is for.
    #[schema(max_length = 256)]
    user_id: Option<String>,
}

/// `POST /v1/plugins/{id}/methods/{method}:call`: `{"ok", "result" or
/// "error", "events", "fuel_used", "ms"}`, the JSON of `sandwit call
/// --json`, with status 200 whether the method succeeded or not. A method
/// the plugin's lifecycle hooks leave out of the chat is not callable in it.
/// The call, and the hooks asked first, take a slot of the calls' queue.
#[utoipa::path(
    post, path = "/v1/plugins/{id}/methods/{method}:call", tag = "calls",
    request_body = CallRequest, security(("token" = [])),
    params(("id" = String, Path, description = "The plugin's id"),
           ("method" = String, Path, description = "The method's name")),
    responses(
        (status = 200, description = "The call's report, whether the method succeeded or not",
         body = CallReport),
        (status = 400, description = "An empty or too long chat key or user id, or a result \
                                      that cannot be rendered",
         body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = ErrorBody),
        (status = 404, description = "No such enabled plugin, or no such method in the chat",
         body = ErrorBody),
        (status = 408, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "The body is not a call request",
         body = ErrorBody),
        (status = 500, description = "The plugin's lifecycle hook failed",
         body = ErrorBody),
        (status = 503, description = "Queue full, no slot in time, or shutting down",
         body = ErrorBody),
    )
)]
pub async fn call(
    State(state): State<Shared>,
    caller: Caller,
    Path((id, target)): Path<(String, String)>,
    body: Result<axum::Json<CallRequest>, JsonRejection>,
) -> Result<Holding<axum::Json<CallReport>, CallPlace>, ApiError> {
    let Some(method) = target.strip_suffix(":call") else {
        return Err(ApiError::not_found(
            "not-found",
            format!(
                "no endpoint `{target}`: call a method at /v1/plugins/{{id}}/methods/{{method}}:call"
            ),
        ));
    };
    let axum::Json(request) = body?;
    let (plugin, is_tool_source) = {
        let catalog = state.catalog.read().expect("catalog lock");
        (catalog.plugin(&id).cloned(), catalog.is_tool_source(&id))
    };
    if is_tool_source {
        return call_tool_source(state, caller, &id, method, request).await;
    }
    let plugin = plugin.ok_or_else(|| {
        ApiError::not_found("unknown-plugin", format!("no enabled plugin `{id}`"))
    })?;
    if plugin.manifest().method(method).is_none() {
        return Err(ApiError::not_found(
            "unknown-method",
            format!("plugin `{id}` has no method `{method}`"),
        ));
    }
    let ctx = crate::chat::agent_ctx(&caller, &request.chat_key, request.user_id, "bad-request")?;
    // A call instantiates the plugin (and its hooks): it takes a slot of
    // the calls' queue (`State::calls` says why not the runs'), and its
    // answer keeps the place until it has gone out (crate::answer).
    let slot = state.calls.enter().await?;
    // As in a run: a plugin whose lifecycle hooks fail offers nothing in
    // the chat.
    let offered = match plugin.in_context(&ctx).await {
        Ok(seen) => seen
            .methods
            .is_none_or(|names| names.iter().any(|n| n == method)),
        Err(error) => {
            tracing::warn!(%error, "a lifecycle hook failed; the call is refused");
            false
        }
    };
    if !offered {
        return Err(ApiError::not_found(
            "unknown-method",
            format!(
                "plugin `{id}` does not offer `{method}` in the chat {:?}",
                request.chat_key
            ),
        ));
    }
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
    answer(&report, slot)
}

/// The answer to a call: its report, the result's images inline, holding
/// the call's place in the queue until it has gone out.
fn answer(
    report: &sandwit::CallReport,
    slot: CallSlot,
) -> Result<Holding<axum::Json<CallReport>, CallPlace>, ApiError> {
    let result = report
        .result
        .as_ref()
        .ok()
        .map(|r| crate::outcome::result_json(r, &mut crate::outcome::inline_image))
        .transpose()
        .map_err(|e| ApiError::bad_request("bad-result", e.to_string()))?;
    Ok(Holding {
        body: axum::Json(crate::outcome::call_report(report, result)),
        hold: slot.answering(),
    })
}

/// A call of a tool source's method (`[tools.<id>]`): through the host, so
/// the method's arguments are checked and its controls apply as in a run.
async fn call_tool_source(
    state: Shared,
    caller: Caller,
    id: &str,
    method: &str,
    request: CallRequest,
) -> Result<Holding<axum::Json<CallReport>, CallPlace>, ApiError> {
    let methods = state.enabled();
    if !methods.methods().any(|(p, m)| p == id && m.name == method) {
        return Err(ApiError::not_found(
            "unknown-method",
            format!("tool source `{id}` has no method `{method}`"),
        ));
    }
    let ctx = crate::chat::agent_ctx(&caller, &request.chat_key, request.user_id, "bad-request")?;
    let slot = state.calls.enter().await?;
    let report = state
        .host
        .call_report(
            &methods,
            &ctx,
            method,
            value_from_json(Json::Object(request.args)),
        )
        .await;
    state
        .metrics
        .record_call(id, method, report.elapsed.as_secs_f64());
    answer(&report, slot)
}
