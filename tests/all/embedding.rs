//! What an embedder brings to a run: methods of its own, which methods a
//! context sees, cancelling a run, and watching its output and events as
//! they happen.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandwit::store::{Entry, Namespace, StoreBackend, StoreError};
use sandwit::{
    AgentCtx, CallLimits, Cancel, Event, Host, HostMethod, LiveEvent, MethodKind, MethodResult,
    MethodSpec, Param, RunOptions, RunStatus, ServiceFuture, Toolbox, ToolboxError, Value,
};
use serde_json::json;

use crate::common::{
    artifacts, assert_ended_soon_after, assert_still_serving, cache_dir, ctx, example_policy, host,
    load,
};
use crate::python::sandbox;

/// Run options that call `seen` (once) when the run's stdout shows `line`.
fn on_stdout(line: &'static str, seen: impl Fn() + Send + Sync + 'static) -> RunOptions {
    let once = std::sync::Once::new();
    RunOptions::new().on_event(move |event: &LiveEvent| {
        if matches!(event, LiveEvent::Stdout { text } if text.contains(line)) {
            once.call_once(&seen);
        }
    })
}

/// Asserts that a run cancelled at `cancelled` ended soon after: the
/// deadline rule of [`assert_ended_soon_after`] for a deadline of zero.
#[track_caller]
fn assert_ended_soon_after_cancel(cancelled: Instant, ended: Instant) {
    assert_ended_soon_after(ended.saturating_duration_since(cancelled), Duration::ZERO);
}

#[tokio::test]
async fn cancelling_ends_a_busy_run_and_the_host_serves_on() {
    // Cancelled by a task once the run printed `started`. This test's
    // runtime has one thread, so the task runs only when the run yields,
    // which it does every so much fuel: by then the line's write is over
    // and the run is spinning.
    let (python, plugins) = sandbox().await;
    let cancel = Cancel::new();
    let started = Arc::new(tokio::sync::Notify::new());
    let options = on_stdout("started", {
        let started = started.clone();
        move || started.notify_one()
    })
    .cancel(cancel.clone());
    let canceller = tokio::spawn(async move {
        started.notified().await;
        cancel.cancel();
        Instant::now()
    });
    let code = "print('started')\nwhile True:\n    pass";
    let outcome = python.run_with(&ctx(), plugins, code, &options).await;
    let ended = Instant::now();
    assert_eq!(outcome.status, RunStatus::Cancelled, "{outcome:?}");
    assert_eq!((outcome.error, outcome.limit), (None, None));
    assert_eq!(
        outcome.stdout, "started\n",
        "what it printed before is kept"
    );
    // Not at its deadline: soon after the handle was cancelled.
    assert_ended_soon_after_cancel(canceller.await.unwrap(), ended);
    assert_still_serving(host()).await;
    let (python, plugins) = sandbox().await;
    let next = python.run(&ctx(), plugins, "print(1 + 1)").await;
    assert_eq!((next.status, next.stdout.as_str()), (RunStatus::Ok, "2\n"));
}

#[tokio::test]
async fn cancelling_ends_a_run_that_calls_the_host_in_a_loop() {
    // Each print settles its fuel in the call hook, which restarts
    // wasmtime's yield interval: such code never yields, so the hook itself
    // checks the handle. Cancelled from a thread, since this test's
    // runtime has one, which the run does not give up, once the first line
    // is out: the loop is running then.
    let (python, plugins) = sandbox().await;
    let cancel = Cancel::new();
    let (printed, first_line) = std::sync::mpsc::channel();
    let options = on_stdout("x", move || printed.send(()).unwrap()).cancel(cancel.clone());
    let canceller = std::thread::spawn(move || {
        // An error: the listener is gone, the run over without a line.
        first_line.recv().ok()?;
        cancel.cancel();
        Some(Instant::now())
    });
    let code = "while True:\n    print('x')";
    let outcome = python.run_with(&ctx(), plugins, code, &options).await;
    let ended = Instant::now();
    drop(options);
    let cancelled = canceller.join().unwrap();
    assert_eq!(outcome.status, RunStatus::Cancelled, "{:?}", outcome.limit);
    let cancelled = cancelled.expect("cancelled once the loop printed");
    assert_ended_soon_after_cancel(cancelled, ended);
}

#[tokio::test]
async fn a_listener_that_panics_is_dropped_and_the_run_goes_on() {
    let (python, plugins) = sandbox().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let options = RunOptions::new().on_event({
        let calls = calls.clone();
        move |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            panic!("a listener's bug");
        }
    });
    let code = "print('a')\nprint('b')\nprint(calculate_sum(1, 2))";
    let outcome = python.run_with(&ctx(), plugins, code, &options).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.stdout, "a\nb\n3\n");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "called again after it panicked"
    );
}

/// A plugin store that never answers. It says when a request starts, and
/// whether the request's future was dropped.
#[derive(Default)]
struct Stuck {
    asked: tokio::sync::Notify,
    dropped: Arc<AtomicBool>,
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Stuck {
    /// A request that never ends.
    fn hang<'a, T: 'a>(&'a self) -> ServiceFuture<'a, T> {
        Box::pin(async move {
            let _dropped = SetOnDrop(self.dropped.clone());
            self.asked.notify_one();
            std::future::pending().await
        })
    }
}

impl StoreBackend for Stuck {
    fn get<'a>(
        &'a self,
        _: &'a Namespace,
        _: &'a str,
    ) -> ServiceFuture<'a, Result<Option<Entry>, StoreError>> {
        self.hang()
    }
    fn set<'a>(
        &'a self,
        _: &'a Namespace,
        _: &'a str,
        _: &'a Entry,
        _: &'a sandwit::policy::StoreLimits,
    ) -> ServiceFuture<'a, Result<(), StoreError>> {
        self.hang()
    }
    fn swap<'a>(
        &'a self,
        _: &'a Namespace,
        _: &'a str,
        _: Option<&'a Entry>,
        _: Option<&'a Entry>,
        _: &'a sandwit::policy::StoreLimits,
    ) -> ServiceFuture<'a, Result<bool, StoreError>> {
        self.hang()
    }
    fn delete<'a>(
        &'a self,
        _: &'a Namespace,
        _: &'a str,
    ) -> ServiceFuture<'a, Result<bool, StoreError>> {
        self.hang()
    }
    fn keys<'a>(
        &'a self,
        _: &'a Namespace,
        _: usize,
    ) -> ServiceFuture<'a, Result<Vec<String>, StoreError>> {
        self.hang()
    }
    fn usage<'a>(&'a self, _: &'a str) -> ServiceFuture<'a, Result<u64, StoreError>> {
        Box::pin(std::future::ready(Ok(0)))
    }
}

#[tokio::test]
async fn cancelling_ends_a_plugin_call_in_flight() {
    // The notes plugin's `remember` asks the store first, and this store
    // never answers: the run waits in the plugin's call, in the host, until
    // it is cancelled the moment the request starts.
    let stuck = Arc::new(Stuck::default());
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(example_policy())
        .store(stuck.clone())
        .build()
        .unwrap();
    let notes = load(&host, artifacts::NOTES).await;
    let plugins = Toolbox::new(&[notes]).unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let cancel = Cancel::new();
    let options = RunOptions::new().cancel(cancel.clone());
    let canceller = tokio::spawn({
        let stuck = stuck.clone();
        async move {
            stuck.asked.notified().await;
            cancel.cancel();
            Instant::now()
        }
    });
    let outcome = python
        .run_with(&ctx(), &plugins, "remember('tea')", &options)
        .await;
    let ended = Instant::now();
    assert_eq!(outcome.status, RunStatus::Cancelled, "{outcome:?}");
    assert_ended_soon_after_cancel(canceller.await.unwrap(), ended);
    assert!(
        stuck.dropped.load(Ordering::SeqCst),
        "the request in flight was dropped with the run"
    );
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn a_run_given_a_cancelled_handle_does_not_run() {
    let (python, plugins) = sandbox().await;
    let cancel = Cancel::new();
    cancel.cancel();
    let options = RunOptions::new().cancel(cancel);
    let outcome = python
        .run_with(&ctx(), plugins, "print('ran')", &options)
        .await;
    assert_eq!(outcome.status, RunStatus::Cancelled);
    assert_eq!(outcome.stdout, "");
}

#[tokio::test]
async fn dropping_a_runs_future_ends_it_and_the_host_serves_on() {
    // Dropped once it printed `started`, at its next yield: it is spinning.
    let (python, plugins) = sandbox().await;
    let ctx = ctx();
    let started = Arc::new(tokio::sync::Notify::new());
    let options = on_stdout("started", {
        let started = started.clone();
        move || started.notify_one()
    });
    let code = "print('started')\nwhile True:\n    pass";
    tokio::select! {
        outcome = python.run_with(&ctx, plugins, code, &options) => {
            panic!("the run ended: {outcome:?}")
        }
        () = started.notified() => {}
    }
    let next = python.run(&ctx, plugins, "print(3)").await;
    assert_eq!((next.status, next.stdout.as_str()), (RunStatus::Ok, "3\n"));
}

#[tokio::test]
async fn a_listener_sees_output_and_events_in_order_and_the_outcome_is_unchanged() {
    let (python, plugins) = sandbox().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let options = RunOptions::new().on_event({
        let seen = seen.clone();
        move |event: &LiveEvent| seen.lock().unwrap().push(event.clone())
    });
    let code = "print('before')\nprint(calculate_sum(1, 2))\nimport sys\nprint('oops', file=sys.stderr)\nsend_channel_message('tea')\nprint('after')";
    let outcome = python.run_with(&ctx(), plugins, code, &options).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    let seen = seen.lock().unwrap().clone();

    // The same output and events as the outcome's, split by stream.
    let text =
        |pick: fn(&LiveEvent) -> Option<&str>| -> String { seen.iter().filter_map(pick).collect() };
    assert_eq!(
        text(|e| match e {
            LiveEvent::Stdout { text } => Some(text),
            _ => None,
        }),
        outcome.stdout
    );
    assert_eq!(
        text(|e| match e {
            LiveEvent::Stderr { text } => Some(text),
            _ => None,
        }),
        outcome.stderr
    );
    let events: Vec<Event> = seen
        .iter()
        .filter_map(|e| match e {
            LiveEvent::Event(event) => Some(event.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(events, outcome.events);

    // In the order they happened: the first line before the first call,
    // the call before the line that prints its result, the last line last.
    let position = |wanted: &dyn Fn(&LiveEvent) -> bool| seen.iter().position(wanted).unwrap();
    let before = position(&|e| matches!(e, LiveEvent::Stdout { text } if text.contains("before")));
    let call = position(
        &|e| matches!(e, LiveEvent::Event(Event::Call { method, .. }) if method == "calculate_sum"),
    );
    let three = position(&|e| matches!(e, LiveEvent::Stdout { text } if text.contains('3')));
    let after = position(&|e| matches!(e, LiveEvent::Stdout { text } if text.contains("after")));
    assert!(before < call && call < three && three < after, "{seen:#?}");
    assert!(
        serde_json::to_value(&seen[before]).unwrap()["type"] == "stdout",
        "{:?}",
        seen[before]
    );
}

#[tokio::test]
async fn a_filtered_set_lists_and_offers_only_the_methods_kept() {
    let (python, plugins) = sandbox().await;
    // One chat sees only the calc plugin's methods.
    let chat = ctx();
    let only_calc = plugins.filter(|provider, _| provider == "calc");
    let listing = only_calc.prompt();
    assert!(listing.contains("def calculate_sum("), "{listing}");
    assert!(!listing.contains("send_channel_message"), "{listing}");
    assert!(only_calc.plugin_for("send_channel_message").is_none());

    let outcome = python
        .run(&chat, &only_calc, "print(calculate_sum(2, 3))")
        .await;
    assert_eq!(
        (outcome.status, outcome.stdout.as_str()),
        (RunStatus::Ok, "5\n")
    );
    let outcome = python
        .run(&chat, &only_calc, "send_channel_message('hi')")
        .await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
    let error = outcome.error.unwrap();
    assert_eq!(error.type_name, "NameError", "{error:?}");
    assert!(outcome.events.is_empty(), "{:?}", outcome.events);

    // The full set still offers it.
    let outcome = python
        .run(&chat, plugins, "print('send_channel_message' in globals())")
        .await;
    assert_eq!(outcome.stdout, "True\n");
}

/// `send_message(text)`, a behavior the embedder defines, recording what
/// it was sent; and `lookup(key)`, a tool that fails on an unknown key.
fn host_methods(sent: Arc<Mutex<Vec<(String, String)>>>) -> Vec<HostMethod> {
    let param = |name: &str, schema| Param {
        name: name.into(),
        schema,
        required: true,
    };
    let send = HostMethod::new(
        "app",
        MethodSpec {
            name: "send_message".into(),
            kind: MethodKind::Behavior,
            description: "Send a message to the current channel.".into(),
            docstring: "Send a message to the current channel.\n\nArgs:\n    text: The message."
                .into(),
            params: vec![param("text", json!({"type": "string", "maxLength": 100}))],
            returns: None,
        },
        move |ctx: AgentCtx, args: Value| {
            let sent = sent.clone();
            async move {
                let Value::Object(entries) = args else {
                    unreachable!("checked")
                };
                let text = match &entries[0].1 {
                    Value::Text(text) => text.clone(),
                    other => return Err(format!("not text: {other:?}")),
                };
                sent.lock()
                    .unwrap()
                    .push((ctx.chat_key.clone(), text.clone()));
                Ok(MethodResult::Behavior(format!("sent {text:?}")))
            }
        },
    )
    .unwrap();
    let lookup = HostMethod::new(
        "app",
        MethodSpec {
            name: "lookup".into(),
            kind: MethodKind::Tool,
            description: "Look a key up.".into(),
            docstring: "Look a key up.\n\nArgs:\n    key: The key.".into(),
            params: vec![param("key", json!({"type": "string"}))],
            returns: None,
        },
        |_ctx: AgentCtx, args: Value| async move {
            match args {
                Value::Object(entries) if entries[0].1 == Value::Text("half".into()) => {
                    Ok(MethodResult::Tool(Value::Float(2.5)))
                }
                Value::Object(entries) if entries[0].1 == Value::Text("slow".into()) => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(MethodResult::Tool(Value::Null))
                }
                _ => Err("no such key".into()),
            }
        },
    )
    .unwrap();
    vec![send, lookup]
}

#[tokio::test]
async fn host_methods_are_listed_checked_and_routed_like_plugin_methods() {
    let (python, plugins) = sandbox().await;
    let calc: Vec<_> = plugins
        .plugin_for("calculate_sum")
        .into_iter()
        .cloned()
        .collect();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let set = Toolbox::with_host_methods(&calc, &host_methods(sent.clone())).unwrap();
    let listing = set.prompt();
    assert!(
        listing.contains("def send_message(text):  # behavior")
            && listing.contains("(plugin `app`)"),
        "{listing}"
    );

    let code = "print(send_message('hi'))\nprint(lookup(key='half') + calculate_sum(1, 2))";
    let outcome = python.run(&ctx(), &set, code).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.stdout, "sent \"hi\"\n5.5\n");
    assert_eq!(*sent.lock().unwrap(), [(ctx().chat_key, "hi".to_string())]);
    // The same events as a plugin's: the call, then the behavior's system message.
    assert!(
        matches!(
            &outcome.events[..2],
            [Event::Call { plugin, method, ok: true, .. }, Event::SystemMessage { text, .. }]
                if plugin == "app" && method == "send_message" && text == "sent \"hi\""
        ),
        "{:?}",
        outcome.events
    );

    // Checked against the schema before the handler runs; a handler's
    // error is the code's PluginError; the host serves on.
    let code = "for a in ['x' * 101, 5]:\n    try:\n        send_message(a)\n    except Exception as e:\n        print(type(e).__name__)\ntry:\n    lookup('nope')\nexcept PluginError as e:\n    print(e)";
    let outcome = python.run(&ctx(), &set, code).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", outcome.stdout);
    assert!(lines[2].contains("no such key"), "{}", outcome.stdout);
    assert_eq!(sent.lock().unwrap().len(), 1, "the refused calls never ran");

    // A handler that does not return ends with the run's deadline.
    let limits = sandwit::RunLimits {
        time: Duration::from_millis(500),
        ..sandwit::RunLimits::default()
    };
    let start = Instant::now();
    let outcome = python
        .run_with_limits(&ctx(), &set, "lookup('slow')", &limits)
        .await;
    assert_eq!(outcome.status, RunStatus::LimitExceeded, "{outcome:?}");
    assert_ended_soon_after(start.elapsed(), limits.time);
}

#[tokio::test]
async fn a_host_method_past_the_call_time_limit_is_a_plugin_error_and_the_run_goes_on() {
    // Calls get 300 ms, the run its default 10 s: only the host method's
    // own deadline can end the call.
    let call_time = Duration::from_millis(300);
    let host = Host::builder()
        .cache_dir(cache_dir())
        .limits(CallLimits {
            time: call_time,
            ..CallLimits::default()
        })
        .prepared_interpreters(0)
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let set = Toolbox::with_host_methods(&[], &host_methods(Arc::default())).unwrap();
    let code = "try:\n    lookup('slow')\nexcept PluginError as e:\n    print('refused', 'time' in str(e))\nprint('goes on')";
    let start = Instant::now();
    let outcome = python.run(&ctx(), &set, code).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.stdout, "refused True\ngoes on\n");
    assert_ended_soon_after(start.elapsed(), call_time);
}

#[tokio::test]
async fn a_host_method_must_pass_a_plugins_checks_and_not_clash() {
    let (_, plugins) = sandbox().await;
    let spec = |name: &str, docstring: &str| MethodSpec {
        name: name.into(),
        kind: MethodKind::Tool,
        description: "x".into(),
        docstring: docstring.into(),
        params: Vec::new(),
        returns: None,
    };
    let handler = |_: AgentCtx, _: Value| async { Ok(MethodResult::Tool(Value::Null)) };
    let problems = HostMethod::new("app", spec("print", "Prints."), handler)
        .err()
        .unwrap();
    assert!(problems.iter().any(|p| p.contains("print")), "{problems:?}");
    let problems = HostMethod::new("app", spec("ok_name", ""), handler)
        .err()
        .unwrap();
    assert!(
        problems.iter().any(|p| p.contains("docstring")),
        "{problems:?}"
    );

    let calc: Vec<_> = plugins
        .plugin_for("calculate_sum")
        .into_iter()
        .cloned()
        .collect();
    let clash = HostMethod::new("app", spec("calculate_sum", "Adds."), handler).unwrap();
    let err = Toolbox::with_host_methods(&calc, &[clash]).err().unwrap();
    assert!(err.to_string().contains("calculate_sum"), "{err}");
    let as_calc = HostMethod::new("calc", spec("other", "Other."), handler).unwrap();
    let err = Toolbox::with_host_methods(&calc, &[as_calc]).err().unwrap();
    assert!(matches!(err, ToolboxError::Provider { .. }), "{err}");
}

/// A plugin is bound to the host that loaded it: its grants, configuration
/// and store are that host's, so another host's run refuses it (for an
/// embedder with a host per tenant, it would be a path between tenants).
#[tokio::test]
async fn a_plugin_is_refused_by_another_hosts_runs() {
    let tenant = |policy: &str| {
        Host::builder()
            .cache_dir(cache_dir())
            .policy(crate::common::pinned(
                sandwit::Policy::from_toml(policy).unwrap(),
            ))
            .build()
            .unwrap()
    };
    let a = tenant("[plugins.notes]\ngrant = [\"store\"]\n");
    let b = tenant("");
    let notes = a.load_plugin_file(artifacts::NOTES).await.unwrap();
    let set = Toolbox::new(std::slice::from_ref(&notes)).unwrap();
    let code = "remember('a secret of tenant a')\nprint(recall())";
    let python_a = a.load_python_file(artifacts::PYTHON).await.unwrap();
    let outcome = python_a.run(&ctx(), &set, code).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    let python_b = b.load_python_file(artifacts::PYTHON).await.unwrap();
    let outcome = python_b.run(&ctx(), &set, "print(recall())").await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
    let error = outcome.error.unwrap();
    assert_eq!(error.type_name, "ForeignPlugin");
    assert!(
        error
            .message
            .contains("plugin `notes` was loaded by another Host"),
        "{error:?}"
    );
    assert!(outcome.stdout.is_empty() && outcome.events.is_empty());
    // Loaded by the second host itself, it has that host's (no) grants.
    let own = b.load_plugin_file(artifacts::NOTES).await.unwrap();
    let set = Toolbox::new(&[own]).unwrap();
    let outcome = python_b.run(&ctx(), &set, "print(recall())").await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
    assert!(!outcome.stdout.contains("secret"), "{outcome:?}");
}

/// Runs `code` in the shared sandbox with `inputs`.
async fn run_with_inputs(code: &str, inputs: Vec<(&str, Value)>) -> sandwit::RunOutcome {
    let (python, plugins) = sandbox().await;
    let inputs = inputs.into_iter().map(|(k, v)| (k.to_string(), v));
    let options = RunOptions::new().inputs(inputs);
    python.run_with(&ctx(), plugins, code, &options).await
}

#[tokio::test]
async fn inputs_go_in_as_variables_and_the_result_comes_out() {
    let rows = Value::List(vec![Value::Int(3), Value::Int(4)]);
    let code = "total = sum(rows) * scale\nprint('total', total)\n{'total': total, 'who': who}";
    let inputs = vec![
        ("rows", rows),
        ("scale", Value::Float(0.5)),
        ("who", Value::Text("ada".into())),
    ];
    let outcome = run_with_inputs(code, inputs).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(outcome.stdout, "total 3.5\n");
    let expected = Value::Object(vec![
        ("total".into(), Value::Float(3.5)),
        ("who".into(), Value::Text("ada".into())),
    ]);
    assert_eq!(outcome.result, Some(expected));
    // The last expression wins; a `result` variable serves when there is
    // none (or it is None, as `print(...)` is); otherwise nothing.
    for (code, result) in [
        ("result = 1\n2 + 2", Some(Value::Int(4))),
        (
            "result = [1, b'x']\nprint('done')",
            Some(Value::List(vec![
                Value::Int(1),
                Value::Bytes(b"x".to_vec()),
            ])),
        ),
        ("x = 1", None),
        ("None", None),
        ("calculate_sum(20, 22)", Some(Value::Int(42))),
        ("if True:\n    7", None),
        ("len('''\nab\n''')", Some(Value::Int(4))),
        (
            "xs = [\n    1,\n]\nfor x in xs:\n    pass\nxs",
            Some(Value::List(vec![Value::Int(1)])),
        ),
    ] {
        let outcome = run_with_inputs(code, vec![]).await;
        assert_eq!(outcome.status, RunStatus::Ok, "{code}: {outcome:?}");
        assert_eq!(outcome.result, result, "{code}");
    }
    // An input named `result` is the result of code that sets none.
    let outcome = run_with_inputs("x = 1", vec![("result", Value::Int(5))]).await;
    assert_eq!(outcome.result, Some(Value::Int(5)), "{outcome:?}");
    // The next run of the (reused) interpreter has none of them.
    let outcome = run_with_inputs("'rows' in globals() or 'scale' in globals()", vec![]).await;
    assert_eq!(outcome.result, Some(Value::Bool(false)));
}

#[tokio::test]
async fn a_result_that_cannot_cross_is_none_and_bad_inputs_are_errors_naming_them() {
    // A value that cannot leave the sandbox is no result (the `result`
    // variable is tried next), never a failure of the code that ran.
    for (code, result) in [
        ("x = 1\n{'a': [object()]}", None),
        ("result = 7\n{1, 2}", Some(Value::Int(7))),
        (
            "import re\nresult = re.match('a', 'a')\nprint(result.group(0))",
            None,
        ),
    ] {
        let outcome = run_with_inputs(code, vec![]).await;
        assert_eq!(outcome.status, RunStatus::Ok, "{code}: {outcome:?}");
        assert_eq!(outcome.result, result, "{code}");
    }
    for (name, why) in [
        ("1x", "not an ASCII identifier"),
        ("__builtins__", "starts with `__`"),
        ("calculate_sum", "the name of a method of the run"),
        ("class", "a Python keyword"),
        ("ℌ", "not an ASCII identifier"),
    ] {
        let outcome = run_with_inputs("print('ran')", vec![(name, Value::Int(1))]).await;
        assert_eq!(outcome.status, RunStatus::Error, "{name}: {outcome:?}");
        let error = outcome.error.unwrap();
        assert_eq!(error.type_name, "InvalidInput");
        assert!(error.message.contains(why), "{name}: {error:?}");
        assert_eq!(outcome.stdout, "", "the code did not run");
    }
    // Past the host's value limits.
    let big = Value::Text("x".repeat(17 << 20));
    let outcome = run_with_inputs("print('ran')", vec![("big", big)]).await;
    let error = outcome.error.unwrap();
    assert!(error.message.contains("max_value_bytes"), "{error:?}");
}

#[tokio::test]
async fn a_host_calls_a_method_of_a_set_by_name_without_a_run() {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let (_, plugins) = sandbox().await;
    let calc = plugins.plugin_for("calculate_sum").unwrap().clone();
    let set = Toolbox::with_host_methods(&[calc], &host_methods(sent.clone())).unwrap();
    let sum = host()
        .call(
            &set,
            &ctx(),
            "calculate_sum",
            crate::common::args(json!({"num1": 20, "num2": 22})),
        )
        .await
        .unwrap();
    assert_eq!(sum, MethodResult::Tool(Value::Int(42)));
    let said = host()
        .call(
            &set,
            &ctx(),
            "send_message",
            crate::common::args(json!({"text": "hi"})),
        )
        .await
        .unwrap();
    assert_eq!(said, MethodResult::Behavior("sent \"hi\"".into()));
    assert_eq!(sent.lock().unwrap().len(), 1);
    // Checked as in a run: a bad argument, a host method's failure, a
    // method the set does not offer.
    let err = host()
        .call(
            &set,
            &ctx(),
            "calculate_sum",
            crate::common::args(json!({"num1": "x", "num2": 1})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.plugin.as_str(), err.method.as_str()),
        ("calc", "calculate_sum")
    );
    assert!(
        matches!(err.kind, sandwit::CallErrorKind::InvalidArguments { .. }),
        "{err}"
    );
    let err = host()
        .call(
            &set,
            &ctx(),
            "lookup",
            crate::common::args(json!({"key": "nope"})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `app`, method `lookup`: failed: no such key"
    );
    let err = host()
        .call(&set, &ctx(), "search_knowledge_base", Value::Object(vec![]))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "method `search_knowledge_base`: no such method"
    );
    // The host's controls apply to host methods: a rate limit of one call a
    // minute refuses the second.
    let policy = "[plugins.app.methods.lookup]\nrate_limit = 1\n";
    let limited = Host::builder()
        .cache_dir(cache_dir())
        .policy(sandwit::Policy::from_toml(policy).unwrap())
        .build()
        .unwrap();
    let only = Toolbox::with_host_methods(&[], &host_methods(sent.clone())).unwrap();
    let half = crate::common::args(json!({"key": "half"}));
    let first = limited.call(&only, &ctx(), "lookup", half.clone()).await;
    assert_eq!(first.unwrap(), MethodResult::Tool(Value::Float(2.5)));
    let second = limited
        .call(&only, &ctx(), "lookup", half)
        .await
        .unwrap_err();
    assert!(second.to_string().contains("rate"), "{second}");
    // A plugin another host loaded is refused, as a run refuses it.
    let err = limited
        .call(
            &set,
            &ctx(),
            "calculate_sum",
            crate::common::args(json!({"num1": 1, "num2": 2})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("loaded by another Host"), "{err}");
}
