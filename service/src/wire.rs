//! The bodies the service answers with: each handler builds one of these
//! and axum serializes it, and `/openapi.json` describes these same types
//! (`crate::api`), so the document cannot say one thing while a handler
//! sends another. A field whose content is any JSON, or a sandwit type
//! whose shape docs/SERVICE.md describes, is declared `Object` or `Value`.
//!
//! The outcome and call report are also the JSON of `sandwit run --json`
//! and `sandwit call --json` (`crate::outcome` builds them for both).

use sandwit::controls::RateScope;
use sandwit::{
    CallError, Event, InterpreterKind, LimitHit, MethodKind, PluginEvent, RunError, RunStatus,
    SessionReport,
};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use utoipa::ToSchema;

/// `GET /healthz`.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
}

/// `GET /readyz` while the service takes runs.
#[derive(Serialize, ToSchema)]
pub struct Ready {
    /// Always `ready`.
    pub status: String,
    /// Plugins loaded, enabled or not.
    pub plugins: u64,
    /// Runs running now.
    pub runs_running: u64,
    /// Runs waiting for a slot now.
    pub runs_waiting: u64,
    /// The interpreters runs may ask for (`small` always).
    pub interpreters: Vec<InterpreterKind>,
    /// The interpreter of runs that name none.
    pub default_interpreter: InterpreterKind,
}

/// A run's outcome: the JSON of `sandwit run --json`, images of a handoff
/// inline (`data`, base64).
#[derive(Serialize, ToSchema)]
pub struct Outcome {
    /// `ok`, `error`, `agent_handoff`, `limit_exceeded`, `cancelled` or
    /// `paused`.
    #[schema(value_type = String)]
    pub status: RunStatus,
    /// For `ok`, the value of the code's last statement if it is an
    /// expression whose value is not None, else of its `result` variable;
    /// `null` for none. Bytes are `{"base64": ...}`. Any JSON value.
    #[schema(value_type = Option<serde_json::Value>)]
    pub result: Option<Json>,
    /// What the code printed (capped).
    pub stdout: String,
    /// What the code printed to stderr (capped).
    pub stderr: String,
    /// The exception that escaped the code: `{type, message, line?, ...}`.
    #[schema(value_type = Option<Object>)]
    pub error: Option<RunError>,
    /// The limit that stopped the run: `{kind, message}`.
    #[schema(value_type = Option<Object>)]
    pub limit: Option<LimitHit>,
    /// The files of the chat's workspace the run created or changed (a
    /// scientific run on a server with `--workspace`); empty otherwise.
    pub files: Vec<WorkspaceFile>,
    /// The run's events (calls, controls, messages), in order.
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Event>,
    /// The agent method's result that ended the run.
    pub handoff: Option<Handoff>,
    /// Fuel the run used.
    pub fuel_used: u64,
    /// What the calls cost (`cost_per_use`).
    pub cost: f64,
    /// Wall-clock milliseconds, from when the run got a run slot.
    pub ms: f64,
    /// Milliseconds it waited for a run slot before that.
    pub queued_ms: f64,
    /// The session the run was in, when it named one: `{name, started,
    /// restored, runs, memory_bytes, kept, stored_bytes, rolled_back}`
    /// (`rolled_back`: the run failed and the session is as its last good
    /// run left it; `kept` false: nothing good was left, which ended it;
    /// `stored_bytes` null: the session is live in this process only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub session: Option<SessionReport>,
    /// For `paused`, the call the run waits at and the token that resumes
    /// it (`POST /v1/runs/{token}:resume`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<Paused>,
}

/// The call a paused run waits at.
#[derive(Serialize, ToSchema)]
pub struct Paused {
    /// The plugin's id (or tool source's, host method's provider).
    pub plugin: String,
    /// The method's name.
    pub method: String,
    /// Its arguments, as JSON.
    #[schema(value_type = Object)]
    pub args: Json,
    /// What resumes the run: good once, until `expires_at`.
    pub token: String,
    /// When the token expires, in seconds since the Unix epoch.
    pub expires_at: u64,
}

/// The agent method's result that ended a run.
#[derive(Serialize, ToSchema)]
pub struct Handoff {
    /// The plugin's id.
    pub plugin: String,
    /// The method's name.
    pub method: String,
    /// Its result, as a call report gives it: `{kind: "agent" |
    /// "behavior", text}` or `{kind: "multimodal-agent", parts}`.
    #[schema(value_type = Object)]
    pub result: Json,
}

/// A file of a chat's workspace.
#[derive(Serialize, ToSchema)]
pub struct WorkspaceFile {
    /// Its path in the workspace, `/`-separated.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
}

impl From<&sandwit::WorkspaceFile> for WorkspaceFile {
    fn from(file: &sandwit::WorkspaceFile) -> Self {
        WorkspaceFile {
            path: file.path.clone(),
            size: file.size,
        }
    }
}

/// `GET /v1/chats/{chat}/files`.
#[derive(Serialize, ToSchema)]
pub struct ChatFiles {
    /// The chat key.
    pub chat: String,
    /// Its workspace's files, as its runs left them.
    pub files: Vec<WorkspaceFile>,
}

/// A method call's report: the JSON of `sandwit call --json`.
#[derive(Serialize, ToSchema)]
pub struct CallReport {
    /// Whether the method succeeded.
    pub ok: bool,
    /// Its result: `{kind: "tool", value}`, `{kind: "agent" | "behavior",
    /// text}` or `{kind: "multimodal-agent", parts}`.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Json>,
    /// Why it failed: `{kind, message, ...}`.
    #[schema(value_type = Option<Object>)]
    pub error: Option<CallError>,
    /// The call's events.
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<PluginEvent>,
    /// Fuel the call used.
    pub fuel_used: u64,
    /// Wall-clock milliseconds.
    pub ms: f64,
}

/// `GET /v1/tools`: an object with `tools` (the sandwit and MCP formats)
/// or an array of OpenAI function definitions (`?format=openai`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum ToolListing {
    /// `?format=sandwit` (the default) or `?format=mcp`.
    Tools(ToolList),
    /// `?format=openai`.
    OpenAi(Vec<OpenAiTool>),
}

/// The tools, in the sandwit or MCP format.
#[derive(Serialize, ToSchema)]
pub struct ToolList {
    /// One per enabled method (available in the chat, with `chat_key`).
    pub tools: Vec<Tool>,
}

/// A tool: a method of an enabled plugin. The sandwit format has
/// `category` and `kind`, the MCP format `inputSchema` (read from the
/// host's MCP definitions, `Toolbox::mcp_tools`).
#[derive(Serialize, Deserialize, ToSchema)]
pub struct Tool {
    /// The method's name.
    pub name: String,
    /// Its summary (sandwit format), or its docstring without `Args:`
    /// (MCP).
    pub description: String,
    /// The plugin's id (sandwit format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    pub category: Option<String>,
    /// `tool`, `agent`, `behavior` or `multimodal-agent` (sandwit format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, required = false)]
    pub kind: Option<MethodKind>,
    /// The JSON Schema of its arguments object (MCP format).
    #[serde(
        rename = "inputSchema",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Object>, required = false)]
    pub input_schema: Option<Json>,
}

/// An OpenAI function-calling definition (read from the host's,
/// `Toolbox::openai_tools`).
#[derive(Serialize, Deserialize, ToSchema)]
pub struct OpenAiTool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `{name, description, parameters}`.
    #[schema(value_type = Object)]
    pub function: Json,
}

/// `GET /v1/tools/{name}/schema`.
#[derive(Serialize, ToSchema)]
pub struct ToolSchema {
    /// The method's name.
    pub name: String,
    /// Its kind.
    #[schema(value_type = String)]
    pub kind: MethodKind,
    /// Its Python signature.
    pub signature: String,
    /// Its parameters, in positional order.
    pub parameters: Vec<ParamSchema>,
    /// The JSON Schema of a tool's result, if declared.
    #[schema(value_type = Option<Object>)]
    pub returns: Option<Json>,
}

/// A parameter of a method.
#[derive(Serialize, ToSchema)]
pub struct ParamSchema {
    /// Its name.
    pub name: String,
    /// Whether a call must give it.
    pub required: bool,
    /// Its JSON Schema.
    #[schema(value_type = Value)]
    pub schema: Json,
}

impl From<&sandwit::Param> for ParamSchema {
    fn from(param: &sandwit::Param) -> Self {
        ParamSchema {
            name: param.name.clone(),
            required: param.required,
            schema: param.schema.clone(),
        }
    }
}

/// `GET /v1/tools/{name}/metadata`: the tool and the policy's execution
/// controls on it.
#[derive(Serialize, ToSchema)]
pub struct ToolMetadata {
    /// The method's name.
    pub name: String,
    /// The plugin's id.
    pub category: String,
    /// The plugin.
    pub plugin: PluginRef,
    /// Its kind.
    #[schema(value_type = String)]
    pub kind: MethodKind,
    /// Its summary.
    pub description: String,
    /// Calls a minute, if limited.
    pub rate_limit: Option<u32>,
    /// `plugin`, `chat` or `user`, if set.
    #[schema(value_type = Option<String>)]
    pub rate_limit_scope: Option<RateScope>,
    /// What a successful call costs, if set.
    pub cost_per_use: Option<f64>,
    /// The method has effects that are hard to undo.
    pub dangerous: bool,
    /// The method acts with the user's authority.
    pub requires_auth: bool,
    /// The circuit breaker, if any.
    pub breaker: Option<Breaker>,
}

/// A plugin, as a tool's metadata names it.
#[derive(Serialize, ToSchema)]
pub struct PluginRef {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// A circuit breaker's settings.
#[derive(Serialize, ToSchema)]
pub struct Breaker {
    /// Consecutive failures that open it.
    pub failures: Option<u32>,
    /// The share of failed calls in the window that opens it.
    pub error_rate: Option<f64>,
    /// The window, in seconds.
    pub window_s: u64,
    /// Calls the window must hold before its error rate counts.
    pub min_calls: u32,
    /// Seconds open before a probe.
    pub recovery_s: u64,
}

impl From<&sandwit::controls::BreakerSettings> for Breaker {
    fn from(b: &sandwit::controls::BreakerSettings) -> Self {
        Breaker {
            failures: b.failures,
            error_rate: b.error_rate,
            window_s: b.window_s,
            min_calls: b.min_calls,
            recovery_s: b.recovery_s,
        }
    }
}

/// `GET /v1/plugins`.
#[derive(Serialize, ToSchema)]
pub struct PluginList {
    /// Every loaded plugin, in file-name order.
    pub plugins: Vec<PluginInfo>,
}

/// A loaded plugin.
#[derive(Serialize, ToSchema)]
pub struct PluginInfo {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it does.
    pub description: String,
    /// Its methods' names.
    pub methods: Vec<String>,
    /// The SHA-256 of its component, hex.
    pub sha256: String,
    /// Whether runs and listings offer it.
    pub enabled: bool,
}

/// `POST /v1/plugins/{id}:enable` or `:disable`.
#[derive(Serialize, ToSchema)]
pub struct Switched {
    /// The plugin's id.
    pub id: String,
    /// Whether it is now enabled.
    pub enabled: bool,
}

/// `POST /v1/plugins:reload`.
#[derive(Serialize, ToSchema)]
pub struct Reloaded {
    /// The ids loaded, in file-name order.
    pub plugins: Vec<String>,
}
