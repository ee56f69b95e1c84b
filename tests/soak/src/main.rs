//! `sandwit-soak`: thousands of Python runs over many concurrent tasks, mixing
//! normal work, store writes, failing plugins, limit breaches and hostile
//! code. Every outcome is checked against what its kind must give; the
//! process's resident memory and open descriptors after a warm-up and at the
//! end must stay within stated bounds; afterwards a new host on the same
//! store file finds every store write a run acknowledged (read back through
//! a new connection; durability across a kill -9 is the store tests'
//! concern). Exit status 0 only when all of that holds.
//!
//! `scripts/soak` runs the full version; `scripts/test` a short one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use sandwit::{
    AgentCtx, CallLimits, Host, LimitKind, MethodResult, Plugin, Policy, PythonSandbox, RunLimits,
    RunOutcome, RunStatus, Toolbox, Value,
};
use sandwit_test_artifacts as artifacts;
use tokio::sync::Mutex;

/// Soak the Python sandbox and its plugins.
#[derive(Parser)]
struct Args {
    /// Runs in all.
    #[arg(long, default_value_t = 10_000)]
    runs: usize,
    /// Tasks running them concurrently.
    #[arg(long, default_value_t = 64)]
    tasks: usize,
    /// How much resident memory may grow from after the warm-up (the first
    /// 5% of runs, and at least four rounds of every task) to the end, in
    /// MiB.
    #[arg(long, default_value_t = 96)]
    max_rss_growth_mib: u64,
    /// How many more descriptors may be open at the end than after the
    /// warm-up.
    #[arg(long, default_value_t = 8)]
    max_fd_growth: usize,
    /// Where the compiled-code cache is.
    #[arg(long, value_name = "DIR")]
    cache_dir: PathBuf,
    /// A directory for the plugin store's SQLite file (emptied first).
    #[arg(long, value_name = "DIR")]
    work_dir: PathBuf,
    /// Print the figures as one JSON object.
    #[arg(long)]
    json: bool,
}

/// The kinds of run, taken in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A method call and a print: ok, the sum printed.
    Normal,
    /// A note stored for a user of its own: ok and acknowledged.
    StoreWrite,
    /// A plugin method that fails: `PluginError` with its message.
    FailingPlugin,
    /// A plugin that spins: its call's fuel limit, a `PluginError` naming
    /// the method and the limit (the run goes on).
    PluginSpins,
    /// Python that loops forever: the fuel limit.
    PythonSpins,
    /// Python that asks for 1 GiB: the memory limit.
    MemoryHog,
    /// Python that prints without end: the output cap.
    OutputFlood,
    /// Python reaching for files, processes and the host's builtins.
    Escape,
    /// An exception.
    Exception,
    /// An agent method: the run ends in a handoff.
    Handoff,
    /// A plugin's HTTP request to a granted loopback server.
    Http,
}

const KINDS: [Kind; 11] = [
    Kind::Normal,
    Kind::StoreWrite,
    Kind::FailingPlugin,
    Kind::PluginSpins,
    Kind::PythonSpins,
    Kind::MemoryHog,
    Kind::OutputFlood,
    Kind::Escape,
    Kind::Exception,
    Kind::Handoff,
    Kind::Http,
];

impl Kind {
    fn code(self, i: usize, port: u16) -> String {
        match self {
            Kind::Normal => format!("print(calculate_sum({i}, 1))"),
            Kind::StoreWrite => format!("print(remember('note {i}'))"),
            Kind::FailingPlugin => "fail()".into(),
            Kind::PluginSpins => "spin()".into(),
            Kind::PythonSpins => "while True:\n    pass".into(),
            Kind::MemoryHog => "x = bytearray(1 << 30)".into(),
            Kind::OutputFlood => "while True:\n    print('x' * 1000)".into(),
            Kind::Escape => {
                "import os\nprint(hasattr(os, 'system'), hasattr(os, 'fork'))\nopen('/etc/passwd')"
                    .into()
            }
            Kind::Exception => format!("{i} / 0"),
            Kind::Handoff => "search_knowledge_base('tea')\nprint('never')".into(),
            Kind::Http => format!("print(fetch('http://127.0.0.1:{port}/{i}')['body'])"),
        }
    }

    /// Why `outcome` is not what a run of this kind must give, if it is not.
    fn check(self, i: usize, outcome: &RunOutcome) -> Result<(), String> {
        let error_type = outcome.error.as_ref().map(|e| e.type_name.as_str());
        let limit = outcome.limit.as_ref().map(|l| l.kind);
        let ok = match self {
            Kind::Normal => {
                outcome.status == RunStatus::Ok && outcome.stdout == format!("{}\n", i + 1)
            }
            Kind::StoreWrite => outcome.status == RunStatus::Ok && outcome.stdout == "1\n",
            Kind::FailingPlugin => {
                outcome.status == RunStatus::Error
                    && error_type == Some("PluginError")
                    && outcome
                        .error
                        .as_ref()
                        .is_some_and(|e| e.message.contains("the plugin's own failure"))
            }
            Kind::PluginSpins => {
                outcome.status == RunStatus::Error
                    && error_type == Some("PluginError")
                    && outcome.error.as_ref().is_some_and(|e| {
                        e.message.contains("spin: fuel limit exceeded")
                            && e.message.contains("50000000 units")
                    })
            }
            Kind::PythonSpins => {
                outcome.status == RunStatus::LimitExceeded && limit == Some(LimitKind::Fuel)
            }
            Kind::MemoryHog => {
                outcome.status == RunStatus::LimitExceeded && limit == Some(LimitKind::Memory)
            }
            Kind::OutputFlood => {
                outcome.status == RunStatus::LimitExceeded && limit == Some(LimitKind::Output)
            }
            Kind::Escape => {
                outcome.status == RunStatus::Error
                    && error_type == Some("FileNotFoundError")
                    && outcome.stdout == "False False\n"
            }
            Kind::Exception => {
                outcome.status == RunStatus::Error && error_type == Some("ZeroDivisionError")
            }
            Kind::Handoff => {
                outcome.status == RunStatus::AgentHandoff && !outcome.stdout.contains("never")
            }
            Kind::Http => outcome.status == RunStatus::Ok && outcome.stdout == format!("/{i}\n"),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "run {i} ({self:?}): status {:?}, limit {:?}, error {:?}, stdout {:?}",
                outcome.status,
                outcome.limit,
                outcome.error,
                cut(&outcome.stdout, 200)
            ))
        }
    }
}

fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// The user a store write is made for: one note each, so every write is a
/// user's first.
fn writer(i: usize) -> AgentCtx {
    AgentCtx {
        user_id: Some(format!("soak-{i}")),
        ..AgentCtx::new(format!("chat-{}", i % 17))
    }
}

/// Per kind: runs, and how many gave what they must.
#[derive(Default)]
struct Tally {
    by_kind: BTreeMap<String, (usize, usize)>,
    mismatches: Vec<String>,
    acknowledged: Vec<usize>,
    latencies: Vec<Duration>,
}

/// The process's resident memory (KiB), its peak, and open descriptors.
fn usage() -> anyhow::Result<(u64, u64, usize)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib = |key: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(key))
            .with_context(|| format!("no {key} in /proc/self/status"))?;
        Ok(line
            .trim_start_matches(key)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?)
    };
    let fds = std::fs::read_dir("/proc/self/fd")?.count();
    Ok((kib("VmRSS:")?, kib("VmHWM:")?, fds))
}

/// A loopback HTTP server answering each request with its path.
fn http_server() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                let mut reader = std::io::BufReader::new(&stream);
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    line.clear();
                }
                let path = first.split(' ').nth(1).unwrap_or("/").to_string();
                let mut stream = &stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{path}",
                    path.len()
                );
            });
        }
    });
    Ok(port)
}

fn host(cache_dir: &Path, store: &Path, tasks: usize, port: u16) -> anyhow::Result<Host> {
    let mut policy = Policy::default();
    policy.grant("notes", ["store"])?;
    policy.pin(
        "notes",
        &sandwit::component_hash(&std::fs::read(artifacts::NOTES)?),
    )?;
    policy.grant("services", [format!("http:127.0.0.1:{port}").as_str()])?;
    policy.pin(
        "services",
        &sandwit::component_hash(&std::fs::read(artifacts::SERVICES)?),
    )?;
    Host::builder()
        .cache_dir(cache_dir)
        .store_path(store)
        .policy(policy)
        .limits(CallLimits {
            fuel: Some(50_000_000),
            time: Duration::from_secs(20),
            ..CallLimits::default()
        })
        // Each task's run holds the interpreter and up to three plugins.
        .max_instances(u32::try_from(tasks * 4 + 8)?)
        .build()
}

async fn load(host: &Host) -> anyhow::Result<(PythonSandbox, Vec<Plugin>)> {
    let python = host.load_python_file(artifacts::PYTHON).await?;
    let mut plugins = Vec::new();
    for path in [
        artifacts::CALC,
        artifacts::NOTES,
        artifacts::HOSTILE,
        artifacts::KNOWLEDGE,
        artifacts::SERVICES,
    ] {
        plugins.push(host.load_plugin_file(path).await?);
    }
    Ok((python, plugins))
}

/// Waits (at most 10 s) until the sandbox's thread has caught up after the
/// runs: its interpreters prepared (it drops finished runs' stores before
/// it prepares) and the plugins' instances made ahead, so that a sample of
/// resident memory counts what the host keeps, not what it is still
/// dropping or making. Checked each time the thread has done something.
async fn settled(python: &PythonSandbox, plugins: &[Plugin]) {
    let caught_up = || {
        python.prepared() >= sandwit::DEFAULT_PREPARED_INTERPRETERS
            && plugins.iter().all(|p| p.prepared_instances() > 0)
    };
    // A thread that has not caught up by then is sampled as it is.
    let waited = python.wait_for_preparer(caught_up);
    let _ = tokio::time::timeout(Duration::from_secs(10), waited).await;
}

fn run_limits() -> RunLimits {
    RunLimits {
        fuel: Some(200_000_000),
        time: Duration::from_secs(30),
        memory_bytes: 96 << 20,
        max_output_bytes: 64 << 10,
        ..RunLimits::default()
    }
}

/// What the tasks share.
#[derive(Clone)]
struct Shared {
    python: Arc<PythonSandbox>,
    plugins: Arc<Toolbox>,
    tally: Arc<Mutex<Tally>>,
    /// The loopback HTTP server's port.
    port: u16,
    /// The next run to start, and how many have finished.
    next: Arc<AtomicUsize>,
    done: Arc<AtomicUsize>,
}

/// Runs the runs numbered up to `until` over `tasks` tasks, and waits for
/// them all.
async fn soak(
    shared: &Shared,
    until: usize,
    tasks: usize,
    total: usize,
    start: Instant,
) -> anyhow::Result<()> {
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let s = shared.clone();
        handles.push(tokio::spawn(async move {
            loop {
                let i = s.next.fetch_add(1, Ordering::Relaxed);
                if i >= until {
                    s.next.fetch_min(until, Ordering::Relaxed);
                    return;
                }
                let kind = KINDS[i % KINDS.len()];
                let outcome = s
                    .python
                    .run_with_limits(&writer(i), &s.plugins, &kind.code(i, s.port), &run_limits())
                    .await;
                let verdict = kind.check(i, &outcome);
                {
                    let mut t = s.tally.lock().await;
                    let entry = t.by_kind.entry(format!("{kind:?}")).or_default();
                    entry.0 += 1;
                    match verdict {
                        Ok(()) => entry.1 += 1,
                        Err(m) => t.mismatches.push(m),
                    }
                    if kind == Kind::StoreWrite && outcome.status == RunStatus::Ok {
                        t.acknowledged.push(i);
                    }
                    t.latencies.push(outcome.elapsed);
                }
                let finished = s.done.fetch_add(1, Ordering::Relaxed) + 1;
                if finished.is_multiple_of(1000) {
                    eprintln!(
                        "soak: {finished}/{total} runs, {:.0} s",
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        }));
    }
    for handle in handles {
        handle.await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.tasks == 0 || args.runs == 0 {
        bail!("--runs and --tasks must be at least 1");
    }
    std::fs::create_dir_all(&args.work_dir)?;
    let store = args.work_dir.join("soak-store.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", store.display()));
    }
    let port = http_server()?;
    let host = host(&args.cache_dir, &store, args.tasks, port)?;
    let (python, loaded) = load(&host).await?;
    let plugins = Toolbox::new(&loaded)?;
    // On a fresh cache the interpreter is compiled once more, in the
    // background, for the sandbox's own engine (interpreters reused across
    // runs): tens of megabytes of code that would otherwise be counted as
    // the soak's growth if the compile ended inside the measured window.
    let reusing = python.wait_for_preparer(|| python.reuses_interpreters());
    if tokio::time::timeout(Duration::from_secs(600), reusing)
        .await
        .is_err()
    {
        eprintln!("soak: interpreters are not reused after 10 minutes; soaking without");
    }

    let tally = Arc::new(Mutex::new(Tally::default()));
    let shared = Shared {
        python: Arc::new(python),
        plugins: Arc::new(plugins),
        tally: tally.clone(),
        port,
        next: Arc::new(AtomicUsize::new(0)),
        done: Arc::new(AtomicUsize::new(0)),
    };
    let start = Instant::now();
    // The warm-up runs to its end before the first sample, so that both
    // samples are taken with nothing running. It is at least four rounds
    // of every task at once: one round left the short soak measuring the
    // ramp to full concurrency (the allocator's arenas, the instance
    // pool's slots) as growth.
    let warm_up = (args.runs / 20).max(4 * args.tasks).min(args.runs);
    soak(&shared, warm_up, args.tasks, args.runs, start).await?;
    settled(&shared.python, &loaded).await;
    let (rss_base, _, fds_base) = usage()?;
    soak(&shared, args.runs, args.tasks, args.runs, start).await?;
    let elapsed = start.elapsed();
    settled(&shared.python, &loaded).await;
    let (rss_end, peak, fds_end) = usage()?;

    // Every acknowledged write, read back by a new host on the same file.
    drop((shared, host, loaded));
    let mut tally = Arc::try_unwrap(tally)
        .map_err(|_| anyhow::anyhow!("tasks still hold the tally"))?
        .into_inner();
    let reopened = crate::host(&args.cache_dir, &store, 1, port)?;
    let notes = reopened.load_plugin_file(artifacts::NOTES).await?;
    let mut missing = Vec::new();
    for &i in &tally.acknowledged {
        let report = notes
            .call(&writer(i), "recall", Value::Object(vec![]))
            .await;
        let want = Value::List(vec![Value::Text(format!("note {i}"))]);
        match report {
            Ok(MethodResult::Tool(v)) if v == want => {}
            other => missing.push(format!("run {i}: recall gave {other:?}")),
        }
    }

    tally.latencies.sort();
    let p = |q: f64| {
        let n = tally.latencies.len();
        tally.latencies[((n as f64 * q) as usize).min(n - 1)]
    };
    let rss_growth_mib = rss_end.saturating_sub(rss_base) as f64 / 1024.0;
    let fd_growth = fds_end.saturating_sub(fds_base);
    let report = serde_json::json!({
        "runs": args.runs,
        "tasks": args.tasks,
        "seconds": elapsed.as_secs_f64(),
        "runs_per_second": args.runs as f64 / elapsed.as_secs_f64(),
        "p50_ms": p(0.5).as_secs_f64() * 1e3,
        "p99_ms": p(0.99).as_secs_f64() * 1e3,
        "by_kind": tally.by_kind.iter().map(|(k, (n, good))| (k.clone(), serde_json::json!({"runs": n, "as_expected": good}))).collect::<serde_json::Map<_, _>>(),
        "mismatches": tally.mismatches.len(),
        "store_writes_acknowledged": tally.acknowledged.len(),
        "store_writes_missing": missing.len(),
        "rss_after_warm_up_mib": rss_base as f64 / 1024.0,
        "rss_end_mib": rss_end as f64 / 1024.0,
        "rss_peak_mib": peak as f64 / 1024.0,
        "rss_growth_mib": rss_growth_mib,
        "fds_after_warm_up": fds_base,
        "fds_end": fds_end,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "soak: {} runs over {} tasks in {:.1} s ({:.0} runs/s, p50 {:.1} ms, p99 {:.1} ms)",
            args.runs,
            args.tasks,
            elapsed.as_secs_f64(),
            report["runs_per_second"].as_f64().unwrap_or_default(),
            report["p50_ms"].as_f64().unwrap_or_default(),
            report["p99_ms"].as_f64().unwrap_or_default(),
        );
        for (kind, (n, good)) in &tally.by_kind {
            println!("  {kind:<14} {good:>6} of {n:>6} as expected");
        }
        println!(
            "  store writes: {} acknowledged, {} missing afterwards",
            tally.acknowledged.len(),
            missing.len()
        );
        println!(
            "  resident memory: {:.0} MiB after warm-up, {:.0} MiB at the end (+{rss_growth_mib:.1}, bound {}), peak {:.0} MiB",
            rss_base as f64 / 1024.0,
            rss_end as f64 / 1024.0,
            args.max_rss_growth_mib,
            peak as f64 / 1024.0
        );
        println!(
            "  open descriptors: {fds_base} after warm-up, {fds_end} at the end (bound +{})",
            args.max_fd_growth
        );
    }
    let mut failed = Vec::new();
    for m in tally.mismatches.iter().take(10) {
        failed.push(format!("unexpected outcome: {m}"));
    }
    for m in missing.iter().take(10) {
        failed.push(format!("acknowledged write missing: {m}"));
    }
    if rss_growth_mib > args.max_rss_growth_mib as f64 {
        failed.push(format!(
            "resident memory grew {rss_growth_mib:.1} MiB, more than {} MiB",
            args.max_rss_growth_mib
        ));
    }
    if fd_growth > args.max_fd_growth {
        failed.push(format!(
            "{fd_growth} more descriptors open, more than {}",
            args.max_fd_growth
        ));
    }
    if !failed.is_empty() || !tally.mismatches.is_empty() || !missing.is_empty() {
        for f in &failed {
            eprintln!("soak: {f}");
        }
        bail!(
            "{} unexpected outcomes, {} acknowledged writes missing",
            tally.mismatches.len(),
            missing.len()
        );
    }
    Ok(())
}
