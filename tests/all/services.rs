//! Host services: capabilities (requested ∩ granted), the plugin store,
//! configuration and secrets, chat messages and outbound HTTP.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandwit::store::{Entry, Namespace, Scope, SqliteStore, StoreBackend};
use sandwit::{
    AgentCtx, CallErrorKind, CallLimits, ChatMessage, ChatSink, Host, LimitKind, LoadError,
    MethodResult, Plugin, PluginEvent, Policy, ServiceFuture, StoreLocation, Toolbox, Value,
};
use serde_json::json;

use crate::common::{
    args, artifacts, assert_ended_soon_after, cache_dir, ctx, example_policy, host, load, pinned,
};

const TOKEN: &str = "tok-SECRET-4242";

/// A host whose policy is `policy` with the test components pinned.
fn host_with(policy: Policy) -> Host {
    Host::builder()
        .cache_dir(cache_dir())
        .policy(pinned(policy))
        .build()
        .unwrap()
}

/// Everything the `services` fixture asks for, with `port` for HTTP.
fn full_policy(port: u16) -> Policy {
    let mut policy = Policy::from_toml(&format!(
        r#"
        [plugins.services]
        grant = ["store", "config", "chat", "http:127.0.0.1:{port}"]
        config = {{ token = "{TOKEN}", colour = "green" }}
        "#
    ))
    .unwrap();
    policy.grant("notes", ["store"]).unwrap();
    policy
}

async fn call(plugin: &Plugin, method: &str, a: serde_json::Value) -> sandwit::CallReport {
    let budget = sandwit::Budget::from_limits(plugin.limits());
    plugin.call_within(&ctx(), method, args(a), budget).await
}

fn tool(report: &sandwit::CallReport) -> &Value {
    match &report.result {
        Ok(MethodResult::Tool(v)) => v,
        other => panic!("not a tool result: {other:?}"),
    }
}

fn denied_message(report: &sandwit::CallReport) -> String {
    match &report.result {
        Err(e) => match &e.kind {
            CallErrorKind::Denied { message } => message.clone(),
            other => panic!("not denied: {other:?}"),
        },
        Ok(r) => panic!("not denied: {r:?}"),
    }
}

/// How long the test server's slow answers wait: far past every timeout
/// and deadline the tests set and the time they allow for those
/// ([`assert_ended_soon_after`]), so an answer that arrives was not cut.
const SLOW: Duration = Duration::from_secs(10);

/// A loopback HTTP server on its own threads: `/v1/current?city=X` answers
/// weather JSON (echoing the API key header's presence), `/big` 64 KiB,
/// `/slow` after [`SLOW`], `/trickle` its head and one byte at once, the
/// other after [`SLOW`].
fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = Vec::new();
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    head.push(std::mem::take(&mut line));
                }
                let path = head
                    .first()
                    .and_then(|l| l.split(' ').nth(1))
                    .unwrap_or("/")
                    .to_string();
                let keyed = head
                    .iter()
                    .any(|h| h.to_ascii_lowercase().starts_with("x-api-key: "));
                let body = if path.starts_with("/v1/current") {
                    let city = path.split("city=").nth(1).unwrap_or("?");
                    format!(
                        r#"{{"temperature_c": 17.5, "summary": "Clear in {city}, keyed={keyed}"}}"#
                    )
                    .into_bytes()
                } else if path == "/big" {
                    vec![b'x'; 64 << 10]
                } else if path == "/slow" {
                    std::thread::sleep(SLOW);
                    b"late".to_vec()
                } else if path == "/trickle" {
                    // The head and a first byte at once, the rest later.
                    let mut stream = stream;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nt"
                    );
                    let _ = stream.flush();
                    std::thread::sleep(SLOW);
                    let _ = stream.write_all(b"t");
                    return;
                } else {
                    b"hello".to_vec()
                };
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            });
        }
    });
    port
}

// ---- capabilities ---------------------------------------------------------

#[tokio::test]
async fn each_capability_works_when_granted_and_is_denied_otherwise() {
    let port = http_server();
    let granted = load(&host_with(full_policy(port)), artifacts::SERVICES).await;
    let bare = load(&host_with(Policy::default()), artifacts::SERVICES).await;
    assert_eq!(bare.grants().iter().count(), 0);
    let url = format!("http://127.0.0.1:{port}/hello");
    let cases = [
        (
            "store",
            "put",
            json!({"scope": "global", "key": "k", "value": "v"}),
        ),
        ("config", "read_config", json!({"key": "colour"})),
        ("chat", "say_hello", json!({})),
        ("http:127.0.0.1:", "fetch", json!({"url": url})),
    ];
    for (cap, method, a) in cases {
        let ok = call(&granted, method, a.clone()).await;
        assert!(
            ok.result.is_ok(),
            "{method} with {cap} granted: {:?}",
            ok.result
        );

        let refused = call(&bare, method, a).await;
        let message = denied_message(&refused);
        assert!(
            message.contains(cap) || method == "fetch",
            "{method}: the error names `{cap}`: {message}"
        );
        let denial = refused
            .events
            .iter()
            .find_map(|e| match e {
                PluginEvent::Denied { capability, .. } => Some(capability.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{method}: the denial is recorded: {:?}", refused.events));
        assert!(denial.starts_with(cap), "{denial}");
    }
    // The HTTP refusal names the capability the plugin would need.
    let refused = call(&bare, "fetch", json!({"url": url})).await;
    assert!(
        refused.events.contains(&PluginEvent::Denied {
            capability: format!("http:127.0.0.1:{port}"),
            request: format!("GET {url}"),
        }),
        "{:?}",
        refused.events
    );
}

#[tokio::test]
async fn effective_capabilities_are_requested_and_granted() {
    let mut policy = Policy::default();
    // Granted but not requested (`config` is requested; `chat` too, but the
    // grant below is for another port).
    policy
        .grant("services", ["store", "http:127.0.0.1:9", "http:other.org"])
        .unwrap();
    let plugin = load(&host_with(policy), artifacts::SERVICES).await;
    let caps: Vec<String> = plugin.grants().iter().map(|c| c.to_string()).collect();
    assert_eq!(caps, ["store", "http:127.0.0.1:9"]);
    let requested: Vec<String> = plugin
        .manifest()
        .capabilities
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        requested,
        [
            "store",
            "config",
            "chat",
            "http:127.0.0.1:*",
            "http:localhost:*",
            "http:example.com"
        ]
    );
}

#[test]
fn a_policy_with_an_unknown_capability_or_key_is_refused() {
    let e = Policy::from_toml("[plugins.notes]\ngrant = [\"store\", \"filesystem\"]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown capability `filesystem`"), "{e}");
    assert!(e.contains("line 2"), "{e}");
    let e = Policy::from_toml("[plugins.notes]\ngrnt = []")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `grnt`"), "{e}");
    let mut p = Policy::default();
    assert!(p.grant("notes", ["root"]).is_err());
}

// ---- the store ------------------------------------------------------------

fn ctx_of(chat: &str, user: &str) -> AgentCtx {
    AgentCtx {
        user_id: Some(user.into()),
        ..AgentCtx::new(chat)
    }
}

async fn put(plugin: &Plugin, ctx: &AgentCtx, scope: &str, value: Option<&str>) -> Value {
    let budget = sandwit::Budget::from_limits(plugin.limits());
    let report = plugin
        .call_within(
            ctx,
            "put",
            args(json!({"scope": scope, "key": "k", "value": value})),
            budget,
        )
        .await;
    tool(&report).clone()
}

#[tokio::test]
async fn the_store_is_scoped_by_chat_user_and_plugin() {
    let store: Arc<SqliteStore> = Arc::new(SqliteStore::in_memory().unwrap());
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(pinned(full_policy(1)))
        .store(store.clone())
        .build()
        .unwrap();
    let plugin = load(&host, artifacts::SERVICES).await;
    let (a1, a2, b1) = (
        ctx_of("chat-a", "u1"),
        ctx_of("chat-b", "u1"),
        ctx_of("chat-a", "u2"),
    );
    for scope in ["chat", "user", "chat-user", "global"] {
        put(&plugin, &a1, scope, Some(scope)).await;
    }
    let text = |s: &str| Value::Text(s.into());
    // Another chat, same user.
    assert_eq!(put(&plugin, &a2, "chat", None).await, Value::Null);
    assert_eq!(put(&plugin, &a2, "user", None).await, text("user"));
    assert_eq!(put(&plugin, &a2, "chat-user", None).await, Value::Null);
    assert_eq!(put(&plugin, &a2, "global", None).await, text("global"));
    // Same chat, another user.
    assert_eq!(put(&plugin, &b1, "chat", None).await, text("chat"));
    assert_eq!(put(&plugin, &b1, "user", None).await, Value::Null);
    assert_eq!(put(&plugin, &b1, "chat-user", None).await, Value::Null);
    // Another plugin sees none of it: the namespace's plugin is the host's
    // id for the caller, never something the guest says.
    let other = Namespace {
        plugin: "notes".into(),
        scope: Scope::Global,
        owner: String::new(),
        tenant: String::new(),
    };
    assert_eq!(store.get(&other, "k").await.unwrap(), None);
    let own = Namespace {
        plugin: "services".into(),
        ..other
    };
    assert_eq!(
        store.get(&own, "k").await.unwrap(),
        Some(Entry::Text("global".into()))
    );
    // A user scope without a user is a clear error.
    let anonymous = AgentCtx::new("chat-a");
    let budget = sandwit::Budget::from_limits(plugin.limits());
    let report = plugin
        .call_within(
            &anonymous,
            "put",
            args(json!({"scope": "user", "key": "k"})),
            budget,
        )
        .await;
    let err = report.result.unwrap_err().to_string();
    assert!(err.contains("scope `user` needs a user"), "{err}");
}

#[tokio::test]
async fn the_policy_names_the_store() {
    let dir = tempdir("policy-url");
    let file = dir.join("store.db");
    let mut policy = full_policy(1);
    policy.store.url = Some(StoreLocation::Sqlite(file.clone()));
    let host = host_with(policy);
    let plugin = load(&host, artifacts::SERVICES).await;
    put(&plugin, &ctx(), "global", Some("kept")).await;
    drop((plugin, host));
    let ns = Namespace {
        plugin: "services".into(),
        scope: Scope::Global,
        owner: String::new(),
        tenant: String::new(),
    };
    let reopened = SqliteStore::open(&file).unwrap();
    assert_eq!(
        reopened.get(&ns, "k").await.unwrap(),
        Some(Entry::Text("kept".into()))
    );

    // A database this crate cannot open is refused, not swapped for memory.
    let mut policy = Policy::default();
    policy.store.url = Some(StoreLocation::named("postgres://u:pw@db.invalid/plugins"));
    let err = Host::builder().policy(policy).build().err().unwrap();
    let err = format!("{err:#}");
    assert!(
        err.contains("`[store] url` names a PostgreSQL database"),
        "{err}"
    );
    assert!(!err.contains("pw@"), "{err}");
}

#[tokio::test]
async fn the_store_caps_values_and_plugins() {
    let mut policy = full_policy(1);
    policy.store.limits.max_value_bytes = 100;
    policy.store.limits.max_plugin_bytes = 1_000;
    let plugin = load(&host_with(policy), artifacts::SERVICES).await;
    let big = "x".repeat(101);
    let report = call(
        &plugin,
        "put",
        json!({"scope": "global", "key": "k", "value": big}),
    )
    .await;
    let err = report.result.unwrap_err().to_string();
    assert!(
        err.contains("the value is 101 bytes, more than the limit of 100"),
        "{err}"
    );

    let mut failed = None;
    for i in 0..20 {
        let key = format!("key-{i}");
        let r = call(
            &plugin,
            "put",
            json!({"scope": "global", "key": key, "value": "y".repeat(90)}),
        )
        .await;
        if let Err(e) = r.result {
            failed = Some((i, e.to_string()));
            break;
        }
    }
    let (i, err) = failed.expect("the per-plugin cap stops the writes");
    // Each entry counts its row's 64 bytes, key (5-6) and value (90).
    assert_eq!(i, 6, "six ~160-byte entries fit in 1,000 bytes");
    assert!(err.contains("more than its limit of 1000 bytes"), "{err}");
}

#[tokio::test]
async fn a_kill_9_of_a_writing_process_loses_nothing_committed() {
    let dir = tempdir("kill9");
    let store = dir.join("store.db");
    let writer = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/store_writer");
    let mut child = Command::new(&writer)
        .arg(&store)
        .arg(artifacts::NOTES)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", writer.display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut committed = Vec::new();
    while committed.len() < 40 {
        committed.push(lines.next().unwrap().unwrap());
    }
    child.kill().unwrap(); // SIGKILL, while it goes on writing
    child.wait().unwrap();
    // Lines the child printed before the kill landed are committed too.
    committed.extend(lines.map_while(Result::ok));

    let reopened = SqliteStore::open(&store).unwrap();
    let ns = Namespace {
        plugin: "notes".into(),
        scope: Scope::User,
        owner: "writer".into(),
        tenant: String::new(),
    };
    let keys = reopened.keys(&ns, 10_000).await.unwrap();
    for n in &committed {
        let key = format!("note/{:010}", n.parse::<u64>().unwrap() + 1);
        assert_eq!(
            reopened.get(&ns, &key).await.unwrap(),
            Some(Entry::Text(format!("note {n}"))),
            "note {n} was committed before the kill ({} keys survive)",
            keys.len()
        );
    }
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("services")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---- config and secrets ---------------------------------------------------

#[tokio::test]
async fn configuration_is_checked_against_the_schema_at_load() {
    let policy = Policy::from_toml(
        r#"
        [plugins.services]
        config = { colour = "blue", size = 3 }
        [plugins.weather]
        config = { base_url = "ftp://x" }
        [plugins.calc]
        config = { anything = 1 }
        "#,
    )
    .unwrap();
    let host = host_with(policy);
    let problems = |err: LoadError| match err {
        LoadError::Config { problems, .. } => problems.join("\n"),
        other => panic!("not a config error: {other}"),
    };
    let services = problems(
        host.load_plugin_file(artifacts::SERVICES)
            .await
            .err()
            .unwrap(),
    );
    assert!(
        services.contains("/colour") && services.contains("\"blue\""),
        "{services}"
    );
    assert!(services.contains("size"), "{services}");
    let weather = problems(
        host.load_plugin_file(artifacts::WEATHER)
            .await
            .err()
            .unwrap(),
    );
    assert!(
        weather.contains("\"api_key\" is a required property"),
        "{weather}"
    );
    assert!(weather.contains("/base_url"), "{weather}");
    let calc = problems(host.load_plugin_file(artifacts::CALC).await.err().unwrap());
    assert!(calc.contains("declares no config schema"), "{calc}");
}

/// Collects the host's `tracing` output on this thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_secret_never_appears_in_logs_events_results_or_outcomes() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let host = host_with(full_policy(1));
    let plugin = load(&host, artifacts::SERVICES).await;
    // The plugin itself reads the real value.
    let read = call(&plugin, "read_config", json!({"key": "token"})).await;
    assert_eq!(tool(&read), &Value::Text(sandwit::REDACTED.into()));

    let leak = call(&plugin, "leak", json!({})).await;
    assert_eq!(tool(&leak), &Value::Text("returned token [secret]".into()));
    let events = format!("{:?}", leak.events);
    assert!(events.contains("the token is [secret]"), "{events}");
    assert!(events.contains("printed token [secret]"), "{events}");
    assert!(events.contains("chat token [secret]"), "{events}");

    let err = call(&plugin, "leak_in_error", json!({}))
        .await
        .result
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `services`, method `leak_in_error`: failed: failed with token [secret]"
    );

    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let plugins = Toolbox::new(&[plugin]).unwrap();
    let code = "t = leak()\nprint(t)\nread_config('token')\nleak_in_error()";
    let outcome = python.run(&ctx(), &plugins, code).await;
    let everything = format!("{outcome:?}");
    assert!(
        everything.contains("returned token [secret]"),
        "{everything}"
    );

    let log = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(
        log.contains("the token is [secret]"),
        "the log is captured: {log}"
    );
    for text in [&events, &everything, &log, &format!("{:?}", read.events)] {
        assert!(!text.contains(TOKEN), "the secret leaked: {text}");
    }
}

// ---- chat -----------------------------------------------------------------

#[derive(Default)]
struct Inbox(Mutex<Vec<(String, String, ChatMessage)>>);

impl ChatSink for Inbox {
    fn deliver<'a>(
        &'a self,
        plugin: &'a str,
        ctx: &'a AgentCtx,
        message: &'a ChatMessage,
    ) -> ServiceFuture<'a, Result<(), String>> {
        self.0
            .lock()
            .unwrap()
            .push((plugin.into(), ctx.chat_key.clone(), message.clone()));
        Box::pin(std::future::ready(Ok(())))
    }
}

#[tokio::test]
async fn chat_messages_reach_the_sink_and_the_events() {
    let inbox = Arc::new(Inbox::default());
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(example_policy())
        .chat_sink(inbox.clone())
        .build()
        .unwrap();
    let messenger = load(&host, artifacts::MESSENGER).await;
    let report = call(
        &messenger,
        "remind_agent",
        json!({"note": "check the deploy"}),
    )
    .await;
    assert!(report.result.is_ok(), "{:?}", report.result);
    let system = ChatMessage::System {
        message: "Reminder: check the deploy".into(),
        trigger_agent: true,
    };
    assert_eq!(
        report.events,
        [PluginEvent::Chat {
            message: system.clone()
        }]
    );
    assert_eq!(
        *inbox.0.lock().unwrap(),
        [("messenger".to_string(), "chat-1".to_string(), system)]
    );

    let services = load(&host_with(full_policy(1)), artifacts::SERVICES).await;
    let report = call(&services, "say_hello", json!({})).await;
    let json = serde_json::to_value(&report.events).unwrap();
    assert_eq!(
        json,
        json!([
            {"type": "chat", "message": {"kind": "text", "text": "hello"}},
            {"type": "chat", "message": {"kind": "image", "mime_type": "image/png", "bytes": 4}},
        ])
    );
}

// ---- HTTP -----------------------------------------------------------------

fn weather_policy(port: u16) -> Policy {
    Policy::from_toml(&format!(
        r#"
        [plugins.weather]
        grant = ["config", "http:127.0.0.1:{port}"]
        config = {{ base_url = "http://127.0.0.1:{port}", api_key = "{TOKEN}" }}
        "#
    ))
    .unwrap()
}

#[tokio::test]
async fn an_allowed_loopback_host_works() {
    let port = http_server();
    let weather = load(&host_with(weather_policy(port)), artifacts::WEATHER).await;
    let report = call(&weather, "current_weather", json!({"city": "Porto"})).await;
    assert_eq!(
        tool(&report),
        &Value::Object(vec![
            ("city".into(), Value::Text("Porto".into())),
            ("temperature_c".into(), Value::Float(17.5)),
            (
                "summary".into(),
                Value::Text("Clear in Porto, keyed=true".into())
            ),
        ])
    );
}

#[tokio::test]
async fn a_host_or_port_not_granted_is_denied() {
    let (granted, other) = (http_server(), http_server());
    let services = load(&host_with(full_policy(granted)), artifacts::SERVICES).await;
    for url in [
        format!("http://127.0.0.1:{other}/hello"),
        "http://example.com/".to_string(),
        format!("http://localhost:{granted}/hello"),
    ] {
        let report = call(&services, "fetch", json!({"url": url})).await;
        let message = denied_message(&report);
        assert!(message.contains("did not grant"), "{url}: {message}");
    }
    let ok = call(
        &services,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{granted}/hello")}),
    )
    .await;
    let Value::Object(fields) = tool(&ok) else {
        panic!("{:?}", ok.result)
    };
    assert!(
        fields.contains(&("body".into(), Value::Text("hello".into()))),
        "{fields:?}"
    );
}

#[tokio::test]
async fn a_name_granted_that_resolves_to_an_internal_address_is_refused() {
    let port = http_server();
    let policy = |grants: &[String]| {
        let mut policy = Policy::default();
        policy
            .grant("services", grants.iter().map(String::as_str))
            .unwrap();
        policy
    };
    let url = format!("http://localhost:{port}/hello");
    // The name alone: refused, the event naming an address it resolved to.
    let services = load(
        &host_with(policy(&[format!("http:localhost:{port}")])),
        artifacts::SERVICES,
    )
    .await;
    let report = call(&services, "fetch", json!({"url": url})).await;
    let message = denied_message(&report);
    assert!(message.contains("internal address"), "{message}");
    let needed: Vec<&str> = report
        .events
        .iter()
        .filter_map(|e| match e {
            PluginEvent::Denied { capability, .. } => Some(capability.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        needed == [format!("http:127.0.0.1:{port}")] || needed == [format!("http:[::1]:{port}")],
        "the event names the address to grant: {needed:?}"
    );
    // The name and the loopback addresses it may resolve to: reached.
    let services = load(
        &host_with(policy(&[
            format!("http:localhost:{port}"),
            format!("http:127.0.0.1:{port}"),
            format!("http:[::1]:{port}"),
        ])),
        artifacts::SERVICES,
    )
    .await;
    let ok = call(&services, "fetch", json!({"url": url})).await;
    assert!(ok.result.is_ok(), "{:?}", ok.result);
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_cut_at_the_timeout() {
    let port = http_server();
    let mut policy = full_policy(port);
    policy.http.timeout_ms = 300;
    let services = load(&host_with(policy), artifacts::SERVICES).await;
    let start = Instant::now();
    let report = call(
        &services,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/trickle")}),
    )
    .await;
    let err = report.result.unwrap_err().to_string();
    assert!(err.contains("read timeout"), "{err}");
    assert_ended_soon_after(start.elapsed(), Duration::from_millis(300));
}

#[tokio::test]
async fn an_oversized_response_is_cut_at_the_cap() {
    let port = http_server();
    let mut policy = full_policy(port);
    policy.http.max_response_bytes = 1_000;
    let services = load(&host_with(policy), artifacts::SERVICES).await;
    let report = call(
        &services,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/big")}),
    )
    .await;
    let err = report.result.unwrap_err().to_string();
    assert!(err.contains("1000"), "{err}");
}

#[tokio::test]
async fn a_slow_response_is_cut_at_the_timeout_or_the_deadline() {
    let port = http_server();
    let url = format!("http://127.0.0.1:{port}/slow");

    let mut policy = full_policy(port);
    policy.http.timeout_ms = 300;
    let services = load(&host_with(policy), artifacts::SERVICES).await;
    let start = Instant::now();
    let err = call(&services, "fetch", json!({"url": url}))
        .await
        .result
        .unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
    assert_ended_soon_after(start.elapsed(), Duration::from_millis(300));

    // The call's own deadline comes first.
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(pinned(full_policy(port)))
        .limits(CallLimits {
            time: Duration::from_millis(500),
            ..CallLimits::default()
        })
        .build()
        .unwrap();
    let services = load(&host, artifacts::SERVICES).await;
    let start = Instant::now();
    let err = call(&services, "fetch", json!({"url": url}))
        .await
        .result
        .unwrap_err();
    assert!(
        matches!(
            err.kind,
            CallErrorKind::LimitExceeded {
                limit: LimitKind::Time,
                ..
            }
        ) || err.to_string().contains("timed out"),
        "{err}"
    );
    assert_ended_soon_after(start.elapsed(), Duration::from_millis(500));
}

// ---- from Python ----------------------------------------------------------

#[tokio::test]
async fn a_python_run_remembers_and_a_later_run_recalls() {
    let python = host().load_python_file(artifacts::PYTHON).await.unwrap();
    let notes = load(host(), artifacts::NOTES).await;
    let plugins = Toolbox::new(&[notes]).unwrap();
    let ctx = ctx_of("py-chat", "py-user");
    let first = python
        .run(&ctx, &plugins, "print(remember('the door code is 1234'))")
        .await;
    assert_eq!(first.stdout, "1\n", "{first:?}");
    let second = python
        .run(
            &ctx,
            &plugins,
            "print(recall('door'))\nprint(len(recall()))",
        )
        .await;
    assert_eq!(
        second.stdout, "['the door code is 1234']\n1\n",
        "{second:?}"
    );
    let stranger = python
        .run(
            &ctx_of("py-chat", "someone-else"),
            &plugins,
            "print(recall())",
        )
        .await;
    assert_eq!(stranger.stdout, "[]\n");
}
