//! sandwit's own scenarios: fresh runs, the memory a sandbox holds, method
//! calls, throughput, memory per live run, the cost of the limits and cold
//! start.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandwit::{AgentCtx, Metering, PythonSandbox, RunOutcome, RunStatus, Toolbox};

use crate::memory::Mappings;
use crate::report::{Row, Samples, memory_row, us};
use crate::setup::Setup;

/// The short script of the fresh-run rows: a function, a comprehension, a
/// dict, `json.dumps`, `print`.
const SCRIPT: &str = "import json\ndef f(n):\n    return [i * i for i in range(n)]\nd = {'a': f(10), 'b': 'hello'}\nprint(json.dumps(d), len(d))\n";

/// An error unless the run ended `ok`.
pub fn check(outcome: &RunOutcome) -> anyhow::Result<()> {
    anyhow::ensure!(
        outcome.status == RunStatus::Ok,
        "a benchmark run failed: {:?} {:?} {}",
        outcome.error,
        outcome.limit,
        outcome.stderr
    );
    Ok(())
}

/// Waits (untimed) until `python` has all its interpreters prepared, and
/// its thread is idle.
pub async fn until_prepared(python: &PythonSandbox) -> anyhow::Result<()> {
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

/// Fresh sandbox, trivial code: on an interpreter prepared ahead of the run
/// (the default; each run starts once the sandbox is ready again, as an
/// agent's runs come seconds apart), and instantiated by the run. Also a
/// short script that touches more of the interpreter than `print(1+1)`, so
/// more of the pages a run would fault in.
pub async fn fresh_runs(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let Setup {
        options,
        python,
        plugins,
        ctx,
        ..
    } = setup;
    // Warm up: the first runs fault in the component's pages. Each on a
    // ready sandbox, like the runs timed next: in the development VM a burst
    // of back-to-back runs left the following seconds' runs slower
    // (BENCHMARKS.md).
    for _ in 0..options.reps(20) {
        until_prepared(python).await?;
        check(&python.run(ctx, plugins, "print(1+1)").await)?;
    }
    let runs = options.reps(options.runs);
    let unprepared_host = options.builder().prepared_interpreters(0).build()?;
    let unprepared = unprepared_host.load_python_file(&setup.python_path).await?;
    let unprepared_plugins = setup.plugins_in(&unprepared_host).await?;
    for (python, plugins, how, wait, what, code) in [
        (
            python,
            plugins,
            "prepared interpreter",
            true,
            "print(1+1)",
            "print(1+1)",
        ),
        (
            python,
            plugins,
            "prepared interpreter",
            true,
            "short script",
            SCRIPT,
        ),
        (
            &unprepared,
            &unprepared_plugins,
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
            let outcome = python.run(ctx, plugins, code).await;
            times.push(start.elapsed());
            prepared += usize::from(outcome.prepared);
            check(&outcome)?;
        }
        let times = Samples::new(times);
        let note = if wait {
            format!(
                "{runs} runs, each on a ready sandbox (untimed wait); {prepared} on a prepared interpreter"
            )
        } else {
            format!("{runs} back-to-back runs, warm host")
        };
        for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
            rows.push(Row::new(
                format!("fresh sandbox, {what}, {how}, {name}"),
                us(times.at(p)),
                "µs",
                note.clone(),
            ));
        }
    }
    Ok(())
}

/// Memory a ready sandbox holds: its prepared interpreters, each its memory
/// and a copy of it as prepared (what a restore puts back). Counted in the
/// mappings made since the sandbox was loaded, so memory the rest of the
/// process frees or shares meanwhile does not offset it.
pub async fn held_memory(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let Setup {
        options,
        host,
        python,
        plugins,
        ctx,
        ..
    } = setup;
    until_prepared(python).await?;
    let before = Mappings::read();
    let ready = host.load_python_file(&setup.python_path).await?;
    for _ in 0..options.reps(20) {
        until_prepared(&ready).await?;
        check(&ready.run(ctx, plugins, "print(1+1)").await)?;
    }
    until_prepared(&ready).await?;
    let held = before.and_then(|before| Ok(Mappings::read()?.anonymous_outside(&before)));
    rows.push(memory_row(
        "memory held by a ready sandbox's prepared interpreters",
        held.map(|bytes| bytes as f64 / 1024.0 / 1024.0),
        "MiB",
        format!(
            "anonymous memory (interpreter memories, their copies as prepared, heap) in the mappings made since loading a sandbox, after {} runs on its {} prepared interpreters",
            options.reps(20),
            sandwit::DEFAULT_PREPARED_INTERPRETERS,
        ),
    ));
    Ok(())
}

/// One call from Python to a plugin and back, by argument.
pub async fn calls(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let calls = [
        ("nop()", "", "nop()", 20_000),
        ("calculate_sum(1, 2)", "", "calculate_sum(1, 2)", 20_000),
        ("echo(100 B str)", "s = 'x' * 100", "echo(s)", 20_000),
        ("echo(10 KB str)", "s = 'x' * 10_000", "echo(s)", 5_000),
        ("echo(1 MB str)", "s = 'x' * 1_000_000", "echo(s)", 100),
        (
            "echo(1,000-item list)",
            "l = list(range(1000))",
            "echo(l)",
            2_000,
        ),
    ];
    for (name, setup_code, expr, n) in calls {
        let n = setup.options.reps(n);
        let per_call = per_call(setup, setup_code, expr, n).await?;
        let mut note = format!("{n} calls in one run, minus the empty loop");
        if name.contains("1 MB") {
            let gbps = 2.0 * 1e6 / per_call.as_secs_f64() / 1e9;
            note = format!("{note}; {gbps:.2} GB/s (there and back)");
        }
        rows.push(Row::new(
            format!("call Python → plugin → Python, {name}"),
            us(per_call),
            "µs",
            note,
        ));
    }
    Ok(())
}

/// The time of one call, from a run making `n` of them minus a run with the
/// same loop and no call.
async fn per_call(
    setup: &Setup,
    setup_code: &str,
    expr: &str,
    n: usize,
) -> anyhow::Result<Duration> {
    // Each call is an event of the run, and the default cap is below the
    // largest counts.
    let limits = sandwit::RunLimits {
        max_calls: n as u32 + 1,
        max_events: n + 100,
        time: Duration::from_secs(120),
        fuel: None,
        ..sandwit::RunLimits::default()
    };
    let timed = async |body: &str| {
        let code = format!(
            "import time\n{setup_code}\nt0 = time.perf_counter_ns()\nfor _ in range({n}):\n    {body}\nprint(time.perf_counter_ns() - t0)\n"
        );
        let outcome = setup
            .python
            .run_with_limits(&setup.ctx, &setup.plugins, &code, &limits)
            .await;
        check(&outcome)?;
        let ns: u64 = outcome.stdout.trim().parse()?;
        anyhow::Ok(ns)
    };
    let with = timed(expr).await?;
    let without = timed("pass").await?;
    Ok(Duration::from_nanos(
        with.saturating_sub(without) / n as u64,
    ))
}

/// Throughput and tail latency under concurrency.
pub async fn throughput(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let seconds = if setup.options.quick {
        0.1
    } else {
        setup.options.seconds
    };
    for concurrency in [1usize, 2, 16, 64] {
        // A quarter of the time untimed first, so a level's numbers are its
        // steady state, not the first touches of pool slots the earlier
        // scenarios left unused.
        let warm_up = Duration::from_secs_f64(seconds / 4.0);
        concurrent_runs(&setup.python, &setup.plugins, concurrency, warm_up).await?;
        let (rate, p99, prepared) = concurrent_runs(
            &setup.python,
            &setup.plugins,
            concurrency,
            Duration::from_secs_f64(seconds),
        )
        .await?;
        rows.push(Row::new(
            format!("throughput, {concurrency} concurrent runs"),
            rate,
            "runs/s",
            format!(
                "p99 {:.0} µs; {:.0} % of runs on a prepared interpreter",
                us(p99),
                prepared * 100.0
            ),
        ));
    }
    Ok(())
}

/// Runs `print(1+1)` from `concurrency` tasks for `duration`: runs per
/// second, p99 latency and the share of runs on a prepared interpreter.
async fn concurrent_runs(
    python: &PythonSandbox,
    plugins: &Toolbox,
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
    let runs = all.len();
    Ok((
        runs as f64 / elapsed.as_secs_f64(),
        Samples::new(all).at(0.99),
        prepared as f64 / runs as f64,
    ))
}

/// Runs alive at once in [`live_memory`].
const LIVE_RUNS: usize = 64;

/// Memory: 64 runs alive at once (each sleeps, which yields to the host),
/// in a host with a run slot for each: with the default slots (one per
/// core) all but a few would wait for a slot, their interpreters not yet
/// made, and the growth measured would be that of a few.
pub async fn live_memory(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let host = setup
        .options
        .builder()
        .run_slots(sandwit::RunSlots {
            running: LIVE_RUNS,
            ..sandwit::RunSlots::per_core()
        })
        .build()?;
    let python = host.load_python_file(&setup.python_path).await?;
    let plugins = setup.plugins_in(&host).await?;
    until_prepared(&python).await?;
    let private = peak_growth(&python, &plugins, LIVE_RUNS).await?;
    rows.push(memory_row(
        "memory per live sandbox, 64 live runs",
        private.map(|bytes| bytes as f64 / LIVE_RUNS as f64 / 1024.0),
        "KiB",
        format!(
            "peak growth of Private_Dirty (smaps_rollup) over the idle host while {LIVE_RUNS} runs sleep, each in a run slot of its own, ÷ {LIVE_RUNS}"
        ),
    ));
    Ok(())
}

/// Peak growth of private memory while `live` runs are alive at once: each
/// does a little work, then sleeps half a second (the sleep yields, so all
/// are live together).
async fn peak_growth(
    python: &PythonSandbox,
    plugins: &Toolbox,
    live: usize,
) -> anyhow::Result<anyhow::Result<u64>> {
    let code = "import time\nx = [str(i) for i in range(1000)]\nprint(1+1)\ntime.sleep(0.5)\n";
    crate::memory::peak_growth(live, || {
        let (python, plugins) = (python.clone(), plugins.clone());
        async move { check(&python.run(&AgentCtx::new("bench"), &plugins, code).await) }
    })
    .await
}

/// The cost of the limits: a CPU-bound loop in hosts that differ only in
/// metering (each compiles the interpreter once, then uses the cache). The
/// samples take turns, so a change in the machine's speed during the
/// measurement touches every setting alike.
pub async fn limits(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let options = &setup.options;
    let iterations = if options.quick { 20_000 } else { 2_000_000 };
    let cpu = format!("t = 0\nfor i in range({iterations}):\n    t += i\n");
    let samples = options.reps(9);
    let settings = [
        (Metering::Off, "no fuel, no epoch"),
        (Metering::DeadlineOnly, "epoch deadline only"),
        (Metering::FuelAndDeadline, "fuel + deadline (the default)"),
    ];
    let mut sandboxes = Vec::new();
    for (metering, _) in settings {
        let host = options
            .builder()
            .metering(metering)
            .prepared_interpreters(0)
            .build()?;
        sandboxes.push(host.load_python_file(&setup.python_path).await?);
    }
    let no_plugins = Toolbox::default();
    let mut times = vec![Vec::new(); settings.len()];
    for _ in 0..samples {
        for (python, times) in sandboxes.iter().zip(&mut times) {
            let start = Instant::now();
            check(&python.run(&setup.ctx, &no_plugins, &cpu).await)?;
            times.push(start.elapsed());
        }
    }
    let mut off_ms = None;
    for ((_, name), times) in settings.into_iter().zip(times) {
        let ms = us(Samples::new(times).at(0.5)) / 1e3;
        let note = match off_ms {
            Some(off) => format!(
                "median of {samples}, taking turns; +{:.1} % over no limits",
                (ms / off - 1.0) * 100.0
            ),
            None => format!("median of {samples}, taking turns"),
        };
        off_ms.get_or_insert(ms);
        rows.push(Row::new(
            format!("CPU-bound loop ({iterations} iterations), {name}"),
            ms,
            "ms",
            note,
        ));
    }
    Ok(())
}

/// Cold start: a new `sandwit run` process that loads cached code and runs
/// once. One untimed start first, which fills the cache if the CLI's engine
/// settings differ from this host's.
pub async fn cold_start(setup: &Setup, rows: &mut Vec<Row>) {
    const SCENARIO: &str = "cold start: new process, cached code, first result";
    let measured = async || {
        let sandwit = setup.options.sandwit_path()?;
        let mut cold = Command::new(&sandwit);
        setup.options.pass_cache_to(&mut cold);
        cold.args(["run", "--python"])
            .arg(&setup.python_path)
            .arg("--plugin")
            .arg(&setup.echo_path)
            .args(["-c", "print(1+1)"]);
        run_process(&mut cold).map_err(|e| {
            e.context(format!(
                "the sandwit CLI ({}; build it with `cargo build --release -p sandwit-cli`, or pass --sandwit)",
                sandwit.display()
            ))
        })?;
        let starts = setup.options.reps(10);
        let mut times = Vec::with_capacity(starts);
        for _ in 0..starts {
            let start = Instant::now();
            run_process(&mut cold)?;
            times.push(start.elapsed());
        }
        anyhow::Ok((Samples::new(times), starts))
    };
    rows.push(match measured().await {
        Ok((times, starts)) => Row::new(
            SCENARIO,
            us(times.at(0.5)) / 1e3,
            "ms",
            format!("median of {starts} `sandwit run -c 'print(1+1)'`"),
        ),
        Err(e) => Row::new(SCENARIO, f64::NAN, "ms", format!("not measured: {e:#}")),
    });
}

/// Runs a process to its end, its output discarded.
pub fn run_process(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.stdout(Stdio::null()).status()?;
    anyhow::ensure!(status.success(), "{cmd:?} failed: {status}");
    Ok(())
}

/// A new host's first seconds: back-to-back `print(1+1)` for the first
/// [`FIRST_SECONDS`] after a new host loads the interpreter, on the bench's
/// cache (prepared: both of the interpreter's compiled codes are there, as
/// `sandwit prepare` leaves them) and on an empty one (the code for reuse
/// is compiled on the sandbox's thread meanwhile), beside a warm host's
/// back-to-back runs: the ratio says what a new replica pays.
pub async fn first_seconds(setup: &Setup, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let Setup {
        options,
        python,
        plugins,
        ctx,
        ..
    } = setup;
    let window = if options.quick {
        Duration::from_secs(1)
    } else {
        FIRST_SECONDS
    };
    // The warm host: its reuse code compiled, its interpreters reused.
    let waiting = Instant::now();
    while !python.reuses_interpreters() {
        anyhow::ensure!(
            waiting.elapsed() < Duration::from_secs(600),
            "the warm host's interpreter for reuse was not compiled in 600 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let back_to_back =
        async |python: &PythonSandbox, plugins: &Toolbox| -> anyhow::Result<Samples> {
            let start = Instant::now();
            let mut times = Vec::new();
            while start.elapsed() < window {
                let run = Instant::now();
                check(&python.run(ctx, plugins, "print(1+1)").await)?;
                times.push(run.elapsed());
            }
            Ok(Samples::new(times))
        };
    let warm = back_to_back(python, plugins).await?;
    let warm_p50 = us(warm.at(0.5));
    rows.push(Row::new(
        "new host: back-to-back print(1+1), a warm host's, p50",
        warm_p50,
        "µs",
        format!("{} runs in {} s", warm.len(), window.as_secs()),
    ));
    let empty = std::env::temp_dir().join(format!("sandwit-bench-empty-{}", std::process::id()));
    let mut hosts = vec![("a prepared cache", options.builder().build()?)];
    if !options.quick {
        let _ = std::fs::remove_dir_all(&empty);
        hosts.push((
            "an empty cache",
            sandwit::Host::builder().cache_dir(&empty).build()?,
        ));
    }
    for (cache, host) in hosts {
        let load = Instant::now();
        let new = host.load_python_file(&setup.python_path).await?;
        let loaded = load.elapsed();
        let new_plugins = setup.plugins_in(&host).await?;
        let times = back_to_back(&new, &new_plugins).await?;
        let p50 = us(times.at(0.5));
        rows.push(Row::new(
            format!("new host: back-to-back print(1+1) in its first {} s, on {cache}, p50", window.as_secs()),
            p50,
            "µs",
            format!(
                "{} runs (p90 {:.0} µs); loading took {:.1} s; reusing interpreters at the end: {}; \
                 new ÷ warm {:.2}",
                times.len(),
                us(times.at(0.9)),
                loaded.as_secs_f64(),
                new.reuses_interpreters(),
                p50 / warm_p50
            ),
        ));
    }
    let _ = std::fs::remove_dir_all(&empty);
    Ok(())
}

/// How long a new host's first seconds are measured.
const FIRST_SECONDS: Duration = Duration::from_secs(10);
