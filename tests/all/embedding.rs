//! What an embedder drives from outside a run: cancelling it, and watching
//! its output and events as they happen.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandwit::{Cancel, Event, LiveEvent, RunOptions, RunStatus};

use crate::common::{assert_ended_soon_after, assert_still_serving, ctx, host};
use crate::python::sandbox;

/// Runs `code` with `options`, cancelling `cancel` after `after`.
async fn cancelled_after(code: &str, after: Duration) -> (sandwit::RunOutcome, Duration) {
    let (python, plugins) = sandbox().await;
    let cancel = Cancel::new();
    let options = RunOptions::new().cancel(cancel.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(after).await;
        cancel.cancel();
    });
    let start = Instant::now();
    let outcome = python.run_with(&ctx(), plugins, code, &options).await;
    canceller.await.unwrap();
    (outcome, start.elapsed())
}

#[tokio::test]
async fn cancelling_ends_a_busy_run_and_the_host_serves_on() {
    let (outcome, elapsed) = cancelled_after(
        "print('started')\nwhile True:\n    pass",
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(outcome.status, RunStatus::Cancelled, "{outcome:?}");
    assert_eq!((outcome.error, outcome.limit), (None, None));
    assert_eq!(
        outcome.stdout, "started\n",
        "what it printed before is kept"
    );
    // Well before the run's 10 s deadline.
    assert_ended_soon_after(elapsed, Duration::from_millis(300));
    assert_still_serving(host()).await;
    let (python, plugins) = sandbox().await;
    let next = python.run(&ctx(), plugins, "print(1 + 1)").await;
    assert_eq!((next.status, next.stdout.as_str()), (RunStatus::Ok, "2\n"));
}

#[tokio::test]
async fn cancelling_ends_a_plugin_call_in_flight() {
    // The hostile plugin's `sleep` blocks its call for an hour.
    let (outcome, elapsed) = cancelled_after("sleep()", Duration::from_millis(300)).await;
    assert_eq!(outcome.status, RunStatus::Cancelled, "{outcome:?}");
    assert_ended_soon_after(elapsed, Duration::from_millis(300));
    assert_still_serving(host()).await;
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
    let (python, plugins) = sandbox().await;
    let ctx = ctx();
    let run = python.run(&ctx, plugins, "while True:\n    pass");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), run)
            .await
            .is_err()
    );
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
    let only_calc = plugins.filter(|plugin, _| plugin.id() == "calc");
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
