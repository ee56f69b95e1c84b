//! `sandwit serve`: the real server on a loopback port, over HTTP.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{artifacts, cache_dir, pin_line, tempdir};

pub(crate) const ADMIN: &str = "admin-token-for-tests";
pub(crate) const USER: &str = "user-token-for-tests";

/// A running `sandwit serve`, killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) agent: ureq::Agent,
    /// The folder it serves plugins from.
    pub(crate) plugin_dir: PathBuf,
    /// What it wrote on stderr so far (also passed on to the test's).
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn digest(token: &str) -> String {
    sandwit_service::token_digest_hex(token)
}

/// Starts a server offering `plugins`, with `policy` and `extra` arguments,
/// and waits for the address it prints.
pub(crate) fn serve(name: &str, plugins: &[&str], policy: &str, extra: &[&str]) -> Server {
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    serve_with(("serve", name), plugins, policy, extra, &tokens, &[])
}

/// Starts `sandwit serve` in a new folder `dir` (a kind and a name)
/// offering `plugins` under `policy`, with `extra` flags, the token file
/// `tokens` and the environment `env` added.
pub(crate) fn serve_with(
    dir: (&str, &str),
    plugins: &[&str],
    policy: &str,
    extra: &[&str],
    tokens: &str,
    env: &[(&str, &str)],
) -> Server {
    serve_on(&cache_dir(), dir, plugins, policy, extra, tokens, env)
}

/// As [`serve_with`], on the cache `cache`.
pub(crate) fn serve_on(
    cache: &Path,
    dir: (&str, &str),
    plugins: &[&str],
    policy: &str,
    extra: &[&str],
    tokens: &str,
    env: &[(&str, &str)],
) -> Server {
    let dir = tempdir(dir.0, dir.1);
    let plugin_dir = dir.join("plugins");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    for plugin in plugins {
        let path = Path::new(plugin);
        std::fs::copy(path, plugin_dir.join(path.file_name().unwrap())).unwrap();
    }
    let token_file = dir.join("tokens");
    std::fs::write(&token_file, tokens).unwrap();
    let policy_file = dir.join("policy.toml");
    std::fs::write(&policy_file, policy).unwrap();
    // A store of its own, unless `extra` or the policy names one.
    let store = if extra.contains(&"--store") || policy.starts_with("[store]\nurl =") {
        vec![]
    } else {
        vec!["--store".into(), dir.join("store.db").into_os_string()]
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        // The scientific interpreter only where a test asks for it:
        // scripts/env.sh exports $SANDWIT_SCIENTIFIC, which would load it
        // into every server.
        .env_remove("SANDWIT_SCIENTIFIC")
        .envs(env.iter().copied())
        .arg("--cache-dir")
        .arg(cache)
        .args(store)
        .arg("--policy")
        .arg(&policy_file)
        .args(["serve", "--addr", "127.0.0.1:0", "--plugins"])
        .arg(&plugin_dir)
        .arg("--token-file")
        .arg(&token_file)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    {
        let (pipe, stderr) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("{line}");
                stderr.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
    }
    let base = crate::common::listening_base(&mut child);
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    Server {
        child,
        base,
        agent,
        plugin_dir,
        stderr,
    }
}

impl Server {
    pub(crate) fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut request = self.agent.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.call().unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    }

    fn get_json(&self, path: &str, token: &str) -> Value {
        let (status, body) = self.get(path, Some(token));
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    pub(crate) fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        let mut response = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {token}"))
            .send_json(body)
            .unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A run whose events stream in: the open response's reader.
    fn stream(&self, code: &str) -> BufReader<impl Read> {
        self.stream_request(json!({"code": code, "chat_key": "c", "user_id": "u"}))
    }

    /// [`Server::stream`] of the run request `body`.
    fn stream_request(&self, body: Value) -> BufReader<impl Read> {
        let response = self
            .agent
            .post(format!("{}/v1/runs", self.base))
            .header("Authorization", format!("Bearer {USER}"))
            .header("Accept", "text/event-stream")
            .send_json(body)
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        BufReader::new(response.into_body().into_reader())
    }

    /// Sends SIGTERM and waits (bounded) until `/readyz` says it is
    /// shutting down.
    fn terminate(&self) {
        // SAFETY: kill(2) on the server's pid, which this test started.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) },
            0
        );
        for _ in 0..600 {
            // Not a 503 `warming-up`: the server may still be compiling
            // the interpreter's code for reuse.
            let (status, body) = self.get("/readyz", None);
            if status == 503 && body.contains("shutting-down") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("/readyz never answered 503 `shutting-down` after SIGTERM");
    }

    /// Waits (bounded) until `/readyz` answers 200: a server on a cache
    /// without the interpreter's code for reuse answers 503 `warming-up`
    /// while it compiles it (once per cache, up to a minute or so on a
    /// busy machine). Anything but those two answers fails the test.
    /// Returns the answer's body.
    pub(crate) fn await_ready(&self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let (status, body) = self.get("/readyz", None);
            if status == 200 {
                return serde_json::from_str(&body).unwrap();
            }
            assert_eq!(status, 503, "{body}");
            assert!(body.contains("warming-up"), "{body}");
            assert!(
                Instant::now() < deadline,
                "/readyz still warming up: {body}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits (bounded) for the process to end.
    pub(crate) fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the server wrote on stderr, once its pipe closed (after
    /// [`Server::wait`]).
    fn stderr(&self) -> String {
        for _ in 0..200 {
            let text = self.stderr.lock().unwrap().clone();
            if text.contains("sandwit: stopped") {
                return text;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stderr.lock().unwrap().clone()
    }

    /// The value of the metric line starting `prefix`, if there is one.
    pub(crate) fn metric(&self, prefix: &str) -> Option<f64> {
        let (_, text) = self.get("/metrics", Some(ADMIN));
        text.lines()
            .find_map(|l| l.strip_prefix(prefix)?.trim().parse().ok())
    }

    /// Waits (bounded) until the metric `prefix` reads `value`.
    pub(crate) fn await_metric(&self, prefix: &str, value: f64) {
        for _ in 0..200 {
            if self.metric(prefix) == Some(value) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (_, text) = self.get("/metrics", Some(ADMIN));
        panic!("{prefix} never read {value}:\n{text}");
    }
}

/// Reads server-sent events until one named `name`; returns its data.
pub(crate) fn next_event(reader: &mut impl BufRead, name: &str) -> Value {
    let mut current = String::new();
    for _ in 0..10_000 {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the stream ended before `{name}`"
        );
        let line = line.trim_end();
        if let Some(event) = line.strip_prefix("event:") {
            current = event.trim().to_string();
        } else if let Some(data) = line.strip_prefix("data:")
            && current == name
        {
            return serde_json::from_str(data.trim()).unwrap();
        }
    }
    panic!("no `{name}` event");
}

/// Calls `calculate_sum` through the interpreter's import itself, around
/// the method functions, with empty arguments; prints the error's kind
/// (the answer of a failed call is its `(kind, message)`).
const RAW_CALL: &str = "import _sandwit_methods as methods\n\
    import marshal\n\
    print(marshal.loads(methods.call('calculate_sum', b''))[0])\n";

const CALC_POLICY: &str = "[plugins.calc.methods.calculate_sum]\nrate_limit = 600\ncost_per_use = 0.5\ndangerous = true\n";

#[test]
fn serve_runs_calls_and_lists_tools_for_a_token() {
    let server = serve(
        "endpoints",
        &[artifacts::CALC, artifacts::NOTES],
        CALC_POLICY,
        &[],
    );
    assert_eq!(server.get("/healthz", None).0, 200);
    assert_eq!(server.await_ready()["status"], "ready");
    // The OpenAPI document, without a token as /healthz.
    let (status, doc) = server.get("/openapi.json", None);
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{doc}");
    assert!(doc["paths"]["/v1/runs"]["post"].is_object(), "{doc}");
    // A run's result is any JSON value, not only an object.
    let result = &doc["components"]["schemas"]["Outcome"]["properties"]["result"];
    assert!(
        result.is_object() && !result.to_string().contains("\"object\""),
        "{result}"
    );

    // No token, a wrong one: 401 in the JSON error shape, the token not echoed.
    let (status, body) = server.get("/v1/tools", None);
    assert_eq!(status, 401, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "unauthorized"
    );
    let (status, body) = server.get("/v1/tools", Some("not-a-token"));
    assert_eq!(status, 401);
    assert!(!body.contains("not-a-token"), "{body}");

    // A run: the JSON of `sandwit run --json`.
    let (status, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(calculate_sum(1, 2))", "chat_key": "c", "user_id": "u"}),
    );
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["stdout"], "3\n");
    assert_eq!(outcome["events"][0]["method"], "calculate_sum");
    assert_eq!(outcome["cost"], 0.5);
    // Only the plugins asked for: calc's methods are not functions then.
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "calculate_sum(1, 2)", "chat_key": "c", "plugins": ["notes"]}),
    );
    assert_eq!(outcome["status"], "error");
    assert_eq!(outcome["error"]["type"], "NameError", "{outcome}");
    // Limits may only be lowered; a bad body is named.
    let (status, err) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "1", "chat_key": "c", "limits": {"max_calls": 1_000_000}}),
    );
    assert_eq!(status, 400);
    assert_eq!(err["error"], "limit-too-high");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("limits.max_calls"),
        "{err}"
    );
    let (status, err) = server.post("/v1/runs", USER, json!({"chat_key": "c"}));
    assert_eq!(status, 422);
    assert_eq!(err["error"], "bad-json");
    assert!(err["message"].as_str().unwrap().contains("code"), "{err}");

    // A method call: the typed result.
    let (status, call) = server.post(
        "/v1/plugins/calc/methods/calculate_sum:call",
        USER,
        json!({"args": {"num1": 20, "num2": 22}, "chat_key": "c"}),
    );
    assert_eq!(status, 200, "{call}");
    assert_eq!(call["ok"], true);
    assert_eq!(call["result"], json!({"kind": "tool", "value": 42}));
    let (_, call) = server.post(
        "/v1/plugins/calc/methods/calculate_sum:call",
        USER,
        json!({"args": {"num1": 20}, "chat_key": "c"}),
    );
    assert_eq!(call["ok"], false);
    assert!(call["error"].to_string().contains("num2"), "{call}");
    let (status, err) = server.post(
        "/v1/plugins/calc/methods/nope:call",
        USER,
        json!({"chat_key": "c"}),
    );
    assert_eq!(
        (status, err["error"].as_str()),
        (404, Some("unknown-method"))
    );

    // Discovery.
    let tools = server.get_json("/v1/tools", USER);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"calculate_sum") && names.contains(&"remember"),
        "{tools}"
    );
    let calc = server.get_json("/v1/tools?category=calc", USER);
    assert_eq!(calc["tools"].as_array().unwrap().len(), 2, "{calc}");
    assert!(
        calc["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["category"] == "calc")
    );
    let none = server.get_json("/v1/tools?kind=agent", USER);
    assert_eq!(none["tools"], json!([]));
    let openai = server.get_json("/v1/tools?format=openai&category=calc", USER);
    let sum = openai
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "calculate_sum")
        .unwrap();
    assert_eq!(sum["type"], "function");
    assert_eq!(
        sum["function"]["parameters"]["required"],
        json!(["num1", "num2"])
    );
    let mcp = server.get_json("/v1/tools?format=mcp&category=calc", USER);
    let sum = mcp["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "calculate_sum")
        .unwrap();
    assert_eq!(sum["inputSchema"]["type"], "object");
    let schema = server.get_json("/v1/tools/calculate_sum/schema", USER);
    assert_eq!(schema["parameters"][0]["name"], "num1");
    let meta = server.get_json("/v1/tools/calculate_sum/metadata", USER);
    assert_eq!(meta["category"], "calc");
    assert_eq!(meta["rate_limit"], 600);
    assert_eq!(meta["cost_per_use"], 0.5);
    assert_eq!(meta["dangerous"], true);
    assert_eq!(meta["requires_auth"], false);
    let (status, _) = server.get("/v1/tools/nope/metadata", Some(USER));
    assert_eq!(status, 404);
    let (status, prompt) = server.get("/v1/prompt?chat_key=c", Some(USER));
    assert_eq!(status, 200);
    assert!(prompt.contains("def calculate_sum("), "{prompt}");

    // Metrics: runs by status, call latencies, the controls' counters.
    let (status, metrics) = server.get("/metrics", Some(ADMIN));
    assert_eq!(status, 200);
    assert!(
        metrics.contains("sandwit_runs_total{status=\"ok\"} 1"),
        "{metrics}"
    );
    // No scientific interpreter loaded, no gauge of it.
    assert!(
        !metrics.contains("sandwit_scientific_interpreters_ready"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sandwit_runs_total{status=\"error\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "sandwit_call_duration_seconds_count{plugin=\"calc\",method=\"calculate_sum\"} 3"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("sandwit_controls_cost_total{plugin=\"calc\",method=\"calculate_sum\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("sandwit_runs_max_running "), "{metrics}");
    assert!(metrics.contains("sandwit_interpreters_ready "), "{metrics}");
    assert!(
        metrics.contains("sandwit_interpreters_reusable "),
        "{metrics}"
    );
    assert_eq!(server.get("/metrics", None).0, 401);
    // Inputs in as variables, the last expression's value out.
    let (status, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "{'sum': calculate_sum(a, b), 'raw': raw}", "chat_key": "c",
               "inputs": {"a": 40, "b": 2, "raw": null}}),
    );
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(
        outcome["result"],
        json!({"sum": 42, "raw": null}),
        "{outcome}"
    );
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(1)", "chat_key": "c", "inputs": {"not a name": 1}}),
    );
    assert_eq!(outcome["error"]["type"], "InvalidInput", "{outcome}");
}

#[test]
fn serve_streams_a_run_and_cancels_it_when_the_client_goes() {
    let server = serve("stream", &[artifacts::CALC], "", &[]);
    let mut events = server.stream("print('a', flush=True)\nprint(calculate_sum(1, 2))");
    assert_eq!(next_event(&mut events, "stdout")["text"], "a");
    let call = next_event(&mut events, "event");
    assert_eq!(
        (call["type"].as_str(), call["method"].as_str()),
        (Some("call"), Some("calculate_sum"))
    );
    let outcome = next_event(&mut events, "outcome");
    assert_eq!(outcome["status"], "ok");
    assert_eq!(outcome["stdout"], "a\n3\n");

    // A call of one of the client's functions is a `call` event to answer
    // (then the paused outcome).
    let functions = json!([{"name": "pick", "description": "Lets the user pick."}]);
    let body =
        json!({"code": "pick('a', 'b', default=1)", "chat_key": "c", "functions": functions});
    let mut events = server.stream_request(body);
    let call = next_event(&mut events, "call");
    assert_eq!(
        (&call["name"], &call["args"], &call["kwargs"]),
        (&json!("pick"), &json!(["a", "b"]), &json!({"default": 1}))
    );
    let outcome = next_event(&mut events, "outcome");
    assert_eq!(outcome["status"], "paused", "{outcome}");
    assert_eq!(outcome["paused"]["token"], call["call_id"]);
    // Answered `null`: the call returns None.
    let token = call["call_id"].as_str().unwrap();
    let body = json!({"chat_key": "c", "result": null});
    let (status, outcome) = server.post(&format!("/v1/runs/{token}:resume"), USER, body);
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["result"], Value::Null, "{outcome}");

    // A call the client will not answer: discarded, it names the call and
    // spends the token; a second discard, and a resume, find nothing.
    let body = json!({"code": "pick('x')", "chat_key": "c", "functions": functions});
    let (_, outcome) = server.post("/v1/runs", USER, body);
    let token = outcome["paused"]["token"].as_str().unwrap().to_string();
    let discard = format!("/v1/runs/{token}:discard");
    let (status, other) = server.post(&discard, USER, json!({"chat_key": "d"}));
    assert_eq!(
        (status, &other["error"]),
        (404, &json!("no-paused-run")),
        "{other}"
    );
    let (status, discarded) = server.post(&discard, USER, json!({"chat_key": "c"}));
    assert_eq!(status, 200, "{discarded}");
    assert_eq!(
        (
            &discarded["discarded"]["method"],
            &discarded["discarded"]["args"]["args"]
        ),
        (&json!("pick"), &json!(["x"]))
    );
    let (status, _) = server.post(&discard, USER, json!({"chat_key": "c"}));
    assert_eq!(status, 404);
    let body = json!({"chat_key": "c", "result": 1});
    let (_, spent) = server.post(&format!("/v1/runs/{token}:resume"), USER, body);
    assert_eq!(spent["error"]["type"], "ResumeRefused", "{spent}");
    let (status, _) = server.post(&format!("/v1/runs/{token}:pause"), USER, json!({}));
    assert_eq!(status, 404);

    // A run that would spin to its deadline: the client leaves once it
    // started, and the run ends cancelled.
    let mut events = server.stream("print('started', flush=True)\nwhile True:\n    pass\n");
    assert_eq!(next_event(&mut events, "stdout")["text"], "started");
    drop(events);
    server.await_metric("sandwit_runs_total{status=\"cancelled\"}", 1.0);
    server.await_metric("sandwit_runs_running", 0.0);
}

#[test]
fn serve_refuses_runs_past_its_queue_with_503() {
    let server = serve(
        "queue",
        &[artifacts::CALC],
        "",
        &["--max-runs", "1", "--queue", "0"],
    );
    let mut events = server.stream("print('started', flush=True)\nwhile True:\n    pass\n");
    assert_eq!(next_event(&mut events, "stdout")["text"], "started");
    let mut response = server
        .agent
        .post(format!("{}/v1/runs", server.base))
        .header("Authorization", format!("Bearer {USER}"))
        .send_json(json!({"code": "1", "chat_key": "c"}))
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(response.headers().get("retry-after").unwrap(), "1");
    let err: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(err["error"], "queue-full");
    drop(events);
    server.await_metric("sandwit_runs_running", 0.0);
    // The slot is free again.
    let (status, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(1)", "chat_key": "c"}),
    );
    assert_eq!(
        (status, outcome["status"].as_str()),
        (200, Some("ok")),
        "{outcome}"
    );
}

#[test]
fn serve_disables_a_plugin_from_the_next_run_on() {
    let policy = format!(
        "[plugins.notes]\ngrant = [\"store\"]\n{}",
        pin_line(artifacts::NOTES)
    );
    let server = serve(
        "disable",
        &[artifacts::CALC, artifacts::NOTES],
        &policy,
        &[],
    );
    // A user may not switch plugins.
    let (status, err) = server.post("/v1/plugins/calc:disable", USER, json!({}));
    assert_eq!((status, err["error"].as_str()), (403, Some("admin-only")));

    // A run that waits for a note, then calls calc: started before calc is
    // disabled, it keeps its methods.
    let code = format!(
        "print('started', flush=True)\nwhile not recall('go'):\n    pass\nprint(calculate_sum(2, 3))\n{RAW_CALL}"
    );
    let mut running = server.stream(&code);
    assert_eq!(next_event(&mut running, "stdout")["text"], "started");
    let (status, body) = server.post("/v1/plugins/calc:disable", ADMIN, json!({}));
    assert_eq!(status, 200, "{body}");
    let (_, note) = server.post(
        "/v1/plugins/notes/methods/remember:call",
        USER,
        json!({"args": {"note": "go"}, "chat_key": "c", "user_id": "u"}),
    );
    assert_eq!(note["ok"], true, "{note}");
    let outcome = next_event(&mut running, "outcome");
    assert_eq!(outcome["status"], "ok", "{outcome}");
    // The raw import reached calc (whose decoder refused the empty
    // arguments): the method was still the run's.
    assert!(
        outcome["stdout"]
            .as_str()
            .unwrap()
            .ends_with("5\ninvalid_arguments\n"),
        "{outcome}"
    );

    // From the next run on, calc is gone: from listings, runs and calls.
    let tools = server.get_json("/v1/tools", USER);
    assert!(!tools.to_string().contains("calculate_sum"), "{tools}");
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "calculate_sum(1, 2)", "chat_key": "c"}),
    );
    assert_eq!(outcome["error"]["type"], "NameError", "{outcome}");
    // Not through the interpreter's raw import either (Nekro Agent's #279:
    // a disabled plugin's methods stayed callable that way).
    let (_, outcome) = server.post("/v1/runs", USER, json!({"code": RAW_CALL, "chat_key": "c"}));
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["stdout"], "unknown_method\n", "{outcome}");
    for listing in [
        "/v1/tools?format=openai",
        "/v1/tools?format=mcp",
        "/v1/tools?chat_key=c",
    ] {
        let tools = server.get_json(listing, USER);
        assert!(!tools.to_string().contains("calculate_sum"), "{tools}");
    }
    let (_, prompt) = server.get("/v1/prompt?chat_key=c", Some(USER));
    assert!(!prompt.contains("calculate_sum"), "{prompt}");
    assert!(prompt.contains("def remember("), "{prompt}");
    let (status, err) = server.post(
        "/v1/plugins/calc/methods/calculate_sum:call",
        USER,
        json!({"args": {"num1": 1, "num2": 2}, "chat_key": "c"}),
    );
    assert_eq!(
        (status, err["error"].as_str()),
        (404, Some("unknown-plugin"))
    );
    let plugins = server.get_json("/v1/plugins", USER);
    let calc = plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "calc")
        .unwrap();
    assert_eq!(calc["enabled"], false);

    // Reloading keeps it disabled; enabling brings it back.
    let (status, body) = server.post("/v1/plugins:reload", ADMIN, json!({}));
    assert_eq!(status, 200, "{body}");
    assert!(
        !server
            .get_json("/v1/tools", USER)
            .to_string()
            .contains("calculate_sum")
    );
    let (status, _) = server.post("/v1/plugins/calc:enable", ADMIN, json!({}));
    assert_eq!(status, 200);
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(calculate_sum(1, 2))", "chat_key": "c"}),
    );
    assert_eq!(outcome["stdout"], "3\n", "{outcome}");
}

/// The answers read from `stream` until the server closes it, split at
/// each status line.
fn answers(mut stream: std::net::TcpStream) -> Vec<String> {
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.split("HTTP/1.1 ")
        .skip(1)
        .map(str::to_ascii_lowercase)
        .collect()
}

#[test]
fn serve_keeps_a_connection_usable_whatever_the_handler_does_with_the_body() {
    use std::io::Write;
    let server = serve("keepalive", &[artifacts::CALC], "", &[]);
    let addr = server.base.trim_start_matches("http://").to_string();
    let head = |token: &str| {
        format!(
            "POST /v1/plugins/calc:disable HTTP/1.1\r\nHost: {addr}\r\n\
             Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
             Content-Length: 2\r\n\r\n"
        )
    };
    let healthz = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");

    // An endpoint that takes no body, whose body arrives after its head
    // (hyper closed such a connection after answering keep-alive, and the
    // client's next request on it was dropped): both requests are answered.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_nodelay(true).unwrap();
    stream.write_all(head(ADMIN).as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    stream.write_all(b"{}").unwrap();
    stream.write_all(healthz.as_bytes()).unwrap();
    let got = answers(stream);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("200 ") && !got[0].contains("connection: close"),
        "{got:?}"
    );
    assert!(got[1].starts_with("200 "), "{got:?}");

    // Refused before its body is read (the body never comes): the answer
    // says the connection closes, so no client sends another request on it.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.write_all(head("not-a-token").as_bytes()).unwrap();
    let got = answers(stream);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("401 ") && got[0].contains("connection: close"),
        "{got:?}"
    );

    // A plain GET keeps its connection.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    let keep = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(keep.as_bytes()).unwrap();
    stream.write_all(healthz.as_bytes()).unwrap();
    let got = answers(stream);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(!got[0].contains("connection: close"), "{got:?}");
}

#[test]
fn serve_keeps_its_plugins_when_a_reload_hits_a_bad_file() {
    let server = serve("reload", &[artifacts::CALC], "", &[]);
    std::fs::write(server.plugin_dir.join("junk.wasm"), b"not a component").unwrap();
    let (status, err) = server.post("/v1/plugins:reload", ADMIN, json!({}));
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"], "reload-failed");
    assert!(
        err["message"].as_str().unwrap().contains("junk.wasm"),
        "{err}"
    );
    // The plugins loaded before are still served.
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(calculate_sum(1, 2))", "chat_key": "c"}),
    );
    assert_eq!(outcome["stdout"], "3\n", "{outcome}");
    let plugins = server.get_json("/v1/plugins", USER);
    assert_eq!(plugins["plugins"].as_array().unwrap().len(), 1, "{plugins}");
    // With the file gone, a reload succeeds.
    std::fs::remove_file(server.plugin_dir.join("junk.wasm")).unwrap();
    let (status, body) = server.post("/v1/plugins:reload", ADMIN, json!({}));
    assert_eq!((status, body.clone()), (200, json!({"plugins": ["calc"]})));
}

#[test]
fn serve_finishes_a_run_in_flight_on_sigterm_and_refuses_new_ones() {
    let policy = format!(
        "[plugins.notes]\ngrant = [\"store\"]\n{}",
        pin_line(artifacts::NOTES)
    );
    // A grace far longer than the run needs once it is told to finish.
    let mut server = serve(
        "sigterm-finish",
        &[artifacts::CALC, artifacts::NOTES],
        &policy,
        &["--grace-ms", "300000"],
    );
    let mut running = server.stream(
        "print('started', flush=True)\nwhile not recall('go'):\n    pass\nprint(calculate_sum(2, 3))\n",
    );
    assert_eq!(next_event(&mut running, "stdout")["text"], "started");
    server.terminate();
    // Meanwhile a new run is refused, and says why.
    let mut response = server
        .agent
        .post(format!("{}/v1/runs", server.base))
        .header("Authorization", format!("Bearer {USER}"))
        .send_json(json!({"code": "1", "chat_key": "c"}))
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(response.headers().get("retry-after").unwrap(), "1");
    let err: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(err["error"], "shutting-down");
    // The run in flight finishes, and its client gets the outcome.
    let (_, note) = server.post(
        "/v1/plugins/notes/methods/remember:call",
        USER,
        json!({"args": {"note": "go"}, "chat_key": "c", "user_id": "u"}),
    );
    assert_eq!(note["ok"], true, "{note}");
    let outcome = next_event(&mut running, "outcome");
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["stdout"], "started\n5\n", "{outcome}");
    drop(running);
    let status = server.wait();
    assert!(status.success(), "{status}");
    let stderr = server.stderr();
    assert!(stderr.contains("1 run(s) in flight"), "{stderr}");
    assert!(!stderr.contains("cancelled run"), "{stderr}");
}

#[test]
fn serve_cancels_a_run_that_outlasts_the_grace_and_names_it() {
    let mut server = serve(
        "sigterm-cancel",
        &[artifacts::CALC],
        "",
        &["--grace-ms", "200"],
    );
    let mut running = server.stream("print('started', flush=True)\nwhile True:\n    pass\n");
    assert_eq!(next_event(&mut running, "stdout")["text"], "started");
    server.terminate();
    let outcome = next_event(&mut running, "outcome");
    assert_eq!(outcome["status"], "cancelled", "{outcome}");
    drop(running);
    let status = server.wait();
    assert!(status.success(), "{status}");
    let stderr = server.stderr();
    assert!(
        stderr.contains("sandwit: cancelled run 1 of `app`"),
        "{stderr}"
    );
}

#[test]
fn serve_bounds_an_exchange_in_time_and_cancels_its_run() {
    let server = serve(
        "request-timeout",
        &[artifacts::CALC],
        "",
        &["--request-timeout-ms", "300"],
    );
    let (status, err) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "while True:\n    pass\n", "chat_key": "c"}),
    );
    assert_eq!(
        (status, err["error"].as_str()),
        (408, Some("request-timeout")),
        "{err}"
    );
    assert!(err["message"].as_str().unwrap().contains("300 ms"), "{err}");
    server.await_metric("sandwit_runs_total{status=\"cancelled\"}", 1.0);
    server.await_metric("sandwit_runs_running", 0.0);
}

#[test]
fn serve_lists_and_runs_what_the_lifecycle_hooks_offer_each_chat() {
    let server = serve(
        "lifecycle",
        &[artifacts::LIFECYCLE, artifacts::CALC],
        "",
        &[],
    );
    // An anonymous chat: whoami is hidden, and the plugin's prompt names
    // the chat.
    let (status, prompt) = server.get("/v1/prompt?chat_key=lobby", Some(USER));
    assert_eq!(status, 200, "{prompt}");
    assert!(
        prompt.contains("[plugin `lifecycle`]\nThis is the chat `lobby`."),
        "{prompt}"
    );
    assert!(prompt.contains("def chat_name("), "{prompt}");
    assert!(prompt.contains("def calculate_sum("), "{prompt}");
    assert!(!prompt.contains("def whoami("), "{prompt}");
    // With a user, whoami is offered.
    let (_, prompt) = server.get("/v1/prompt?chat_key=lobby&user_id=ada", Some(USER));
    assert!(prompt.contains("def whoami("), "{prompt}");
    let names = |path: &str| -> Vec<String> {
        server.get_json(path, USER)["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names("/v1/tools?chat_key=lobby&category=lifecycle"),
        ["chat_name"]
    );
    assert_eq!(
        names("/v1/tools?chat_key=lobby&user_id=ada&category=lifecycle&format=mcp"),
        ["chat_name", "whoami"]
    );
    // Without a chat, every enabled method.
    assert_eq!(
        names("/v1/tools?category=lifecycle"),
        ["chat_name", "whoami"]
    );
    let (status, err) = server.get("/v1/tools?user_id=ada", Some(USER));
    assert_eq!(status, 400, "{err}");
    // Runs and calls see what the chat sees.
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(chat_name())\nwhoami()", "chat_key": "lobby"}),
    );
    assert_eq!(outcome["stdout"], "lobby\n", "{outcome}");
    assert_eq!(outcome["error"]["type"], "NameError", "{outcome}");
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(whoami())", "chat_key": "lobby", "user_id": "ada"}),
    );
    assert_eq!(outcome["stdout"], "ada\n", "{outcome}");
    let (status, err) = server.post(
        "/v1/plugins/lifecycle/methods/whoami:call",
        USER,
        json!({"chat_key": "lobby"}),
    );
    assert_eq!(
        (status, err["error"].as_str()),
        (404, Some("unknown-method")),
        "{err}"
    );
    let (status, call) = server.post(
        "/v1/plugins/lifecycle/methods/whoami:call",
        USER,
        json!({"chat_key": "lobby", "user_id": "ada"}),
    );
    assert_eq!(status, 200, "{call}");
    assert_eq!(call["result"], json!({"kind": "tool", "value": "ada"}));
    // A chat where the plugin's prompt hook traps: its text is lost, its
    // methods stay.
    let (status, prompt) = server.get("/v1/prompt?chat_key=hook-traps", Some(USER));
    assert_eq!(status, 200, "{prompt}");
    assert!(prompt.contains("def calculate_sum("), "{prompt}");
    assert!(prompt.contains("def chat_name("), "{prompt}");
    assert!(!prompt.contains("[plugin `lifecycle`]"), "{prompt}");
    let (status, call) = server.post(
        "/v1/plugins/lifecycle/methods/chat_name:call",
        USER,
        json!({"chat_key": "hook-traps"}),
    );
    assert_eq!(status, 200, "{call}");
    // One where its methods hook never returns: it offers nothing there,
    // the other plugins are served as usual.
    let (status, prompt) = server.get("/v1/prompt?chat_key=hook-spins", Some(USER));
    assert_eq!(status, 200, "{prompt}");
    assert!(prompt.contains("def calculate_sum("), "{prompt}");
    assert!(!prompt.contains("def chat_name("), "{prompt}");
    let (status, err) = server.post(
        "/v1/plugins/lifecycle/methods/chat_name:call",
        USER,
        json!({"chat_key": "hook-spins"}),
    );
    assert_eq!(
        (status, err["error"].as_str()),
        (404, Some("unknown-method")),
        "{err}"
    );
}

/// A run that names a session finds what the session's last run left, in
/// its chat only; the outcome reports the session, and a bad name is an
/// error outcome naming what a name may be.
#[test]
fn serve_keeps_a_chats_session_across_runs() {
    let server = serve("sessions", &[artifacts::CALC], CALC_POLICY, &[]);
    server.await_ready();
    let run = |chat: &str, session: Option<&str>, code: &str| {
        let mut body = json!({"code": code, "chat_key": chat});
        if let Some(session) = session {
            body["session"] = json!(session);
        }
        let (status, outcome) = server.post("/v1/runs", USER, body);
        assert_eq!(status, 200, "{outcome}");
        outcome
    };
    let first = run("c", Some("s"), "import math\nx = calculate_sum(1, 2)");
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(first["session"]["started"], true, "{first}");
    assert_eq!(first["session"]["kept"], true);
    let second = run("c", Some("s"), "math.floor(x * 10)");
    assert_eq!(second["result"], 30, "{second}");
    assert_eq!(second["session"]["runs"], 2);
    assert_eq!(second["session"]["started"], false);
    // Another chat's session of the same name, or no session: fresh.
    let other = run("d", Some("s"), "x");
    assert_eq!(other["error"]["type"], "NameError", "{other}");
    assert_eq!(other["session"]["started"], true);
    let plain = run("c", None, "x");
    assert_eq!(plain["error"]["type"], "NameError", "{plain}");
    assert!(plain.get("session").is_none(), "{plain}");
    let bad = run("c", Some("a b"), "1");
    assert_eq!(bad["error"]["type"], "InvalidSession", "{bad}");

    // /metrics counts the session runs by how they found and left their
    // session, and gauges the live ones.
    let (status, metrics) = server.get("/metrics", Some(ADMIN));
    assert_eq!(status, 200);
    let stored = if first["session"]["stored_bytes"].is_null() {
        "kept"
    } else {
        "stored"
    };
    for line in [
        format!("sandwit_session_runs_total{{found=\"started\",left=\"{stored}\"}} 1"),
        format!("sandwit_session_runs_total{{found=\"live\",left=\"{stored}\"}} 1"),
        "sandwit_session_runs_total{found=\"started\",left=\"ended\"} 1".to_string(),
        "sandwit_sessions_live 1".to_string(),
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no `{line}` in:\n{metrics}"
        );
    }
}
