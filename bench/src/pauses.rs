//! Durable pauses: the run that pauses at a call, its resume on the host
//! that paused it, and on another host over the same store (what a replica
//! or the host after a restart does), beside the same code run to its end
//! with no pause.

use std::sync::Arc;
use std::time::Instant;

use sandwit::store::{SqliteStore, StoreBackend};
use sandwit::{
    Policy, PythonSandbox, Resume, RunOptions, RunOutcome, RunStatus, SessionKey, Toolbox,
};
use sandwit_postgres::Postgres;

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
/// The same over PostgreSQL (`--postgres`).
const PAUSE_PG: &str = "pause over PostgreSQL: a run to its paused call, kept, p50";
const RESUME_HERE_PG: &str = "pause over PostgreSQL: its resume where it paused, p50";
const RESUME_ELSEWHERE_PG: &str = "pause over PostgreSQL: its resume on another replica, p50";

/// A host over `store` signing with `key`, pausing `calculate_sum`: its
/// sandbox and the bench's plugins.
async fn pausing_host(
    setup: &Setup,
    store: Arc<dyn StoreBackend>,
    key: &SessionKey,
) -> anyhow::Result<(sandwit::Host, PythonSandbox, Toolbox)> {
    let host = (setup.options.builder())
        .store(store)
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
    let over_sqlite = async {
        let stores: [Arc<dyn StoreBackend>; 2] = [
            Arc::new(SqliteStore::open(&path)?),
            Arc::new(SqliteStore::open(&path)?),
        ];
        measure_over(setup, stores).await
    };
    let measured = over_sqlite.await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let [paused, same, other] = measured?;
    let plain = plain(setup).await?;
    let base = plain.at(0.5);
    // The rows of one store's pauses, resumes here and resumes elsewhere.
    let push = |rows: &mut Vec<Row>, store: &str, measured: [(&str, Samples, &str); 3]| {
        for (what, times, how) in measured {
            let p50 = times.at(0.5);
            let ratio = p50.as_secs_f64() / base.as_secs_f64();
            let note = format!(
                "{} runs on a ready sandbox, {store}; {how}; {ratio:.2}x the same code run to \
                 its end with no pause",
                times.len()
            );
            rows.push(Row::new(what, us(p50), "µs", note));
        }
    };
    push(
        rows,
        "SQLite file store",
        [
            (PAUSE, paused, "the record sealed (zstd, HMAC) and written"),
            (
                RESUME_HERE,
                same,
                "the record claimed, the code replayed to the call (its calls answered from \
                 the journal), the call made",
            ),
            (
                RESUME_ELSEWHERE,
                other,
                "another Host and SqliteStore over the same file, in this process",
            ),
        ],
    );
    if let Some(url) = &setup.options.postgres {
        let stores: [Arc<dyn StoreBackend>; 2] = [
            Arc::new(Postgres::connect(url).await?),
            Arc::new(Postgres::connect(url).await?),
        ];
        let [paused, same, other] = measure_over(setup, stores).await?;
        push(
            rows,
            "PostgreSQL on this machine (TCP loopback)",
            [
                (PAUSE_PG, paused, "the record written in PostgreSQL"),
                (
                    RESUME_HERE_PG,
                    same,
                    "claimed and replayed on the host that paused it",
                ),
                (
                    RESUME_ELSEWHERE_PG,
                    other,
                    "on another Host with a PostgreSQL pool of its own (a replica), in this \
                     process",
                ),
            ],
        );
    }
    rows.push(Row::new(
        PLAIN,
        us(base),
        "µs",
        format!(
            "{} runs on a ready sandbox; the comparison of the rows above",
            plain.len()
        ),
    ));
    Ok(())
}

/// Pauses on a host over `stores[0]`, resumed alternately there and on a
/// host over `stores[1]`: the times of the pauses, the resumes where each
/// paused and those on the other host.
async fn measure_over(
    setup: &Setup,
    [a, b]: [Arc<dyn StoreBackend>; 2],
) -> anyhow::Result<[Samples; 3]> {
    let key = SessionKey::generate();
    let (_a, here, tools_here) = pausing_host(setup, a, &key).await?;
    let (_b, there, tools_there) = pausing_host(setup, b, &key).await?;
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
    let (mut paused, mut same, mut other) = (vec![], vec![], vec![]);
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
    Ok([paused, same, other].map(Samples::new))
}

/// The same code run to its end with no pause, on the bench's sandbox.
async fn plain(setup: &Setup) -> anyhow::Result<Samples> {
    let mut plain = Vec::new();
    for _ in 0..setup.options.reps(RUNS) {
        until_prepared(&setup.python).await?;
        let start = Instant::now();
        let outcome = setup.python.run(&setup.ctx, &setup.plugins, CODE).await;
        plain.push(start.elapsed());
        check(&outcome)?;
    }
    Ok(Samples::new(plain))
}
