//! Outbound HTTP the host makes on a tool source's behalf (a call of an
//! OpenAPI operation, the fetch of its document): the same connections as a
//! plugin's (`outbound`: the host resolves the name, refuses an internal
//! address unless it was written as one, connects to what it checked, no
//! redirects), to one origin only, under the policy's `[http]` timeout and
//! body cap. The caller's deadline bounds it too: dropping the future closes
//! the connection.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use sandwit_contract::policy::HttpLimits;
use wasmtime_wasi_http::Error;

use super::outbound::{self, Internal, Target, Timeouts};

/// Requests to one origin (scheme, host, port).
#[derive(Clone)]
pub(crate) struct HostHttp {
    target: std::sync::Arc<Target>,
    /// `host[:port]` as the `Host` header gives it.
    authority: String,
    limits: HttpLimits,
}

/// A response: its status, content type and whole body.
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    /// `Location`, for a redirect (never followed).
    pub location: Option<String>,
    pub body: Bytes,
}

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpFailure {
    /// The name resolves to an internal address the operator did not write.
    #[error(
        "`{host}` resolves to the internal address {ip}, which is reached only when written as \
         an address (`http://{ip}:PORT`)"
    )]
    Internal { host: String, ip: std::net::IpAddr },
    /// The body was larger than the policy's cap.
    #[error("the response body is more than the limit of {0} bytes (`[http] max_response_bytes`)")]
    TooLarge(usize),
    /// Anything else: DNS, connection, TLS, timeouts.
    #[error("{0}")]
    Failed(String),
}

impl HostHttp {
    /// Requests to the origin of `url` (`http://` or `https://`, a host, an
    /// optional port; the path is the caller's), and the URL's path without
    /// a trailing `/`.
    pub(crate) fn for_url(url: &str, limits: HttpLimits) -> Result<(Self, String), String> {
        let (https, rest) = match url.split_once("://") {
            Some(("http", rest)) => (false, rest),
            Some(("https", rest)) => (true, rest),
            _ => return Err(format!("`{url}` is not an http:// or https:// URL")),
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("`{url}` names no host, or a user"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (
                host,
                port.parse::<u16>()
                    .map_err(|_| format!("`{url}`: `{port}` is not a port"))?,
            ),
            _ => (authority, if https { 443 } else { 80 }),
        };
        let target = Target {
            host: host.to_ascii_lowercase(),
            port,
            https,
        };
        let http = HostHttp {
            target: std::sync::Arc::new(target),
            authority: authority.to_ascii_lowercase(),
            limits,
        };
        Ok((http, path.trim_end_matches('/').to_string()))
    }

    /// The origin's host, as the URL names it (lower case).
    pub(crate) fn host(&self) -> &str {
        &self.target.host
    }

    /// The addresses to connect to: the host resolved here, refused if any
    /// address is internal and the URL did not name it as one.
    pub(crate) async fn addresses(&self) -> Result<Vec<SocketAddr>, HttpFailure> {
        match outbound::resolve(&self.target, self.limits.timeout(), |_| false).await {
            Ok(Ok(addrs)) => Ok(addrs),
            Ok(Err(Internal(ip))) => Err(HttpFailure::Internal {
                host: self.target.host.clone(),
                ip,
            }),
            Err(e) => Err(HttpFailure::Failed(describe(&e, &self.origin()))),
        }
    }

    /// `scheme://host:port`, for messages.
    pub(crate) fn origin(&self) -> String {
        let scheme = if self.target.https { "https" } else { "http" };
        format!("{scheme}://{}", self.authority)
    }

    /// Sends `method path_and_query` with `headers` and `body` to the
    /// origin, and reads the whole response within the body cap.
    pub(crate) async fn send(
        &self,
        method: http::Method,
        path_and_query: &str,
        headers: http::HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Reply, HttpFailure> {
        let timeout = self.limits.timeout();
        let timeouts = Timeouts {
            connect: timeout,
            first_byte: timeout,
            between_bytes: timeout,
        };
        let failed = |e: Error| HttpFailure::Failed(describe(&e, &self.origin()));
        let addrs = self.addresses().await?;
        let body = Full::new(body.unwrap_or_default())
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut request = http::Request::builder()
            .method(method)
            .uri(path_and_query)
            .body(body)
            .map_err(|e| HttpFailure::Failed(format!("the request is malformed: {e}")))?;
        *request.headers_mut() = headers;
        let host = http::HeaderValue::from_str(&self.authority)
            .map_err(|_| HttpFailure::Failed("the host is not a header value".into()))?;
        request.headers_mut().insert(http::header::HOST, host);
        let (response, _) = outbound::send(request, &self.target, &addrs, timeouts)
            .await
            .map_err(failed)?;
        let (parts, body) = response.into_parts();
        let max = self.limits.max_response_bytes;
        let body = Limited::new(body, max)
            .collect()
            .await
            .map_err(|e| match e.downcast::<Error>() {
                Ok(e) => failed(*e),
                Err(_) => HttpFailure::TooLarge(max),
            })?
            .to_bytes();
        let header = |name: http::HeaderName| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Ok(Reply {
            status: parts.status.as_u16(),
            content_type: header(http::header::CONTENT_TYPE),
            location: header(http::header::LOCATION),
            body,
        })
    }
}

/// What went wrong, in words.
fn describe(e: &Error, origin: &str) -> String {
    match e {
        Error::DnsTimeout => format!("{origin}: its name did not resolve in time"),
        Error::DnsError { .. } | Error::DestinationNotFound => {
            format!("{origin}: its name does not resolve")
        }
        Error::ConnectionRefused => format!("{origin} refused the connection"),
        Error::ConnectionTimeout => format!("{origin} did not accept a connection in time"),
        Error::ConnectionReadTimeout | Error::HttpResponseTimeout => {
            format!("{origin} did not answer in time (`[http] timeout_ms`)")
        }
        other => format!("{origin}: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HttpLimits {
        HttpLimits {
            timeout_ms: 5_000,
            max_response_bytes: 64,
        }
    }

    #[test]
    fn a_url_gives_its_origin_and_path() {
        let (http, path) = HostHttp::for_url("http://127.0.0.1:8000/api/", limits()).unwrap();
        assert_eq!(http.origin(), "http://127.0.0.1:8000");
        assert_eq!(path, "/api");
        let (http, path) = HostHttp::for_url("https://Shop.Example", limits()).unwrap();
        assert_eq!(http.origin(), "https://shop.example");
        assert_eq!(http.target.port, 443);
        assert_eq!(path, "");
        for bad in ["ftp://x", "http://user@x/", "http://x:notaport/"] {
            assert!(HostHttp::for_url(bad, limits()).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_and_the_address_is_reached() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let body = "x".repeat(100);
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            for stream in listener.incoming().take(2) {
                let mut stream = stream.unwrap();
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body.as_bytes());
            }
        });
        let (by_name, _) =
            HostHttp::for_url(&format!("http://localhost:{port}"), limits()).unwrap();
        let err = by_name
            .send(http::Method::GET, "/", http::HeaderMap::new(), None)
            .await
            .err()
            .unwrap();
        assert!(matches!(err, HttpFailure::Internal { .. }), "{err}");
        // Written as an address, it is reached; its 100-byte body is over
        // the 64-byte cap.
        let (by_address, _) =
            HostHttp::for_url(&format!("http://127.0.0.1:{port}"), limits()).unwrap();
        let err = by_address
            .send(http::Method::GET, "/", http::HeaderMap::new(), None)
            .await
            .err()
            .unwrap();
        assert!(matches!(err, HttpFailure::TooLarge(64)), "{err}");
    }
}
