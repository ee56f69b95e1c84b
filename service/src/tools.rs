//! Tool discovery: `GET /v1/tools` (`?category=`, `?kind=`, `?format=openai`
//! or `mcp`), `GET /v1/tools/{name}/schema`, `GET /v1/tools/{name}/metadata`
//! and `GET /v1/prompt`. A tool is a method of an enabled plugin; its
//! category is the plugin's id.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use sandwit::{MethodSpec, PluginSet};
use serde::Deserialize;
use serde_json::{Value as Json, json};

use crate::Shared;
use crate::auth::Caller;
use crate::error::ApiError;

/// The query of `GET /v1/tools`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    category: Option<String>,
    kind: Option<String>,
    format: Option<String>,
}

fn kind_name(method: &MethodSpec) -> String {
    serde_json::to_value(method.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn enabled(state: &Shared) -> PluginSet {
    state
        .catalog
        .read()
        .expect("catalog lock")
        .enabled()
        .clone()
}

/// `GET /v1/tools`.
pub async fn list(
    State(state): State<Shared>,
    _caller: Caller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Query(query) = query?;
    let set = enabled(&state).filter(|provider, method| {
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
        Some("mcp") => json!({"tools": set.mcp_tools()}),
        Some(other) => {
            return Err(ApiError::bad_request(
                "bad-format",
                format!("format `{other}` is not `sandwit`, `openai` or `mcp`"),
            ));
        }
    }))
}

/// The enabled method `name` and its plugin's id.
fn find(state: &Shared, name: &str) -> Result<(String, MethodSpec), ApiError> {
    enabled(state)
        .methods()
        .find(|(_, m)| m.name == name)
        .map(|(p, m)| (p.to_string(), m.clone()))
        .ok_or_else(|| ApiError::not_found("unknown-tool", format!("no enabled tool `{name}`")))
}

/// `GET /v1/tools/{name}/schema`: the parameters' JSON Schemas and the
/// result's.
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
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptQuery {
    chat_key: String,
}

/// `GET /v1/prompt?chat_key=`: the listing an LLM is given of the methods
/// a run for that chat may call, as text.
pub async fn prompt(
    State(state): State<Shared>,
    _caller: Caller,
    query: Result<Query<PromptQuery>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Query(query) = query?;
    if query.chat_key.is_empty() {
        return Err(ApiError::bad_request("bad-query", "`chat_key` is empty"));
    }
    Ok(enabled(&state).prompt())
}
