//! The JSON API under `/v1`, `/healthz` and `/openapi.json`. Each handler
//! checks what the request carries and calls the [`Registry`] method that
//! does the work, which other surfaces call too.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::{Deserialize, Serialize};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::error::{Error, Result};
use crate::{
    Account, KeyRegistered, KeyRevoked, OwnerList, PluginInfo, PluginSummary, Published, Registry,
    SearchPage, SearchQuery, VersionDetail, VersionInfo, names,
};

/// The header that carries a publish's signature.
pub const SIGNATURE_HEADER: &str = "sandwit-signature";

/// The API's routes, on `registry`.
pub fn router(registry: Registry) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi_json))
        .route("/v1/account", get(account))
        .route("/v1/registry", get(registry_info))
        .route("/v1/keys", post(register_key))
        .route("/v1/keys/revoke", post(revoke_key))
        .route("/v1/plugins", post(publish).get(search))
        .route("/v1/plugins/{id}", get(plugin))
        .route("/v1/plugins/{id}/owners", get(owners).put(invite_owners))
        .route("/v1/plugins/{id}/owners/{user}", delete(remove_owner))
        .route("/v1/plugins/{id}/ownership", post(accept_ownership))
        .route("/v1/plugins/{id}/{version}", get(version))
        .route("/v1/plugins/{id}/{version}/yank", delete(yank))
        .route("/v1/plugins/{id}/{version}/unyank", put(unyank))
        .route("/v1/blobs/{digest}", get(blob))
        .fallback(not_found)
        .with_state(registry)
}

/// The OpenAPI 3.1 document of the API, generated from the handlers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "sandwit plugin registry",
        description = "Publish signed sandwit plugin components, search them and download them. \
                       See docs/REGISTRY.md.",
        license(name = "Apache-2.0"),
    ),
    paths(
        healthz, registry_info, account, register_key, revoke_key, publish, search, plugin, version, blob, yank, unyank, owners,
        invite_owners, accept_ownership, remove_owner
    ),
    components(schemas(
        ErrorBody, Ok, RegistryInfo, AccountInfo, KeyRequest, RevokeRequest, OwnersRequest,
        KeyRegistered, KeyRevoked, OwnerList, PluginInfo, PluginSummary,
        Published, SearchPage, VersionDetail, VersionInfo
    )),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A token from `sandwit registry token create`"))
                    .build(),
            ),
        );
    }
}

/// An error: `{"error": "<code>", "message": "..."}`, and for a rejected
/// plugin `report`, `sandwit validate --json`'s report.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// A kebab-case code (`unauthorized`, `not-found`, `invalid-plugin`, ...).
    pub error: String,
    /// A sentence naming what was wrong.
    pub message: String,
    /// With `invalid-plugin`: `{"file", "ok": false, "problems": [...], "plugin": null}`.
    #[schema(value_type = Option<Object>)]
    pub report: Option<serde_json::Value>,
}

/// A success with nothing more to say.
#[derive(Serialize, ToSchema)]
pub struct Ok {
    /// Always true.
    pub ok: bool,
}

/// A publisher key to register, with the proof that the caller holds it.
#[derive(Deserialize, ToSchema)]
pub struct KeyRequest {
    /// `ed25519:<standard base64 of the 32-byte key>`.
    pub public_key: String,
    /// The key's signature (standard base64) of
    /// `sandwit-key-registration-v2:<registry>:<account>:<public_key>`,
    /// where `<registry>` is this registry's id and `<account>` the token's
    /// account name (both from `GET /v1/account`).
    pub proof: String,
}

/// A key of the token's account to revoke.
#[derive(Deserialize, ToSchema)]
pub struct RevokeRequest {
    /// `ed25519:<standard base64 of the 32-byte key>`.
    pub public_key: String,
}

/// Who this registry is.
#[derive(Serialize, ToSchema)]
pub struct RegistryInfo {
    /// Its id (`swreg_...`), made with its database: what a key
    /// registration's proof names.
    pub id: String,
}

/// Accounts to invite as owners of a plugin.
#[derive(Deserialize, ToSchema)]
pub struct OwnersRequest {
    /// Account names (at most 100).
    pub users: Vec<String>,
}

/// The account a token belongs to.
#[derive(Serialize, ToSchema)]
pub struct AccountInfo {
    /// Its name: what a key registration's proof signs.
    pub name: String,
    /// `admin` or `publisher`.
    pub role: String,
    /// The registry's id, which a key registration's proof signs too.
    pub registry: String,
}

/// The account a request's token belongs to: 401 without one.
pub struct Authed(pub Account);

impl<S: Send + Sync> FromRequestParts<S> for Authed {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self> {
        parts
            .extensions
            .get::<Account>()
            .cloned()
            .map(Authed)
            .ok_or_else(|| {
                Error::Unauthorized(
                    "this needs a token: send `Authorization: Bearer <token>`".into(),
                )
            })
    }
}

/// A JSON body, with a JSON error naming what was wrong with it.
struct JsonBody<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<S> for JsonBody<T> {
    type Rejection = Error;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(JsonBody(value)),
            Err(rejection) => Err(Error::bad_request("invalid-body", rejection.body_text())),
        }
    }
}

/// Path parameters, with a JSON error when they cannot be read.
struct PathParams<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathParams(value)),
            Err(rejection) => Err(Error::bad_request("invalid-path", rejection.body_text())),
        }
    }
}

async fn not_found() -> Error {
    Error::NotFound("no such endpoint (see /openapi.json)".into())
}

/// Whether the service is up.
#[utoipa::path(get, path = "/healthz", responses((status = 200, body = Ok)))]
async fn healthz() -> Json<Ok> {
    Json(Ok { ok: true })
}

async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        ApiDoc::openapi().to_pretty_json().unwrap_or_default(),
    )
        .into_response()
}

/// The token's account: its name is what a key registration signs.
#[utoipa::path(
    get, path = "/v1/account", security(("token" = [])),
    responses((status = 200, body = AccountInfo), (status = 401, body = ErrorBody),
              (status = 429, body = ErrorBody))
)]
async fn account(State(registry): State<Registry>, Authed(account): Authed) -> Json<AccountInfo> {
    Json(AccountInfo {
        name: account.name,
        role: account.role.as_str().to_string(),
        registry: registry.id().to_string(),
    })
}

/// This registry's id, which key registrations sign (a proof made for
/// another registry is refused here).
#[utoipa::path(
    get, path = "/v1/registry",
    responses((status = 200, body = RegistryInfo), (status = 429, body = ErrorBody))
)]
async fn registry_info(State(registry): State<Registry>) -> Json<RegistryInfo> {
    Json(RegistryInfo {
        id: registry.id().to_string(),
    })
}

/// Revokes a key of the token's account: it verifies no publish from now
/// on and is never registered again; versions it signed stay, shown with
/// `signer_revoked`.
#[utoipa::path(
    post, path = "/v1/keys/revoke", request_body = RevokeRequest, security(("token" = [])),
    responses(
        (status = 200, description = "Revoked (now or before)", body = KeyRevoked),
        (status = 400, description = "A malformed key or body", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "The account has no such key", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
async fn revoke_key(
    State(registry): State<Registry>,
    Authed(account): Authed,
    JsonBody(body): JsonBody<RevokeRequest>,
) -> Result<Json<KeyRevoked>> {
    Ok(Json(registry.revoke_key(&account, &body.public_key).await?))
}

/// Registers a publisher key for the token's account, given the key's
/// signature of `sandwit-key-registration-v2:<registry>:<account>:<public_key>`
/// (proof that the caller holds the secret key, made for this registry).
#[utoipa::path(
    post, path = "/v1/keys", request_body = KeyRequest, security(("token" = [])),
    responses(
        (status = 201, description = "Registered", body = KeyRegistered),
        (status = 200, description = "The account already had it", body = KeyRegistered),
        (status = 400, description = "A malformed key, or a proof that does not verify",
         body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 409, description = "Another account has this key, or this one revoked it",
         body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
async fn register_key(
    State(registry): State<Registry>,
    Authed(account): Authed,
    JsonBody(body): JsonBody<KeyRequest>,
) -> Result<(StatusCode, Json<KeyRegistered>)> {
    let key = registry
        .register_key(&account, &body.public_key, &body.proof)
        .await?;
    let status = if key.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(key)))
}

/// Publishes a plugin component: the signature must verify with one of the
/// account's keys, and the component must pass the host's load check.
#[utoipa::path(
    post, path = "/v1/plugins", security(("token" = [])),
    request_body(content = Vec<u8>, content_type = "application/wasm",
                 description = "The component's bytes (at most 64 MiB)"),
    params(("Sandwit-Signature" = String, Header,
            description = "Base64 ed25519 signature of `sandwit-plugin-signature-v1:<digest>`")),
    responses(
        (status = 201, description = "Published", body = Published),
        (status = 400, description = "No or a bad signature", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "The id belongs to other accounts", body = ErrorBody),
        (status = 409, description = "The version is already published", body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 422, description = "The plugin failed the load check", body = ErrorBody),
        (status = 429, description = "Rate limited, or the account has as many uploads in flight as one may",
         body = ErrorBody),
        (status = 503, description = "As many checks or uploads as allowed are under way", body = ErrorBody),
    )
)]
async fn publish(
    State(registry): State<Registry>,
    Authed(account): Authed,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Published>)> {
    let signature = match headers.get(SIGNATURE_HEADER) {
        None => None,
        Some(value) => Some(value.to_str().map_err(|_| {
            Error::BadSignature("the Sandwit-Signature header is not base64 text".into())
        })?),
    };
    if signature.is_none() {
        return Err(Error::MissingSignature);
    }
    let max = sandwit_contract::MAX_COMPONENT_BYTES;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(Error::TooLarge(max));
    }
    let slot = registry.upload_slot(&account)?;
    // The signal that this upload holds a place (tests wait for it).
    tracing::info!(account = %account.name, declared = ?declared, "reading an upload");
    let bytes = read_capped(body, max).await?;
    let published = registry.publish(&account, bytes, signature, slot).await?;
    Ok((StatusCode::CREATED, Json(published)))
}

/// Reads at most `max` bytes of `body`: 413 beyond.
async fn read_capped(body: Body, max: usize) -> Result<Bytes> {
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(Error::TooLarge(max)),
        Err(e) => Err(Error::bad_request(
            "unreadable-body",
            format!("the request body could not be read: {e}"),
        )),
    }
}

/// Searches plugins: over id, name, description, method names and
/// docstrings of each one's latest version not yanked.
#[utoipa::path(
    get, path = "/v1/plugins", params(SearchQuery),
    responses((status = 200, body = SearchPage), (status = 400, body = ErrorBody),
              (status = 429, body = ErrorBody))
)]
async fn search(
    State(registry): State<Registry>,
    query: std::result::Result<Query<SearchQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<SearchPage>> {
    let Query(query) =
        query.map_err(|rejection| Error::bad_request("invalid-query", rejection.body_text()))?;
    Ok(Json(registry.search(query).await?))
}

/// A plugin: its owners and every version, newest first.
#[utoipa::path(
    get, path = "/v1/plugins/{id}", params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, body = PluginInfo), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody))
)]
async fn plugin(
    State(registry): State<Registry>,
    PathParams(id): PathParams<String>,
) -> Result<Json<PluginInfo>> {
    Ok(Json(registry.plugin(&id).await?))
}

/// One version: digest, size, signer, signature and manifest.
#[utoipa::path(
    get, path = "/v1/plugins/{id}/{version}",
    params(("id" = String, Path, description = "Plugin id"),
           ("version" = String, Path, description = "Semantic version")),
    responses((status = 200, body = VersionDetail), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody))
)]
async fn version(
    State(registry): State<Registry>,
    PathParams((id, version)): PathParams<(String, String)>,
) -> Result<Json<VersionDetail>> {
    Ok(Json(registry.version(&id, &version).await?))
}

/// A component's bytes, by digest; immutable, so cached for a year.
#[utoipa::path(
    get, path = "/v1/blobs/{digest}",
    params(("digest" = String, Path, description = "`sha256:<64 lowercase hex>`"),
           ("If-None-Match" = Option<String>, Header, description = "A digest already held")),
    responses(
        (status = 200, description = "The component", content_type = "application/wasm",
         body = Vec<u8>),
        (status = 304, description = "Not modified"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 500, description = "The blob store holds other bytes than the digest's \
                                      (`blob-mismatch`): they are not served", body = ErrorBody),
    )
)]
async fn blob(
    State(registry): State<Registry>,
    PathParams(digest): PathParams<String>,
    headers: HeaderMap,
) -> Result<Response> {
    names::digest_hex(&digest)?;
    let etag = format!("\"{digest}\"");
    let matched = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == etag
        });
    let blob = registry.blob(&digest).await?;
    let etag = HeaderValue::from_str(&etag).map_err(anyhow::Error::from)?;
    let cache = HeaderValue::from_static("public, max-age=31536000, immutable");
    if matched {
        return Ok((
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, etag), (header::CACHE_CONTROL, cache)],
        )
            .into_response());
    }
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(blob.file));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/wasm"),
            ),
            (header::CONTENT_LENGTH, HeaderValue::from(blob.size)),
            (header::ETAG, etag),
            (header::CACHE_CONTROL, cache),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Yanks a version: still downloadable, no longer chosen by default.
#[utoipa::path(
    delete, path = "/v1/plugins/{id}/{version}/yank", security(("token" = [])),
    params(("id" = String, Path, description = "Plugin id"),
           ("version" = String, Path, description = "Semantic version")),
    responses((status = 200, body = Ok), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody))
)]
async fn yank(
    State(registry): State<Registry>,
    Authed(account): Authed,
    PathParams((id, version)): PathParams<(String, String)>,
) -> Result<Json<Ok>> {
    registry.set_yanked(&account, &id, &version, true).await?;
    Ok(Json(Ok { ok: true }))
}

/// Unyanks a version.
#[utoipa::path(
    put, path = "/v1/plugins/{id}/{version}/unyank", security(("token" = [])),
    params(("id" = String, Path, description = "Plugin id"),
           ("version" = String, Path, description = "Semantic version")),
    responses((status = 200, body = Ok), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody))
)]
async fn unyank(
    State(registry): State<Registry>,
    Authed(account): Authed,
    PathParams((id, version)): PathParams<(String, String)>,
) -> Result<Json<Ok>> {
    registry.set_yanked(&account, &id, &version, false).await?;
    Ok(Json(Ok { ok: true }))
}

/// A plugin's owners.
#[utoipa::path(
    get, path = "/v1/plugins/{id}/owners",
    params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, body = OwnerList), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody))
)]
async fn owners(
    State(registry): State<Registry>,
    PathParams(id): PathParams<String>,
) -> Result<Json<OwnerList>> {
    Ok(Json(registry.owners(&id).await?))
}

/// Invites accounts to own a plugin (its owners and admins may): each
/// becomes an owner when it accepts (`POST /v1/plugins/{id}/ownership`).
/// Answers the owners and invitations after.
#[utoipa::path(
    put, path = "/v1/plugins/{id}/owners", security(("token" = [])), request_body = OwnersRequest,
    params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, body = OwnerList), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody))
)]
async fn invite_owners(
    State(registry): State<Registry>,
    Authed(account): Authed,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<OwnersRequest>,
) -> Result<Json<OwnerList>> {
    Ok(Json(
        registry.invite_owners(&account, &id, body.users).await?,
    ))
}

/// Accepts the token's account's invitation to own a plugin: it becomes an
/// owner. Answers the owners and invitations after.
#[utoipa::path(
    post, path = "/v1/plugins/{id}/ownership", security(("token" = [])),
    params(("id" = String, Path, description = "Plugin id")),
    responses((status = 200, body = OwnerList), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "No such plugin, or no invitation", body = ErrorBody),
              (status = 429, body = ErrorBody))
)]
async fn accept_ownership(
    State(registry): State<Registry>,
    Authed(account): Authed,
    PathParams(id): PathParams<String>,
) -> Result<Json<OwnerList>> {
    Ok(Json(registry.accept_ownership(&account, &id).await?))
}

/// Removes an owner of a plugin, or withdraws an invitation (its owners
/// and admins may); never the last owner (409). Answers the owners and
/// invitations after.
#[utoipa::path(
    delete, path = "/v1/plugins/{id}/owners/{user}", security(("token" = [])),
    params(("id" = String, Path, description = "Plugin id"),
           ("user" = String, Path, description = "Account name")),
    responses((status = 200, body = OwnerList), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody),
              (status = 409, description = "The last owner", body = ErrorBody),
              (status = 429, body = ErrorBody))
)]
async fn remove_owner(
    State(registry): State<Registry>,
    Authed(account): Authed,
    PathParams((id, user)): PathParams<(String, String)>,
) -> Result<Json<OwnerList>> {
    Ok(Json(registry.remove_owner(&account, &id, &user).await?))
}
