//! The host's run slots: at most so many runs execute at once, the others
//! wait in a bounded queue for a bounded time, and a run's time limit
//! counts from when it got its slot.

use std::time::Duration;

use sandwit::{
    Cancel, Host, LimitKind, PythonSandbox, RunLimits, RunOptions, RunOutcome, RunSlots, RunStatus,
    Toolbox,
};

use crate::common::{artifacts, cache_dir, ctx, until};

/// A sandbox on a host of one run slot, `waiting` runs waiting for it at
/// most `max_wait` each.
async fn one_slot(waiting: usize, max_wait: Duration) -> (Host, PythonSandbox) {
    let host = Host::builder()
        .cache_dir(cache_dir())
        .prepared_interpreters(0)
        .run_slots(RunSlots {
            running: 1,
            waiting,
            max_wait,
        })
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    (host, python)
}

/// Runs `code` with a time limit of `time`, and `cancel` if given, on a
/// task of its own.
fn spawn_run(
    python: &PythonSandbox,
    code: &str,
    time: Duration,
    cancel: Option<Cancel>,
) -> tokio::task::JoinHandle<RunOutcome> {
    let (python, code) = (python.clone(), code.to_string());
    tokio::spawn(async move {
        let limits = RunLimits {
            time,
            ..RunLimits::default()
        };
        let mut options = RunOptions::new().limits(limits);
        if let Some(cancel) = cancel {
            options = options.cancel(cancel);
        }
        python
            .run_with(&ctx(), &Toolbox::default(), &code, &options)
            .await
    })
}

/// Waits until `host` has `running` runs executing and `waiting` waiting.
async fn until_runs(host: &Host, running: usize, waiting: usize) {
    let what = format!("{running} running and {waiting} waiting");
    until(|| host.runs_now() == (running, waiting), &what).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_time_limit_counts_from_its_slot_not_from_its_wait() {
    let (host, python) = one_slot(4, Duration::from_secs(60)).await;
    let code = "import time\ntime.sleep(0.8)\nprint('done')";
    let limit = Duration::from_millis(1500);
    // Two runs of 0.8 s each under a 1.5 s limit, one slot: the second
    // waits for the first, then has its whole limit.
    let first = spawn_run(&python, code, limit, None);
    until_runs(&host, 1, 0).await;
    let second = spawn_run(&python, code, limit, None);
    until_runs(&host, 1, 1).await;
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    for outcome in [&first, &second] {
        assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
        assert_eq!(outcome.stdout, "done\n");
        assert!(outcome.elapsed < limit, "{:?}", outcome.elapsed);
    }
    // It waited for the rest of the first run's 0.8 s: together more than
    // the limit, which it would have run out of counted from its start.
    assert!(
        second.queued >= Duration::from_millis(400),
        "{:?}",
        second.queued
    );
    assert!(second.queued + second.elapsed > limit, "{second:?}");
    assert_eq!(host.runs_now(), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_past_the_queue_or_the_wait_are_refused_with_the_queue_limit() {
    let (host, python) = one_slot(1, Duration::from_millis(400)).await;
    let long = Duration::from_secs(10);
    let held = spawn_run(&python, "import time\ntime.sleep(2)", long, None);
    until_runs(&host, 1, 0).await;
    let waited = spawn_run(&python, "print('never')", long, None);
    until_runs(&host, 1, 1).await;
    // The queue of one is full: refused at once.
    let refused = spawn_run(&python, "print('never')", long, None)
        .await
        .unwrap();
    let limit = refused.limit.as_ref().expect("a limit");
    assert_eq!(
        (refused.status, limit.kind),
        (RunStatus::LimitExceeded, LimitKind::Queue)
    );
    assert!(
        limit.message.contains("1 runs already wait"),
        "{}",
        limit.message
    );
    // The one in the queue waits its 0.4 s, then gives up; neither ran.
    let waited = waited.await.unwrap();
    let limit = waited.limit.as_ref().expect("a limit");
    assert_eq!(
        (waited.status, limit.kind),
        (RunStatus::LimitExceeded, LimitKind::Queue)
    );
    assert!(limit.message.contains("waited 0.4 s"), "{}", limit.message);
    assert!(
        waited.queued >= Duration::from_millis(400),
        "{:?}",
        waited.queued
    );
    for outcome in [&waited, &refused] {
        assert_eq!(
            (outcome.stdout.as_str(), outcome.elapsed),
            ("", Duration::ZERO)
        );
    }
    assert_eq!(held.await.unwrap().status, RunStatus::Ok);
    assert_eq!(host.runs_now(), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_cancelled_while_it_waits_for_a_slot_ends_cancelled() {
    let (host, python) = one_slot(4, Duration::from_secs(60)).await;
    let held = spawn_run(
        &python,
        "import time\ntime.sleep(1)",
        Duration::from_secs(10),
        None,
    );
    until_runs(&host, 1, 0).await;
    let cancel = Cancel::new();
    let waiting = spawn_run(
        &python,
        "print('never')",
        Duration::from_secs(10),
        Some(cancel.clone()),
    );
    until_runs(&host, 1, 1).await;
    cancel.cancel();
    let cancelled = waiting.await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled, "{cancelled:?}");
    assert_eq!(cancelled.stdout, "");
    assert_eq!(host.runs_now().1, 0, "it left the queue");
    assert_eq!(held.await.unwrap().status, RunStatus::Ok);
}

#[test]
fn a_host_needs_a_run_slot() {
    let built = Host::builder()
        .run_slots(RunSlots {
            running: 0,
            ..RunSlots::default()
        })
        .build();
    let err = built.err().expect("refused").to_string();
    assert!(err.contains("`running` is 0"), "{err}");
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(RunSlots::default().running, cores);
}
