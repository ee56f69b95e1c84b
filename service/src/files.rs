//! `GET /v1/chats/{chat}/files` and `GET /v1/chats/{chat}/files/{*path}`:
//! the files of a chat's workspace, kept by either interpreter across the
//! chat's runs (`sandwit serve --workspace DIR`). A chat is
//! named as a run names it: a namespaced token names only its own chats,
//! and the token's namespace chooses the folder, so two tenants' chats of
//! the same key never share files.

use std::io::ErrorKind;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sandwit::{AgentCtx, Host};

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::state::Shared;
use crate::wire::{ChatFiles, WorkspaceFile};

/// Runs `work` on the server's host, for `chat`'s context
/// (checked as a run's is) and the workspace byte quota, off the async
/// threads (it reads files).
async fn in_workspace<T: Send + 'static>(
    state: &Shared,
    caller: &Caller,
    chat: &str,
    work: impl FnOnce(&Host, &AgentCtx, u64) -> std::io::Result<T> + Send + 'static,
) -> Result<std::io::Result<T>, ApiError> {
    let ctx = crate::chat::agent_ctx(caller, chat, None, "bad-request")?;
    let Some(max_bytes) = state.interpreters.workspace_max_bytes() else {
        return Err(no_workspaces());
    };
    let host = state.host.clone();
    tokio::task::spawn_blocking(move || work(&host, &ctx, max_bytes))
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "workspace-failed",
                e.to_string(),
            )
        })
}

/// 404 `no-workspaces`: the server keeps none.
fn no_workspaces() -> ApiError {
    ApiError::not_found(
        "no-workspaces",
        "this server keeps no chat workspaces; its operator starts `sandwit serve` with \
         `--workspace DIR`",
    )
}

/// A workspace's error as an answer: `path` names the file asked for.
fn io_error(error: std::io::Error, chat: &str, path: Option<&str>) -> ApiError {
    let what = match path {
        Some(path) => format!("`{path}` of chat `{chat}`"),
        None => format!("chat `{chat}`'s workspace"),
    };
    match error.kind() {
        ErrorKind::Unsupported => no_workspaces(),
        ErrorKind::NotFound | ErrorKind::NotADirectory | ErrorKind::IsADirectory => {
            ApiError::not_found("no-such-file", format!("no file {what}: {error}"))
        }
        ErrorKind::InvalidInput | ErrorKind::InvalidFilename | ErrorKind::PermissionDenied => {
            ApiError::bad_request("bad-path", format!("{what}: {error}"))
        }
        _ => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "workspace-failed",
            format!("reading {what}: {error}"),
        ),
    }
}

/// Lists the files of a chat's workspace (`{path, size}` each), as the
/// chat's runs left them; none for a chat that has not run yet.
#[utoipa::path(
    get, path = "/v1/chats/{chat}/files", tag = "chats",
    params(("chat" = String, Path, description = "The chat key, as runs name it")),
    security(("token" = [])),
    responses(
        (status = 200, body = ChatFiles),
        (status = 400, description = "An empty or too long chat key", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key outside the token's namespace",
         body = ErrorBody),
        (status = 404, description = "The server keeps no workspaces",
         body = ErrorBody),
        (status = 500, description = "The workspace could not be read",
         body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<Shared>,
    caller: Caller,
    Path(chat): Path<String>,
) -> Result<axum::Json<ChatFiles>, ApiError> {
    let files = in_workspace(&state, &caller, &chat, |host, ctx, _| {
        host.workspace_files(ctx)
    })
    .await?
    .or_else(|e| match e.kind() {
        // A chat that has not run yet has an empty workspace.
        ErrorKind::NotFound => Ok(Vec::new()),
        _ => Err(e),
    })
    .map_err(|e| io_error(e, &chat, None))?;
    Ok(axum::Json(ChatFiles {
        files: files.iter().map(WorkspaceFile::from).collect(),
        chat,
    }))
}

/// The bytes of a file of a chat's workspace, up to the workspace's byte
/// quota.
#[utoipa::path(
    get, path = "/v1/chats/{chat}/files/{path}", tag = "chats",
    params(("chat" = String, Path, description = "The chat key, as runs name it"),
           ("path" = String, Path, description = "The file's path in the workspace, \
                                                   `/`-separated")),
    security(("token" = [])),
    responses(
        (status = 200, description = "The file's bytes", content_type = "application/octet-stream",
         body = Vec<u8>),
        (status = 400, description = "A bad path (one leading outside the workspace among \
                                      them), a file over the limit, or an empty or too long \
                                      chat key", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "A chat key outside the token's namespace",
         body = ErrorBody),
        (status = 404, description = "No such file, or the server keeps no workspaces",
         body = ErrorBody),
        (status = 500, description = "The workspace could not be read",
         body = ErrorBody),
    )
)]
pub async fn read(
    State(state): State<Shared>,
    caller: Caller,
    Path((chat, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let asked = path.clone();
    let bytes = in_workspace(&state, &caller, &chat, move |host, ctx, max_bytes| {
        host.read_workspace_file(ctx, &asked, max_bytes)
    })
    .await?
    .map_err(|e| io_error(e, &chat, Some(&path)))?;
    let headers = [
        (header::CONTENT_TYPE, "application/octet-stream"),
        // What a run wrote is never rendered as something else.
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    Ok((headers, bytes).into_response())
}
