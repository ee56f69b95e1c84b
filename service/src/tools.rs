//! Tool discovery: `GET /v1/tools` (`?category=`, `?kind=`, `?format=openai`
//! or `mcp`), `GET /v1/tools/{name}/schema`, `GET /v1/tools/{name}/metadata`
//! and `GET /v1/prompt`. A tool is a method of an enabled plugin; its
//! category is the plugin's id.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use sandwit::{AgentCtx, MethodSpec};
use serde::Deserialize;
use serde_json::{Value as Json, json};
use utoipa::{IntoParams, ToSchema};

use crate::Shared;
use crate::auth::Caller;
use crate::error::ApiError;

/// The query of `GET /v1/tools`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only the methods of this plugin (its id).
    category: Option<String>,
    /// Only methods of this kind: `tool`, `agent`, `behavior` or
    /// `multimodal-agent`.
    kind: Option<String>,
    /// `sandwit` (the default), `openai` or `mcp`.
    #[param(value_type = Option<Format>, inline)]
    format: Option<String>,
    /// Only the methods available in this chat (plugins' lifecycle hooks).
    #[param(min_length = 1, max_length = 256)]
    chat_key: Option<String>,
    /// With `chat_key`: the user of the chat.
    #[param(max_length = 256)]
    user_id: Option<String>,
}

/// The formats of `GET /v1/tools` (for the OpenAPI document).
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Format {
    Sandwit,
    Openai,
    Mcp,
}

/// The agent context of a query's `chat_key` and `user_id`, for `caller`.
fn chat(caller: &Caller, chat_key: &str, user_id: Option<String>) -> Result<AgentCtx, ApiError> {
    crate::chat::agent_ctx(caller, chat_key, user_id, "bad-query")
}

/// The enabled plugins as the chat of `ctx` sees them. The lifecycle
/// hooks' instances take a slot of the calls' queue.
async fn in_context(state: &Shared, ctx: &AgentCtx) -> Result<sandwit::ContextSet, ApiError> {
    let _slot = state.calls.enter().await?;
    Ok(state.enabled().in_context(ctx).await)
}

fn kind_name(method: &MethodSpec) -> String {
    serde_json::to_value(method.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The enabled methods as tools, in sandwit's shape, OpenAI's function
/// definitions or MCP's tool definitions; with `chat_key`, only those
/// available in that chat.
#[utoipa::path(
    get, path = "/v1/tools", tag = "tools", params(ListQuery), security(("token" = [])),
    responses(
        (status = 200, body = crate::api::ToolListing),
        (status = 400, description = "An unknown format, a bad query, or `user_id` without `chat_key`",
         body = crate::api::ErrorBody),
        (status = 401, body = crate::api::ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = crate::api::ErrorBody),
        (status = 500, description = "A plugin's lifecycle hook failed",
         body = crate::api::ErrorBody),
        (status = 503, description = "With `chat_key`: queue full, no slot in time, or shutting down",
         body = crate::api::ErrorBody),
    )
)]
pub async fn list(
    State(state): State<Shared>,
    caller: Caller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Query(query) = query?;
    if let Some(other) = query
        .format
        .as_deref()
        .filter(|f| !["sandwit", "openai", "mcp"].contains(f))
    {
        return Err(ApiError::bad_request(
            "bad-format",
            format!("format `{other}` is not `sandwit`, `openai` or `mcp`"),
        ));
    }
    let set = match (&query.chat_key, query.user_id) {
        (Some(chat_key), user_id) => {
            in_context(&state, &chat(&caller, chat_key, user_id)?)
                .await?
                .methods
        }
        (None, Some(_)) => {
            return Err(ApiError::bad_request(
                "bad-query",
                "`user_id` is given without `chat_key`",
            ));
        }
        (None, None) => state.enabled(),
    };
    let set = set.filter(|provider, method| {
        query.category.as_deref().is_none_or(|c| c == provider)
            && query.kind.as_deref().is_none_or(|k| k == kind_name(method))
    });
    Ok(axum::Json(match query.format.as_deref() {
        None | Some("sandwit") => {
            let tools: Vec<Json> = set
                .methods()
                .map(|(provider, method)| {
                    json!({
                        "name": method.name,
                        "category": provider,
                        "kind": kind_name(method),
                        "description": method.description,
                    })
                })
                .collect();
            json!({"tools": tools})
        }
        Some("openai") => set.openai_tools(),
        _ => json!({"tools": set.mcp_tools()}),
    }))
}

/// The enabled method `name` and its plugin's id.
fn find(state: &Shared, name: &str) -> Result<(String, MethodSpec), ApiError> {
    state
        .enabled()
        .methods()
        .find(|(_, m)| m.name == name)
        .map(|(p, m)| (p.to_string(), m.clone()))
        .ok_or_else(|| ApiError::not_found("unknown-tool", format!("no enabled tool `{name}`")))
}

/// `GET /v1/tools/{name}/schema`: the parameters' JSON Schemas and the
/// result's.
#[utoipa::path(
    get, path = "/v1/tools/{name}/schema", tag = "tools", security(("token" = [])),
    params(("name" = String, Path, description = "The method's name")),
    responses(
        (status = 200, body = crate::api::ToolSchema),
        (status = 401, body = crate::api::ErrorBody),
        (status = 404, description = "No enabled tool of that name", body = crate::api::ErrorBody),
    )
)]
pub async fn schema(
    State(state): State<Shared>,
    _caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let (_, method) = find(&state, &name)?;
    let params: Vec<Json> = method
        .params
        .iter()
        .map(|p| json!({"name": p.name, "required": p.required, "schema": p.schema}))
        .collect();
    Ok(axum::Json(json!({
        "name": method.name,
        "kind": kind_name(&method),
        "signature": method.signature(),
        "parameters": params,
        "returns": method.returns,
    })))
}

/// `GET /v1/tools/{name}/metadata`: what the tool is and the execution
/// controls' settings on it (null where the policy sets none).
#[utoipa::path(
    get, path = "/v1/tools/{name}/metadata", tag = "tools", security(("token" = [])),
    params(("name" = String, Path, description = "The method's name")),
    responses(
        (status = 200, body = crate::api::ToolMetadata),
        (status = 401, body = crate::api::ErrorBody),
        (status = 404, description = "No enabled tool of that name", body = crate::api::ErrorBody),
    )
)]
pub async fn metadata(
    State(state): State<Shared>,
    _caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let (plugin_id, method) = find(&state, &name)?;
    let plugin = state
        .catalog
        .read()
        .expect("catalog lock")
        .plugin(&plugin_id)
        .cloned();
    let (version, plugin_name) = plugin
        .as_ref()
        .map(|p| (p.manifest().version.clone(), p.manifest().name.clone()))
        .unwrap_or_default();
    let controls = state.host.policy().method_controls(&plugin_id, &name);
    Ok(axum::Json(json!({
        "name": method.name,
        "category": plugin_id,
        "plugin": {"id": plugin_id, "name": plugin_name, "version": version},
        "kind": kind_name(&method),
        "description": method.description,
        "rate_limit": controls.rate_limit,
        "rate_limit_scope": controls.rate_limit_scope,
        "cost_per_use": controls.cost_per_use,
        "dangerous": controls.dangerous.unwrap_or(false),
        "requires_auth": controls.requires_auth.unwrap_or(false),
        "breaker": controls.breaker.as_ref().map(|b| json!({
            "failures": b.failures,
            "error_rate": b.error_rate,
            "window_s": b.window_s,
            "min_calls": b.min_calls,
            "recovery_s": b.recovery_s,
        })),
    })))
}

/// The query of `GET /v1/prompt`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PromptQuery {
    /// The chat (not empty).
    #[param(min_length = 1, max_length = 256)]
    chat_key: String,
    /// The user of the chat.
    #[param(max_length = 256)]
    user_id: Option<String>,
}

/// `GET /v1/prompt?chat_key=[&user_id=]`: the listing an LLM is given of
/// the methods a run for that chat may call, then what the plugins' hooks
/// inject for it, as text (`sandwit prompt`'s).
#[utoipa::path(
    get, path = "/v1/prompt", tag = "tools", params(PromptQuery), security(("token" = [])),
    responses(
        (status = 200, description = "The listing", content_type = "text/plain", body = String),
        (status = 400, description = "No or an empty `chat_key`", body = crate::api::ErrorBody),
        (status = 401, body = crate::api::ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = crate::api::ErrorBody),
        (status = 500, description = "A plugin's lifecycle hook failed",
         body = crate::api::ErrorBody),
        (status = 503, description = "Queue full, no slot in time, or shutting down",
         body = crate::api::ErrorBody),
    )
)]
pub async fn prompt(
    State(state): State<Shared>,
    caller: Caller,
    query: Result<Query<PromptQuery>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Query(query) = query?;
    let ctx = chat(&caller, &query.chat_key, query.user_id)?;
    Ok(in_context(&state, &ctx).await?.prompt())
}
