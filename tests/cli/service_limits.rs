//! What a client may make `sandwit serve` hold: MCP sessions bound to their
//! token and capped, sessions that only initialised expiring soon, a rate
//! limit per token, a streamed run whose client stops reading, and answers
//! nobody reads.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::{ADMIN, Server, USER, serve};

/// The MCP revision the raw requests speak.
const REVISION: &str = "2025-06-18";

/// The server's resident memory, in KiB (VmRSS of /proc/<pid>/status).
fn rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

/// An answer of `/mcp`: its status, session id, `Retry-After` and body.
struct Answer {
    status: u16,
    session: Option<String>,
    retry_after: Option<String>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Sends `method` to `/mcp` with `token`, in `session` if given, with
/// `message` as the body if given.
fn mcp(
    server: &Server,
    method: &str,
    token: &str,
    session: Option<&str>,
    message: Option<Value>,
) -> Answer {
    let url = format!("{}/mcp", server.base);
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(&url)
        .header("Authorization", format!("Bearer {token}"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", REVISION);
    let request = match session {
        Some(id) => request.header("Mcp-Session-Id", id),
        None => request,
    };
    let body = message.map(|m| m.to_string()).unwrap_or_default();
    let mut response = server.agent.run(request.body(body).unwrap()).unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (session, retry_after) = (header("mcp-session-id"), header("retry-after"));
    Answer {
        status: response.status().as_u16(),
        session,
        retry_after,
        body: response.body_mut().read_to_string().unwrap_or_default(),
    }
}

fn initialize(server: &Server, token: &str) -> Answer {
    mcp(
        server,
        "POST",
        token,
        None,
        Some(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": REVISION,
                "capabilities": {},
                "clientInfo": {"name": "limits-test", "version": "1"},
            },
        })),
    )
}

/// A session of `token`, initialised (`notifications/initialized` sent).
fn session(server: &Server, token: &str) -> String {
    let answer = initialize(server, token);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let id = answer.session.expect("an Mcp-Session-Id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = mcp(server, "POST", token, Some(&id), Some(note));
    assert_eq!(answer.status, 202, "{}", answer.body);
    id
}

fn list_tools(server: &Server, token: &str, id: &str) -> Answer {
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    mcp(server, "POST", token, Some(id), Some(request))
}

/// A refusal of `initialize` past a cap: `status`, `Retry-After`, and the
/// error naming the cap's flag.
fn assert_refused(answer: &Answer, status: u16, flag: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    assert!(answer.retry_after.is_some(), "no Retry-After");
    assert_eq!(
        answer.json()["error"],
        "too-many-sessions",
        "{}",
        answer.body
    );
    assert!(answer.body.contains(flag), "{}", answer.body);
}

/// Thousands of `initialize` from one token leave its cap of sessions
/// alive, the rest refused with 429, and the server's memory about where
/// it was; past the server's cap another token is refused with 503.
#[test]
fn an_initialize_flood_from_one_token_leaves_at_most_its_cap_alive() {
    let server = serve(
        "limits-flood",
        &[],
        "",
        &[
            "--rate-per-minute",
            "1000000",
            "--rate-burst",
            "100000",
            "--mcp-sessions",
            "20",
        ],
    );
    // Warm: a first session and its end, so the memory measured from here
    // on is what sessions hold.
    let first = session(&server, USER);
    assert_eq!(mcp(&server, "DELETE", USER, Some(&first), None).status, 202);
    let before = quiet_rss_kib(&server);

    const FLOOD: usize = 3_000;
    const THREADS: usize = 6;
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..FLOOD / THREADS)
                        .map(|_| {
                            let answer = initialize(&server, USER);
                            if answer.status == 429 {
                                assert_refused(&answer, 429, "--mcp-sessions-per-token");
                            }
                            answer.status
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let made = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!((made, refused), (16, FLOOD - 16), "{statuses:?}");

    let after = rss_kib(&server);
    // The attack this bounds held tens of KiB a session: thousands of
    // sessions would be over a hundred MiB.
    let bound = 48 * 1024;
    assert!(
        after < before + bound,
        "the server grew from {before} KiB to {after} KiB (bound {bound} KiB more)"
    );

    // The server's cap of 20: another token gets 4, then 503.
    for _ in 0..4 {
        assert_eq!(initialize(&server, ADMIN).status, 200);
    }
    assert_refused(&initialize(&server, ADMIN), 503, "--mcp-sessions");
}

/// A session id is the token's that made it: another token's request or
/// `DELETE` with it is answered as for an unknown session, and the session
/// goes on; its `DELETE` by its own token frees its slot.
#[test]
fn a_session_answers_only_the_token_that_made_it() {
    let server = serve("limits-bound", &[], "", &["--mcp-sessions-per-token", "1"]);
    let id = session(&server, USER);
    assert_eq!(list_tools(&server, USER, &id).status, 200);

    let stolen = list_tools(&server, ADMIN, &id);
    assert_eq!(stolen.status, 404, "{}", stolen.body);
    assert_eq!(stolen.json()["error"], "unknown-session", "{}", stolen.body);
    assert_eq!(mcp(&server, "GET", ADMIN, Some(&id), None).status, 404);
    assert_eq!(mcp(&server, "DELETE", ADMIN, Some(&id), None).status, 404);
    // An id that never was gets the same answer.
    assert_eq!(list_tools(&server, ADMIN, "no-such-session").status, 404);

    // Untouched by the other token: it still answers its own.
    let listed = list_tools(&server, USER, &id);
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.body.contains("run_python"), "{}", listed.body);

    // Its slot is held, then freed by its DELETE.
    assert_refused(&initialize(&server, USER), 429, "--mcp-sessions-per-token");
    assert_eq!(mcp(&server, "DELETE", USER, Some(&id), None).status, 202);
    assert_eq!(list_tools(&server, USER, &id).status, 404);
    assert_eq!(initialize(&server, USER).status, 200);
}

/// A session that only initialised ends after the short idle time and
/// frees its slot; one that made a request lives on past it.
#[test]
fn an_only_initialised_session_expires_soon_and_frees_its_slot() {
    let server = serve(
        "limits-idle",
        &[],
        "",
        &[
            "--mcp-sessions-per-token",
            "1",
            "--mcp-init-idle-ms",
            "1000",
        ],
    );
    let idle = session(&server, USER);
    assert_refused(&initialize(&server, USER), 429, "--mcp-sessions-per-token");
    // Bounded: the idle session ends within a few sweeps.
    let deadline = Instant::now() + Duration::from_secs(20);
    let busy = loop {
        let answer = initialize(&server, USER);
        if answer.status == 200 {
            break answer.session.expect("an Mcp-Session-Id");
        }
        assert!(Instant::now() < deadline, "the idle session never expired");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(list_tools(&server, USER, &idle).status, 404);

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        mcp(&server, "POST", USER, Some(&busy), Some(note)).status,
        202
    );
    assert_eq!(list_tools(&server, USER, &busy).status, 200);
    // Several short idle times later, a session in use still answers (the
    // ordinary idle time is 5 minutes).
    std::thread::sleep(Duration::from_millis(3_000));
    assert_eq!(list_tools(&server, USER, &busy).status, 200);
}

/// Past its burst a token is refused with 429 `rate-limited` and
/// `Retry-After`, on `/v1` and `/mcp`; another token and the probes are not.
#[test]
fn a_token_past_its_rate_is_refused_with_429() {
    let server = serve(
        "limits-rate",
        &[],
        "",
        &["--rate-per-minute", "6", "--rate-burst", "3"],
    );
    for _ in 0..3 {
        assert_eq!(server.get("/v1/tools", Some(USER)).0, 200);
    }
    let mut response = server
        .agent
        .get(format!("{}/v1/tools", server.base))
        .header("Authorization", format!("Bearer {USER}"))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=10).contains(&retry), "Retry-After: {retry}");
    let body: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(body["error"], "rate-limited", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("`app`"),
        "{body}"
    );
    assert_eq!(initialize(&server, USER).status, 429);

    server.await_ready();
    for _ in 0..10 {
        assert_eq!(server.get("/healthz", None).0, 200);
        assert_eq!(server.get("/readyz", None).0, 200);
        assert_eq!(server.get("/openapi.json", None).0, 200);
    }
    assert_eq!(server.get("/metrics", Some(ADMIN)).0, 200);
    // A request without a valid token is refused as before, not counted.
    assert_eq!(server.get("/v1/tools", Some("not-a-token")).0, 401);
}

/// A client that asks for a streamed run and never reads falls behind: its
/// run is cancelled, and what waits for it in the server stays bounded.
#[test]
fn a_streaming_client_that_stops_reading_has_its_run_cancelled() {
    let server = serve("limits-stream", &[], "", &[]);
    // Warm: a run, so the interpreter is ready before memory is measured.
    let (status, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(1)", "chat_key": "c"}),
    );
    assert_eq!((status, &outcome["status"]), (200, &json!("ok")));
    let before = quiet_rss_kib(&server);

    let address = server.base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    let body =
        json!({"code": "while True:\n    print('', flush=True)\n", "chat_key": "c"}).to_string();
    write!(
        stream,
        "POST /v1/runs HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {USER}\r\n\
         Accept: text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The head arrives; then nothing more is read.
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    server.await_metric("sandwit_runs_total{status=\"cancelled\"}", 1.0);
    server.await_metric("sandwit_runs_running", 0.0);
    let after = rss_kib(&server);
    // The run could print a MiB of one-byte lines: a million events held
    // for the client would be far above this.
    let bound = 48 * 1024;
    assert!(
        after < before + bound,
        "the server grew from {before} KiB to {after} KiB (bound {bound} KiB more)"
    );
    drop(stream);
}

/// Runs whose clients never read their answers: each answer keeps its
/// run's place in the queue until it has gone out, so with one run slot
/// and one queue place, two unread answers make the next run wait its turn
/// (refused at once: 503 `queue-full`) instead of the server holding a
/// third; once the connections' writes have stalled past the limit they
/// are closed, the places come free and runs are admitted again. What the
/// server held stays within a stated bound.
#[test]
fn answers_nobody_reads_hold_their_queue_places_until_the_stall_limit() {
    let server = serve(
        "limits-unread",
        &[],
        "",
        &[
            "--max-runs",
            "1",
            "--queue",
            "1",
            "--write-stall-ms",
            "5000",
        ],
    );
    let (status, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(1)", "chat_key": "c"}),
    );
    assert_eq!((status, &outcome["status"]), (200, &json!("ok")));
    let before = quiet_rss_kib(&server);

    // A million control characters to stdout and to stderr: about 12 MB of
    // JSON, far more than the sockets' buffers take.
    let body = json!({
        "code": "import sys\nsys.stdout.write('\\x01' * 1_000_000)\nsys.stderr.write('\\x02' * 1_000_000)",
        "chat_key": "c",
    });
    let unread: Vec<TcpStream> = (0..2)
        .map(|_| unread(&server, "/v1/runs", &body, ""))
        .collect();
    // Both ran (one after the other) and wait to be read.
    server.await_metric("sandwit_runs_total{status=\"ok\"}", 3.0);
    let run = |n: u32| {
        let (status, answer) = server.post(
            "/v1/runs",
            USER,
            json!({"code": format!("print({n})"), "chat_key": "c"}),
        );
        (status, answer)
    };
    let refused = until_status("a run with both places held", 503, || run(2));
    assert_eq!(refused["error"], "queue-full", "{refused}");
    let held = rss_kib(&server);
    // Two answers of about 12 MB each, and what producing them took.
    let bound = 96 * 1024;
    assert!(
        held < before + bound,
        "the server grew from {before} KiB to {held} KiB (bound {bound} KiB more)"
    );
    // The clients still read nothing: their writes stall, the server
    // closes them, and runs are admitted again.
    let answer = until_status("a run once the unread answers were let go", 200, || run(3));
    assert_eq!(answer["stdout"], "3\n", "{answer}");
    drop(unread);
}

/// Sends `request` (a whole HTTP request to `path` with `body`, a token and
/// `extra` headers) on a new connection whose answer is never read.
fn unread(server: &Server, path: &str, body: &Value, extra: &str) -> TcpStream {
    let address = server.base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {USER}\r\n{extra}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    stream
}

/// The server's resident memory once its sandbox is done preparing
/// (interpreters reused across runs: the interpreter's second compile, on
/// a background thread, is over; bounded) and it has stopped moving: the
/// level an attack's growth is measured from.
fn quiet_rss_kib(server: &Server) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(300);
    while server.metric("sandwit_interpreters_reusable") != Some(1.0) {
        assert!(
            Instant::now() < deadline,
            "the sandbox never started reusing interpreters"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    settled_rss_kib(server)
}

/// The server's resident memory once it has stopped moving (two samples
/// 300 ms apart within 1 MiB), or after 5 s.
fn settled_rss_kib(server: &Server) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = rss_kib(server);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = rss_kib(server);
        if now.abs_diff(last) < 1024 || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Tries `attempt` until it answers `want`, for at most a minute; the
/// answer's body.
fn until_status<T: std::fmt::Display>(
    what: &str,
    want: u16,
    mut attempt: impl FnMut() -> (u16, T),
) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = attempt();
        if status == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: never {want}, last {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Direct calls and MCP exchanges whose clients never read their 16 MB
/// answers hold their places as runs' answers do: with one slot and one
/// queue place, two unread answers refuse the next call (503
/// `queue-full`); over MCP, two unread tool calls refuse the next `POST
/// /mcp`; once the writes have stalled past the limit, both are served
/// again. What the server held stays within a stated bound.
#[test]
fn call_and_mcp_answers_nobody_reads_hold_their_places_until_the_stall_limit() {
    let server = serve(
        "limits-unread-calls",
        &[crate::common::artifacts::HOSTILE],
        "",
        &[
            "--max-runs",
            "1",
            "--queue",
            "1",
            "--write-stall-ms",
            "15000",
        ],
    );
    let call = "/v1/plugins/hostile/methods/long_text:call";
    let small = json!({"args": {"size": 10}, "chat_key": "c"});
    let (status, report) = server.post(call, USER, small.clone());
    assert_eq!((status, &report["ok"]), (200, &json!(true)), "{report}");
    let before = quiet_rss_kib(&server);
    let calls = "sandwit_call_duration_seconds_count{plugin=\"hostile\",method=\"long_text\"}";

    let big = json!({"args": {"size": 16_000_000}, "chat_key": "c"});
    let unread_calls: Vec<TcpStream> = (0..2).map(|_| unread(&server, call, &big, "")).collect();
    server.await_metric(calls, 3.0);
    let small_call = || server.post(call, USER, small.clone());
    let refused = until_status("a call with both places held", 503, small_call);
    assert_eq!(refused["error"], "queue-full", "{refused}");
    // What making and holding two 16 MB answers took (copies in the
    // plugin, the value, its JSON; the second may still be rendering) ...
    let held = settled_rss_kib(&server);
    // ... and twenty more clients asking for as much and reading nothing
    // add nothing like it: they are refused before their call is made.
    let more: Vec<TcpStream> = (0..20).map(|_| unread(&server, call, &big, "")).collect();
    let after = settled_rss_kib(&server);
    let bound = 16 * 1024;
    assert!(
        after < held + bound,
        "two answers held: {held} KiB (from {before}); twenty more unread clients: {after} KiB \
         (bound {bound} KiB more)"
    );
    drop(more);
    until_status(
        "a call once the stalled answers were dropped",
        200,
        small_call,
    );
    drop(unread_calls);

    let id = session(&server, USER);
    let tool_call = |n: u64| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
               "params": {"name": "long_text", "arguments": {"size": 16_000_000}}})
    };
    let headers = format!(
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {REVISION}\r\n\
         Mcp-Session-Id: {id}\r\n"
    );
    let unread_mcp: Vec<TcpStream> = (0..2)
        .map(|n| unread(&server, "/mcp", &tool_call(10 + n), &headers))
        .collect();
    server.await_metric(calls, 6.0);
    let refused = until_status("a POST /mcp with both places held", 503, || {
        let answer = list_tools(&server, USER, &id);
        (answer.status, answer.body)
    });
    assert!(refused.contains("queue-full"), "{refused}");
    until_status(
        "a POST /mcp once the stalled answers were dropped",
        200,
        || {
            let answer = list_tools(&server, USER, &id);
            (answer.status, answer.body)
        },
    );
    drop(unread_mcp);
}

/// Text a guest chose, however long, reaches no answer whole: a run whose
/// code names a 100 MiB method past its call cap, and a plugin failing
/// with a 16 MiB message, answer in under 64 KiB through `POST /v1/runs`,
/// a direct call and MCP (`run_python` and a tool call), and the server
/// serves on.
#[test]
fn guest_chosen_names_and_messages_give_small_answers_on_every_surface() {
    let server = serve(
        "limits-guest-text",
        &[crate::common::artifacts::HOSTILE],
        "",
        &[],
    );
    let code = "import _sandwit_methods as m\n\
                for _ in range(1000):\n    m.call('x', b'')\n\
                m.call('\\x01' * (100 << 20), b'')";
    let small = |what: &str, body: &str| {
        assert!(body.len() < 64 << 10, "{what}: {} bytes", body.len());
    };
    let (status, outcome) = server.post("/v1/runs", USER, json!({"code": code, "chat_key": "c"}));
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["limit"]["kind"], "calls", "{outcome}");
    small("POST /v1/runs", &outcome.to_string());

    let call = "/v1/plugins/hostile/methods/long_failure:call";
    let failing = json!({"args": {"size": 16 << 20}, "chat_key": "c"});
    let (status, report) = server.post(call, USER, failing);
    assert_eq!((status, &report["ok"]), (200, &json!(false)), "{report}");
    small("a direct call", &report.to_string());

    let id = session(&server, USER);
    let tool_call = |name: &str, arguments: Value| {
        let request = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                             "params": {"name": name, "arguments": arguments}});
        let answer = mcp(&server, "POST", USER, Some(&id), Some(request));
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.body
    };
    let body = tool_call("run_python", json!({"code": code}));
    assert!(body.contains("calls"), "{body}");
    small("MCP run_python", &body);
    let body = tool_call("long_failure", json!({"size": 16 << 20}));
    assert!(body.contains("fff"), "{body}");
    small("an MCP tool call", &body);

    let (status, outcome) = server.post(
        "/v1/runs",
        USER,
        json!({"code": "print(1)", "chat_key": "c"}),
    );
    assert_eq!(
        (status, &outcome["status"]),
        (200, &json!("ok")),
        "{outcome}"
    );
}
