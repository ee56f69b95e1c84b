//! MCP: `sandwit serve`'s `/mcp` (streamable HTTP on a loopback port) and
//! `sandwit mcp --stdio` (a child process), each driven by rmcp's client.
//! The servers' logs (stderr) tell when a run started and how it ended.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction,
};
use rmcp::service::RequestContext;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::common::{artifacts, cache_dir, tempdir};

const ADMIN: &str = "admin-token-for-mcp-tests";
const USER: &str = "user-token-for-mcp-tests";

/// An rmcp client of the service.
pub(crate) type Client = RunningService<RoleClient, ()>;

/// A server's stderr, a line at a time.
struct Log(mpsc::UnboundedReceiver<String>);

impl Log {
    /// The next line containing every one of `needles` (a minute at most).
    async fn wait_for(&mut self, needles: &[&str]) -> String {
        let wait = async {
            while let Some(line) = self.0.recv().await {
                if needles.iter().all(|n| line.contains(n)) {
                    return line;
                }
            }
            panic!("the server's stderr ended before a line with {needles:?}");
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("no line with {needles:?} within a minute"))
    }
}

/// A channel of lines, echoed to the test's stderr.
fn log_channel() -> (mpsc::UnboundedSender<String>, Log) {
    let (tx, rx) = mpsc::unbounded_channel();
    (tx, Log(rx))
}

/// A runtime for a test's MCP client.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A folder of copies of `plugins`.
fn plugin_dir(dir: &Path, plugins: &[&str]) -> PathBuf {
    let plugin_dir = dir.join("plugins");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    for plugin in plugins {
        let path = Path::new(plugin);
        std::fs::copy(path, plugin_dir.join(path.file_name().unwrap())).unwrap();
    }
    plugin_dir
}

/// `sandwit` with the shared cache, a store of its own and no policy.
fn sandwit(dir: &Path) -> Command {
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sandwit"));
    command
        .env("NO_COLOR", "1")
        .env("SANDWIT_LOG", "info")
        // The small interpreter only: scripts/env.sh names the scientific one.
        .env_remove("SANDWIT_SCIENTIFIC")
        .arg("--cache-dir")
        .arg(cache_dir())
        .arg("--store")
        .arg(dir.join("store.db"))
        .arg("--policy")
        .arg(policy)
        // Fuel enough that a spinning run lasts until its time limit (10 s),
        // long after its cancellation.
        .args(["--fuel", "1000000000000"]);
    command
}

/// A running `sandwit serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, String) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut request = agent
            .post(format!("{}{path}", self.base))
            .header("Accept", "application/json, text/event-stream");
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.send_json(body).unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    }
}

/// Starts `sandwit serve` offering `plugins`; its stderr goes to the log.
fn serve(name: &str, plugins: &[&str]) -> (Server, Log) {
    let dir = tempdir("mcp", name);
    let plugin_dir = plugin_dir(&dir, plugins);
    let tokens = dir.join("tokens");
    std::fs::write(
        &tokens,
        format!(
            "ops admin {}\napp user {}\n",
            sandwit_service::token_digest_hex(ADMIN),
            sandwit_service::token_digest_hex(USER)
        ),
    )
    .unwrap();
    let mut child = sandwit(&dir)
        .args(["serve", "--addr", "127.0.0.1:0", "--plugins"])
        .arg(&plugin_dir)
        .arg("--token-file")
        .arg(&tokens)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, log) = log_channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("[serve] {line}");
            let _ = tx.send(line);
        }
    });
    let base = crate::common::listening_base(&mut child);
    (Server { child, base }, log)
}

/// An rmcp client of the `/mcp` of the server at `base` with `token`.
pub(crate) async fn http_client(base: &str, token: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(token),
    );
    ().serve(transport).await.expect("initializing over HTTP")
}

/// `sandwit mcp --stdio` as an rmcp client's child process.
async fn stdio_client(name: &str, plugins: &[&str]) -> (Client, Log) {
    stdio_client_with(name, plugins, &[]).await
}

/// The same with more of `sandwit mcp`'s flags.
async fn stdio_client_with(name: &str, plugins: &[&str], flags: &[&str]) -> (Client, Log) {
    let dir = tempdir("mcp", name);
    let plugin_dir = plugin_dir(&dir, plugins);
    stdio_serve(&dir, &plugin_dir, flags, "", ()).await
}

/// `sandwit mcp --stdio` over `dir`'s store with `policy` and the plugins
/// of `plugin_dir`, as the child process of a client that `handler` is.
async fn stdio_serve<H: ClientHandler>(
    dir: &Path,
    plugin_dir: &Path,
    flags: &[&str],
    policy: &str,
    handler: H,
) -> (RunningService<RoleClient, H>, Log) {
    let mut command = sandwit(dir);
    std::fs::write(dir.join("policy.toml"), policy).unwrap();
    command
        .args(["mcp", "--stdio", "--chat-key", "stdio-chat", "--plugins"])
        .arg(plugin_dir)
        .args(flags);
    let (transport, stderr) = TokioChildProcess::builder(tokio::process::Command::from(command))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, log) = log_channel();
    let mut lines = tokio::io::BufReader::new(stderr.unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[mcp] {line}");
            let _ = tx.send(line);
        }
    });
    let client = handler
        .serve(transport)
        .await
        .expect("initializing over stdio");
    (client, log)
}

fn params(name: &str, arguments: Value) -> CallToolRequestParams {
    serde_json::from_value(json!({"name": name, "arguments": arguments})).unwrap()
}

/// A call's result as JSON: `content`, `structuredContent`, `isError`.
pub(crate) async fn call(client: &Client, name: &str, arguments: Value) -> Value {
    let result: CallToolResult = client
        .call_tool(params(name, arguments))
        .await
        .unwrap_or_else(|e| panic!("calling `{name}`: {e}"));
    serde_json::to_value(result).unwrap()
}

async fn tool_names(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// What both transports must do: list the tools, call each kind, fail a
/// call, run code that calls a method, and cancel a run.
async fn exercise(client: &Client, log: &mut Log, default_chat_key: &str) {
    let info = client.peer_info().expect("the server's info");
    assert_eq!(info.server_info.as_ref().unwrap().name, "sandwit");
    // The newest revision with sessions.
    assert_eq!(info.protocol_version.to_string(), "2025-11-25");

    // The tools: the enabled methods with their schemas, and run_python
    // with the listing an LLM is given.
    let tools = client.list_all_tools().await.unwrap();
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool `{name}` in {tools:?}"))
            .clone()
    };
    let sum = tool("calculate_sum");
    assert_eq!(sum["inputSchema"]["type"], "object", "{sum}");
    assert_eq!(sum["inputSchema"]["required"], json!(["num1", "num2"]));
    assert!(!sum["description"].as_str().unwrap().is_empty(), "{sum}");
    tool("generate_image_and_comment");
    let run = tool("run_python");
    assert_eq!(run["inputSchema"]["required"], json!(["code"]));
    assert!(
        run["description"]
            .as_str()
            .unwrap()
            .contains("def calculate_sum("),
        "{run}"
    );

    // A tool: structured content, and its JSON as text.
    let result = call(client, "calculate_sum", json!({"num1": 20, "num2": 22})).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"kind": "tool", "value": 42})
    );
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"]);

    // A multimodal agent: text and a PNG.
    let result = call(
        client,
        "generate_image_and_comment",
        json!({"topic": "sea"}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    let content = result["content"].as_array().unwrap();
    assert!(content.iter().any(|c| c["type"] == "text"), "{result}");
    let image = content
        .iter()
        .find(|c| c["type"] == "image")
        .unwrap_or_else(|| panic!("no image in {result}"));
    assert_eq!(image["mimeType"], "image/png");
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        image["data"].as_str().unwrap(),
    )
    .unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");

    // A failing call: isError, naming the plugin, the method and why.
    let result = call(client, "calculate_sum", json!({"num1": 1})).await;
    assert_eq!(result["isError"], true, "{result}");
    let message = result["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("`calc`")
            && message.contains("`calculate_sum`")
            && message.contains("num2"),
        "{message}"
    );
    // An unknown tool is a protocol error.
    assert!(client.call_tool(params("nope", json!({}))).await.is_err());

    // run_python: the outcome of `sandwit run --json`.
    let result = call(
        client,
        "run_python",
        json!({"code": "print(calculate_sum(1, 2))"}),
    )
    .await;
    assert_eq!(result["isError"], false, "{result}");
    let outcome = &result["structuredContent"];
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["stdout"], "3\n");
    assert_eq!(outcome["events"][0]["method"], "calculate_sum");
    // A call that names no chat key runs under the server's default.
    log.wait_for(&["mcp run started", &format!("chat_key={default_chat_key}")])
        .await;
    let result = call(client, "run_python", json!({"code": "1 / 0"})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ZeroDivisionError"),
        "{result}"
    );
    let result = call(client, "run_python", json!({"source": "1"})).await;
    assert_eq!(result["isError"], true, "{result}");
    // Inputs in, the last expression's value out.
    let args = json!({"code": "calculate_sum(a, b)", "inputs": {"a": 40, "b": 2}});
    let result = call(client, "run_python", args).await;
    assert_eq!(result["structuredContent"]["result"], 42, "{result}");
    let args = json!({"code": "1", "inputs": [1]});
    let result = call(client, "run_python", args).await;
    assert_eq!(result["isError"], true, "{result}");
    // A chat key past the bound is refused, naming it.
    let long: CallToolRequestParams = serde_json::from_value(json!({
        "name": "run_python",
        "arguments": {"code": "1"},
        "_meta": {"sandwit/chat_key": "k".repeat(257)},
    }))
    .unwrap();
    let result = serde_json::to_value(client.call_tool(long).await.unwrap()).unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("sandwit/chat_key"),
        "{result}"
    );

    // Cancellation: the client drops its call once the run started, which
    // sends notifications/cancelled; the run ends cancelled. The call names
    // its chat key in `_meta`.
    let spin: CallToolRequestParams = serde_json::from_value(json!({
        "name": "run_python",
        "arguments": {"code": "while True:\n    pass\n"},
        "_meta": {"sandwit/chat_key": "spin-chat"},
    }))
    .unwrap();
    // Boxed, so that dropping it drops the call (and its request guard).
    let mut spin = Box::pin(client.call_tool(spin));
    let started = tokio::select! {
        result = &mut spin => panic!("the spinning run returned: {result:?}"),
        line = log.wait_for(&["mcp run started", "chat_key=spin-chat"]) => line,
    };
    let run = started
        .split_whitespace()
        .find_map(|w| w.strip_prefix("run="))
        .unwrap()
        .to_string();
    drop(spin);
    log.wait_for(&["mcp run ended", &format!("run={run} "), "Cancelled"])
        .await;
}

#[test]
fn mcp_over_http_serves_tools_runs_and_cancellation_behind_tokens() {
    let (server, mut log) = serve("http", &[artifacts::CALC, artifacts::IMAGEGEN]);
    // No token, a wrong one: 401.
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}},
    });
    let (status, body) = server.post("/mcp", None, initialize.clone());
    assert_eq!(status, 401, "{body}");
    assert_eq!(server.post("/mcp", Some("nope"), initialize).0, 401);

    runtime().block_on(async {
        let client = http_client(&server.base, USER).await;
        exercise(&client, &mut log, "mcp:app").await;

        // A disabled plugin's tools leave the next listing and cannot be
        // called; enabled again, they are back.
        let (status, body) = server.post("/v1/plugins/calc:disable", Some(ADMIN), json!({}));
        assert_eq!(status, 200, "{body}");
        let names = tool_names(&client).await;
        assert!(!names.contains(&"calculate_sum".to_string()), "{names:?}");
        assert!(names.contains(&"run_python".to_string()), "{names:?}");
        assert!(
            client
                .call_tool(params("calculate_sum", json!({"num1": 1, "num2": 2})))
                .await
                .is_err()
        );
        let result = call(
            &client,
            "run_python",
            json!({"code": "calculate_sum(1, 2)"}),
        )
        .await;
        assert_eq!(
            result["structuredContent"]["error"]["type"], "NameError",
            "{result}"
        );
        let (status, _) = server.post("/v1/plugins/calc:enable", Some(ADMIN), json!({}));
        assert_eq!(status, 200);
        assert!(
            tool_names(&client)
                .await
                .contains(&"calculate_sum".to_string())
        );
        client.cancel().await.unwrap();
    });
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    // MCP's runs are counted as /v1's are.
    let metrics = agent
        .get(format!("{}/metrics", server.base))
        .header("Authorization", format!("Bearer {ADMIN}"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(
        metrics.contains("sandwit_runs_total{status=\"cancelled\"} 1"),
        "{metrics}"
    );
}

#[test]
fn mcp_over_stdio_serves_tools_runs_and_cancellation() {
    runtime().block_on(async {
        let (client, mut log) =
            stdio_client("stdio", &[artifacts::CALC, artifacts::IMAGEGEN]).await;
        exercise(&client, &mut log, "stdio-chat").await;
        // The client goes away (closes stdin) during a run: the run ends
        // cancelled and the server ends.
        let peer = client.peer().clone();
        let spin = tokio::spawn(async move {
            peer.call_tool_once(params(
                "run_python",
                json!({"code": "while True:\n    pass\n"}),
            ))
            .await
        });
        let started = log.wait_for(&["mcp run started"]).await;
        let run = started
            .split_whitespace()
            .find_map(|w| w.strip_prefix("run="))
            .unwrap()
            .to_string();
        client.cancel().await.unwrap();
        log.wait_for(&["mcp run ended", &format!("run={run} "), "Cancelled"])
            .await;
        log.wait_for(&["mcp client gone"]).await;
        assert!(spin.await.unwrap().is_err());
    });
}

/// `sandwit mcp --stdio --scientific-dir DIR`: `run_python` may ask for the
/// scientific interpreter, and runs that name none get the small one.
#[test]
fn mcp_over_stdio_offers_the_scientific_interpreter() {
    runtime().block_on(async {
        let flags = ["--scientific-dir", artifacts::SCIENTIFIC];
        let (client, _log) =
            stdio_client_with("stdio-scientific", &[artifacts::CALC], &flags).await;
        let tools = client.list_all_tools().await.unwrap();
        let run = tools.iter().find(|t| t.name == "run_python").unwrap();
        let schema = serde_json::to_value(&run.input_schema).unwrap();
        assert_eq!(
            schema["properties"]["interpreter"]["enum"],
            json!(["small", "scientific"]),
            "{schema}"
        );
        let code = "import numpy as np\nprint(np.arange(4).sum(), calculate_sum(1, 2))";
        let result = call(
            &client,
            "run_python",
            json!({"code": code, "interpreter": "scientific"}),
        )
        .await;
        assert_eq!(result["structuredContent"]["stdout"], "6 3\n", "{result}");
        let result = call(&client, "run_python", json!({"code": code})).await;
        let outcome = &result["structuredContent"];
        assert_eq!(outcome["error"]["type"], "ModuleNotFoundError", "{result}");
    });
}

#[test]
fn mcp_sessions_do_not_hold_up_a_graceful_shutdown() {
    let (mut server, mut log) = serve("shutdown", &[artifacts::CALC]);
    let rt = runtime();
    // An open session (with its event stream) at SIGTERM.
    let client = rt.block_on(async {
        let client = http_client(&server.base, USER).await;
        assert!(
            tool_names(&client)
                .await
                .contains(&"calculate_sum".to_string())
        );
        client
    });
    let pid = i32::try_from(server.child.id()).unwrap();
    // SAFETY: kill(2) on the server we started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    rt.block_on(log.wait_for(&["sandwit: stopped"]));
    assert!(server.child.wait().unwrap().success());
    drop(client);
}

/// The chat's lifecycle hooks decide what MCP offers, as in `/v1`: the
/// `lifecycle` fixture hides `whoami` from a chat with no user.
#[test]
fn mcp_offers_what_the_lifecycle_hooks_offer_the_chat() {
    runtime().block_on(async {
        let (client, _log) =
            stdio_client("lifecycle", &[artifacts::LIFECYCLE, artifacts::CALC]).await;
        let names = tool_names(&client).await;
        assert!(names.contains(&"chat_name".to_string()), "{names:?}");
        assert!(names.contains(&"calculate_sum".to_string()), "{names:?}");
        assert!(!names.contains(&"whoami".to_string()), "{names:?}");
        let refused = client
            .call_tool(params("whoami", json!({})))
            .await
            .expect_err("whoami is not offered to an anonymous chat");
        assert!(refused.to_string().contains("whoami"), "{refused}");
        let result = call(
            &client,
            "run_python",
            json!({"code": "print(chat_name())\nwhoami()"}),
        )
        .await;
        let outcome = &result["structuredContent"];
        assert_eq!(outcome["stdout"], "stdio-chat\n", "{result}");
        assert_eq!(outcome["error"]["type"], "NameError", "{result}");
        // With a user in `_meta`, whoami is offered.
        let ada: CallToolRequestParams = serde_json::from_value(json!({
            "name": "whoami",
            "arguments": {},
            "_meta": {"sandwit/user_id": "ada"},
        }))
        .unwrap();
        let result = serde_json::to_value(client.call_tool(ada).await.unwrap()).unwrap();
        assert_eq!(
            result["structuredContent"],
            json!({"kind": "tool", "value": "ada"}),
            "{result}"
        );
        client.cancel().await.unwrap();
    });
}

/// A client whose user answers every question with `answer` (a form's
/// content, or `None` to dismiss it), keeping the questions asked.
#[derive(Clone)]
struct User {
    answer: Option<Value>,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ClientHandler for User {
    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "a-person", "version": "1"},
        }))
        .unwrap()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let question = serde_json::to_value(&request).unwrap();
        let message = question["message"].as_str().unwrap_or_default();
        self.asked.lock().unwrap().push(message.to_string());
        Ok(match &self.answer {
            Some(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
            }
            None => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

/// `resume_run`: a run paused at a call the policy pauses is answered by
/// the client's user (elicitation), in another server process over the
/// same store; the model cannot answer it, and a client that cannot ask
/// its user, or a user who dismisses the question, leaves it paused.
#[test]
fn mcp_resumes_a_paused_run_with_the_users_answer_only() {
    runtime().block_on(async {
        let dir = tempdir("mcp", "resume");
        let plugins = plugin_dir(&dir, &[artifacts::CALC]);
        let policy = "[approval]\npause_for = [\"dangerous\"]\n\n\
                      [plugins.calc.methods.calculate_sum]\ndangerous = true\n";
        let code = "try:\n    result = calculate_sum(num1=1, num2=2)\n\
                    except PluginError as e:\n    result = 'refused: ' + str(e)";
        let pause = async |client: &Client| {
            let paused = call(client, "run_python", json!({"code": code})).await;
            let outcome = &paused["structuredContent"];
            assert_eq!(outcome["status"], "paused", "{paused}");
            assert_eq!(outcome["paused"]["method"], "calculate_sum", "{paused}");
            assert_eq!(outcome["paused"]["args"], json!({"num1": 1, "num2": 2}));
            outcome["paused"]["token"].as_str().unwrap().to_string()
        };
        let (model, _log) = stdio_serve(&dir, &plugins, &[], policy, ()).await;
        assert!(tool_names(&model).await.contains(&"resume_run".to_string()));
        let token = pause(&model).await;
        // A client with no user to ask cannot answer it, nor can the model.
        let refused = call(&model, "resume_run", json!({"token": token})).await;
        assert_eq!(refused["isError"], true, "{refused}");
        let text = refused["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("cannot ask its user"), "{text}");
        let forged = call(
            &model,
            "resume_run",
            json!({"token": "swp1_x", "approve": true}),
        )
        .await;
        assert_eq!(forged["isError"], true, "{forged}");
        model.cancel().await.unwrap();

        let user = |answer: Option<Value>| User {
            answer,
            asked: Default::default(),
        };
        let resume = async |answer: Option<Value>, token: &str| {
            let user = user(answer);
            let asked = user.asked.clone();
            let (client, _log) = stdio_serve(&dir, &plugins, &[], policy, user).await;
            let result: CallToolResult = client
                .call_tool(params("resume_run", json!({"token": token})))
                .await
                .unwrap();
            client.cancel().await.unwrap();
            let asked = asked.lock().unwrap().clone();
            (serde_json::to_value(result).unwrap(), asked)
        };
        let (dismissed, asked) = resume(None, &token).await;
        assert_eq!(dismissed["isError"], true, "{dismissed}");
        assert!(dismissed.to_string().contains("token good"), "{dismissed}");
        assert!(asked[0].contains("calculate_sum"), "{asked:?}");
        assert!(asked[0].contains(r#"{"num1":1,"num2":2}"#), "{asked:?}");

        let (approved, _) = resume(Some(json!({"decision": "approve"})), &token).await;
        assert_eq!(approved["structuredContent"]["status"], "ok", "{approved}");
        assert_eq!(approved["structuredContent"]["result"], 3, "{approved}");
        let (again, asked) = resume(Some(json!({"decision": "approve"})), &token).await;
        assert!(again.to_string().contains("ResumeRefused"), "{again}");
        assert!(asked.is_empty(), "a spent token asked the user: {asked:?}");

        let (model, _log) = stdio_serve(&dir, &plugins, &[], policy, ()).await;
        let token = pause(&model).await;
        model.cancel().await.unwrap();
        let deny = json!({"decision": "deny", "reason": "not today"});
        let (denied, _) = resume(Some(deny), &token).await;
        let result = denied["structuredContent"]["result"]
            .as_str()
            .unwrap_or_default();
        assert!(
            result.starts_with("refused: ") && result.contains("not today"),
            "{denied}"
        );
    });
}
