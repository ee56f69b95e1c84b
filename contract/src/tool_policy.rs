//! The policy's `[tools.<id>]` tables: tool sources, whose operations
//! become sandbox methods under the same checks and execution controls as a
//! plugin's: an OpenAPI 3.0 or 3.1 document (JSON) and the server it
//! describes, or an MCP server (streamable HTTP, or a command the operator
//! trusts, over its stdio) and its tools.
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
//!
//! [tools.docs]
//! mcp = "https://mcp.example/mcp"   # or: command = ["python3", "server.py"]
//! tools = ["search*", "fetch"]      # MCP tool names, `*` globs [all]
//! kinds = { screenshot = "multimodal-agent" }
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

/// One `[tools.<id>]` table: exactly one of `openapi`, `mcp` and
/// `command`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSourcePolicy {
    /// An OpenAPI document: a file (relative to the policy file's folder)
    /// or an `http://`/`https://` URL.
    pub openapi: Option<String>,
    /// An MCP server over streamable HTTP: its endpoint's URL.
    pub mcp: Option<String>,
    /// An MCP server over stdio: the command (no shell) the host starts,
    /// and talks to on its standard input and output.
    pub command: Option<Vec<String>>,
    /// The command's environment: these variables and `PATH`, nothing
    /// else of the host's.
    #[serde(default)]
    pub env: BTreeMap<String, Secret>,
    /// The command's working directory (relative to the policy's folder).
    pub cwd: Option<String>,
    /// The document's SHA-256 (hex): required for a URL, checked for a file
    /// when given.
    pub sha256: Option<Digest>,
    /// Where an OpenAPI source's calls go: scheme, host, port and a path
    /// prefix. The document's `servers` are not used.
    pub base_url: Option<String>,
    /// The operations an OpenAPI source offers, by `operationId`; `*`
    /// matches any run of characters. At least one.
    #[serde(default)]
    pub operations: Vec<String>,
    /// The tools an MCP source offers, by name, `*` globs [all].
    #[serde(default)]
    pub tools: Vec<String>,
    /// How long an MCP server may take to start, answer `initialize` and
    /// list its tools, in milliseconds [10,000].
    pub list_timeout_ms: Option<u64>,
    /// Put before every method's name.
    #[serde(default)]
    pub prefix: String,
    /// Each method's result kind, by `operationId` or MCP tool name [tool].
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
    /// What kind of source it is.
    pub fn source(&self) -> Source<'_> {
        match (&self.openapi, &self.mcp, &self.command) {
            (Some(document), _, _) => Source::OpenApi {
                document,
                base_url: self.base_url.as_deref().unwrap_or_default(),
            },
            (None, Some(url), _) => Source::McpHttp { url },
            (None, None, Some(argv)) => Source::McpStdio { argv },
            (None, None, None) => unreachable!("checked: one of them is given"),
        }
    }

    /// How long an MCP server may take to start and list its tools.
    pub fn list_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.list_timeout_ms.unwrap_or(10_000))
    }

    /// What is wrong with the table `tools.<id>`, if anything.
    pub(crate) fn check(&self, id: &str) -> Result<(), String> {
        let key = |k: &str| format!("`tools.{id}.{k}`");
        let given = [
            self.openapi.is_some(),
            self.mcp.is_some(),
            self.command.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(format!(
                "`tools.{id}`: give exactly one of `openapi` (a document), `mcp` (an MCP \
                 server's URL) and `command` (an MCP server over stdio)"
            ));
        }
        let Some(openapi) = &self.openapi else {
            return self.check_mcp(id);
        };
        let spec_is_url = is_http_url(openapi);
        if spec_is_url && self.sha256.is_none() {
            return Err(format!(
                "{}: a document fetched from a URL must be pinned by its SHA-256 (`sha256 = \"...\"`; `sandwit tools inspect URL` prints it)",
                key("openapi")
            ));
        }
        if !spec_is_url && openapi.contains("://") {
            return Err(format!(
                "{}: only http:// and https:// URLs are fetched; anything else is a file",
                key("openapi")
            ));
        }
        for (set, name) in [
            (self.tools.is_empty(), "tools"),
            (self.env.is_empty(), "env"),
            (self.cwd.is_none(), "cwd"),
            (self.list_timeout_ms.is_none(), "list_timeout_ms"),
        ] {
            if !set {
                return Err(format!("{}: it is for MCP sources", key(name)));
            }
        }
        let base_url = self
            .base_url
            .as_deref()
            .ok_or_else(|| format!("{}: an OpenAPI source needs one", key("base_url")))?;
        check_base_url(base_url).map_err(|why| format!("{}: {why}", key("base_url")))?;
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
        self.check_controls(id)
    }

    fn check_mcp(&self, id: &str) -> Result<(), String> {
        let key = |k: &str| format!("`tools.{id}.{k}`");
        for (set, name) in [
            (self.operations.is_empty(), "operations"),
            (self.base_url.is_none(), "base_url"),
            (self.sha256.is_none(), "sha256"),
            (self.max_spec_bytes.is_none(), "max_spec_bytes"),
        ] {
            if !set {
                return Err(format!("{}: it is for OpenAPI sources", key(name)));
            }
        }
        if let Some(url) = &self.mcp {
            check_base_url(url).map_err(|why| format!("{}: {why}", key("mcp")))?;
            if !self.env.is_empty() || self.cwd.is_some() {
                return Err(format!(
                    "{}: `env` and `cwd` are for a `command`",
                    key("mcp")
                ));
            }
        }
        if let Some(argv) = &self.command {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(format!("{}: name the program to run", key("command")));
            }
            if self.auth.is_some() {
                return Err(format!(
                    "{}: a stdio server is not authenticated; give it its secret in `env`",
                    key("auth")
                ));
            }
            if let Some(bad) = self.env.keys().find(|k| {
                k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            }) {
                return Err(format!("{}: `{bad}` is not a variable name", key("env")));
            }
        }
        if let Some(ms) = self.list_timeout_ms
            && !(100..=600_000).contains(&ms)
        {
            return Err(format!(
                "{}: {ms} is not 100 to 600000 ms",
                key("list_timeout_ms")
            ));
        }
        if !matches!(
            self.auth,
            None | Some(Auth::Bearer { .. }) | Some(Auth::Header { .. })
        ) {
            return Err(format!(
                "{}: an MCP server takes a bearer token or a header",
                key("auth")
            ));
        }
        self.check_controls(id)
    }

    fn check_controls(&self, id: &str) -> Result<(), String> {
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
        self.openapi.as_deref().is_some_and(is_http_url)
    }

    /// Whether the operation or tool `name` is one of those offered.
    pub fn offers(&self, name: &str) -> bool {
        let patterns = if self.openapi.is_some() {
            &self.operations
        } else {
            &self.tools
        };
        (self.openapi.is_none() && patterns.is_empty()) || patterns.iter().any(|p| glob(p, name))
    }
}

/// What a tool source is.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// An OpenAPI document and where its calls go.
    OpenApi {
        /// The document's file or URL.
        document: &'a str,
        /// Where the calls go.
        base_url: &'a str,
    },
    /// An MCP server over streamable HTTP.
    McpHttp {
        /// Its endpoint.
        url: &'a str,
    },
    /// An MCP server the host starts, over its stdio.
    McpStdio {
        /// The command.
        argv: &'a [String],
    },
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

    #[test]
    fn a_source_is_one_kind_with_its_own_keys() {
        let check = |text: &str| {
            crate::Policy::from_toml(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        for (text, needle) in [
            (
                "[tools.a]\nopenapi = \"a.json\"\nmcp = \"http://x/mcp\"\nbase_url = \"http://x\"\noperations = [\"*\"]",
                "exactly one of",
            ),
            (
                "[tools.a]\nmcp = \"http://x/mcp\"\nbase_url = \"http://x\"",
                "for OpenAPI sources",
            ),
            (
                "[tools.a]\ncommand = [\"srv\"]\nauth = { type = \"bearer\", token = \"t\" }",
                "not authenticated",
            ),
            ("[tools.a]\ncommand = []", "name the program"),
            ("[tools.a]\nmcp = \"http://u@x/mcp\"", "user or password"),
            (
                "[tools.a]\nopenapi = \"https://x/o.json\"\nbase_url = \"http://x\"\noperations = [\"*\"]",
                "pinned",
            ),
            (
                "[tools.a]\nopenapi = \"a.json\"\nbase_url = \"http://x\"\noperations = [\"*\"]\ntools = [\"x\"]",
                "for MCP sources",
            ),
        ] {
            let e = check(text);
            assert!(e.contains(needle), "{text:?}: {e:?}");
        }
        assert_eq!(
            check("[tools.a]\ncommand = [\"srv\", \"--stdio\"]\nenv = { K = \"v\" }"),
            ""
        );
    }
}
