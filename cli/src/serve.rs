//! `sandwit serve`: the runtime over HTTP (the `sandwit-service` crate).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sandwit::Host;
use sandwit_service::{Config, Service, Tokens};

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
    /// The bearer tokens accepted: one `name role sha256-hex` a line, role
    /// `admin` or `user` (`printf %s "$TOKEN" | sha256sum` gives the digest).
    /// Without it one admin token is generated and printed once on stderr.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The CPython component [default: as for `sandwit run`].
    #[arg(long, value_name = "FILE")]
    python: Option<PathBuf>,
    #[command(flatten)]
    slots: RunSlots,
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
    let sandbox = crate::interpreter::load(&host, args.python.clone()).await?;
    let config = args.slots.config(
        args.plugin_dir.clone(),
        tokens,
        args.max_body_kib.saturating_mul(1024),
    );
    let mut service = Service::new(host, sandbox, config).await?;
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
    /// The service's configuration with these slots.
    pub fn config(&self, plugin_dir: PathBuf, tokens: Tokens, max_body_bytes: usize) -> Config {
        Config {
            plugin_dir,
            tokens,
            max_running: self
                .max_runs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            max_waiting: self.queue,
            max_wait: Duration::from_millis(self.queue_wait_ms),
            max_body_bytes,
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
