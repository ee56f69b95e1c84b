//! `wasi:http/outgoing-handler` through sandwit's gate: only the hosts and
//! ports granted to the plugin, a timeout that never passes the call's
//! deadline, and a capped response body. wasmtime-wasi-http does the rest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Limited};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::state::{MAX_DENIED_PER_CALL, MAX_REQUEST_TEXT, PluginEnv};

/// The `wasi:http` hooks of one plugin call.
pub(crate) struct HttpGate {
    env: Arc<PluginEnv>,
    deadline: Instant,
    /// Refused requests: (capability needed, request), at most
    /// [`MAX_DENIED_PER_CALL`], moved into the call's events when it ends...
    denied: Vec<(String, String)>,
    /// ...and how many more there were.
    dropped: usize,
}

impl HttpGate {
    pub(crate) fn new(env: Arc<PluginEnv>, deadline: Instant) -> Self {
        HttpGate {
            env,
            deadline,
            denied: Vec::new(),
            dropped: 0,
        }
    }

    /// The refused requests recorded, and how many more were dropped.
    pub(crate) fn take_denied(&mut self) -> (Vec<(String, String)>, usize) {
        (
            std::mem::take(&mut self.denied),
            std::mem::take(&mut self.dropped),
        )
    }

    /// The timeout for one phase of a request: the guest's, the policy's or
    /// the time left, whichever is least.
    fn timeout(&self, asked: Option<Duration>) -> Duration {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let t = self.env.services.http_limits.timeout().min(left);
        asked.map_or(t, |a| a.min(t))
    }
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        let uri = request.uri();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        if !self.env.grants.allows_http(&host, port) {
            if self.denied.len() >= MAX_DENIED_PER_CALL {
                self.dropped += 1;
                return Box::new(async { Err(Error::HttpRequestDenied) });
            }
            let shown = if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]")
            } else {
                host
            };
            // Cut before anything is copied: a URL may be megabytes long.
            let shown = crate::error::cut(shown, MAX_REQUEST_TEXT / 2);
            let uri = uri.to_string();
            let method = crate::error::cut(request.method().to_string(), 20);
            let uri = if uri.len() > MAX_REQUEST_TEXT / 2 {
                format!(
                    "{} ({} bytes)",
                    crate::error::cut(uri.clone(), MAX_REQUEST_TEXT / 2),
                    uri.len()
                )
            } else {
                uri
            };
            self.denied
                .push((format!("http:{shown}:{port}"), format!("{method} {uri}")));
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: Some(self.timeout(options.connect_timeout)),
            first_byte_timeout: Some(self.timeout(options.first_byte_timeout)),
            between_bytes_timeout: Some(self.timeout(options.between_bytes_timeout)),
        };
        let max = self.env.services.http_limits.max_response_bytes;
        Box::new(async move {
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            let response = response.map(|body| {
                Limited::new(body, max)
                    .map_err(move |e| match e.downcast::<Error>() {
                        Ok(e) => *e,
                        Err(_) => Error::HttpResponseBodySize(Some(max as u64)),
                    })
                    .boxed_unsync()
            });
            Ok((
                response,
                Box::new(io) as Box<dyn Future<Output = Result<(), Error>> + Send>,
            ))
        })
    }
}
