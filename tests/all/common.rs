//! Shared hosts, plugin loading and argument helpers.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use sandwit::json::value_from_json;
use sandwit::{
    AgentCtx, CallLimits, Host, LogLine, Plugin, PluginEvent, Policy, PythonSandbox, RunOutcome,
    RunSlots, RunStatus, Value,
};

pub use sandwit_test_artifacts as artifacts;

/// The compiled-code cache every test host shares.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandwit-cache")
}

/// The policy of the shared hosts: the example plugins get what they ask
/// for, except the ones that need a server (weather).
pub fn example_policy() -> Policy {
    let mut policy = Policy::default();
    policy.grant("messenger", ["chat"]).unwrap();
    policy.grant("notes", ["store"]).unwrap();
    pinned(policy)
}

/// The test components' ids and files.
const COMPONENTS: &[(&str, &str)] = &[
    ("calc", artifacts::CALC),
    ("knowledge", artifacts::KNOWLEDGE),
    ("messenger", artifacts::MESSENGER),
    ("imagegen", artifacts::IMAGEGEN),
    ("notes", artifacts::NOTES),
    ("weather", artifacts::WEATHER),
    ("echo", artifacts::ECHO),
    ("services", artifacts::SERVICES),
    ("hostile", artifacts::HOSTILE),
];

/// The SHA-256 of the file at `path`, hex.
pub fn digest(path: &str) -> String {
    sandwit::component_hash(&std::fs::read(path).unwrap())
}

/// `policy` with every test component's entry pinned to the component
/// built from this tree, as an operator pins the plugins they trust.
pub fn pinned(mut policy: Policy) -> Policy {
    for (id, path) in COMPONENTS {
        if policy.plugin(id).is_some() {
            policy.pin(id, &digest(path)).unwrap();
        }
    }
    policy
}

/// A host with the default limits and [`example_policy`] (the store in
/// memory).
pub fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        Host::builder()
            .cache_dir(cache_dir())
            .policy(example_policy())
            // Tests run at once share it: a run of one must not wait for a
            // slot behind another's (the time limits count from the slot,
            // but the tests' own clocks do not).
            .run_slots(RunSlots {
                running: 64,
                ..RunSlots::default()
            })
            .build()
            .unwrap()
    })
}

/// The log lines among a call's events.
pub fn logs(events: &[PluginEvent]) -> Vec<&LogLine> {
    events
        .iter()
        .filter_map(|e| match e {
            PluginEvent::Log(line) => Some(line),
            _ => None,
        })
        .collect()
}

/// Limits small enough that hostile plugins hit them quickly.
pub fn tight_limits() -> CallLimits {
    CallLimits {
        fuel: Some(300_000_000),
        time: Duration::from_secs(5),
        memory_bytes: 32 << 20,
        max_value_bytes: 1 << 20,
        ..CallLimits::default()
    }
}

/// A host with [`tight_limits`].
pub fn tight_host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        Host::builder()
            .cache_dir(cache_dir())
            .limits(tight_limits())
            .build()
            .unwrap()
    })
}

pub async fn load(host: &Host, path: &str) -> Plugin {
    host.load_plugin_file(path)
        .await
        .unwrap_or_else(|e| panic!("loading {path}: {e}"))
}

pub fn args(json: serde_json::Value) -> Value {
    value_from_json(json)
}

pub fn ctx() -> AgentCtx {
    AgentCtx {
        user_id: Some("user-7".into()),
        channel_name: Some("#general".into()),
        ..AgentCtx::new("chat-1")
    }
}

/// Asserts that `outcome` ended well, showing how it ended otherwise.
#[track_caller]
pub fn assert_ok(outcome: &RunOutcome) {
    assert_eq!(
        outcome.status,
        RunStatus::Ok,
        "error: {:?}\nlimit: {:?}\nstdout: {}\nstderr: {}",
        outcome.error,
        outcome.limit,
        outcome.stdout,
        outcome.stderr
    );
}

/// Asserts that a call or run stopped at its `deadline` (or an HTTP
/// timeout) ended soon after it: within three times the deadline plus
/// 1.5 s, the most a loaded 2-core CI machine (two tests at once, wasmtime
/// compiling beside them) should add for the timer, the next fuel yield and
/// unwinding the instance.
#[track_caller]
pub fn assert_ended_soon_after(elapsed: Duration, deadline: Duration) {
    let bound = deadline * 3 + Duration::from_millis(1_500);
    assert!(
        elapsed < bound,
        "took {elapsed:?}, more than {bound:?} for a deadline of {deadline:?}"
    );
}

/// Checks that `host` still serves a good call.
pub async fn assert_still_serving(host: &Host) {
    let calc = load(host, artifacts::CALC).await;
    let result = calc
        .call(
            &ctx(),
            "calculate_sum",
            args(serde_json::json!({"num1": 2, "num2": 40})),
        )
        .await
        .expect("the host still serves");
    assert_eq!(result, sandwit::MethodResult::Tool(Value::Int(42)));
}

/// Waits until `done()`, polling: for states no event announces (the run
/// slots' counts, the scientific sandbox's interpreter coming back from the
/// task that restores it). The limit only turns a hang into a failure.
pub async fn until(done: impl Fn() -> bool, what: &str) {
    let limit = Duration::from_secs(300);
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "waited {} s for {what}",
            limit.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `done()`, checked each time `python`'s preparing thread has
/// changed what it holds ([`PythonSandbox::wait_for_preparer`]), so the
/// test goes on as soon as the thread has done the work. The thread runs
/// only on an otherwise idle core (and compiles the interpreter for reuse
/// once per cache), so on a loaded machine the work waits for the other
/// tests to leave one: the limit, far past that, only turns a hang into a
/// failure.
pub async fn until_preparer(python: &PythonSandbox, done: impl FnMut() -> bool, what: &str) {
    let limit = Duration::from_secs(600);
    let waited = tokio::time::timeout(limit, python.wait_for_preparer(done)).await;
    assert!(waited.is_ok(), "waited {} s for {what}", limit.as_secs());
}

/// The store's key of the blob of session `name` in `ns` (its chat's
/// entries): the only one, since a save removes the blob it replaces.
pub async fn session_blob_key(
    store: &dyn sandwit::store::StoreBackend,
    ns: &sandwit::store::Namespace,
    name: &str,
) -> String {
    let prefix = format!("{name}/pages/");
    let mut blobs: Vec<String> = (store.keys(ns, 1024).await.unwrap().into_iter())
        .filter(|key| key.starts_with(&prefix))
        .collect();
    assert_eq!(blobs.len(), 1, "the session's blobs: {blobs:?}");
    blobs.pop().unwrap()
}
