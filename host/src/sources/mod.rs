//! Tool sources: an OpenAPI 3 document's operations, or a remote MCP
//! server's tools, as sandbox methods, named in the policy's `[tools.<id>]`
//! ([`sandwit_contract::tool_policy`]). Each becomes a [`HostMethod`] whose
//! provider is the source's id, so it is listed, schema-checked, controlled
//! (the source's `[tools.<id>.controls]`), traced and cancelled as any
//! method is. An OpenAPI source's calls reach only its `base_url` origin,
//! through the host's outbound HTTP (an internal address only when written
//! as one, the policy's `[http]` timeout and body cap, no redirects); an
//! MCP source's go through rmcp's client (`mcp.rs`). A source's secret is
//! hidden in whatever comes back.
//!
//! ```no_run
//! # async fn demo(policy: sandwit::Policy) -> anyhow::Result<()> {
//! let host = sandwit::Host::builder().policy(policy.clone()).build()?;
//! let sources = sandwit::sources::ToolSources::load(&policy, None).await?;
//! let set = sandwit::Toolbox::with_host_methods(&[], &sources.methods())?;
//! # Ok(()) }
//! ```

mod call;
mod checks;
mod mcp;
mod openapi;
#[cfg(test)]
mod order;
mod schema;
mod spec;

use std::path::Path;
use std::sync::Arc;

use sandwit_contract::manifest::MethodSpec;
use sandwit_contract::policy::{HttpLimits, Policy};
use sandwit_contract::tool_policy::{Auth, Source, ToolSourcePolicy};
use tokio::sync::watch;

use crate::capabilities::config::Redactor;
use crate::capabilities::http::host_client::HostHttp;
use crate::toolbox::host_method::HostMethod;
use call::{Credentials, Endpoint};
use checks::{read_auth_secret, unmatched_controls};
use mcp::McpSource;

/// The methods of a policy's tool sources. Cheap to clone; an MCP server's
/// session (and the process of a stdio one) lasts while this or one of its
/// methods does.
#[derive(Clone)]
pub struct ToolSources {
    sources: Vec<Loaded>,
    changes: watch::Sender<u64>,
}

#[derive(Clone)]
enum Loaded {
    /// An OpenAPI document's methods, fixed once loaded.
    Fixed(SourceReport, Vec<HostMethod>),
    /// An MCP server's, listed again when its tools change.
    Mcp(String, Arc<McpSource>),
}

impl Default for ToolSources {
    fn default() -> Self {
        ToolSources {
            sources: Vec::new(),
            changes: watch::Sender::new(0),
        }
    }
}

/// What one source offers, and what it does not.
#[derive(Debug, Clone)]
pub struct SourceReport {
    /// The source's id.
    pub source: String,
    /// The SHA-256 of its document (hex).
    pub digest: String,
    /// The methods it offers, by name.
    pub methods: Vec<String>,
    /// The operations it was asked for but does not offer: `operationId`
    /// and why.
    pub skipped: Vec<(String, String)>,
}

/// A source that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("tool source `{source_id}`: {message}")]
pub struct SourceError {
    /// The source's id.
    pub source_id: String,
    /// What was wrong, with what it concerns (never a secret).
    pub message: String,
}

impl ToolSources {
    /// Loads every tool source of `policy`: reads or fetches its document
    /// (a URL's once, kept under `cache_dir/tool-specs` by its digest),
    /// checks it and makes its methods. A source whose document cannot be
    /// read, does not match its pin, or is refused fails the whole load.
    pub async fn load(policy: &Policy, cache_dir: Option<&Path>) -> Result<Self, SourceError> {
        let mut sources = ToolSources::default();
        for (id, source) in policy.tools() {
            sources.add(policy, id, source, cache_dir).await?;
        }
        Ok(sources)
    }

    /// Loads only the source `id` of `policy`.
    pub async fn load_one(
        policy: &Policy,
        id: &str,
        cache_dir: Option<&Path>,
    ) -> Result<Self, SourceError> {
        let source = policy.tool(id).ok_or_else(|| SourceError {
            source_id: id.to_string(),
            message: "the policy has no `[tools.".to_string() + id + "]`",
        })?;
        let mut sources = ToolSources::default();
        sources.add(policy, id, source, cache_dir).await?;
        Ok(sources)
    }

    /// The methods, every source's, in the policy's order of sources: an
    /// MCP server's as it listed them last.
    pub fn methods(&self) -> Vec<HostMethod> {
        self.snapshot().0
    }

    /// What each source offers and skipped, now.
    pub fn reports(&self) -> Vec<SourceReport> {
        self.snapshot().1
    }

    /// [`ToolSources::methods`] and [`ToolSources::reports`] at once: an MCP
    /// server's methods are made (their schemas compiled) once for both.
    pub fn snapshot(&self) -> (Vec<HostMethod>, Vec<SourceReport>) {
        let (mut methods, mut reports) = (Vec::new(), Vec::new());
        for source in &self.sources {
            match source {
                Loaded::Fixed(report, fixed) => {
                    methods.extend(fixed.iter().cloned());
                    reports.push(report.clone());
                }
                Loaded::Mcp(id, mcp) => {
                    let (listed, skipped) = McpSource::methods(mcp);
                    reports.push(SourceReport {
                        source: id.clone(),
                        digest: String::new(),
                        methods: listed.iter().map(|m| m.spec().name.clone()).collect(),
                        skipped,
                    });
                    methods.extend(listed);
                }
            }
        }
        (methods, reports)
    }

    /// Changes when an MCP server's tools changed (it said so, or it was
    /// reached again): [`ToolSources::methods`] then gives the new ones.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    async fn add(
        &mut self,
        policy: &Policy,
        id: &str,
        source: &ToolSourcePolicy,
        cache_dir: Option<&Path>,
    ) -> Result<(), SourceError> {
        let error = |message: String| SourceError {
            source_id: id.to_string(),
            message,
        };
        let (document, base_url) = match source.source() {
            Source::OpenApi { document, base_url } => (document, base_url),
            Source::McpHttp { .. } | Source::McpStdio { .. } => {
                let mcp = McpSource::start(
                    id,
                    source,
                    policy.folder(),
                    policy.http,
                    self.changes.clone(),
                )
                .await
                .map_err(error)?;
                self.sources.push(Loaded::Mcp(id.to_string(), mcp));
                return Ok(());
            }
        };
        let (bytes, digest) = spec::read(source, document, policy.folder(), cache_dir, policy.http)
            .await
            .map_err(error)?;
        let document = spec::parse(&bytes).map_err(error)?;
        let (operations, skipped) = openapi::operations(&document, Some(source))
            .map_err(|why| error(format!("its document is refused: {why}")))?;
        let endpoint =
            Arc::new(endpoint(source, base_url, policy.folder(), policy.http).map_err(error)?);
        let mut report = SourceReport {
            source: id.to_string(),
            digest,
            methods: Vec::new(),
            skipped: skipped.into_iter().map(|s| (s.operation, s.why)).collect(),
        };
        let mut methods = Vec::new();
        for operation in operations {
            let plan = Arc::new(operation.plan);
            let kind = operation.spec.kind;
            let name = operation.spec.name.clone();
            let endpoint = endpoint.clone();
            let method = HostMethod::with_error_kinds(id, operation.spec, move |_ctx, args| {
                let (endpoint, plan) = (endpoint.clone(), plan.clone());
                async move { call::call(&endpoint, &plan, kind, args).await }
            });
            match method {
                Ok(method) => {
                    report.methods.push(name);
                    methods.push(method);
                }
                Err(problems) => report.skipped.push((name, problems.join("; "))),
            }
        }
        let unmatched = unmatched_controls(source, &report.methods);
        if !unmatched.is_empty() {
            return Err(error(format!(
                "`tools.{id}.methods.{}` names no method it offers (it offers: {}); a control \
                 there would control nothing",
                unmatched[0],
                report.methods.join(", ")
            )));
        }
        self.sources.push(Loaded::Fixed(report, methods));
        Ok(())
    }
}

/// Where `source`'s calls go and how they authenticate, its secret read.
fn endpoint(
    source: &ToolSourcePolicy,
    base_url: &str,
    folder: Option<&Path>,
    limits: HttpLimits,
) -> Result<Endpoint, String> {
    let (http, base_path) = HostHttp::for_url(base_url, limits)?;
    let Some(auth) = &source.auth else {
        return Ok(Endpoint {
            http,
            base_path,
            credentials: Credentials::None,
            redactor: Redactor::default(),
        });
    };
    let secret = read_auth_secret(auth, folder)?;
    let header = |name: http::HeaderName, value: String| {
        let mut value = http::HeaderValue::from_str(&value)
            .map_err(|_| "its `auth` secret holds characters a header may not".to_string())?;
        value.set_sensitive(true);
        Ok::<_, String>(Credentials::Header(name, value))
    };
    let credentials = match auth {
        Auth::Bearer { .. } => header(http::header::AUTHORIZATION, format!("Bearer {secret}"))?,
        Auth::Header { name, .. } => {
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` is not a header name"))?;
            header(name, secret.clone())?
        }
        Auth::Query { name, .. } => Credentials::Query(name.clone(), secret.clone()),
        Auth::Basic { username, .. } => {
            header(http::header::AUTHORIZATION, call::basic(username, &secret))?
        }
    };
    // Hidden as it is, and as the wire carries it: a URL that echoes the
    // query percent-encodes it, a basic header base64-encodes it.
    let mut secrets = vec![secret.clone(), call::encode_component(&secret)];
    secrets.push(secrets[1].to_ascii_lowercase());
    if let Credentials::Header(_, value) = &credentials
        && let Ok(text) = value.to_str()
    {
        secrets.push(text.to_string());
        if let Some(encoded) = text.strip_prefix("Basic ") {
            secrets.push(encoded.to_string());
        }
    }
    Ok(Endpoint {
        http,
        base_path,
        credentials,
        redactor: Redactor::of_secrets(secrets),
    })
}

/// What a document offers, for `sandwit tools inspect`.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The SHA-256 of the document (hex): what a policy pins.
    pub digest: String,
    /// `info.title` and `info.version`.
    pub title: String,
    /// `info.version`.
    pub version: String,
    /// The `servers` it names (not used: a source's `base_url` is).
    pub servers: Vec<String>,
    /// Every operation it offers as a method, all of them selected.
    pub methods: Vec<MethodSpec>,
    /// The operations it would not offer, and why.
    pub skipped: Vec<(String, String)>,
}

/// The methods the OpenAPI document at `location` (a file or an http(s)
/// URL, fetched under `limits`) would give with every operation selected,
/// and the problems of a bad one.
pub async fn inspect(
    location: &str,
    limits: HttpLimits,
    max_bytes: u64,
) -> Result<Inspection, String> {
    let (bytes, digest) = spec::fetch_unpinned(location, limits, max_bytes).await?;
    let document = spec::parse(&bytes)?;
    let (operations, mut skipped) = openapi::operations(&document, None)
        .map_err(|why| format!("the document is refused: {why}"))?;
    let mut methods = Vec::new();
    for operation in operations {
        // The same checks a loaded source's methods pass.
        let name = operation.spec.name.clone();
        match HostMethod::new("inspected", operation.spec, |_, _| async {
            Err::<sandwit_contract::types::MethodResult, String>(String::new())
        }) {
            Ok(method) => methods.push(method.spec().clone()),
            Err(problems) => skipped.push(openapi::Skipped {
                operation: name,
                why: problems.join("; "),
            }),
        }
    }
    let info = |key: &str| {
        document
            .pointer(&format!("/info/{key}"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let servers = document
        .get("servers")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("url").and_then(serde_json::Value::as_str))
        .map(str::to_string)
        .collect();
    Ok(Inspection {
        digest,
        title: info("title"),
        version: info("version"),
        servers,
        methods,
        skipped: skipped.into_iter().map(|s| (s.operation, s.why)).collect(),
    })
}
