//! `sandwit serve` with tenants: tokens bound to a namespace (a chat-key
//! prefix) may name only their own chats and users, on every `/v1`
//! endpoint and over MCP; what a plugin's chats share (its store's global
//! scope, plugin-wide rate limits, breakers) is kept apart per namespace;
//! `/metrics` is an admin's; caller-chosen keys reach the log escaped; and
//! direct calls and lifecycle hooks wait in a bounded queue.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, PaginatedRequestParams};
use serde_json::{Value, json};

use crate::common::{artifacts, pin_line};
use crate::mcp::{Client, http_client, runtime};
use crate::serve::{ADMIN, Server, USER, digest, serve_with};

/// The token of the tenant `acme`, whose namespace is `acme:`.
const ACME: &str = "acme-token-for-tests";
/// The token of the tenant `globex`, whose namespace is `globex:`.
const GLOBEX: &str = "globex-token-for-tests";

/// Starts `sandwit serve` offering `plugins` under `policy`, with an admin
/// token, a user token without a namespace ([`USER`]) and the tenants
/// [`ACME`] and [`GLOBEX`]; logs at `info` on stderr.
fn serve(name: &str, plugins: &[&str], policy: &str, extra: &[&str]) -> Server {
    let tokens = format!(
        "ops admin {}\napp user {}\nacme user {} acme:\nglobex user {} globex:\n",
        digest(ADMIN),
        digest(USER),
        digest(ACME),
        digest(GLOBEX)
    );
    let env = [("SANDWIT_LOG", "info"), ("NO_COLOR", "1")];
    serve_with(("tenants", name), plugins, policy, extra, &tokens, &env)
}

/// Asserts a 403 `outside-namespace` whose message names `field` and the
/// namespace `acme:`.
fn assert_outside(status: u16, body: &Value, field: &str) {
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "outside-namespace", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("`{field}`")) && message.contains("`acme:`"),
        "{message}"
    );
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::String(text.to_string()))
}

/// A call of the tool `name` with `arguments` and `meta` as `_meta`; its
/// result as JSON.
async fn mcp_call(client: &Client, name: &str, arguments: Value, meta: Value) -> Value {
    let params: CallToolRequestParams = serde_json::from_value(json!({
        "name": name, "arguments": arguments, "_meta": meta,
    }))
    .unwrap();
    let result = client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("calling `{name}`: {e}"));
    serde_json::to_value(result).unwrap()
}

/// The policy granting the `notes` plugin its store.
fn notes_policy() -> String {
    format!(
        "[plugins.notes]\ngrant = [\"store\"]\n{}",
        pin_line(artifacts::NOTES)
    )
}

#[test]
fn a_namespaced_token_names_only_its_own_chats_and_users() {
    let server = serve(
        "refused",
        &[artifacts::CALC, artifacts::NOTES],
        &notes_policy(),
        &[],
    );
    let sum = json!({"num1": 1, "num2": 2});
    // Another namespace's chat key, or its user id in an own chat: refused
    // on every endpoint that takes them.
    for (field, chat_key, user_id) in [
        ("chat_key", "globex:room", None),
        ("chat_key", "room", None),
        ("user_id", "acme:room", Some("globex:bob")),
    ] {
        let (status, body) = server.post(
            "/v1/runs",
            ACME,
            json!({"code": "print(1)", "chat_key": chat_key, "user_id": user_id}),
        );
        assert_outside(status, &body, field);
        let (status, body) = server.post(
            "/v1/plugins/calc/methods/calculate_sum:call",
            ACME,
            json!({"args": sum, "chat_key": chat_key, "user_id": user_id}),
        );
        assert_outside(status, &body, field);
        let query = match user_id {
            Some(user) => format!("chat_key={chat_key}&user_id={user}"),
            None => format!("chat_key={chat_key}"),
        };
        for path in ["/v1/tools", "/v1/prompt"] {
            let (status, body) = server.get(&format!("{path}?{query}"), Some(ACME));
            assert_outside(status, &json_of(&body), field);
        }
    }
    // Its own: answered.
    let (status, outcome) = server.post(
        "/v1/runs",
        ACME,
        json!({"code": "print(calculate_sum(1, 2))", "chat_key": "acme:room", "user_id": "acme:ann"}),
    );
    assert_eq!(
        (status, &outcome["stdout"]),
        (200, &json!("3\n")),
        "{outcome}"
    );
    let (status, report) = server.post(
        "/v1/plugins/calc/methods/calculate_sum:call",
        ACME,
        json!({"args": sum, "chat_key": "acme:room", "user_id": "acme:ann"}),
    );
    assert_eq!((status, &report["ok"]), (200, &json!(true)), "{report}");
    assert_eq!(
        server
            .get("/v1/tools?chat_key=acme:room&user_id=acme:ann", Some(ACME))
            .0,
        200
    );
    assert_eq!(
        server.get("/v1/prompt?chat_key=acme:room", Some(ACME)).0,
        200
    );
    // A token without a namespace is a trusted backend: any chat and user.
    let (status, report) = server.post(
        "/v1/plugins/calc/methods/calculate_sum:call",
        USER,
        json!({"args": sum, "chat_key": "globex:room", "user_id": "acme:ann"}),
    );
    assert_eq!((status, &report["ok"]), (200, &json!(true)), "{report}");

    // MCP: `_meta` outside the namespace is refused, naming it; the
    // defaults are the namespace's own.
    runtime().block_on(async {
        let client = http_client(&server.base, ACME).await;
        for (key, value) in [
            ("sandwit/chat_key", "globex:room"),
            ("sandwit/user_id", "globex:bob"),
        ] {
            for (tool, arguments) in [
                ("run_python", json!({"code": "print(1)"})),
                ("calculate_sum", sum.clone()),
            ] {
                let result = mcp_call(&client, tool, arguments, json!({key: value})).await;
                assert_eq!(result["isError"], true, "{result}");
                let text = result["content"][0]["text"].as_str().unwrap();
                assert!(
                    text.contains("outside-namespace")
                        && text.contains(key)
                        && text.contains("`acme:`"),
                    "{text}"
                );
            }
            let listing: PaginatedRequestParams =
                serde_json::from_value(json!({"_meta": {key: value}})).unwrap();
            let refused = client
                .list_tools(Some(listing))
                .await
                .expect_err("a listing for another namespace's chat");
            assert!(
                refused.to_string().contains("outside-namespace"),
                "{refused}"
            );
        }
        // The defaults: the chat `acme:mcp:acme` and the user `acme:acme`.
        let result = mcp_call(&client, "remember", json!({"note": "from mcp"}), json!({})).await;
        assert_eq!(result["isError"], false, "{result}");
        client.cancel().await.unwrap();
    });
    let (_, report) = server.post(
        "/v1/plugins/notes/methods/recall:call",
        ACME,
        json!({"args": {}, "chat_key": "acme:mcp:acme", "user_id": "acme:acme"}),
    );
    assert_eq!(report["result"]["value"], json!(["from mcp"]), "{report}");
}

#[test]
fn tenants_share_no_notes_global_data_rate_limits_or_breakers() {
    let policy = format!(
        "{}\n[plugins.services]\ngrant = [\"store\"]\n{}\n\
         [plugins.calc.methods.get_current_time]\nrate_limit = 2\n\n\
         [plugins.calc.methods.calculate_sum]\nbreaker = {{ failures = 2, recovery_s = 600 }}\n",
        notes_policy(),
        pin_line(artifacts::SERVICES)
    );
    let server = serve(
        "shared",
        &[artifacts::CALC, artifacts::NOTES, artifacts::SERVICES],
        &policy,
        &[],
    );
    let call = |token: &str, plugin: &str, method: &str, args: Value, chat: &str| {
        let (status, report) = server.post(
            &format!("/v1/plugins/{plugin}/methods/{method}:call"),
            token,
            json!({"args": args, "chat_key": format!("{chat}room"), "user_id": format!("{chat}ann")}),
        );
        assert_eq!(status, 200, "{report}");
        report
    };

    // Notes: acme's are its own; globex cannot name acme's user, and its
    // own user has none.
    let report = call(
        ACME,
        "notes",
        "remember",
        json!({"note": "acme's secret"}),
        "acme:",
    );
    assert_eq!(report["ok"], true, "{report}");
    let (status, _) = server.post(
        "/v1/plugins/notes/methods/recall:call",
        GLOBEX,
        json!({"args": {}, "chat_key": "globex:room", "user_id": "acme:ann"}),
    );
    assert_eq!(status, 403);
    let report = call(GLOBEX, "notes", "recall", json!({}), "globex:");
    assert_eq!(report["result"]["value"], json!([]), "{report}");
    let report = call(ACME, "notes", "recall", json!({}), "acme:");
    assert_eq!(
        report["result"]["value"],
        json!(["acme's secret"]),
        "{report}"
    );

    // The store's global scope is the plugin's per namespace.
    let put = |token, value: Option<&str>, chat| {
        call(
            token,
            "services",
            "put",
            json!({"scope": "global", "key": "k", "value": value}),
            chat,
        )
    };
    assert_eq!(
        put(ACME, Some("acme's"), "acme:")["result"]["value"],
        "acme's"
    );
    let report = put(GLOBEX, None, "globex:");
    assert_eq!(report["result"]["value"], Value::Null, "{report}");
    assert_eq!(put(ACME, None, "acme:")["result"]["value"], "acme's");

    // A plugin-scope rate limit: acme spends its bucket, globex has its own.
    for _ in 0..2 {
        let report = call(ACME, "calc", "get_current_time", json!({}), "acme:");
        assert_eq!(report["ok"], true, "{report}");
    }
    let report = call(ACME, "calc", "get_current_time", json!({}), "acme:");
    assert_eq!(report["ok"], false, "{report}");
    assert!(
        report["error"].to_string().contains("calls a minute"),
        "{report}"
    );
    let report = call(GLOBEX, "calc", "get_current_time", json!({}), "globex:");
    assert_eq!(report["ok"], true, "{report}");

    // A breaker: acme's failures open it for acme alone.
    let overflow = json!({"num1": i64::MAX, "num2": 1});
    for _ in 0..2 {
        let report = call(ACME, "calc", "calculate_sum", overflow.clone(), "acme:");
        assert_eq!(report["ok"], false, "{report}");
    }
    let sum = json!({"num1": 1, "num2": 2});
    let report = call(ACME, "calc", "calculate_sum", sum.clone(), "acme:");
    assert!(
        report["error"].to_string().contains("circuit breaker"),
        "{report}"
    );
    let report = call(GLOBEX, "calc", "calculate_sum", sum, "globex:");
    assert_eq!(
        (&report["ok"], &report["result"]["value"]),
        (&json!(true), &json!(3)),
        "{report}"
    );

    // The admin's metrics tell the namespaces apart.
    let (status, metrics) = server.get("/metrics", Some(ADMIN));
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.contains(
            "sandwit_controls_breaker_trips_total{plugin=\"calc\",method=\"calculate_sum\",namespace=\"acme:\"} 1"
        ),
        "{metrics}"
    );
}

#[test]
fn metrics_are_for_admins_only() {
    let server = serve("metrics", &[artifacts::CALC], "", &[]);
    for token in [USER, ACME] {
        let (status, body) = server.get("/metrics", Some(token));
        let body = json_of(&body);
        assert_eq!(
            (status, &body["error"]),
            (403, &json!("admin-only")),
            "{body}"
        );
    }
    let (status, text) = server.get("/metrics", Some(ADMIN));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("sandwit_runs_running"), "{text}");
}

#[test]
fn a_chat_key_reaches_the_log_escaped() {
    let server = serve("log", &[artifacts::CALC], "", &[]);
    let forged = "acme:evil\n\u{1b}[31mFORGED line";
    runtime().block_on(async {
        let client = http_client(&server.base, ACME).await;
        let result = mcp_call(
            &client,
            "run_python",
            json!({"code": "print(1)"}),
            json!({"sandwit/chat_key": forged}),
        )
        .await;
        assert_eq!(result["isError"], false, "{result}");
        client.cancel().await.unwrap();
    });
    // The run's start is logged with its chat key; wait (bounded) for it.
    let mut log = String::new();
    for _ in 0..200 {
        log = server.stderr.lock().unwrap().clone();
        if log.contains("mcp run started") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = log
        .lines()
        .find(|l| l.contains("mcp run started"))
        .unwrap_or_else(|| panic!("no run logged:\n{log}"));
    assert!(
        started.contains(r"acme:evil\n\u{1b}[31mFORGED line"),
        "{started}"
    );
    assert!(!log.contains('\u{1b}'), "{log}");
    for line in log.lines().filter(|l| l.contains("FORGED")) {
        assert!(line.contains("acme:evil"), "a forged log line: {line:?}");
    }
}

#[test]
fn direct_calls_and_hooks_wait_in_a_bounded_queue() {
    // One call at a time and none waiting; a call that spins until its time
    // limit holds that one slot, long enough for every check below on a
    // loaded machine.
    let server = serve(
        "queue",
        &[artifacts::CALC, artifacts::HOSTILE],
        "",
        &[
            "--max-runs",
            "1",
            "--queue",
            "0",
            "--fuel",
            "1000000000000",
            "--timeout-ms",
            "20000",
        ],
    );
    let sum = json!({"args": {"num1": 1, "num2": 2}, "chat_key": "c"});
    let spin = || {
        server.post(
            "/v1/plugins/hostile/methods/spin:call",
            USER,
            json!({"args": {}, "chat_key": "c"}),
        )
    };
    std::thread::scope(|scope| {
        let mut spinner = scope.spawn(spin);
        // Calls go through until the spinning one holds the slot (waited
        // for, bounded); then they are refused at once. A spinning call
        // that came second to one of these calls was refused itself: it
        // is sent again.
        let mut refused = None;
        for _ in 0..400 {
            if spinner.is_finished() {
                let (status, report) = std::mem::replace(&mut spinner, scope.spawn(spin))
                    .join()
                    .unwrap();
                assert_eq!(status, 503, "the spinning call ended: {report}");
            }
            let response = server
                .agent
                .post(format!(
                    "{}/v1/plugins/calc/methods/calculate_sum:call",
                    server.base
                ))
                .header("Authorization", format!("Bearer {USER}"))
                .send_json(&sum)
                .unwrap();
            if response.status().as_u16() == 503 {
                refused = Some(response);
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let mut response = refused.expect("no call was refused while the slot was held");
        assert_eq!(response.headers().get("retry-after").unwrap(), "1");
        let err = json_of(&response.body_mut().read_to_string().unwrap());
        assert_eq!(err["error"], "queue-full", "{err}");
        // The lifecycle hooks of a listing or prompt wait in the same queue.
        for path in ["/v1/prompt?chat_key=c", "/v1/tools?chat_key=c"] {
            let (status, body) = server.get(path, Some(USER));
            assert_eq!(
                (status, &json_of(&body)["error"]),
                (503, &json!("queue-full")),
                "{path}: {body}"
            );
        }
        runtime().block_on(async {
            let client = http_client(&server.base, USER).await;
            let result = mcp_call(
                &client,
                "calculate_sum",
                json!({"num1": 1, "num2": 2}),
                json!({}),
            )
            .await;
            assert_eq!(result["isError"], true, "{result}");
            assert!(result.to_string().contains("queue-full"), "{result}");
            client.cancel().await.unwrap();
        });
        // Runs have a queue of their own.
        let (status, outcome) = server.post(
            "/v1/runs",
            USER,
            json!({"code": "print(1)", "chat_key": "c"}),
        );
        assert_eq!(
            (status, &outcome["stdout"]),
            (200, &json!("1\n")),
            "{outcome}"
        );
        let (status, report) = spinner.join().unwrap();
        assert_eq!((status, &report["ok"]), (200, &json!(false)), "{report}");
    });
    // The slot is free again.
    let (status, report) = server.post("/v1/plugins/calc/methods/calculate_sum:call", USER, sum);
    assert_eq!(
        (status, &report["result"]["value"]),
        (200, &json!(3)),
        "{report}"
    );
}
