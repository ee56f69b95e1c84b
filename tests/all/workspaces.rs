//! Chat workspaces, in both interpreters: a chat keeps its files across its
//! runs and never sees another's; escapes are refused; quotas end the run
//! naming themselves; the host lists and reads a chat's files; and a
//! reused interpreter keeps nothing of the last chat's folder.

use std::path::Path;

use sandwit::{
    AgentCtx, Host, LimitKind, PluginSet, PythonSandbox, RunOptions, RunOutcome, RunStatus,
    ScientificOptions, ScientificSandbox, WorkspaceFile, WorkspaceOptions,
};

use crate::common::{artifacts, cache_dir, load, until_preparer};

/// A folder of the test's own, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sandwit-ws-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Either interpreter.
enum Sandbox {
    Small(PythonSandbox),
    Scientific(ScientificSandbox),
}

impl Sandbox {
    async fn run(&self, ctx: &AgentCtx, plugins: &PluginSet, code: &str) -> RunOutcome {
        let options = RunOptions::new();
        match self {
            Sandbox::Small(sandbox) => sandbox.run_with(ctx, plugins, code, &options).await,
            Sandbox::Scientific(sandbox) => sandbox.run_with(ctx, plugins, code, &options).await,
        }
    }
}

/// Each interpreter in a host with workspaces under `options`' quotas (the
/// scientific one finds the host's).
async fn each_with_workspaces(options: &WorkspaceOptions) -> Vec<(Host, Sandbox)> {
    let host = || {
        Host::builder()
            .cache_dir(cache_dir())
            .workspaces(options.clone())
            .build()
            .unwrap()
    };
    let small = host();
    let python = small.load_python_file(artifacts::PYTHON).await.unwrap();
    let scientific = host();
    let sandbox = scientific
        .load_scientific(ScientificOptions::new(artifacts::SCIENTIFIC))
        .await
        .unwrap();
    vec![
        (small, Sandbox::Small(python)),
        (scientific, Sandbox::Scientific(sandbox)),
    ]
}

fn chat(key: &str) -> AgentCtx {
    AgentCtx::new(key)
}

#[track_caller]
fn assert_ok(outcome: &RunOutcome) {
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_keeps_its_workspace_and_sees_no_other() {
    let root = TempDir::new();
    for (host, sandbox) in each_with_workspaces(&WorkspaceOptions::new(root.path())).await {
        let echo = load(&host, artifacts::ECHO).await;
        let plugins = PluginSet::new(&[echo]).unwrap();
        let key = |name: &str| match sandbox {
            Sandbox::Small(_) => format!("small-{name}"),
            Sandbox::Scientific(_) => format!("scientific-{name}"),
        };
        let write = "import os\nprint(os.getcwd())\nos.makedirs('charts', exist_ok=True)\n\
                     open('charts/c.png', 'wb').write(b'\\x89PNG' + bytes(2000))\n\
                     open('notes.txt', 'w').write('kept')";
        let outcome = sandbox.run(&chat(&key("a")), &plugins, write).await;
        assert_ok(&outcome);
        assert_eq!(outcome.stdout, "/workspace\n");
        let mut files = outcome.files.clone();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let expected = [("charts/c.png", 2004), ("notes.txt", 4)];
        let found: Vec<_> = files.iter().map(|f| (f.path.as_str(), f.size)).collect();
        assert_eq!(found, expected);
        // The next run of the chat finds its files, and hands the chart to a
        // plugin as bytes.
        let send = "data = open('charts/c.png', 'rb').read()\nprint(open('notes.txt').read(), \
                    echo(data)[:4] == b'\\x89PNG', len(data))";
        let outcome = sandbox.run(&chat(&key("a")), &plugins, send).await;
        assert_ok(&outcome);
        assert_eq!(outcome.stdout, "kept True 2004\n");
        assert!(
            outcome.files.is_empty(),
            "nothing changed: {:?}",
            outcome.files
        );
        // Another chat's workspace is its own.
        let look = "import os\nprint(os.listdir('.'))";
        let outcome = sandbox.run(&chat(&key("b")), &plugins, look).await;
        assert_ok(&outcome);
        assert_eq!(outcome.stdout, "[]\n");
        // So is a chat of the same key in another namespace.
        let other = AgentCtx {
            namespace: Some("tenant-2/".into()),
            ..chat(&key("a"))
        };
        let outcome = sandbox.run(&other, &plugins, look).await;
        assert_eq!(outcome.stdout, "[]\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_refuses_escapes() {
    let root = TempDir::new();
    std::fs::write(root.path().join("outside.txt"), "secret").unwrap();
    for (_host, sandbox) in each_with_workspaces(&WorkspaceOptions::new(root.path())).await {
        let plugins = PluginSet::default();
        for code in [
            "open('../outside.txt').read()",
            "open('/workspace/../outside.txt').read()",
            "open('/etc/passwd').read()",
            "open('/tmp/x', 'w')",
            "import os\nos.symlink('/etc/passwd', 'link')",
            "import os\nos.symlink('..', 'up')",
            "import os\nos.link('a', 'b')",
        ] {
            let code = format!("open('a', 'w').write('x')\n{code}");
            let outcome = sandbox.run(&chat("esc"), &plugins, &code).await;
            assert_eq!(outcome.status, RunStatus::Error, "{code}: {outcome:?}");
            let error = outcome.error.unwrap();
            assert!(
                error.type_name.ends_with("Error") && !outcome.stdout.contains("secret"),
                "{code}: {error:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_quota_ends_the_run_and_names_itself() {
    let root = TempDir::new();
    let quotas = WorkspaceOptions::new(root.path())
        .max_bytes(1 << 20)
        .max_files(3)
        .max_path(64);
    for (n, (_host, sandbox)) in each_with_workspaces(&quotas).await.into_iter().enumerate() {
        let plugins = PluginSet::default();
        let cases = [
            ("open('big', 'wb').write(b'x' * (2 << 20))", "max_bytes"),
            (
                "try:\n    for i in range(10):\n        open(f'f{i}', 'w').close()\nexcept OSError:\n    pass",
                "max_files",
            ),
            ("open('n' * 100, 'w')", "max_path"),
        ];
        for (i, (code, quota)) in cases.iter().enumerate() {
            let ctx = chat(&format!("quota-{n}-{i}"));
            let outcome = sandbox.run(&ctx, &plugins, code).await;
            assert_eq!(
                outcome.status,
                RunStatus::LimitExceeded,
                "{code}: {outcome:?}"
            );
            let limit = outcome.limit.unwrap();
            assert_eq!(limit.kind, LimitKind::Workspace);
            assert!(limit.message.contains(quota), "{code}: {}", limit.message);
        }
        // The bytes quota holds across runs: what the chat kept counts.
        let ctx = chat(&format!("quota-{n}-kept"));
        let half = "open(f'h{__import__(\"random\").random()}', 'wb').write(b'x' * (600 << 10))";
        assert_ok(&sandbox.run(&ctx, &plugins, half).await);
        let outcome = sandbox.run(&ctx, &plugins, half).await;
        assert_eq!(outcome.limit.unwrap().kind, LimitKind::Workspace);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_is_listed_and_read_by_the_host() {
    let root = TempDir::new();
    for (host, sandbox) in each_with_workspaces(&WorkspaceOptions::new(root.path())).await {
        let plugins = PluginSet::default();
        let code =
            "import os\nos.makedirs('d', exist_ok=True)\nopen('d/a.txt', 'w').write('hello')";
        let outcome = sandbox.run(&chat("list"), &plugins, code).await;
        assert_ok(&outcome);
        let files = host.workspace_files(&chat("list")).unwrap();
        let expected = WorkspaceFile {
            path: "d/a.txt".into(),
            size: 5,
        };
        assert_eq!(files, [expected]);
        let read = host.read_workspace_file(&chat("list"), "d/a.txt", 100);
        assert_eq!(read.unwrap(), b"hello");
        assert!(host.workspace_files(&chat("other")).unwrap().is_empty());
        use std::io::ErrorKind::{InvalidInput, NotFound, PermissionDenied};
        for (path, kind) in [
            ("../x", PermissionDenied),
            ("/etc/passwd", InvalidInput),
            ("d", NotFound),
        ] {
            let err = host
                .read_workspace_file(&chat("list"), path, 100)
                .unwrap_err();
            assert_eq!(err.kind(), kind, "{path}: {err}");
        }
        let err = host
            .read_workspace_file(&chat("list"), "d/a.txt", 2)
            .unwrap_err();
        assert_eq!(err.kind(), InvalidInput);
        let err = host
            .read_workspace_file(&chat("other"), "d/a.txt", 100)
            .unwrap_err();
        assert_eq!(err.kind(), NotFound);
    }
    // A host without workspaces says so.
    let host = Host::builder().build().unwrap();
    let err = host.workspace_files(&chat("list")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reused_small_interpreter_keeps_nothing_of_the_last_chats_folder() {
    // One prepared interpreter, reused run after run: its preopen is the
    // same descriptor each time, pointed at the run's chat's folder. What
    // a run leaves open (a listing the adapter keeps, a file) is deleted
    // before the interpreter serves the next run.
    let root = TempDir::new();
    let host = Host::builder()
        .cache_dir(cache_dir())
        .prepared_interpreters(1)
        .workspaces(WorkspaceOptions::new(root.path()))
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let plugins = PluginSet::default();
    let ready = || async {
        let reusing = || python.reuses_interpreters() && python.prepared() == 1;
        until_preparer(&python, reusing, "a prepared interpreter, reused").await;
    };
    let write = "open('mine.txt', 'w').write('x')";
    let look = "import os\nprint(sorted(os.listdir('.')), os.getcwd())";
    let mut reused = 0;
    for (n, key) in ["a", "b", "a", "c"].into_iter().enumerate() {
        ready().await;
        let outcome = python.run(&chat(key), &plugins, look).await;
        assert_ok(&outcome);
        let kept = if key == "a" && n > 0 {
            "['mine.txt']"
        } else {
            "[]"
        };
        assert_eq!(outcome.stdout, format!("{kept} /workspace\n"), "run {n}");
        reused += usize::from(outcome.reused);
        ready().await;
        let outcome = python.run(&chat(key), &plugins, write).await;
        assert_ok(&outcome);
        reused += usize::from(outcome.reused);
    }
    assert_eq!(
        reused, 7,
        "the interpreter was reused {reused} times of 8 runs"
    );
    // A file left open, and the next chat's run on the same interpreter.
    ready().await;
    let left_open =
        "f = open('open.txt', 'w')\nf.write('x')\nf.flush()\nimport builtins\nbuiltins.keep = f";
    assert_ok(&python.run(&chat("d"), &plugins, left_open).await);
    ready().await;
    let outcome = python.run(&chat("e"), &plugins, look).await;
    assert_ok(&outcome);
    assert!(outcome.reused, "not reused after a file was left open");
    assert_eq!(outcome.stdout, "[] /workspace\n");
    let outcome = python
        .run(&chat("d"), &plugins, "print(open('open.txt').read())")
        .await;
    assert_eq!(outcome.stdout, "x\n");
}
