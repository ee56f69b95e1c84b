//! Serving a router over HTTP/1.1 with every connection bounded, for
//! servers that strangers reach:
//!
//! - at most [`ConnLimits::max_connections`] connections at once: past it
//!   the server stops accepting (the kernel's backlog holds the rest) until
//!   one ends;
//! - at most [`ConnLimits::max_per_address`] from one client address (an
//!   IPv6 client by its /64, as [`address_key`] keys the rate limits): a
//!   connection past it is closed as soon as it is accepted, so one client
//!   cannot take the whole of the first bound;
//! - a request's headers must arrive within
//!   [`ConnLimits::header_read_timeout`], which also bounds how long an
//!   idle keep-alive connection is kept (hyper starts the timer as soon as
//!   it waits for a request's first byte);
//! - an answer may wait at most [`ConnLimits::write_stall_timeout`] for a
//!   client that stopped reading: the connection is then closed and
//!   whatever it held is freed;
//! - a connection buffers at most [`MAX_BUFFER_BYTES`] of a request's head.
//!
//! Request bodies and the time a handler takes are each service's own
//! bounds (body limits, request timeouts), applied in its router.
//!
//! [`address_key`]: crate::address_key

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::address_key;
use crate::stall::WriteStall;

/// The most a connection buffers of a request's head, and of an answer
/// waiting to be written (hyper's smallest allowed buffer is 8 KiB):
/// headers past it are refused with 431. With the per-address bound, what
/// one client's unfinished heads can hold is 2 MiB.
pub const MAX_BUFFER_BYTES: usize = 16 * 1024;

/// How long the accept loop pauses after an error that is not about one
/// connection (out of descriptors, say), so that it does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// The bounds on a server's connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections at once, from every client together.
    pub max_connections: usize,
    /// Connections at once from one client address (IPv6: one /64). Behind
    /// a reverse proxy every connection comes from the proxy's address:
    /// set it to `max_connections` there.
    pub max_per_address: usize,
    /// How long a request's headers may take to arrive, and how long an
    /// idle connection is kept between requests.
    pub header_read_timeout: Duration,
    /// How long a write may wait for a client that reads nothing before the
    /// connection is closed.
    pub write_stall_timeout: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 1024,
            max_per_address: 128,
            header_read_timeout: Duration::from_secs(10),
            write_stall_timeout: Duration::from_secs(20),
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown`
/// completes; then accepts no more connections, lets those open finish the
/// exchange in flight (idle ones are closed at once) for at most `drain`,
/// and returns. Handlers can read the client's address as
/// `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send,
    drain: Duration,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let addresses = Addresses::default();
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_BUFFER_BYTES);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    if !is_connection_error(&error) {
                        tracing::warn!(%error, "accepting a connection");
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(slot) = addresses.take(peer.ip(), limits.max_per_address) else {
            tracing::debug!(
                peer = %peer.ip(),
                limit = limits.max_per_address,
                "refused a connection: the address has as many open as allowed"
            );
            continue;
        };
        // Small answers (an SSE event, a JSON error) go out at once.
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(WriteStall::new(stream, limits.write_stall_timeout));
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(request.map(Body::new))
        });
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, peer = %peer.ip(), "connection ended");
            }
            drop((permit, slot));
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "connections still open {} ms after the shutdown: closing them",
            drain.as_millis()
        );
    }
}

/// An error that concerns one connection (it went away before it was
/// accepted), after which the next accept may proceed at once.
fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Open connections per client address (keyed as the rate limits are).
#[derive(Default, Clone)]
struct Addresses(Arc<Mutex<HashMap<IpAddr, usize>>>);

impl Addresses {
    /// A place for one more connection from `ip`, if it has fewer than
    /// `max` open; the place is given back when the slot is dropped.
    fn take(&self, ip: IpAddr, max: usize) -> Option<AddressSlot> {
        let key = address_key(ip);
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(key).or_insert(0);
        if *count >= max.max(1) {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            addresses: self.clone(),
            key,
        })
    }
}

/// One open connection of an address.
struct AddressSlot {
    addresses: Addresses,
    key: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.addresses.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// The address of a connection, as a handler extracts it.
pub type Peer = ConnectInfo<SocketAddr>;

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn server(limits: ConnLimits) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new()
            .route("/", get(|| async { "hello" }))
            .route(
                "/peer",
                get(|ConnectInfo(peer): Peer| async move { peer.ip().to_string() }),
            )
            .route("/big", get(|| async { vec![b'x'; 64 << 20] }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(
            listener,
            router,
            limits,
            async move {
                let _ = stopped.await;
            },
            Duration::from_secs(1),
        ));
        (addr, stop)
    }

    /// Sends `request` and reads the whole answer (the server closes);
    /// empty when the server closed the connection instead.
    async fn exchange(addr: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut answer = Vec::new();
        if stream.write_all(request.as_bytes()).await.is_ok() {
            let _ = stream.read_to_end(&mut answer).await;
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// Whether a new connection is served (a plain `GET /` answered 200)
    /// within `within`, trying every 50 ms.
    async fn served_within(addr: SocketAddr, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            let answer = exchange(
                addr,
                "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
            )
            .await;
            if answer.starts_with("HTTP/1.1 200") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Whether the server closed `stream` (end of file or a reset) within
    /// `within`.
    async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
        let mut byte = [0u8; 1024];
        loop {
            match tokio::time::timeout(within, stream.read(&mut byte)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }

    #[tokio::test]
    async fn a_request_is_served_with_its_peer_address() {
        let (addr, _stop) = server(ConnLimits::default()).await;
        let answer = exchange(
            addr,
            "GET /peer HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("127.0.0.1"), "{answer}");
    }

    /// A client that sends half a request's headers is cut off once the
    /// header timeout has passed; so is one that sends nothing at all.
    #[tokio::test]
    async fn headers_that_do_not_arrive_in_time_close_the_connection() {
        let limits = ConnLimits {
            header_read_timeout: Duration::from_millis(300),
            ..ConnLimits::default()
        };
        let (addr, _stop) = server(limits).await;
        let mut half = TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        let mut silent = TcpStream::connect(addr).await.unwrap();
        assert!(closed_within(&mut half, Duration::from_secs(5)).await);
        assert!(closed_within(&mut silent, Duration::from_secs(5)).await);
    }

    /// Past the per-address bound a new connection is closed at once; when
    /// one of the open ones ends, a new one is served again.
    #[tokio::test]
    async fn an_address_gets_at_most_its_connections() {
        let limits = ConnLimits {
            max_per_address: 3,
            ..ConnLimits::default()
        };
        let (addr, _stop) = server(limits).await;
        let mut open = Vec::new();
        for _ in 0..3 {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            // A served connection answers; a refused one would be closed.
            stream
                .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let mut head = [0u8; 12];
            stream.read_exact(&mut head).await.unwrap();
            assert_eq!(&head, b"HTTP/1.1 200");
            open.push(stream);
        }
        let mut refused = TcpStream::connect(addr).await.unwrap();
        assert!(closed_within(&mut refused, Duration::from_secs(5)).await);
        drop(open.pop());
        // The server notices the close and frees the place.
        let served = served_within(addr, Duration::from_secs(5)).await;
        assert!(
            served,
            "a place freed by a closed connection is given again"
        );
    }

    /// Past the overall bound the server stops accepting: the next
    /// connection waits until one of the open ones ends, then is served.
    #[tokio::test]
    async fn past_the_overall_bound_a_connection_waits_for_a_place() {
        let limits = ConnLimits {
            max_connections: 2,
            ..ConnLimits::default()
        };
        let (addr, _stop) = server(limits).await;
        let first = TcpStream::connect(addr).await.unwrap();
        let _second = TcpStream::connect(addr).await.unwrap();
        let mut third = TcpStream::connect(addr).await.unwrap();
        third
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let waited =
            tokio::time::timeout(Duration::from_millis(300), third.read_to_end(&mut answer)).await;
        assert!(waited.is_err(), "answered past the bound: {answer:?}");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut answer))
            .await
            .expect("served once a place was free")
            .unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200"));
    }

    /// A client that asks for a large answer and reads none of it has its
    /// connection closed once writing has stalled for the limit.
    #[tokio::test]
    async fn an_answer_the_client_does_not_read_is_dropped_after_the_stall() {
        let limits = ConnLimits {
            write_stall_timeout: Duration::from_millis(300),
            max_per_address: 1,
            ..ConnLimits::default()
        };
        let (addr, _stop) = server(limits).await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        // Reads nothing for a while: the server's writes stall and it
        // closes the connection, which frees the address's only place.
        let served = served_within(addr, Duration::from_secs(10)).await;
        assert!(served, "the stalled connection was never closed");
        // What had been sent before the stall, then the end: not 64 MiB.
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        assert!(answer.len() < 64 << 20, "{} bytes", answer.len());
    }

    /// Headers larger than the buffer are refused rather than buffered.
    #[tokio::test]
    async fn oversized_headers_are_refused() {
        let (addr, _stop) = server(ConnLimits::default()).await;
        let big = "a".repeat(MAX_BUFFER_BYTES * 2);
        let answer = exchange(
            addr,
            &format!("GET / HTTP/1.1\r\nhost: x\r\nx-big: {big}\r\nconnection: close\r\n\r\n"),
        )
        .await;
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
            "{}",
            &answer[..answer.len().min(200)]
        );
    }
}
