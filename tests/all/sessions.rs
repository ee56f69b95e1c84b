//! Sessions of the small interpreter: a chat's globals, imports and objects
//! kept from one run to the next, its chat's alone, bounded in number and
//! idle time, ended by a run that stops midway.

use std::time::Duration;

use sandwit::{
    AgentCtx, Host, LimitKind, PythonSandbox, RunLimits, RunOptions, RunOutcome, RunStatus,
    SessionLimits, Toolbox, Value,
};

use crate::common::{artifacts, cache_dir, ctx, host, load};
use crate::python::sandbox;

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
fn assert_ok(outcome: &RunOutcome) {
    assert_eq!(
        outcome.status,
        RunStatus::Ok,
        "{:?} {:?} {}",
        outcome.error,
        outcome.limit,
        outcome.stderr
    );
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
    assert!(report.started && report.kept, "{report:?}");
    assert_eq!((report.name.as_str(), report.runs), ("turns", 1));
    assert!(report.memory_bytes > 0);

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
    assert!(other.session.as_ref().unwrap().started);

    let names: Vec<String> = python.sessions(&ctx).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["other", "turns"]);
    assert!(python.close_session(&ctx, "turns"));
    assert!(!python.close_session(&ctx, "turns"));
    let after = run_in(python, &ctx, plugins, "turns", "counter").await;
    assert_eq!(error_type(&after), "NameError");
    assert!(after.session.as_ref().unwrap().started);
    python.close_session(&ctx, "turns");
    python.close_session(&ctx, "other");
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
        assert!(python.sessions(other).is_empty());
        assert!(!python.close_session(other, "s"));
        let outcome = run_in(python, other, plugins, "s", "secret").await;
        assert_eq!(error_type(&outcome), "NameError");
        assert!(outcome.session.as_ref().unwrap().started);
        python.close_session(other, "s");
    }
    let outcome = run_in(python, &mine, plugins, "s", "secret").await;
    assert_eq!(outcome.result, Some(Value::Text("mine".into())));
    python.close_session(&mine, "s");
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
    python.close_session(&ctx, "m");
}

#[tokio::test]
async fn a_run_that_stops_midway_ends_its_session_and_bad_names_are_refused() {
    let (python, plugins) = sandbox().await;
    let ctx = chat("sessions-stopped");
    assert_ok(&run_in(python, &ctx, plugins, "s", "x = 1").await);
    let limits = RunLimits {
        time: Duration::from_millis(300),
        ..RunLimits::default()
    };
    let options = RunOptions::new().session("s").limits(limits);
    let stopped = python
        .run_with(&ctx, plugins, "while True:\n    pass", &options)
        .await;
    assert_eq!(stopped.status, RunStatus::LimitExceeded);
    let report = stopped.session.as_ref().unwrap();
    assert!(!report.kept && !report.started, "{report:?}");
    assert!(python.sessions(&ctx).is_empty());
    let after = run_in(python, &ctx, plugins, "s", "x").await;
    assert_eq!(error_type(&after), "NameError");
    assert!(after.session.as_ref().unwrap().started);
    python.close_session(&ctx, "s");

    for bad in ["", "a b", "../up", &"n".repeat(65)] {
        let outcome = run_in(python, &ctx, plugins, bad, "1").await;
        assert_eq!(error_type(&outcome), "InvalidSession", "{bad:?}");
    }
    let _ = ctx;
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
    crate::common::until(
        || python.sessions(&a).iter().any(|s| s.busy),
        "the run in it",
    )
    .await;
    let second = run_in(&python, &a, &none, "one", "x").await;
    assert_eq!(error_type(&second), "SessionBusy");
    let first = busy.await.unwrap();
    assert_eq!(first.result, Some(Value::Int(1)));

    // Idle past the limit: the session is gone at the next run.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = run_in(&python, &a, &none, "one", "x").await;
    assert_eq!(error_type(&later), "NameError");
    assert!(later.session.unwrap().started);
}
