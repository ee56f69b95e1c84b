//! Tool sources against real servers on loopback, run by `.venv-tools`'s
//! Python ($SANDWIT_TOOLS_PYTHON, which scripts/test makes): a FastAPI
//! application (tests/cli/tools/openapi_app.py, its OpenAPI 3.1 document,
//! bearer auth), an MCP server on the official Python SDK
//! (mcp_server.py, over stdio and streamable HTTP) and a misbehaving one
//! (hostile_mcp.py). Their operations and tools become methods that AI
//! code, `sandwit prompt`, `sandwit tools call`, `/v1/tools`, `:call` and
//! MCP's `tools/call` reach; arguments are checked before any request, the
//! source's controls apply, its token never shows, a cancelled run cancels
//! its request, a server that is down fails calls at once, and hostile
//! documents and servers are refused or contained with a report.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{cache_dir, listening_base, tempdir};
use crate::serve::{ADMIN, USER, serve_with};

const TOKEN: &str = "tok-secret-5150-shop";

/// A server of tests/cli/tools/ on loopback, run by `.venv-tools`'s
/// Python: its base URL as it printed it. Stopped when dropped (its stdin
/// closed, then killed).
struct Loopback {
    child: Child,
    base: String,
}

impl Loopback {
    fn start(script_name: &str, args: &[&str], env: &[(&str, &OsStr)]) -> Loopback {
        let mut child = Command::new(tools_python())
            .arg(script(script_name))
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let base = listening_base(&mut child);
        Loopback { child, base }
    }

    /// Closes its stdin and waits for it to exit.
    fn stop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The FastAPI application.
struct App {
    server: Loopback,
    /// Its request log: one `METHOD PATH` line per request it received.
    requests: PathBuf,
    /// Written when a client of `/slow` went away before its answer.
    disconnected: PathBuf,
}

impl App {
    fn start(dir: &Path) -> App {
        let requests = dir.join("requests.log");
        let disconnected = dir.join("disconnected");
        let server = Loopback::start(
            "openapi_app.py",
            &[],
            &[
                ("TOOLS_TOKEN", TOKEN.as_ref()),
                ("TOOLS_REQUEST_LOG", requests.as_os_str()),
                ("TOOLS_DISCONNECT_FILE", disconnected.as_os_str()),
            ],
        );
        App {
            server,
            requests,
            disconnected,
        }
    }

    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.requests)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The document and its SHA-256 (hex).
    fn document(&self) -> (Vec<u8>, String) {
        let bytes = ureq::get(format!("{}/openapi.json", self.server.base))
            .call()
            .unwrap()
            .body_mut()
            .read_to_vec()
            .unwrap();
        let digest = hex(&bytes);
        (bytes, digest)
    }

    fn stop(&mut self) {
        self.server.stop();
    }
}

/// The SHA-256 of `bytes`, hex: what a policy pins.
fn hex(bytes: &[u8]) -> String {
    sandwit::component_hash(bytes)
}

/// A policy with the app's document as tool source `shop`, pinned, fetched
/// from its URL, and `extra` lines.
fn policy(app: &App, extra: &str) -> String {
    let (_, digest) = app.document();
    format!(
        "[tools.shop]\nopenapi = \"{base}/openapi.json\"\nsha256 = \"{digest}\"\n\
         base_url = \"{base}\"\noperations = [\"*\"]\nprefix = \"shop_\"\n\
         auth = {{ type = \"bearer\", token = {{ env = \"SHOP_TOKEN\" }} }}\n{extra}",
        base = app.server.base
    )
}

/// `sandwit` with the policy in `dir` and `args`, the token in its
/// environment.
fn sandwit(dir: &Path, policy: &str, args: &[&str]) -> Output {
    let file = dir.join("policy.toml");
    std::fs::write(&file, policy).unwrap();
    Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(cache_dir())
        .arg("--store")
        .arg(dir.join("store.db"))
        .arg("--policy")
        .arg(&file)
        .args(args)
        .env("SHOP_TOKEN", TOKEN)
        .env_remove("SANDWIT_POLICY")
        .output()
        .unwrap()
}

/// The errors `times` calls of `call` raise in one run, each within
/// seconds (a failing source never holds a run).
fn errors_of(dir: &Path, policy: &str, plugins: &str, call: &str, times: usize) -> Vec<String> {
    let code = format!(
        "errors = []\nfor i in range({times}):\n    try:\n        {call}\n    except PluginError as e:\n        errors.append(str(e))\nresult = errors"
    );
    let start = Instant::now();
    let out = sandwit(
        dir,
        policy,
        &["run", "--json", "--plugins", plugins, "-c", &code],
    );
    let outcome: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "it failed fast: {outcome}"
    );
    let errors: Vec<String> = outcome["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{outcome}"))
        .iter()
        .map(|e| e.as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(errors.len(), times, "{outcome}");
    errors
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_openapi_document_becomes_methods_of_runs_prompts_and_calls() {
    let dir = tempdir("tools", "openapi");
    let app = App::start(&dir);
    let policy = policy(&app, "");
    let (_, digest) = app.document();

    // `tools inspect` prints the digest to pin and every method.
    let out = sandwit(
        &dir,
        "",
        &[
            "tools",
            "inspect",
            &format!("{}/openapi.json", app.server.base),
        ],
    );
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains(&format!("sha256 = \"{digest}\"")), "{shown}");
    assert!(
        shown.contains("get_item(item_id, q=None)  -> tool"),
        "{shown}"
    );

    // The prompt lists them as the source's.
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let plugins = empty.to_str().unwrap();
    let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
    let prompt = text(&out);
    assert!(out.status.success(), "{prompt}");
    assert!(
        prompt.contains("def shop_get_item(item_id, q=None):  # tool") && prompt.contains("`shop`"),
        "{prompt}"
    );

    // AI code calls them like plugin methods.
    let code = "item = shop_get_item(7, q='x')\n\
                made = shop_create_item('pen', 1.5, tags=['a'])\n\
                found = shop_search(['a b', 'c'], x_trace_id='t-9')\n\
                result = [item['name'], made['id'], found['terms'], found['trace']]";
    let out = sandwit(
        &dir,
        &policy,
        &["run", "--json", "--plugins", plugins, "-c", code],
    );
    let outcome: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(
        outcome["result"],
        json!(["item 7", 1001, ["a b", "c"], "t-9"])
    );
    let calls: Vec<&Value> = outcome["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "call")
        .collect();
    assert_eq!(calls.len(), 3, "{outcome}");
    assert!(calls.iter().all(|e| e["plugin"] == "shop"), "{calls:?}");

    // Arguments are checked before any request is made.
    let before = app.requests().len();
    let out = sandwit(
        &dir,
        &policy,
        &[
            "tools",
            "call",
            "shop",
            "shop_get_item",
            "--args",
            r#"{"item_id": "seven"}"#,
        ],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("invalid arguments"), "{}", text(&out));
    assert_eq!(app.requests().len(), before, "no request for bad arguments");

    // The token is sent, and hidden in what comes back.
    let out = sandwit(&dir, &policy, &["tools", "call", "shop", "shop_echo_auth"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("[secret]") && !shown.contains(TOKEN),
        "{shown}"
    );

    // A wrong token is the server's refusal, named as such.
    let mut wrong = Command::new(env!("CARGO_BIN_EXE_sandwit"));
    let file = dir.join("policy.toml");
    let out = wrong
        .arg("--cache-dir")
        .arg(cache_dir())
        .arg("--store")
        .arg(dir.join("store.db"))
        .arg("--policy")
        .arg(&file)
        .args([
            "tools",
            "call",
            "shop",
            "shop_get_item",
            "--args",
            r#"{"item_id": 1}"#,
        ])
        .env("SHOP_TOKEN", "not-the-token")
        .output()
        .unwrap();
    let shown = text(&out);
    assert!(
        shown.contains("denied") && shown.contains("(401)"),
        "{shown}"
    );
    assert!(!shown.contains("not-the-token"), "{shown}");

    // A server error fails the call, naming the operation and status.
    let out = sandwit(&dir, &policy, &["tools", "call", "shop", "shop_boom"]);
    assert!(
        text(&out).contains("GET /boom: the server failed (500)"),
        "{}",
        text(&out)
    );
    // A body over `[http] max_response_bytes` is refused, not read.
    let out = sandwit(&dir, &policy, &["tools", "call", "shop", "shop_big"]);
    assert!(
        text(&out).contains("more than the limit of"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_source_is_controlled_and_fails_fast_when_its_server_is_down() {
    let dir = tempdir("tools", "controls");
    let mut app = App::start(&dir);
    let policy = policy(
        &app,
        "[tools.shop.methods.shop_get_item]\nrate_limit = 2\n\
         [tools.shop.methods.shop_search]\nbreaker = { failures = 2, recovery_s = 600 }\n\
         [tools.shop.methods.shop_create_item]\ndangerous = true\n\
         [tools.shop.methods.shop_echo_auth]\ncost_per_use = 0.3\n\
         [budgets]\nper_run = 0.5\n\
         [approval]\nrequire_for = [\"dangerous\"]\n",
    );
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let plugins = empty.to_str().unwrap();
    let code = "for i in range(3):\n    shop_get_item(i)";
    let out = sandwit(&dir, &policy, &["run", "--plugins", plugins, "-c", code]);
    let shown = text(&out);
    assert!(
        shown.contains("rate limit exceeded: at most 2 calls a minute"),
        "{shown}"
    );
    // A dangerous method needs an approval the CLI cannot give: refused
    // without a request.
    let before = app.requests().len();
    let code = "shop_create_item('x', 1.0)";
    let out = sandwit(&dir, &policy, &["run", "--plugins", plugins, "-c", code]);
    assert!(text(&out).contains("approval"), "{}", text(&out));
    assert_eq!(app.requests().len(), before);
    // A run's budget pays for one call of 0.3, not two.
    let code = "shop_echo_auth()\nshop_echo_auth()";
    let out = sandwit(&dir, &policy, &["run", "--plugins", plugins, "-c", code]);
    assert!(text(&out).contains("budget"), "{}", text(&out));
    assert_eq!(
        app.requests().len(),
        before + 1,
        "the refused call made no request"
    );

    // The document was fetched once: with the server gone it is read from
    // the cache, and the calls fail at once, then the breaker opens.
    app.stop();
    let errors = errors_of(&dir, &policy, plugins, "shop_search(['x'])", 3);
    assert!(errors[0].contains("refused the connection"), "{errors:?}");
    assert!(errors[2].contains("unavailable"), "{errors:?}");
}

#[test]
fn a_cancelled_run_closes_its_request() {
    let dir = tempdir("tools", "cancel");
    let app = App::start(&dir);
    let policy = policy(&app, "");
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let out = sandwit(
        &dir,
        &policy,
        &[
            "--timeout-ms",
            "1500",
            "run",
            "--plugins",
            empty.to_str().unwrap(),
            "-c",
            "shop_slow(20000)",
        ],
    );
    assert!(text(&out).contains("time"), "{}", text(&out));
    // The server saw its client go away.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !app.disconnected.exists() {
        assert!(Instant::now() < deadline, "the request was not closed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A method's parameters are in the order the server declares them, not
/// sorted: a JSON body's `message, content` (GitHub's
/// create-or-update-file-contents has them so) are taken in that order.
#[test]
fn an_operations_body_members_keep_their_declared_order() {
    let dir = tempdir("tools", "openapi-order");
    let app = App::start(&dir);
    let policy = policy(&app, "");
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let plugins = empty.to_str().unwrap();
    let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
    assert!(
        text(&out).contains("def shop_put_file(name, message, content):"),
        "{}",
        text(&out)
    );
    let code = "result = shop_put_file('README.md', 'add a readme', 'hello')";
    let out = sandwit(
        &dir,
        &policy,
        &["run", "--json", "--plugins", plugins, "-c", code],
    );
    let outcome: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(
        outcome["result"],
        json!({"name": "README.md", "message": "add a readme", "content": "hello"}),
        "{outcome}"
    );
}

#[test]
fn serve_lists_and_calls_a_sources_methods_over_http_and_mcp() {
    let dir = tempdir("tools", "serve");
    let app = App::start(&dir);
    let policy = policy(&app, "");
    let server = serve_with(
        ("tools", "serve-server"),
        &[],
        &policy,
        &[],
        &tokens(),
        &[("SHOP_TOKEN", TOKEN)],
    );
    for format in ["sandwit", "openai", "mcp"] {
        let (status, listing) = server.get(&format!("/v1/tools?format={format}"), Some(USER));
        assert_eq!(status, 200, "{listing}");
        assert!(listing.contains("shop_get_item"), "{format}: {listing}");
    }
    let (_, metadata) = server.get("/v1/tools/shop_get_item/metadata", Some(USER));
    assert!(metadata.contains(r#""category":"shop""#), "{metadata}");
    let (_, prompt) = server.get("/v1/prompt?chat_key=c", Some(USER));
    assert!(prompt.contains("def shop_get_item("), "{prompt}");
    let (status, report) = server.post(
        "/v1/plugins/shop/methods/shop_get_item:call",
        USER,
        json!({"chat_key": "c", "args": {"item_id": 4}}),
    );
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["result"]["value"]["name"], "item 4", "{report}");

    let runtime = crate::mcp::runtime();
    runtime.block_on(async {
        let client = crate::mcp::http_client(&server.base, USER).await;
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "shop_search"), "{tools:?}");
        let result = crate::mcp::call(&client, "shop_search", json!({"terms": ["m"]})).await;
        assert_eq!(result["isError"], false, "{result}");
        assert!(result.to_string().contains("terms"), "{result}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn hostile_documents_are_refused_with_a_report() {
    let dir = tempdir("tools", "hostile");
    let source = |file: &str, extra: &str| {
        format!(
            "[tools.bad]\nopenapi = \"{file}\"\nbase_url = \"http://127.0.0.1:9\"\n\
             operations = [\"*\"]\n{extra}"
        )
    };
    let write = |name: &str, document: &Value| {
        let mut f = std::fs::File::create(dir.join(name)).unwrap();
        f.write_all(document.to_string().as_bytes()).unwrap();
    };
    let paths = |schema: Value| {
        json!({"openapi": "3.1.0", "paths": {"/x": {"post": {
            "operationId": "x",
            "requestBody": {"content": {"application/json": {"schema": schema}}},
        }}}})
    };
    // 10 MB, over the 4 MiB default.
    let big = json!({"openapi": "3.1.0", "paths": {}, "x": "y".repeat(10 << 20)});
    write("big.json", &big);
    // Each level refers to the next twice: 2^40 nodes expanded.
    let mut schemas = serde_json::Map::new();
    for i in 0..40 {
        let next = format!("#/components/schemas/F{}", i + 1);
        schemas.insert(
            format!("F{i}"),
            json!({"type": "array", "prefixItems": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    schemas.insert("F40".into(), json!({"type": "integer"}));
    let mut fan = paths(json!({"$ref": "#/components/schemas/F0"}));
    fan["components"] = json!({"schemas": schemas});
    write("fan.json", &fan);
    // A cycle through a chain of references: cut where it recurs, and the
    // method offered.
    let mut chain = serde_json::Map::new();
    for i in 0..20 {
        chain.insert(
            format!("C{i}"),
            json!({"$ref": format!("#/components/schemas/C{}", i + 1)}),
        );
    }
    chain.insert(
        "C20".into(),
        json!({"type": "object", "properties": {"self": {"$ref": "#/components/schemas/C0"}}}),
    );
    let mut cyclic = paths(json!({"$ref": "#/components/schemas/C0"}));
    cyclic["components"] = json!({"schemas": chain});
    write("cyclic.json", &cyclic);
    std::fs::write(dir.join("deep.json"), "[".repeat(100_000)).unwrap();

    let wrong_pin = format!("sha256 = \"{}\"", "0".repeat(64));
    for (file, extra, needle) in [
        ("big.json", "", "more than the limit of 4194304 bytes"),
        ("fan.json", "", "expand to more than"),
        ("deep.json", "", "not JSON"),
        ("cyclic.json", wrong_pin.as_str(), "not the 000"),
    ] {
        let start = Instant::now();
        let out = sandwit(
            &dir,
            &source(file, extra),
            &["prompt", "--plugins", dir.to_str().unwrap()],
        );
        let shown = text(&out);
        assert!(!out.status.success(), "{file}: {shown}");
        assert!(
            shown.contains("tool source `bad`") && shown.contains(needle),
            "{file}: {shown}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{file} took {:?}",
            start.elapsed()
        );
    }
    // A control for a method the source does not offer would control
    // nothing: refused.
    let out = sandwit(
        &dir,
        &source(
            "cyclic.json",
            "[tools.bad.methods.create_x]\ndangerous = true",
        ),
        &["prompt", "--plugins", dir.to_str().unwrap()],
    );
    assert!(
        text(&out).contains("names no method it offers"),
        "{}",
        text(&out)
    );
    let out = sandwit(
        &dir,
        &source("cyclic.json", ""),
        &["prompt", "--plugins", dir.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("def x(self=None)"), "{}", text(&out));
}

// ---- MCP servers ----------------------------------------------------------

/// The token file of a server the tests call as a user (and read the
/// metrics of as an admin).
fn tokens() -> String {
    format!(
        "ops admin {}\napp user {}\n",
        crate::serve::digest(ADMIN),
        crate::serve::digest(USER)
    )
}

/// The Python of `.venv-tools`.
fn tools_python() -> PathBuf {
    let python = std::env::var_os("SANDWIT_TOOLS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-tools/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: `source scripts/env.sh && tools_venv` makes it",
        python.display()
    );
    python
}

/// A script of tests/cli/tools/.
fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/cli/tools")
        .join(name)
        .display()
        .to_string()
}

/// The policy of an MCP source `docs` given by `how` (`mcp = ...` or
/// `command = [...]`).
fn mcp_policy(how: &str, extra: &str) -> String {
    format!("[tools.docs]\n{how}\nkinds = {{ image = \"multimodal-agent\" }}\n{extra}")
}

fn stdio_source(script_name: &str, args: &[&str]) -> String {
    let mut argv = vec![tools_python().display().to_string(), script(script_name)];
    argv.extend(args.iter().map(|a| a.to_string()));
    format!("command = {argv:?}")
}

#[test]
fn an_mcp_servers_tools_become_methods_over_stdio_and_http() {
    let dir = tempdir("tools", "mcp");
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let plugins = empty.to_str().unwrap();
    let server = Loopback::start(
        "mcp_server.py",
        &["http"],
        &[("TOOLS_TOKEN", TOKEN.as_ref())],
    );
    let http = format!(
        "mcp = \"{}\"\nauth = {{ type = \"bearer\", token = {{ env = \"SHOP_TOKEN\" }} }}",
        server.base
    );
    let code = "r = [add(2, 3), echo('hi'), my_tool_v2()]\n\
                try:\n    fail()\nexcept PluginError as e:\n    r.append(str(e))\n\
                result = r";
    for how in [stdio_source("mcp_server.py", &["stdio"]), http] {
        let policy = mcp_policy(&how, "");
        let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
        let prompt = text(&out);
        assert!(out.status.success(), "{how}: {prompt}");
        assert!(prompt.contains("def my_tool_v2():"), "{prompt}");
        assert!(
            prompt.contains("def image():  # multimodal agent"),
            "{prompt}"
        );
        let out = sandwit(&dir, &policy, &["tools", "inspect", "--source", "docs"]);
        assert!(text(&out).contains("add(a, b)  -> tool"), "{}", text(&out));

        let out = sandwit(
            &dir,
            &policy,
            &["run", "--json", "--plugins", plugins, "-c", code],
        );
        let outcome: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{how}: {}", text(&out)));
        assert_eq!(outcome["status"], "ok", "{how}: {outcome}");
        assert_eq!(outcome["result"][0], json!({"result": 5}), "{outcome}");
        assert_eq!(outcome["result"][1], "hi");
        assert_eq!(outcome["result"][2], "v2");
        assert!(
            outcome["result"][3]
                .as_str()
                .unwrap()
                .contains("tool `fail`: it failed"),
            "{outcome}"
        );
        // An image tool mapped to a multimodal agent hands off its image.
        let out = sandwit(
            &dir,
            &policy,
            &["run", "--json", "--plugins", plugins, "-c", "image()"],
        );
        let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            outcome["handoff"]["result"]["parts"][0]["mime_type"], "image/png",
            "{outcome}"
        );
    }

    // Without the token the HTTP server refuses the session, and the source
    // is named.
    let policy = mcp_policy(&format!("mcp = \"{}\"", server.base), "");
    let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
    assert!(!out.status.success());
    assert!(text(&out).contains("tool source `docs`"), "{}", text(&out));
}

/// `divide(numerator, denominator)` on an MCP server is offered so, and
/// `divide(10, 2)` is 5: the parameters are the `inputSchema`'s
/// properties in their order, not sorted (which made it 0.2).
#[test]
fn an_mcp_tools_parameters_keep_their_declared_order() {
    let dir = tempdir("tools", "mcp-order");
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let plugins = empty.to_str().unwrap();
    let policy = mcp_policy(&stdio_source("mcp_server.py", &["stdio"]), "");
    let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
    assert!(
        text(&out).contains("def divide(numerator, denominator):"),
        "{}",
        text(&out)
    );
    let out = sandwit(
        &dir,
        &policy,
        &[
            "run",
            "--json",
            "--plugins",
            plugins,
            "-c",
            "print(divide(10, 2))",
        ],
    );
    let outcome: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(outcome["stdout"], "5.0\n", "{outcome}");
}

/// A tool's description cannot close its docstring in the listing (and add
/// a method of another plugin), nor reorder or hide text with bidi controls
/// and zero-width characters; a tool named in fullwidth letters is skipped,
/// saying why.
#[test]
fn deceptive_mcp_tools_are_shown_as_text_or_skipped_with_the_reason() {
    let dir = tempdir("tools", "mcp-deceptive");
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let plugins = empty.to_str().unwrap();
    let policy = mcp_policy(&stdio_source("hostile_mcp.py", &["deceptive"]), "");
    let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
    let prompt = text(&out);
    assert!(out.status.success(), "{prompt}");
    assert!(prompt.contains("def lookup():"), "{prompt}");
    assert_eq!(
        sandwit_test_artifacts::unescaped_triple_quotes(&prompt),
        2,
        "only `lookup`'s own docstring quotes: {prompt}"
    );
    assert!(
        prompt.contains("    def transfer_funds(to, amount):") && prompt.contains(r#"\"\"\"Sends"#),
        "the fake method is text of the docstring: {prompt}"
    );
    for hidden in ['\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}', '\u{200b}'] {
        assert!(!prompt.contains(hidden), "{hidden:?} in {prompt}");
    }
    assert!(
        prompt.contains(r"Reversed: \u202eevil\u202c, isolated: \u2066x\u2069, hidden:\u200b."),
        "{prompt}"
    );

    let out = sandwit(&dir, &policy, &["tools", "inspect", "--source", "docs"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    for hidden in ['\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}', '\u{200b}'] {
        assert!(!shown.contains(hidden), "{hidden:?} in {shown}");
    }
    assert!(
        shown.contains(
            "skipped ｄｉｖｉｄｅ: its name `ｄｉｖｉｄｅ` is written in fullwidth characters, \
             which Python reads as `divide`"
        ),
        "{shown}"
    );
}

/// A run that ends while its call waits cancels the call on the server
/// (`notifications/cancelled`): shown in a server, whose session outlives
/// the run.
#[test]
fn a_cancelled_call_is_cancelled_on_the_mcp_server() {
    let dir = tempdir("tools", "mcp-cancel");
    let cancelled = dir.join("cancelled");
    let policy = mcp_policy(
        &stdio_source("mcp_server.py", &["stdio"]),
        &format!(
            "env = {{ TOOLS_CANCEL_FILE = \"{}\" }}\n",
            cancelled.display()
        ),
    );
    let serve = serve_with(
        ("tools", "mcp-cancel-server"),
        &[],
        &policy,
        &[],
        &tokens(),
        &[],
    );
    let (status, outcome) = serve.post(
        "/v1/runs",
        USER,
        json!({"code": "slow(20000)", "chat_key": "c", "limits": {"time_ms": 1500}}),
    );
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["limit"]["kind"], "time", "{outcome}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cancelled.exists() {
        assert!(
            Instant::now() < deadline,
            "the server never saw the call cancelled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serve_follows_an_mcp_servers_tool_list_and_fails_fast_when_it_is_down() {
    let server = Loopback::start("mcp_server.py", &["http"], &[]);
    let policy = mcp_policy(
        &format!("mcp = \"{}\"", server.base),
        "[tools.docs.methods.echo]\nbreaker = { failures = 2, recovery_s = 600 }\n",
    );
    let serve = serve_with(
        ("tools", "mcp-serve-server"),
        &[],
        &policy,
        &[],
        &tokens(),
        &[],
    );
    let call = |method: &str, args: Value| {
        serve.post(
            &format!("/v1/plugins/docs/methods/{method}:call"),
            USER,
            json!({"chat_key": "c", "args": args}),
        )
    };
    let (status, report) = call("grow", json!({}));
    assert_eq!(status, 200, "{report}");
    // The server announced `grown`: the service lists it again and offers it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, schema) = serve.get("/v1/tools/grown/schema", Some(USER));
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "`grown` never listed: {schema}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, report) = call("grown", json!({"x": 21}));
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["result"]["value"], json!({"result": 42}), "{report}");

    // The server goes away: calls fail at once, then the breaker opens.
    let port: u16 = server
        .base
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    drop(server);
    let mut errors = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let (_, report) = call("echo", json!({"text": "x"}));
        assert!(start.elapsed() < Duration::from_secs(5), "{report}");
        errors.push(report["error"].to_string());
    }
    assert!(errors[0].contains("MCP server `docs`"), "{errors:?}");
    assert!(errors[2].contains("unavailable"), "{errors:?}");
    // Back on its address, it is reached again: a method the breaker does
    // not hold answers.
    let port = port.to_string();
    let _back = Loopback::start("mcp_server.py", &["http"], &[("TOOLS_PORT", port.as_ref())]);
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (status, report) = call("add", json!({"a": 1, "b": 2}));
        if status == 200 && report["ok"] == true {
            assert_eq!(report["result"]["value"], json!({"result": 3}), "{report}");
            break;
        }
        assert!(Instant::now() < deadline, "never reached again: {report}");
        std::thread::sleep(Duration::from_millis(250));
    }
    // The service's metrics name the source.
    let (_, metrics) = serve.get("/metrics", Some(ADMIN));
    assert!(metrics.contains("plugin=\"docs\""), "{metrics}");
}

#[test]
fn hostile_mcp_servers_are_contained() {
    let dir = tempdir("tools", "mcp-hostile");
    let empty = dir.join("no-plugins");
    std::fs::create_dir_all(&empty).unwrap();
    let plugins = empty.to_str().unwrap();
    let timeout = "list_timeout_ms = 2000\n";
    for (mode, needle) in [
        ("slow", "did not list its tools within"),
        ("hugeline", "did not list its tools within"),
        ("malformed", "tool source `docs`"),
    ] {
        let start = Instant::now();
        let policy = mcp_policy(&stdio_source("hostile_mcp.py", &[mode]), timeout);
        let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
        let shown = text(&out);
        assert!(!out.status.success(), "{mode}: {shown}");
        assert!(shown.contains(needle), "{mode}: {shown}");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{mode}: {:?}",
            start.elapsed()
        );
    }
    // A giant listing is cut, and what is offered is bounded.
    let policy = mcp_policy(&stdio_source("hostile_mcp.py", &["giant"]), timeout);
    let out = sandwit(&dir, &policy, &["prompt", "--plugins", plugins]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert_eq!(shown.matches("\ndef ").count(), 256, "at most 256 methods");
    // A server that dies mid-call fails that call, and the next at once.
    let policy = mcp_policy(&stdio_source("hostile_mcp.py", &["die"]), timeout);
    let errors = errors_of(&dir, &policy, plugins, "ping()", 2);
    assert!(errors[1].contains("is down"), "{errors:?}");
}
