//! `sandwit serve`: the runtime over HTTP (the `sandwit-service` crate).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sandwit::Host;
use sandwit_service::{Config, DEFAULT_TOKEN_RATE, McpSessionLimits, RateLimit, Service, Tokens};

#[derive(Args)]
pub struct ServeArgs {
    /// The folder of `.wasm` plugins to offer (all of them, in name order;
    /// `POST /v1/plugins:reload` loads it again).
    #[arg(long = "plugins", value_name = "DIR")]
    plugin_dir: PathBuf,
    /// The address to listen on; port 0 picks a free port. The bound
    /// address is printed as `listening on http://ADDR` on stdout.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    addr: SocketAddr,
    /// The bearer tokens accepted: one `name role sha256-hex [namespace]` a
    /// line, role `admin` or `user` (`printf %s "$TOKEN" | sha256sum` gives
    /// the digest). A namespace (e.g. `acme:`, ending with `:` or `/`, none
    /// beginning another) binds the token to the chat keys and user ids that
    /// start with it (docs/SERVICE.md, "Trust model"). Without the file one
    /// admin token is generated and printed once on stderr.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    #[command(flatten)]
    pub interpreters: crate::interpreter::InterpreterArgs,
    /// Answer 200 on /readyz at once, before the interpreter's code for
    /// reuse across runs is compiled (once per cache; `sandwit prepare`
    /// compiles it ahead): runs are taken either way, slower until then.
    #[arg(long)]
    ready_before_reuse: bool,
    #[command(flatten)]
    pub slots: RunSlots,
    /// On SIGINT or SIGTERM, how long runs in flight get to finish before
    /// they are cancelled, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    grace_ms: u64,
    /// The longest an exchange may take, from its request to its
    /// response's head, in milliseconds; past it the client gets 408 and
    /// its run is cancelled [default: --queue-wait-ms plus the host's
    /// longest run or call time limit plus 5 s].
    #[arg(long, value_name = "MS")]
    request_timeout_ms: Option<u64>,
    /// The largest request body, in KiB.
    #[arg(long, default_value_t = 1024, value_name = "KIB")]
    max_body_kib: usize,
    #[command(flatten)]
    connections: crate::connections::ConnArgs,
    /// Requests a token may make a minute, sustained, on every endpoint but
    /// /healthz, /readyz and /openapi.json; past it 429 with Retry-After.
    #[arg(long, default_value_t = DEFAULT_TOKEN_RATE.per_minute, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    rate_per_minute: u32,
    /// Requests a token may make at once, after a pause.
    #[arg(long, default_value_t = DEFAULT_TOKEN_RATE.burst, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    rate_burst: u32,
    #[command(flatten)]
    mcp_sessions: McpSessionArgs,
}

/// The bounds on MCP sessions at /mcp.
#[derive(Args)]
pub struct McpSessionArgs {
    /// MCP sessions the server holds at once; past it `initialize` is
    /// refused with 503.
    #[arg(long, default_value_t = McpSessionLimits::default().total as u64, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    mcp_sessions: u64,
    /// MCP sessions one token holds at once; past it `initialize` is
    /// refused with 429.
    #[arg(long, default_value_t = McpSessionLimits::default().per_token as u64, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    mcp_sessions_per_token: u64,
    /// How long an MCP session lives without a request or an open
    /// response stream, in milliseconds.
    #[arg(long, default_value_t = McpSessionLimits::default().idle.as_millis() as u64,
          value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    mcp_idle_ms: u64,
    /// How long an MCP session that made no request past `initialize`
    /// lives, in milliseconds.
    #[arg(long, default_value_t = McpSessionLimits::default().init_idle.as_millis() as u64,
          value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    mcp_init_idle_ms: u64,
}

impl McpSessionArgs {
    fn limits(&self) -> McpSessionLimits {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        McpSessionLimits {
            per_token: count(self.mcp_sessions_per_token),
            total: count(self.mcp_sessions),
            idle: Duration::from_millis(self.mcp_idle_ms),
            init_idle: Duration::from_millis(self.mcp_init_idle_ms),
        }
    }
}

pub async fn serve(host: Host, args: ServeArgs) -> anyhow::Result<ExitCode> {
    if !args.addr.ip().is_loopback() {
        eprintln!(
            "sandwit: warning: listening on {}, beyond this machine, over plain HTTP: \
             tokens cross the network in the clear unless a TLS proxy is in front",
            args.addr
        );
    }
    let tokens = match &args.token_file {
        Some(path) => Tokens::load(path)?,
        None => {
            let (tokens, token) = Tokens::generate()?;
            eprintln!("sandwit: no --token-file; the admin token for this run is {token}");
            tokens
        }
    };
    let interpreters = crate::interpreter::interpreters(&host, &args.interpreters).await?;
    let config = Config {
        rate: RateLimit {
            per_minute: args.rate_per_minute,
            burst: args.rate_burst,
        },
        mcp_sessions: args.mcp_sessions.limits(),
        ready_before_reuse: args.ready_before_reuse,
        ..args.slots.config(
            args.plugin_dir.clone(),
            tokens,
            args.max_body_kib.saturating_mul(1024),
        )
    };
    let mut service = Service::new(host, interpreters, config).await?;
    if let Some(ms) = args.request_timeout_ms {
        service = service.with_request_timeout(Duration::from_millis(ms));
    }
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    outln!("listening on http://{}", listener.local_addr()?);
    let grace = Duration::from_millis(args.grace_ms);
    let cancelled = service
        .serve(
            listener,
            args.connections.limits(),
            shutdown_signal(),
            grace,
            move |in_flight| {
                eprintln!(
                    "sandwit: shutting down; {in_flight} run(s) in flight get {} ms to finish",
                    grace.as_millis()
                );
            },
        )
        .await;
    for (id, caller) in cancelled {
        eprintln!("sandwit: cancelled run {id} of `{caller}`");
    }
    eprintln!("sandwit: stopped");
    Ok(ExitCode::SUCCESS)
}

/// The run slots of `sandwit serve` and `sandwit mcp`: how many runs at
/// once, and how many may wait, for how long.
#[derive(Args)]
pub struct RunSlots {
    /// Runs at once [default: the number of cores].
    #[arg(long, value_name = "N")]
    max_runs: Option<usize>,
    /// Runs waiting for a slot beyond those; past them a run is refused
    /// (over HTTP 503 with Retry-After, over MCP an error result).
    #[arg(long, default_value_t = 16, value_name = "N")]
    queue: usize,
    /// How long a run waits for a slot before it is refused, in
    /// milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    queue_wait_ms: u64,
}

impl RunSlots {
    fn max_running(&self) -> usize {
        self.max_runs
            .unwrap_or_else(|| sandwit::RunSlots::per_core().running)
    }

    /// The host's run slots: the service's runs wait in them (each takes
    /// a place there, `Host::run_place`), and its calls' queue and MCP
    /// exchanges are bounded by the same.
    pub fn host(&self) -> sandwit::RunSlots {
        sandwit::RunSlots {
            running: self.max_running(),
            waiting: self.queue,
            max_wait: Duration::from_millis(self.queue_wait_ms),
        }
    }

    /// The service's configuration (its run slots are the host's:
    /// [`RunSlots::host`]).
    pub fn config(&self, plugin_dir: PathBuf, tokens: Tokens, max_body_bytes: usize) -> Config {
        Config {
            plugin_dir,
            tokens,
            max_body_bytes,
            rate: DEFAULT_TOKEN_RATE,
            mcp_sessions: McpSessionLimits::default(),
            ready_before_reuse: false,
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
