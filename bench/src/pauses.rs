//! Durable pauses: the run that pauses at a call, its resume on the host
//! that paused it, and on another host over the same store (what a replica
//! or the host after a restart does), beside the same code run to its end
//! with no pause.

use std::sync::Arc;
use std::time::Instant;

use sandwit::store::SqliteStore;
use sandwit::{
    Policy, PythonSandbox, Resume, RunOptions, RunOutcome, RunStatus, SessionKey, Toolbox,
};

use crate::report::{Row, Samples, us};
use crate::scenarios::{check, until_prepared};
use crate::setup::Setup;

/// Pauses calc's `calculate_sum`.
const POLICY: &str = "[approval]\npause_for = [\"dangerous\"]\n\n\
                      [plugins.calc.methods.calculate_sum]\ndangerous = true\n";

/// Three calls before the paused one: what the resume replays. Plain
/// enough for pydantic-monty to run too (bench/peers.py).
pub const CODE: &str = "\
xs = [echo(i) for i in range(3)]
r = calculate_sum(1, 2)
(len(xs), r)
";

/// Pauses timed, and resumes (half where each paused, half elsewhere).
pub const RUNS: usize = 200;

/// The rows' scenarios (a peer's rows name the same).
pub const PAUSE: &str = "pause: a run to its paused call (3 calls before it), kept, p50";
pub const RESUME_HERE: &str = "pause: its resume where it paused, approved, to the end, p50";
pub const RESUME_ELSEWHERE: &str =
    "pause: its resume in another host (a replica, a restart), approved, to the end, p50";
pub const PLAIN: &str = "pause: the same code to its end with no pause, p50";

/// A host over the SQLite file `path` signing with `key`, pausing
/// `calculate_sum`: its sandbox and the bench's plugins.
async fn pausing_host(
    setup: &Setup,
    path: &std::path::Path,
    key: &SessionKey,
) -> anyhow::Result<(sandwit::Host, PythonSandbox, Toolbox)> {
    let host = (setup.options.builder())
        .store(Arc::new(SqliteStore::open(path)?))
        .session_key(key.clone())
        .policy(Policy::from_toml(POLICY)?)
        .build()?;
    let python = host.load_python_file(&setup.python_path).await?;
    let plugins = setup.plugins_in(&host).await?;
    Ok((host, python, plugins))
}

/// The token of a run that paused, else an error naming how it ended.
fn token(outcome: &RunOutcome) -> anyhow::Result<String> {
    anyhow::ensure!(
        outcome.status == RunStatus::Paused,
        "a run meant to pause ended {:?}: {:?} {:?}",
        outcome.status,
        outcome.error,
        outcome.limit
    );
    Ok(outcome
        .paused
        .as_ref()
        .expect("a paused run's call")
        .token
        .clone())
}

pub async fn measure(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let path = std::env::temp_dir().join(format!("sandwit-bench-pauses-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let measured = measure_in(setup, &path, rows).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    measured
}

async fn measure_in(
    setup: &Setup,
    path: &std::path::Path,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let key = SessionKey::generate();
    let (_a, here, tools_here) = pausing_host(setup, path, &key).await?;
    let (_b, there, tools_there) = pausing_host(setup, path, &key).await?;
    let ctx = &setup.ctx;
    let runs = setup.options.reps(RUNS);
    // Warm up both hosts' interpreters and the store.
    for (python, tools) in [(&here, &tools_here), (&there, &tools_there)] {
        for _ in 0..setup.options.reps(10) {
            until_prepared(python).await?;
            let t = token(&here.run(ctx, &tools_here, CODE).await)?;
            let resumed =
                (python.resume(ctx, tools, &t, Resume::Approve, &RunOptions::new())).await;
            check(&resumed)?;
        }
    }
    let (mut paused, mut same, mut other, mut plain) = (vec![], vec![], vec![], vec![]);
    for i in 0..runs {
        until_prepared(&here).await?;
        let start = Instant::now();
        let outcome = here.run(ctx, &tools_here, CODE).await;
        paused.push(start.elapsed());
        let t = token(&outcome)?;
        // Alternately on this host and the other, each on a ready sandbox.
        let (python, tools, times) = match i % 2 {
            0 => (&here, &tools_here, &mut same),
            _ => (&there, &tools_there, &mut other),
        };
        until_prepared(python).await?;
        let start = Instant::now();
        let resumed = (python.resume(ctx, tools, &t, Resume::Approve, &RunOptions::new())).await;
        times.push(start.elapsed());
        check(&resumed)?;
    }
    for _ in 0..runs {
        until_prepared(&setup.python).await?;
        let start = Instant::now();
        let outcome = setup.python.run(ctx, &setup.plugins, CODE).await;
        plain.push(start.elapsed());
        check(&outcome)?;
    }
    let plain = Samples::new(plain);
    let base = plain.at(0.5);
    let note =
        |n: usize, what: &str| format!("{n} runs on a ready sandbox, SQLite file store; {what}");
    let rows_of = [
        (
            PAUSE,
            Samples::new(paused),
            "the record sealed (zstd, HMAC) and written",
        ),
        (
            RESUME_HERE,
            Samples::new(same),
            "the record claimed, the code replayed to the call (its calls answered from the \
             journal), the call made",
        ),
        (
            RESUME_ELSEWHERE,
            Samples::new(other),
            "another Host and SqliteStore over the same file, in this process",
        ),
    ];
    for (what, times, how) in rows_of {
        let p50 = times.at(0.5);
        let ratio = p50.as_secs_f64() / base.as_secs_f64();
        rows.push(Row::new(
            what,
            us(p50),
            "µs",
            note(
                times.len(),
                &format!("{how}; {ratio:.2}x the same code run to its end with no pause"),
            ),
        ));
    }
    rows.push(Row::new(
        PLAIN,
        us(base),
        "µs",
        note(plain.len(), "the comparison of the rows above"),
    ));
    Ok(())
}
