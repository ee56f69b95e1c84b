//! `sandwit-load`: the load test of `sandwit serve` (scripts/load-service).
//! It starts the given `sandwit` binary as a server on loopback with an
//! empty plugin folder, then drives `POST /v1/runs` with `print(1+1)` from
//! 1, 16 and 64 concurrent clients (each a thread with its own
//! connection), bounded by a number of requests and a number of seconds
//! per level, and checks that every answer is a correct outcome (200,
//! `status: ok`, stdout `2\n`). It prints runs/s, p50 and p99 per level,
//! or with `--quick` only how many answers were checked.
//!
//! With `--haproxy PATH` it starts `--replicas` servers (sharing `--store`,
//! e.g. a PostgreSQL URL, when given) and drives them through haproxy
//! (round robin, `/readyz` checks): the figures of a deployment of
//! replicas behind a balancer (docs/DEPLOY.md).
//!
//!     sandwit-load --sandwit target/release/sandwit [--clients 1,16,64]
//!         [--requests 2000] [--seconds 20] [--max-runs N] [--quick]
//!         [--haproxy /usr/sbin/haproxy --replicas 3 --store postgres://...]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Parser;

#[derive(Parser)]
#[command(about = "The load test of `sandwit serve` (runs/s, p50, p99 by concurrent clients)")]
struct Args {
    /// The `sandwit` binary to serve with (the CPython component embedded).
    #[arg(long)]
    sandwit: PathBuf,
    /// Its compile cache (`--cache-dir`).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// The levels of concurrent clients.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16, 64])]
    clients: Vec<usize>,
    /// Requests per level, at most.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Seconds per level, at most (requests under way then still finish).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// The server's `--max-runs` [default: its own, the cores].
    #[arg(long)]
    max_runs: Option<usize>,
    /// Check the answers only: print no figures.
    #[arg(long)]
    quick: bool,
    /// Drive the servers through this haproxy (Debian's is
    /// /usr/sbin/haproxy) instead of directly.
    #[arg(long, value_name = "PATH")]
    haproxy: Option<PathBuf>,
    /// Servers to start (more than 1 needs --haproxy).
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// The servers' `--store` (e.g. `postgres://...`, which they then
    /// share) [default: an SQLite file each].
    #[arg(long, value_name = "FILE|URL")]
    store: Option<String>,
}

const TOKEN: &str = "sandwit-load-token";
const CODE: &str = "print(1+1)";
/// Requests before each level's clock starts: the interpreters are ready.
const WARM_UP: usize = 20;

/// The server, killed when dropped.
struct Server {
    child: Child,
    base: String,
    _dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(args: &Args, replica: usize) -> anyhow::Result<Server> {
    let dir = std::env::temp_dir().join(format!("sandwit-load-{}-{replica}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    let dir = TempDir(dir);
    let tokens = dir.0.join("tokens");
    std::fs::write(
        &tokens,
        // An admin's: it reads /metrics (admin only) as well as runs.
        format!("load admin {}\n", sandwit_service_digest(TOKEN)),
    )?;
    let max_clients = args.clients.iter().copied().max().unwrap_or(1);
    let mut command = Command::new(&args.sandwit);
    // The load is small-interpreter runs: the scientific one (which
    // scripts/env.sh names) would only cost the start its compile.
    command.env_remove("SANDWIT_SCIENTIFIC");
    if let Some(cache) = &args.cache_dir {
        command.arg("--cache-dir").arg(cache);
    }
    match &args.store {
        Some(store) => command.args(["--store", store]),
        None => command.arg("--store").arg(dir.0.join("store.db")),
    };
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--plugins"])
        .arg(&plugins)
        .arg("--token-file")
        .arg(&tokens)
        // Every client can wait for a slot: a refusal would be an error.
        .args(["--queue", &max_clients.to_string()])
        // One token makes every request, as fast as the server answers:
        // its rate limit would refuse most of them.
        .args(["--rate-per-minute", &u32::MAX.to_string()])
        .args(["--rate-burst", &u32::MAX.to_string()]);
    if let Some(n) = args.max_runs {
        command.args(["--max-runs", &n.to_string()]);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", args.sandwit.display()))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .context("reading the server's address")?;
    let Some(base) = line.trim().strip_prefix("listening on ") else {
        let _ = child.kill();
        bail!("the server did not start: {line:?}");
    };
    ensure!(
        base.starts_with("http://127.0.0.1:"),
        "not on loopback: {base}"
    );
    Ok(Server {
        base: base.to_string(),
        child,
        _dir: dir,
    })
}

/// haproxy in front of `servers`, stopped when dropped: round robin, each
/// server checked on `/readyz`.
fn balancer(haproxy: &std::path::Path, servers: &[Server]) -> anyhow::Result<Server> {
    let dir = std::env::temp_dir().join(format!("sandwit-load-{}-lb", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let dir = TempDir(dir);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut config = format!(
        "global\n  maxconn 1024\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  \
         timeout server 120s\n  option http-keep-alive\n\
         frontend front\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
         backend replicas\n  balance roundrobin\n  option httpchk GET /readyz\n"
    );
    for (i, server) in servers.iter().enumerate() {
        let addr = server.base.trim_start_matches("http://");
        config.push_str(&format!("  server r{i} {addr} check inter 1s\n"));
    }
    let file = dir.0.join("haproxy.cfg");
    std::fs::write(&file, config)?;
    let child = Command::new(haproxy)
        .args(["-db", "-f"])
        .arg(&file)
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", haproxy.display()))?;
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        ensure!(
            start.elapsed() < Duration::from_secs(20),
            "haproxy did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    })
}

/// The longest the server may take to compile its interpreter for reuse
/// (once per cache, on an idle-priority thread).
const REUSE_WAIT: Duration = Duration::from_secs(300);

/// Waits until the server reuses its interpreters (`/metrics`'
/// `sandwit_interpreters_reusable 1`): before that every run instantiates
/// an interpreter, which is the server's first minute, not its load.
fn wait_for_reuse(base: &str) -> anyhow::Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let start = Instant::now();
    let mut said = false;
    loop {
        let mut response = agent
            .get(format!("{base}/metrics"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .call()
            .context("reading /metrics")?;
        let status = response.status();
        let text = response
            .body_mut()
            .read_to_string()
            .context("reading /metrics")?;
        ensure!(status == 200, "/metrics answered {status}: {text}");
        if text.lines().any(|l| l == "sandwit_interpreters_reusable 1") {
            return Ok(());
        }
        ensure!(
            start.elapsed() < REUSE_WAIT,
            "the server did not reuse its interpreters within {REUSE_WAIT:?}"
        );
        if !said {
            eprintln!(
                "sandwit-load: waiting for the server to compile its interpreter for reuse (once per cache)"
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The SHA-256 of a token, hex, as the token file holds it.
fn sandwit_service_digest(token: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One run over `agent`: its latency, or what was wrong with the answer.
fn one_run(agent: &ureq::Agent, url: &str) -> anyhow::Result<Duration> {
    let body = serde_json::json!({"code": CODE, "chat_key": "load"}).to_string();
    let start = Instant::now();
    let mut response = agent
        .post(url)
        .header("Authorization", format!("Bearer {TOKEN}"))
        .header("Content-Type", "application/json")
        .send(body.as_str())
        .context("sending a run")?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .read_to_string()
        .context("reading an outcome")?;
    let elapsed = start.elapsed();
    ensure!(status == 200, "status {status}: {text}");
    let outcome: serde_json::Value = serde_json::from_str(&text).context("an outcome's JSON")?;
    ensure!(
        outcome["status"] == "ok" && outcome["stdout"] == "2\n",
        "a wrong outcome: {text}"
    );
    Ok(elapsed)
}

/// What one level measured.
struct Level {
    clients: usize,
    runs: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    errors: Vec<String>,
}

fn drive(base: &str, clients: usize, requests: usize, seconds: u64) -> Level {
    let url = format!("{base}/v1/runs");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .max_idle_connections(clients.max(1))
        .max_idle_connections_per_host(clients.max(1))
        .build()
        .into();
    let taken = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(requests)));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    std::thread::scope(|scope| {
        for _ in 0..clients {
            let (agent, url) = (agent.clone(), url.clone());
            let (taken, latencies, errors) = (taken.clone(), latencies.clone(), errors.clone());
            scope.spawn(move || {
                while Instant::now() < deadline && taken.fetch_add(1, Ordering::Relaxed) < requests
                {
                    match one_run(&agent, &url) {
                        Ok(latency) => latencies.lock().expect("latencies").push(latency),
                        Err(e) => errors.lock().expect("errors").push(format!("{e:#}")),
                    }
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let latencies = std::mem::take(&mut *latencies.lock().expect("latencies"));
    let errors = std::mem::take(&mut *errors.lock().expect("errors"));
    Level {
        clients,
        runs: latencies.len(),
        elapsed,
        latencies,
        errors,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    ensure!(
        args.clients.iter().all(|&c| (1..=256).contains(&c)),
        "--clients must each be 1 to 256"
    );
    ensure!(
        args.replicas >= 1 && (args.replicas == 1 || args.haproxy.is_some()),
        "--replicas must be at least 1, and more than 1 needs --haproxy"
    );
    let servers = (0..args.replicas)
        .map(|i| start(&args, i))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !args.quick {
        for server in &servers {
            wait_for_reuse(&server.base)?;
        }
    }
    let lb = match &args.haproxy {
        Some(haproxy) => Some(balancer(haproxy, &servers)?),
        None => None,
    };
    let server = lb.as_ref().unwrap_or(&servers[0]);
    let mut failed = 0;
    if !args.quick {
        println!("| clients | runs | runs/s | p50 (ms) | p99 (ms) |\n|---:|---:|---:|---:|---:|");
    }
    for &clients in &args.clients {
        let warm = drive(&server.base, clients, WARM_UP.max(clients), args.seconds);
        failed += warm.errors.len();
        let mut level = drive(&server.base, clients, args.requests, args.seconds);
        level.latencies.sort();
        for error in level.errors.iter().chain(&warm.errors).take(5) {
            eprintln!("sandwit-load: {clients} client(s): {error}");
        }
        failed += level.errors.len();
        if args.quick {
            println!(
                "{} client(s): {} correct outcome(s), {} wrong",
                level.clients,
                level.runs + warm.runs,
                level.errors.len() + warm.errors.len()
            );
        } else {
            println!(
                "| {} | {} | {:.0} | {:.1} | {:.1} |",
                level.clients,
                level.runs,
                level.runs as f64 / level.elapsed.as_secs_f64(),
                percentile(&level.latencies, 0.50),
                percentile(&level.latencies, 0.99),
            );
        }
    }
    drop(lb);
    drop(servers);
    ensure!(failed == 0, "{failed} answer(s) were not a correct outcome");
    Ok(())
}
