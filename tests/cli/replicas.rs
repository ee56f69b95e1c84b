//! Replicas: three `sandwit serve` on one PostgreSQL database (`--store
//! postgres://...`, or the policy's `[store] url`) and two `sandwit registry serve` (`--db` on it too,
//! `--blobs` in one folder) behind haproxy (Debian's, on loopback), driven
//! through the balancer as clients would: the plugin store, rate limits,
//! chat budgets and open breakers are shared; a replica killed mid-load loses no acknowledged
//! write, its in-flight run fails cleanly and a retry reaches another; a
//! draining replica leaves the balancer through `/readyz`; what is
//! published through the balancer is installed through it, with a registry
//! replica killed between. A database that stops answering (a proxy in
//! front of it freezes) fails what needs it in time, spares what does not,
//! and is used again once it answers.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandwit_test_artifacts::freeze::FreezingProxy;
use serde_json::{Value, json};

use crate::common::{artifacts, pin_line, sandwit_with_token, tempdir};
use crate::registry::{Database, Server as Registry};
use crate::serve::{ADMIN, Server, USER, digest, serve_with};

/// Debian's haproxy (scripts/test installs it).
const HAPROXY: &str = "/usr/sbin/haproxy";

/// haproxy in front of servers (their base URLs), killed when dropped. It
/// asks each server for `check` (`/readyz`; the registry's `/healthz`) every
/// 200 ms: one that fails once is taken out, one that passes once is put
/// back.
struct Balancer {
    child: Child,
    base: String,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn balancer(dir: &Path, servers: &[&str], check: &str) -> Balancer {
    assert!(
        Path::new(HAPROXY).exists(),
        "{HAPROXY} is missing: install Debian's haproxy (scripts/test does)"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = format!(
        "global\n  maxconn 512\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  \
         timeout server 120s\n  retries 2\n  option redispatch\n\
         frontend front\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
         backend replicas\n  balance roundrobin\n  option httpchk GET {check}\n  \
         http-check expect status 200\n"
    );
    for (i, server) in servers.iter().enumerate() {
        let addr = server.trim_start_matches("http://");
        config.push_str(&format!(
            "  server r{i} {addr} check inter 200ms fall 1 rise 1\n"
        ));
    }
    let file = dir.join("haproxy.cfg");
    std::fs::write(&file, config).unwrap();
    let child = Command::new(HAPROXY)
        .args(["-db", "-f"])
        .arg(&file)
        .stdout(Stdio::null())
        .spawn()
        .expect("starting haproxy");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "haproxy never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    Balancer {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// A client of the balancer.
struct Client {
    base: String,
    agent: ureq::Agent,
}

impl Client {
    fn new(base: &str) -> Self {
        Client {
            base: base.to_string(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(60)))
                .build()
                .into(),
        }
    }

    /// One POST: the status and body, or the transport's error.
    fn post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        let mut response = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {USER}"))
            .send_json(body)
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    /// A plugin method's call for `chat`: its report, after retrying what
    /// failed on the way (a replica gone: a 502/503 from the balancer, or
    /// the connection cut) but never a call a replica answered.
    fn call(&self, plugin: &str, method: &str, args: Value, chat: &str) -> Value {
        let body = json!({"args": args, "chat_key": chat, "user_id": "ann"});
        let path = format!("/v1/plugins/{plugin}/methods/{method}:call");
        self.retrying(&path, &body, |status, report| {
            assert_eq!(status, 200, "{report}");
        })
    }

    fn retrying(&self, path: &str, body: &Value, check: impl Fn(u16, &Value)) -> Value {
        for _ in 0..50 {
            match self.post(path, body) {
                Ok((502..=504, _)) | Err(_) => std::thread::sleep(Duration::from_millis(100)),
                Ok((status, report)) => {
                    check(status, &report);
                    return report;
                }
            }
        }
        panic!("{path} never reached a replica");
    }
}

/// A replica's count of the calls of `method` its controls saw.
fn calls_seen(server: &Server, method: &str) -> f64 {
    let (status, text) = server.get("/metrics", Some(ADMIN));
    assert_eq!(status, 200, "{text}");
    text.lines()
        .filter(|l| {
            l.starts_with("sandwit_controls_calls_total")
                && l.contains(&format!("method=\"{method}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn replicas_share_the_store_limits_and_budgets_and_survive_a_kill() {
    let db = Database::create();
    let db = db.url.as_str();
    let dir = tempdir("replicas", "balancer");
    let policy = format!(
        "[plugins.services]\ngrant = [\"store\", \"config\"]\n\
         config = {{ token = \"t\" }}\n{}\n\
         [plugins.services.methods.leak_in_error]\nbreaker = {{ failures = 1, recovery_s = 600 }}\n\n\
         [plugins.calc.methods.get_current_time]\nrate_limit = 10\n\n\
         [plugins.calc.methods.calculate_sum]\ncost_per_use = 0.25\n\n\
         [budgets]\nper_chat = 1.0\n",
        pin_line(artifacts::SERVICES)
    );
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    // The first replica takes the database from its policy's `[store]
    // url`, the others from `--store`.
    let policy_naming_the_store = format!("[store]\nurl = \"{db}\"\n{policy}");
    let mut replicas: Vec<Server> = (0..3)
        .map(|i| {
            let (policy, store): (&str, &[&str]) = match i {
                0 => (&policy_naming_the_store, &[]),
                _ => (&policy, &["--store", db]),
            };
            serve_with(
                ("replicas", &format!("r{i}")),
                &[artifacts::CALC, artifacts::SERVICES],
                policy,
                store,
                &tokens,
                &[],
            )
        })
        .collect();
    for replica in &replicas {
        replica.await_ready();
    }
    let bases: Vec<&str> = replicas.iter().map(|r| r.base.as_str()).collect();
    let lb = balancer(&dir, &bases, "/readyz");
    let client = Client::new(&lb.base);

    // A rate limit of 10 a minute gives 10 calls across the three, not 30.
    let mut allowed = 0;
    for _ in 0..30 {
        let report = client.call("calc", "get_current_time", json!({}), "rate");
        match report["ok"].as_bool() {
            Some(true) => allowed += 1,
            _ => assert!(
                report["error"].to_string().contains("calls a minute"),
                "{report}"
            ),
        }
    }
    assert_eq!(allowed, 10, "the rate limit holds across replicas");
    for (i, replica) in replicas.iter().enumerate() {
        assert!(
            calls_seen(replica, "get_current_time") > 0.0,
            "the balancer sent replica {i} none of the calls"
        );
    }

    // A chat's budget of 1.0 pays for four calls at 0.25, wherever they go.
    let mut paid = 0;
    for _ in 0..9 {
        let report = client.call(
            "calc",
            "calculate_sum",
            json!({"num1": 1, "num2": 2}),
            "budget",
        );
        match report["ok"].as_bool() {
            Some(true) => paid += 1,
            _ => assert!(report["error"].to_string().contains("budget"), "{report}"),
        }
    }
    assert_eq!(paid, 4, "the chat's budget holds across replicas");

    // A breaker one replica opens, every replica obeys (within the second
    // a replica trusts what it last read).
    let report = client.call("services", "leak_in_error", json!({}), "breaker");
    assert_eq!(report["ok"], false, "{report}");
    assert!(
        !report["error"].to_string().contains("circuit breaker"),
        "{report}"
    );
    std::thread::sleep(Duration::from_millis(1200));
    for _ in 0..6 {
        let report = client.call("services", "leak_in_error", json!({}), "breaker");
        assert!(
            report["error"].to_string().contains("circuit breaker"),
            "a replica let a call through an open breaker: {report}"
        );
    }

    // Writes under load while a replica is killed: every acknowledged one
    // is kept. A run in flight on the killed replica fails cleanly, and its
    // retry through the balancer is answered by another.
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (base, acknowledged) = (lb.base.clone(), acknowledged.clone());
        std::thread::spawn(move || {
            let client = Client::new(&base);
            for i in 0..60 {
                let (key, value) = (format!("k{i}"), format!("value {i}"));
                let report = client.call(
                    "services",
                    "put",
                    json!({"scope": "chat", "key": key, "value": value}),
                    "writes",
                );
                assert_eq!(report["ok"], true, "{report}");
                acknowledged.lock().unwrap().push((key, value));
            }
        })
    };
    // A slow run in flight on the replica about to be killed.
    let slow_run = {
        let base = replicas[1].base.clone();
        std::thread::spawn(move || {
            let body = json!({
                "code": "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 5:\n    pass\nprint('done')",
                "chat_key": "slow",
            });
            Client::new(&base).post("/v1/runs", &body)
        })
    };
    while acknowledged.lock().unwrap().len() < 15 {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let killed = replicas.remove(1);
    // SAFETY: kill(2) on a child this test started.
    assert_eq!(
        unsafe { libc::kill(killed.child.id() as i32, libc::SIGKILL) },
        0
    );
    drop(killed);
    writer
        .join()
        .expect("every write was acknowledged in the end");
    // The killed replica's run ends with the connection closed: no hang, no
    // half answer.
    match slow_run.join().unwrap() {
        Err(e) => assert!(!e.is_empty()),
        Ok((status, report)) => panic!("a killed replica answered {status}: {report}"),
    }
    let retried = client.retrying(
        "/v1/runs",
        &json!({"code": "print('again')", "chat_key": "slow"}),
        |status, report| assert_eq!(status, 200, "{report}"),
    );
    assert!(retried.to_string().contains("again"), "{retried}");
    let written = acknowledged.lock().unwrap().clone();
    assert_eq!(written.len(), 60);
    for (key, value) in written {
        let report = client.call(
            "services",
            "put",
            json!({"scope": "chat", "key": key, "value": null}),
            "writes",
        );
        assert_eq!(report["result"]["value"], json!(value), "{key}: {report}");
    }

    // A replica told to stop fails /readyz and leaves the balancer: what
    // comes after reaches the one left.
    let (left, draining) = (&replicas[0], &replicas[1]);
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::kill(draining.child.id() as i32, libc::SIGTERM) },
        0
    );
    std::thread::sleep(Duration::from_millis(1000));
    let before = calls_seen(left, "calculate_sum");
    for _ in 0..6 {
        client.call(
            "calc",
            "calculate_sum",
            json!({"num1": 1, "num2": 2}),
            "after",
        );
    }
    assert_eq!(
        calls_seen(left, "calculate_sum") - before,
        6.0,
        "a draining replica got calls"
    );
}

#[test]
fn registry_replicas_publish_and_install_through_a_balancer() {
    let db = Arc::new(Database::create());
    let dir = tempdir("replicas", "registry");
    let blobs = format!("file://{}", dir.join("blobs").display());
    let mut registries: Vec<Registry> = (0..2)
        .map(|i| {
            Registry::launch(
                &format!("replica-{i}"),
                &["--blobs", &blobs],
                Some(db.clone()),
            )
        })
        .collect();
    let token = registries[0].token("ada", "publisher");
    let bases: Vec<&str> = registries.iter().map(|r| r.base.as_str()).collect();
    let lb = balancer(&dir, &bases, "/healthz");
    let key = dir.join("publisher.key");
    let sandwit = |args: &[&str]| sandwit_with_token(&token, args);
    let (code, public, err) = sandwit(&["keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let public = public.trim().to_string();
    let publish = || {
        sandwit(&[
            "publish",
            artifacts::CALC,
            "--registry",
            &lb.base,
            "--key",
            key.to_str().unwrap(),
        ])
    };
    let (code, _, err) = publish();
    assert_eq!(code, Some(0), "{err}");
    // The same version again, whichever replica takes it: refused.
    for _ in 0..2 {
        let (code, _, err) = publish();
        assert_ne!(code, Some(0));
        assert!(
            err.contains("version-exists") || err.contains("already"),
            "{err}"
        );
    }
    let install = |into: &str| {
        let plugins = dir.join(into);
        let (code, _, err) = sandwit(&[
            "install",
            "calc",
            "--registry",
            &lb.base,
            "--dir",
            plugins.to_str().unwrap(),
            "--trust",
            &public,
        ]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            std::fs::read(plugins.join("calc.wasm")).unwrap(),
            std::fs::read(artifacts::CALC).unwrap()
        );
    };
    for round in 0..2 {
        install(&format!("plugins-{round}"));
    }
    // One replica gone: installs go on through the other.
    let killed = registries.remove(0);
    // SAFETY: kill(2) on a child this test started.
    assert_eq!(
        unsafe { libc::kill(killed.child.id() as i32, libc::SIGKILL) },
        0
    );
    drop(killed);
    for round in 2..4 {
        install(&format!("plugins-{round}"));
    }
}

/// A call of `plugin`'s `method` through `client`: its report (status 200)
/// and how long it took.
fn timed_call(client: &Client, plugin: &str, method: &str, args: Value) -> (Value, Duration) {
    let start = Instant::now();
    let body = json!({"args": args, "chat_key": "c", "user_id": "ann"});
    let path = format!("/v1/plugins/{plugin}/methods/{method}:call");
    let (status, report) = client.post(&path, &body).unwrap();
    assert_eq!(status, 200, "{report}");
    (report, start.elapsed())
}

/// A database that stops answering fails the calls that need it (a shared
/// rate limit, the store) well within their deadline, naming the server and
/// the timeout, where they waited for the request's 408; and it spares the
/// calls that do not: with one call slot, a call of a method with neither
/// waits only for the call holding the slot to fail, where it was refused
/// 503. Once the database answers, calls that need it succeed again.
#[test]
fn a_hung_database_fails_the_calls_that_need_it_in_time_and_spares_the_others() {
    let db = Database::create();
    let (proxy, url) = FreezingProxy::postgres(&db.url);
    let policy = format!(
        "[plugins.services]\ngrant = [\"store\", \"config\"]\n\
         config = {{ token = \"t\" }}\n{}\n\
         [plugins.calc.methods.get_current_time]\nrate_limit = 600\n",
        pin_line(artifacts::SERVICES)
    );
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    let server = serve_with(
        ("replicas", "hung-database"),
        &[artifacts::CALC, artifacts::SERVICES],
        &policy,
        &["--store", &url, "--max-runs", "1", "--queue", "1"],
        &tokens,
        &[],
    );
    server.await_ready();
    let client = Client::new(&server.base);
    let limited = || timed_call(&client, "calc", "get_current_time", json!({}));
    let read = || {
        let args = json!({"scope": "chat", "key": "k", "value": null});
        timed_call(&client, "services", "put", args)
    };
    let sum = || {
        timed_call(
            &client,
            "calc",
            "calculate_sum",
            json!({"num1": 1, "num2": 2}),
        )
    };
    let args = json!({"scope": "chat", "key": "k", "value": "kept"});
    let (report, _) = timed_call(&client, "services", "put", args);
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(limited().0["ok"], true);

    proxy.freeze();
    let timed_out = "did not answer within 2 s";
    std::thread::scope(|scope| {
        let waiting = scope.spawn(limited);
        // The rate-limited call holds the only call slot meanwhile.
        std::thread::sleep(Duration::from_millis(500));
        let (report, took) = sum();
        assert_eq!(report["ok"], true, "{report}");
        assert!(took < Duration::from_secs(9), "{took:?}");
        let (report, took) = waiting.join().unwrap();
        assert_eq!(report["ok"], false, "{report}");
        assert!(report["error"].to_string().contains(timed_out), "{report}");
        assert!(took < Duration::from_secs(9), "{took:?}");
    });
    let (report, took) = read();
    assert_eq!(report["ok"], false, "{report}");
    assert!(report["error"].to_string().contains(timed_out), "{report}");
    assert!(took < Duration::from_secs(9), "{took:?}");
    for _ in 0..3 {
        assert_eq!(sum().0["ok"], true);
    }

    proxy.thaw();
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(limited().0["ok"], true);
    let (report, _) = read();
    assert_eq!(report["result"]["value"], "kept", "{report}");
}

/// A registry whose database stops answering fails requests that read it
/// within its client-side statement timeout (10 s), where they waited for
/// the 300 s request timeout, holding a blocking thread each; once the
/// database answers, they are answered again.
#[test]
fn a_registry_whose_database_hangs_fails_requests_in_time_and_recovers() {
    let db = Database::create();
    let (proxy, url) = FreezingProxy::postgres(&db.url);
    let registry = Registry::launch("hung-database", &["--db", &url], None);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let get = || {
        let start = Instant::now();
        let response = agent
            .get(format!("{}/v1/plugins/calc", registry.base))
            .call()
            .expect("the registry answers within a minute");
        (response.status().as_u16(), start.elapsed())
    };
    assert_eq!(get().0, 404, "no plugin is published");

    proxy.freeze();
    let (status, took) = get();
    assert_eq!(status, 500);
    assert!(took < Duration::from_secs(30), "{took:?}");

    proxy.thaw();
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(get().0, 404);
}

#[test]
fn a_session_alternating_between_replicas_sees_each_turn_before_it() {
    let db = Database::create();
    let dir = tempdir("replicas", "sessions");
    let key = dir.join("session.key");
    std::fs::write(&key, [5u8; 32]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    let key = key.to_str().unwrap();
    let replicas: Vec<Server> = (0..2)
        .map(|i| {
            let args = ["--store", db.url.as_str(), "--session-key-file", key];
            serve_with(("replicas", &format!("s{i}")), &[], "", &args, &tokens, &[])
        })
        .collect();
    for replica in &replicas {
        replica.await_ready();
    }
    let run = |replica: &Server, code: &str| {
        let body = json!({"code": code, "chat_key": "turns", "session": "s"});
        let (status, outcome) = replica.post("/v1/runs", USER, body);
        assert_eq!(status, 200, "{outcome}");
        outcome
    };
    let first = run(&replicas[0], "history = [0]");
    assert_eq!(first["status"], "ok", "{first}");
    assert!(
        first["session"]["stored_bytes"].as_u64().unwrap() > 0,
        "{first}"
    );
    for turn in 1..20 {
        let replica = &replicas[turn % 2];
        let outcome = run(
            replica,
            &format!(
                "assert history[-1] == {}\nhistory.append({turn})\nlen(history)",
                turn - 1
            ),
        );
        assert_eq!(outcome["status"], "ok", "turn {turn}: {outcome}");
        assert_eq!(outcome["result"], turn + 1);
        assert_eq!(
            outcome["session"]["restored"], true,
            "turn {turn}: {outcome}"
        );
    }
}

#[test]
fn a_run_paused_on_one_replica_is_resumed_on_the_other_once() {
    let db = Database::create();
    let dir = tempdir("replicas", "pauses");
    let key = dir.join("session.key");
    std::fs::write(&key, [6u8; 32]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    let key = key.to_str().unwrap();
    let policy = "[approval]\npause_for = [\"dangerous\"]\n\n\
                  [plugins.calc.methods.calculate_sum]\ndangerous = true\n";
    let replicas: Vec<Server> = (0..2)
        .map(|i| {
            let args = ["--store", db.url.as_str(), "--session-key-file", key];
            let dir = ("replicas", &*format!("p{i}"));
            serve_with(dir, &[artifacts::CALC], policy, &args, &tokens, &[])
        })
        .collect();
    for replica in &replicas {
        replica.await_ready();
    }
    let code = "first = calculate_sum(num1=2, num2=2)\n\
                second = calculate_sum(num1=first, num2=1)\nresult = [first, second]";
    let body = json!({"code": code, "chat_key": "approvals"});
    let (status, outcome) = replicas[0].post("/v1/runs", USER, body);
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "paused", "{outcome}");
    assert_eq!(outcome["paused"]["method"], "calculate_sum");
    assert_eq!(outcome["paused"]["args"], json!({"num1": 2, "num2": 2}));
    let token = outcome["paused"]["token"].as_str().unwrap().to_string();

    // The other replica resumes it: the first call returns what the person
    // gave, and the second pauses again, with a new token.
    let resume = |replica: &Server, token: &str, answer: Value| {
        let mut body = json!({"chat_key": "approvals"});
        body.as_object_mut()
            .unwrap()
            .extend(answer.as_object().unwrap().clone());
        replica.post(&format!("/v1/runs/{token}:resume"), USER, body)
    };
    let (status, outcome) = resume(&replicas[1], &token, json!({"result": 10}));
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "paused", "{outcome}");
    assert_eq!(outcome["paused"]["args"], json!({"num1": 10, "num2": 1}));
    let second = outcome["paused"]["token"].as_str().unwrap().to_string();
    assert_ne!(second, token);

    // The first token is spent, on either replica.
    let (status, outcome) = resume(&replicas[0], &token, json!({"approve": true}));
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["error"]["type"], "ResumeRefused", "{outcome}");

    // Back on the first replica, approved: the call is made.
    let (status, outcome) = resume(&replicas[0], &second, json!({"approve": true}));
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["result"], json!([10, 11]));

    let (status, error) = resume(&replicas[1], &second, json!({"approve": true, "deny": "x"}));
    assert_eq!(status, 400, "{error}");
    let (status, _) = replicas[1].post("/v1/runs/abc:pause", USER, json!({}));
    assert_eq!(status, 404);

    // The client's own function: each call pauses, and the client answers
    // it on either replica, with an exception or a value.
    let code = "try:\n    ask('Deploy?', level=2)\nexcept PermissionError as e:\n    \
                refused = str(e)\nresult = [refused, ask()]";
    let functions = json!([{"name": "ask", "description": "Asks the user."}]);
    let body = json!({"code": code, "chat_key": "approvals", "functions": functions});
    let (status, outcome) = replicas[0].post("/v1/runs", USER, body);
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["status"], "paused", "{outcome}");
    assert_eq!(
        (&outcome["paused"]["plugin"], &outcome["paused"]["method"]),
        (&json!("client"), &json!("ask"))
    );
    assert_eq!(
        outcome["paused"]["args"],
        json!({"args": ["Deploy?"], "kwargs": {"level": 2}})
    );
    let token = outcome["paused"]["token"].as_str().unwrap().to_string();
    let raised = json!({"raise": {"type": "PermissionError", "message": "not now"}});
    let (status, outcome) = resume(&replicas[1], &token, raised);
    assert_eq!(outcome["status"], "paused", "{status} {outcome}");
    let token = outcome["paused"]["token"].as_str().unwrap().to_string();
    let (status, outcome) = resume(&replicas[0], &token, json!({"approve": true}));
    assert_eq!(
        outcome["error"]["type"], "ResumeRefused",
        "{status} {outcome}"
    );
    let (status, outcome) = resume(&replicas[0], &token, json!({"result": "later"}));
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(outcome["result"], json!(["not now", "later"]), "{outcome}");
}
