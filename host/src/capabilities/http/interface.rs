//! `wasi:http/outgoing-handler` through sandwit's gate: only the hosts and
//! ports granted to the plugin, a timeout that never passes the call's
//! deadline, and a capped response body; a name granted must not resolve to
//! an internal address ([`crate::capabilities::http::outbound`] connects). wasmtime-wasi-http
//! does the rest.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Limited};
use sandwit_contract::capability::Capability;
use tracing::Instrument;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use crate::capabilities::env::{MAX_DENIED_PER_CALL, MAX_REQUEST_TEXT, PluginEnv};
use crate::capabilities::http::outbound::{self, Internal, Target, Timeouts};
use crate::runtime::guard::FuelTab;

/// The context of `wasi:http` in a plugin's store: wasmtime's HTTP context
/// and sandwit's gate for the current call.
pub(crate) struct PluginHttp {
    ctx: WasiHttpCtx,
    pub(crate) gate: HttpGate,
}

impl PluginHttp {
    pub(crate) fn new(env: Arc<PluginEnv>, deadline: Instant, tab: FuelTab) -> Self {
        PluginHttp {
            ctx: WasiHttpCtx::new(),
            gate: HttpGate::new(env, deadline, tab),
        }
    }

    /// A gate for the next call of the same instance, with its deadline.
    pub(crate) fn begin_call(&mut self, deadline: Instant) {
        self.gate = HttpGate::new(self.gate.env.clone(), deadline, self.gate.tab.clone());
    }

    /// The view wasmtime-wasi-http works through, on the store's `table`.
    pub(crate) fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView {
            ctx: &mut self.ctx,
            table,
            hooks: &mut self.gate,
        }
    }
}

/// Adds `wasi:http` (only HTTP: the rest of WASI is linked closed on its
/// own) to a plugin linker.
pub(crate) fn add_to_linker<T: WasiHttpView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}

/// The `wasi:http` hooks of one plugin call.
pub(crate) struct HttpGate {
    env: Arc<PluginEnv>,
    deadline: Instant,
    /// Refused requests, shared with the requests in flight (a name is
    /// refused after it resolves).
    denied: Arc<Mutex<Denied>>,
    /// Where the bytes of request and response bodies are charged.
    tab: FuelTab,
}

/// Refused requests: (capability needed, request), at most
/// [`MAX_DENIED_PER_CALL`], moved into the call's events when it ends, and
/// how many more there were.
#[derive(Default)]
struct Denied {
    recorded: Vec<(String, String)>,
    dropped: usize,
}

impl Denied {
    /// Records a refusal, described from at most [`MAX_REQUEST_TEXT`]
    /// bytes of the request (a URI may be 64 KiB long): nothing longer is
    /// copied.
    fn record(&mut self, capability: String, request: &http::Request<WasiBody>) {
        if self.recorded.len() >= MAX_DENIED_PER_CALL {
            self.dropped += 1;
            return;
        }
        let uri = request.uri();
        let keep = MAX_REQUEST_TEXT / 2;
        let authority = uri.authority().map_or("", |a| a.as_str());
        let path = uri.path_and_query().map_or("", |p| p.as_str());
        let authority_kept = &authority[..authority.floor_char_boundary(keep)];
        let path_kept = &path[..path.floor_char_boundary(keep - authority_kept.len())];
        let scheme = uri.scheme_str().unwrap_or("http");
        let scheme = &scheme[..scheme.floor_char_boundary(10)];
        let mut text = format!(
            "{} {scheme}://{authority_kept}{path_kept}",
            sandwit_contract::text::cut(request.method().to_string(), 20)
        );
        let whole = scheme.len() + 3 + authority.len() + path.len();
        if authority_kept.len() + path_kept.len() < authority.len() + path.len() {
            text.push_str(&format!("… ({whole} bytes)"));
        }
        let capability = sandwit_contract::text::cut(capability, MAX_REQUEST_TEXT / 2 + 20);
        self.recorded.push((capability, text));
    }
}

impl HttpGate {
    pub(crate) fn new(env: Arc<PluginEnv>, deadline: Instant, tab: FuelTab) -> Self {
        HttpGate {
            env,
            deadline,
            denied: Arc::default(),
            tab,
        }
    }

    /// The refused requests recorded, and how many more were dropped.
    pub(crate) fn take_denied(&mut self) -> (Vec<(String, String)>, usize) {
        let mut denied = self.denied.lock().unwrap_or_else(|e| e.into_inner());
        (
            std::mem::take(&mut denied.recorded),
            std::mem::take(&mut denied.dropped),
        )
    }

    /// Whether request and response bodies are charged to `tab`.
    #[cfg(test)]
    pub(crate) fn charges(&self, tab: &FuelTab) -> bool {
        self.tab.same_as(tab)
    }

    /// The timeout for one phase of a request: the guest's, the policy's or
    /// the time left, whichever is least.
    fn timeout(&self, asked: Option<Duration>) -> Duration {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let t = self.env.services.http_limits.timeout().min(left);
        asked.map_or(t, |a| a.min(t))
    }
}

type SendFuture = Box<dyn Future<Output = Result<outbound::Sent, Error>> + Send>;

/// `host` as a capability shows it: an IPv6 address bracketed.
fn shown(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        let uri = request.uri();
        // `user@host`: the connection would go to `host`, but wasmtime sends
        // the whole authority as the `Host` header.
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Box::new(async { Err(Error::HttpRequestUriInvalid) });
        }
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        // Cut before anything is copied. No grant matches a host this long
        // (DNS names are at most 253 bytes).
        let host = uri.host().unwrap_or_default();
        let host =
            sandwit_contract::text::cut(host[..host.floor_char_boundary(260)].to_string(), 259)
                .to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        // The trace names the grant, the operator's words: the host itself
        // may be the plugin's or the code's (a wildcard grant), and so
        // secret.
        let grant = self.env.grants.iter().find_map(|c| match c {
            Capability::Http(target) if target.matches(&host, port) => Some(c.to_string()),
            _ => None,
        });
        let span = crate::trace::http_request(grant.as_deref());
        if grant.is_none() {
            crate::trace::host_call_ended(&span, "denied");
            let mut denied = self.denied.lock().unwrap_or_else(|e| e.into_inner());
            denied.record(format!("http:{}:{port}", shown(&host)), &request);
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let options = options.unwrap_or_default();
        let timeouts = Timeouts {
            connect: self.timeout(options.connect_timeout),
            first_byte: self.timeout(options.first_byte_timeout),
            between_bytes: self.timeout(options.between_bytes_timeout),
        };
        let max = self.env.services.http_limits.max_response_bytes;
        let (denied, env) = (self.denied.clone(), self.env.clone());
        let target = Target { host, port, https };
        let (sent, received) = (self.tab.clone(), self.tab.clone());
        let request = request.map(|body| charged(body, sent));
        let send = async move {
            // An internal address is reached only if granted itself: the
            // plugin could name it in its URL then.
            let granted = |ip: IpAddr| env.grants.allows_http(&shown(&ip.to_string()), port);
            let addrs = match outbound::resolve(&target, timeouts.connect, granted).await? {
                Ok(addrs) => addrs,
                Err(Internal(ip)) => {
                    let needed = format!("http:{}:{port}", shown(&ip.to_string()));
                    let mut denied = denied.lock().unwrap_or_else(|e| e.into_inner());
                    denied.record(needed, &request);
                    return Err(Error::DestinationIpProhibited);
                }
            };
            let (response, io) = outbound::send(request, &target, &addrs, timeouts).await?;
            let response = response.map(|body| {
                let body = Limited::new(body, max)
                    .map_err(move |e| match e.downcast::<Error>() {
                        Ok(e) => *e,
                        Err(_) => Error::HttpResponseBodySize(Some(max as u64)),
                    })
                    .boxed_unsync();
                charged(body, received)
            });
            Ok((response, io))
        };
        // The span lasts until the response's head arrives.
        Box::new(async move {
            let sent = send.instrument(span.clone()).await;
            let outcome = match &sent {
                Ok(_) => "ok",
                Err(Error::DestinationIpProhibited) => "denied",
                Err(_) => "failed",
            };
            crate::trace::host_call_ended(&span, outcome);
            sent
        })
    }
}

/// `body`, each data frame's bytes charged to `tab`.
fn charged(body: WasiBody, tab: FuelTab) -> WasiBody {
    body.map_frame(move |frame| {
        if let Some(data) = frame.data_ref() {
            tab.charge(data.len());
        }
        frame
    })
    .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::config::PluginConfig;
    use crate::capabilities::env::Services;
    use sandwit_contract::capability::Grants;

    fn gate(grants: &[&str]) -> HttpGate {
        gate_with(grants, Services::for_tests(), Duration::from_secs(5))
    }

    /// A gate for plugin `p` granted `grants`, on `services`, whose call
    /// has `left` before its deadline.
    fn gate_with(grants: &[&str], services: Services, left: Duration) -> HttpGate {
        let caps: Vec<_> = grants.iter().map(|g| g.parse().unwrap()).collect();
        let env = PluginEnv::new(
            "p",
            Grants::effective(&caps, &caps),
            PluginConfig::default(),
            services,
        );
        HttpGate::new(env, Instant::now() + left, FuelTab::default())
    }

    async fn send(gate: &mut HttpGate, uri: &str) -> Result<outbound::Sent, Error> {
        let body = http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        let request = http::Request::get(uri).body(body).unwrap();
        Box::into_pin(gate.send_request(request, None, Box::new(async { Ok(()) }))).await
    }

    #[tokio::test]
    async fn user_info_in_the_authority_is_refused() {
        let mut gate = gate(&["http:127.0.0.1:*"]);
        let err = send(&mut gate, "http://user@127.0.0.1:9/")
            .await
            .err()
            .unwrap();
        assert!(matches!(err, Error::HttpRequestUriInvalid), "{err}");
    }

    #[tokio::test]
    async fn refusals_are_described_briefly_and_capped() {
        let mut gate = gate(&[]);
        let uri = format!("http://refused.example/{}", "p".repeat(60_000));
        for _ in 0..MAX_DENIED_PER_CALL + 5 {
            let err = send(&mut gate, &uri).await.err().unwrap();
            assert!(matches!(err, Error::HttpRequestDenied), "{err}");
        }
        let (denied, dropped) = gate.take_denied();
        assert_eq!((denied.len(), dropped), (MAX_DENIED_PER_CALL, 5));
        let (capability, request) = &denied[0];
        assert_eq!(capability, "http:refused.example:80");
        assert!(
            request.starts_with("GET http://refused.example/ppp"),
            "{request}"
        );
        assert!(request.ends_with("… (60023 bytes)"), "{request}");
        assert!(request.len() <= MAX_REQUEST_TEXT + 40, "{}", request.len());
    }

    #[tokio::test]
    async fn a_charged_body_charges_every_byte() {
        let tab = FuelTab::default();
        let body = http_body_util::Full::new(bytes::Bytes::from(vec![7u8; 1000]))
            .map_err(|never| match never {})
            .boxed_unsync();
        let bytes = charged(body, tab.clone())
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(bytes.len(), 1000);
        assert_eq!(tab.take(), 1000);
    }

    /// A loopback HTTP server that answers every request with `body`, and
    /// counts the connections it accepted.
    struct Server {
        port: u16,
        connections: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Server {
        fn start(body: &'static str) -> Self {
            use std::io::{Read, Write};
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counted = connections.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut stream) = stream else { continue };
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let mut head = Vec::new();
                    let mut byte = [0u8];
                    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                        head.push(byte[0]);
                    }
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes());
                }
            });
            Server { port, connections }
        }

        fn connections(&self) -> usize {
            self.connections.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    #[tokio::test]
    async fn a_host_address_or_port_not_granted_is_refused_before_any_connection() {
        let server = Server::start("hello");
        let port = server.port;
        let mut refusing = gate(&["http:example.com", &format!("http:localhost:{port}")]);
        let refused = [
            // Granting a name grants none of its addresses.
            (
                format!("http://127.0.0.1:{port}/"),
                format!("http:127.0.0.1:{port}"),
            ),
            (
                format!("http://[::1]:{port}/"),
                format!("http:[::1]:{port}"),
            ),
            // `http:example.com` is ports 80 and 443 only.
            (
                format!("http://example.com:{port}/"),
                format!("http:example.com:{port}"),
            ),
            // The host is matched and named lowercase.
            (
                "https://EXAMPLE.com:8443/x".into(),
                "http:example.com:8443".into(),
            ),
            (
                "http://api.example.com/".into(),
                "http:api.example.com:80".into(),
            ),
        ];
        for (uri, _) in &refused {
            let err = send(&mut refusing, uri).await.err().unwrap();
            assert!(matches!(err, Error::HttpRequestDenied), "{uri}: {err}");
        }
        let (denied, dropped) = refusing.take_denied();
        let needed: Vec<&str> = denied.iter().map(|(c, _)| c.as_str()).collect();
        let wanted: Vec<&str> = refused.iter().map(|(_, c)| c.as_str()).collect();
        assert_eq!((needed, dropped), (wanted, 0));
        assert_eq!(server.connections(), 0);

        // The same server, its address granted: reached (so a connection
        // above would have been counted).
        let mut granted = gate(&[&format!("http:127.0.0.1:{port}")]);
        let (response, _) = send(&mut granted, &format!("http://127.0.0.1:{port}/"))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"hello");
        assert_eq!(server.connections(), 1);
        assert_eq!(granted.take_denied(), (vec![], 0));
    }

    #[tokio::test]
    async fn a_granted_name_that_resolves_to_an_internal_address_is_never_connected() {
        let server = Server::start("hello");
        let port = server.port;
        let uri = format!("http://localhost:{port}/hello");
        let mut refusing = gate(&[&format!("http:localhost:{port}")]);
        let err = send(&mut refusing, &uri).await.err().unwrap();
        assert!(matches!(err, Error::DestinationIpProhibited), "{err}");
        assert_eq!(server.connections(), 0);
        // The refusal names the address the operator would have to grant.
        let (denied, _) = refusing.take_denied();
        let [(needed, request)] = &denied[..] else {
            panic!("{denied:?}")
        };
        assert!(
            [
                format!("http:127.0.0.1:{port}"),
                format!("http:[::1]:{port}")
            ]
            .contains(needed),
            "{needed}"
        );
        assert_eq!(request, &format!("GET {uri}"));

        // Its loopback addresses granted too, the name is reached.
        let mut granted = gate(&[
            &format!("http:localhost:{port}"),
            &format!("http:127.0.0.1:{port}"),
            &format!("http:[::1]:{port}"),
        ]);
        let (response, _) = send(&mut granted, &uri).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(server.connections(), 1);
    }

    #[tokio::test]
    async fn a_response_body_is_cut_at_the_cap() {
        let server = Server::start("0123456789abcdef");
        let port = server.port;
        let mut services = Services::for_tests();
        services.http_limits.max_response_bytes = 10;
        let grant = format!("http:127.0.0.1:{port}");
        let mut gate = gate_with(&[&grant], services, Duration::from_secs(5));
        let (response, _) = send(&mut gate, &format!("http://127.0.0.1:{port}/"))
            .await
            .unwrap();
        let err = response.into_body().collect().await.err().unwrap();
        assert!(
            matches!(err, Error::HttpResponseBodySize(Some(10))),
            "{err}"
        );
    }

    #[test]
    fn a_requests_timeouts_never_pass_the_calls_deadline() {
        let mut services = Services::for_tests();
        services.http_limits.timeout_ms = 10_000;
        let near = gate_with(&[], services.clone(), Duration::from_secs(2));
        for asked in [None, Some(Duration::from_secs(3600))] {
            let t = near.timeout(asked);
            assert!(t <= Duration::from_secs(2) && !t.is_zero(), "{t:?}");
        }
        assert_eq!(
            near.timeout(Some(Duration::from_millis(100))),
            Duration::from_millis(100)
        );
        // The policy's timeout bounds what the guest asks for.
        services.http_limits.timeout_ms = 50;
        let far = gate_with(&[], services.clone(), Duration::from_secs(3600));
        assert_eq!(far.timeout(None), Duration::from_millis(50));
        assert_eq!(
            far.timeout(Some(Duration::from_secs(1))),
            Duration::from_millis(50)
        );
        // Past the deadline, nothing is left.
        let over = gate_with(&[], services, Duration::ZERO);
        assert_eq!(over.timeout(None), Duration::ZERO);
    }
}
