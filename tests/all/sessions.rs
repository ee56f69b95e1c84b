//! Sessions of the small interpreter: a chat's globals, imports and objects
//! kept from one run to the next, its chat's alone, bounded in number,
//! size and idle time; stored, so another host over the same store (a
//! replica, the host after a restart) resumes them, a tampered or foreign
//! blob is refused, and a run that fails leaves the session as its last good
//! run made it.

use std::sync::Arc;
use std::time::Duration;

use sandwit::store::{Entry, Namespace, Scope, SqliteStore, StoreBackend};
use sandwit::{
    AgentCtx, Host, LimitKind, PythonSandbox, RunLimits, RunOptions, RunOutcome, RunStatus,
    SessionKey, SessionLimits, Toolbox, Value,
};

use crate::common::{
    artifacts, assert_ok, cache_dir, ctx, host, load, session_blob_key, until_preparer,
};
use crate::python;

/// The shared sandbox, once its interpreters run on its own engine (where
/// sessions are stored).
async fn sandbox() -> &'static (PythonSandbox, Toolbox) {
    let shared = python::sandbox().await;
    reusing(&shared.0).await;
    shared
}

async fn reusing(python: &PythonSandbox) {
    until_preparer(python, || !python.warming_up(), "the interpreter for reuse").await;
    assert!(
        python.reuses_interpreters(),
        "the sandbox's own engine failed"
    );
}

/// A host over `store`, whose sessions are signed with `key`, and its
/// Python sandbox, ready to store sessions.
async fn host_over(
    store: &Arc<SqliteStore>,
    key: &SessionKey,
    limits: SessionLimits,
) -> (Host, PythonSandbox) {
    host_with(Host::builder(), store, key, limits).await
}

async fn host_with(
    builder: sandwit::HostBuilder,
    store: &Arc<SqliteStore>,
    key: &SessionKey,
    limits: SessionLimits,
) -> (Host, PythonSandbox) {
    let host = builder
        .cache_dir(cache_dir())
        .store(store.clone())
        .session_key(key.clone())
        .sessions(limits)
        .prepared_interpreters(1)
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    reusing(&python).await;
    (host, python)
}

fn key() -> SessionKey {
    SessionKey::from_bytes(&[7; 32]).unwrap()
}

async fn run_in(
    python: &PythonSandbox,
    ctx: &AgentCtx,
    plugins: &Toolbox,
    session: &str,
    code: &str,
) -> RunOutcome {
    let options = RunOptions::new().session(session);
    python.run_with(ctx, plugins, code, &options).await
}

#[track_caller]
fn error_type(outcome: &RunOutcome) -> &str {
    assert_eq!(outcome.status, RunStatus::Error, "{}", outcome.stdout);
    &outcome.error.as_ref().unwrap().type_name
}

fn chat(key: &str) -> AgentCtx {
    AgentCtx::new(key)
}

#[tokio::test]
async fn a_session_keeps_globals_imports_and_objects_across_runs() {
    let (python, plugins) = sandbox().await;
    let ctx = chat("sessions-keep");
    let first = run_in(
        python,
        &ctx,
        plugins,
        "turns",
        "import json\nclass Counter:\n    def __init__(self):\n        self.n = 0\n    \
         def bump(self):\n        self.n += 1\n        return self.n\n\
         counter = Counter()\ncounter.bump()\nrows = [{'a': i} for i in range(1000)]\n\
         result = 'first'",
    )
    .await;
    assert_ok(&first);
    let report = first.session.as_ref().unwrap();
    assert!(
        report.started && report.kept && !report.restored,
        "{report:?}"
    );
    assert_eq!((report.name.as_str(), report.runs), ("turns", 1));
    assert!(report.memory_bytes > 0);
    // Stored as the pages it wrote over the base, compressed: far less
    // than the interpreter's memory.
    let stored = report.stored_bytes.unwrap();
    assert!(stored > 0 && stored < report.memory_bytes / 4, "{report:?}");

    // The next run finds them: the module, the class, the object's state.
    let second = run_in(
        python,
        &ctx,
        plugins,
        "turns",
        "print(json.dumps(rows[999]))\ncounter.bump()",
    )
    .await;
    assert_ok(&second);
    assert_eq!(second.stdout, "{\"a\": 999}\n");
    assert_eq!(second.result, Some(Value::Int(2)));
    let report = second.session.as_ref().unwrap();
    assert!(!report.started && report.kept && report.runs == 2);
    // `result`, left by the first run, is not the result of one that sets
    // none.
    let third = run_in(python, &ctx, plugins, "turns", "x = counter.bump()").await;
    assert_ok(&third);
    assert_eq!(third.result, None);
    assert_eq!(
        run_in(python, &ctx, plugins, "turns", "x").await.result,
        Some(Value::Int(3))
    );

    // A run without the session, or in another one, starts fresh.
    assert_eq!(
        error_type(&python.run(&ctx, plugins, "counter").await),
        "NameError"
    );
    let other = run_in(python, &ctx, plugins, "other", "counter").await;
    assert_eq!(error_type(&other), "NameError");
    let report = other.session.as_ref().unwrap();
    // Its first run failed: nothing good to keep.
    assert!(report.started && !report.kept, "{report:?}");
    assert_ok(&run_in(python, &ctx, plugins, "other", "y = 1").await);

    let listed = python.sessions(&ctx).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["other", "turns"]);
    assert!(
        listed.iter().all(|s| s.stored_bytes.is_some()),
        "{listed:?}"
    );
    assert!(python.close_session(&ctx, "turns").await.unwrap());
    assert!(!python.close_session(&ctx, "turns").await.unwrap());
    let after = run_in(python, &ctx, plugins, "turns", "counter").await;
    assert_eq!(error_type(&after), "NameError");
    assert!(after.session.as_ref().unwrap().started);
    close(python, &ctx, &["turns", "other"]).await;
}

#[tokio::test]
async fn a_session_is_unseen_by_another_chat_and_another_tenant() {
    let (python, plugins) = sandbox().await;
    let mine = chat("sessions-mine");
    let theirs = chat("sessions-theirs");
    let tenant = AgentCtx {
        namespace: Some("tenant-b".into()),
        ..chat("sessions-mine")
    };
    assert_ok(&run_in(python, &mine, plugins, "s", "secret = 'mine'").await);
    for other in [&theirs, &tenant] {
        assert!(python.sessions(other).await.unwrap().is_empty());
        assert!(!python.close_session(other, "s").await.unwrap());
        let outcome = run_in(python, other, plugins, "s", "secret").await;
        assert_eq!(error_type(&outcome), "NameError");
        assert!(outcome.session.as_ref().unwrap().started);
        close(python, other, &["s"]).await;
    }
    let outcome = run_in(python, &mine, plugins, "s", "secret").await;
    assert_eq!(outcome.result, Some(Value::Text("mine".into())));
    close(python, &mine, &["s"]).await;
}

#[tokio::test]
async fn a_sessions_methods_are_those_of_each_run() {
    let (python, plugins) = sandbox().await;
    let echo = Toolbox::new(&[load(host(), artifacts::ECHO).await]).unwrap();
    let ctx = chat("sessions-methods");
    let first = run_in(python, &ctx, &echo, "m", "kept = echo('a')\nkept").await;
    assert_ok(&first);
    // The next run has other methods: `echo` is gone, what it returned stays.
    let second = run_in(python, &ctx, plugins, "m", "kept").await;
    assert_eq!(second.result, first.result);
    let third = run_in(python, &ctx, plugins, "m", "echo('b')").await;
    assert_eq!(error_type(&third), "NameError");
    let fourth = run_in(python, &ctx, plugins, "m", "calculate_sum(1, 2)").await;
    assert_eq!(fourth.result, Some(Value::Int(3)));
    close(python, &ctx, &["m"]).await;
}

#[tokio::test]
async fn a_run_that_fails_or_stops_midway_leaves_the_last_good_state_and_bad_names_are_refused() {
    let (python, plugins) = sandbox().await;
    let ctx = chat("sessions-stopped");
    assert_ok(&run_in(python, &ctx, plugins, "s", "x = 1").await);
    // The code raises after changing `x`: the change is dropped.
    let raised = run_in(
        python,
        &ctx,
        plugins,
        "s",
        "x = 2\ny = 3\nraise ValueError('no')",
    )
    .await;
    assert_eq!(error_type(&raised), "ValueError");
    let report = raised.session.as_ref().unwrap();
    assert!(
        report.kept && report.rolled_back && report.stored_bytes.is_none(),
        "{report:?}"
    );
    let after = run_in(python, &ctx, plugins, "s", "(x, 'y' in globals())").await;
    let report = after.session.as_ref().unwrap();
    assert!(
        report.restored && !report.started && report.runs == 2,
        "{report:?}"
    );
    assert_eq!(
        after.result,
        Some(Value::List(vec![Value::Int(1), Value::Bool(false)]))
    );

    // A run stopped by a limit: the same.
    let limits = RunLimits {
        time: Duration::from_millis(300),
        ..RunLimits::default()
    };
    let options = RunOptions::new().session("s").limits(limits);
    let stopped = python
        .run_with(&ctx, plugins, "x = 5\nwhile True:\n    pass", &options)
        .await;
    assert_eq!(stopped.status, RunStatus::LimitExceeded);
    let report = stopped.session.as_ref().unwrap();
    assert!(
        report.kept && report.rolled_back && !report.started,
        "{report:?}"
    );
    let after = run_in(python, &ctx, plugins, "s", "x").await;
    assert_eq!(after.result, Some(Value::Int(1)));
    assert!(after.session.as_ref().unwrap().restored);
    close(python, &ctx, &["s"]).await;

    // With nothing stored yet, a failed first run ends the session.
    let first = run_in(python, &ctx, plugins, "new", "z = 1\n1/0").await;
    assert_eq!(error_type(&first), "ZeroDivisionError");
    assert!(!first.session.as_ref().unwrap().kept);
    assert!(python.sessions(&ctx).await.unwrap().is_empty());

    for bad in ["", "a b", "../up", &"n".repeat(65)] {
        let outcome = run_in(python, &ctx, plugins, bad, "1").await;
        assert_eq!(error_type(&outcome), "InvalidSession", "{bad:?}");
    }
}

#[tokio::test]
async fn sessions_are_capped_run_one_at_a_time_and_end_when_idle() {
    let host = Host::builder()
        .cache_dir(cache_dir())
        .prepared_interpreters(0)
        .sessions(SessionLimits {
            per_chat: 1,
            per_host: 2,
            idle: Duration::from_millis(300),
            ..SessionLimits::default()
        })
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let none = Toolbox::default();
    let a = ctx();
    assert_ok(&run_in(&python, &a, &none, "one", "x = 1").await);
    let refused = run_in(&python, &a, &none, "two", "1").await;
    assert_eq!(refused.status, RunStatus::LimitExceeded);
    let limit = refused.limit.as_ref().unwrap();
    assert_eq!(limit.kind, LimitKind::Session);
    assert!(limit.message.contains("per_chat"), "{}", limit.message);
    assert_ok(&run_in(&python, &chat("b"), &none, "one", "1").await);
    let refused = run_in(&python, &chat("c"), &none, "one", "1").await;
    assert!(refused.limit.unwrap().message.contains("per_host"));

    // While a run is in the session, another is refused, not queued.
    let busy = {
        let python = python.clone();
        let a = a.clone();
        tokio::spawn(async move {
            run_in(
                &python,
                &a,
                &Toolbox::default(),
                "one",
                "import time\ntime.sleep(1.5)\nx",
            )
            .await
        })
    };
    while !python.sessions(&a).await.unwrap().iter().any(|s| s.busy) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = run_in(&python, &a, &none, "one", "x").await;
    assert_eq!(error_type(&second), "SessionBusy");
    let first = busy.await.unwrap();
    assert_eq!(first.result, Some(Value::Int(1)));

    // Idle past the limit: the session is gone at the next run.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = run_in(&python, &a, &none, "one", "x").await;
    assert_eq!(error_type(&later), "NameError");
    let report = later.session.unwrap();
    // A host that prepares no interpreters keeps sessions live only.
    assert!(
        report.started && report.stored_bytes.is_none(),
        "{report:?}"
    );
}

async fn close(python: &PythonSandbox, ctx: &AgentCtx, names: &[&str]) {
    for name in names {
        python.close_session(ctx, name).await.unwrap();
    }
}

#[tokio::test]
async fn a_stored_session_is_resumed_by_another_host_over_the_same_store() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let limits = SessionLimits::default();
    let (_a, replica_a) = host_over(&store, &key(), limits).await;
    let (_b, replica_b) = host_over(&store, &key(), limits).await;
    let none = Toolbox::default();
    let ctx = chat("sessions-replicas");
    let first = run_in(
        &replica_a,
        &ctx,
        &none,
        "turns",
        "import json, collections\nclass Tally(collections.Counter):\n    pass\n\
         tally = Tally()\nbig = list(range(200_000))\nturn = 1",
    )
    .await;
    assert_ok(&first);
    // Turns alternate between the two hosts: each finds the last turn's
    // state, restored from the store when its own copy is stale.
    for turn in 2..=8 {
        let replica = if turn % 2 == 0 {
            &replica_b
        } else {
            &replica_a
        };
        let code = format!(
            "assert turn == {prev}, turn\ntally['seen'] += 1\nturn = {turn}\n\
             (turn, tally['seen'], len(big), type(tally).__mro__[1].__name__)",
            prev = turn - 1
        );
        let outcome = run_in(replica, &ctx, &none, "turns", &code).await;
        assert_ok(&outcome);
        let report = outcome.session.as_ref().unwrap();
        assert!(report.restored && report.runs == turn as u32, "{report:?}");
        assert_eq!(
            outcome.result,
            Some(Value::List(vec![
                Value::Int(turn),
                Value::Int(turn - 1),
                Value::Int(200_000),
                Value::Text("Counter".into())
            ]))
        );
    }
    // The same host twice in a row runs its live copy.
    let again = run_in(&replica_a, &ctx, &none, "turns", "turn").await;
    assert_eq!(again.result, Some(Value::Int(8)));
    let again = run_in(&replica_a, &ctx, &none, "turns", "turn").await;
    assert!(!again.session.as_ref().unwrap().restored);
    // Closed on one host, it is gone on the other.
    assert!(replica_b.close_session(&ctx, "turns").await.unwrap());
    let gone = run_in(&replica_a, &ctx, &none, "turns", "turn").await;
    assert_eq!(error_type(&gone), "NameError");
    assert!(gone.session.as_ref().unwrap().started);
}

/// The store's entry of `ctx`'s session `name` (`/pages`: its blob).
fn entry(ctx: &AgentCtx) -> Namespace {
    Namespace {
        plugin: "sandwit:sessions".into(),
        scope: Scope::Chat,
        owner: format!("0:{}", ctx.chat_key),
        tenant: String::new(),
    }
}

async fn blob(store: &SqliteStore, ctx: &AgentCtx) -> Vec<u8> {
    let key = session_blob_key(store, &entry(ctx), "s").await;
    match store.get(&entry(ctx), &key).await.unwrap() {
        Some(Entry::Bytes(bytes)) => bytes,
        other => panic!("no blob: {other:?}"),
    }
}

/// Writes `blob` over the blob of `ctx`'s session `s`.
async fn put_blob(store: &SqliteStore, ctx: &AgentCtx, blob: Vec<u8>) {
    let limits = Default::default();
    let ns = entry(ctx);
    let key = session_blob_key(store, &ns, "s").await;
    store
        .set(&ns, &key, &Entry::Bytes(blob), &limits)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_tampered_foreign_or_other_versions_session_is_refused_not_restored() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let limits = SessionLimits::default();
    let (_a, python) = host_over(&store, &key(), limits).await;
    let none = Toolbox::default();
    let ctx = chat("sessions-tampered");
    assert_ok(&run_in(&python, &ctx, &none, "s", "secret = 41").await);
    let good = blob(&store, &ctx).await;

    let refused = |outcome: &RunOutcome, says: &str| {
        assert_eq!(error_type(outcome), "SessionRefused");
        let message = &outcome.error.as_ref().unwrap().message;
        assert!(message.contains(says), "{message}");
    };
    // Another host over the same store, with another key: refused.
    let (_b, other_key) = host_over(&store, &SessionKey::generate(), limits).await;
    let outcome = run_in(&other_key, &ctx, &none, "s", "secret").await;
    refused(&outcome, "not signed by this host's session key");

    // One byte changed (in the compressed pages): refused.
    let mut changed = good.clone();
    let middle = changed.len() / 2;
    changed[middle] ^= 0x40;
    put_blob(&store, &ctx, changed).await;
    let (_c, fresh) = host_over(&store, &key(), limits).await;
    refused(
        &run_in(&fresh, &ctx, &none, "s", "secret").await,
        "not signed",
    );

    // Signed with the key, by another version of sandwit: refused by name.
    put_blob(&store, &ctx, resigned_as(&good, "0.0.1-elsewhere")).await;
    let outcome = run_in(&fresh, &ctx, &none, "s", "secret").await;
    refused(&outcome, "saved by sandwit 0.0.1-elsewhere");
    assert!(
        outcome
            .error
            .as_ref()
            .unwrap()
            .message
            .contains(env!("CARGO_PKG_VERSION"))
    );

    // The good blob again: restored, on a host that never ran it.
    put_blob(&store, &ctx, good).await;
    let outcome = run_in(&fresh, &ctx, &none, "s", "secret + 1").await;
    assert_eq!(outcome.result, Some(Value::Int(42)));
    assert!(outcome.session.unwrap().restored);
}

/// `blob` with its header's sandwit version set to `version`, signed again
/// with the tests' key (as a host of that version would have written it).
fn resigned_as(blob: &[u8], version: &str) -> Vec<u8> {
    let (magic, rest) = blob.split_at(8);
    let head_len = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&rest[4..4 + head_len]).unwrap();
    header["sandwit"] = version.into();
    let header = serde_json::to_vec(&header).unwrap();
    let packed = &rest[4 + head_len..rest.len() - 32];
    let mut out = magic.to_vec();
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(packed);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &[7; 32]);
    let tag = ring::hmac::sign(&key, &out);
    out.extend_from_slice(tag.as_ref());
    out
}

#[tokio::test]
async fn a_session_past_its_byte_limits_is_left_as_its_last_good_run_made_it() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let none = Toolbox::default();
    let (_a, python) = host_over(&store, &key(), SessionLimits::default()).await;
    let ctx = chat("sessions-bytes");
    let small = run_in(&python, &ctx, &none, "s", "x = 1").await;
    let size = small.session.as_ref().unwrap().stored_bytes.unwrap();
    close(&python, &ctx, &["s"]).await;

    // A session may take about what `x = 1` takes, not 2 MB more of data.
    let limits = SessionLimits {
        max_bytes: size + size / 2,
        chat_bytes: 3 * size,
        ..SessionLimits::default()
    };
    let (_b, python) = host_over(&store, &key(), limits).await;
    assert_ok(&run_in(&python, &ctx, &none, "s", "x = 1").await);
    let big = "import random\nblob = random.randbytes(2_000_000)\nx = 2";
    let outcome = run_in(&python, &ctx, &none, "s", big).await;
    assert_eq!(outcome.status, RunStatus::LimitExceeded);
    let limit = outcome.limit.as_ref().unwrap();
    assert_eq!(limit.kind, LimitKind::Session);
    assert!(
        limit.message.contains("SessionLimits::max_bytes"),
        "{}",
        limit.message
    );
    assert!(outcome.session.as_ref().unwrap().rolled_back);
    let after = run_in(&python, &ctx, &none, "s", "(x, 'blob' in globals())").await;
    assert_eq!(
        after.result,
        Some(Value::List(vec![Value::Int(1), Value::Bool(false)]))
    );
    // The chat's sessions together: the third one is past `chat_bytes`.
    assert_ok(&run_in(&python, &ctx, &none, "t", "x = 1").await);
    let third = run_in(&python, &ctx, &none, "u", "x = 1").await;
    assert_eq!(
        third.limit.as_ref().map(|l| l.kind),
        Some(LimitKind::Session)
    );
    assert!(third.limit.unwrap().message.contains("chat_bytes"));
    assert!(!third.session.unwrap().kept);
}

#[tokio::test]
async fn a_run_that_leaves_a_file_open_keeps_its_session_live_unstored() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let root = std::env::temp_dir().join(format!("sandwit-sessions-{}", std::process::id()));
    let workspaces = sandwit::WorkspaceOptions::new(&root);
    let builder = Host::builder().workspaces(workspaces);
    let (_a, python) = host_with(builder, &store, &key(), SessionLimits::default()).await;
    let none = Toolbox::default();
    let ctx = chat("sessions-open-file");
    let outcome = run_in(&python, &ctx, &none, "s", "x = 1").await;
    assert!(outcome.session.unwrap().stored_bytes.is_some());
    let open = run_in(
        &python,
        &ctx,
        &none,
        "s",
        "f = open('notes.txt', 'w')\nx = 2",
    )
    .await;
    let report = open.session.as_ref().unwrap();
    assert_ok(&open);
    assert!(report.kept && report.stored_bytes.is_none(), "{report:?}");
    // Live here, it goes on from the unstored run.
    let next = run_in(&python, &ctx, &none, "s", "f.close()\nx").await;
    assert_eq!(next.result, Some(Value::Int(2)));
    assert!(next.session.unwrap().stored_bytes.is_some());
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn a_session_forks_dumps_and_loads_within_its_chat_and_keeps_its_limits() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let limits = SessionLimits::default();
    let (_a, python) = host_over(&store, &key(), limits).await;
    let none = Toolbox::default();
    let ctx = chat("sessions-copies");
    let tight = RunLimits {
        max_calls: 7,
        ..RunLimits::default()
    };
    let options = RunOptions::new().session("s").limits(tight.clone());
    let first = "rows = [i * i for i in range(1000)]\nturn = 1";
    assert_ok(&python.run_with(&ctx, &none, first, &options).await);

    // A fork goes on independently of its source.
    let fork = python.fork_session(&ctx, "s", "f").await.unwrap();
    assert_eq!((fork.name.as_str(), fork.runs), ("f", 1));
    assert_ok(&run_in(&python, &ctx, &none, "f", "turn = 'forked'").await);
    let source = (python.run_with(&ctx, &none, "(turn, rows[999])", &options)).await;
    assert_eq!(
        source.result,
        Some(Value::List(vec![Value::Int(1), Value::Int(998_001)]))
    );
    let forked = run_in(&python, &ctx, &none, "f", "(turn, rows[999])").await;
    assert_eq!(
        forked.result,
        Some(Value::List(vec![
            Value::Text("forked".into()),
            Value::Int(998_001)
        ]))
    );
    let taken = python.fork_session(&ctx, "s", "f").await.unwrap_err();
    assert!(
        taken.to_string().contains("has a session \"f\" already"),
        "{taken}"
    );
    let missing = python.fork_session(&ctx, "nope", "g").await.unwrap_err();
    assert!(
        missing.to_string().contains("no stored session \"nope\""),
        "{missing}"
    );

    // A dump, loaded on another host with the same key after the session
    // was closed, is the session as dumped, with the limits it ran under.
    let dump = python.dump_session(&ctx, "s").await.unwrap();
    close(&python, &ctx, &["s", "f"]).await;
    let other_store = Arc::new(SqliteStore::in_memory().unwrap());
    let (_b, elsewhere) = host_over(&other_store, &key(), limits).await;
    let loaded = elsewhere.load_session(&ctx, &dump, None).await.unwrap();
    assert_eq!((loaded.name.as_str(), loaded.runs), ("s", 2));
    assert_eq!(loaded.limits, Some(tight));
    let outcome = run_in(&elsewhere, &ctx, &none, "s", "turn + len(rows)").await;
    assert_eq!(outcome.result, Some(Value::Int(1001)));
    assert!(outcome.session.unwrap().restored);
    let renamed = elsewhere
        .load_session(&ctx, &dump, Some("copy"))
        .await
        .unwrap();
    assert_eq!(renamed.name, "copy");
    let taken = elsewhere.load_session(&ctx, &dump, None).await.unwrap_err();
    assert!(taken.to_string().contains("already"), "{taken}");

    // Another chat, another key, or a changed byte: refused.
    let other_chat = elsewhere
        .load_session(&chat("sessions-copies-2"), &dump, Some("x"))
        .await
        .unwrap_err();
    assert!(
        other_chat.to_string().contains("another chat"),
        "{other_chat}"
    );
    let (_c, other_key) = host_over(&other_store, &SessionKey::generate(), limits).await;
    let unsigned = other_key
        .load_session(&ctx, &dump, Some("y"))
        .await
        .unwrap_err();
    assert!(
        unsigned
            .to_string()
            .contains("not signed by this host's session key")
    );
    let mut changed = dump.clone();
    let middle = changed.len() / 2;
    changed[middle] ^= 1;
    let changed = elsewhere
        .load_session(&ctx, &changed, Some("z"))
        .await
        .unwrap_err();
    assert!(changed.to_string().contains("not signed"), "{changed}");
    let other_version = resigned_as(&dump, "0.0.1-elsewhere");
    let refused = elsewhere
        .load_session(&ctx, &other_version, Some("v"))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("sandwit 0.0.1-elsewhere"),
        "{refused}"
    );
    let listed: Vec<String> = (elsewhere.sessions(&ctx).await.unwrap().into_iter())
        .map(|s| s.name)
        .collect();
    assert_eq!(listed, ["copy", "s"]);
}

/// A session closed while a run is in it stays closed: what the run left
/// is not stored, so the next run starts the session afresh.
#[tokio::test]
async fn a_session_closed_during_its_run_is_not_stored_again() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (_a, python) = host_over(&store, &key(), SessionLimits::default()).await;
    let none = Toolbox::default();
    let ctx = chat("sessions-closed-midway");
    assert_ok(&run_in(&python, &ctx, &none, "s", "x = 1").await);
    let running = {
        let (python, ctx, none) = (python.clone(), ctx.clone(), none.clone());
        tokio::spawn(async move {
            run_in(
                &python,
                &ctx,
                &none,
                "s",
                "import time\ntime.sleep(1)\nx = 2",
            )
            .await
        })
    };
    // Closed once the run is in it.
    let start = std::time::Instant::now();
    while !(python.sessions(&ctx).await.unwrap().iter()).any(|s| s.name == "s" && s.busy) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the run never began"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(python.close_session(&ctx, "s").await.unwrap());
    let ended = running.await.unwrap();
    assert_ok(&ended);
    assert!(!ended.session.unwrap().kept);
    let after = run_in(&python, &ctx, &none, "s", "x").await;
    assert_eq!(error_type(&after), "NameError");
    assert!(after.session.unwrap().started);
}

/// A toolbox with one method, `hold()`, that returns once `release` is
/// notified, and says it was called through `called`.
fn holding(release: Arc<tokio::sync::Notify>, called: Arc<tokio::sync::Notify>) -> Toolbox {
    use sandwit::{HostMethod, MethodKind, MethodResult, MethodSpec};
    let spec = MethodSpec {
        name: "hold".into(),
        kind: MethodKind::Tool,
        description: "Waits until the test lets it return.".into(),
        docstring: "Waits until the test lets it return.".into(),
        params: Vec::new(),
        returns: None,
    };
    let hold = HostMethod::new("app", spec, move |_ctx, _args| {
        let (release, called) = (release.clone(), called.clone());
        async move {
            called.notify_one();
            release.notified().await;
            Ok(MethodResult::Tool(Value::Text("released".into())))
        }
    })
    .unwrap();
    Toolbox::with_host_methods(&[], &[hold]).unwrap()
}

#[tokio::test]
async fn of_two_hosts_running_one_session_at_once_only_one_stores_it() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let limits = SessionLimits::default();
    let (_a, replica_a) = host_over(&store, &key(), limits).await;
    let (_b, replica_b) = host_over(&store, &key(), limits).await;
    let none = Toolbox::default();
    let ctx = chat("sessions-conflict");
    assert_ok(&run_in(&replica_a, &ctx, &none, "s", "x = ['first']").await);

    // A's next run waits in a method call while B runs the session's next
    // run from the same stored state, to the end.
    let (release, called) = (Arc::default(), Arc::default());
    let held = holding(Arc::clone(&release), Arc::clone(&called));
    let running = {
        let (python, ctx) = (replica_a.clone(), ctx.clone());
        tokio::spawn(async move {
            let code = "x.append(hold())\nx.append('a')\nlen(x)";
            run_in(&python, &ctx, &held, "s", code).await
        })
    };
    called.notified().await;
    let on_b = run_in(&replica_b, &ctx, &none, "s", "x.append('b')\nx").await;
    assert_ok(&on_b);
    assert!(on_b.session.as_ref().unwrap().restored);
    release.notify_one();

    // A's run ends well, but its state is not stored over B's: it says so,
    // keeps its output and result, and rolls its live copy back.
    let on_a = running.await.unwrap();
    assert_eq!(error_type(&on_a), "SessionConflict");
    let message = &on_a.error.as_ref().unwrap().message;
    assert!(
        message.contains("\"s\"") && message.contains("not"),
        "{message}"
    );
    assert_eq!(on_a.result, Some(Value::Int(3)));
    assert!(on_a.session.as_ref().unwrap().rolled_back);

    // Both hosts now see B's run, and the store holds B's blob alone.
    let expected = Some(Value::List(
        ["first", "b", "c"].map(|s| Value::Text(s.into())).to_vec(),
    ));
    let next = run_in(&replica_a, &ctx, &none, "s", "x.append('c')\nx").await;
    assert_ok(&next);
    assert!(next.session.as_ref().unwrap().restored);
    assert_eq!(next.result, expected);
    assert_eq!(next.session.as_ref().unwrap().runs, 3);
    let seen = run_in(&replica_b, &ctx, &none, "s", "x").await;
    assert_eq!(seen.result, expected);
    session_blob_key(&*store, &entry(&ctx), "s").await;
}
