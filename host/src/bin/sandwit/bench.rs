//! `sandwit bench`: the numbers of BENCHMARKS.md, measured in this process
//! (and in child processes for cold starts and the subprocess peer).

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use sandwit::{AgentCtx, Host, Metering, PluginSet, PythonSandbox, RunOutcome, RunStatus};
use serde_json::json;

use crate::HostArgs;
use crate::run::{example_plugin_dir, python_component};

#[derive(Args)]
pub struct BenchArgs {
    /// The CPython component [default: $SANDWIT_PYTHON, else the build's
    /// target/python/sandbox.wasm].
    #[arg(long, value_name = "FILE")]
    python: Option<PathBuf>,
    /// The echo plugin [default: echo.wasm in $SANDWIT_PLUGINS, else in the
    /// build's target/guests/...].
    #[arg(long, value_name = "FILE")]
    echo: Option<PathBuf>,
    /// Sequential runs for the latency scenarios.
    #[arg(long, default_value_t = 300)]
    runs: usize,
    /// Seconds per throughput level.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Also write the table as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The Python that runs the peers (bench/peers.py: pickle RPC over
    /// FastAPI, pydantic-monty), with bench/requirements.txt installed
    /// [default: $SANDWIT_BENCH_PYTHON, else the source tree's
    /// .venv-bench/bin/python, as scripts/bench makes it].
    #[arg(long, value_name = "FILE")]
    peers_python: Option<PathBuf>,
    /// The eryx peer's binary (bench/eryx-peer) [default: $SANDWIT_BENCH_ERYX,
    /// else the source tree's bench/eryx-peer/target/release/eryx-peer, as
    /// scripts/bench builds it].
    #[arg(long, value_name = "FILE")]
    eryx_peer: Option<PathBuf>,
    /// A smoke run that checks the harness end to end: every scenario with
    /// a hundredth of the calls, a smaller CPU loop and a few runs each.
    /// Its numbers are not benchmarks.
    #[arg(long)]
    quick: bool,
}

impl BenchArgs {
    /// `n` repetitions, or a few in a quick run.
    fn reps(&self, n: usize) -> usize {
        if self.quick && n > 3 {
            n.div_ceil(100).max(3)
        } else {
            n
        }
    }
}

/// One row of the table.
struct Row {
    scenario: String,
    value: f64,
    unit: &'static str,
    note: String,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn check(outcome: &RunOutcome) -> anyhow::Result<()> {
    anyhow::ensure!(
        outcome.status == RunStatus::Ok,
        "a benchmark run failed: {:?} {:?} {}",
        outcome.error,
        outcome.limit,
        outcome.stderr
    );
    Ok(())
}

pub async fn bench(host: &Host, host_args: &HostArgs, args: BenchArgs) -> anyhow::Result<ExitCode> {
    let python_path = python_component(args.python.clone())?;
    let echo_path = match args.echo.clone() {
        Some(path) => path,
        None => example_plugin_dir()?.join("echo.wasm"),
    };
    let python = host.load_python_file(&python_path).await?;
    let echo = host.load_plugin_file(&echo_path).await?;
    let calc_path = echo_path.with_file_name("calc.wasm");
    let calc = host.load_plugin_file(&calc_path).await?;
    let plugins = PluginSet::new(&[echo, calc])?;
    let ctx = AgentCtx::new("bench");
    let mut rows = Vec::new();

    // Warm up: the first runs fault in the component's pages. Each on a
    // ready sandbox, like the runs timed next: in the development VM a burst
    // of back-to-back runs left the following seconds' runs 30-60 µs slower
    // (gone after a pause of 15 s; BENCHMARKS.md).
    let runs = args.reps(args.runs);
    for _ in 0..args.reps(20) {
        until_prepared(&python).await?;
        check(&python.run(&ctx, &plugins, "print(1+1)").await)?;
    }

    // Fresh sandbox, trivial code: on an interpreter prepared ahead of the
    // run (the default; each run starts once the sandbox is ready again, as
    // an agent's runs come seconds apart), and instantiated by the run.
    // Also a short script that touches more of the interpreter than
    // `print(1+1)`, so more of the pages a run would fault in.
    let unprepared = host_args.builder()?.prepared_interpreters(0).build()?;
    let unprepared = unprepared.load_python_file(&python_path).await?;
    for (python, how, wait, what, code) in [
        (
            &python,
            "prepared interpreter",
            true,
            "print(1+1)",
            "print(1+1)",
        ),
        (
            &python,
            "prepared interpreter",
            true,
            "short script",
            SCRIPT,
        ),
        (
            &unprepared,
            "instantiated by the run",
            false,
            "print(1+1)",
            "print(1+1)",
        ),
    ] {
        let mut times = Vec::with_capacity(runs);
        let mut prepared = 0;
        for _ in 0..runs {
            if wait {
                until_prepared(python).await?;
            }
            let start = Instant::now();
            let outcome = python.run(&ctx, &plugins, code).await;
            times.push(start.elapsed());
            prepared += usize::from(outcome.prepared);
            check(&outcome)?;
        }
        times.sort();
        let note = if wait {
            format!(
                "{runs} runs, each on a ready sandbox (untimed wait); {prepared} on a prepared interpreter"
            )
        } else {
            format!("{runs} back-to-back runs, warm host")
        };
        for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
            rows.push(Row {
                scenario: format!("fresh sandbox, {what}, {how}, {name}"),
                value: us(percentile(&times, p)),
                unit: "µs",
                note: note.clone(),
            });
        }
    }

    // Memory a ready sandbox holds: its prepared interpreters' pool, every
    // slot used once (each keeps the interpreter's initial memory). Counted
    // in the mappings made since the sandbox was loaded (its resident pool
    // among them), so memory the rest of the process frees or shares
    // meanwhile does not offset it.
    until_prepared(&python).await?;
    let before = Mappings::read();
    let ready = host.load_python_file(&python_path).await?;
    for _ in 0..args.reps(20) {
        until_prepared(&ready).await?;
        check(&ready.run(&ctx, &plugins, "print(1+1)").await)?;
    }
    until_prepared(&ready).await?;
    let held = before.and_then(|before| Ok(Mappings::read()?.anonymous_outside(&before)));
    rows.push(memory_row(
        "memory held by a ready sandbox's prepared interpreters",
        held.map(|bytes| bytes as f64 / 1024.0 / 1024.0),
        "MiB",
        format!(
            "anonymous memory (copies of image pages, heap) in the mappings made since loading a sandbox, after {} runs on its {} prepared interpreters; its resident pool has {} slots",
            args.reps(20),
            sandwit::DEFAULT_PREPARED_INTERPRETERS,
            ready.resident_slots()
        ),
    ));
    drop(ready);

    // One call from Python to a plugin and back, by argument.
    let calls = [
        ("nop()", "nop()", 20_000),
        ("calculate_sum(1, 2)", "calculate_sum(1, 2)", 20_000),
        ("echo(100 B str)", "echo(s)", 20_000),
        ("echo(10 KB str)", "echo(s)", 5_000),
        ("echo(1 MB str)", "echo(s)", 100),
        ("echo(1,000-item list)", "echo(l)", 2_000),
    ];
    for (name, expr, n) in calls {
        let n = args.reps(n);
        let setup = match name {
            "echo(100 B str)" => "s = 'x' * 100",
            "echo(10 KB str)" => "s = 'x' * 10_000",
            "echo(1 MB str)" => "s = 'x' * 1_000_000",
            "echo(1,000-item list)" => "l = list(range(1000))",
            _ => "",
        };
        let per_call = per_call(&python, &plugins, &ctx, setup, expr, n).await?;
        let mut note = format!("{n} calls in one run, minus the empty loop");
        if name.contains("1 MB") {
            let gbps = 2.0 * 1e6 / per_call.as_secs_f64() / 1e9;
            note = format!("{note}; {gbps:.2} GB/s (there and back)");
        }
        rows.push(Row {
            scenario: format!("call Python → plugin → Python, {name}"),
            value: us(per_call),
            unit: "µs",
            note,
        });
    }

    // Throughput and tail latency under concurrency.
    let seconds = if args.quick { 0.1 } else { args.seconds };
    for concurrency in [1usize, 2, 16, 64] {
        // A quarter of the time untimed first, so a level's numbers are its
        // steady state, not the first touches of pool slots the earlier
        // scenarios left unused.
        let warm_up = Duration::from_secs_f64(seconds / 4.0);
        throughput(&python, &plugins, concurrency, warm_up).await?;
        let (rate, p99, prepared) = throughput(
            &python,
            &plugins,
            concurrency,
            Duration::from_secs_f64(seconds),
        )
        .await?;
        rows.push(Row {
            scenario: format!("throughput, {concurrency} concurrent runs"),
            value: rate,
            unit: "runs/s",
            note: format!(
                "p99 {:.0} µs; {:.0} % of runs on a prepared interpreter",
                us(p99),
                prepared * 100.0
            ),
        });
    }

    // Memory: 64 runs alive at once (each sleeps, which yields to the host).
    let private = live_memory(&python, &plugins, 64).await?;
    rows.push(memory_row(
        "memory per live sandbox, 64 live runs",
        private.map(|bytes| bytes as f64 / 64.0 / 1024.0),
        "KiB",
        "peak growth of Private_Dirty (smaps_rollup) over the idle host while 64 runs sleep, ÷ 64"
            .into(),
    ));

    // The cost of the limits: a CPU-bound loop in hosts that differ only in
    // metering (each compiles the interpreter once, then uses the cache).
    // The samples take turns, so a change in the machine's speed during the
    // measurement touches every setting alike.
    let iterations = if args.quick { 20_000 } else { 2_000_000 };
    let cpu = format!("t = 0\nfor i in range({iterations}):\n    t += i\n");
    let samples = args.reps(9);
    let settings = [
        (Metering::Off, "no fuel, no epoch"),
        (Metering::DeadlineOnly, "epoch deadline only"),
        (Metering::FuelAndDeadline, "fuel + deadline (the default)"),
    ];
    let mut sandboxes = Vec::new();
    for (metering, _) in settings {
        let host = host_args
            .builder()?
            .metering(metering)
            .prepared_interpreters(0)
            .build()?;
        sandboxes.push(host.load_python_file(&python_path).await?);
    }
    let no_plugins = PluginSet::default();
    let mut times = vec![Vec::new(); settings.len()];
    for _ in 0..samples {
        for (python, times) in sandboxes.iter().zip(&mut times) {
            let start = Instant::now();
            check(&python.run(&ctx, &no_plugins, &cpu).await)?;
            times.push(start.elapsed());
        }
    }
    let mut off_ms = None;
    for ((_, name), mut times) in settings.into_iter().zip(times) {
        times.sort();
        let ms = us(times[samples / 2]) / 1e3;
        let note = match off_ms {
            Some(off) => format!(
                "median of {samples}, taking turns; +{:.1} % over no limits",
                (ms / off - 1.0) * 100.0
            ),
            None => format!("median of {samples}, taking turns"),
        };
        off_ms.get_or_insert(ms);
        rows.push(Row {
            scenario: format!("CPU-bound loop ({iterations} iterations), {name}"),
            value: ms,
            unit: "ms",
            note,
        });
    }

    // Cold start: a new process that loads cached code and runs once.
    let exe = std::env::current_exe()?;
    let mut cold = Command::new(&exe);
    host_args.pass_to(&mut cold);
    cold.args(["run", "--python"])
        .arg(&python_path)
        .arg("--plugin")
        .arg(&echo_path)
        .args(["-c", "print(1+1)"]);
    let starts = args.reps(10);
    let times = sorted_times(starts, async || run_process(&mut cold)).await?;
    rows.push(Row {
        scenario: "cold start: new process, cached code, first result".into(),
        value: us(times[starts / 2]) / 1e3,
        unit: "ms",
        note: format!("median of {starts} `sandwit run -c 'print(1+1)'`"),
    });

    // Peer: a fresh CPython process per run (the interpreter itself, not a
    // version manager's shim in front of it).
    let python3 = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "python3".into());
    let mut peer = Command::new(&python3);
    peer.args(["-c", "print(1+1)"]);
    let spawns = args.reps(20);
    match sorted_times(spawns, async || run_process(&mut peer)).await {
        Ok(times) => {
            let note = format!(
                "p50 of {spawns} `python3 -c 'print(1+1)'`, a lower bound for any process sandbox"
            );
            let value = us(percentile(&times, 0.5));
            push_peer_row(&mut rows, "python3 -c", "fresh run, 1+1", value, &note);
        }
        Err(e) => not_run(&mut rows, "python3 -c", &format!("{e:#}")),
    }

    let calls = args.reps(1_000);
    python_peers(&mut rows, args.peers_python, runs, calls);
    eryx_peer(&mut rows, args.eryx_peer, runs, calls);
    print_table(&rows);
    if let Some(path) = args.json {
        let json: Vec<_> = rows
            .iter()
            .map(|r| json!({"scenario": r.scenario, "value": r.value, "unit": r.unit, "note": r.note}))
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The short script of the fresh-run rows: a function, a comprehension, a
/// dict, `json.dumps`, `print`.
const SCRIPT: &str = "import json\ndef f(n):\n    return [i * i for i in range(n)]\nd = {'a': f(10), 'b': 'hello'}\nprint(json.dumps(d), len(d))\n";

/// Waits (untimed) until `python` has all its interpreters prepared, and
/// its thread is idle.
async fn until_prepared(python: &PythonSandbox) -> anyhow::Result<()> {
    let start = Instant::now();
    while python.prepared() < sandwit::DEFAULT_PREPARED_INTERPRETERS {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(10),
            "no interpreter was prepared within 10 s"
        );
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    Ok(())
}

/// The wall-clock times of `n` calls of `f`, sorted.
async fn sorted_times(
    n: usize,
    mut f: impl AsyncFnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f().await?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times)
}

/// Runs a process to its end, its output discarded.
fn run_process(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.stdout(Stdio::null()).status()?;
    anyhow::ensure!(status.success(), "{cmd:?} failed: {status}");
    Ok(())
}

/// The time of one call, from a run making `n` of them minus a run with the
/// same loop and no call.
async fn per_call(
    python: &PythonSandbox,
    plugins: &PluginSet,
    ctx: &AgentCtx,
    setup: &str,
    expr: &str,
    n: usize,
) -> anyhow::Result<Duration> {
    let limits = sandwit::RunLimits {
        max_calls: n as u32 + 1,
        time: Duration::from_secs(120),
        fuel: u64::MAX / 4,
        ..sandwit::RunLimits::default()
    };
    let limits = &limits;
    let timed = |body: String| async move {
        let code = format!(
            "import time\n{setup}\nt0 = time.perf_counter_ns()\nfor _ in range({n}):\n    {body}\nprint(time.perf_counter_ns() - t0)\n"
        );
        let outcome = python.run_with_limits(ctx, plugins, &code, limits).await;
        check(&outcome)?;
        let ns: u64 = outcome.stdout.trim().parse()?;
        anyhow::Ok(ns)
    };
    let with = timed(expr.to_string()).await?;
    let without = timed("pass".to_string()).await?;
    Ok(Duration::from_nanos(
        with.saturating_sub(without) / n as u64,
    ))
}

/// Runs `print(1+1)` from `concurrency` tasks for `duration`: runs per
/// second and p99 latency.
async fn throughput(
    python: &PythonSandbox,
    plugins: &PluginSet,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(f64, Duration, f64)> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (python, plugins) = (python.clone(), plugins.clone());
        tasks.push(tokio::spawn(async move {
            let ctx = AgentCtx::new("bench");
            let mut times = Vec::new();
            let mut prepared = 0;
            while start.elapsed() < duration {
                let t = Instant::now();
                let outcome = python.run(&ctx, &plugins, "print(1+1)").await;
                times.push(t.elapsed());
                check(&outcome)?;
                prepared += usize::from(outcome.prepared);
            }
            anyhow::Ok((times, prepared))
        }));
    }
    let mut all = Vec::new();
    let mut prepared = 0;
    for t in tasks {
        let (times, p) = t.await??;
        all.extend(times);
        prepared += p;
    }
    let elapsed = start.elapsed();
    all.sort();
    Ok((
        all.len() as f64 / elapsed.as_secs_f64(),
        percentile(&all, 0.99),
        prepared as f64 / all.len() as f64,
    ))
}

/// Peak growth of private memory while `live` runs are alive at once: each does a little
/// work, then sleeps half a second (the sleep yields, so all are live
/// together). Sampled by a thread of its own every 2 ms. The outer error is
/// a failed run; the inner one, memory that could not be read.
async fn live_memory(
    python: &PythonSandbox,
    plugins: &PluginSet,
    live: usize,
) -> anyhow::Result<anyhow::Result<u64>> {
    let base = match private_bytes() {
        Ok(base) => base,
        Err(e) => return Ok(Err(e)),
    };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = base;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(private_bytes()?);
                std::thread::sleep(Duration::from_millis(2));
            }
            anyhow::Ok(peak)
        })
    };
    let code = "import time\nx = [str(i) for i in range(1000)]\nprint(1+1)\ntime.sleep(0.5)\n";
    let tasks: Vec<_> = (0..live)
        .map(|_| {
            let (python, plugins) = (python.clone(), plugins.clone());
            tokio::spawn(async move {
                check(&python.run(&AgentCtx::new("bench"), &plugins, code).await)
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().expect("the memory sampler panicked");
    Ok(peak.map(|peak| peak.saturating_sub(base)))
}

/// The private dirty memory of this process (pages it wrote: heap, and the
/// copy-on-write copies of image pages), from /proc (Linux only).
fn private_bytes() -> anyhow::Result<u64> {
    const ROLLUP: &str = "/proc/self/smaps_rollup";
    let rollup =
        std::fs::read_to_string(ROLLUP).with_context(|| format!("cannot read {ROLLUP}"))?;
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("Private_Dirty:"))
        .and_then(kib_bytes)
        .with_context(|| format!("no `Private_Dirty: <n> kB` line in {ROLLUP}"))
}

/// The bytes of a `/proc` value of the form `<n> kB`.
fn kib_bytes(value: &str) -> Option<u64> {
    let kib = value
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

const SMAPS: &str = "/proc/self/smaps";

/// This process's mappings, from /proc/self/smaps (Linux only): each one's
/// address range and the anonymous memory in it (the pages written there:
/// a copy-on-write copy of a file's page counts, the page of a memory
/// image a slot only read does not), resident or swapped out.
struct Mappings(Vec<(std::ops::Range<u64>, u64)>);

impl Mappings {
    fn read() -> anyhow::Result<Self> {
        let smaps =
            std::fs::read_to_string(SMAPS).with_context(|| format!("cannot read {SMAPS}"))?;
        Self::parse(&smaps)
    }

    /// The mappings of `smaps`, in the format of /proc/PID/smaps.
    fn parse(smaps: &str) -> anyhow::Result<Self> {
        let mut mappings: Vec<(std::ops::Range<u64>, u64)> = Vec::new();
        for line in smaps.lines() {
            let (key, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            if let Some((start, end)) = key.split_once('-')
                && let (Ok(start), Ok(end)) =
                    (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
            {
                mappings.push((start..end, 0));
            } else if let ("Anonymous:" | "Swap:", Some(last)) = (key, mappings.last_mut()) {
                last.1 += kib_bytes(value)
                    .with_context(|| format!("`{line}` in {SMAPS} is not `{key} <n> kB`"))?;
            }
        }
        anyhow::ensure!(!mappings.is_empty(), "no mappings in {SMAPS}");
        mappings.sort_by_key(|(range, _)| range.start);
        Ok(Mappings(mappings))
    }

    /// Bytes of anonymous memory in the mappings that start outside every
    /// mapping of `earlier`: those made since (a mapping only resized or
    /// re-protected since starts inside one of `earlier`'s).
    fn anonymous_outside(&self, earlier: &Mappings) -> u64 {
        let existed = |at: u64| {
            let i = earlier.0.partition_point(|(range, _)| range.start <= at);
            i > 0 && earlier.0[i - 1].0.contains(&at)
        };
        self.0
            .iter()
            .filter(|(range, _)| !existed(range.start))
            .map(|(_, bytes)| bytes)
            .sum()
    }
}

/// A row of memory measured, or NaN and why it could not be.
fn memory_row(scenario: &str, value: anyhow::Result<f64>, unit: &'static str, note: String) -> Row {
    let (value, note) = match value {
        Ok(value) => (value, note),
        Err(e) => (f64::NAN, format!("not measured: {e:#}")),
    };
    Row {
        scenario: scenario.into(),
        value,
        unit,
        note,
    }
}

fn print_table(rows: &[Row]) {
    let width = rows.iter().map(|r| r.scenario.len()).max().unwrap_or(0);
    outln!("{:width$}  {:>12}  note", "scenario", "value");
    for r in rows {
        outln!(
            "{:width$}  {:>9.1} {:<6} {}",
            r.scenario,
            r.value,
            r.unit,
            r.note
        );
    }
}

/// The source tree the binary was built in (its `target/` dir's parent).
fn source_tree() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.to_path_buf())
}

/// Which sandwit row each peer row is compared with.
const COMPARED: &[(&str, &str)] = &[
    ("call nop()", "call Python → plugin → Python, nop()"),
    (
        "call calculate_sum(1, 2)",
        "call Python → plugin → Python, calculate_sum(1, 2)",
    ),
    (
        "call echo(1 MB str)",
        "call Python → plugin → Python, echo(1 MB str)",
    ),
    (
        "fresh run, 1+1",
        "fresh sandbox, print(1+1), prepared interpreter, p50",
    ),
];

/// Runs bench/peers.py and adds its rows (pickle RPC, monty).
fn python_peers(rows: &mut Vec<Row>, python: Option<PathBuf>, runs: usize, calls: usize) {
    let tree = source_tree();
    let python = python
        .or_else(|| crate::env_path("SANDWIT_BENCH_PYTHON"))
        .or_else(|| tree.as_ref().map(|t| t.join(".venv-bench/bin/python")));
    let Some(script) = tree.map(|t| t.join("bench/peers.py")) else {
        return not_run(
            rows,
            "pickle_rpc and monty",
            "cannot find bench/peers.py: run the sandwit binary of a source tree's target/ directory",
        );
    };
    let Some(python) = python else {
        return not_run(
            rows,
            "pickle_rpc and monty",
            "cannot find a Python for the peers: pass --peers-python",
        );
    };
    let mut cmd = Command::new(&python);
    cmd.arg(&script);
    add_peer_rows(rows, "pickle_rpc and monty", cmd, runs, calls);
}

/// Runs the eryx peer (bench/eryx-peer) and adds its rows.
fn eryx_peer(rows: &mut Vec<Row>, binary: Option<PathBuf>, runs: usize, calls: usize) {
    let binary = binary
        .or_else(|| crate::env_path("SANDWIT_BENCH_ERYX"))
        .or_else(|| source_tree().map(|t| t.join("bench/eryx-peer/target/release/eryx-peer")));
    let Some(binary) = binary else {
        return not_run(
            rows,
            "eryx",
            "cannot find the source tree: pass --eryx-peer",
        );
    };
    add_peer_rows(rows, "eryx", Command::new(binary), runs, calls);
}

/// Runs a peer program with `--runs` and `--calls` and adds the JSON rows
/// it prints (`peer`, `scenario`, `value` in µs, `note`; or `peer` and
/// `error`), each with the ratio of the matching sandwit row; a peer that
/// cannot run is listed with the reason.
fn add_peer_rows(rows: &mut Vec<Row>, peers: &str, mut cmd: Command, runs: usize, calls: usize) {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let output = cmd
        .args(["--runs", &runs.to_string(), "--calls", &calls.to_string()])
        .stderr(Stdio::inherit())
        .output();
    let output = match output {
        Ok(o) if o.status.success() => o.stdout,
        Ok(o) => return not_run(rows, peers, &format!("{cmd:?} exited with {}", o.status)),
        Err(e) => {
            let reason = format!("cannot start {program} (scripts/bench makes it): {e}");
            return not_run(rows, peers, &reason);
        }
    };
    let peer_rows: Vec<serde_json::Value> = match serde_json::from_slice(&output) {
        Ok(v) => v,
        Err(e) => {
            return not_run(rows, peers, &format!("{program} printed no JSON rows: {e}"));
        }
    };
    for row in peer_rows {
        let peer = row["peer"].as_str().unwrap_or("?");
        if let Some(error) = row["error"].as_str() {
            not_run(rows, peer, error);
            continue;
        }
        let scenario = row["scenario"].as_str().unwrap_or("?");
        let value = row["value"].as_f64().unwrap_or(f64::NAN);
        let note = row["note"].as_str().unwrap_or("");
        push_peer_row(rows, peer, scenario, value, note);
    }
}

/// Adds a peer's row, with the ratio to the sandwit row doing the same work.
fn push_peer_row(rows: &mut Vec<Row>, peer: &str, scenario: &str, value: f64, note: &str) {
    let ours = COMPARED
        .iter()
        .find(|(theirs, _)| *theirs == scenario)
        .and_then(|(_, ours)| rows.iter().find(|r| r.scenario == *ours))
        .map(|r| r.value);
    let note = match ours {
        Some(ours) => format!("{}; {note}", ratio(ours, value)),
        None => note.to_string(),
    };
    rows.push(Row {
        scenario: format!("peer {peer}: {scenario}"),
        value,
        unit: "µs",
        note,
    });
}

fn not_run(rows: &mut Vec<Row>, peer: &str, reason: &str) {
    rows.push(Row {
        scenario: format!("peer {peer}: not run"),
        value: f64::NAN,
        unit: "",
        note: reason.to_string(),
    });
}

/// "sandwit ÷ peer = r (n× faster|slower)".
fn ratio(ours: f64, theirs: f64) -> String {
    let (times, word) = if ours <= theirs {
        (theirs / ours, "faster")
    } else {
        (ours / theirs, "slower")
    };
    format!("sandwit ÷ peer = {:.3} ({times:.1}× {word})", ours / theirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smaps(mappings: &[(&str, u64, u64)]) -> String {
        mappings
            .iter()
            .map(|(range, anonymous, swap)| {
                format!(
                    "{range} rw-p 00000000 00:00 0\nSize: 4 kB\nPrivate_Dirty: 999 kB\n\
                     Anonymous: {anonymous} kB\nAnonHugePages: 0 kB\nSwap: {swap} kB\n\
                     SwapPss: 0 kB\nVmFlags: rd wr mr mw me ac\n"
                )
            })
            .collect()
    }

    #[test]
    fn only_mappings_made_since_count_with_their_swapped_pages() {
        let before = Mappings::parse(&smaps(&[("1000-3000", 1, 0), ("5000-6000", 2, 0)])).unwrap();
        // 1000-2000 and 2000-3000 were 1000-3000, split; 3000-4000 and
        // 7000-8000 are new, the second partly swapped out.
        let after = Mappings::parse(&smaps(&[
            ("7000-8000", 8, 16),
            ("1000-2000", 4, 0),
            ("2000-3000", 4, 0),
            ("3000-4000", 2, 0),
            ("5000-6000", 100, 0),
        ]))
        .unwrap();
        assert_eq!(after.anonymous_outside(&before), (8 + 16 + 2) * 1024);
        assert_eq!(before.anonymous_outside(&before), 0);
    }

    #[test]
    fn a_malformed_smaps_is_an_error_naming_the_line() {
        let parse = |text| Mappings::parse(text).map(|_| ());
        let e = parse("1000-2000 rw-p 0 00:00 0\nAnonymous: many kB\n").unwrap_err();
        assert!(e.to_string().contains("`Anonymous: many kB`"), "{e}");
        assert!(parse("").is_err());
    }
}
