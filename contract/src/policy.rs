//! The operator's policy: which capabilities each plugin is granted, its
//! configuration, and the caps of the host services. Read from TOML, strictly:
//! an unknown key, a malformed capability or a bad plugin id is an error with
//! its line and column.
//!
//! ```toml
//! [store]
//! url = "plugin-data.db"           # a SQLite file (beside the policy), or postgres://...
//! max_value_bytes = 65536          # per stored value
//! max_plugin_bytes = 16777216      # per plugin, keys and values
//!
//! [http]
//! timeout_ms = 10000               # per request, within the call's deadline
//! max_response_bytes = 4194304     # per response body
//!
//! [registry]
//! # keys whose signatures are trusted (`sandwit install` checks them)
//! trusted_keys = ["ed25519:NV8HSH8rhpK/0zClolLWV7cknL1liUxL2q181nQv6A8="]
//! # plugin files must be in their folder's sandwit.lock, signed by one
//! require_signature = true
//!
//! [plugins.notes]
//! # the components these grants are for: their SHA-256 digests
//! sha256 = ["6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c6f1c"]
//! grant = ["store"]
//!
//! [plugins.weather]
//! sha256 = ["0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e0b9e"]
//! grant = ["config", "http:api.weather.example"]
//! config = { base_url = "https://api.weather.example", api_key = "..." }
//! secrets = ["api_key"]            # never shown, whatever the plugin's schema says
//!
//! [plugins.weather.controls]       # execution controls (see `controls`)
//! rate_limit = 60                  # calls a minute
//! breaker = { failures = 5, recovery_s = 30 }
//! cost_per_use = 0.01
//!
//! [plugins.weather.methods.forecast]
//! requires_auth = true             # overrides the plugin's controls key by key
//!
//! [budgets]
//! per_run = 1.0
//!
//! [approval]
//! require_for = ["requires_auth"]  # the embedder's approver decides within the run
//! pause_for = ["dangerous"]        # the run pauses; a person resumes it later
//! ```
//!
//! A plugin names its own id, so an id alone proves nothing: grants and
//! configuration go only to a component whose SHA-256 the entry pins. A
//! plugin whose entry grants or configures anything but pins no digest, or
//! pins others, is refused when it loads (the error gives its digest).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::capability::{Capability, CapabilityError};
use crate::control_settings::{Approval, Budgets, ControlSettings, is_method_name};
pub use crate::digest::Digest;
use crate::manifest::is_plugin_id;
use crate::signing::PublicKey;
use crate::tool_policy::ToolSourcePolicy;

/// The operator's decisions for every plugin. The default grants nothing.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Where the plugin store lives, and its caps.
    #[serde(default)]
    pub store: StoreSettings,
    /// Caps of outbound HTTP.
    #[serde(default)]
    pub http: HttpLimits,
    /// Which signed plugins are trusted.
    #[serde(default)]
    pub registry: RegistryPolicy,
    /// Cost budgets over every plugin's calls.
    #[serde(default)]
    pub budgets: Budgets,
    /// The method flags whose calls need approval.
    #[serde(default)]
    pub approval: Approval,
    #[serde(default)]
    plugins: BTreeMap<String, PluginPolicy>,
    /// Tool sources, by id (see [`crate::tool_policy`]).
    #[serde(default)]
    tools: BTreeMap<String, ToolSourcePolicy>,
    /// The folder of the file it was read from, if any: where a tool
    /// source's relative paths start.
    #[serde(skip)]
    folder: Option<PathBuf>,
}

/// The policy for one plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginPolicy {
    /// The SHA-256 digests (hex) of the components this entry is for.
    #[serde(default)]
    pub sha256: Vec<Digest>,
    /// The capabilities granted (the plugin gets those it also requests).
    #[serde(default)]
    pub grant: Vec<Capability>,
    /// Its configuration, checked against its config schema when it loads.
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
    /// Top-level configuration keys whose values are secret, in addition to
    /// those the plugin's schema marks `"secret": true`.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Execution controls on all its methods' calls.
    #[serde(default)]
    pub controls: ControlSettings,
    /// Execution controls on one method's calls, by method name (overriding
    /// `controls` key by key).
    #[serde(default)]
    pub methods: BTreeMap<String, ControlSettings>,
}

impl PluginPolicy {
    /// Whether the entry grants or configures anything, and so must pin the
    /// components it is for.
    pub fn gives_anything(&self) -> bool {
        !self.grant.is_empty() || self.config.is_some()
    }

    /// Whether it is for the component whose SHA-256 is `digest` (hex).
    pub fn pins(&self, digest: &str) -> bool {
        self.sha256.iter().any(|d| d.as_str() == digest)
    }
}

/// Which plugin signatures the operator trusts, and whether plugin files
/// must have one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryPolicy {
    /// The public keys (`ed25519:<base64>`) whose signatures are trusted:
    /// `sandwit install` checks a plugin's signature against them.
    pub trusted_keys: Vec<PublicKey>,
    /// Whether a plugin loaded from a file must be listed in its folder's
    /// lock file ([`crate::lock`]) with a signature from a trusted key; a
    /// plugin loaded from bytes, which has no folder, is then refused.
    pub require_signature: bool,
}

/// Where plugin data lives, as a setting names it (`--store`,
/// `$SANDWIT_STORE`, the policy's `[store] url`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file, made if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by its URL (which may hold a password: its
    /// `Debug` form leaves the URL out).
    Postgres(String),
}

impl StoreLocation {
    /// The store `given` names: a `postgres://` or `postgresql://` URL, else
    /// a SQLite file.
    pub fn named(given: &str) -> StoreLocation {
        if given.starts_with("postgres://") || given.starts_with("postgresql://") {
            StoreLocation::Postgres(given.to_string())
        } else {
            StoreLocation::Sqlite(given.into())
        }
    }
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StoreLocation::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

/// The policy's `[store]`: where the plugin store lives and its caps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreSettings {
    /// Its `url`: the store the `sandwit` command and the Python package use
    /// when none is given to them. A relative SQLite path is taken from the
    /// policy file's folder. A Rust host opens a SQLite file it names
    /// itself, and refuses to build over a PostgreSQL one it was not given
    /// a backend for (`sandwit_postgres`).
    pub url: Option<StoreLocation>,
    /// Its caps.
    pub limits: StoreLimits,
}

// By hand: `url` sits among the caps' keys, and serde's `flatten` would
// let a misspelt cap through unnoticed.
impl<'de> Deserialize<'de> for StoreSettings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let url = match table.remove("url") {
            None => None,
            Some(serde_json::Value::String(url)) if !url.is_empty() => {
                Some(StoreLocation::named(&url))
            }
            Some(_) => {
                return Err(D::Error::custom(
                    "`store.url` must be a SQLite file's path or a postgres:// URL",
                ));
            }
        };
        let limits = serde_path_to_error::deserialize(serde_json::Value::Object(table))
            .map_err(|e| D::Error::custom(format!("`store.{}`: {}", e.path(), e.inner())))?;
        Ok(StoreSettings { url, limits })
    }
}

/// Caps of the plugin store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreLimits {
    /// The largest value, in bytes [default: 64 KiB].
    pub max_value_bytes: usize,
    /// The longest key, in bytes [default: 256].
    pub max_key_bytes: usize,
    /// All keys and values of one plugin, in bytes [default: 16 MiB].
    pub max_plugin_bytes: u64,
    /// The most keys `list-keys` returns [default: 10,000].
    pub max_listed_keys: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            max_value_bytes: 64 << 10,
            max_key_bytes: 256,
            max_plugin_bytes: 16 << 20,
            max_listed_keys: 10_000,
        }
    }
}

/// Caps of outbound HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpLimits {
    /// Time for one request to connect and to receive each part of the
    /// response, in milliseconds; never past the call's deadline
    /// [default: 10,000].
    pub timeout_ms: u64,
    /// The largest response body, in bytes [default: 4 MiB].
    pub max_response_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            timeout_ms: 10_000,
            max_response_bytes: 4 << 20,
        }
    }
}

impl HttpLimits {
    /// The per-request timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// A policy that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read the policy {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a valid policy.
    #[error("invalid policy{}: {message}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Invalid {
        /// The file, if read from one.
        path: Option<PathBuf>,
        /// What is wrong, with line and column where TOML gives them.
        message: String,
    },
}

impl Policy {
    /// Parses a policy from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let invalid = |message: String| PolicyError::Invalid {
            path: None,
            message,
        };
        let policy: Policy = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if policy.registry.require_signature && policy.registry.trusted_keys.is_empty() {
            return Err(invalid(
                "`registry.require_signature` is true but `registry.trusted_keys` is empty: no \
                 plugin could be loaded; list the keys whose signatures you trust"
                    .to_string(),
            ));
        }
        for id in policy.plugins.keys() {
            if !is_plugin_id(id) {
                return Err(invalid(format!(
                    "`plugins.{id}`: `{id}` is not a plugin id (lowercase letters, digits, `-` and `_`, starting with a letter)"
                )));
            }
        }
        policy.budgets.check().map_err(invalid)?;
        for (id, source) in &policy.tools {
            if !is_plugin_id(id) {
                return Err(invalid(format!(
                    "`tools.{id}`: `{id}` is not a tool source id (lowercase letters, digits, `-` and `_`, starting with a letter)"
                )));
            }
            if policy.plugins.contains_key(id) {
                return Err(invalid(format!(
                    "`tools.{id}`: `{id}` is also a plugin's id in `[plugins]`; a tool source's \
                     id names its methods' provider, so it must be its own"
                )));
            }
            source.check(id).map_err(invalid)?;
        }
        for (id, entry) in &policy.plugins {
            entry
                .controls
                .check(&format!("plugins.{id}.controls"))
                .map_err(invalid)?;
            for (name, settings) in &entry.methods {
                if !is_method_name(name) {
                    return Err(invalid(format!(
                        "`plugins.{id}.methods.{name}`: `{name}` is not a method name (a Python identifier)"
                    )));
                }
                settings
                    .check(&format!("plugins.{id}.methods.{name}"))
                    .map_err(invalid)?;
            }
        }
        Ok(policy)
    }

    /// Reads a policy file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut policy = Policy::from_toml(&text).map_err(|e| match e {
            PolicyError::Invalid { message, .. } => PolicyError::Invalid {
                path: Some(path.to_path_buf()),
                message,
            },
            other => other,
        })?;
        if let Some(StoreLocation::Sqlite(file)) = &mut policy.store.url
            && file.is_relative()
            && let Some(folder) = path.parent()
        {
            *file = folder.join(&*file);
        }
        policy.folder = path.parent().map(Path::to_path_buf);
        Ok(policy)
    }

    /// Pins `plugin`'s entry to the component whose SHA-256 is `digest` (64
    /// hex digits, or `sha256:` and them), in addition to any pinned.
    pub fn pin(&mut self, plugin: &str, digest: &str) -> Result<&mut Self, PolicyError> {
        let digest = Digest::parse(digest).ok_or_else(|| PolicyError::Invalid {
            path: None,
            message: format!("`{digest}` is not a SHA-256 digest (64 hex digits)"),
        })?;
        self.plugins
            .entry(plugin.to_string())
            .or_default()
            .sha256
            .push(digest);
        Ok(self)
    }

    /// Marks `keys` of `plugin`'s configuration secret.
    pub fn mark_secret<'a>(
        &mut self,
        plugin: &str,
        keys: impl IntoIterator<Item = &'a str>,
    ) -> &mut Self {
        let entry = self.plugins.entry(plugin.to_string()).or_default();
        entry.secrets.extend(keys.into_iter().map(str::to_string));
        self
    }

    /// Grants `caps` to `plugin`, in addition to what it has.
    pub fn grant<'a>(
        &mut self,
        plugin: &str,
        caps: impl IntoIterator<Item = &'a str>,
    ) -> Result<&mut Self, CapabilityError> {
        let entry = self.plugins.entry(plugin.to_string()).or_default();
        for cap in caps {
            entry.grant.push(cap.parse()?);
        }
        Ok(self)
    }

    /// Sets `plugin`'s configuration (a JSON object), replacing any.
    pub fn set_config(
        &mut self,
        plugin: &str,
        config: serde_json::Map<String, serde_json::Value>,
    ) -> &mut Self {
        self.plugins.entry(plugin.to_string()).or_default().config = Some(config);
        self
    }

    /// The policy for `plugin`, if the operator wrote one.
    pub fn plugin(&self, plugin: &str) -> Option<&PluginPolicy> {
        self.plugins.get(plugin)
    }

    /// The tool sources, by id.
    pub fn tools(&self) -> impl Iterator<Item = (&str, &ToolSourcePolicy)> {
        self.tools.iter().map(|(id, source)| (id.as_str(), source))
    }

    /// The tool source `id`, if the policy has one.
    pub fn tool(&self, id: &str) -> Option<&ToolSourcePolicy> {
        self.tools.get(id)
    }

    /// Adds (or replaces) the tool source `id`; a bad one is an error naming
    /// its key.
    pub fn set_tool(
        &mut self,
        id: &str,
        source: ToolSourcePolicy,
    ) -> Result<&mut Self, PolicyError> {
        let invalid = |message| PolicyError::Invalid {
            path: None,
            message,
        };
        if !is_plugin_id(id) || self.plugins.contains_key(id) {
            return Err(invalid(format!(
                "`tools.{id}`: not a tool source id, or a plugin's"
            )));
        }
        source.check(id).map_err(invalid)?;
        self.tools.insert(id.to_string(), source);
        Ok(self)
    }

    /// The folder of the file the policy was read from (where relative
    /// paths in it start), if it was read from one.
    pub fn folder(&self) -> Option<&Path> {
        self.folder.as_deref()
    }

    /// The execution controls `provider` (a plugin or a tool source) sets
    /// on all its methods' calls, and per method.
    pub fn controls_of(
        &self,
        provider: &str,
    ) -> Option<(&ControlSettings, &BTreeMap<String, ControlSettings>)> {
        match self.plugins.get(provider) {
            Some(p) => Some((&p.controls, &p.methods)),
            None => self.tools.get(provider).map(|t| (&t.controls, &t.methods)),
        }
    }

    /// Whether a call of any method may pause a run: `[approval] pause_for`
    /// names a flag, or a provider or method sets `pause`.
    pub fn pauses_any(&self) -> bool {
        let sets = |c: &ControlSettings| c.pause == Some(true);
        let provider = |controls: &ControlSettings, methods: &BTreeMap<String, ControlSettings>| {
            sets(controls) || methods.values().any(sets)
        };
        !self.approval.pause_for.is_empty()
            || self
                .plugins
                .values()
                .any(|p| provider(&p.controls, &p.methods))
            || self
                .tools
                .values()
                .any(|t| provider(&t.controls, &t.methods))
    }

    /// The execution controls on calls of `plugin`'s `method` (a plugin's
    /// or a tool source's): the method's keys, else the provider's (empty
    /// when the policy sets none).
    pub fn method_controls(&self, plugin: &str, method: &str) -> ControlSettings {
        self.controls_of(plugin)
            .map_or_else(ControlSettings::default, |(controls, methods)| {
                methods
                    .get(method)
                    .map_or_else(|| controls.clone(), |m| controls.overridden_by(m))
            })
    }

    /// Sets the execution controls of `plugin`'s calls, or with `method`
    /// of that method's calls (overriding the plugin's key by key),
    /// replacing any; a value out of range is an error naming its key.
    pub fn set_controls(
        &mut self,
        plugin: &str,
        method: Option<&str>,
        settings: ControlSettings,
    ) -> Result<&mut Self, PolicyError> {
        let invalid = |message| PolicyError::Invalid {
            path: None,
            message,
        };
        // A tool source's controls are its own table's: a `[plugins]` entry
        // of its id would shadow them.
        let (table, controls, methods) = match self.tools.get_mut(plugin) {
            Some(source) => ("tools", &mut source.controls, &mut source.methods),
            None => {
                let entry = self.plugins.entry(plugin.to_string()).or_default();
                ("plugins", &mut entry.controls, &mut entry.methods)
            }
        };
        match method {
            None => {
                settings
                    .check(&format!("{table}.{plugin}.controls"))
                    .map_err(invalid)?;
                *controls = settings;
            }
            Some(name) => {
                settings
                    .check(&format!("{table}.{plugin}.methods.{name}"))
                    .map_err(invalid)?;
                methods.insert(name.to_string(), settings);
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let text = include_str!("policy.rs")
            .split("//! ```toml\n")
            .nth(1)
            .unwrap()
            .split("//! ```\n")
            .next()
            .unwrap()
            .lines()
            .map(|l| l.trim_start_matches("//!").trim_start())
            .collect::<Vec<_>>()
            .join("\n");
        let p = Policy::from_toml(&text).unwrap();
        assert_eq!(p.store.limits.max_value_bytes, 65536);
        assert_eq!(
            p.store.url,
            Some(StoreLocation::Sqlite("plugin-data.db".into()))
        );
        assert_eq!(p.http.timeout(), Duration::from_secs(10));
        assert_eq!(p.plugin("notes").unwrap().grant, vec![Capability::Store]);
        assert!(p.plugin("notes").unwrap().pins(&"6f1c".repeat(16)));
        assert_eq!(p.plugin("weather").unwrap().secrets, ["api_key"]);
        let weather = p.plugin("weather").unwrap();
        assert_eq!(weather.grant[1].to_string(), "http:api.weather.example");
        assert_eq!(weather.config.as_ref().unwrap()["api_key"], "...");
        assert!(p.registry.require_signature);
        assert_eq!(
            p.registry.trusted_keys[0].to_string(),
            "ed25519:NV8HSH8rhpK/0zClolLWV7cknL1liUxL2q181nQv6A8="
        );
        assert_eq!(weather.controls.rate_limit, Some(60));
        assert_eq!(weather.methods["forecast"].requires_auth, Some(true));
        assert_eq!(p.budgets.per_run, Some(1.0));
    }

    #[test]
    fn is_strict() {
        for (text, needle) in [
            (
                "[plugins.notes]\ngrants = [\"store\"]",
                "unknown field `grants`",
            ),
            (
                "[plugins.notes]\ngrant = [\"root\"]",
                "unknown capability `root`",
            ),
            ("[store]\nmax_value = 1", "unknown field `max_value`"),
            ("[store]\nurl = 3", "`store.url` must be"),
            ("[store]\nurl = \"\"", "`store.url` must be"),
            (
                "[store]\nurl = \"a.db\"\nmax_key_bytes = \"x\"",
                "max_key_bytes",
            ),
            ("[plugins.Notes]\ngrant = []", "`Notes` is not a plugin id"),
            ("extra = 1", "unknown field `extra`"),
            ("[http]\ntimeout_ms = -1", "timeout_ms"),
            (
                "[plugins.notes]\nsha256 = [\"abc\"]",
                "not a SHA-256 digest",
            ),
            (
                "[registry]\ntrusted_keys = [\"rsa:AAAA\"]",
                "`rsa` keys are not supported",
            ),
            (
                "[registry]\nrequire_signature = true",
                "`registry.trusted_keys` is empty",
            ),
        ] {
            let e = Policy::from_toml(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_store_url_names_sqlite_beside_the_policy_or_postgres() {
        let dir = std::env::temp_dir().join(format!("sandwit-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("policy.toml");
        std::fs::write(&file, "[store]\nurl = \"data/store.db\"\n").unwrap();
        let p = Policy::load(&file).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            p.store.url,
            Some(StoreLocation::Sqlite(dir.join("data/store.db")))
        );
        assert_eq!(p.store.limits, StoreLimits::default());

        let url = "postgres://sandwit:hunter2@db.internal/plugins";
        let p = Policy::from_toml(&format!("[store]\nurl = \"{url}\"")).unwrap();
        assert_eq!(p.store.url, Some(StoreLocation::Postgres(url.into())));
        // The password never reaches a debug print of the policy.
        assert!(!format!("{p:?}").contains("hunter2"));
    }
}
