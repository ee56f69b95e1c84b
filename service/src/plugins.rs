//! The plugins at runtime (admin): `GET /v1/plugins`, `POST
//! /v1/plugins/{id}:enable` and `:disable`, `POST /v1/plugins:reload`.

use axum::extract::{Path, State};

use crate::auth::Caller;
use crate::body::Ignored;
use crate::catalog::Catalog;
use crate::error::{ApiError, ErrorBody};
use crate::state::Shared;
use crate::wire::{PluginInfo, PluginList, Reloaded, Switched};

/// Every loaded plugin, with whether it is enabled.
#[utoipa::path(
    get, path = "/v1/plugins", tag = "plugins", security(("token" = [])),
    responses((status = 200, body = PluginList),
              (status = 401, body = ErrorBody))
)]
pub async fn list(State(state): State<Shared>, _caller: Caller) -> axum::Json<PluginList> {
    let catalog = state.catalog.read().expect("catalog lock");
    let plugins = catalog
        .plugins()
        .iter()
        .map(|p| {
            let m = p.manifest();
            PluginInfo {
                id: m.id.clone(),
                name: m.name.clone(),
                version: m.version.clone(),
                description: m.description.clone(),
                methods: m.methods.iter().map(|m| m.name.clone()).collect(),
                sha256: p.hash().to_string(),
                enabled: !catalog.disabled().contains(p.id()),
            }
        })
        .collect();
    axum::Json(PluginList { plugins })
}

/// `POST /v1/plugins/{id}:enable` or `:disable`: from the next run on, a
/// disabled plugin's methods are in no listing and not callable.
#[utoipa::path(
    post, path = "/v1/plugins/{id}:{action}", tag = "plugins", security(("token" = [])),
    params(("id" = String, Path, description = "The plugin's id"),
           ("action" = String, Path, description = "`enable` or `disable`",
            pattern = "^(enable|disable)$")),
    responses(
        (status = 200, body = Switched),
        (status = 401, body = ErrorBody),
        (status = 403, description = "Not an admin token", body = ErrorBody),
        (status = 404, description = "No such plugin", body = ErrorBody),
    )
)]
pub async fn action(
    State(state): State<Shared>,
    caller: Caller,
    Path(target): Path<String>,
    _body: Ignored,
) -> Result<axum::Json<Switched>, ApiError> {
    caller.require_admin()?;
    let (id, enabled) = match target.rsplit_once(':') {
        Some((id, "enable")) => (id, true),
        Some((id, "disable")) => (id, false),
        _ => {
            return Err(ApiError::not_found(
                "not-found",
                format!(
                    "no endpoint `/v1/plugins/{target}`: POST /v1/plugins/{{id}}:enable or :disable"
                ),
            ));
        }
    };
    if !state
        .catalog
        .write()
        .expect("catalog lock")
        .set_enabled(id, enabled)
    {
        return Err(ApiError::not_found(
            "unknown-plugin",
            format!("no plugin `{id}`"),
        ));
    }
    tracing::info!(plugin = id, enabled, by = %caller.name, "plugin switched");
    Ok(axum::Json(Switched {
        id: id.to_string(),
        enabled,
    }))
}

/// `POST /v1/plugins:reload`: loads the plugin directory again; plugins
/// disabled stay disabled. A directory that fails to load leaves the
/// plugins as they were and answers 422 naming the file.
#[utoipa::path(
    post, path = "/v1/plugins:reload", tag = "plugins", security(("token" = [])),
    responses(
        (status = 200, body = Reloaded),
        (status = 401, body = ErrorBody),
        (status = 403, description = "Not an admin token", body = ErrorBody),
        (status = 422, description = "A file failed to load; nothing changed",
         body = ErrorBody),
    )
)]
pub async fn reload(
    State(state): State<Shared>,
    caller: Caller,
    _body: Ignored,
) -> Result<axum::Json<Reloaded>, ApiError> {
    caller.require_admin()?;
    let failed = |e: anyhow::Error| {
        ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "reload-failed",
            format!("{e:#}"),
        )
    };
    let plugins = Catalog::load(&state.host, &state.config.plugin_dir)
        .await
        .map_err(failed)?;
    let (tools, disabled) = {
        let catalog = state.catalog.read().expect("catalog lock");
        (catalog.tools().to_vec(), catalog.disabled().clone())
    };
    let catalog = Catalog::new(plugins, tools, disabled).map_err(failed)?;
    let plugins = catalog
        .plugins()
        .iter()
        .map(|p| p.id().to_string())
        .collect();
    *state.catalog.write().expect("catalog lock") = catalog;
    Ok(axum::Json(Reloaded { plugins }))
}
