//! MCP, the Model Context Protocol: the service's tools for an agent client,
//! over streamable HTTP at `/mcp` (behind the same bearer tokens as `/v1`)
//! and over stdin/stdout (`sandwit mcp --stdio`). One server, [`McpServer`],
//! serves both.
//!
//! The tools are the enabled plugins' methods (as `GET /v1/tools?format=mcp`
//! lists them), `run_python`, which runs code as `POST /v1/runs` does,
//! through the same bounded queue and limits, in the interpreter its
//! optional `interpreter` argument names, and `resume_run`, which asks the
//! client's user (MCP elicitation) to answer a run that paused at a call
//! waiting for a person, and goes on with it: the model names the run, and
//! only the person answers. A call's result maps by the
//! method's kind: a tool's value is structured content (and its JSON as
//! text), an agent's or behavior's text is text, a multimodal agent's parts
//! are text and image content; an error (the method's, a refused control, a
//! limit) is a result with `isError` whose text names the plugin, method and
//! limit. No tool changes the policy or grants a capability: the model gets
//! the methods the operator enabled, under the operator's policy.
//!
//! A request the client cancels (`notifications/cancelled`), or whose client
//! goes away (stdin closed, the HTTP session ended), cancels its run or call.
//!
//! The chat key of a call is `_meta["sandwit/chat_key"]` when the client
//! sends one, else the server's default: `--chat-key` for stdio, and
//! `mcp:<token name>` over HTTP. `_meta["sandwit/user_id"]` likewise gives
//! the user id (over HTTP the token's name by default). For a token with a
//! namespace, both defaults start with it (`<namespace>mcp:<token name>`,
//! `<namespace><token name>`), and `_meta` values outside it are refused,
//! as `/v1` refuses them.
//!
//! Only the MCP revisions with sessions (2024-11-05 to 2025-11-25) are
//! offered: a session is what carries cancellation and the server's
//! notifications between HTTP requests.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
    ElicitationAction, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerConfig,
    Tool,
};
use rmcp::service::ElicitationMode;
use rmcp::service::RequestContext;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use sandwit::json::{BytesAs, value_from_json, value_to_json};
use sandwit::{
    AgentCtx, Budget, Cancel, ContentPart, Interpreter, InterpreterKind, MethodResult, Resume,
    RunOptions, RunStatus,
};
use serde_json::{Map, Value as Json, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::mcp_sessions::{Manager, Sessions};
use crate::state::{Shared, Work};

/// The tool that runs Python code.
pub const RUN_PYTHON: &str = "run_python";

/// The tool that has the user answer a paused run and goes on with it.
pub const RESUME_RUN: &str = "resume_run";

/// How long `resume_run` waits for the user's answer before it leaves the
/// run paused.
const ANSWER_WAIT: Duration = Duration::from_secs(600);

/// The `_meta` key of a call's chat key.
pub const CHAT_KEY_META: &str = "sandwit/chat_key";

/// The `_meta` key of a call's user id.
pub const USER_ID_META: &str = "sandwit/user_id";

/// The newest MCP revision offered: the last with sessions.
const NEWEST: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The longest chat key or user id a call's `_meta` may give, in bytes
/// (as `/v1` bounds them): they are names, and plugins store under them.
const MAX_KEY_BYTES: usize = 256;

/// How a stdio server names its caller (in the log and shutdown messages).
const STDIO_CALLER: &str = "mcp-stdio";

/// The MCP server over the service's state.
#[derive(Clone)]
pub struct McpServer {
    state: Shared,
    /// The chat key of a call that names none; `None` over HTTP, where it
    /// is `mcp:<token name>`.
    chat_key: Option<String>,
}

/// Cancels its run when dropped before the run finished: the handler's
/// future was dropped, so nobody waits for the outcome.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Who calls and for which chat.
struct Who {
    caller: String,
    ctx: AgentCtx,
}

impl McpServer {
    /// The caller and agent context of a call; an error names a `_meta`
    /// key whose value is too long or outside the token's namespace.
    fn who(&self, context: &RequestContext<RoleServer>) -> Result<Who, String> {
        let token = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>());
        let caller = token.map(|c| c.name.clone());
        let namespace = token.and_then(|c| c.namespace.clone());
        let meta = |key: &str| {
            context
                .meta
                .get(key)
                .and_then(Json::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        for key in [CHAT_KEY_META, USER_ID_META] {
            if let Some(value) = meta(key)
                && value.len() > MAX_KEY_BYTES
            {
                return Err(format!(
                    "`_meta[\"{key}\"]` is {} bytes, more than the limit of {MAX_KEY_BYTES}",
                    value.len()
                ));
            }
        }
        if let Some(token) = token {
            for key in [CHAT_KEY_META, USER_ID_META] {
                if let Some(value) = meta(key) {
                    token
                        .check_in_namespace(&format!("_meta[\"{key}\"]"), &value)
                        .map_err(|message| format!("outside-namespace: {message}"))?;
                }
            }
        }
        let prefix = namespace.as_deref().unwrap_or_default();
        let chat_key = meta(CHAT_KEY_META)
            .or_else(|| self.chat_key.clone())
            .unwrap_or_else(|| {
                format!("{prefix}mcp:{}", caller.as_deref().unwrap_or(STDIO_CALLER))
            });
        let user_id =
            meta(USER_ID_META).or_else(|| caller.as_ref().map(|c| format!("{prefix}{c}")));
        Ok(Who {
            caller: caller.unwrap_or_else(|| STDIO_CALLER.to_string()),
            ctx: AgentCtx {
                user_id,
                namespace,
                ..AgentCtx::new(&chat_key)
            },
        })
    }

    /// The enabled plugins as the chat of `ctx` sees them (their lifecycle
    /// hooks), as `/v1` lists, runs and calls them. The hooks' instances
    /// must run holding a place in a queue (a run's in the host's run
    /// queue, or a slot of the calls'): the caller holds one.
    async fn in_chat(
        &self,
        ctx: &AgentCtx,
        _held: &impl crate::queue::Held,
    ) -> sandwit::ContextSet {
        self.state.enabled().in_context(ctx).await
    }

    /// A slot of the calls' queue, or the refusal as an error result's
    /// text.
    async fn slot(&self) -> Result<crate::queue::CallSlot, String> {
        self.state
            .calls
            .enter()
            .await
            .map_err(|e| format!("{}: {}", e.code(), e.message()))
    }

    /// The tools: every method the chat of `ctx` sees, then `run_python`.
    async fn tools(&self, ctx: &AgentCtx) -> Result<Vec<Tool>, McpError> {
        let slot = self
            .slot()
            .await
            .map_err(|m| McpError::internal_error(m, None))?;
        let seen = self.in_chat(ctx, &slot).await;
        drop(slot);
        let set = &seen.methods;
        let mut tools = match set.mcp_tools() {
            Json::Array(tools) => tools,
            _ => Vec::new(),
        };
        let interpreters = &self.state.interpreters;
        let default = interpreters.default_kind().name();
        tools.push(json!({
            "name": RUN_PYTHON,
            "description": format!(
                "Run Python code in a sandbox and get its outcome: its result (the value of \
                 its last expression), stdout, stderr, the exception or limit that stopped \
                 it, the method calls it made and, when an agent method stopped it, that \
                 method's result.\n\n{}",
                seen.prompt()
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The Python code."},
                    "inputs": {
                        "type": "object",
                        "description": "Variables the code finds set: names (Python \
                                        identifiers) to JSON values.",
                    },
                    "interpreter": {
                        "type": "string",
                        "enum": interpreters.loaded(),
                        "description": format!(
                            "The interpreter [default: {default}]: `small` (CPython 3.14, a \
                             curated standard library) or `scientific` (CPython 3.15 with \
                             numpy, pandas, matplotlib, scipy, sympy, networkx, Pillow), if \
                             the server loaded it."
                        ),
                    },
                    "session": {
                        "type": "string",
                        "pattern": "^[A-Za-z0-9._-]{1,64}$",
                        "description": "A session of this chat to run in: the code finds the \
                                        variables, imports and objects its last run left \
                                        (small interpreter).",
                    },
                },
                "required": ["code"],
                "additionalProperties": false,
            },
        }));
        tools.push(json!({
            "name": RESUME_RUN,
            "description": format!(
                "Go on with a run that paused at a method call waiting for a person (a \
                 `{RUN_PYTHON}` outcome with `status: \"paused\"`): the user is asked to approve \
                 the call or deny it (the code's call then raises PluginError with the user's \
                 reason), and the run's outcome comes back as `{RUN_PYTHON}`'s does. Only the \
                 user answers; a client that cannot ask its user leaves the run paused."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "token": {
                        "type": "string",
                        "description": "The paused outcome's `paused.token`.",
                    },
                },
                "required": ["token"],
                "additionalProperties": false,
            },
        }));
        tools
            .into_iter()
            .map(|t| {
                serde_json::from_value(t).map_err(|e| {
                    McpError::internal_error(format!("a tool's definition: {e}"), None)
                })
            })
            .collect()
    }

    /// Calls the enabled method `name`, cancelled with `ct`.
    async fn call_method(
        &self,
        name: &str,
        args: Map<String, Json>,
        who: Who,
        ct: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        // A call takes a slot of the calls' queue, as `/v1`'s calls do.
        let slot = match self.slot().await {
            Ok(slot) => slot,
            Err(message) => return Ok(error_result(message)),
        };
        let methods = self.in_chat(&who.ctx, &slot).await.methods;
        let Some(plugin) = methods.plugin_for(name).cloned() else {
            return self.call_host_method(&methods, name, args, who, ct).await;
        };
        let start = Instant::now();
        let call = plugin.call_within(
            &who.ctx,
            name,
            value_from_json(Json::Object(args)),
            Budget::from_limits(self.state.host.limits()),
        );
        let report = tokio::select! {
            report = call => report,
            () = ct.cancelled() => {
                tracing::info!(plugin = plugin.id(), method = name, caller = %who.caller, "mcp call cancelled");
                return Ok(error_result(format!(
                    "plugin `{}`, method `{name}`: cancelled", plugin.id()
                )));
            }
        };
        drop(slot);
        self.state
            .metrics
            .record_call(plugin.id(), name, start.elapsed().as_secs_f64());
        Ok(match &report.result {
            Ok(result) => method_result(result),
            Err(e) => error_result(e.to_string()),
        })
    }

    /// A call of a method the host answers (a tool source's): through the
    /// host, so its arguments are checked and its controls apply; `ct`
    /// cancels it (the request is dropped, its connection closed).
    async fn call_host_method(
        &self,
        methods: &sandwit::Toolbox,
        name: &str,
        args: Map<String, Json>,
        who: Who,
        ct: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        let Some((provider, _)) = methods.methods().find(|(_, m)| m.name == name) else {
            return Err(McpError::invalid_params(
                format!("no enabled tool `{name}`"),
                None,
            ));
        };
        let provider = provider.to_string();
        let start = Instant::now();
        let call =
            self.state
                .host
                .call(methods, &who.ctx, name, value_from_json(Json::Object(args)));
        let result = tokio::select! {
            result = call => result,
            () = ct.cancelled() => {
                tracing::info!(source = provider, method = name, caller = %who.caller, "mcp call cancelled");
                return Ok(error_result(format!("tool source `{provider}`, method `{name}`: cancelled")));
            }
        };
        self.state
            .metrics
            .record_call(&provider, name, start.elapsed().as_secs_f64());
        Ok(match &result {
            Ok(result) => method_result(result),
            Err(e) => error_result(e.to_string()),
        })
    }

    /// Runs `code` as `POST /v1/runs` does: through the queue, in the
    /// interpreter asked for (the default when none), under the server's
    /// run limits for it; `ct` cancels it.
    async fn run_python(
        &self,
        mut args: Map<String, Json>,
        who: Who,
        ct: CancellationToken,
    ) -> CallToolResult {
        let asked = match args.remove("interpreter") {
            None => None,
            Some(value) => match serde_json::from_value::<InterpreterKind>(value.clone()) {
                Ok(kind) => Some(kind),
                Err(_) => {
                    return error_result(format!(
                        "`{RUN_PYTHON}`'s `interpreter` is {value}, not one of \"small\" and \
                         \"scientific\""
                    ));
                }
            },
        };
        let inputs = match args.remove("inputs") {
            None => Map::new(),
            Some(Json::Object(inputs)) => inputs,
            Some(other) => {
                return error_result(format!(
                    "`{RUN_PYTHON}`'s `inputs` is {other}, not an object of names to values"
                ));
            }
        };
        let session = match args.remove("session") {
            None => None,
            Some(Json::String(session)) => Some(session),
            Some(other) => {
                return error_result(format!(
                    "`{RUN_PYTHON}`'s `session` is {other}, not a session's name"
                ));
            }
        };
        let code = match args.get("code") {
            Some(Json::String(code)) if args.len() == 1 => code.clone(),
            _ => {
                return error_result(format!(
                    "`{RUN_PYTHON}` takes `code`, a string, and optionally `inputs`, \
                     `interpreter` and `session`"
                ));
            }
        };
        let interpreter = match self.state.interpreters.choose(asked) {
            Ok(interpreter) => interpreter,
            Err(e) => return error_result(format!("{}: {}", e.code(), e.message())),
        };
        let inputs = inputs
            .into_iter()
            .map(|(name, json)| (name, value_from_json(json)));
        let mut options = RunOptions::new()
            .limits(interpreter.limits(self.state.host.run_limits()))
            .inputs(inputs);
        if let Some(session) = session {
            options = options.session(session);
        }
        self.queued(interpreter, who, Work::Run(code), options, ct)
            .await
    }

    /// Has the user answer the run paused with `args`' `token` (a form
    /// elicitation naming the call) and resumes it with the answer, as
    /// `POST /v1/runs/{token}:resume` does. Without an answer (a client
    /// that cannot ask, a question dismissed or unanswered) the run stays
    /// paused and its token good.
    async fn resume_run(
        &self,
        args: Map<String, Json>,
        who: Who,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let token = match args.get("token") {
            Some(Json::String(token)) if args.len() == 1 => token.clone(),
            _ => {
                return error_result(format!(
                    "`{RESUME_RUN}` takes `token`, a string: the paused outcome's `paused.token`"
                ));
            }
        };
        let still = "the run stays paused and its token good";
        let interpreter = match self.state.interpreters.choose(Some(InterpreterKind::Small)) {
            Ok(interpreter) => interpreter,
            Err(e) => return error_result(format!("{}: {}", e.code(), e.message())),
        };
        let pending = match interpreter.pending(&who.ctx, &token).await {
            Ok(pending) => pending,
            Err(message) => return error_result(format!("ResumeRefused: {message}")),
        };
        let peer = &context.peer;
        if !(peer.supported_elicitation_modes()).contains(&ElicitationMode::Form) {
            return error_result(format!(
                "this MCP client cannot ask its user (it declared no form elicitation), and only \
                 a person answers a paused call: {still}; a person answers it with POST \
                 /v1/runs/{{token}}:resume or `sandwit resume TOKEN`"
            ));
        }
        let args = value_to_json(&pending.args, BytesAs::Base64);
        let question = json!({
            "mode": "form",
            "message": format!(
                "A run waits for your answer before it calls `{}` of `{}` with {args}. Approve \
                 the call, or deny it (the code's call then fails with your reason).",
                pending.method, pending.plugin
            ),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "decision": {
                        "type": "string",
                        "title": "Decision",
                        "enum": ["approve", "deny"],
                    },
                    "reason": {
                        "type": "string",
                        "title": "Reason",
                        "description": "Why, if you deny it.",
                    },
                },
                "required": ["decision"],
            },
        });
        let question: ElicitRequestParams =
            serde_json::from_value(question).expect("a valid elicitation");
        let asked = peer.create_elicitation_with_timeout(question, Some(ANSWER_WAIT));
        let answered = match asked.await {
            Ok(answered) => answered,
            Err(e) => return error_result(format!("asking the user failed ({e}): {still}")),
        };
        let answer = match (answered.action, answered.content) {
            (ElicitationAction::Accept, Some(content)) => {
                let reason = content["reason"].as_str().filter(|r| !r.trim().is_empty());
                match content["decision"].as_str() {
                    Some("approve") => Resume::Approve,
                    Some("deny") => Resume::Deny(reason.unwrap_or("denied by the user").into()),
                    _ => {
                        return error_result(format!(
                            "the user's answer {content} is neither approve nor deny: {still}"
                        ));
                    }
                }
            }
            (ElicitationAction::Accept, None) => {
                return error_result(format!("the user's answer was empty: {still}"));
            }
            (ElicitationAction::Decline, _) => Resume::Deny("the user declined the call".into()),
            // Cancelled, or an action of a later revision: no answer.
            _ => {
                return error_result(format!("the user dismissed the question: {still}"));
            }
        };
        let work = Work::Resume(token, answer);
        self.queued(
            interpreter,
            who,
            work,
            RunOptions::new(),
            context.ct.clone(),
        )
        .await
    }

    /// Runs `work` in `interpreter` as `POST /v1/runs` does: through the
    /// queue, with `options` and a cancel handle that `ct` fires.
    async fn queued(
        &self,
        interpreter: Interpreter,
        who: Who,
        work: Work,
        options: RunOptions,
        ct: CancellationToken,
    ) -> CallToolResult {
        let state = &self.state;
        if state.shutting_down.load(Ordering::SeqCst) {
            return error_result("shutting-down: the server is shutting down".to_string());
        }
        // A place in the host's run queue, at once or refused; the run waits
        // for its slot in the host (a cancelled request cancels it there).
        let place = match state.take_place() {
            Ok(place) => place,
            Err(e) => return error_result(format!("{}: {}", e.code(), e.message())),
        };
        let plugins = self.in_chat(&who.ctx, &place).await.methods;
        let (id, cancel) = state.register_run(&who.caller);
        let options = options.cancel(cancel.clone());
        tracing::info!(run = id, caller = %who.caller, chat_key = %who.ctx.chat_key.escape_debug(), "mcp run started");
        let guard = CancelOnDrop(cancel.clone());
        // The run has a task of its own, so that it ends, and is counted,
        // whatever the request does.
        let task_state = state.clone();
        let caller = who.caller.clone();
        let mut task = tokio::spawn(async move {
            // The answer goes out on the POST's response stream, whose
            // place `authorize` holds until it has gone out.
            let (outcome, _place) = task_state
                .run_registered(id, place, &interpreter, &who.ctx, &plugins, &work, &options)
                .await;
            tracing::info!(run = id, caller = %caller, status = ?outcome.status, "mcp run ended");
            outcome
        });
        let joined = tokio::select! {
            joined = &mut task => joined,
            () = ct.cancelled() => {
                cancel.cancel();
                task.await
            }
        };
        drop(guard);
        match joined {
            Ok(outcome) => match state.refusal(&outcome) {
                Some(e) => error_result(format!("{}: {}", e.code(), e.message())),
                None => outcome_result(&outcome),
            },
            Err(e) => error_result(format!("the run {id} failed: {e}")),
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": NEWEST,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "sandwit", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "The tools are the methods of sandwit's enabled plugins, \
                `run_python`, which runs Python code that may call them as functions, and \
                `resume_run`, which asks the user to answer a run paused at a call that waits \
                for a person.",
        }))
        .expect("a valid server config")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&NEWEST))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let who = self
            .who(&context)
            .map_err(|m| McpError::invalid_params(m, None))?;
        let tools = self.tools(&who.ctx).await?;
        Ok(serde_json::from_value(json!({ "tools": tools })).expect("a valid tool list"))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = match self.who(&context) {
            Ok(who) => who,
            Err(message) => return Ok(error_result(message).into()),
        };
        let args = request.arguments.unwrap_or_default();
        let result = if request.name == RUN_PYTHON {
            self.run_python(args, who, context.ct.clone()).await
        } else if request.name == RESUME_RUN {
            self.resume_run(args, who, &context).await
        } else {
            self.call_method(&request.name, args, who, context.ct.clone())
                .await?
        };
        Ok(result.into())
    }
}

fn call_tool_result(value: Json) -> CallToolResult {
    serde_json::from_value(value).expect("a valid tool result")
}

/// An error result: `isError` with `message` as its text.
fn error_result(message: String) -> CallToolResult {
    call_tool_result(json!({
        "content": [{"type": "text", "text": message}],
        "isError": true,
    }))
}

/// MCP content blocks of a method's result.
fn content(result: &MethodResult) -> Vec<Json> {
    match result {
        MethodResult::Tool(_) => Vec::new(),
        MethodResult::Agent(text) | MethodResult::Behavior(text) => {
            vec![json!({"type": "text", "text": text})]
        }
        MethodResult::MultimodalAgent(parts) => parts
            .iter()
            .map(|part| match part {
                ContentPart::Text(text) => json!({"type": "text", "text": text}),
                ContentPart::ImageUrl(url) => {
                    json!({"type": "text", "text": format!("image: {url}")})
                }
                ContentPart::Image(media) => json!({
                    "type": "image",
                    "mimeType": media.mime_type,
                    "data": base64::Engine::encode(
                        &base64::engine::general_purpose::STANDARD,
                        &media.data,
                    ),
                }),
            })
            .collect(),
    }
}

/// A method's result: a tool's as structured content `{"kind": "tool",
/// "value"}` with its JSON as text; the others as text and images.
fn method_result(result: &MethodResult) -> CallToolResult {
    match result {
        MethodResult::Tool(_) => {
            let structured = crate::outcome::result_json(result, &mut crate::outcome::inline_image)
                .expect("inline images always render");
            call_tool_result(json!({
                "content": [{"type": "text", "text": structured.to_string()}],
                "structuredContent": structured,
                "isError": false,
            }))
        }
        _ => call_tool_result(json!({"content": content(result), "isError": false})),
    }
}

/// A run's outcome: the JSON of `sandwit run --json` as structured content
/// and as text; a handoff's text and images follow; `isError` unless the
/// run ended well (ok or an agent handoff), with a line naming why first.
fn outcome_result(outcome: &sandwit::RunOutcome) -> CallToolResult {
    let structured = crate::outcome::outcome_json(outcome, &mut crate::outcome::inline_image)
        .expect("inline images always render");
    let failed = !matches!(outcome.status, RunStatus::Ok | RunStatus::AgentHandoff);
    let mut blocks = Vec::new();
    if failed {
        let why = match (&outcome.limit, &outcome.error) {
            (Some(limit), _) => format!("the run hit a limit: {}", limit.message),
            (None, Some(error)) => format!("the run raised {}: {}", error.type_name, error.message),
            (None, None) => format!("the run ended {}", structured["status"]),
        };
        blocks.push(json!({"type": "text", "text": why}));
    }
    blocks.push(json!({"type": "text", "text": structured.to_string()}));
    if let Some(handoff) = &outcome.handoff {
        blocks.extend(content(&handoff.result));
    }
    call_tool_result(json!({
        "content": blocks,
        "structuredContent": structured,
        "isError": failed,
    }))
}

/// Refuses a request without a valid bearer token (as `/v1` does), or
/// naming a session of another token, and hands the caller on to the MCP
/// server (crate::mcp_sessions).
async fn authorize(
    State((state, sessions, exchanges)): State<(Shared, Arc<Sessions>, Arc<Semaphore>)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    // A POST carries a message whose answer (a tool call's result, a run's
    // outcome) comes back on the POST's own response stream: each holds a
    // place until that stream has gone out, so the answers held for MCP
    // clients are bounded as /v1's are (crate::answer).
    let place = if parts.method == axum::http::Method::POST {
        match exchanges.clone().try_acquire_owned() {
            Ok(place) => Some(place),
            Err(_) => {
                return crate::error::ApiError::unavailable(
                    "queue-full",
                    format!(
                        "every one of the {} MCP exchanges answered at once (--max-runs \
                         plus --queue) is taken; try again shortly",
                        state.host.run_slots().places()
                    ),
                    1,
                )
                .into_response();
            }
        }
    } else {
        None
    };
    let token = caller.name.clone();
    parts.extensions.insert(caller);
    let response =
        crate::mcp_sessions::guard(&sessions, token, Request::from_parts(parts, body), next).await;
    match place {
        Some(place) => crate::answer::holding(response, place),
        None => response,
    }
}

/// `/mcp`: MCP's streamable HTTP, behind the bearer tokens. Its sessions
/// are bound to their token and bounded (`Config::mcp_sessions`,
/// crate::mcp_sessions); they end when the service has shut down its runs
/// (so that graceful shutdown does not wait on their event streams), or
/// when idle past their time.
pub(crate) fn routes(state: &Shared) -> Router<Shared> {
    // The bearer token, which a browser page cannot send, is what stops a
    // DNS-rebinding page; `--addr` decides which hosts reach the server.
    let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    config.max_request_body_bytes = state.config.max_body_bytes;
    let shutdown = config.cancellation_token.clone();
    watch_shutdown(Arc::downgrade(state), shutdown);
    let server_state = state.clone();
    // The sessions are rmcp's `LocalSessionManager` wrapped, rather than a
    // table kept beside it from the HTTP exchanges alone: the wrapper sees
    // which messages are requests past `initialize`, which response streams
    // are open and every end of a session (rmcp's own included), which the
    // HTTP exchanges do not show.
    let limits = state.config.mcp_sessions;
    let sessions = Sessions::new(limits);
    sessions.sweep_every(
        (limits.init_idle.min(limits.idle) / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(1)),
    );
    let service = StreamableHttpService::new(
        move || {
            Ok(McpServer {
                state: server_state.clone(),
                chat_key: None,
            })
        },
        Arc::new(Manager(sessions.clone())),
        config,
    );
    let exchanges = Arc::new(Semaphore::new(state.host.run_slots().places()));
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            (state.clone(), sessions, exchanges),
            authorize,
        ))
}

/// Cancels `token` once the service is shutting down and no run is left
/// in flight (so runs of MCP sessions get the grace that other runs get);
/// checked every 50 ms, the task ends with the service.
fn watch_shutdown(state: Weak<crate::state::State>, token: CancellationToken) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let Some(state) = state.upgrade() else { break };
            if state.shutting_down.load(Ordering::SeqCst) && state.runs_in_flight() == 0 {
                break;
            }
        }
        token.cancel();
    });
}

/// Serves MCP over stdin and stdout, over `state`, until the client closes
/// stdin; the runs in flight are cancelled then. Calls that name no chat
/// key use `chat_key`.
pub(crate) async fn serve_stdio(state: &Shared, chat_key: &str) -> anyhow::Result<()> {
    let server = McpServer {
        state: state.clone(),
        chat_key: Some(chat_key.to_string()),
    };
    // On end of input, the runs in flight are cancelled at once (rmcp
    // would wait for their answers for 5 s first).
    let state = Arc::downgrade(state);
    let stdin = EofSignal {
        inner: tokio::io::stdin(),
        on_eof: Some(Box::new(move || {
            if let Some(state) = state.upgrade() {
                state.cancel_runs();
            }
        })),
    };
    let running = server.serve((stdin, tokio::io::stdout())).await?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "mcp client gone");
    Ok(())
}

/// A reader that calls `on_eof` once, when `inner` reaches end of file.
struct EofSignal<R> {
    inner: R,
    on_eof: Option<Box<dyn FnOnce() + Send>>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EofSignal<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(poll, std::task::Poll::Ready(Ok(())))
            && buf.filled().len() == before
            && buf.remaining() > 0
            && let Some(on_eof) = self.on_eof.take()
        {
            on_eof();
        }
        poll
    }
}
