//! The host's run slots: at most so many runs execute at once, the others
//! wait in a bounded queue for a bounded time, and a run's time limit
//! counts from when it got its slot.

use std::time::Duration;

use sandwit::{
    Cancel, Host, LimitKind, PluginSet, PythonSandbox, RunLimits, RunOptions, RunOutcome, RunSlots,
    RunStatus,
};

use crate::common::{artifacts, cache_dir, ctx};

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

/// Runs `code` with a time limit of `time`, and `cancel` if given.
async fn run(
    python: &PythonSandbox,
    code: &str,
    time: Duration,
    cancel: Option<Cancel>,
) -> RunOutcome {
    let limits = RunLimits {
        time,
        ..RunLimits::default()
    };
    let mut options = RunOptions::new().limits(limits);
    if let Some(cancel) = cancel {
        options = options.cancel(cancel);
    }
    python
        .run_with(&ctx(), &PluginSet::default(), code, &options)
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_time_limit_counts_from_its_slot_not_from_its_wait() {
    let (host, python) = one_slot(4, Duration::from_secs(60)).await;
    let code = "import time\ntime.sleep(0.8)\nprint('done')";
    let limit = Duration::from_millis(1200);
    // Two runs of 0.8 s each under a 1.2 s limit, one slot: the second
    // waits for the first, then has its whole 1.2 s.
    let (first, second) = tokio::join!(run(&python, code, limit, None), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(host.runs_now(), (1, 0), "the first runs alone");
        run(&python, code, limit, None).await
    });
    for outcome in [&first, &second] {
        assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
        assert_eq!(outcome.stdout, "done\n");
        assert!(outcome.elapsed < limit, "{:?}", outcome.elapsed);
    }
    assert!(
        first.queued < Duration::from_millis(100),
        "{:?}",
        first.queued
    );
    // It waited for the rest of the first run's 0.8 s.
    assert!(
        second.queued >= Duration::from_millis(500),
        "{:?}",
        second.queued
    );
    assert!(second.queued + second.elapsed > limit);
    assert_eq!(host.runs_now(), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_past_the_queue_or_the_wait_are_refused_with_the_queue_limit() {
    let (host, python) = one_slot(1, Duration::from_millis(400)).await;
    let busy = "import time\ntime.sleep(1.5)";
    let long = Duration::from_secs(5);
    let (held, waited, refused) = tokio::join!(
        run(&python, busy, long, None),
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            run(&python, "print('never')", long, None).await
        },
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(host.runs_now(), (1, 1));
            run(&python, "print('never')", long, None).await
        },
    );
    assert_eq!(held.status, RunStatus::Ok, "{held:?}");
    // The queue of one was full: refused at once.
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
    assert!(
        refused.queued < Duration::from_millis(100),
        "{:?}",
        refused.queued
    );
    // The one in the queue waited its 0.4 s, then gave up; neither ran.
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
    assert_eq!(host.runs_now(), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_cancelled_while_it_waits_for_a_slot_ends_cancelled() {
    let (_host, python) = one_slot(4, Duration::from_secs(60)).await;
    let cancel = Cancel::new();
    let (_, cancelled) = tokio::join!(
        run(
            &python,
            "import time\ntime.sleep(1)",
            Duration::from_secs(5),
            None
        ),
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let canceller = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                canceller.cancel();
            });
            run(
                &python,
                "print('never')",
                Duration::from_secs(5),
                Some(cancel.clone()),
            )
            .await
        }
    );
    assert_eq!(cancelled.status, RunStatus::Cancelled, "{cancelled:?}");
    assert_eq!(cancelled.stdout, "");
    assert!(
        cancelled.queued < Duration::from_millis(800),
        "{:?}",
        cancelled.queued
    );
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
