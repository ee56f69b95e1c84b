//! `sandwit serve` with the scientific interpreter beside the small one: a
//! run asks for one with `interpreter` (`POST /v1/runs`, MCP's
//! `run_python`) or gets the server's default (`--interpreter`), and runs
//! the same way in either; a server that did not load the scientific one
//! refuses runs that ask for it, saying how to load it.

use std::io::BufReader;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{artifacts, cache_dir, tempdir};
use crate::mcp::{Client, http_client, runtime};
use crate::serve::{ADMIN, Server, USER, digest, next_event, serve, serve_on, serve_with};

/// Prints 6 in the scientific interpreter; the small one has no numpy.
const NUMPY: &str = "import numpy as np\nprint(np.arange(4).sum())";

/// A run of `code` in `interpreter` (the server's default when `None`).
fn run(server: &Server, code: &str, interpreter: Option<&str>) -> (u16, Value) {
    let mut body = json!({"code": code, "chat_key": "c", "user_id": "u"});
    if let Some(kind) = interpreter {
        body["interpreter"] = json!(kind);
    }
    server.post("/v1/runs", USER, body)
}

/// Asserts that a run answered 200 with status `ok` and `stdout`.
fn assert_printed(answer: (u16, Value), stdout: &str) {
    let (status, outcome) = answer;
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["stdout"], stdout, "{outcome}");
}

/// Asserts that a run went to the small interpreter: numpy is not there.
fn assert_no_numpy(answer: (u16, Value)) {
    let (status, outcome) = answer;
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "error", "{outcome}");
    assert_eq!(outcome["error"]["type"], "ModuleNotFoundError", "{outcome}");
}

/// `/readyz`'s interpreters and default.
fn offered(server: &Server) -> (Value, Value) {
    let ready = server.await_ready();
    (
        ready["interpreters"].clone(),
        ready["default_interpreter"].clone(),
    )
}

/// MCP's `run_python` with `arguments`: `content`, `structuredContent`,
/// `isError`.
async fn run_python(client: &Client, arguments: Value) -> Value {
    let params = serde_json::from_value(json!({"name": "run_python", "arguments": arguments}));
    let result = client.call_tool(params.unwrap()).await.unwrap();
    serde_json::to_value(result).unwrap()
}

#[test]
fn serve_runs_each_run_in_the_interpreter_it_asks_for() {
    let server = serve(
        "scientific",
        &[artifacts::CALC],
        "",
        &["--scientific-dir", artifacts::SCIENTIFIC],
    );
    assert_eq!(
        offered(&server),
        (json!(["small", "scientific"]), json!("small"))
    );

    assert_printed(run(&server, NUMPY, Some("scientific")), "6\n");
    // Without the field a run gets the default, the small interpreter.
    assert_no_numpy(run(&server, NUMPY, None));
    assert_no_numpy(run(&server, NUMPY, Some("small")));

    // The enabled plugins' methods are functions there too, their calls
    // under the policy's controls and in the outcome's events.
    let (status, outcome) = run(&server, "print(calculate_sum(1, 2))", Some("scientific"));
    assert_eq!(
        (status, &outcome["stdout"]),
        (200, &json!("3\n")),
        "{outcome}"
    );
    assert_eq!(outcome["events"][0]["method"], "calculate_sum", "{outcome}");
    // A scientific run's memory limit is its sandbox's (1 GiB), not the
    // server's run limit (256 MiB), which a small run keeps: 300 MiB fit
    // beside the scientific interpreter's own 100 and more.
    let big = "a = bytearray(300 << 20)\nprint(len(a) >> 20)";
    assert_printed(run(&server, big, Some("scientific")), "300\n");
    let (_, outcome) = run(&server, big, None);
    assert_eq!(outcome["limit"]["kind"], "memory", "{outcome}");
    // The limits a request lowers apply to either.
    let (_, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": NUMPY, "chat_key": "c", "interpreter": "scientific",
               "limits": {"fuel": 1000}}),
    );
    assert_eq!(outcome["status"], "limit_exceeded", "{outcome}");
    assert_eq!(outcome["limit"]["kind"], "fuel", "{outcome}");

    // An unknown kind is named with the ones there are.
    let (status, error) = run(&server, NUMPY, Some("huge"));
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["error"], "bad-json", "{error}");
    let message = error["message"].as_str().unwrap();
    for word in ["huge", "`small`", "`scientific`"] {
        assert!(message.contains(word), "{message}");
    }

    // Streamed: the live events, then the outcome.
    let response = server
        .agent
        .post(format!("{}/v1/runs", server.base))
        .header("Authorization", format!("Bearer {USER}"))
        .header("Accept", "text/event-stream")
        .send_json(json!({"code": NUMPY, "chat_key": "c", "interpreter": "scientific"}))
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut events = BufReader::new(response.into_body().into_reader());
    let stdout = next_event(&mut events, "stdout");
    assert!(
        stdout["text"].as_str().unwrap().starts_with('6'),
        "{stdout}"
    );
    assert_eq!(next_event(&mut events, "outcome")["status"], "ok");

    // MCP's `run_python` takes the same argument, and lists the kinds.
    runtime().block_on(async {
        let client = http_client(&server.base, USER).await;
        let tools = serde_json::to_value(client.list_all_tools().await.unwrap()).unwrap();
        let tool = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "run_python")
            .unwrap();
        assert_eq!(
            tool["inputSchema"]["properties"]["interpreter"]["enum"],
            json!(["small", "scientific"]),
            "{tool}"
        );
        let result = run_python(&client, json!({"code": NUMPY, "interpreter": "scientific"})).await;
        assert_eq!(result["isError"], false, "{result}");
        assert_eq!(result["structuredContent"]["stdout"], "6\n", "{result}");
        let result = run_python(&client, json!({"code": NUMPY})).await;
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(
            result["structuredContent"]["error"]["type"],
            "ModuleNotFoundError"
        );
        let result = run_python(&client, json!({"code": NUMPY, "interpreter": "huge"})).await;
        assert_eq!(result["isError"], true, "{result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("\"huge\"") && text.contains("\"scientific\""),
            "{text}"
        );
    });
    // Both kinds' runs are counted alike: the refused ones not at all.
    assert_eq!(
        server.metric("sandwit_runs_total{status=\"ok\"}"),
        Some(5.0)
    );
    assert_eq!(
        server.metric("sandwit_runs_total{status=\"error\"}"),
        Some(3.0)
    );
    let limited = server.metric("sandwit_runs_total{status=\"limit_exceeded\"}");
    assert_eq!(limited, Some(2.0));
    // Its ready interpreter is back once the last run's is restored.
    server.await_metric("sandwit_scientific_interpreters_ready", 1.0);
}

#[test]
fn serve_runs_in_the_scientific_interpreter_by_default_when_told() {
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    let server = serve_with(
        ("serve", "scientific-default"),
        &[],
        "",
        &["--interpreter", "scientific"],
        &tokens,
        // Where the directory is, when no --scientific-dir names it.
        &[("SANDWIT_SCIENTIFIC", artifacts::SCIENTIFIC)],
    );
    assert_eq!(
        offered(&server),
        (json!(["small", "scientific"]), json!("scientific"))
    );
    assert_printed(run(&server, NUMPY, None), "6\n");
    assert_no_numpy(run(&server, NUMPY, Some("small")));
}

#[test]
fn serve_without_the_scientific_interpreter_refuses_runs_that_ask_for_it() {
    let server = serve("no-scientific", &[], "", &[]);
    assert_eq!(offered(&server), (json!(["small"]), json!("small")));
    assert_printed(run(&server, "print(1)", Some("small")), "1\n");

    let (status, error) = run(&server, NUMPY, Some("scientific"));
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"], "interpreter-not-loaded", "{error}");
    let message = error["message"].as_str().unwrap();
    for words in [
        "`interpreter`",
        "\"scientific\"",
        "--scientific-dir DIR",
        "scripts/scientific",
    ] {
        assert!(message.contains(words), "{message}");
    }

    runtime().block_on(async {
        let client = http_client(&server.base, USER).await;
        let result = run_python(&client, json!({"code": NUMPY, "interpreter": "scientific"})).await;
        assert_eq!(result["isError"], true, "{result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("interpreter-not-loaded") && text.contains("--scientific-dir"),
            "{text}"
        );
    });
}

/// `sandwit serve` with `args` and no $SANDWIT_SCIENTIFIC, which must fail
/// to start: its stderr.
fn failed_start(name: &str, args: &[&str]) -> String {
    let dir = tempdir("serve", name);
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .env_remove("SANDWIT_SCIENTIFIC")
        .env_remove("SANDWIT_POLICY")
        .arg("--cache-dir")
        .arg(cache_dir())
        .arg("--store")
        .arg(dir.join("store.db"))
        .args(["serve", "--addr", "127.0.0.1:0", "--plugins"])
        .arg(&dir)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "it started: {stdout}");
    assert!(!stdout.contains("listening on"), "{stdout}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn serve_does_not_start_without_the_scientific_interpreter_it_is_told_to_load() {
    let dir = tempdir("serve", "not-a-scientific-dir");
    let bad = dir.to_str().unwrap();
    let err = failed_start("bad-scientific-dir", &["--scientific-dir", bad]);
    assert!(
        err.contains(&format!(
            "{bad} is not a scientific interpreter's directory"
        )) && err.contains("scripts/scientific"),
        "{err}"
    );
    let err = failed_start("no-scientific-dir", &["--interpreter", "scientific"]);
    assert!(
        err.contains("scripts/scientific") && err.contains("--scientific-dir DIR"),
        "{err}"
    );
}

/// The token of the tenant `acme`, whose namespace is `acme:`.
const ACME: &str = "acme-token-for-tests";
/// The token of the tenant `globex`, whose namespace is `globex:`.
const GLOBEX: &str = "globex-token-for-tests";

/// A GET of `path` with `token`: the status and the body's bytes.
fn get_bytes(server: &Server, path: &str, token: &str) -> (u16, Vec<u8>) {
    let mut response = server
        .agent
        .get(format!("{}{path}", server.base))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_vec().unwrap())
}

/// A GET of `path` with `token` that answers JSON: the status and body.
fn get_json(server: &Server, path: &str, token: &str) -> (u16, Value) {
    let (status, body) = get_bytes(server, path, token);
    (status, serde_json::from_slice(&body).unwrap())
}

#[test]
fn serve_keeps_a_chats_workspace_and_answers_its_files_to_its_tenant_only() {
    let dir = tempdir("serve", "workspace-root");
    let root = dir.join("workspaces");
    let tokens = format!(
        "ops admin {}\napp user {}\nacme user {} acme:\nglobex user {} globex:\n",
        digest(ADMIN),
        digest(USER),
        digest(ACME),
        digest(GLOBEX)
    );
    let server = serve_with(
        ("serve", "workspace"),
        &[],
        "",
        &[
            "--scientific-dir",
            artifacts::SCIENTIFIC,
            "--workspace",
            root.to_str().unwrap(),
        ],
        &tokens,
        &[],
    );
    let write = "import os\nos.makedirs('out', exist_ok=True)\n\
                 open('out/result.txt', 'w').write('hello from acme')\nprint(os.getcwd())";
    let (status, outcome) = server.post(
        "/v1/runs",
        ACME,
        json!({"code": write, "chat_key": "acme:c", "interpreter": "scientific"}),
    );
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["stdout"], "/workspace\n", "{outcome}");
    // Files only: the folder made is not listed.
    let files = json!([{"path": "out/result.txt", "size": 15}]);
    assert_eq!(outcome["files"], files, "{outcome}");
    // The next run of the chat finds it; a small run lists no files.
    let (_, outcome) = server.post(
        "/v1/runs",
        ACME,
        json!({"code": "print(open('out/result.txt').read())", "chat_key": "acme:c",
               "interpreter": "scientific"}),
    );
    assert_eq!(outcome["stdout"], "hello from acme\n", "{outcome}");
    assert_eq!(outcome["files"], json!([]), "{outcome}");
    // So does a run of the small interpreter: the chat's folder is one.
    let (_, outcome) = server.post(
        "/v1/runs",
        ACME,
        json!({"code": "print(open('out/result.txt').read())", "chat_key": "acme:c"}),
    );
    assert_eq!(outcome["stdout"], "hello from acme\n", "{outcome}");
    assert_eq!(outcome["files"], json!([]), "{outcome}");

    // Listed and read by the tenant.
    let (status, listing) = get_json(&server, "/v1/chats/acme:c/files", ACME);
    assert_eq!(status, 200, "{listing}");
    // The listing has files only.
    let file = json!({"path": "out/result.txt", "size": 15});
    assert_eq!(listing, json!({"chat": "acme:c", "files": [file]}));
    let response = server
        .agent
        .get(format!(
            "{}/v1/chats/acme:c/files/out/result.txt",
            server.base
        ))
        .header("Authorization", format!("Bearer {ACME}"))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let headers = response.headers();
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let bytes = response.into_body().read_to_vec().unwrap();
    assert_eq!(bytes, b"hello from acme");

    // Another tenant cannot name the chat...
    for path in [
        "/v1/chats/acme:c/files",
        "/v1/chats/acme:c/files/out/result.txt",
    ] {
        let (status, error) = get_json(&server, path, GLOBEX);
        assert_eq!(status, 403, "{path}: {error}");
        assert_eq!(error["error"], "outside-namespace", "{error}");
    }
    // ...and a token of another namespace (none) that names the same key
    // gets a workspace of its own, empty.
    let (status, listing) = get_json(&server, "/v1/chats/acme:c/files", USER);
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["files"], json!([]), "{listing}");
    let (status, error) = get_json(&server, "/v1/chats/acme:c/files/out/result.txt", USER);
    assert_eq!(status, 404, "{error}");
    assert_eq!(error["error"], "no-such-file", "{error}");
    // So does a chat that never ran.
    let (status, listing) = get_json(&server, "/v1/chats/globex:c/files", GLOBEX);
    assert_eq!((status, &listing["files"]), (200, &json!([])), "{listing}");

    // No path leads outside the workspace, nor to a folder or a missing file.
    let secret = root.parent().unwrap().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    for (path, expected) in [
        ("/v1/chats/acme:c/files/out/..%2F..%2F..%2Fsecret.txt", 400),
        ("/v1/chats/acme:c/files/%2E%2E/%2E%2E/secret.txt", 400),
        (
            "/v1/chats/acme:c/files/out/%2E%2E/%2E%2E/%2E%2E/secret.txt",
            400,
        ),
        ("/v1/chats/acme:c/files/%2Fetc%2Fpasswd", 400),
        ("/v1/chats/acme:c/files/out", 404),
        ("/v1/chats/acme:c/files/out/none.txt", 404),
    ] {
        let (status, body) = get_bytes(&server, path, ACME);
        let text = String::from_utf8_lossy(&body);
        assert_eq!(status, expected, "{path}: {text}");
        assert!(!text.contains("secret\""), "{path}: {text}");
        assert_ne!(body, b"secret", "{path}");
    }
}

/// `sandwit serve` with both interpreters and chat workspaces of 1 MiB
/// (in a root of `name`'s own), with `extra` flags.
fn serve_with_small_workspaces(name: &str, extra: &[&str]) -> Server {
    let root = tempdir("serve", &format!("{name}-root"));
    let mut flags = vec![
        "--scientific-dir",
        artifacts::SCIENTIFIC,
        "--workspace",
        root.to_str().unwrap(),
        "--workspace-max-mib",
        "1",
    ];
    flags.extend_from_slice(extra);
    serve(name, &[], "", &flags)
}

/// Asserts that chat `c`'s files, as the server lists them, hold at most
/// 1 MiB together.
#[track_caller]
fn assert_chat_within_1_mib(server: &Server) {
    let (status, listing) = get_json(server, "/v1/chats/c/files", USER);
    assert_eq!(status, 200, "{listing}");
    let files = listing["files"].as_array().unwrap();
    let held: u64 = files.iter().map(|f| f["size"].as_u64().unwrap()).sum();
    assert!(held <= 1 << 20, "{listing}");
}

#[test]
fn serve_holds_a_scientific_runs_workspace_quota_whatever_its_descriptors() {
    // A write to a file under stdout's number, once closed, and a size set
    // past the quota, are both charged: the run ends with the quota and
    // the chat's files stay within it.
    let server = serve_with_small_workspaces("workspace-quota", &[]);
    for code in [
        "import os\nos.close(1)\nfd = os.open('reused', os.O_WRONLY | os.O_CREAT)\n\
         data = memoryview(bytes(64 << 20))\nwhile data:\n    data = data[os.write(fd, data):]",
        "import os\nfd = os.open('grown', os.O_WRONLY | os.O_CREAT)\nos.ftruncate(fd, 1 << 40)",
    ] {
        let (status, outcome) = run(&server, code, Some("scientific"));
        assert_eq!(status, 200, "{outcome}");
        assert_eq!(outcome["status"], "limit_exceeded", "{code}: {outcome}");
        assert_eq!(outcome["limit"]["kind"], "workspace", "{code}: {outcome}");
        let message = outcome["limit"]["message"].as_str().unwrap();
        assert!(message.contains("max_bytes"), "{code}: {message}");
    }
    assert_chat_within_1_mib(&server);
}

#[test]
fn a_chats_runs_at_once_share_its_quota_across_both_interpreters() {
    // One run in each interpreter, of one chat, each writing 700 KiB into
    // 1 MiB once both are under way (each waits for the other's marker):
    // together they are refused past the quota, and the chat's files stay
    // within it.
    let server = serve_with_small_workspaces("workspace-together", &["--max-runs", "2"]);
    let code = |me: &str, other: &str| {
        format!(
            "import os, time\nopen('{me}.ready', 'w').close()\nfor _ in range(800):\n    \
             if os.path.exists('{other}.ready'):\n        break\n    time.sleep(0.01)\n\
             with open('{me}.bin', 'wb') as f:\n    for _ in range(7):\n        \
             f.write(bytes(100 << 10))"
        )
    };
    let (small, scientific) = std::thread::scope(|s| {
        let small = s.spawn(|| run(&server, &code("a", "b"), Some("small")));
        let scientific = s.spawn(|| run(&server, &code("b", "a"), Some("scientific")));
        (small.join().unwrap(), scientific.join().unwrap())
    });
    let mut refused = 0;
    for (status, outcome) in [&small, &scientific] {
        assert_eq!(*status, 200, "{outcome}");
        if outcome["status"] != "ok" {
            assert_eq!(outcome["limit"]["kind"], "workspace", "{outcome}");
            refused += 1;
        }
    }
    assert!(refused > 0, "both ran: {small:?} {scientific:?}");
    assert_chat_within_1_mib(&server);
}

#[test]
fn serve_without_workspaces_answers_404_for_a_chats_files() {
    let server = serve(
        "no-workspace",
        &[],
        "",
        &["--scientific-dir", artifacts::SCIENTIFIC],
    );
    for path in ["/v1/chats/c/files", "/v1/chats/c/files/a.txt"] {
        let (status, error) = get_json(&server, path, USER);
        assert_eq!(status, 404, "{path}: {error}");
        assert_eq!(error["error"], "no-workspaces", "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("--workspace DIR"),
            "{error}"
        );
    }
    let (_, outcome) = run(&server, "open('a.txt', 'w').write('x')", Some("scientific"));
    assert_eq!(outcome["files"], json!([]), "{outcome}");
}

#[test]
fn serve_gives_the_small_interpreter_workspaces_too() {
    let dir = tempdir("serve", "workspace-small");
    let server = serve(
        "workspace-small",
        &[],
        "",
        &["--workspace", dir.to_str().unwrap()],
    );
    let (status, outcome) = run(&server, "open('a.txt', 'w').write('small')", None);
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(
        outcome["files"],
        json!([{"path": "a.txt", "size": 5}]),
        "{outcome}"
    );
    let (status, listing) = get_json(&server, "/v1/chats/c/files", USER);
    assert_eq!(status, 200, "{listing}");
    let (status, bytes) = get_bytes(&server, "/v1/chats/c/files/a.txt", USER);
    assert_eq!((status, bytes.as_slice()), (200, &b"small"[..]));
}

/// Whether the server reuses its interpreters now (its metric).
fn reuses(server: &Server) -> bool {
    server.metric("sandwit_interpreters_reusable") == Some(1.0)
}

/// `/readyz` as it answers between two readings of whether the server
/// reuses its interpreters: 200 if it did before, 503 `warming-up` (naming
/// `sandwit prepare` and the flag) if it still did not after, when
/// `waits` (no `--ready-before-reuse`); 200 always otherwise. Returns
/// whether the answer came while the server was warming up.
fn check_readiness(server: &Server, waits: bool) -> bool {
    let before = reuses(server);
    let (status, body) = server.get("/readyz", None);
    let after = reuses(server);
    if before || !waits {
        assert_eq!(status, 200, "{body}");
    }
    if !after && waits {
        assert_eq!(status, 503, "{body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"], "warming-up", "{error}");
        let message = error["message"].as_str().unwrap();
        for words in ["`sandwit prepare`", "--ready-before-reuse"] {
            assert!(message.contains(words), "{message}");
        }
    }
    !after
}

#[test]
fn serve_is_ready_once_it_reuses_interpreters_unless_told_otherwise() {
    // A cache of its own, which lacks the interpreter's code for reuse:
    // the first server compiles the interpreter (its start) and then that
    // code, on an idle thread.
    let cache = tempdir("serve", "readiness-cache");
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    let eager = serve_on(
        &cache,
        ("serve", "ready-before-reuse"),
        &[],
        "",
        &["--ready-before-reuse"],
        &tokens,
        &[],
    );
    let warming = check_readiness(&eager, false);
    assert_printed(run(&eager, "print(1)", None), "1\n");
    // One that waits, on the same cache: warming up until it reuses
    // interpreters (if the first has not compiled the code by then), runs
    // taken meanwhile; then ready.
    let waiting = serve_on(
        &cache,
        ("serve", "ready-after-reuse"),
        &[],
        "",
        &[],
        &tokens,
        &[],
    );
    let warming_too = check_readiness(&waiting, true);
    assert_printed(run(&waiting, "print(2)", None), "2\n");
    assert_eq!(waiting.await_ready()["status"], "ready");
    assert!(reuses(&waiting));
    eprintln!("warming up when asked: {warming}, {warming_too}");
}
