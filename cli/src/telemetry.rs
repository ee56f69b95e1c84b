//! The command's `tracing` subscriber: its log on stderr, and with an OTLP
//! endpoint the host's trace spans (`sandwit::trace`) exported over
//! OTLP/HTTP in protobuf, batched, flushed when the command ends.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

/// The service name of the exported spans without `OTEL_SERVICE_NAME`.
const SERVICE_NAME: &str = "sandwit";
/// The longest one export to the collector may take, and the batch's
/// flush when the command ends waits.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the trace goes.
#[derive(Args)]
pub struct OtlpArgs {
    /// Export traces over OTLP/HTTP (protobuf) to the collector at URL, its
    /// base URL (e.g. http://127.0.0.1:4318; `/v1/traces` is added): a
    /// trace per run, with a span per plugin method call, per host call a
    /// plugin makes (store, config, chat, HTTP) and per execution control
    /// decision. Spans carry plugin and method names, kinds, outcomes,
    /// fuel and decisions, never arguments, values, URLs or secrets.
    /// OTEL_SERVICE_NAME names the service [default: sandwit];
    /// OTEL_EXPORTER_OTLP_HEADERS adds headers. See docs/SERVICE.md,
    /// "Traces" [default: none, no traces].
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "OTEL_EXPORTER_OTLP_ENDPOINT"
    )]
    otlp_endpoint: Option<String>,
}

/// The subscriber's exporter, if any: dropping it flushes the spans not
/// yet sent.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs the command's subscriber: the log at SANDWIT_LOG's level
/// (else `default_log`) on stderr, and the OTLP exporter if `args` names
/// a collector.
pub fn init(args: &OtlpArgs, default_log: &str) -> anyhow::Result<Telemetry> {
    let log_filter =
        EnvFilter::try_from_env("SANDWIT_LOG").unwrap_or_else(|_| EnvFilter::new(default_log));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(log_filter);
    let provider = match args.otlp_endpoint.as_deref().filter(|url| !url.is_empty()) {
        Some(url) => Some(provider(url)?),
        None => None,
    };
    let spans = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer(SERVICE_NAME))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            // The host's trace spans alone: the events logged inside them
            // may quote what the spans keep out (sandwit::trace says).
            .with_filter(filter_fn(|meta| {
                meta.is_span() && meta.target() == sandwit::trace::TARGET
            }))
    });
    Registry::default().with(log).with(spans).init();
    Ok(Telemetry { provider })
}

/// A tracer provider that batches spans for the collector at `base` (a
/// base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is).
fn provider(base: &str) -> anyhow::Result<SdkTracerProvider> {
    let endpoint = format!("{}/v1/traces", base.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(Ureq::new())
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .with_context(|| format!("the OTLP exporter to {endpoint}"))?;
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| SERVICE_NAME.to_string());
    let resource = Resource::builder().with_service_name(service).build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown_with_timeout(EXPORT_TIMEOUT)
        {
            eprintln!("sandwit: warning: the last traces may not have been exported: {e}");
        }
    }
}

/// The exporter's HTTP client: ureq, the command's own client (with TLS,
/// so an `https://` collector works). It blocks, which suits the batch
/// processor: it exports on a thread of its own.
#[derive(Debug)]
struct Ureq(ureq::Agent);

impl Ureq {
    fn new() -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(EXPORT_TIMEOUT))
            // The exporter reads the status itself.
            .http_status_as_error(false)
            .build()
            .new_agent();
        Ureq(agent)
    }
}

#[async_trait::async_trait]
impl HttpClient for Ureq {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let response = self.0.run(Request::from_parts(parts, &body[..]))?;
        let (parts, mut body) = response.into_parts();
        let body = body.read_to_vec()?;
        Ok(Response::from_parts(parts, Bytes::from(body)))
    }
}
