//! Outbound connections for `wasi:http`: the host resolves a granted name
//! itself, refuses it if any address it resolves to is internal (loopback,
//! private, link-local and the like), and connects to the address it checked,
//! so a name cannot be re-pointed between the check and the connection. A
//! plugin reaches an internal address only when the operator granted that
//! address itself (`http:127.0.0.1:8080`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, WasiBody};

/// Where a request goes, as its URI names it.
pub(crate) struct Target {
    /// The host: a lowercase name, an IPv4 address or a bracketed IPv6 one.
    pub host: String,
    pub port: u16,
    pub https: bool,
}

/// The timeouts of one request's phases.
#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    pub between_bytes: Duration,
}

/// A name that resolved to an internal address.
pub(crate) struct Internal(pub IpAddr);

/// The addresses to connect to: an address literal as given (granted by
/// address), or what a name resolves to, refused if any of it is internal
/// and not `granted` itself.
pub(crate) async fn resolve(
    target: &Target,
    timeout: Duration,
    granted: impl Fn(IpAddr) -> bool,
) -> Result<Result<Vec<SocketAddr>, Internal>, Error> {
    if let Some(ip) = literal(&target.host) {
        return Ok(Ok(vec![SocketAddr::new(ip, target.port)]));
    }
    let lookup = tokio::net::lookup_host((target.host.as_str(), target.port));
    let addrs: Vec<SocketAddr> = tokio::time::timeout(timeout, lookup)
        .await
        .map_err(|_| Error::DnsTimeout)?
        .map_err(|e| Error::DnsError {
            rcode: Some(e.to_string()),
            info_code: None,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(Error::DestinationNotFound);
    }
    Ok(
        match addrs
            .iter()
            .find(|a| is_internal(a.ip()) && !granted(a.ip()))
        {
            Some(a) => Err(Internal(a.ip())),
            None => Ok(addrs),
        },
    )
}

/// The address a host literal names, if it is one.
fn literal(host: &str) -> Option<IpAddr> {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
    }
}

/// Whether `ip` is not a public unicast address: what a name granted to a
/// plugin must not lead to (loopback services, the local networks, link-local
/// cloud metadata endpoints). The host's own public addresses are not known
/// here, and are not refused.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return is_internal_v4(v4);
            }
            let first = v6.segments()[0];
            v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || first & 0xffc0 == 0xfec0 // site-local (deprecated)
                || (first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
                || (first == 0x2001 && v6.segments()[1] == 0) // Teredo (hides an IPv4 address)
                || (first == 0x64 && v6.segments()[1] == 0xff9b && v6.segments()[2] == 1) // local NAT64
        }
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_unspecified()
        || a == 0 // "this network"
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || (a == 100 && (b & 0xc0) == 64) // shared address space (carrier NAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b & 0xfe) == 18) // benchmarking
        || a >= 240 // reserved
}

/// The IPv4 address inside a mapped, compatible, NAT64 or 6to4 IPv6 address.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let compatible = s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified();
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    if let Some(v4) = v6.to_ipv4_mapped() {
        Some(v4)
    } else if compatible || nat64 {
        Some(tail)
    } else if s[0] == 0x2002 {
        // 6to4: the IPv4 address follows the prefix.
        Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ))
    } else {
        None
    }
}

/// The response and the future that reports the connection's end.
pub(crate) type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

/// Sends `request` over HTTP/1.1 to the first of `addrs` that accepts a
/// connection, over TLS for `https` (the server's name checked against the
/// web PKI roots).
pub(crate) async fn send(
    mut request: http::Request<WasiBody>,
    target: &Target,
    addrs: &[SocketAddr],
    timeouts: Timeouts,
) -> Result<Sent, Error> {
    let connect = async {
        let mut last = Error::DestinationUnavailable;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    last = Error::ConnectionRefused
                }
                Err(e) => last = Error::Connect(e),
            }
        }
        Err(last)
    };
    let stream = tokio::time::timeout(timeouts.connect, connect)
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    // The request line carries the path only: the authority is in `Host`.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| Error::HttpRequestUriInvalid)?;

    let (mut sender, connection) = if target.https {
        let name = match literal(&target.host) {
            Some(ip) => rustls::pki_types::ServerName::from(ip),
            None => rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(Error::InvalidDnsNameError)?,
        };
        let tls = tokio::time::timeout(timeouts.connect, tls().connect(name, stream))
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Tls)?;
        handshake(tls, timeouts.connect).await?
    } else {
        handshake(stream, timeouts.connect).await?
    };
    let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)??;
    let between = timeouts.between_bytes.max(Duration::from_millis(1));
    let response = response.map(|body| {
        Paced {
            body,
            between,
            timer: Box::pin(tokio::time::sleep(between)),
            _connection: connection,
        }
        .boxed_unsync()
    });
    // The response body holds the connection; its errors come with the
    // body's frames, so the end future has nothing more to report.
    let ended = async { Ok(()) };
    Ok((response, Box::new(ended)))
}

/// The TLS client: the web PKI's roots, built once.
fn tls() -> tokio_rustls::TlsConnector {
    tokio_rustls::TlsConnector::from(tls_config())
}

/// The host's TLS client settings for outbound connections: rustls with
/// ring and the web PKI's roots, built once.
pub(crate) fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
        )
    });
    config.clone()
}

/// The task driving a connection; aborted when the response body (and the
/// request being sent) are dropped, so a plugin dropping its response closes
/// the socket.
type Connection = AbortOnDrop;

pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The HTTP/1.1 handshake; the connection is driven by a task of its own
/// until the response body is read or dropped.
async fn handshake<S>(
    stream: S,
    timeout: Duration,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<WasiBody>,
        Connection,
    ),
    Error,
>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = tokio::time::timeout(
        timeout,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;
    Ok((sender, AbortOnDrop(tokio::spawn(connection))))
}

/// A response body whose frames must each arrive within `between` of the
/// previous one.
struct Paced {
    body: Incoming,
    between: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// Keeps the connection's task alive while the body is read.
    _connection: Connection,
}

impl Body for Paced {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let next = tokio::time::Instant::now() + self.between;
                self.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) if e.is_timeout() => {
                Poll::Ready(Some(Err(Error::HttpResponseTimeout)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip} is internal");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip} is public");
        }
    }

    #[test]
    fn literals_are_addresses() {
        assert_eq!(literal("127.0.0.1"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(literal("[::1]"), Some("::1".parse().unwrap()));
        assert_eq!(literal("localhost"), None);
        assert_eq!(literal("::1"), None, "an IPv6 host is bracketed in a URI");
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_internal() {
        let target = Target {
            host: "localhost".into(),
            port: 80,
            https: false,
        };
        match resolve(&target, Duration::from_secs(5), |_| false).await {
            Ok(Err(Internal(ip))) => assert!(ip.is_loopback(), "{ip}"),
            Ok(Ok(addrs)) => panic!("localhost passed as {addrs:?}"),
            Err(e) => panic!("{e}"),
        }
        // Granted by address, the loopback addresses are reached.
        match resolve(&target, Duration::from_secs(5), |ip| ip.is_loopback()).await {
            Ok(Ok(addrs)) => assert!(addrs.iter().all(|a| a.ip().is_loopback())),
            Ok(Err(Internal(ip))) => panic!("{ip} was granted"),
            Err(e) => panic!("{e}"),
        }
    }
}
