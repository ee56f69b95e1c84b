//! What the registry's operations return: the JSON API sends these as they
//! are, and other surfaces (the web page) render them.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// A search: every field optional.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// Words that must all appear (case-insensitive) in the id, name,
    /// description, method names or docstrings of the latest version; at
    /// most 200 bytes.
    pub q: Option<String>,
    /// Only plugins with a method of this kind (`tool`, `agent`,
    /// `behavior`, `multimodal-agent`).
    pub kind: Option<String>,
    /// Only plugins requesting this capability (`store`, `config`, `chat`,
    /// `http:<host>`), or any `http:` one with `http`.
    pub capability: Option<String>,
    /// The page, from 1.
    #[param(minimum = 1, maximum = 10000)]
    pub page: Option<u32>,
}

/// One page of search results.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchPage {
    /// The plugins on this page, by id.
    pub plugins: Vec<PluginSummary>,
    /// This page's number, from 1.
    pub page: u32,
    /// The most plugins a page lists.
    pub per_page: u32,
    /// How many plugins match in all.
    pub total: u64,
}

/// A plugin in search results, as its latest version not yanked describes
/// it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PluginSummary {
    /// The plugin id.
    pub id: String,
    /// Its human-readable name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The highest version that is not yanked.
    pub latest_version: String,
    /// The kinds of its methods.
    pub kinds: Vec<String>,
    /// The capabilities it requests.
    pub capabilities: Vec<String>,
}

/// A plugin and all its versions.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PluginInfo {
    /// The plugin id.
    pub id: String,
    /// The name its latest version gives (the newest one if all are yanked).
    pub name: String,
    /// The description its latest version gives.
    pub description: String,
    /// The accounts that own it.
    pub owners: Vec<String>,
    /// Every version, newest (highest) first.
    pub versions: Vec<VersionInfo>,
}

/// A key its account revoked.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeyRevoked {
    /// The key (`ed25519:<base64>`).
    pub public_key: String,
    /// When it was revoked (RFC 3339, UTC).
    pub revoked_at: String,
}

/// One published version, in a plugin's list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VersionInfo {
    /// The semantic version.
    pub version: String,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// The component's size in bytes.
    pub size: u64,
    /// The key that signed it (`ed25519:<base64>`).
    pub signer: String,
    /// Whether the signer's account has revoked that key since.
    pub signer_revoked: bool,
    /// Whether it is yanked (still downloadable; not chosen by default).
    pub yanked: bool,
    /// When it was published (RFC 3339, UTC).
    pub published_at: String,
}

/// One published version, with its manifest and signature.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VersionDetail {
    /// The plugin id.
    pub id: String,
    /// The semantic version.
    pub version: String,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// The component's size in bytes.
    pub size: u64,
    /// The key that signed it (`ed25519:<base64>`).
    pub signer: String,
    /// Whether the signer's account has revoked that key since.
    pub signer_revoked: bool,
    /// The detached signature (base64) of
    /// `sandwit-plugin-signature-v1:<digest>`.
    pub signature: String,
    /// Whether it is yanked.
    pub yanked: bool,
    /// When it was published (RFC 3339, UTC).
    pub published_at: String,
    /// The manifest, as `sandwit inspect --json` prints it: methods with
    /// kinds, parameter schemas and docstrings; capabilities requested.
    #[schema(value_type = Object)]
    pub manifest: serde_json::Value,
}

/// A version just published.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Published {
    /// The plugin id (from its manifest).
    pub id: String,
    /// The version (from its manifest).
    pub version: String,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// The component's size in bytes.
    pub size: u64,
    /// The registered key the signature verified with.
    pub signer: String,
    /// The manifest, as `sandwit inspect --json` prints it.
    #[schema(value_type = Object)]
    pub manifest: serde_json::Value,
}

/// A public key registered for an account.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeyRegistered {
    /// The key, `ed25519:<base64>`.
    pub public_key: String,
    /// Whether it was new (false: the account already had it).
    #[serde(skip)]
    pub created: bool,
}

/// A plugin's owners, and the accounts invited to become owners.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OwnerList {
    /// The owners' account names, sorted.
    pub users: Vec<String>,
    /// Accounts invited by an owner that have not accepted yet, sorted:
    /// they own nothing until they do.
    pub invited: Vec<String>,
}

/// A stored component, opened for reading.
#[derive(Debug)]
pub struct Blob {
    /// The file.
    pub file: std::fs::File,
    /// Its size in bytes.
    pub size: u64,
}
