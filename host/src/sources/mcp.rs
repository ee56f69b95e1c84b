//! A remote MCP server as a tool source, through rmcp's client: over
//! streamable HTTP (the host resolves the server's name itself and refuses
//! an internal address unless it was written as one, then pins the address
//! it checked), or over the stdio of a command the operator names (no
//! shell, only the environment the policy gives it). Its `tools/list`
//! becomes methods, re-listed when the server says its tools changed;
//! `tools/call` answers them.
//!
//! A server that is down makes its methods fail at once with a clear error
//! (counted by the circuit breaker), never wait: the connection is made
//! again in the background, with growing pauses, and calls succeed once it
//! is back. Everything the server sends is bounded: each answer's size
//! (`[http] max_response_bytes`), the pages and tools of a listing, the
//! time to start and list (`list_timeout_ms`), a call's time (its
//! deadline; dropping the call sends `notifications/cancelled`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, Tool};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value as Json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::sync::watch;

use sandwit_contract::error::CallErrorKind;
use sandwit_contract::json::value_from_json;
use sandwit_contract::manifest::{
    MAX_DESCRIPTION_LEN, MAX_DOCSTRING_LEN, MAX_METHODS, MAX_PARAMS, MethodSpec, Param,
};
use sandwit_contract::policy::HttpLimits;
use sandwit_contract::text::cut;
use sandwit_contract::tool_policy::{Auth, Secret, Source, ToolSourcePolicy};
use sandwit_contract::types::{ContentPart, Media, MethodKind, MethodResult, Value};

use super::openapi::{method_name, python_name};
use super::schema::{Budget, required, standalone};
use crate::capabilities::config::Redactor;
use crate::capabilities::http::host_client::HostHttp;
use crate::capabilities::http::outbound;
use crate::toolbox::host_method::HostMethod;

/// Pages of `tools/list` read at most.
const MAX_PAGES: usize = 16;

/// Tools looked at, offered or not, in one listing.
const MAX_TOOLS_SEEN: usize = 4 * MAX_METHODS;

/// The most of a line of a stdio server's stderr the log keeps.
const STDERR_LINE: usize = 2_000;

/// The most of a server's message an error quotes.
const QUOTED: usize = 2_000;

/// The longest pause between attempts to reach a server that is down.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(30);

/// What a listing found: the methods, and the tools skipped with why.
pub(crate) struct Listing {
    pub methods: Vec<Listed>,
    pub skipped: Vec<(String, String)>,
}

/// A tool as a method.
#[derive(Clone)]
pub(crate) struct Listed {
    pub spec: MethodSpec,
    /// Its name on the server.
    tool: String,
    /// Each parameter's name on the server, by Python name.
    args: Vec<(String, String)>,
}

/// One MCP server and what it offers.
pub(crate) struct McpSource {
    id: String,
    policy: ToolSourcePolicy,
    folder: Option<PathBuf>,
    limits: HttpLimits,
    redactor: Redactor,
    link: tokio::sync::Mutex<Link>,
    listed: RwLock<Listing>,
    /// Bumped when the listing changes.
    changes: watch::Sender<u64>,
    /// Whether a task is trying to reach the server again.
    retrying: Mutex<bool>,
    /// The `auth` secret, read at start.
    auth: Option<String>,
    /// The command's environment, read at start.
    env: Vec<(String, String)>,
    /// Whether a listing again is under way, and another asked for.
    relisting: Mutex<Relisting>,
}

/// Listings again, one at a time: a server announcing changes faster than
/// they are listed gets one more listing after the current one, not one
/// each.
#[derive(Clone, Copy, PartialEq)]
enum Relisting {
    Idle,
    Running,
    RunningAndAgain,
}

/// The least time between two listings again.
const RELIST_PAUSE: Duration = Duration::from_secs(1);

type Client = RunningService<RoleClient, Listener>;

/// The connection, or why there is none.
struct Link {
    client: Option<Client>,
    down: Option<(Instant, String)>,
}

/// The client's side of the session: told when the server's tools change.
struct Listener {
    source: Weak<McpSource>,
}

impl ClientHandler for Listener {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        if let Some(source) = self.source.upgrade() {
            source.ask_relist();
        }
        std::future::ready(())
    }
}

impl McpSource {
    /// Starts the server (or connects to it), initializes the session and
    /// lists its tools, within the source's `list_timeout_ms`.
    pub(crate) async fn start(
        id: &str,
        policy: &ToolSourcePolicy,
        folder: Option<&Path>,
        limits: HttpLimits,
        changes: watch::Sender<u64>,
    ) -> Result<Arc<McpSource>, String> {
        // Read once: a reconnection sends what the redactor hides.
        let mut secrets = Vec::new();
        let auth = match &policy.auth {
            Some(auth) => {
                let secret = super::checks::read_auth_secret(auth, folder)?;
                secrets.push(secret.clone());
                Some(secret)
            }
            None => None,
        };
        let mut env = Vec::new();
        for (name, value) in &policy.env {
            let text = value
                .read(folder)
                .map_err(|why| format!("its `env.{name}`: {why}"))?;
            // A value written in the policy is configuration (a folder, a
            // flag); one read from the environment or a file is a secret.
            if !matches!(value, Secret::Value(_)) {
                secrets.push(text.clone());
            }
            env.push((name.clone(), text));
        }
        let source = Arc::new(McpSource {
            id: id.to_string(),
            policy: policy.clone(),
            folder: folder.map(Path::to_path_buf),
            limits,
            auth,
            env,
            redactor: Redactor::of_secrets(secrets),
            link: tokio::sync::Mutex::new(Link {
                client: None,
                down: None,
            }),
            listed: RwLock::new(Listing {
                methods: Vec::new(),
                skipped: Vec::new(),
            }),
            changes,
            retrying: Mutex::new(false),
            relisting: Mutex::new(Relisting::Idle),
        });
        let client = source.connect().await?;
        let listing = source.list(client.peer()).await?;
        let names: Vec<String> = listing
            .methods
            .iter()
            .map(|m| m.spec.name.clone())
            .collect();
        if let Some(name) = super::checks::unmatched_controls(policy, &names).first() {
            return Err(format!(
                "`tools.{id}.methods.{name}` names no tool it offers (it offers: {}); a control \
                 there would control nothing",
                names.join(", ")
            ));
        }
        *source.listed.write().unwrap_or_else(|e| e.into_inner()) = listing;
        source.link.lock().await.client = Some(client);
        Ok(source)
    }

    /// Its methods now, answered through `source`.
    pub(crate) fn methods(source: &Arc<McpSource>) -> (Vec<HostMethod>, Vec<(String, String)>) {
        let listing = source.listed.read().unwrap_or_else(|e| e.into_inner());
        let mut skipped = listing.skipped.clone();
        let mut methods = Vec::new();
        for listed in &listing.methods {
            let target = listed.clone();
            let source = source.clone();
            let made = HostMethod::with_error_kinds(
                &source.id.clone(),
                listed.spec.clone(),
                move |_ctx, args| {
                    let (source, target) = (source.clone(), target.clone());
                    async move { source.call(&target, args).await }
                },
            );
            match made {
                Ok(method) => methods.push(method),
                Err(problems) => skipped.push((listed.tool.clone(), problems.join("; "))),
            }
        }
        (methods, skipped)
    }

    /// A new session with the server.
    async fn connect(self: &Arc<Self>) -> Result<Client, String> {
        let listener = Listener {
            source: Arc::downgrade(self),
        };
        let timeout = self.policy.list_timeout();
        let started = match self.policy.source() {
            Source::McpHttp { url } => {
                let transport = self.http_transport(url).await?;
                tokio::time::timeout(timeout, listener.serve(transport)).await
            }
            Source::McpStdio { argv } => {
                let transport = self.stdio_transport(argv)?;
                tokio::time::timeout(timeout, listener.serve(transport)).await
            }
            Source::OpenApi { .. } => unreachable!("an MCP source"),
        };
        match started {
            Err(_) => Err(format!(
                "the MCP server did not answer `initialize` within {timeout:?} (`list_timeout_ms`)"
            )),
            Ok(Err(e)) => Err(self
                .redactor
                .redact_cut(format!("starting the MCP session: {e}"), QUOTED)),
            Ok(Ok(client)) => Ok(client),
        }
    }

    /// Streamable HTTP to `url`, the name resolved and checked here.
    async fn http_transport(
        &self,
        url: &str,
    ) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
        // The origin and its checked addresses, as the host's other
        // outbound requests have them.
        let (origin, _) = HostHttp::for_url(url, self.limits)?;
        let addrs = origin.addresses().await.map_err(|e| e.to_string())?;
        let host = origin.host();
        let mut client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.limits.timeout())
            .tls_backend_preconfigured((*outbound::tls_config()).clone());
        // The connection goes to the addresses checked, not to a second
        // resolution of the name.
        if !host.starts_with('[') && host.parse::<std::net::IpAddr>().is_err() {
            client = client.resolve_to_addrs(host, &addrs);
        }
        let client = client
            .build()
            .map_err(|e| format!("making the HTTP client: {e}"))?;
        let max = self.limits.max_response_bytes;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .max_json_response_size(max)
            .max_sse_event_size(max);
        match &self.policy.auth {
            Some(Auth::Bearer { .. }) => {
                config = config.auth_header(self.auth.clone().unwrap_or_default());
            }
            Some(Auth::Header { name, .. }) => {
                let name = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("`{name}` is not a header name"))?;
                let mut value = http::HeaderValue::from_str(
                    self.auth.as_deref().unwrap_or_default(),
                )
                .map_err(|_| "its `auth` secret holds characters a header may not".to_string())?;
                value.set_sensitive(true);
                config = config.custom_headers([(name, value)].into_iter().collect());
            }
            _ => {}
        }
        Ok(StreamableHttpClientTransport::with_client(client, config))
    }

    /// The command, started with only the policy's environment (and
    /// `PATH`), its stderr read into the host's debug log.
    fn stdio_transport(&self, argv: &[String]) -> Result<TokioChildProcess, String> {
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]).env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        for (name, value) in &self.env {
            command.env(name, value);
        }
        if let Some(cwd) = &self.policy.cwd {
            command.current_dir(match &self.folder {
                Some(folder) => folder.join(cwd),
                None => PathBuf::from(cwd),
            });
        }
        // A process group of its own, killed whole when the session goes:
        // a launcher's children (npx, uvx, a shell) go with it.
        let mut command = process_wrap::tokio::CommandWrap::from(command);
        command
            .wrap(process_wrap::tokio::ProcessGroup::leader())
            .wrap(process_wrap::tokio::KillOnDrop);
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting `{}`: {e}", argv[0]))?;
        if let Some(stderr) = stderr {
            let (id, redactor) = (self.id.clone(), self.redactor.clone());
            tokio::spawn(async move {
                // Read to its end, whatever it writes: a line is cut, not
                // kept whole, and bytes that are not UTF-8 are replaced.
                let mut reader = tokio::io::BufReader::new(stderr);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    let read = (&mut reader)
                        .take(STDERR_LINE as u64)
                        .read_until(b'\n', &mut line)
                        .await;
                    match read {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {
                            let text = String::from_utf8_lossy(&line).trim_end().to_string();
                            let text = redactor.redact_cut(text, STDERR_LINE);
                            tracing::debug!(source = id, "{text}");
                        }
                    }
                }
            });
        }
        Ok(transport)
    }

    /// The server's tools as methods, within the listing's bounds.
    async fn list(&self, peer: &Peer<RoleClient>) -> Result<Listing, String> {
        let timeout = self.policy.list_timeout();
        let mut tools: Vec<Tool> = Vec::new();
        let mut cursors = BTreeSet::new();
        let mut cursor = None;
        let mut truncated = None;
        for page in 0.. {
            if page == MAX_PAGES {
                truncated = Some(format!("more than {MAX_PAGES} pages"));
                break;
            }
            let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
            let answer = tokio::time::timeout(timeout, peer.list_tools(Some(params)))
                .await
                .map_err(|_| {
                    format!("the MCP server did not list its tools within {timeout:?} (`list_timeout_ms`)")
                })?
                .map_err(|e| {
                    self.redactor
                        .redact_cut(format!("listing its tools: {e}"), QUOTED)
                })?;
            tools.extend(answer.tools);
            if tools.len() > MAX_TOOLS_SEEN {
                tools.truncate(MAX_TOOLS_SEEN);
                truncated = Some(format!("more than {MAX_TOOLS_SEEN} tools"));
                break;
            }
            match answer.next_cursor {
                // A cursor seen before would list the same pages forever.
                Some(next) if cursors.insert(next.clone()) => cursor = Some(next),
                _ => break,
            }
        }
        let mut listing = methods_of(&self.policy, &tools);
        if let Some(why) = truncated {
            listing.skipped.push((
                "(the rest)".to_string(),
                format!("the server lists {why}; only those are looked at"),
            ));
        }
        Ok(listing)
    }

    /// Asks for a listing again, at most one under way and one waiting.
    fn ask_relist(self: &Arc<Self>) {
        let mut state = self.relisting.lock().unwrap_or_else(|e| e.into_inner());
        match *state {
            Relisting::Running | Relisting::RunningAndAgain => {
                *state = Relisting::RunningAndAgain;
                return;
            }
            Relisting::Idle => *state = Relisting::Running,
        }
        drop(state);
        let source = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(this) = source.upgrade() else { return };
                this.clone().relist().await;
                drop(this);
                tokio::time::sleep(RELIST_PAUSE).await;
                let Some(this) = source.upgrade() else { return };
                let mut state = this.relisting.lock().unwrap_or_else(|e| e.into_inner());
                if *state == Relisting::RunningAndAgain {
                    *state = Relisting::Running;
                } else {
                    *state = Relisting::Idle;
                    return;
                }
            }
        });
    }

    /// Lists the tools again (the server said they changed, or it is back).
    async fn relist(self: Arc<Self>) {
        let peer = match &self.link.lock().await.client {
            Some(client) => client.peer().clone(),
            None => return,
        };
        match self.list(&peer).await {
            Ok(listing) => {
                let names: Vec<String> = listing
                    .methods
                    .iter()
                    .map(|m| m.spec.name.clone())
                    .collect();
                for name in super::checks::unmatched_controls(&self.policy, &names) {
                    tracing::warn!(
                        source = self.id,
                        method = name,
                        "the server no longer offers a method the policy controls"
                    );
                }
                *self.listed.write().unwrap_or_else(|e| e.into_inner()) = listing;
                self.changes.send_modify(|n| *n += 1);
                tracing::info!(
                    source = self.id,
                    "the MCP server's tools changed; listed again"
                );
            }
            Err(error) => tracing::warn!(source = self.id, error, "listing the tools again failed"),
        }
    }

    /// Calls `target` with `args` (checked against its schemas).
    async fn call(
        self: &Arc<Self>,
        target: &Listed,
        args: Value,
    ) -> Result<MethodResult, CallErrorKind> {
        let peer = self.peer().await?;
        let given = match sandwit_contract::json::value_to_json(
            &args,
            sandwit_contract::json::BytesAs::Base64,
        ) {
            Json::Object(map) => map,
            _ => Map::new(),
        };
        let mut arguments = Map::new();
        for (name, value) in given {
            if value.is_null() {
                continue;
            }
            let wire = target
                .args
                .iter()
                .find(|(py, _)| *py == name)
                .map_or(name.clone(), |(_, wire)| wire.clone());
            arguments.insert(wire, value);
        }
        let mut params = CallToolRequestParams::new(target.tool.clone());
        params.arguments = Some(arguments);
        let answer = peer.call_tool(params).await.map_err(|e| {
            if peer.is_transport_closed() {
                self.went_down(e.to_string());
            }
            CallErrorKind::Failed {
                message: self.redactor.redact_cut(
                    format!("MCP server `{}`, tool `{}`: {e}", self.id, target.tool),
                    QUOTED,
                ),
            }
        })?;
        let json = serde_json::to_value(&answer).unwrap_or(Json::Null);
        let mut result =
            result_of(&json, target.spec.kind).map_err(|message| CallErrorKind::Failed {
                message: self.redactor.redact_cut(
                    format!(
                        "MCP server `{}`, tool `{}`: {message}",
                        self.id, target.tool
                    ),
                    QUOTED,
                ),
            })?;
        self.redactor.redact_result(&mut result);
        Ok(result)
    }

    /// The session's peer, or at once why there is none.
    async fn peer(self: &Arc<Self>) -> Result<Peer<RoleClient>, CallErrorKind> {
        let link = self.link.lock().await;
        if let Some(client) = &link.client
            && !client.peer().is_transport_closed()
        {
            return Ok(client.peer().clone());
        }
        let why = match &link.down {
            Some((since, why)) => format!("down for {:.0} s: {why}", since.elapsed().as_secs_f64()),
            None => "its connection closed".to_string(),
        };
        drop(link);
        self.went_down(why.clone());
        Err(CallErrorKind::Failed {
            message: format!(
                "MCP server `{}` is down ({why}); its calls fail until it is reached again",
                self.id
            ),
        })
    }

    /// Notes that the server is unreachable, and tries to reach it again in
    /// the background, once at a time.
    fn went_down(self: &Arc<Self>, why: String) {
        let mut retrying = self.retrying.lock().unwrap_or_else(|e| e.into_inner());
        if *retrying {
            return;
        }
        *retrying = true;
        let source = Arc::downgrade(self);
        let why = self.redactor.redact_cut(why, QUOTED);
        tokio::spawn(async move {
            let mut pause = Duration::from_secs(1);
            loop {
                let Some(this) = source.upgrade() else { return };
                {
                    let mut link = this.link.lock().await;
                    link.client = None;
                    if link.down.is_none() {
                        link.down = Some((Instant::now(), why.clone()));
                    }
                }
                match this.connect().await {
                    Ok(client) => {
                        let listing = this.list(client.peer()).await;
                        let mut link = this.link.lock().await;
                        link.client = Some(client);
                        link.down = None;
                        drop(link);
                        if let Ok(listing) = listing {
                            *this.listed.write().unwrap_or_else(|e| e.into_inner()) = listing;
                            this.changes.send_modify(|n| *n += 1);
                        }
                        *this.retrying.lock().unwrap_or_else(|e| e.into_inner()) = false;
                        tracing::info!(source = this.id, "the MCP server is reached again");
                        return;
                    }
                    Err(error) => {
                        this.link.lock().await.down = Some((Instant::now(), error));
                    }
                }
                drop(this);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_RETRY_PAUSE);
            }
        });
    }
}

/// The methods `tools` give under `policy` (its filter, prefix and kinds).
pub(super) fn methods_of(policy: &ToolSourcePolicy, tools: &[Tool]) -> Listing {
    let mut listing = Listing {
        methods: Vec::new(),
        skipped: Vec::new(),
    };
    let mut names = BTreeSet::new();
    let mut budget = Budget::new();
    for tool in tools {
        let tool_name = tool.name.to_string();
        if !policy.offers(&tool_name) {
            continue;
        }
        let mut skip = |why: String| listing.skipped.push((cut(tool_name.clone(), 120), why));
        if listing.methods.len() == MAX_METHODS {
            skip(format!("more than {MAX_METHODS} tools are offered"));
            continue;
        }
        let name = match method_name(&policy.prefix, &tool_name) {
            Ok(name) => name,
            Err(why) => {
                skip(why);
                continue;
            }
        };
        if !names.insert(name.clone()) {
            skip(format!("its method name `{name}` is another tool's"));
            continue;
        }
        let root = Json::Object((*tool.input_schema).clone());
        let required = required(&root);
        let mut params = Vec::new();
        let mut args = Vec::new();
        let mut failed = None;
        for (wire, schema) in root
            .get("properties")
            .and_then(Json::as_object)
            .into_iter()
            .flatten()
        {
            let schema = match standalone(&root, schema, &mut budget) {
                Ok(schema) => schema,
                Err(problem) => {
                    failed = Some(problem.to_string());
                    break;
                }
            };
            let py = python_name(wire);
            params.push(Param {
                name: py.clone(),
                schema,
                required: required.contains(wire.as_str()),
            });
            args.push((py, wire.clone()));
        }
        if let Some(why) = failed {
            skip(why);
            continue;
        }
        if params.len() > MAX_PARAMS {
            skip(format!(
                "it takes {} parameters, more than the limit of {MAX_PARAMS}",
                params.len()
            ));
            continue;
        }
        params.sort_by_key(|p| !p.required);
        let returns = tool.output_schema.as_ref().and_then(|schema| {
            let root = Json::Object((**schema).clone());
            standalone(&root, &root, &mut budget).ok()
        });
        let text = tool
            .description
            .as_deref()
            .map(str::to_string)
            .or_else(|| tool.title.clone())
            .unwrap_or_else(|| format!("The MCP tool `{tool_name}`."));
        let line = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        let kind = policy
            .kinds
            .get(&tool_name)
            .copied()
            .unwrap_or(MethodKind::Tool);
        listing.methods.push(Listed {
            spec: MethodSpec {
                name,
                kind,
                description: cut(line, MAX_DESCRIPTION_LEN),
                docstring: cut(
                    text.chars()
                        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
                        .collect(),
                    MAX_DOCSTRING_LEN,
                ),
                params,
                returns,
            },
            tool: tool_name,
            args,
        });
    }
    listing
}

/// A `tools/call` answer (as its JSON) as a result of `kind`.
fn result_of(answer: &Json, kind: MethodKind) -> Result<MethodResult, String> {
    let content: &[Json] = answer
        .get("content")
        .and_then(Json::as_array)
        .map_or(&[], Vec::as_slice);
    let texts: Vec<&str> = content
        .iter()
        .filter(|c| c["type"] == "text")
        .filter_map(|c| c["text"].as_str())
        .collect();
    if answer.get("isError") == Some(&Json::Bool(true)) {
        let said = texts.join("\n");
        return Err(if said.is_empty() {
            "the tool failed".to_string()
        } else {
            cut(said, 2_000)
        });
    }
    Ok(match kind {
        MethodKind::Tool => MethodResult::Tool(match answer.get("structuredContent") {
            Some(structured) if !structured.is_null() => value_from_json(structured.clone()),
            _ if content.len() == 1 && texts.len() == 1 => Value::Text(texts[0].to_string()),
            _ => Value::List(content.iter().map(part_value).collect()),
        }),
        MethodKind::Agent => MethodResult::Agent(texts.join("\n")),
        MethodKind::Behavior => MethodResult::Behavior(texts.join("\n")),
        MethodKind::MultimodalAgent => MethodResult::MultimodalAgent(
            content
                .iter()
                .filter_map(|c| match c["type"].as_str() {
                    Some("text") => Some(ContentPart::Text(c["text"].as_str()?.to_string())),
                    Some("image") => Some(ContentPart::Image(Media {
                        mime_type: c["mimeType"].as_str()?.to_string(),
                        data: base64::engine::general_purpose::STANDARD
                            .decode(c["data"].as_str()?)
                            .ok()?,
                    })),
                    _ => None,
                })
                .collect(),
        ),
    })
}

/// One content block as a value: a text as its string, an image as
/// `{"mime_type", "data"}` (bytes), anything else as its JSON.
fn part_value(block: &Json) -> Value {
    match block["type"].as_str() {
        Some("text") => Value::Text(block["text"].as_str().unwrap_or_default().to_string()),
        Some("image") => {
            let data = block["data"]
                .as_str()
                .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
                .unwrap_or_default();
            let mime_type = block["mimeType"].as_str().unwrap_or_default().to_string();
            Value::Object(vec![
                ("mime_type".to_string(), Value::Text(mime_type)),
                ("data".to_string(), Value::Bytes(data)),
            ])
        }
        _ => value_from_json(block.clone()),
    }
}
