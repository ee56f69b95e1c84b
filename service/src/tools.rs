//! Tool discovery: `GET /v1/tools` (`?category=`, `?kind=`, `?format=openai`
//! or `mcp`), `GET /v1/tools/{name}/schema`, `GET /v1/tools/{name}/metadata`
//! and `GET /v1/prompt`. A tool is a method of an enabled plugin; its
//! category is the plugin's id.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use sandwit::{AgentCtx, MethodSpec};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value as Json;
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::Shared;
use crate::wire::{
    Breaker, ParamSchema, PluginRef, Tool, ToolList, ToolListing, ToolMetadata, ToolSchema,
};

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
        (status = 200, body = ToolListing),
        (status = 400, description = "An unknown format, a bad query, or `user_id` without `chat_key`",
         body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = ErrorBody),
        (status = 500, description = "A plugin's lifecycle hook failed, or the host's tool \
                                      definitions did not read (`bad-listing`)",
         body = ErrorBody),
        (status = 503, description = "With `chat_key`: queue full, no slot in time, or shutting down",
         body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<Shared>,
    caller: Caller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<axum::Json<ToolListing>, ApiError> {
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
        None | Some("sandwit") => ToolListing::Tools(ToolList {
            tools: set
                .methods()
                .map(|(provider, method)| Tool {
                    name: method.name.clone(),
                    description: method.description.clone(),
                    category: Some(provider.to_string()),
                    kind: Some(method.kind),
                    input_schema: None,
                })
                .collect(),
        }),
        Some("openai") => ToolListing::OpenAi(definitions(set.openai_tools())?),
        _ => ToolListing::Tools(ToolList {
            tools: definitions(set.mcp_tools())?,
        }),
    }))
}

/// The host's tool definitions (an array of JSON objects) as wire types.
/// They always read: a definition that does not is the server's fault (a
/// host whose definitions changed shape), never the client's.
fn definitions<T: DeserializeOwned>(listing: Json) -> Result<Vec<T>, ApiError> {
    serde_json::from_value(listing).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "bad-listing",
            format!("the host's tool definitions do not read as the API's: {e}"),
        )
    })
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
        (status = 200, body = ToolSchema),
        (status = 401, body = ErrorBody),
        (status = 404, description = "No enabled tool of that name", body = ErrorBody),
    )
)]
pub async fn schema(
    State(state): State<Shared>,
    _caller: Caller,
    Path(name): Path<String>,
) -> Result<axum::Json<ToolSchema>, ApiError> {
    let (_, method) = find(&state, &name)?;
    Ok(axum::Json(ToolSchema {
        signature: method.signature(),
        parameters: method.params.iter().map(ParamSchema::from).collect(),
        name: method.name,
        kind: method.kind,
        returns: method.returns,
    }))
}

/// `GET /v1/tools/{name}/metadata`: what the tool is and the execution
/// controls' settings on it (null where the policy sets none).
#[utoipa::path(
    get, path = "/v1/tools/{name}/metadata", tag = "tools", security(("token" = [])),
    params(("name" = String, Path, description = "The method's name")),
    responses(
        (status = 200, body = ToolMetadata),
        (status = 401, body = ErrorBody),
        (status = 404, description = "No enabled tool of that name", body = ErrorBody),
    )
)]
pub async fn metadata(
    State(state): State<Shared>,
    _caller: Caller,
    Path(name): Path<String>,
) -> Result<axum::Json<ToolMetadata>, ApiError> {
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
    Ok(axum::Json(ToolMetadata {
        name: method.name,
        category: plugin_id.clone(),
        plugin: PluginRef {
            id: plugin_id,
            name: plugin_name,
            version,
        },
        kind: method.kind,
        description: method.description,
        rate_limit: controls.rate_limit,
        rate_limit_scope: controls.rate_limit_scope,
        cost_per_use: controls.cost_per_use,
        dangerous: controls.dangerous.unwrap_or(false),
        requires_auth: controls.requires_auth.unwrap_or(false),
        breaker: controls.breaker.as_ref().map(Breaker::from),
    }))
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
        (status = 400, description = "No or an empty `chat_key`", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key or user id outside the token's namespace",
         body = ErrorBody),
        (status = 500, description = "A plugin's lifecycle hook failed",
         body = ErrorBody),
        (status = 503, description = "Queue full, no slot in time, or shutting down",
         body = ErrorBody),
    )
)]
pub async fn prompt(
    State(state): State<Shared>,
    caller: Caller,
    query: Result<Query<PromptQuery>, QueryRejection>,
) -> Result<String, ApiError> {
    let Query(query) = query?;
    let ctx = chat(&caller, &query.chat_key, query.user_id)?;
    Ok(in_context(&state, &ctx).await?.prompt())
}
