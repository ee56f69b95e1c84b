//! `sandwit-net-soak`: the network services under abuse. Starts a real
//! `sandwit serve` and a real `sandwit registry serve` on loopback and, for
//! a bounded time, attacks both the ways RELIABILITY.md lists, each family
//! from a loopback address of its own (127.0.0.2 and up; the per-address
//! connection bound is what keeps one client from taking them all):
//!
//! - slow headers: connections that send a header line a second, to both
//!   servers, reopened as soon as they are closed;
//! - uploads without a token: `POST /upload` form bodies with no boundary,
//!   streamed to the registry until it stops reading;
//! - unread answers: runs printing a million bytes to stdout and to stderr, as JSON
//!   and as an event stream, whose client never reads the answer;
//! - session floods: MCP `initialize` in a loop from one token.
//!
//! The first third of the time only the first two (clients without a
//! token) attack, so that what they cost the service is measured alone;
//! then all four.
//!
//! Meanwhile a well-behaved client on 127.0.0.1 runs `print(1+1)`, opens an
//! MCP session with a token of its own, and searches the registry, every
//! quarter second: each must succeed. Both servers' resident memory is
//! sampled throughout; its peak over the level after a warm-up, the
//! longest a slow-header connection stayed open, and the descriptors left
//! open afterwards must stay within the stated bounds. Exit status 0 only
//! when all of that holds.
//!
//! `scripts/soak` runs it after the sandbox soak; `scripts/test` a short one.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::json;

/// Attack both network services and check they hold.
#[derive(Parser)]
struct Args {
    /// The `sandwit` binary to serve with.
    #[arg(long, value_name = "FILE")]
    sandwit: PathBuf,
    /// Where the compiled-code cache is.
    #[arg(long, value_name = "DIR")]
    cache_dir: PathBuf,
    /// A directory for the servers' files (emptied first).
    #[arg(long, value_name = "DIR")]
    work_dir: PathBuf,
    /// How long the attack lasts, in seconds.
    #[arg(long, default_value_t = 120)]
    seconds: u64,
    /// How much the runtime service's resident memory may rise above its
    /// level after the warm-up while only clients without a token attack
    /// (the first third of the time), in MiB.
    #[arg(long, default_value_t = 16)]
    max_stranger_growth_mib: u64,
    /// How much the runtime service's resident memory may rise above its
    /// level after the warm-up, at its peak, in MiB. Clients with a token
    /// make runs that print 2 MB each: the same runs cost about as much
    /// when their clients read every answer.
    #[arg(long, default_value_t = 320)]
    max_service_growth_mib: u64,
    /// How much the registry's resident memory may rise above its level
    /// after the warm-up, at its peak, in MiB.
    #[arg(long, default_value_t = 16)]
    max_registry_growth_mib: u64,
    /// Print the figures as one JSON object.
    #[arg(long)]
    json: bool,
}

/// The servers' header timeout, shortened so that the soak sees many
/// rounds of slow clients cut off.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Their write-stall timeout, likewise.
const WRITE_STALL: Duration = Duration::from_secs(2);
/// Connections per address the servers allow (their default).
const PER_ADDRESS: usize = 128;

const ATTACK_TOKEN: &str = "soak-attack-token";
const GOOD_TOKEN: &str = "soak-good-token";

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.work_dir.exists() {
        std::fs::remove_dir_all(&args.work_dir)
            .with_context(|| format!("emptying {}", args.work_dir.display()))?;
    }
    std::fs::create_dir_all(args.work_dir.join("plugins"))?;
    let service = Server::service(&args)?;
    let registry = Server::registry(&args)?;
    let figures = soak(&args, &service, &registry)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures.json())?);
    } else {
        figures.print();
    }
    figures.check(&args)
}

/// A server process, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The connection flags both servers get.
fn connection_flags() -> Vec<String> {
    vec![
        "--header-timeout-ms".into(),
        HEADER_TIMEOUT.as_millis().to_string(),
        "--write-stall-ms".into(),
        WRITE_STALL.as_millis().to_string(),
        "--max-connections-per-address".into(),
        PER_ADDRESS.to_string(),
    ]
}

impl Server {
    fn service(args: &Args) -> anyhow::Result<Self> {
        let tokens = args.work_dir.join("tokens");
        std::fs::write(
            &tokens,
            format!(
                "attack user {}\ngood user {}\n",
                sha256_hex(ATTACK_TOKEN),
                sha256_hex(GOOD_TOKEN)
            ),
        )?;
        let mut command = Command::new(&args.sandwit);
        command
            // The small interpreter only: this soak is of the network
            // bounds, and scripts/env.sh names the scientific one.
            .env_remove("SANDWIT_SCIENTIFIC")
            .arg("--cache-dir")
            .arg(&args.cache_dir)
            .arg("--store")
            .arg(args.work_dir.join("store.db"))
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--queue",
                "64",
                "--plugins",
            ])
            .arg(args.work_dir.join("plugins"))
            .arg("--token-file")
            .arg(&tokens)
            .args(connection_flags());
        Self::start(command, "sandwit serve")
    }

    fn registry(args: &Args) -> anyhow::Result<Self> {
        let mut command = Command::new(&args.sandwit);
        command
            .args(["registry", "serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(args.work_dir.join("registry"))
            .args(connection_flags());
        Self::start(command, "sandwit registry serve")
    }

    fn start(mut command: Command, what: &str) -> anyhow::Result<Self> {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("piped")),
            &mut line,
        )?;
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .with_context(|| format!("{what} did not start: {line:?}"))?
            .parse()?;
        Ok(Server { child, addr })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A connection to `to` from the loopback address `127.0.0.<from>`.
fn connect(from: u8, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, from)), 0).into())?;
    socket.connect_timeout(&to.into(), Duration::from_secs(5))?;
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    Ok(stream)
}

/// One exchange on a new connection (`Connection: close`): the status, the
/// head and the body; `None` when the connection failed.
fn exchange(
    from: u8,
    to: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
    extra: &str,
) -> Option<(u16, String, String)> {
    let mut stream = connect(from, to).ok()?;
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {to}\r\nconnection: close\r\n{auth}{extra}\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.get(9..12)?.parse().ok()?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    Some((status, head.to_string(), body.to_string()))
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "sandwit-net-soak", "version": "0"}}})
    .to_string()
}

const MCP_ACCEPT: &str = "accept: application/json, text/event-stream\r\n";

/// Resident memory of `pid` in KiB, and its open descriptors.
fn sample(pid: u32) -> anyhow::Result<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    Ok((rss, fds))
}

/// What the soak saw.
#[derive(Default)]
struct Figures {
    seconds: u64,
    service_base_kib: u64,
    /// The service's peak while only clients without a token attacked.
    service_stranger_peak_kib: u64,
    service_peak_kib: u64,
    service_end_kib: u64,
    service_base_fds: usize,
    service_end_fds: usize,
    registry_base_kib: u64,
    registry_peak_kib: u64,
    registry_end_kib: u64,
    registry_base_fds: usize,
    registry_end_fds: usize,
    /// Slow-header connections the servers closed.
    slow_closed: u64,
    /// The longest one stayed open, in ms.
    slow_longest_ms: u64,
    /// Upload bodies without a token, and the most bytes one got written
    /// before the registry stopped reading (kernel buffers included).
    uploads: u64,
    upload_most_bytes: u64,
    /// Unread answers requested.
    unread: u64,
    /// `initialize` calls, and how many opened a session.
    sessions_tried: u64,
    sessions_opened: u64,
    /// The well-behaved client's exchanges and failures.
    good: u64,
    good_failures: Vec<String>,
}

/// Counters the attack threads share.
#[derive(Default)]
struct Counters {
    slow_closed: AtomicU64,
    slow_longest_ms: AtomicU64,
    uploads: AtomicU64,
    upload_most_bytes: AtomicU64,
    unread: AtomicU64,
    sessions_tried: AtomicU64,
    sessions_opened: AtomicU64,
}

fn soak(args: &Args, service: &Server, registry: &Server) -> anyhow::Result<Figures> {
    // Warm-up: the first runs compile and prepare the interpreter.
    for _ in 0..20 {
        good_run(service.addr).context("a run before the attack")?;
        good_search(registry.addr).context("a search before the attack")?;
    }
    std::thread::sleep(Duration::from_secs(1));
    let (service_base_kib, service_base_fds) = sample(service.pid())?;
    let (registry_base_kib, registry_base_fds) = sample(registry.pid())?;
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut threads = Vec::new();
    let spawn = |threads: &mut Vec<_>, f: Box<dyn Fn() + Send>| {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                f();
            }
        }));
    };
    // Slow headers: more connections than an address may hold, to each.
    for to in [service.addr, registry.addr] {
        for _ in 0..(PER_ADDRESS + 32) {
            let (c, stop) = (counters.clone(), stop.clone());
            spawn(&mut threads, Box::new(move || slow_headers(to, &c, &stop)));
        }
    }
    for _ in 0..16 {
        let (c, to) = (counters.clone(), registry.addr);
        spawn(&mut threads, Box::new(move || upload_without_token(to, &c)));
    }
    let mut figures = Figures {
        seconds: args.seconds,
        service_base_kib,
        service_peak_kib: service_base_kib,
        service_base_fds,
        registry_base_kib,
        registry_peak_kib: registry_base_kib,
        registry_base_fds,
        ..Figures::default()
    };
    // The first third: strangers only (no token), whose cost to the
    // service is measured on its own; then clients with a token too.
    let start = Instant::now();
    figures.watch(
        service,
        registry,
        start + Duration::from_secs(args.seconds / 3),
    )?;
    figures.service_stranger_peak_kib = figures.service_peak_kib;
    for streamed in [false, true] {
        for _ in 0..2 {
            let (c, to) = (counters.clone(), service.addr);
            spawn(
                &mut threads,
                Box::new(move || unread_answer(to, streamed, &c)),
            );
        }
    }
    for _ in 0..4 {
        let (c, to) = (counters.clone(), service.addr);
        spawn(&mut threads, Box::new(move || session_flood(to, &c)));
    }
    figures.watch(service, registry, start + Duration::from_secs(args.seconds))?;
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        let _ = thread.join();
    }
    // What the attackers left must be let go of within the servers'
    // timeouts.
    std::thread::sleep(HEADER_TIMEOUT + WRITE_STALL + Duration::from_secs(1));
    good_run(service.addr).context("a run after the attack")?;
    good_search(registry.addr).context("a search after the attack")?;
    (figures.service_end_kib, figures.service_end_fds) = sample(service.pid())?;
    (figures.registry_end_kib, figures.registry_end_fds) = sample(registry.pid())?;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    figures.slow_closed = load(&counters.slow_closed);
    figures.slow_longest_ms = load(&counters.slow_longest_ms);
    figures.uploads = load(&counters.uploads);
    figures.upload_most_bytes = load(&counters.upload_most_bytes);
    figures.unread = load(&counters.unread);
    figures.sessions_tried = load(&counters.sessions_tried);
    figures.sessions_opened = load(&counters.sessions_opened);
    Ok(figures)
}

/// A connection that sends a header line a second until the server closes
/// it (or the soak ends); from 127.0.0.2.
fn slow_headers(to: SocketAddr, counters: &Counters, stop: &AtomicBool) {
    let Ok(mut stream) = connect(2, to) else {
        std::thread::sleep(Duration::from_millis(100));
        return;
    };
    let opened = Instant::now();
    let mut line = 0u64;
    let mut sent = stream.write_all(b"GET /healthz HTTP/1.1\r\n").is_ok();
    while sent && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_secs(1));
        line += 1;
        sent = stream
            .write_all(format!("x-slow-{line}: {}\r\n", "a".repeat(64)).as_bytes())
            .is_ok()
            && !peer_closed(&stream);
    }
    if !sent {
        counters.slow_closed.fetch_add(1, Ordering::Relaxed);
        counters
            .slow_longest_ms
            .fetch_max(opened.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

/// Whether the peer closed `stream` (a read that does not wait sees the
/// end, or an error other than "nothing yet").
fn peer_closed(stream: &TcpStream) -> bool {
    let _ = stream.set_nonblocking(true);
    let mut byte = [0u8; 64];
    let closed = match (&*stream).read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = stream.set_nonblocking(false);
    closed
}

/// A form upload with no token and no boundary in its 64 MiB body,
/// written until the registry stops reading; from 127.0.0.3.
fn upload_without_token(to: SocketAddr, counters: &Counters) {
    let Ok(mut stream) = connect(3, to) else {
        std::thread::sleep(Duration::from_millis(100));
        return;
    };
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let head = format!(
        "POST /upload HTTP/1.1\r\nhost: {to}\r\nconnection: close\r\n\
         content-type: multipart/form-data; boundary=soakboundary\r\n\
         content-length: {}\r\n\r\n",
        64u64 << 20
    );
    counters.uploads.fetch_add(1, Ordering::Relaxed);
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![b'A'; 64 * 1024];
    let mut written = 0u64;
    while written < 64 << 20 && stream.write_all(&chunk).is_ok() {
        written += chunk.len() as u64;
    }
    counters
        .upload_most_bytes
        .fetch_max(written, Ordering::Relaxed);
}

/// A run printing a MiB to stdout and to stderr, whose answer is never
/// read: the client waits, then hangs up; from 127.0.0.4.
fn unread_answer(to: SocketAddr, streamed: bool, counters: &Counters) {
    let Ok(mut stream) = connect(4, to) else {
        std::thread::sleep(Duration::from_millis(100));
        return;
    };
    let body = json!({
        "code": "import sys\nsys.stdout.write('\\x01' * 1_000_000)\nsys.stderr.write('\\x02' * 1_000_000)",
        "chat_key": "soak-unread",
    })
    .to_string();
    let accept = if streamed {
        "accept: text/event-stream\r\n"
    } else {
        ""
    };
    let request = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: {to}\r\nauthorization: Bearer {ATTACK_TOKEN}\r\n{accept}\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    counters.unread.fetch_add(1, Ordering::Relaxed);
    if stream.write_all(request.as_bytes()).is_ok() {
        std::thread::sleep(WRITE_STALL * 3);
    }
}

/// MCP `initialize` calls from one token, never closed; from 127.0.0.5.
fn session_flood(to: SocketAddr, counters: &Counters) {
    counters.sessions_tried.fetch_add(1, Ordering::Relaxed);
    if let Some((200, _, _)) = exchange(
        5,
        to,
        "POST",
        "/mcp",
        Some(ATTACK_TOKEN),
        &initialize_body(),
        MCP_ACCEPT,
    ) {
        counters.sessions_opened.fetch_add(1, Ordering::Relaxed);
    } else {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn good_run(to: SocketAddr) -> anyhow::Result<()> {
    let body = json!({"code": "print(1+1)", "chat_key": "soak-good"}).to_string();
    match exchange(1, to, "POST", "/v1/runs", Some(GOOD_TOKEN), &body, "") {
        Some((200, _, answer)) if answer.contains("\"stdout\":\"2\\n\"") => Ok(()),
        Some((status, _, answer)) => bail!("{status}: {}", &answer[..answer.len().min(300)]),
        None => bail!("the connection failed"),
    }
}

fn good_session(to: SocketAddr) -> anyhow::Result<()> {
    let answer = exchange(
        1,
        to,
        "POST",
        "/mcp",
        Some(GOOD_TOKEN),
        &initialize_body(),
        MCP_ACCEPT,
    );
    let session = match answer {
        Some((200, head, body)) if body.contains("serverInfo") => head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_string())
            })
            .context("no Mcp-Session-Id")?,
        Some((status, _, body)) => bail!("{status}: {}", &body[..body.len().min(300)]),
        None => bail!("the connection failed"),
    };
    // Ended as a client should, so that its token's sessions stay few.
    let end = format!("mcp-session-id: {session}\r\n");
    match exchange(1, to, "DELETE", "/mcp", Some(GOOD_TOKEN), "", &end) {
        Some((status, _, _)) if status < 300 => Ok(()),
        Some((status, _, body)) => bail!("ending the session: {status}: {body}"),
        None => bail!("ending the session: the connection failed"),
    }
}

fn good_search(to: SocketAddr) -> anyhow::Result<()> {
    match exchange(1, to, "GET", "/v1/plugins?q=notes", None, "", "") {
        Some((200, _, _)) => Ok(()),
        Some((status, _, body)) => bail!("{status}: {}", &body[..body.len().min(300)]),
        None => bail!("the connection failed"),
    }
}

impl Figures {
    /// Until `deadline`: the well-behaved client's exchanges, every quarter
    /// second, and the servers' peak resident memory.
    fn watch(
        &mut self,
        service: &Server,
        registry: &Server,
        deadline: Instant,
    ) -> anyhow::Result<()> {
        while Instant::now() < deadline {
            let tick = Instant::now();
            for (what, result) in [
                ("run", good_run(service.addr)),
                ("mcp session", good_session(service.addr)),
                ("registry search", good_search(registry.addr)),
            ] {
                self.good += 1;
                if let Err(e) = result {
                    self.good_failures.push(format!("{what}: {e:#}"));
                }
            }
            self.service_peak_kib = self.service_peak_kib.max(sample(service.pid())?.0);
            self.registry_peak_kib = self.registry_peak_kib.max(sample(registry.pid())?.0);
            std::thread::sleep(Duration::from_millis(250).saturating_sub(tick.elapsed()));
        }
        Ok(())
    }

    fn mib(kib: u64) -> f64 {
        kib as f64 / 1024.0
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "seconds": self.seconds,
            "service": {"base_mib": Self::mib(self.service_base_kib),
                        "stranger_peak_mib": Self::mib(self.service_stranger_peak_kib),
                        "peak_mib": Self::mib(self.service_peak_kib),
                        "end_mib": Self::mib(self.service_end_kib),
                        "base_fds": self.service_base_fds, "end_fds": self.service_end_fds},
            "registry": {"base_mib": Self::mib(self.registry_base_kib),
                         "peak_mib": Self::mib(self.registry_peak_kib),
                         "end_mib": Self::mib(self.registry_end_kib),
                         "base_fds": self.registry_base_fds, "end_fds": self.registry_end_fds},
            "slow_headers_closed": self.slow_closed,
            "slow_headers_longest_ms": self.slow_longest_ms,
            "uploads_without_token": self.uploads,
            "upload_most_bytes_written": self.upload_most_bytes,
            "unread_answers": self.unread,
            "sessions_tried": self.sessions_tried,
            "sessions_opened": self.sessions_opened,
            "good_exchanges": self.good,
            "good_failures": self.good_failures,
        })
    }

    fn print(&self) {
        println!(
            "network soak: {} s of attack (the first third without a token)",
            self.seconds
        );
        println!(
            "  sandwit serve under clients without a token: peak +{:.1} MiB",
            Self::mib(
                self.service_stranger_peak_kib
                    .saturating_sub(self.service_base_kib)
            )
        );
        for (name, base, peak, end, fds0, fds1) in [
            (
                "sandwit serve",
                self.service_base_kib,
                self.service_peak_kib,
                self.service_end_kib,
                self.service_base_fds,
                self.service_end_fds,
            ),
            (
                "registry",
                self.registry_base_kib,
                self.registry_peak_kib,
                self.registry_end_kib,
                self.registry_base_fds,
                self.registry_end_fds,
            ),
        ] {
            println!(
                "  {name}: resident {:.1} MiB after warm-up, peak {:.1} (+{:.1}), end {:.1}; \
                 descriptors {fds0} -> {fds1}",
                Self::mib(base),
                Self::mib(peak),
                Self::mib(peak.saturating_sub(base)),
                Self::mib(end)
            );
        }
        println!(
            "  slow headers: {} connections cut off, the longest open {} ms",
            self.slow_closed, self.slow_longest_ms
        );
        println!(
            "  uploads without a token: {}, at most {} KiB written before the registry stopped reading",
            self.uploads,
            self.upload_most_bytes / 1024
        );
        println!("  unread answers: {}", self.unread);
        println!(
            "  MCP initialize from one token: {} tried, {} opened",
            self.sessions_tried, self.sessions_opened
        );
        println!(
            "  well-behaved client: {} exchanges, {} failed",
            self.good,
            self.good_failures.len()
        );
        for failure in self.good_failures.iter().take(10) {
            println!("    {failure}");
        }
    }

    fn check(&self, args: &Args) -> anyhow::Result<()> {
        let mut problems = Vec::new();
        let growth = |peak: u64, base: u64| peak.saturating_sub(base) / 1024;
        let strangers = growth(self.service_stranger_peak_kib, self.service_base_kib);
        if strangers > args.max_stranger_growth_mib {
            problems.push(format!(
                "sandwit serve grew {strangers} MiB under clients without a token, more than {}",
                args.max_stranger_growth_mib
            ));
        }
        if growth(self.service_peak_kib, self.service_base_kib) > args.max_service_growth_mib {
            problems.push(format!(
                "sandwit serve grew {} MiB, more than {}",
                growth(self.service_peak_kib, self.service_base_kib),
                args.max_service_growth_mib
            ));
        }
        if growth(self.registry_peak_kib, self.registry_base_kib) > args.max_registry_growth_mib {
            problems.push(format!(
                "the registry grew {} MiB, more than {}",
                growth(self.registry_peak_kib, self.registry_base_kib),
                args.max_registry_growth_mib
            ));
        }
        // A slow client is cut off at the header timeout; the soak notices
        // at its next line, a second later, or later still on a loaded
        // machine (hundreds of attack threads on two cores). Without the
        // timeout they stay open for the whole soak.
        let longest = HEADER_TIMEOUT + Duration::from_secs(5);
        if self.slow_closed == 0 || self.slow_longest_ms > longest.as_millis() as u64 {
            problems.push(format!(
                "slow-header connections: {} cut off, the longest open {} ms (bound {} ms)",
                self.slow_closed,
                self.slow_longest_ms,
                longest.as_millis()
            ));
        }
        // What a registry that reads no upload for a stranger lets in: its
        // few KiB, and the kernel's socket buffers.
        if self.upload_most_bytes >= 32 << 20 {
            problems.push(format!(
                "an upload without a token got {} KiB written",
                self.upload_most_bytes / 1024
            ));
        }
        if !self.good_failures.is_empty() {
            problems.push(format!(
                "the well-behaved client failed {} time(s) of {}",
                self.good_failures.len(),
                self.good
            ));
        }
        for (name, base, end) in [
            ("sandwit serve", self.service_base_fds, self.service_end_fds),
            (
                "the registry",
                self.registry_base_fds,
                self.registry_end_fds,
            ),
        ] {
            if end > base + 16 {
                problems.push(format!(
                    "{name} holds {end} descriptors after the attack, {base} before"
                ));
            }
        }
        if problems.is_empty() {
            println!("network soak: every bound held");
            Ok(())
        } else {
            bail!("network soak: {}", problems.join("; "))
        }
    }
}
