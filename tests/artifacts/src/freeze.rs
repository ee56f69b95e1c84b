//! A server that stops answering, made deterministic: a loopback TCP proxy
//! in front of a real one that can be frozen. Frozen, it still accepts
//! connections and keeps those it has open, but forwards no byte either
//! way, as a hung host or a network partition leaves a client (no reset,
//! no close: only silence). Thawed, it forwards again, what it held first.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often a blocked pump looks at the flags.
const TICK: Duration = Duration::from_millis(10);

/// The proxy; it stops accepting, and its connections end, when dropped.
pub struct FreezingProxy {
    /// `127.0.0.1:PORT`, where it listens.
    addr: String,
    /// `host:port` of the server it forwards to.
    upstream: String,
    flags: Arc<Flags>,
}

#[derive(Default)]
struct Flags {
    frozen: AtomicBool,
    stopped: AtomicBool,
}

impl FreezingProxy {
    /// A proxy to `upstream` (`host:port`), on a free loopback port.
    pub fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let addr = listener.local_addr().unwrap().to_string();
        let flags = Arc::new(Flags::default());
        let (target, accepting) = (upstream.to_string(), flags.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopped.load(Ordering::Relaxed) {
                    break;
                }
                let (Ok(client), Ok(server)) = (client, TcpStream::connect(&target)) else {
                    continue;
                };
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (from, to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                    let flags = accepting.clone();
                    std::thread::spawn(move || pump(from, to, &flags));
                }
            }
        });
        FreezingProxy {
            addr,
            upstream: upstream.to_string(),
            flags,
        }
    }

    /// The proxy in front of the PostgreSQL server of `url`
    /// (`postgres://user@host:port/db`), and `url` through it.
    pub fn postgres(url: &str) -> (Self, String) {
        let host_port = url
            .split_once('@')
            .and_then(|(_, rest)| rest.split('/').next())
            .unwrap_or_else(|| panic!("no host:port in {url}"));
        let proxy = FreezingProxy::start(host_port);
        let routed = proxy.route(url);
        (proxy, routed)
    }

    /// `text` with the upstream's `host:port` replaced by the proxy's.
    pub fn route(&self, text: &str) -> String {
        text.replacen(&self.upstream, &self.addr, 1)
    }

    /// Stops forwarding, in both directions, on every connection.
    pub fn freeze(&self) {
        self.flags.frozen.store(true, Ordering::Relaxed);
    }

    /// Forwards again.
    pub fn thaw(&self) {
        self.flags.frozen.store(false, Ordering::Relaxed);
    }
}

impl Drop for FreezingProxy {
    fn drop(&mut self) {
        self.flags.stopped.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect(&self.addr);
    }
}

/// Copies `from` to `to` until either ends or the proxy stops, holding
/// what it read while frozen; then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream, flags: &Flags) {
    let _ = from.set_read_timeout(Some(TICK));
    let mut buf = [0u8; 16 * 1024];
    while !flags.stopped.load(Ordering::Relaxed) {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        while flags.frozen.load(Ordering::Relaxed) && !flags.stopped.load(Ordering::Relaxed) {
            std::thread::sleep(TICK);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
