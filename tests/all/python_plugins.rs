//! The example Python plugins (sdk/python/examples), built with the Python
//! SDK against its world (the 0.2 plugin world and `wasi:http`): their
//! methods from sandboxed AI code with the chat, config, store and HTTP
//! capabilities, and their lifecycle hooks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use sandwit::{
    AgentCtx, CallErrorKind, ContentPart, Host, MethodResult, Plugin, Policy, RunStatus, Toolbox,
};
use tokio::sync::OnceCell;

use crate::common::{args, artifacts, cache_dir, ctx, digest, host, load, until_preparer};

/// A host granting the Python examples what they ask for: dice rolls d1s.
fn granting_host() -> &'static Host {
    static HOST: std::sync::OnceLock<Host> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let policy = Policy::from_toml(&format!(
            r#"
            [plugins.dice]
            sha256 = ["{}"]
            grant = ["chat", "config"]
            config = {{ DEFAULT_SIDES = 1 }}

            [plugins.memo]
            sha256 = ["{}"]
            grant = ["store"]
            "#,
            digest(artifacts::DICE),
            digest(artifacts::MEMO),
        ))
        .unwrap();
        Host::builder()
            .cache_dir(cache_dir())
            .policy(policy)
            .build()
            .unwrap()
    })
}

async fn plugins() -> &'static (Plugin, Plugin) {
    static PLUGINS: OnceCell<(Plugin, Plugin)> = OnceCell::const_new();
    PLUGINS
        .get_or_init(|| async {
            (
                load(granting_host(), artifacts::DICE).await,
                load(granting_host(), artifacts::MEMO).await,
            )
        })
        .await
}

#[tokio::test]
async fn dice_from_sandboxed_code_with_chat_and_config() {
    let (dice, _) = plugins().await;
    assert!(dice.has_lifecycle());
    let manifest = dice.manifest();
    let roll = manifest.method("roll_dice").unwrap();
    assert!(roll.docstring.contains("Args:\n    event_name:"));
    assert_eq!(roll.params[1].name, "difficulty");
    assert!(!roll.params[1].required);
    let python = granting_host()
        .load_python_file(artifacts::PYTHON)
        .await
        .unwrap();
    let set = Toolbox::new(std::slice::from_ref(dice)).unwrap();
    let outcome = python
        .run(
            &ctx(),
            &set,
            "print(roll_dice('open the door', 1))\nshow_dice(count=2, sides=6)",
        )
        .await;
    assert_eq!(outcome.status, RunStatus::AgentHandoff, "{outcome:?}");
    // The operator's DEFAULT_SIDES = 1 replaced the class's default of 20.
    assert!(
        outcome
            .stdout
            .contains("open the door: rolled 1 (d1) against 1: success"),
        "{}",
        outcome.stdout
    );
    let events: Vec<String> = outcome.events.iter().map(ToString::to_string).collect();
    assert!(
        events
            .iter()
            .any(|e| e.contains("chat") && e.contains("rolled 1 (d1)")),
        "{events:?}"
    );
    let handoff = outcome.handoff.unwrap();
    let MethodResult::MultimodalAgent(parts) = handoff.result else {
        panic!("{:?}", handoff.result)
    };
    assert!(matches!(&parts[0], ContentPart::Text(t) if t.starts_with("Rolled 2d6: [")));
    assert!(matches!(&parts[1], ContentPart::Image(m) if m.mime_type == "image/svg+xml"));
}

#[tokio::test]
async fn a_python_method_without_its_capability_is_denied() {
    // The shared host grants dice nothing: its config read is refused.
    let dice = load(host(), artifacts::DICE).await;
    let err = dice
        .call(
            &ctx(),
            "roll_dice",
            args(serde_json::json!({"event_name": "x"})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err.kind, CallErrorKind::Denied { message } if message.contains("config")),
        "{err}"
    );
    let err = dice
        .call(
            &ctx(),
            "show_dice",
            args(serde_json::json!({"count": "two"})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind, CallErrorKind::InvalidArguments { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn memo_keeps_per_user_memos_and_injects_their_count() {
    let (_, memo) = plugins().await;
    let set = Toolbox::new(std::slice::from_ref(memo)).unwrap();
    let ada = AgentCtx {
        user_id: Some("ada-python-plugins".into()),
        ..AgentCtx::new("chat-memo")
    };
    let python = granting_host()
        .load_python_file(artifacts::PYTHON)
        .await
        .unwrap();
    let seen = set.in_context(&ada).await;
    assert!(seen.injected.is_empty(), "{:?}", seen.injected);
    let outcome = python
        .run(
            &ada,
            &seen.methods,
            "clear_memos()\nsave_memo('Ada prefers tea.')\nprint(save_memo('Ada likes graphs.'))\nprint(list_memos())",
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(
        outcome.stdout,
        "2\n['Ada prefers tea.', 'Ada likes graphs.']\n"
    );
    let seen = set.in_context(&ada).await;
    assert_eq!(
        seen.injected,
        [(
            "memo".to_string(),
            "The user has 2 memo(s) saved; list_memos() reads them.".to_string()
        )]
    );
    assert!(
        seen.prompt()
            .contains("[plugin `memo`]\nThe user has 2 memo(s)")
    );
    assert!(seen.prompt().contains("def save_memo(memo"));
    // Another user of the same chat sees none of Ada's memos.
    assert_no_memos(memo, "bob-python-plugins", "chat-memo").await;
    // Without a user, collect_methods offers nothing: not listed, not callable.
    let nobody = set.in_context(&AgentCtx::new("chat-memo")).await;
    assert_eq!(nobody.methods.methods().count(), 0);
    let outcome = python
        .run(&AgentCtx::new("chat-memo"), &nobody.methods, "list_memos()")
        .await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
}

#[tokio::test]
async fn a_run_takes_a_python_plugin_instance_made_ahead_and_leaves_it_nothing() {
    // A host of its own: the count of instances taken is the memo plugin's.
    let policy = Policy::from_toml(&format!(
        "[plugins.memo]\nsha256 = [\"{}\"]\ngrant = [\"store\"]\n",
        digest(artifacts::MEMO)
    ))
    .unwrap();
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(policy)
        .prepared_interpreters(1)
        .build()
        .unwrap();
    let memo = load(&host, artifacts::MEMO).await;
    let set = Toolbox::new(std::slice::from_ref(&memo)).unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let ada = AgentCtx {
        user_id: Some("ada-made-ahead".into()),
        ..AgentCtx::new("chat-made-ahead")
    };
    // The first run names the plugins: none is made before.
    assert_eq!(memo.prepared_instances(), 0);
    let code = "clear_memos()\nprint(save_memo('one'))";
    let outcome = python.run(&ada, &set, code).await;
    assert_eq!(
        (outcome.status, &*outcome.stdout),
        (RunStatus::Ok, "1\n"),
        "{outcome:?}"
    );
    // Then the thread makes one for the next run's first call.
    let made = || memo.prepared_instances() == 1;
    until_preparer(&python, made, "a memo instance made ahead").await;
    let taken = memo.prepared_instances_taken();
    let outcome = python
        .run(&ada, &set, "print(save_memo('two'))\nprint(list_memos())")
        .await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.stdout, "2\n['one', 'two']\n");
    assert_eq!(memo.prepared_instances_taken(), taken + 1);
    // A direct call takes one too, with its own context: another user sees
    // none of Ada's memos.
    let made = || memo.prepared_instances() == 1;
    until_preparer(&python, made, "another memo instance").await;
    assert_no_memos(&memo, "bob-made-ahead", "chat-made-ahead").await;
    assert_eq!(memo.prepared_instances_taken(), taken + 2);
}

/// Asserts that `user` of `chat` has no memos, by a direct call.
async fn assert_no_memos(memo: &Plugin, user: &str, chat: &str) {
    let ctx = AgentCtx {
        user_id: Some(user.into()),
        ..AgentCtx::new(chat)
    };
    let result = memo
        .call(&ctx, "list_memos", args(serde_json::json!({})))
        .await;
    assert_eq!(
        result.unwrap(),
        MethodResult::Tool(args(serde_json::json!([])))
    );
}

// ---- HTTP ------------------------------------------------------------------

/// The API key the forecast tests configure (a secret in the policy).
const API_KEY: &str = "fc-SECRET-1717";

/// A loopback weather API on its own threads, recording each request's
/// head and body: `GET /v1/current?city=X` answers weather JSON saying
/// whether the API key came, `POST /v1/reports` answers 201.
fn weather_api() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    head.push_str(&std::mem::take(&mut line));
                }
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(|n| n.trim().to_string())
                    })
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; length.min(1 << 20)];
                let _ = reader.read_exact(&mut body);
                let keyed = head
                    .to_ascii_lowercase()
                    .contains(&format!("x-api-key: {}", API_KEY.to_ascii_lowercase()));
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                log.lock()
                    .unwrap()
                    .push(format!("{head}\n{}", String::from_utf8_lossy(&body)));
                let (status, answer) = if head.starts_with("GET /v1/current") {
                    let city = path.split("city=").nth(1).unwrap_or("?");
                    (
                        "200 OK",
                        format!(
                            r#"{{"temperature_c": 17.5, "summary": "Clear in {city}, keyed={keyed}"}}"#
                        ),
                    )
                } else if head.starts_with("POST /v1/reports") {
                    ("201 Created", String::new())
                } else {
                    ("404 Not Found", "no such thing".to_string())
                };
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            });
        }
    });
    (port, seen)
}

/// A host that grants forecast config and, with `http`, the API's port.
fn forecast_host(port: u16, http: bool) -> Host {
    forecast_host_with(port, http, "")
}

/// [`forecast_host`] with `tables` (e.g. `[http]` limits) in its policy.
fn forecast_host_with(port: u16, http: bool, tables: &str) -> Host {
    let grant = if http {
        format!(r#"["config", "store", "chat", "http:127.0.0.1:{port}"]"#)
    } else {
        r#"["config", "store", "chat"]"#.to_string()
    };
    let policy = Policy::from_toml(&format!(
        r#"
        {tables}
        [plugins.forecast]
        sha256 = ["{}"]
        grant = {grant}
        config = {{ BASE_URL = "http://127.0.0.1:{port}", API_KEY = "{API_KEY}" }}
        secrets = ["API_KEY"]
        "#,
        digest(artifacts::FORECAST),
    ))
    .unwrap();
    Host::builder()
        .cache_dir(cache_dir())
        .policy(policy)
        .build()
        .unwrap()
}

/// Loads forecast on `host`, one test at a time: the first load compiles
/// it into the shared cache, the other then loads it from there.
async fn load_forecast(host: &Host) -> Plugin {
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    load(host, artifacts::FORECAST).await
}

#[tokio::test]
async fn forecast_calls_a_granted_loopback_api_from_sandboxed_code() {
    let (port, seen) = weather_api();
    let host = forecast_host(port, true);
    let forecast = load_forecast(&host).await;
    assert!(forecast.has_lifecycle());
    let set = Toolbox::new(std::slice::from_ref(&forecast)).unwrap();
    let ada = AgentCtx {
        user_id: Some("ada-forecast".into()),
        ..AgentCtx::new("chat-forecast")
    };
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let outcome = python
        .run(
            &ada,
            &set,
            "w = current_weather('Porto')\nprint(w['temperature_c'], w['summary'])\nprint(report_weather('Porto', 'sunny'))",
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.stdout, "17.5 Clear in Porto, keyed=true\n201\n");
    let events: Vec<String> = outcome.events.iter().map(ToString::to_string).collect();
    assert!(
        events
            .iter()
            .any(|e| e.contains("chat [forecast]")
                && e.contains("Reported the weather in Porto: sunny")),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| e.contains("denied")), "{events:?}");
    // What reached the API: the key as a header, the report as JSON.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[0].starts_with("GET /v1/current?city=Porto HTTP/1.1"),
        "{seen:?}"
    );
    assert!(seen[1].starts_with("POST /v1/reports HTTP/1.1"), "{seen:?}");
    assert!(
        seen[1]
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{seen:?}"
    );
    assert!(
        seen[1].ends_with(r#"{"city": "Porto", "summary": "sunny", "chat": "chat-forecast"}"#),
        "{seen:?}"
    );
    // The store kept the city, and the prompt says so.
    let seen = set.in_context(&ada).await;
    assert_eq!(
        seen.injected,
        [(
            "forecast".to_string(),
            "The user last asked about the weather in Porto.".to_string()
        )]
    );
}

#[tokio::test]
async fn forecast_without_the_http_grant_is_refused_naming_plugin_and_host() {
    let (port, seen) = weather_api();
    let host = forecast_host(port, false);
    let forecast = load_forecast(&host).await;
    let err = forecast
        .call(
            &ctx(),
            "current_weather",
            args(serde_json::json!({"city": "Porto"})),
        )
        .await
        .unwrap_err();
    let needle = format!(
        "did not grant a capability for 127.0.0.1:{port} (request one like `http:127.0.0.1:{port}`)"
    );
    assert!(
        matches!(&err.kind, CallErrorKind::Denied { message } if message.contains(&needle)),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("plugin `forecast`, method `current_weather`: denied"),
        "{err}"
    );
    // From sandboxed code: the run fails with the same message, and the
    // refusal is an event naming the capability to grant.
    let set = Toolbox::new(std::slice::from_ref(&forecast)).unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let outcome = python
        .run(&ctx(), &set, "report_weather('Porto', 'sunny')")
        .await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
    let error = outcome.error.as_ref().unwrap();
    assert!(error.message.contains(&needle), "{error:?}");
    let events: Vec<String> = outcome.events.iter().map(ToString::to_string).collect();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("denied [forecast] POST http://127.0.0.1")
                && e.ends_with(&format!("capability `http:127.0.0.1:{port}` not granted"))),
        "{events:?}"
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing reached the API");
}

#[tokio::test]
async fn forecast_reports_an_unreachable_api_and_an_oversized_answer_as_failures() {
    let call = |forecast: Plugin| async move {
        forecast
            .call(
                &ctx(),
                "current_weather",
                args(serde_json::json!({"city": "Porto"})),
            )
            .await
            .unwrap_err()
    };
    // A granted port nobody listens on: bound and never listening, so a
    // connection is refused, and kept bound (without SO_REUSEADDR) to the
    // end of the test, so no test binding port 0 in parallel is given it.
    let reserved = tokio::net::TcpSocket::new_v4().unwrap();
    reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let closed = reserved.local_addr().unwrap().port();
    let err = call(load_forecast(&forecast_host(closed, true)).await).await;
    // The SDK's report: the exception, then the plugin's own frames.
    assert!(
        matches!(&err.kind, CallErrorKind::Failed { message }
            if message.starts_with(&format!("RequestError: unavailable: http: 127.0.0.1:{closed} failed: the connection was refused\n"))
                && message.contains("File \"plugin.py\", line ")),
        "{err}"
    );
    drop(reserved);
    // An answer past the host's cap on response bodies.
    let (port, _) = weather_api();
    let host = forecast_host_with(port, true, "[http]\nmax_response_bytes = 16");
    let err = call(load_forecast(&host).await).await;
    assert!(
        matches!(&err.kind, CallErrorKind::Failed { message }
            if message.starts_with(&format!("RequestError: limit-exceeded: http: reading the response from 127.0.0.1:{port} failed: "))
                && message.contains("16 bytes")),
        "{err}"
    );
}
