//! Durable pauses: a run that calls a method the policy pauses ends
//! `paused` with the call and a token; the token resumes it once, on
//! another host over the same store and key (a replica, the host after a
//! restart), with the person's answer: approve (the call is made then),
//! deny (the code's call raises) or a result (the call is not made). The
//! calls made before the pause are not made again, the code reads the same
//! random bytes and clocks, and its budget goes on from where it stood.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sandwit::json::{BytesAs, value_to_json};
use sandwit::store::SqliteStore;
use sandwit::{
    AgentCtx, ControlEvent, Event, Host, HostMethod, MethodKind, MethodResult, MethodSpec, Param,
    Policy, PythonSandbox, Resume, RunOptions, RunOutcome, RunStatus, SessionKey, SessionLimits,
    Toolbox, Value,
};
use serde_json::json;

use crate::common::{artifacts, assert_ok, cache_dir, until_preparer};

const POLICY: &str = r#"
    [approval]
    pause_for = ["dangerous"]

    [plugins.app.controls]
    cost_per_use = 0.5

    [plugins.app.methods.send]
    dangerous = true
"#;

/// Code that reads random bytes and the clock, makes three calls of
/// `fetch`, prints, then calls `send` (paused) and prints what it got.
const CODE: &str = "\
import time, uuid
token = uuid.uuid4().hex
t0 = time.time()
total = sum(fetch(n=i) for i in range(3))
print('before', token, total)
try:
    answer = send(text=f'{token}:{total}')
except PluginError as e:
    answer = f'{e.kind}: {e.message}'
print('after', answer)
result = {'answer': answer, 'token': token, 'total': total, 't0': t0}
";

/// How many times each method of the embedder's ran.
#[derive(Default)]
struct Counts {
    fetch: AtomicUsize,
    send: AtomicUsize,
}

fn spec(name: &str, param: &str, schema: serde_json::Value) -> MethodSpec {
    MethodSpec {
        name: name.into(),
        kind: MethodKind::Tool,
        description: format!("The {name} method."),
        docstring: format!("The {name} method."),
        params: vec![Param {
            name: param.into(),
            schema,
            required: true,
        }],
        returns: None,
    }
}

/// `app.fetch(n)` returns `n * 10`; `app.send(text)` returns `sent TEXT`.
fn methods(counts: &Arc<Counts>) -> Vec<HostMethod> {
    let seen = counts.clone();
    let fetch = HostMethod::new(
        "app",
        spec("fetch", "n", json!({"type": "integer"})),
        move |_ctx: AgentCtx, args: Value| {
            seen.fetch.fetch_add(1, Ordering::SeqCst);
            async move {
                let Value::Object(entries) = args else {
                    return Err("no arguments".to_string());
                };
                let Value::Int(n) = entries[0].1 else {
                    return Err("n is not an int".to_string());
                };
                Ok(MethodResult::Tool(Value::Int(n * 10)))
            }
        },
    )
    .unwrap();
    let seen = counts.clone();
    let send = HostMethod::new(
        "app",
        spec("send", "text", json!({"type": "string"})),
        move |_ctx: AgentCtx, args: Value| {
            seen.send.fetch_add(1, Ordering::SeqCst);
            async move {
                let Value::Object(entries) = args else {
                    return Err("no arguments".to_string());
                };
                let Value::Text(text) = &entries[0].1 else {
                    return Err("text is not a str".to_string());
                };
                Ok(MethodResult::Tool(Value::Text(format!("sent {text}"))))
            }
        },
    )
    .unwrap();
    vec![fetch, send]
}

/// A host over `store` signing with `key`, its sandbox, and the embedder's
/// methods counting their calls in `counts`.
async fn host(
    store: &Arc<SqliteStore>,
    key: &SessionKey,
    counts: &Arc<Counts>,
) -> (Host, PythonSandbox, Toolbox) {
    host_preparing(store, key, counts, 0).await
}

/// [`host`], preparing `prepared` interpreters (sessions need one).
async fn host_preparing(
    store: &Arc<SqliteStore>,
    key: &SessionKey,
    counts: &Arc<Counts>,
    prepared: usize,
) -> (Host, PythonSandbox, Toolbox) {
    host_with(store, key, counts, prepared, SessionLimits::default()).await
}

/// [`host_preparing`] with `limits`.
async fn host_with(
    store: &Arc<SqliteStore>,
    key: &SessionKey,
    counts: &Arc<Counts>,
    prepared: usize,
    limits: SessionLimits,
) -> (Host, PythonSandbox, Toolbox) {
    let host = Host::builder()
        .cache_dir(cache_dir())
        .store(store.clone())
        .session_key(key.clone())
        .policy(Policy::from_toml(POLICY).unwrap())
        .prepared_interpreters(prepared)
        .sessions(limits)
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    if prepared > 0 {
        until_preparer(
            &python,
            || !python.warming_up(),
            "the interpreter for reuse",
        )
        .await;
    }
    let tools = Toolbox::with_host_methods(&[], &methods(counts)).unwrap();
    (host, python, tools)
}

fn key() -> SessionKey {
    SessionKey::from_bytes(&[9; 32]).unwrap()
}

fn store() -> Arc<SqliteStore> {
    Arc::new(SqliteStore::in_memory().unwrap())
}

#[track_caller]
fn paused(outcome: &RunOutcome) -> &sandwit::Paused {
    assert_eq!(
        outcome.status,
        RunStatus::Paused,
        "{:?} {:?} {}",
        outcome.error,
        outcome.limit,
        outcome.stdout
    );
    outcome.paused.as_ref().unwrap()
}

#[track_caller]
fn result(outcome: &RunOutcome) -> serde_json::Value {
    assert_ok(outcome);
    json_of(outcome.result.as_ref().unwrap())
}

fn json_of(value: &Value) -> serde_json::Value {
    value_to_json(value, BytesAs::String)
}

fn error_type(outcome: &RunOutcome) -> String {
    let error = outcome.error.as_ref();
    error.map_or_else(String::new, |e| format!("{}: {}", e.type_name, e.message))
}

/// The line the code printed before its pause: `before TOKEN TOTAL`.
fn before(outcome: &RunOutcome) -> String {
    outcome.stdout.lines().next().unwrap().to_string()
}

#[tokio::test]
async fn an_approved_pause_resumes_on_another_host_without_calling_anything_twice() {
    let (store, counts) = (store(), Arc::new(Counts::default()));
    let ctx = AgentCtx::new("pauses-approve");
    let (_a, first, tools) = host(&store, &key(), &counts).await;
    let outcome = first.run(&ctx, &tools, CODE).await;
    let pause = paused(&outcome).clone();
    assert_eq!(
        (pause.plugin.as_str(), pause.method.as_str()),
        ("app", "send")
    );
    let printed = before(&outcome);
    let token_printed = printed.split(' ').nth(1).unwrap().to_string();
    assert_eq!(
        json_of(&pause.args),
        json!({"text": format!("{token_printed}:30")})
    );
    assert!(pause.token.starts_with("swp1_"), "{}", pause.token);
    assert_eq!(counts.fetch.load(Ordering::SeqCst), 3);
    assert_eq!(
        counts.send.load(Ordering::SeqCst),
        0,
        "a paused call was made"
    );
    assert_eq!(outcome.cost, 1.5, "the three fetches cost 0.5 each");
    assert!(
        outcome.events.iter().any(|e| matches!(
            e,
            Event::Control {
                event: ControlEvent::Paused,
                method,
                ..
            } if method == "send"
        )),
        "{:?}",
        outcome.events
    );
    drop(first);

    // Another host, as after a restart or on a replica: same store and key.
    let (_b, second, tools) = host(&store, &key(), &counts).await;
    let options = RunOptions::new();
    let resumed = second
        .resume(&ctx, &tools, &pause.token, Resume::Approve, &options)
        .await;
    let value = result(&resumed);
    assert_eq!(
        counts.fetch.load(Ordering::SeqCst),
        3,
        "a fetch was made again"
    );
    assert_eq!(counts.send.load(Ordering::SeqCst), 1);
    assert_eq!(
        value["token"],
        json!(token_printed),
        "uuid4 drew other bytes"
    );
    assert_eq!(value["answer"], json!(format!("sent {token_printed}:30")));
    assert_eq!(
        before(&resumed),
        printed,
        "the replay printed something else"
    );
    assert_eq!(resumed.cost, 2.0, "the budget did not go on from the pause");

    // A token resumes once.
    let again = second
        .resume(&ctx, &tools, &pause.token, Resume::Approve, &options)
        .await;
    assert_eq!(again.status, RunStatus::Error);
    assert!(
        error_type(&again).starts_with("ResumeRefused: no paused run has this token"),
        "{}",
        error_type(&again)
    );
    assert_eq!(counts.send.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_denied_pause_raises_in_the_code_and_a_result_is_returned_without_the_call() {
    let (store, counts) = (store(), Arc::new(Counts::default()));
    let ctx = AgentCtx::new("pauses-deny");
    let (_host, python, tools) = host(&store, &key(), &counts).await;
    let options = RunOptions::new();

    let outcome = python.run(&ctx, &tools, CODE).await;
    let token = paused(&outcome).token.clone();
    let denied = Resume::Deny("not today".into());
    let resumed = python.resume(&ctx, &tools, &token, denied, &options).await;
    assert_eq!(
        result(&resumed)["answer"],
        json!("denied: a person denied this call of `send`: not today")
    );

    let outcome = python.run(&ctx, &tools, CODE).await;
    let token = paused(&outcome).token.clone();
    let given = Resume::Result(Value::Text("pretend it was sent".into()));
    let resumed = python.resume(&ctx, &tools, &token, given, &options).await;
    assert_eq!(result(&resumed)["answer"], json!("pretend it was sent"));
    assert_eq!(counts.send.load(Ordering::SeqCst), 0, "the call was made");
    assert_eq!(counts.fetch.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn a_forged_foreign_or_other_chats_token_resumes_nothing_and_leaves_the_pause() {
    let (store, counts) = (store(), Arc::new(Counts::default()));
    let ctx = AgentCtx::new("pauses-owner");
    let (_host, python, tools) = host(&store, &key(), &counts).await;
    let options = RunOptions::new();
    let outcome = python.run(&ctx, &tools, CODE).await;
    let token = paused(&outcome).token.clone();

    let mut forged = token.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    let refusals = [
        (forged.as_str(), ctx.clone()),
        ("swp1_nothing", ctx.clone()),
        (token.as_str(), AgentCtx::new("another-chat")),
        (
            token.as_str(),
            AgentCtx {
                namespace: Some("another-tenant".into()),
                ..ctx.clone()
            },
        ),
    ];
    for (token, ctx) in refusals {
        let refused = python
            .resume(&ctx, &tools, token, Resume::Approve, &options)
            .await;
        assert!(
            error_type(&refused).starts_with("ResumeRefused"),
            "{}",
            error_type(&refused)
        );
    }
    // A host with another key cannot resume it either.
    let (_other, foreign, tools_b) = host(&store, &SessionKey::generate(), &counts).await;
    let refused = foreign
        .resume(&ctx, &tools_b, &token, Resume::Approve, &options)
        .await;
    assert!(error_type(&refused).contains("not one this host issued"));

    let resumed = python
        .resume(&ctx, &tools, &token, Resume::Approve, &options)
        .await;
    result(&resumed);
    assert_eq!(counts.send.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_run_in_a_session_pauses_and_resumes_on_the_state_it_began_from() {
    let (store, counts) = (store(), Arc::new(Counts::default()));
    let (_host, python, tools) = host_preparing(&store, &key(), &counts, 1).await;
    let ctx = AgentCtx::new("pauses-session");
    let in_session = RunOptions::new().session("s");
    let run = |code: &'static str| python.run_with(&ctx, &tools, code, &in_session);
    result(&run("seen = ['start']\nresult = 1").await);

    let outcome = run("seen.append(fetch(n=4))\nseen.append(send(text='hi'))\nresult = seen").await;
    let token = paused(&outcome).token.clone();
    let report = outcome.session.as_ref().unwrap();
    assert!(report.rolled_back, "{report:?}");
    // The paused run left the session as its last good run made it.
    let answer = Resume::Result(Value::Text("ok".into()));
    let resumed = python
        .resume(&ctx, &tools, &token, answer, &RunOptions::new())
        .await;
    assert_eq!(result(&resumed), json!(["start", 40, "ok"]));
    assert_eq!(
        counts.fetch.load(Ordering::SeqCst),
        1,
        "a fetch was made again"
    );
    let next = run("result = list(seen)").await;
    assert_eq!(result(&next), json!(["start", 40, "ok"]));

    // A session that ran since the pause is not what the replay needs.
    let outcome = run("seen.append(send(text='again'))").await;
    let token = paused(&outcome).token.clone();
    result(&run("seen.clear()\nresult = 0").await);
    let refused = python
        .resume(&ctx, &tools, &token, Resume::Approve, &RunOptions::new())
        .await;
    assert!(
        error_type(&refused)
            .starts_with("ResumeRefused: the session \"s\" ran since the run paused"),
        "{}",
        error_type(&refused)
    );
    assert_eq!(counts.send.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_chat_keeps_so_many_paused_runs_and_the_expired_ones_make_room() {
    let (store, counts) = (store(), Arc::new(Counts::default()));
    let limits = |ttl: u64| SessionLimits {
        pauses_per_chat: 2,
        pause_ttl: std::time::Duration::from_secs(ttl),
        ..SessionLimits::default()
    };
    let (_host, python, tools) = host_with(&store, &key(), &counts, 0, limits(3600)).await;
    let (a, b) = (AgentCtx::new("pauses-full"), AgentCtx::new("pauses-other"));
    let first = paused(&python.run(&a, &tools, CODE).await).token.clone();
    paused(&python.run(&a, &tools, CODE).await);
    let refused = python.run(&a, &tools, CODE).await;
    assert_eq!(refused.status, RunStatus::Error);
    let message = error_type(&refused);
    assert!(
        message.starts_with("PauseRefused: plugin `app`, method `send` pauses the run")
            && message.contains("SessionLimits::pauses_per_chat"),
        "{message}"
    );
    assert_eq!(counts.send.load(Ordering::SeqCst), 0);
    // Another chat has room of its own; an answer makes room in this one.
    paused(&python.run(&b, &tools, CODE).await);
    let options = RunOptions::new();
    result(
        &python
            .resume(&a, &tools, &first, Resume::Approve, &options)
            .await,
    );
    let full = paused(&python.run(&a, &tools, CODE).await).token.clone();

    // A discarded pause makes room too: its call is never made, its token
    // is spent, and another chat cannot discard one of this chat's.
    let refused = python.run(&a, &tools, CODE).await;
    assert_eq!(refused.status, RunStatus::Error);
    let not_yours = python.discard(&b, &full).await.unwrap_err();
    assert!(not_yours.contains("no paused run"), "{not_yours}");
    let dropped = python.discard(&a, &full).await.unwrap();
    assert_eq!((&*dropped.plugin, &*dropped.method), ("app", "send"));
    assert!(python.discard(&a, &full).await.is_err(), "discarded twice");
    let spent = (python.resume(&a, &tools, &full, Resume::Approve, &options)).await;
    assert!(error_type(&spent).starts_with("ResumeRefused"));
    assert!(
        python
            .discard(&a, "swp_forged")
            .await
            .unwrap_err()
            .contains("not one this host issued")
    );
    paused(&python.run(&a, &tools, CODE).await);
    assert_eq!(
        counts.send.load(Ordering::SeqCst),
        1,
        "the approved call alone"
    );

    // Expired pauses are dropped when the chat needs their room.
    let (_quick, python, tools) = host_with(&store, &key(), &counts, 0, limits(0)).await;
    let c = AgentCtx::new("pauses-expiring");
    let old = paused(&python.run(&c, &tools, CODE).await).token.clone();
    paused(&python.run(&c, &tools, CODE).await);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    paused(&python.run(&c, &tools, CODE).await);
    let gone = python
        .resume(&c, &tools, &old, Resume::Approve, &options)
        .await;
    assert!(
        error_type(&gone).starts_with("ResumeRefused"),
        "{}",
        error_type(&gone)
    );
}
