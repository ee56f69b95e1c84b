//! The service's counters and their Prometheus text exposition
//! (`GET /metrics`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use sandwit::{ControlsSnapshot, Event, RunOutcome};

/// Upper bounds of the call latency histogram's buckets, in seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// One histogram: counts per bucket (not cumulative), sum and count.
#[derive(Default)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = LATENCY_BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Default)]
struct Counters {
    runs: BTreeMap<String, u64>,
    limit_hits: BTreeMap<String, u64>,
    rejected: BTreeMap<String, u64>,
    calls: BTreeMap<(String, String), Histogram>,
}

/// What the service counts. The label values are plugin ids and method
/// names the host accepted, statuses and limit kinds: a bounded set.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
}

/// What `/metrics` says of the interpreters.
pub struct InterpreterGauges {
    /// Small interpreters prepared ahead and waiting for a run.
    pub ready: usize,
    /// Whether small interpreters are reused across runs yet.
    pub reused: bool,
    /// Scientific interpreters ready, when the scientific one is loaded.
    pub scientific_ready: Option<usize>,
}

impl Metrics {
    /// Counts a finished run: its status, its limit and its calls.
    pub fn record_run(&self, outcome: &RunOutcome) {
        let mut c = self.counters.lock().expect("metrics lock");
        let status = serde_json::to_value(outcome.status).unwrap_or_default();
        *c.runs
            .entry(status.as_str().unwrap_or("unknown").to_string())
            .or_default() += 1;
        if let Some(limit) = &outcome.limit {
            *c.limit_hits.entry(limit.kind.to_string()).or_default() += 1;
        }
        for event in &outcome.events {
            if let Event::Call {
                plugin, method, ms, ..
            } = event
            {
                c.calls
                    .entry((plugin.clone(), method.clone()))
                    .or_default()
                    .observe(ms / 1e3);
            }
        }
    }

    /// Counts a direct method call that took `seconds`.
    pub fn record_call(&self, plugin: &str, method: &str, seconds: f64) {
        let mut c = self.counters.lock().expect("metrics lock");
        c.calls
            .entry((plugin.to_string(), method.to_string()))
            .or_default()
            .observe(seconds);
    }

    /// Counts a run refused before it started, by the error's code.
    pub fn record_rejected(&self, code: &str) {
        let mut c = self.counters.lock().expect("metrics lock");
        *c.rejected.entry(code.to_string()).or_default() += 1;
    }

    /// The Prometheus text exposition of the counters, the run pool's
    /// occupancy, the interpreters' and the execution controls' counters.
    pub fn render(
        &self,
        running: usize,
        waiting: usize,
        max_running: usize,
        interpreters: InterpreterGauges,
        controls: &ControlsSnapshot,
    ) -> String {
        let InterpreterGauges {
            ready: interpreters_ready,
            reused: interpreters_reused,
            scientific_ready,
        } = interpreters;
        let c = self.counters.lock().expect("metrics lock");
        let mut out = String::new();
        let _ = writeln!(out, "# HELP sandwit_runs_total Runs finished, by status.");
        let _ = writeln!(out, "# TYPE sandwit_runs_total counter");
        for (status, n) in &c.runs {
            let _ = writeln!(out, "sandwit_runs_total{{status=\"{status}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP sandwit_runs_rejected_total Runs refused before they started, by reason."
        );
        let _ = writeln!(out, "# TYPE sandwit_runs_rejected_total counter");
        for (reason, n) in &c.rejected {
            let _ = writeln!(
                out,
                "sandwit_runs_rejected_total{{reason=\"{reason}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP sandwit_limit_hits_total Runs stopped by a limit, by kind."
        );
        let _ = writeln!(out, "# TYPE sandwit_limit_hits_total counter");
        for (kind, n) in &c.limit_hits {
            let _ = writeln!(out, "sandwit_limit_hits_total{{kind=\"{kind}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP sandwit_call_duration_seconds Method calls' wall-clock time, by plugin and method."
        );
        let _ = writeln!(out, "# TYPE sandwit_call_duration_seconds histogram");
        for ((plugin, method), h) in &c.calls {
            let labels = format!("plugin=\"{plugin}\",method=\"{method}\"");
            let mut cumulative = 0;
            for (bound, n) in LATENCY_BUCKETS.iter().zip(h.buckets) {
                cumulative += n;
                let _ = writeln!(
                    out,
                    "sandwit_call_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "sandwit_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "sandwit_call_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "sandwit_call_duration_seconds_count{{{labels}}} {}",
                h.count
            );
        }
        drop(c);
        let gauges = [
            ("sandwit_runs_running", "Runs running now.", running),
            (
                "sandwit_runs_waiting",
                "Runs waiting for a slot now.",
                waiting,
            ),
            (
                "sandwit_runs_max_running",
                "The most runs at once.",
                max_running,
            ),
            (
                "sandwit_interpreters_ready",
                "Interpreters prepared ahead and waiting for a run.",
                interpreters_ready,
            ),
            (
                "sandwit_interpreters_reusable",
                "1 once interpreters are restored and reused across runs (the interpreter compiled for it, once per cache), else 0.",
                usize::from(interpreters_reused),
            ),
        ];
        let scientific = scientific_ready.map(|ready| {
            (
                "sandwit_scientific_interpreters_ready",
                "Scientific interpreters ready for a run (restored or new).",
                ready,
            )
        });
        for (name, help, value) in gauges.into_iter().chain(scientific) {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {value}");
        }
        render_controls(&mut out, controls);
        out
    }
}

fn render_controls(out: &mut String, controls: &ControlsSnapshot) {
    type Field = fn(&sandwit::controls::MethodStats) -> f64;
    let counters: [(&str, &str, Field); 9] = [
        ("calls", "Calls that reached the execution controls.", |m| {
            m.calls as f64
        }),
        ("succeeded", "Calls that returned a result.", |m| {
            m.succeeded as f64
        }),
        ("failed", "Calls that failed.", |m| m.failed as f64),
        ("rate_limited", "Calls refused by a rate limit.", |m| {
            m.rate_limited as f64
        }),
        (
            "breaker_refused",
            "Calls refused by an open breaker.",
            |m| m.breaker_refused as f64,
        ),
        ("budget_refused", "Calls refused by a cost budget.", |m| {
            m.budget_refused as f64
        }),
        (
            "approvals_granted",
            "Calls of flagged methods approved.",
            |m| m.approvals_granted as f64,
        ),
        (
            "approvals_refused",
            "Calls of flagged methods refused approval.",
            |m| m.approvals_refused as f64,
        ),
        ("cost", "What successful calls cost in all.", |m| m.cost),
    ];
    for (name, help, field) in counters {
        let _ = writeln!(out, "# HELP sandwit_controls_{name}_total {help}");
        let _ = writeln!(out, "# TYPE sandwit_controls_{name}_total counter");
        for m in &controls.methods {
            let _ = writeln!(
                out,
                "sandwit_controls_{name}_total{{{}}} {}",
                method_labels(m),
                field(m)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP sandwit_controls_breaker_trips_total Times a method's breaker opened."
    );
    let _ = writeln!(out, "# TYPE sandwit_controls_breaker_trips_total counter");
    for m in &controls.methods {
        if let Some(b) = &m.breaker {
            let _ = writeln!(
                out,
                "sandwit_controls_breaker_trips_total{{{}}} {}",
                method_labels(m),
                b.trips
            );
        }
    }
}

/// The labels of a method's controls: its plugin and name, and the
/// namespace of its calls when they had one (the controls keep each
/// namespace's state apart).
fn method_labels(m: &sandwit::controls::MethodStats) -> String {
    let mut labels = format!("plugin=\"{}\",method=\"{}\"", m.plugin, m.method);
    if let Some(namespace) = &m.namespace {
        let _ = write!(labels, ",namespace=\"{}\"", label_value(namespace));
    }
    labels
}

/// `value` as a Prometheus label value: backslash, quote and newline
/// escaped.
fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
