//! Traces over OTLP: `sandwit run` and `sandwit serve` export their spans
//! to a small OTLP/HTTP receiver (tests/cli/otlp_receiver.py, decoding
//! with opentelemetry-proto in .venv-otlp, which `otlp_venv` of
//! scripts/env.sh makes), and no span carries an argument or a secret.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::common::{artifacts, assert_succeeded, cache_dir, pin_line, tempdir};
use crate::serve::{ADMIN, USER, digest, serve_with};

/// In the code's arguments: a store key and value, a URL's query.
const ARG_SECRET: &str = "arg-SECRET-7731";
/// The plugin's configuration secret, in the operator's policy.
const POLICY_SECRET: &str = "policy-SECRET-9146";

/// The receiver, killed when dropped.
struct Receiver {
    child: Child,
    base: String,
    spans: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// Starts a receiver writing into a new folder `name`.
    fn start(name: &str) -> Receiver {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = root.join(".venv-otlp/bin/python");
        assert!(
            python.exists(),
            "{} is missing: `source scripts/env.sh && otlp_venv` makes the OTLP receiver's \
             virtualenv (scripts/test does)",
            python.display()
        );
        let spans = tempdir("traces", name).join("spans.jsonl");
        let mut child = Command::new(python)
            .arg(root.join("tests/cli/otlp_receiver.py"))
            .arg(&spans)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let base = crate::common::listening_base(&mut child);
        Receiver { child, base, spans }
    }

    /// The spans received so far.
    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.spans).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Asserts that no span, and nothing else the receiver was sent, holds
    /// any of `secrets`.
    fn assert_holds_none(&self, secrets: &[&str]) {
        let text = std::fs::read_to_string(&self.spans).unwrap();
        let raw = std::fs::read(self.spans.with_extension("jsonl.raw")).unwrap();
        let raw = String::from_utf8_lossy(&raw);
        for secret in secrets {
            assert!(!text.contains(secret), "`{secret}` was exported: {text}");
            assert!(
                !raw.contains(secret),
                "`{secret}` was sent to the collector"
            );
        }
    }
}

fn attr<'a>(span: &'a Value, name: &str) -> &'a Value {
    &span["attributes"][name]
}

/// The spans named `name`, in the order they started.
fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    let mut found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    found.sort_by_key(|s| s["start"].as_u64());
    found
}

/// The host calls whose parent is `call`, by capability.
fn host_calls<'a>(spans: &'a [Value], call: &Value) -> Vec<&'a str> {
    named(spans, "sandwit.host_call")
        .into_iter()
        .filter(|s| s["parent_span_id"] == call["span_id"])
        .map(|s| attr(s, "capability").as_str().unwrap())
        .collect()
}

#[test]
fn run_exports_a_trace_of_its_calls_host_calls_and_controls() {
    let receiver = Receiver::start("run");
    let dir = tempdir("traces", "run-files");
    let port = receiver.base.rsplit(':').next().unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.services]\n\
             grant = [\"store\", \"config\", \"chat\", \"http:127.0.0.1:{port}\"]\n\
             config = {{ token = \"{POLICY_SECRET}\" }}\n\
             {}\
             [plugins.services.methods.put]\n\
             rate_limit = 1\n",
            pin_line(artifacts::SERVICES)
        ),
    )
    .unwrap();
    let code = format!(
        "print(put('chat', 'key-{ARG_SECRET}', 'value-{ARG_SECRET}'))\n\
         try:\n    put('chat', 'again', 'again')\nexcept Exception as e:\n    print('refused:', e)\n\
         read_config('token')\n\
         leak()\n\
         print(fetch('{}/page?q={ARG_SECRET}')['status'])\n",
        receiver.base
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(cache_dir())
        .arg("--store")
        .arg(dir.join("store.db"))
        .arg("--policy")
        .arg(&policy)
        .env_remove("OTEL_SERVICE_NAME")
        .args(["run", "--json", "--python", artifacts::PYTHON])
        .args(["--plugin", artifacts::SERVICES])
        .args(["--otlp-endpoint", &receiver.base])
        .args(["-c", &code])
        .output()
        .unwrap();
    assert_succeeded(&out);
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["status"], "ok", "{outcome}");
    let stdout = outcome["stdout"].as_str().unwrap();
    assert!(stdout.contains("refused: "), "{stdout}");
    assert!(stdout.ends_with("200\n"), "{stdout}");

    // The process has ended: every span was sent before it did.
    let spans = receiver.spans();
    let traces: std::collections::BTreeSet<&str> = spans
        .iter()
        .map(|s| s["trace_id"].as_str().unwrap())
        .collect();
    assert_eq!(traces.len(), 1, "one trace: {spans:#?}");
    let runs = named(&spans, "sandwit.run");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = runs[0];
    assert_eq!(run["parent_span_id"], "", "the run is the root: {run}");
    assert_eq!(attr(run, "interpreter"), "small");
    assert_eq!(attr(run, "outcome"), "ok");
    assert!(attr(run, "fuel").as_i64().unwrap() > 0, "{run}");
    assert_eq!(run["resource"]["service.name"], "sandwit");

    let calls = named(&spans, "sandwit.plugin_call");
    let methods: Vec<&str> = calls
        .iter()
        .map(|c| attr(c, "method").as_str().unwrap())
        .collect();
    assert_eq!(methods, ["put", "put", "read_config", "leak", "fetch"]);
    for call in &calls {
        assert_eq!(call["parent_span_id"], run["span_id"], "{call}");
        assert_eq!(attr(call, "plugin"), "services", "{call}");
        assert_eq!(attr(call, "kind"), "tool", "{call}");
        assert!(attr(call, "fuel").is_i64(), "{call}");
    }
    let (put, refused) = (calls[0], calls[1]);
    assert_eq!(attr(put, "outcome"), "ok");
    assert!(attr(put, "fuel").as_i64().unwrap() > 0, "{put}");
    assert_eq!(host_calls(&spans, put), ["store.set", "store.get"]);
    assert_eq!(attr(refused, "outcome"), "limit_exceeded");
    assert_eq!(attr(refused, "limit"), "rate");
    assert_eq!(refused["status"]["code"], 2, "an error: {refused}");
    assert!(host_calls(&spans, refused).is_empty());
    assert_eq!(host_calls(&spans, calls[2]), ["config.get"]);
    assert_eq!(
        host_calls(&spans, calls[3]),
        ["config.get", "chat.send_text"]
    );
    assert_eq!(host_calls(&spans, calls[4]), ["http.request"]);
    let request = named(&spans, "sandwit.host_call")
        .into_iter()
        .find(|s| attr(s, "capability") == "http.request")
        .unwrap();
    assert_eq!(
        attr(request, "grant"),
        format!("http:127.0.0.1:{port}").as_str()
    );
    assert_eq!(attr(request, "outcome"), "ok");
    for host_call in named(&spans, "sandwit.host_call") {
        assert_eq!(attr(host_call, "outcome"), "ok", "{host_call}");
    }

    let controls = named(&spans, "sandwit.control");
    assert_eq!(controls.len(), 1, "{controls:#?}");
    let control = controls[0];
    assert_eq!(control["parent_span_id"], refused["span_id"]);
    assert_eq!(attr(control, "control"), "rate_limit");
    assert_eq!(attr(control, "decision"), "rate_limited");
    assert_eq!(attr(control, "plugin"), "services");
    assert_eq!(attr(control, "method"), "put");

    assert_eq!(spans.len(), 1 + 5 + 6 + 1, "nothing else: {spans:#?}");
    receiver.assert_holds_none(&[ARG_SECRET, POLICY_SECRET, "[secret]"]);
}

#[test]
fn serve_exports_a_trace_per_run_and_flushes_it_on_shutdown() {
    let receiver = Receiver::start("serve");
    let tokens = format!("ops admin {}\napp user {}\n", digest(ADMIN), digest(USER));
    let policy = format!(
        "[plugins.services]\ngrant = [\"store\", \"config\"]\n\
         config = {{ token = \"{POLICY_SECRET}\" }}\n{}",
        pin_line(artifacts::SERVICES)
    );
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base.as_str()),
        ("OTEL_SERVICE_NAME", "sandwit-under-test"),
    ];
    let mut server = serve_with(
        ("traces", "serve-files"),
        &[artifacts::SERVICES],
        &policy,
        &[],
        &tokens,
        &env,
    );
    let code =
        format!("put('chat', 'key-{ARG_SECRET}', 'value-{ARG_SECRET}')\nread_config('token')");
    for _ in 0..2 {
        let (status, outcome) = server.post(
            "/v1/runs",
            USER,
            json!({"code": code, "chat_key": "c", "user_id": "u"}),
        );
        assert_eq!(
            (status, &outcome["status"]),
            (200, &json!("ok")),
            "{outcome}"
        );
    }
    // SAFETY: kill(2) on the server's pid, which this test started.
    assert_eq!(
        unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) },
        0
    );
    assert!(server.wait().success());

    let spans = receiver.spans();
    let runs = named(&spans, "sandwit.run");
    assert_eq!(runs.len(), 2, "{spans:#?}");
    assert_ne!(runs[0]["trace_id"], runs[1]["trace_id"], "a trace per run");
    for run in runs {
        assert_eq!(run["resource"]["service.name"], "sandwit-under-test");
        assert_eq!(attr(run, "outcome"), "ok");
        let calls: Vec<&Value> = named(&spans, "sandwit.plugin_call")
            .into_iter()
            .filter(|c| c["parent_span_id"] == run["span_id"])
            .collect();
        let methods: Vec<&Value> = calls.iter().map(|c| attr(c, "method")).collect();
        assert_eq!(methods, ["put", "read_config"], "{spans:#?}");
        assert_eq!(host_calls(&spans, calls[0]), ["store.set", "store.get"]);
        for call in &calls {
            assert_eq!(call["trace_id"], run["trace_id"]);
        }
    }
    receiver.assert_holds_none(&[ARG_SECRET, POLICY_SECRET]);
}
