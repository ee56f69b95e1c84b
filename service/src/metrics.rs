//! The service's counters and their Prometheus text exposition
//! (`GET /metrics`), kept and written by `prometheus-client`, the
//! official Rust client: it escapes label values, keeps histograms'
//! buckets cumulative and writes the text format (version 0.0.4).

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, prometheus_text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use sandwit::{ControlsSnapshot, Event, RunOutcome};

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Upper bounds of the call latency histogram's buckets, in seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// A run's status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Status {
    status: String,
}

/// Why a run was refused: the error's code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
}

/// The kind of limit that stopped a run.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

/// How a run in a session found and left it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionRun {
    /// `started`, `restored` (from the store) or `live`.
    found: String,
    /// `stored`, `kept` (live only), `rolled_back` or `ended`.
    left: String,
}

/// A method called.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Method {
    plugin: String,
    method: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// What the service counts. The label values are plugin ids and method
/// names the host accepted, statuses, error codes and limit kinds: a
/// bounded set.
pub struct Metrics {
    runs: Family<Status, Counter>,
    rejected: Family<Reason, Counter>,
    limit_hits: Family<Kind, Counter>,
    session_runs: Family<SessionRun, Counter>,
    session_bytes: Counter,
    calls: Family<Method, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            runs: Family::default(),
            rejected: Family::default(),
            limit_hits: Family::default(),
            session_runs: Family::default(),
            session_bytes: Counter::default(),
            calls: Family::new_with_constructor(latency_histogram),
        }
    }
}

/// What `/metrics` says of the interpreters.
pub struct InterpreterGauges {
    /// Small interpreters prepared ahead and waiting for a run.
    pub ready: usize,
    /// Whether small interpreters are reused across runs yet.
    pub reused: bool,
    /// Scientific interpreters ready, when the scientific one is loaded.
    pub scientific_ready: Option<usize>,
    /// Sessions live in this process, each holding an interpreter: the
    /// small interpreter's, and the scientific one's when it is loaded.
    pub sessions_live: usize,
    pub scientific_sessions_live: Option<usize>,
}

impl Metrics {
    /// Counts a finished run: its status, its limit and its calls.
    pub fn record_run(&self, outcome: &RunOutcome) {
        let status = serde_json::to_value(outcome.status).unwrap_or_default();
        let status = status.as_str().unwrap_or("unknown").to_string();
        self.runs.get_or_create(&Status { status }).inc();
        if let Some(limit) = &outcome.limit {
            let kind = limit.kind.to_string();
            self.limit_hits.get_or_create(&Kind { kind }).inc();
        }
        if let Some(session) = &outcome.session {
            let found = match (session.started, session.restored) {
                (true, _) => "started",
                (_, true) => "restored",
                _ => "live",
            };
            let left = match (session.rolled_back, session.stored_bytes, session.kept) {
                (true, _, _) => "rolled_back",
                (_, Some(_), _) => "stored",
                (_, None, true) => "kept",
                _ => "ended",
            };
            let labels = SessionRun {
                found: found.into(),
                left: left.into(),
            };
            self.session_runs.get_or_create(&labels).inc();
            self.session_bytes.inc_by(session.stored_bytes.unwrap_or(0));
        }
        for event in &outcome.events {
            if let Event::Call {
                plugin, method, ms, ..
            } = event
            {
                self.record_call(plugin, method, ms / 1e3);
            }
        }
    }

    /// Counts a direct method call that took `seconds`.
    pub fn record_call(&self, plugin: &str, method: &str, seconds: f64) {
        let method = Method {
            plugin: plugin.to_string(),
            method: method.to_string(),
        };
        self.calls.get_or_create(&method).observe(seconds);
    }

    /// Counts a run refused before it started, by the error's code.
    pub fn record_rejected(&self, code: &str) {
        let reason = code.to_string();
        self.rejected.get_or_create(&Reason { reason }).inc();
    }

    /// The Prometheus text exposition of the counters, the run pool's
    /// occupancy, the interpreters' and the execution controls' counters.
    pub fn render(
        &self,
        running: usize,
        waiting: usize,
        max_running: usize,
        interpreters: InterpreterGauges,
        controls: ControlsSnapshot,
    ) -> String {
        // A registry per scrape: the counters are shared with it (a
        // family's clone is the same family), the gauges and the controls'
        // counters are read now.
        let mut registry = Registry::default();
        registry.register(
            "sandwit_runs",
            "Runs finished, by status",
            self.runs.clone(),
        );
        registry.register(
            "sandwit_runs_rejected",
            "Runs refused before they started, by reason",
            self.rejected.clone(),
        );
        registry.register(
            "sandwit_limit_hits",
            "Runs stopped by a limit, by kind",
            self.limit_hits.clone(),
        );
        registry.register(
            "sandwit_session_runs",
            "Runs in a session, by how they found it (started, restored, live) and left it \
             (stored, kept, rolled_back, ended)",
            self.session_runs.clone(),
        );
        registry.register(
            "sandwit_session_stored_bytes",
            "Bytes of sessions stored after their runs",
            self.session_bytes.clone(),
        );
        registry.register(
            "sandwit_call_duration_seconds",
            "Method calls' wall-clock time, by plugin and method",
            self.calls.clone(),
        );
        let gauges = [
            ("sandwit_runs_running", "Runs running now", running),
            (
                "sandwit_runs_waiting",
                "Runs waiting for a slot now",
                waiting,
            ),
            (
                "sandwit_runs_max_running",
                "The most runs at once",
                max_running,
            ),
            (
                "sandwit_interpreters_ready",
                "Interpreters prepared ahead and waiting for a run",
                interpreters.ready,
            ),
            (
                "sandwit_interpreters_reusable",
                "1 once interpreters are restored and reused across runs (the interpreter \
                 compiled for it, once per cache), else 0",
                usize::from(interpreters.reused),
            ),
        ];
        let sessions = (
            "sandwit_sessions_live",
            "Sessions of the small interpreter held in this process, idle or with a run in them",
            interpreters.sessions_live,
        );
        let scientific = interpreters.scientific_ready.map(|ready| {
            (
                "sandwit_scientific_interpreters_ready",
                "Scientific interpreters ready for a run (restored or new)",
                ready,
            )
        });
        let scientific_sessions = interpreters.scientific_sessions_live.map(|live| {
            (
                "sandwit_scientific_sessions_live",
                "Sessions of the scientific interpreter held in this process, idle or running",
                live,
            )
        });
        let gauges = (gauges.into_iter())
            .chain([sessions])
            .chain(scientific)
            .chain(scientific_sessions);
        for (name, help, value) in gauges {
            let gauge = Gauge::<i64>::default();
            gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
            registry.register(name, help, gauge);
        }
        registry.register_collector(Box::new(Controls(controls)));
        let mut out = String::new();
        prometheus_text::encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}

/// The execution controls' counters per method, as the host's snapshot
/// has them.
#[derive(Debug)]
struct Controls(ControlsSnapshot);

/// A count of the controls: its name (before `_total`), help, and value
/// for a method.
type ControlCount = (
    &'static str,
    &'static str,
    fn(&sandwit::controls::MethodStats) -> u64,
);

const CONTROL_COUNTS: [ControlCount; 8] = [
    ("calls", "Calls that reached the execution controls.", |m| {
        m.calls
    }),
    ("succeeded", "Calls that returned a result.", |m| {
        m.succeeded
    }),
    ("failed", "Calls that failed.", |m| m.failed),
    ("rate_limited", "Calls refused by a rate limit.", |m| {
        m.rate_limited
    }),
    (
        "breaker_refused",
        "Calls refused by an open breaker.",
        |m| m.breaker_refused,
    ),
    ("budget_refused", "Calls refused by a cost budget.", |m| {
        m.budget_refused
    }),
    (
        "approvals_granted",
        "Calls of flagged methods approved.",
        |m| m.approvals_granted,
    ),
    (
        "approvals_refused",
        "Calls of flagged methods refused approval.",
        |m| m.approvals_refused,
    ),
];

impl Collector for Controls {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for (name, help, count) in CONTROL_COUNTS {
            let name = format!("sandwit_controls_{name}");
            let mut family = encoder.encode_descriptor(&name, help, None, MetricType::Counter)?;
            for m in &self.0.methods {
                let labels = method_labels(m);
                ConstCounter::new(count(m)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "sandwit_controls_cost",
            "What successful calls cost in all.",
            None,
            MetricType::Counter,
        )?;
        for m in &self.0.methods {
            let labels = method_labels(m);
            ConstCounter::new(m.cost).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "sandwit_controls_breaker_trips",
            "Times a method's breaker opened.",
            None,
            MetricType::Counter,
        )?;
        for m in &self.0.methods {
            if let Some(b) = &m.breaker {
                let labels = method_labels(m);
                ConstCounter::new(b.trips).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// The labels of a method's controls: its plugin and name, and the
/// namespace of its calls when they had one (the controls keep each
/// namespace's state apart).
fn method_labels(m: &sandwit::controls::MethodStats) -> Vec<(&'static str, &str)> {
    let mut labels = vec![("plugin", m.plugin.as_str()), ("method", m.method.as_str())];
    if let Some(namespace) = &m.namespace {
        labels.push(("namespace", namespace));
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_controls() -> ControlsSnapshot {
        ControlsSnapshot {
            methods: Vec::new(),
        }
    }

    fn gauges() -> InterpreterGauges {
        InterpreterGauges {
            ready: 2,
            reused: true,
            scientific_ready: None,
            sessions_live: 5,
            scientific_sessions_live: None,
        }
    }

    /// The exposition keeps the names, types and shapes scrapers and the
    /// docs know: counters with `_total`, a cumulative histogram with
    /// `+Inf`, `_sum` and `_count`, the gauges read at the scrape.
    #[test]
    fn the_exposition_names_every_series() {
        let metrics = Metrics::default();
        metrics.record_rejected("queue-full");
        // Sums of these are exact in binary, and so in the text.
        metrics.record_call("calc", "calculate_sum", 0.001953125);
        metrics.record_call("calc", "calculate_sum", 2.0);
        metrics.record_call("calc", "calculate_sum", 8.0);
        let text = metrics.render(1, 3, 4, gauges(), no_controls());
        for line in [
            "# HELP sandwit_runs_rejected_total Runs refused before they started, by reason.",
            "sandwit_runs_rejected_total{reason=\"queue-full\"} 1",
            "# TYPE sandwit_call_duration_seconds histogram",
            "sandwit_call_duration_seconds_bucket{plugin=\"calc\",method=\"calculate_sum\",le=\"0.001\"} 0",
            "sandwit_call_duration_seconds_bucket{plugin=\"calc\",method=\"calculate_sum\",le=\"0.0025\"} 1",
            "sandwit_call_duration_seconds_bucket{plugin=\"calc\",method=\"calculate_sum\",le=\"5\"} 2",
            "sandwit_call_duration_seconds_bucket{plugin=\"calc\",method=\"calculate_sum\",le=\"+Inf\"} 3",
            "sandwit_call_duration_seconds_sum{plugin=\"calc\",method=\"calculate_sum\"} 10.001953125",
            "sandwit_call_duration_seconds_count{plugin=\"calc\",method=\"calculate_sum\"} 3",
            "# TYPE sandwit_runs_running gauge",
            "sandwit_runs_running 1",
            "sandwit_runs_waiting 3",
            "sandwit_runs_max_running 4",
            "sandwit_interpreters_ready 2",
            "sandwit_interpreters_reusable 1",
            "sandwit_sessions_live 5",
            "# TYPE sandwit_controls_cost_total counter",
            "# TYPE sandwit_controls_breaker_trips_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert!(!text.contains("sandwit_scientific_interpreters_ready"));
        assert!(
            !text.contains("# EOF"),
            "OpenMetrics, not the text format:\n{text}"
        );
        let scientific = InterpreterGauges {
            scientific_ready: Some(1),
            scientific_sessions_live: Some(2),
            ..gauges()
        };
        let text = metrics.render(0, 0, 4, scientific, no_controls());
        for line in [
            "sandwit_scientific_interpreters_ready 1",
            "sandwit_scientific_sessions_live 2",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
    }

    fn method(namespace: Option<&str>, trips: Option<u64>) -> sandwit::controls::MethodStats {
        sandwit::controls::MethodStats {
            namespace: namespace.map(str::to_string),
            plugin: "calc".to_string(),
            method: "calculate_sum".to_string(),
            calls: 3,
            succeeded: 2,
            failed: 1,
            rate_limited: 0,
            breaker: trips.map(|trips| sandwit::controls::BreakerStats {
                state: sandwit::controls::BreakerState::Open,
                trips,
            }),
            breaker_refused: 0,
            budget_refused: 0,
            approvals_granted: 0,
            approvals_refused: 0,
            cost: 1.5,
        }
    }

    /// The controls' counters are per method, and per namespace for calls
    /// of a namespaced token; a namespace is a label value as its token
    /// file gave it, quotes, backslashes and line breaks escaped, never a
    /// label or a line of its own.
    #[test]
    fn the_controls_counters_are_per_method_and_namespace() {
        let controls = ControlsSnapshot {
            methods: vec![method(None, None), method(Some("a\"c\\m\ne:"), Some(2))],
        };
        let text = Metrics::default().render(0, 0, 1, gauges(), controls);
        let bare = "plugin=\"calc\",method=\"calculate_sum\"";
        let namespaced = format!("{bare},namespace=\"a\\\"c\\\\m\\ne:\"");
        for line in [
            format!("sandwit_controls_calls_total{{{bare}}} 3"),
            format!("sandwit_controls_failed_total{{{bare}}} 1"),
            format!("sandwit_controls_cost_total{{{bare}}} 1.5"),
            format!("sandwit_controls_calls_total{{{namespaced}}} 3"),
            format!("sandwit_controls_breaker_trips_total{{{namespaced}}} 2"),
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        let trips = text
            .lines()
            .filter(|l| l.starts_with("sandwit_controls_breaker_trips_total{"))
            .count();
        assert_eq!(trips, 1, "{text}");
    }
}
