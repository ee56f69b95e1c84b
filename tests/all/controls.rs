//! Execution controls end to end: rate limits, circuit breakers, cost
//! budgets and approval, set in the policy file, seen by sandboxed Python as
//! `PluginError`s, recorded as events of the run and counted in the host's
//! snapshot. Every host here reads a `ManualClock`: nothing sleeps.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandwit::controls::{BreakerState, BudgetScope, Flag, ManualClock, RateScope};
use sandwit::{
    AgentCtx, Approver, CallErrorKind, ControlEvent, Event, Host, HostMethod, LimitKind, LiveEvent,
    MethodKind, MethodResult, MethodSpec, Param, Policy, PythonSandbox, RunOptions, RunOutcome,
    RunStatus, Toolbox, Value,
};
use serde_json::json;

use crate::common::{args, artifacts, cache_dir, ctx, load};

/// A host under `policy` (TOML) reading `clock`, asking `approver`; its
/// Python sandbox; and a set of the calc plugin and the host methods of
/// [`app_methods`].
async fn controlled(
    policy: &str,
    clock: &Arc<ManualClock>,
    approver: Option<Arc<dyn Approver>>,
) -> (Host, PythonSandbox, Toolbox) {
    let mut builder = Host::builder()
        .cache_dir(cache_dir())
        .policy(Policy::from_toml(policy).unwrap())
        .clock(clock.clone())
        .prepared_interpreters(0);
    if let Some(approver) = approver {
        builder = builder.approver(approver);
    }
    let host = builder.build().unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let calc = load(&host, artifacts::CALC).await;
    let set = Toolbox::with_host_methods(&[calc], &app_methods()).unwrap();
    (host, python, set)
}

/// The embedder's methods, offered as `app`: `flaky(fail)`, a tool that
/// fails when told to, and `wipe()`, a tool that says it wiped.
fn app_methods() -> Vec<HostMethod> {
    let spec = |name: &str, params| MethodSpec {
        name: name.into(),
        kind: MethodKind::Tool,
        description: format!("The {name} method."),
        docstring: format!("The {name} method."),
        params,
        returns: None,
    };
    let flaky = HostMethod::new(
        "app",
        spec(
            "flaky",
            vec![Param {
                name: "fail".into(),
                schema: json!({"type": "boolean"}),
                required: true,
            }],
        ),
        |_ctx: AgentCtx, args: Value| async move {
            match args {
                Value::Object(entries) if entries[0].1 == Value::Bool(true) => {
                    Err("the backend is down".to_string())
                }
                _ => Ok(MethodResult::Tool(Value::Text("fine".into()))),
            }
        },
    )
    .unwrap();
    let wipe = HostMethod::new("app", spec("wipe", Vec::new()), |_ctx, _args| async {
        Ok(MethodResult::Tool(Value::Text("wiped".into())))
    })
    .unwrap();
    vec![flaky, wipe]
}

fn in_chat(chat: &str) -> AgentCtx {
    AgentCtx {
        user_id: Some("user-7".into()),
        ..AgentCtx::new(chat)
    }
}

/// Python that calls `call` (an expression) `times` times and prints, for
/// each, the result or the `PluginError`'s kind and message.
fn calls(call: &str, times: usize) -> String {
    format!(
        "for _ in range({times}):\n    try:\n        print('ok', {call})\n    except PluginError as e:\n        print(e.kind, '|', e.message)\n"
    )
}

fn control_events(outcome: &RunOutcome) -> Vec<&ControlEvent> {
    outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Control { event, .. } => Some(event),
            _ => None,
        })
        .collect()
}

fn stats<'a>(
    snapshot: &'a sandwit::ControlsSnapshot,
    method: &str,
) -> &'a sandwit::controls::MethodStats {
    snapshot
        .methods
        .iter()
        .find(|m| m.method == method)
        .unwrap_or_else(|| panic!("no stats for {method}: {snapshot:?}"))
}

#[tokio::test]
async fn a_rate_limit_refuses_past_its_calls_per_chat_and_refills_with_the_clock() {
    let clock = Arc::new(ManualClock::new());
    let policy = r#"
        [plugins.calc.controls]
        rate_limit = 2
        rate_limit_scope = "chat"

        [plugins.app.methods.wipe]
        rate_limit = 1
    "#;
    let (host, python, set) = controlled(policy, &clock, None).await;
    let live = Arc::new(Mutex::new(Vec::new()));
    let seen = live.clone();
    let options = RunOptions::new().on_event(move |event| {
        if let LiveEvent::Event(Event::Control { event, .. }) = event {
            seen.lock().unwrap().push(event.clone());
        }
    });
    let code = calls("calculate_sum(1, 2)", 3);
    let outcome = python.run_with(&in_chat("a"), &set, &code, &options).await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines[..2], ["ok 3", "ok 3"], "{}", outcome.stdout);
    assert!(
        lines[2]
            .starts_with("limit_exceeded | rate limit exceeded: at most 2 calls a minute per chat"),
        "{}",
        outcome.stdout
    );
    let refused = ControlEvent::RateLimited {
        per_minute: 2,
        scope: RateScope::Chat,
        retry_after_ms: 30_000,
    };
    assert_eq!(control_events(&outcome), [&refused]);
    assert_eq!(*live.lock().unwrap(), [refused], "the live events too");
    let last = outcome.events.last().unwrap();
    assert!(
        matches!(last, Event::Call { method, ok: false, .. } if method == "calculate_sum"),
        "{last:?}"
    );

    // Another chat has its own bucket; this one's is empty until it refills.
    let outcome = python
        .run(&in_chat("b"), &set, &calls("calculate_sum(1, 2)", 2))
        .await;
    assert_eq!(outcome.stdout, "ok 3\nok 3\n");
    let outcome = python
        .run(&in_chat("a"), &set, &calls("calculate_sum(1, 2)", 1))
        .await;
    assert!(
        outcome.stdout.starts_with("limit_exceeded"),
        "{}",
        outcome.stdout
    );
    clock.advance(Duration::from_secs(30));
    let outcome = python
        .run(&in_chat("a"), &set, &calls("calculate_sum(1, 2)", 2))
        .await;
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines[0], "ok 3", "30 s refilled one call");
    assert!(lines[1].starts_with("limit_exceeded"), "{}", outcome.stdout);

    // A method's own limit, shared by everyone (the default scope).
    let outcome = python.run(&in_chat("a"), &set, &calls("wipe()", 1)).await;
    assert_eq!(outcome.stdout, "ok wiped\n");
    let outcome = python.run(&in_chat("c"), &set, &calls("wipe()", 1)).await;
    assert!(
        outcome
            .stdout
            .starts_with("limit_exceeded | rate limit exceeded: at most 1 calls a minute;"),
        "{}",
        outcome.stdout
    );

    // Direct calls count against the same buckets.
    let calc = set.plugin_for("calculate_sum").unwrap();
    let err = calc
        .call(
            &in_chat("a"),
            "calculate_sum",
            args(json!({"num1": 1, "num2": 2})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.kind,
            CallErrorKind::LimitExceeded {
                limit: LimitKind::Rate,
                ..
            }
        ),
        "{err}"
    );

    let snapshot = host.controls_snapshot();
    let sum = stats(&snapshot, "calculate_sum");
    assert_eq!(
        (sum.calls, sum.succeeded, sum.rate_limited, sum.failed),
        (9, 5, 4, 0),
        "{sum:?}"
    );
    assert_eq!(stats(&snapshot, "wipe").rate_limited, 1);
}

#[tokio::test]
async fn a_breaker_opens_fails_fast_probes_after_recovery_and_closes_or_reopens() {
    let clock = Arc::new(ManualClock::new());
    let policy = r#"
        [plugins.app.methods.flaky]
        breaker = { failures = 2, recovery_s = 30 }
    "#;
    let (host, python, set) = controlled(policy, &clock, None).await;
    let run = |code: String| {
        let (python, set) = (python.clone(), set.clone());
        async move { python.run(&ctx(), &set, &code).await }
    };
    let breaker = |host: &Host| stats(&host.controls_snapshot(), "flaky").breaker.unwrap();

    // Two failures in a row open it; the next call fails fast, unrun.
    let outcome = run(calls("flaky(True)", 2) + &calls("flaky(False)", 1)).await;
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(
        lines[..2],
        ["failed | the backend is down"; 2],
        "{}",
        outcome.stdout
    );
    assert!(
        lines[2].starts_with("failed | unavailable: its circuit breaker is open")
            && lines[2].contains("tried again in 30.0 s"),
        "{}",
        outcome.stdout
    );
    let events = control_events(&outcome);
    assert!(
        matches!(
            events[..],
            [
                ControlEvent::BreakerTripped { reason, recovery_s: 30 },
                ControlEvent::BreakerOpen { retry_after_ms: Some(30_000) },
            ] if reason == "2 failed calls in a row"
        ),
        "{events:?}"
    );
    assert_eq!(breaker(&host).state, BreakerState::Open);
    assert_eq!(breaker(&host).trips, 1);

    // After the recovery time one probe goes through; its failure reopens it.
    clock.advance(Duration::from_secs(30));
    assert_eq!(breaker(&host).state, BreakerState::HalfOpen);
    let outcome = run(calls("flaky(True)", 1) + &calls("flaky(False)", 1)).await;
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines[0], "failed | the backend is down");
    assert!(
        lines[1].contains("circuit breaker is open"),
        "{}",
        outcome.stdout
    );
    assert_eq!(breaker(&host).trips, 2);

    // A probe that succeeds closes it.
    clock.advance(Duration::from_secs(30));
    let outcome = run(calls("flaky(False)", 2) + &calls("flaky(True)", 1)).await;
    assert_eq!(
        outcome.stdout, "ok fine\nok fine\nfailed | the backend is down\n",
        "closed, with a clean count: one failure does not open it"
    );
    assert_eq!(breaker(&host).state, BreakerState::Closed);
    // And the next failure in a row opens it again.
    let outcome = run(calls("flaky(True)", 1)).await;
    assert_eq!(outcome.stdout, "failed | the backend is down\n");
    assert_eq!(breaker(&host).state, BreakerState::Open);
    assert_eq!(breaker(&host).trips, 3);

    // Bad arguments are the caller's fault, not the method's: not counted.
    clock.advance(Duration::from_secs(30));
    let outcome = run(calls("flaky('x')", 3) + &calls("flaky(False)", 1)).await;
    assert!(
        outcome.stdout.ends_with("ok fine\n"),
        "invalid arguments neither tripped it nor spent the probe: {}",
        outcome.stdout
    );
    let flaky = stats(&host.controls_snapshot(), "flaky").clone();
    assert_eq!((flaky.breaker_refused, flaky.failed), (2, 8), "{flaky:?}");
}

#[tokio::test]
async fn the_error_rate_over_the_window_opens_a_plugins_breaker() {
    let clock = Arc::new(ManualClock::new());
    let policy = r#"
        [plugins.app.controls]
        breaker = { error_rate = 0.5, min_calls = 4, window_s = 60, recovery_s = 10 }
    "#;
    let (host, python, set) = controlled(policy, &clock, None).await;
    // Failures never two in a row, but half of the calls: the fourth opens
    // the breaker the plugin's methods share.
    let code = calls("flaky(True)", 1)
        + &calls("flaky(False)", 1)
        + &calls("flaky(True)", 1)
        + &calls("flaky(False)", 1)
        + &calls("wipe()", 1);
    let outcome = python.run(&ctx(), &set, &code).await;
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines[3], "ok fine", "{}", outcome.stdout);
    assert!(
        lines[4].contains("circuit breaker is open"),
        "{}",
        outcome.stdout
    );
    let tripped = control_events(&outcome)
        .into_iter()
        .find_map(|e| match e {
            ControlEvent::BreakerTripped { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        tripped.contains("2 of 4 calls failed in the last 60 s"),
        "{tripped}"
    );
    let snapshot = host.controls_snapshot();
    assert_eq!(
        stats(&snapshot, "wipe").breaker.unwrap().state,
        BreakerState::Open
    );
    assert_eq!(stats(&snapshot, "wipe").breaker_refused, 1);
}

#[tokio::test]
async fn budgets_per_run_and_per_chat_refuse_calls_past_them_and_charge_only_successes() {
    let clock = Arc::new(ManualClock::new());
    let policy = r#"
        [budgets]
        per_run = 0.1
        per_chat = 0.1

        [plugins.calc.controls]
        cost_per_use = 0.03
    "#;
    let (host, python, set) = controlled(policy, &clock, None).await;
    // A failed call costs nothing; the fourth good one would pass the run's
    // budget.
    let code = calls("calculate_sum(1, 'x')", 1) + &calls("calculate_sum(1, 2)", 4);
    let outcome = python.run(&in_chat("a"), &set, &code).await;
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert!(
        lines[0].starts_with("invalid_arguments"),
        "{}",
        outcome.stdout
    );
    assert_eq!(lines[1..4], ["ok 3"; 3]);
    assert_eq!(
        lines[4],
        "limit_exceeded | budget limit exceeded: the call costs 0.03, and the run's budget of 0.1 has 0.01 left",
    );
    assert_eq!(outcome.cost, 0.09);
    assert_eq!(
        control_events(&outcome),
        [&ControlEvent::BudgetExceeded {
            budget: BudgetScope::Run,
            limit: 0.1,
            spent: 0.09,
            cost: 0.03
        }]
    );
    assert_eq!(host.chat_spent("a").await.unwrap(), 0.09);

    // A second run in the same chat finds the chat's budget spent; another
    // chat's is untouched.
    let outcome = python
        .run(&in_chat("a"), &set, &calls("calculate_sum(1, 2)", 1))
        .await;
    assert!(
        outcome
            .stdout
            .contains("the chat's budget of 0.1 has 0.01 left"),
        "{}",
        outcome.stdout
    );
    assert_eq!(outcome.cost, 0.0);
    let outcome = python
        .run(&in_chat("b"), &set, &calls("calculate_sum(1, 2)", 1))
        .await;
    assert_eq!(outcome.stdout, "ok 3\n");
    assert_eq!(outcome.cost, 0.03);

    // A direct call draws on the chat's budget too.
    let calc = set.plugin_for("calculate_sum").unwrap();
    let err = calc
        .call(
            &in_chat("a"),
            "calculate_sum",
            args(json!({"num1": 1, "num2": 2})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.kind,
            CallErrorKind::LimitExceeded {
                limit: LimitKind::Budget,
                ..
            }
        ),
        "{err}"
    );
    let sum = stats(&host.controls_snapshot(), "calculate_sum").clone();
    assert_eq!(
        (sum.succeeded, sum.budget_refused, sum.failed),
        (4, 3, 1),
        "{sum:?}"
    );
    assert!((sum.cost - 0.12).abs() < 1e-9, "{sum:?}");
}

#[tokio::test]
async fn flagged_methods_need_approval_and_the_approver_gives_it() {
    let clock = Arc::new(ManualClock::new());
    let policy = r#"
        [approval]
        require_for = ["dangerous", "requires_auth"]

        [plugins.app.methods.wipe]
        dangerous = true

        [plugins.calc.methods.calculate_sum]
        requires_auth = true
    "#;
    // With no approver, a flagged call is refused, naming plugin, method
    // and flag; others go through.
    let (host, python, set) = controlled(policy, &clock, None).await;
    let code = calls("wipe()", 1) + &calls("get_current_time() is not None", 1);
    let outcome = python.run(&ctx(), &set, &code).await;
    assert_eq!(
        outcome.stdout,
        "denied | plugin `app`, method `wipe` is `dangerous`, and the policy requires approval \
         for each call: no approver is set\nok True\n"
    );
    assert_eq!(
        control_events(&outcome),
        [&ControlEvent::ApprovalRefused {
            flags: vec![Flag::Dangerous],
            reason: "no approver is set".into()
        }]
    );
    let err = set
        .plugin_for("calculate_sum")
        .unwrap()
        .call(&ctx(), "calculate_sum", args(json!({"num1": 1, "num2": 2})))
        .await
        .unwrap_err();
    assert!(
        matches!(&err.kind, CallErrorKind::NotApproved { flags, .. } if flags == &[Flag::RequiresAuth]),
        "{err}"
    );
    assert!(err.to_string().contains("`requires_auth`"), "{err}");
    assert_eq!(
        stats(&host.controls_snapshot(), "wipe").approvals_refused,
        1
    );
    drop((host, python, set));

    // The host's approver approves calls for a known user; a run's own
    // comes first.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let approver = move |request: &sandwit::ApprovalRequest<'_>| {
        seen.lock().unwrap().push((
            request.plugin.to_string(),
            request.method.to_string(),
            request.flags.to_vec(),
            request.args.clone(),
        ));
        request.ctx.user_id.is_some()
    };
    let (host, python, set) = controlled(policy, &clock, Some(Arc::new(approver))).await;
    let code = calls("wipe()", 1) + &calls("calculate_sum(2, 3)", 1);
    let outcome = python.run(&ctx(), &set, &code).await;
    assert_eq!(outcome.stdout, "ok wiped\nok 5\n");
    assert_eq!(
        control_events(&outcome),
        [
            &ControlEvent::Approved {
                flags: vec![Flag::Dangerous]
            },
            &ControlEvent::Approved {
                flags: vec![Flag::RequiresAuth]
            }
        ]
    );
    assert_eq!(
        asked.lock().unwrap()[1],
        (
            "calc".to_string(),
            "calculate_sum".to_string(),
            vec![Flag::RequiresAuth],
            args(json!({"num1": 2, "num2": 3}))
        )
    );
    let anonymous = AgentCtx::new("chat-9");
    let outcome = python.run(&anonymous, &set, &calls("wipe()", 1)).await;
    assert!(
        outcome.stdout.ends_with("the approver refused it\n"),
        "{}",
        outcome.stdout
    );
    let refuse_all = Arc::new(|_: &sandwit::ApprovalRequest<'_>| false);
    let options = RunOptions::new().approver(refuse_all);
    let outcome = python
        .run_with(&ctx(), &set, &calls("wipe()", 1), &options)
        .await;
    assert!(outcome.stdout.starts_with("denied |"), "{}", outcome.stdout);
    let wipe = stats(&host.controls_snapshot(), "wipe").clone();
    assert_eq!(
        (
            wipe.calls,
            wipe.approvals_granted,
            wipe.approvals_refused,
            wipe.succeeded
        ),
        (3, 1, 2, 1),
        "{wipe:?}"
    );
}

#[test]
fn policy_controls_are_parsed_strictly_naming_plugin_method_and_key() {
    let good = r#"
        [budgets]
        per_run = 1
        per_chat = 10.0

        [approval]
        require_for = ["dangerous"]

        [plugins.weather.controls]
        rate_limit = 60
        rate_limit_scope = "user"
        breaker = { failures = 5, error_rate = 0.5, window_s = 60, recovery_s = 30 }
        cost_per_use = 0.01

        [plugins.weather.methods.forecast]
        rate_limit = 10
        dangerous = true
    "#;
    let policy = Policy::from_toml(good).unwrap();
    assert_eq!(policy.budgets.per_run, Some(1.0));
    let weather = policy.plugin("weather").unwrap();
    assert_eq!(weather.controls.rate_limit_scope, Some(RateScope::User));
    assert_eq!(weather.methods["forecast"].dangerous, Some(true));
    assert!(
        weather.sha256.is_empty(),
        "controls give nothing: no pin needed"
    );

    for (text, needle) in [
        (
            "[plugins.weather.methods.forecast]\nrate_limits = 1",
            "unknown field `rate_limits`",
        ),
        (
            "[plugins.weather.methods.forecast]\nrate_limit = 0",
            "`plugins.weather.methods.forecast.rate_limit`: 0 is not 1 to",
        ),
        (
            "[plugins.weather.controls]\nbreaker = { failures = 3, error_rate = 1.5 }",
            "`plugins.weather.controls.breaker.error_rate`: 1.5",
        ),
        (
            "[plugins.weather.controls]\nbreaker = { recovery_s = 3 }",
            "`plugins.weather.controls.breaker`: give `failures`, `error_rate` or both",
        ),
        (
            "[plugins.weather.methods.forecast]\ncost_per_use = -1.0",
            "`plugins.weather.methods.forecast.cost_per_use`: -1 is not an amount",
        ),
        (
            "[plugins.weather.controls]\nrate_limit_scope = \"galaxy\"",
            "unknown variant `galaxy`",
        ),
        (
            "[approval]\nrequire_for = [\"scary\"]",
            "unknown variant `scary`",
        ),
        ("[budgets]\nper_day = 1", "unknown field `per_day`"),
        (
            "[budgets]\nper_chat = nan",
            "`budgets.per_chat`: NaN is not an amount",
        ),
        (
            "[plugins.weather.methods.\"not-a-name\"]\ndangerous = true",
            "`not-a-name` is not a method name",
        ),
    ] {
        let e = Policy::from_toml(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text:?}: {e}");
    }
}
