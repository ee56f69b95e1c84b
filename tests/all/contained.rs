//! Hostile plugins, contained (issue 18's findings, one test or more each):
//! time and bytes spent in host calls, refused requests, events, argument
//! checks, identity and secrets. Each asserts the bound and that the host
//! still serves.

use std::time::{Duration, Instant};

use sandwit::{
    CallErrorKind, CallLimits, Event, Host, LimitKind, LoadError, MethodResult, PluginEvent,
    Policy, RunLimits, RunStatus, Toolbox, Value,
};
use serde_json::json;

use crate::common::{
    args, artifacts, assert_ended_soon_after, assert_still_serving, cache_dir, ctx, digest, load,
    logs, pinned, tight_host,
};

fn host_with(limits: CallLimits) -> Host {
    Host::builder()
        .cache_dir(cache_dir())
        .limits(limits)
        .build()
        .unwrap()
}

async fn hostile_call(host: &Host, method: &str, a: serde_json::Value) -> sandwit::CallReport {
    let hostile = load(host, artifacts::HOSTILE).await;
    let budget = sandwit::Budget::from_limits(host.limits());
    hostile.call_within(&ctx(), method, args(a), budget).await
}

fn limit_of(report: &sandwit::CallReport) -> LimitKind {
    match &report.result {
        Err(e) => match &e.kind {
            CallErrorKind::LimitExceeded { limit, .. } => *limit,
            other => panic!("not a limit: {other:?}"),
        },
        Ok(r) => panic!("no limit hit: {r:?}"),
    }
}

/// The refusals a call recorded: (capability needed, request).
fn denied(report: &sandwit::CallReport) -> Vec<(&String, &String)> {
    report
        .events
        .iter()
        .filter_map(|e| match e {
            PluginEvent::Denied {
                request,
                capability,
            } => Some((capability, request)),
            _ => None,
        })
        .collect()
}

// ---- 1. time and bytes in host calls ---------------------------------------

#[tokio::test]
async fn time_spent_in_host_calls_counts_against_the_deadline() {
    // Fuel to spare: only the deadline can end 3,000 lines of 8 MB (each
    // a quick host call that never yields to the timer).
    let deadline = Duration::from_millis(500);
    let host = host_with(CallLimits {
        fuel: None,
        time: deadline,
        ..CallLimits::default()
    });
    let hostile = load(&host, artifacts::HOSTILE).await;
    let budget = sandwit::Budget::from_limits(host.limits());
    let start = Instant::now();
    let a = args(json!({"size": 8 << 20, "times": 3000}));
    let report = hostile.call_within(&ctx(), "log_lines", a, budget).await;
    assert_eq!(limit_of(&report), LimitKind::Time, "{:?}", report.result);
    // One host call past the deadline at most: a few milliseconds here, far
    // under the minutes the loop would take.
    assert_ended_soon_after(start.elapsed(), deadline);
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn bytes_copied_through_the_host_cost_fuel() {
    // 300 M units of fuel: 1,000 lines of 1 MB cost 1,000 M.
    let report = hostile_call(
        tight_host(),
        "log_lines",
        json!({"size": 1 << 20, "times": 1000}),
    )
    .await;
    assert_eq!(limit_of(&report), LimitKind::Fuel, "{:?}", report.result);
    // The same lines, fewer: they fit, and what they cost is counted.
    let ok = hostile_call(
        tight_host(),
        "log_lines",
        json!({"size": 1 << 20, "times": 10}),
    )
    .await;
    assert!(ok.result.is_ok(), "{:?}", ok.result);
    assert!(ok.fuel_used >= 10 << 20, "{}", ok.fuel_used);
    assert_still_serving(tight_host()).await;
}

#[tokio::test]
async fn a_python_run_ends_at_its_deadline_inside_plugin_host_calls() {
    let (python, plugins) = crate::python::sandbox().await;
    let limits = RunLimits {
        fuel: None,
        time: Duration::from_millis(500),
        ..RunLimits::default()
    };
    let code = "while True:\n    log_lines(size=4 << 20, times=100)\nprint('never')";
    let start = Instant::now();
    let outcome = python.run_with_limits(&ctx(), plugins, code, &limits).await;
    assert_eq!(outcome.status, RunStatus::LimitExceeded, "{outcome:?}");
    assert_eq!(outcome.limit.as_ref().unwrap().kind, LimitKind::Time);
    assert!(!outcome.stdout.contains("never"));
    assert_ended_soon_after(start.elapsed(), limits.time);
}

// ---- 2. refused requests -----------------------------------------------------

#[tokio::test]
async fn refused_requests_are_cut_counted_and_capped() {
    let report = hostile_call(
        tight_host(),
        "store_flood",
        json!({"size": 1 << 20, "times": 500}),
    )
    .await;
    let denied = denied(&report);
    assert_eq!(denied.len(), 100, "at most 100 per call");
    for (capability, request) in &denied {
        assert!(request.len() < 300 && capability.len() < 300, "{request}");
    }
    assert!(denied[0].1.contains(" bytes)"), "{}", denied[0].1);
    // The refusals copied the key in each time, and paid for it.
    assert_eq!(limit_of(&report), LimitKind::Fuel, "{:?}", report.result);
    assert_still_serving(tight_host()).await;
}

#[tokio::test]
async fn refused_http_requests_are_cut_counted_and_capped() {
    // Nothing granted for the host; a 60 KB path on every request (a URI
    // is at most 64 KiB: longer ones are refused before the gate).
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(pinned(Policy::default()))
        .build()
        .unwrap();
    let services = load(&host, artifacts::SERVICES).await;
    let url = format!("http://refused.example/{}", "p".repeat(60_000));
    let budget = sandwit::Budget::from_limits(host.limits());
    let report = services
        .call_within(
            &ctx(),
            "fetch_many",
            args(json!({"url": url, "times": 500})),
            budget,
        )
        .await;
    let denied = denied(&report);
    assert_eq!(
        denied.len(),
        100,
        "at most 100 per call: {:?}",
        report.result
    );
    for (capability, request) in &denied {
        assert_eq!(capability.as_str(), "http:refused.example:80");
        assert!(request.len() < 300, "{request}");
        assert!(request.contains(" bytes)"), "{request}");
    }
    // Every request was refused, the plugin told so each time.
    assert_eq!(
        report.result.as_ref().ok(),
        Some(&MethodResult::Tool(Value::Int(500))),
        "{:?}",
        report.result
    );
    assert_still_serving(&host).await;
}

// ---- 8. memory across core instances ---------------------------------------

#[tokio::test]
async fn memories_of_several_core_instances_share_one_cap() {
    // The echo plugin with seven more core instances, each defining a 12 MiB
    // memory: every memory is under the 64 MiB one may take, together they
    // are not.
    let echo = std::fs::read(artifacts::ECHO).unwrap();
    let mut text = wasmprinter::print_bytes(&echo).unwrap();
    let end = text
        .trim_end()
        .rfind(')')
        .expect("the component's closing paren");
    let mut extra = String::from("(core module $hoard (memory 192))\n");
    for _ in 0..7 {
        extra.push_str("(core instance (instantiate $hoard))\n");
    }
    text.insert_str(end, &extra);
    let hoarder = wat::parse_str(&text).unwrap();

    let host = host_with(CallLimits::default());
    let Err(err) = host.load_plugin("hoarder", &hoarder).await else {
        panic!("a plugin holding 84 MiB of memories loaded");
    };
    let message = err.to_string();
    assert!(message.contains("memory"), "{message}");
    assert!(
        message.contains(&(64u64 << 20).to_string()) || message.contains("64 MiB"),
        "the message names the cap: {message}"
    );
    assert_still_serving(&host).await;
}

// ---- 3 and 9. log lines and events ------------------------------------------

#[tokio::test]
async fn a_calls_events_are_capped_in_bytes() {
    let host = host_with(CallLimits {
        max_event_bytes: 64 << 10,
        ..crate::common::tight_limits()
    });
    let report = hostile_call(&host, "log_lines", json!({"size": 10 << 20, "times": 20})).await;
    assert!(report.result.is_ok(), "{:?}", report.result);
    let lines = logs(&report.events);
    // Each line is cut to 4 KiB before it is kept; 64 KiB hold 15 of them.
    assert!(lines.iter().all(|l| l.message.len() <= 4096 + 3));
    assert_eq!(lines.len(), (64 << 10) / (4096 + 3 + 64));
}

#[tokio::test]
async fn a_runs_events_are_capped_with_their_own_limit() {
    let (python, plugins) = crate::python::sandbox().await;
    let limits = RunLimits {
        max_event_bytes: 8 << 20,
        ..RunLimits::default()
    };
    // Behavior results are kept as system messages: 1 MB each.
    let code = "for i in range(100):\n    long_text(size=1 << 20)\nprint('never')";
    let outcome = python.run_with_limits(&ctx(), plugins, code, &limits).await;
    assert_eq!(outcome.status, RunStatus::LimitExceeded, "{outcome:?}");
    let hit = outcome.limit.as_ref().unwrap();
    assert_eq!(hit.kind, LimitKind::Events, "{hit:?}");
    assert!(
        hit.message.contains("plugin `hostile`, method `long_text`"),
        "{}",
        hit.message
    );
    let bytes: usize = outcome
        .events
        .iter()
        .map(|e| match e {
            Event::SystemMessage { text, .. } => text.len(),
            _ => 0,
        })
        .sum();
    assert!(bytes <= 8 << 20, "{bytes}");
    let count = RunLimits {
        max_events: 20,
        ..RunLimits::default()
    };
    let outcome = python
        .run_with_limits(
            &ctx(),
            plugins,
            "for i in range(30):\n    calculate_sum(1, 2)",
            &count,
        )
        .await;
    assert_eq!(
        outcome.limit.as_ref().map(|l| l.kind),
        Some(LimitKind::Events),
        "{outcome:?}"
    );
    assert_eq!(outcome.events.len(), 20);
}

#[tokio::test]
async fn an_exception_message_is_under_the_output_cap() {
    let (python, plugins) = crate::python::sandbox().await;
    let limits = RunLimits {
        max_output_bytes: 1 << 10,
        ..RunLimits::default()
    };
    let code = "raise ValueError('x' * 30_000_000)";
    let outcome = python.run_with_limits(&ctx(), plugins, code, &limits).await;
    let error = outcome.error.expect("an error");
    assert_eq!(error.type_name, "ValueError");
    assert!(
        error.message.len() <= (1 << 10) + 3,
        "{}",
        error.message.len()
    );
    assert!(
        error.traceback.len() <= (1 << 10) + 3,
        "{}",
        error.traceback.len()
    );
}

// ---- guest-chosen text in messages (issue 54) --------------------------------

/// A plugin's failure of 16-20 MiB reaches a direct call and a run cut to
/// `MAX_MESSAGE_BYTES`, the run's whole outcome small with it.
#[tokio::test]
async fn a_plugins_huge_failure_message_is_cut_on_every_surface() {
    let max = sandwit::MAX_MESSAGE_BYTES + '…'.len_utf8();
    let report = hostile_call(tight_host(), "long_failure", json!({"size": 16 << 20})).await;
    match report.result {
        Err(e) => match e.kind {
            CallErrorKind::Failed { message } => {
                assert!(message.len() <= max, "{}", message.len());
                assert!(message.starts_with("fff"), "{message}");
            }
            other => panic!("not the plugin's failure: {other:?}"),
        },
        Ok(r) => panic!("no failure: {r:?}"),
    }
    let (python, plugins) = crate::python::sandbox().await;
    let code = "try:\n    long_failure(size=20 << 20)\nexcept PluginError as e:\n    print(len(e.message))\nlong_failure(size=20 << 20)";
    let outcome = python.run(&ctx(), plugins, code).await;
    assert_eq!(outcome.status, RunStatus::Error, "{:?}", outcome.error);
    let printed: usize = outcome.stdout.trim().parse().unwrap();
    assert!(printed <= max, "{printed}");
    let answer = format!("{outcome:?}").len();
    assert!(answer < 64 << 10, "the outcome takes {answer} bytes");
    assert_still_serving(tight_host()).await;
}

// ---- 5. identity -------------------------------------------------------------

#[tokio::test]
async fn grants_go_only_to_the_components_the_policy_pins() {
    let mut policy = Policy::default();
    policy.grant("notes", ["store"]).unwrap();
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(pinned(policy.clone()))
        .build()
        .unwrap();
    // The real notes plugin loads; one that claims its id does not.
    load(&host, artifacts::NOTES).await;
    let err = host
        .load_plugin_file(artifacts::IMPOSTOR)
        .await
        .err()
        .unwrap();
    let LoadError::Unpinned {
        plugin,
        digest: got,
        pinned,
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!((plugin.as_str(), *pinned), ("notes", 1));
    assert_eq!(got, &digest(artifacts::IMPOSTOR));
    assert!(err.to_string().contains("add it to `sha256`"), "{err}");
    // A grant with no pin at all goes to nobody.
    let unpinned = Host::builder()
        .cache_dir(cache_dir())
        .policy(policy)
        .build()
        .unwrap();
    let err = unpinned
        .load_plugin_file(artifacts::NOTES)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, LoadError::Unpinned { pinned: 0, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_toolbox_refuses_two_plugins_of_one_id() {
    let host = host_with(CallLimits::default());
    let notes = load(&host, artifacts::NOTES).await;
    let impostor = load(&host, artifacts::IMPOSTOR).await;
    let err = Toolbox::new(&[notes, impostor.clone()]).err().unwrap();
    assert!(
        err.to_string()
            .starts_with("two plugins claim the id `notes`"),
        "{err}"
    );
    let calc = load(&host, artifacts::CALC).await;
    let err = Toolbox::new(&[calc, impostor]).err().unwrap();
    assert_eq!(
        err.to_string(),
        "method `calculate_sum` is offered by both plugin `calc` and plugin `notes`"
    );
}

#[tokio::test]
async fn the_policy_marks_secrets_the_plugin_does_not() {
    let mut policy = Policy::from_toml(
        r#"
        [plugins.services]
        grant = ["config"]
        config = { token = "tok-SECRET-4242", colour = "green" }
        secrets = ["colour"]
        "#,
    )
    .unwrap();
    policy = pinned(policy);
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(policy)
        .build()
        .unwrap();
    let services = load(&host, artifacts::SERVICES).await;
    let result = services
        .call(&ctx(), "read_config", args(json!({"key": "colour"})))
        .await
        .unwrap();
    assert_eq!(result, MethodResult::Tool(Value::Text("[secret]".into())));
}
