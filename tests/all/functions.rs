//! Functions the application gives one run (`RunOptions::functions`): the
//! code calls them as methods, the run pauses at each call with its
//! arguments, and the application's answer (a value, an exception of a
//! type it names, a refusal) is what the call returns or raises when the
//! run resumes, on this host or another over the same store. Calls made
//! before a pause are not made again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sandwit::json::{BytesAs, value_to_json};
use sandwit::store::SqliteStore;
use sandwit::{
    AgentCtx, CLIENT_FUNCTIONS, ClientFunction, Host, HostMethod, MethodKind, MethodResult,
    MethodSpec, Param, PythonSandbox, Resume, RunOptions, RunOutcome, RunStatus, SessionKey,
    Toolbox, ToolboxError, Value,
};
use serde_json::json;

use crate::common::{artifacts, assert_ok, cache_dir};

/// A host over `store` with the session key every host of these tests
/// shares, its sandbox, and a toolbox of one host method, `lookup(n)`,
/// counting its calls in `calls`.
async fn host(
    store: &Arc<SqliteStore>,
    calls: &Arc<AtomicUsize>,
) -> (Host, PythonSandbox, Toolbox) {
    let host = Host::builder()
        .cache_dir(cache_dir())
        .store(store.clone())
        .session_key(SessionKey::from_bytes(&[7; 32]).unwrap())
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let spec = MethodSpec {
        name: "lookup".into(),
        kind: MethodKind::Tool,
        description: "Looks n up.".into(),
        docstring: "Looks n up.".into(),
        params: vec![Param {
            name: "n".into(),
            schema: json!({"type": "integer"}),
            required: true,
        }],
        returns: None,
    };
    let seen = calls.clone();
    let lookup = HostMethod::new("app", spec, move |_ctx: AgentCtx, args: Value| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move {
            let Value::Object(entries) = args else {
                return Err("no arguments".to_string());
            };
            Ok(MethodResult::Tool(entries[0].1.clone()))
        }
    })
    .unwrap();
    let tools = Toolbox::with_host_methods(&[], &[lookup]).unwrap();
    (host, python, tools)
}

fn store() -> Arc<SqliteStore> {
    Arc::new(SqliteStore::in_memory().unwrap())
}

/// The options giving `weather` (any arguments) and `add(a, b)` (typed).
fn options() -> RunOptions {
    let int = json!({"type": "integer"});
    let param = |name: &str| Param {
        name: name.into(),
        schema: int.clone(),
        required: true,
    };
    RunOptions::new().functions([
        ClientFunction::new("weather", "The weather in a city."),
        ClientFunction::with_params("add", "Adds two ints.", vec![param("a"), param("b")]),
    ])
}

#[track_caller]
fn paused(outcome: &RunOutcome) -> &sandwit::Paused {
    assert_eq!(
        outcome.status,
        RunStatus::Paused,
        "{:?} {}",
        outcome.error,
        outcome.stdout
    );
    outcome.paused.as_ref().unwrap()
}

fn json_of(value: &Value) -> serde_json::Value {
    value_to_json(value, BytesAs::String)
}

fn error_of(outcome: &RunOutcome) -> String {
    let error = outcome.error.as_ref();
    error.map_or_else(String::new, |e| format!("{}: {}", e.type_name, e.message))
}

#[tokio::test]
async fn a_function_of_the_run_pauses_with_its_arguments_and_returns_the_answer_on_another_host() {
    let (store, calls) = (store(), Arc::new(AtomicUsize::new(0)));
    let ctx = AgentCtx::new("functions-answer");
    let code = "\
seen = lookup(n=5)
first = weather('Paris', 3, unit='C', days=[1, 2])
second = weather()
print('got', first, second)
result = {'seen': seen, 'first': first, 'second': second, 'sum': add(2, b=3)}
";
    let (_a, first_host, tools) = host(&store, &calls).await;
    let outcome = first_host.run_with(&ctx, &tools, code, &options()).await;
    let pause = paused(&outcome).clone();
    assert_eq!(
        (pause.plugin.as_str(), pause.method.as_str()),
        (CLIENT_FUNCTIONS, "weather")
    );
    assert_eq!(
        json_of(&pause.args),
        json!({"args": ["Paris", 3], "kwargs": {"unit": "C", "days": [1, 2]}})
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    drop(first_host);

    // Another host over the store answers each call in turn; the resumed
    // run keeps the functions it was given.
    let (_b, second_host, tools) = host(&store, &calls).await;
    let plain = RunOptions::new();
    let answer = Resume::Result(Value::Text("sunny".into()));
    let outcome = second_host
        .resume(&ctx, &tools, &pause.token, answer, &plain)
        .await;
    let pause = paused(&outcome).clone();
    assert_eq!(pause.method, "weather");
    assert_eq!(json_of(&pause.args), json!({"args": [], "kwargs": {}}));
    let answer = Resume::Result(Value::Int(7));
    let outcome = second_host
        .resume(&ctx, &tools, &pause.token, answer, &plain)
        .await;
    let pause = paused(&outcome).clone();
    assert_eq!(
        (pause.method.as_str(), json_of(&pause.args)),
        ("add", json!({"a": 2, "b": 3}))
    );
    let outcome = second_host
        .resume(
            &ctx,
            &tools,
            &pause.token,
            Resume::Result(Value::Int(5)),
            &plain,
        )
        .await;
    assert_ok(&outcome);
    assert_eq!(
        json_of(outcome.result.as_ref().unwrap()),
        json!({"seen": 5, "first": "sunny", "second": 7, "sum": 5})
    );
    assert!(outcome.stdout.contains("got sunny 7"), "{}", outcome.stdout);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "lookup was called again");
}

#[tokio::test]
async fn an_answer_may_raise_in_the_code_by_type_and_an_approval_is_refused() {
    let (store, calls) = (store(), Arc::new(AtomicUsize::new(0)));
    let ctx = AgentCtx::new("functions-raise");
    let (_host, python, tools) = host(&store, &calls).await;
    let plain = RunOptions::new();
    let code = "\
caught = []
for city in ['Paris', 'Oslo']:
    try:
        weather(city)
    except ValueError as e:
        caught.append(['ValueError', str(e)])
    except PluginError as e:
        caught.append([type(e).__name__, e.message, isinstance(e, PluginError)])
result = caught
";
    let outcome = python.run_with(&ctx, &tools, code, &options()).await;
    let token = paused(&outcome).token.clone();

    // The host cannot make an application's call: an approval is refused
    // and the token stays good.
    let approved = python
        .resume(&ctx, &tools, &token, Resume::Approve, &plain)
        .await;
    assert_eq!(approved.status, RunStatus::Error);
    assert!(
        error_of(&approved).contains("function `weather` is the application's"),
        "{}",
        error_of(&approved)
    );
    let bad = Resume::Raise {
        name: "not a type".into(),
        message: "x".into(),
    };
    let refused = python.resume(&ctx, &tools, &token, bad, &plain).await;
    assert!(
        error_of(&refused).contains("not a dotted Python identifier"),
        "{}",
        error_of(&refused)
    );

    let raise = |name: &str, message: &str| Resume::Raise {
        name: name.into(),
        message: message.into(),
    };
    let outcome = python
        .resume(
            &ctx,
            &tools,
            &token,
            raise("ValueError", "no such city"),
            &plain,
        )
        .await;
    let token = paused(&outcome).token.clone();
    let outcome = python
        .resume(
            &ctx,
            &tools,
            &token,
            raise("httpx.HTTPError", "503 from upstream"),
            &plain,
        )
        .await;
    assert_ok(&outcome);
    assert_eq!(
        json_of(outcome.result.as_ref().unwrap()),
        json!([
            ["ValueError", "no such city"],
            ["HTTPError", "503 from upstream", true]
        ])
    );
}

#[tokio::test]
async fn functions_are_checked_before_the_run_and_their_arguments_before_the_pause() {
    let (store, calls) = (store(), Arc::new(AtomicUsize::new(0)));
    let ctx = AgentCtx::new("functions-checked");
    let (_host, python, tools) = host(&store, &calls).await;

    // A function named as a method of the toolbox is refused, the code not run.
    let taken = RunOptions::new().functions([ClientFunction::new("lookup", "Shadows it.")]);
    let outcome = python.run_with(&ctx, &tools, "print('ran')", &taken).await;
    assert_eq!(outcome.status, RunStatus::Error);
    assert!(
        error_of(&outcome).starts_with("InvalidFunction: ")
            && error_of(&outcome).contains("`lookup`"),
        "{}",
        error_of(&outcome)
    );
    assert_eq!(outcome.stdout, "");
    let bad = RunOptions::new().functions([ClientFunction::new("not-a-name", "Bad.")]);
    let outcome = python.run_with(&ctx, &tools, "print('ran')", &bad).await;
    assert!(
        error_of(&outcome).starts_with("InvalidFunction: function `not-a-name`"),
        "{}",
        error_of(&outcome)
    );

    // `client` is reserved: no plugin or host method is offered under it.
    let spec = MethodSpec {
        name: "ask".into(),
        kind: MethodKind::Tool,
        description: "Asks.".into(),
        docstring: "Asks.".into(),
        params: Vec::new(),
        returns: None,
    };
    let posing = HostMethod::new(CLIENT_FUNCTIONS, spec, |_, _| async {
        Ok::<_, String>(MethodResult::Tool(Value::Null))
    })
    .unwrap();
    assert!(matches!(
        Toolbox::with_host_methods(&[], &[posing]),
        Err(ToolboxError::Reserved { id, method }) if id == "client" && method == "ask"
    ));

    // Arguments the schema refuses raise in the code; the run does not pause.
    let code = "\
try:
    add('two', 3)
except TypeError as e:
    result = str(e)
";
    let outcome = python.run_with(&ctx, &tools, code, &options()).await;
    assert_ok(&outcome);
    let message = json_of(outcome.result.as_ref().unwrap());
    assert!(message.as_str().unwrap().contains("add"), "{message}");
    // The refused call is in the run's events, as any refused call is.
    assert!(
        matches!(
            &outcome.events[..],
            [sandwit::Event::Call { plugin, method, ok: false, .. }]
                if plugin == "client" && method == "add"
        ),
        "{:?}",
        outcome.events
    );
}
