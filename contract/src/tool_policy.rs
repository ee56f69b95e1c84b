//! The policy's `[tools.<id>]` tables: tool sources, whose operations
//! become sandbox methods under the same checks and execution controls as a
//! plugin's. One kind for now: an OpenAPI 3.0 or 3.1 document (JSON) and the
//! server it describes.
//!
//! ```toml
//! [tools.shop]
//! openapi = "specs/shop.json"       # a file beside the policy, or an http(s) URL
//! sha256 = "<the document's SHA-256>"  # required for a URL: it is fetched once, pinned
//! base_url = "https://shop.example/api"  # the only host:port its calls reach
//! operations = ["get_item", "create_*"]  # operationIds, `*` matching any run of characters
//! prefix = "shop_"                  # before each method's name [none]
//! kinds = { summarize = "agent" }   # by operationId [tool]
//! auth = { type = "bearer", token = { env = "SHOP_TOKEN" } }
//!
//! [tools.shop.controls]             # execution controls, as a plugin's
//! rate_limit = 60
//! [tools.shop.methods.shop_create_item]
//! dangerous = true
//! ```
//!
//! A secret (a token, a key, a password) is written in the policy, or read
//! from the environment (`{ env = "NAME" }`) or a file (`{ file = "PATH" }`)
//! when the host starts; its `Debug` form never shows it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::control_settings::{ControlSettings, is_method_name};
use crate::digest::Digest;
use crate::types::MethodKind;

/// The largest OpenAPI document a source may name [default: 4 MiB].
pub const DEFAULT_MAX_SPEC_BYTES: u64 = 4 << 20;
/// The most `max_spec_bytes` may be.
pub const MAX_SPEC_BYTES: u64 = 64 << 20;

/// One `[tools.<id>]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSourcePolicy {
    /// The OpenAPI document: a file (relative to the policy file's folder)
    /// or an `http://`/`https://` URL.
    pub openapi: String,
    /// The document's SHA-256 (hex): required for a URL, checked for a file
    /// when given.
    pub sha256: Option<Digest>,
    /// Where the calls go: scheme, host, port and a path prefix. The
    /// document's `servers` are not used.
    pub base_url: String,
    /// The operations offered, by `operationId`; `*` matches any run of
    /// characters. At least one.
    pub operations: Vec<String>,
    /// Put before every method's name.
    #[serde(default)]
    pub prefix: String,
    /// Each operation's result kind, by `operationId` [tool].
    #[serde(default)]
    pub kinds: BTreeMap<String, MethodKind>,
    /// How calls authenticate.
    pub auth: Option<Auth>,
    /// The largest document read, in bytes [4 MiB; at most 64 MiB].
    pub max_spec_bytes: Option<u64>,
    /// Execution controls on all its methods' calls.
    #[serde(default)]
    pub controls: ControlSettings,
    /// Execution controls on one method's calls, by method name.
    #[serde(default)]
    pub methods: BTreeMap<String, ControlSettings>,
}

/// How a source's calls authenticate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer {
        /// The token.
        token: Secret,
    },
    /// A header of its own (e.g. `X-API-Key`).
    Header {
        /// The header's name.
        name: String,
        /// Its value.
        value: Secret,
    },
    /// A query parameter (e.g. `api_key`).
    Query {
        /// The parameter's name.
        name: String,
        /// Its value.
        value: Secret,
    },
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: Secret,
    },
}

impl Auth {
    /// The secret it holds.
    pub fn secret(&self) -> &Secret {
        match self {
            Auth::Bearer { token } => token,
            Auth::Header { value, .. } | Auth::Query { value, .. } => value,
            Auth::Basic { password, .. } => password,
        }
    }
}

/// A secret value: written in the policy, or where to read it.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Secret {
    /// The value itself.
    Value(String),
    /// An environment variable's value, read when the host starts.
    Env {
        /// The variable.
        env: String,
    },
    /// A file's content (its trailing newline dropped), read when the host
    /// starts.
    File {
        /// The file.
        file: String,
    },
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Secret::Value(_) => f.write_str("Secret(..)"),
            Secret::Env { env } => write!(f, "Secret(env {env})"),
            Secret::File { file } => write!(f, "Secret(file {file})"),
        }
    }
}

impl Secret {
    /// The secret's value, read now; the error names where it was looked
    /// for, never a value. A relative file is taken from `folder`.
    pub fn read(&self, folder: Option<&Path>) -> Result<String, String> {
        let value = match self {
            Secret::Value(value) => value.clone(),
            Secret::Env { env } => std::env::var(env)
                .map_err(|_| format!("the environment variable `{env}` is not set"))?,
            Secret::File { file } => {
                let path = match folder {
                    Some(folder) => folder.join(file),
                    None => file.into(),
                };
                let mut text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if text.ends_with('\n') {
                    text.pop();
                }
                text
            }
        };
        if value.is_empty() {
            return Err("the secret is empty".to_string());
        }
        Ok(value)
    }
}

impl ToolSourcePolicy {
    /// What is wrong with the table `tools.<id>`, if anything.
    pub(crate) fn check(&self, id: &str) -> Result<(), String> {
        let key = |k: &str| format!("`tools.{id}.{k}`");
        let spec_is_url = is_http_url(&self.openapi);
        if spec_is_url && self.sha256.is_none() {
            return Err(format!(
                "{}: a document fetched from a URL must be pinned by its SHA-256 (`sha256 = \"...\"`; `sandwit tools inspect URL` prints it)",
                key("openapi")
            ));
        }
        if !spec_is_url && self.openapi.contains("://") {
            return Err(format!(
                "{}: only http:// and https:// URLs are fetched; anything else is a file",
                key("openapi")
            ));
        }
        check_base_url(&self.base_url).map_err(|why| format!("{}: {why}", key("base_url")))?;
        if self.operations.is_empty() {
            return Err(format!(
                "{}: name at least one operationId (`[\"*\"]` offers them all)",
                key("operations")
            ));
        }
        if let Some(bad) = self
            .operations
            .iter()
            .find(|op| op.is_empty() || op.len() > 256)
        {
            return Err(format!(
                "{}: `{}` is not an operationId pattern",
                key("operations"),
                crate::text::cut(bad.clone(), 80)
            ));
        }
        if !self.prefix.is_empty() && !is_method_name(&format!("{}x", self.prefix)) {
            return Err(format!(
                "{}: `{}` cannot begin a Python identifier",
                key("prefix"),
                crate::text::cut(self.prefix.clone(), 80)
            ));
        }
        if let Some(max) = self.max_spec_bytes
            && !(1..=MAX_SPEC_BYTES).contains(&max)
        {
            return Err(format!(
                "{}: {max} is not 1 to {MAX_SPEC_BYTES} bytes",
                key("max_spec_bytes")
            ));
        }
        if let Some(auth) = &self.auth {
            let name = match auth {
                Auth::Header { name, .. } | Auth::Query { name, .. } => Some(name),
                Auth::Bearer { .. } | Auth::Basic { .. } => None,
            };
            if let Some(name) = name
                && (name.is_empty()
                    || !name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)))
            {
                return Err(format!(
                    "{}: `{}` is not a header or parameter name",
                    key("auth.name"),
                    crate::text::cut(name.clone(), 80)
                ));
            }
        }
        self.controls.check(&format!("tools.{id}.controls"))?;
        for (name, settings) in &self.methods {
            if !is_method_name(name) {
                return Err(format!(
                    "`tools.{id}.methods.{name}`: `{name}` is not a method name (a Python identifier)"
                ));
            }
            settings.check(&format!("tools.{id}.methods.{name}"))?;
        }
        Ok(())
    }

    /// The largest document read, in bytes.
    pub fn max_spec_bytes(&self) -> u64 {
        self.max_spec_bytes.unwrap_or(DEFAULT_MAX_SPEC_BYTES)
    }

    /// Whether the document is fetched from a URL (else read from a file).
    pub fn spec_is_url(&self) -> bool {
        is_http_url(&self.openapi)
    }

    /// Whether `operation_id` is one of those offered.
    pub fn offers(&self, operation_id: &str) -> bool {
        self.operations.iter().any(|p| glob(p, operation_id))
    }
}

fn is_http_url(text: &str) -> bool {
    text.starts_with("http://") || text.starts_with("https://")
}

/// Why `url` is not a base URL: http(s), a host, no user, query or fragment.
fn check_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("it must begin with http:// or https://")?;
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() {
        return Err("it names no host".into());
    }
    if authority.contains('@') {
        return Err("it may not hold a user or password (use `auth`)".into());
    }
    if url.contains('?') || url.contains('#') {
        return Err("it may not hold a query or a fragment".into());
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it holds spaces or control characters".into());
    }
    Ok(())
}

/// Whether `text` matches `pattern`, where `*` matches any run of
/// characters (none included) and every other character itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_of_characters() {
        for (p, t, yes) in [
            ("*", "anything", true),
            ("get_item", "get_item", true),
            ("get_item", "get_items", false),
            ("create_*", "create_item", true),
            ("create_*", "create_", true),
            ("*_item", "get_item", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxcyyb", false),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(glob(p, t), yes, "{p} {t}");
        }
    }

    #[test]
    fn a_secret_is_read_and_never_shown() {
        let secret = Secret::Value("tok-1234".into());
        assert_eq!(format!("{secret:?}"), "Secret(..)");
        assert_eq!(secret.read(None).unwrap(), "tok-1234");
        let missing = Secret::Env {
            env: "SANDWIT_TEST_NO_SUCH_VARIABLE".into(),
        };
        assert!(missing.read(None).unwrap_err().contains("is not set"));
    }
}
