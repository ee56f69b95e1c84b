//! Outbound HTTP through `wasi:http/outgoing-handler`. Needs an
//! `http:<host>` or `http:<host>:<port>` capability for each host; the host
//! refuses every other request, caps response bodies and ends requests at the
//! call's deadline.
//!
//! ```no_run
//! # fn f() -> Result<(), sandwit_sdk::Error> {
//! let response = sandwit_sdk::http::Request::get("https://api.example.com/v1/items?q=1")
//!     .header("accept", "application/json")
//!     .send()?;
//! let text = response.text()?;
//! # Ok(()) }
//! ```

use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, Scheme};

use crate::Error;

/// The most bytes written to the request body per host call.
const WRITE_CHUNK: usize = 4096;
/// The most bytes read from the response body per host call.
const READ_CHUNK: u64 = 64 << 10;

/// An HTTP request being built.
#[derive(Debug, Clone)]
pub struct Request {
    method: &'static str,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// A response, with its whole body.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names in lowercase.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as UTF-8 text.
    pub fn text(&self) -> Result<String, Error> {
        String::from_utf8(self.body.clone())
            .map_err(|_| Error::failed("http: the response body is not UTF-8"))
    }

    /// The first value of header `name` (lowercase), as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

impl Request {
    /// A `GET` of `url` (`http://` or `https://`).
    pub fn get(url: &str) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` to `url`.
    pub fn post(url: &str) -> Self {
        Self::new("POST", url)
    }

    fn new(method: &'static str, url: &str) -> Self {
        Request {
            method,
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_bytes().to_vec()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sends the request and reads the whole response.
    pub fn send(self) -> Result<Response, Error> {
        let url = Url::parse(&self.url)?;
        let fields = Fields::from_list(&self.headers)
            .map_err(|e| Error::failed(format!("http: bad header: {e:?}")))?;
        let request = OutgoingRequest::new(fields);
        let method = match self.method {
            "POST" => Method::Post,
            _ => Method::Get,
        };
        let bad = |what: &str| Error::failed(format!("http: the host refused the {what}"));
        request.set_method(&method).map_err(|_| bad("method"))?;
        let scheme = if url.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        request
            .set_scheme(Some(&scheme))
            .map_err(|_| bad("scheme"))?;
        request
            .set_authority(Some(url.authority))
            .map_err(|_| bad("authority"))?;
        request
            .set_path_with_query(Some(url.path))
            .map_err(|_| bad("path"))?;
        let body = request.body().map_err(|_| bad("body"))?;
        let future = outgoing_handler::handle(request, None).map_err(|e| error(&url, e))?;
        write_body(body, &self.body)?;

        future.subscribe().block();
        let response = match future.get() {
            Some(Ok(Ok(r))) => r,
            Some(Ok(Err(e))) => return Err(error(&url, e)),
            Some(Err(())) | None => return Err(Error::failed("http: no response")),
        };
        let status = response.status();
        let headers = response.headers().entries();
        let incoming = response
            .consume()
            .map_err(|_| Error::failed("http: the body was already taken"))?;
        let stream = incoming
            .stream()
            .map_err(|_| Error::failed("http: the body was already taken"))?;
        let mut body = Vec::new();
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(wasip2::io::streams::StreamError::Closed) => break,
                Err(wasip2::io::streams::StreamError::LastOperationFailed(e)) => {
                    let detail = wasip2::http::types::http_error_code(&e)
                        .map(|code| describe(&code))
                        .unwrap_or_else(|| {
                            // The first line; the rest may be a host backtrace.
                            let text = e.to_debug_string();
                            text.lines().next().unwrap_or_default().to_string()
                        });
                    return Err(Error::failed(format!(
                        "http: reading the response from {} failed: {detail}",
                        url.authority
                    )));
                }
            }
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), Error> {
    {
        let out = body
            .write()
            .map_err(|_| Error::failed("http: the request body was already taken"))?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            out.blocking_write_and_flush(chunk)
                .map_err(|e| Error::failed(format!("http: writing the request body: {e:?}")))?;
        }
    }
    OutgoingBody::finish(body, None)
        .map_err(|e| Error::failed(format!("http: finishing the request body: {e:?}")))
}

/// An error code as a method error; a refusal stays `denied`.
fn error(url: &Url, e: ErrorCode) -> Error {
    match e {
        ErrorCode::HttpRequestDenied => Error::denied(format!(
            "http: the host did not grant a capability for {} (request one like `http:{}`)",
            url.authority, url.authority
        )),
        ErrorCode::DestinationIpProhibited => Error::denied(format!(
            "http: {} resolves to an internal address (loopback, private or link-local), \
             which the host reaches only when that address itself is granted",
            url.authority
        )),
        other => Error::failed(format!(
            "http: {} failed: {}",
            url.authority,
            describe(&other)
        )),
    }
}

fn describe(code: &ErrorCode) -> String {
    match code {
        ErrorCode::ConnectionTimeout => "connecting timed out".into(),
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => {
            "the response timed out".into()
        }
        ErrorCode::ConnectionRefused => "the connection was refused".into(),
        ErrorCode::HttpResponseBodySize(Some(n)) => {
            format!("the response body is larger than the host's limit of {n} bytes")
        }
        other => format!("{other:?}"),
    }
}

/// The parts of an `http(s)://authority/path?query` URL.
struct Url<'a> {
    https: bool,
    authority: &'a str,
    path: &'a str,
}

impl<'a> Url<'a> {
    fn parse(url: &'a str) -> Result<Self, Error> {
        let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(Error::failed(format!(
                "http: `{url}` is not an http:// or https:// URL"
            )));
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.is_empty() || authority.contains('@') {
            return Err(Error::failed(format!("http: `{url}` has no usable host")));
        }
        let path = if path.is_empty() { "/" } else { path };
        Ok(Url {
            https,
            authority,
            path,
        })
    }
}
