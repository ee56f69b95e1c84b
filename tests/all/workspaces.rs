//! Chat workspaces, in both interpreters: a chat keeps its files across its
//! runs and never sees another's; escapes are refused; quotas end the run
//! naming themselves; the host lists and reads a chat's files; and a
//! reused interpreter keeps nothing of the last chat's folder.

use std::path::Path;

use sandwit::{
    AgentCtx, Host, LimitKind, PythonSandbox, RunOptions, RunOutcome, RunSlots, RunStatus,
    ScientificOptions, ScientificSandbox, Toolbox, WorkspaceFile, WorkspaceOptions,
};

use crate::common::{artifacts, assert_ok, cache_dir, load, until_preparer};

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
    async fn run(&self, ctx: &AgentCtx, plugins: &Toolbox, code: &str) -> RunOutcome {
        let options = RunOptions::new();
        match self {
            Sandbox::Small(sandbox) => sandbox.run_with(ctx, plugins, code, &options).await,
            Sandbox::Scientific(sandbox) => sandbox.run_with(ctx, plugins, code, &options).await,
        }
    }
}

/// Each interpreter in a host with workspaces under `options`' quotas (the
/// scientific one finds the host's), and run slots for two runs at once.
async fn each_with_workspaces(options: &WorkspaceOptions) -> Vec<(Host, Sandbox)> {
    let slots = RunSlots::per_core();
    let slots = RunSlots {
        running: slots.running.max(2),
        ..slots
    };
    let host = || {
        Host::builder()
            .cache_dir(cache_dir())
            .workspaces(options.clone())
            .run_slots(slots)
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

/// Asserts that `code`'s run ended with the workspace's byte quota.
#[track_caller]
fn assert_byte_quota(code: &str, outcome: &RunOutcome) {
    assert_eq!(
        outcome.status,
        RunStatus::LimitExceeded,
        "{code}: {outcome:?}"
    );
    let limit = outcome.limit.as_ref().unwrap();
    assert_eq!(limit.kind, LimitKind::Workspace, "{code}: {outcome:?}");
    assert!(limit.message.contains("max_bytes"), "{code}: {limit:?}");
}

/// Python that imports `os` and defines `write_all(fd, data)`: `os.write`
/// may write less than it is given (the small interpreter's WASI writes a
/// file 64 KiB a call).
const WRITE_ALL: &str = "import os\ndef write_all(fd, data):\n    data = memoryview(data)\n    \
                         while data:\n        data = data[os.write(fd, data):]\n";

/// The bytes `ctx`'s chat's files hold together, as the host lists them.
fn held(host: &Host, ctx: &AgentCtx) -> u64 {
    host.workspace_files(ctx)
        .unwrap()
        .iter()
        .map(|f| f.size)
        .sum()
}

/// The chat `name` of `sandbox`'s interpreter.
fn chat_of(sandbox: &Sandbox, name: &str) -> AgentCtx {
    match sandbox {
        Sandbox::Small(_) => chat(&format!("small-{name}")),
        Sandbox::Scientific(_) => chat(&format!("scientific-{name}")),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_keeps_its_workspace_and_sees_no_other() {
    let root = TempDir::new();
    for (host, sandbox) in each_with_workspaces(&WorkspaceOptions::new(root.path())).await {
        let echo = load(&host, artifacts::ECHO).await;
        let plugins = Toolbox::new(&[echo]).unwrap();
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
        let plugins = Toolbox::default();
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
        let plugins = Toolbox::default();
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
async fn a_write_to_a_file_under_stdouts_number_is_charged() {
    // WASI gives a file the lowest free number: stdout's, once closed. A
    // write is charged by what its descriptor is, not by its number.
    // (`fd_renumber` moves one too; neither interpreter's `os.dup2` calls
    // it.)
    let root = TempDir::new();
    let quotas = WorkspaceOptions::new(root.path()).max_bytes(1 << 20);
    let code = format!(
        "{WRITE_ALL}os.close(1)\nfd = os.open('reused', os.O_WRONLY | os.O_CREAT)\n\
         assert fd == 1, fd\nfor _ in range(4):\n    write_all(fd, bytes(1 << 20))"
    );
    for (host, sandbox) in each_with_workspaces(&quotas).await {
        let ctx = chat_of(&sandbox, "stdout");
        let outcome = sandbox.run(&ctx, &Toolbox::default(), &code).await;
        assert_byte_quota(&code, &outcome);
        assert!(held(&host, &ctx) <= 1 << 20, "{code}: {outcome:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_grown_by_its_size_or_a_write_past_its_end_is_charged() {
    // A size set, and a write past the end (a sparse file's hole), count
    // what they grow the file by: the workspace never holds more than its
    // quota, even as sizes without data. (Neither interpreter's `os` has
    // `posix_fallocate`; both WASIs answer `fd_allocate` with `ENOTSUP`.)
    let root = TempDir::new();
    let quotas = WorkspaceOptions::new(root.path()).max_bytes(1 << 20);
    let open = format!("{WRITE_ALL}fd = os.open('grown', os.O_WRONLY | os.O_CREAT)\n");
    let cases = [
        "os.ftruncate(fd, 1 << 40)",
        "os.ftruncate(fd, 600 << 10)\nos.lseek(fd, 0, os.SEEK_END)\n\
         write_all(fd, bytes(600 << 10))",
        "os.pwrite(fd, b'x', 1 << 40)",
        "os.pwrite(fd, b'x', 1 << 20)",
        "os.lseek(fd, 1 << 40, os.SEEK_SET)\nos.write(fd, b'x')",
        "f = open('sought', 'wb')\nf.seek(1 << 40)\nf.write(b'x')\nf.flush()",
    ];
    for (host, sandbox) in each_with_workspaces(&quotas).await {
        for (i, case) in cases.iter().enumerate() {
            let code = format!("{open}{case}");
            let ctx = chat_of(&sandbox, &format!("grown-{i}"));
            let outcome = sandbox.run(&ctx, &Toolbox::default(), &code).await;
            assert_byte_quota(&code, &outcome);
            assert!(held(&host, &ctx) <= 1 << 20, "{code}: {outcome:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chats_runs_at_once_share_its_byte_quota() {
    // Two runs of one chat, each writing 40 MiB into 64: they wait for each
    // other (a file each makes), so both are under way before either
    // writes. Together they are refused past the quota.
    let root = TempDir::new();
    for (host, sandbox) in each_with_workspaces(&WorkspaceOptions::new(root.path())).await {
        let ctx = chat_of(&sandbox, "together");
        let code = |me: &str, other: &str| {
            format!(
                "import os, time\nopen('{me}.ready', 'w').close()\nfor _ in range(800):\n    \
                 if os.path.exists('{other}.ready'):\n        break\n    time.sleep(0.01)\n\
                 with open('{me}.bin', 'wb') as f:\n    for _ in range(40):\n        \
                 f.write(bytes(1 << 20))"
            )
        };
        let (a, b) = (code("a", "b"), code("b", "a"));
        let plugins = Toolbox::default();
        let (ran_a, ran_b) = tokio::join!(
            sandbox.run(&ctx, &plugins, &a),
            sandbox.run(&ctx, &plugins, &b)
        );
        let refused = [(&a, &ran_a), (&b, &ran_b)]
            .into_iter()
            .filter(|(_, outcome)| outcome.status != RunStatus::Ok)
            .inspect(|(code, outcome)| assert_byte_quota(code, outcome))
            .count();
        assert!(refused > 0, "both ran: {ran_a:?} {ran_b:?}");
        assert!(held(&host, &ctx) <= 64 << 20, "{ran_a:?} {ran_b:?}");
    }
}

/// Files and folders a run makes through a folder it opened (`dir_fd`)
/// count as those it names from the top do: names that are the top's are
/// new under another folder, and the file quota holds. Folders take bytes
/// of the byte quota.
#[tokio::test(flavor = "multi_thread")]
async fn entries_made_through_an_opened_folder_count_and_folders_take_bytes() {
    for which in 0..2 {
        let root = TempDir::new();
        let quotas = WorkspaceOptions::new(root.path())
            .max_bytes(1 << 20)
            .max_files(20);
        let (_host, sandbox) = each_with_workspaces(&quotas).await.remove(which);
        let plugins = Toolbox::default();
        let code = "import os\nfor i in range(5):\n    os.mkdir(f'n{i}')\n    \
                    os.close(os.open(f'g{i}', os.O_WRONLY | os.O_CREAT))\n\
                    for i in range(5):\n    fd = os.open(f'n{i}', os.O_RDONLY | os.O_DIRECTORY)\n    \
                    for j in range(5):\n        os.mkdir(f'n{j}', dir_fd=fd)\n        \
                    os.close(os.open(f'g{j}', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n    \
                    os.close(fd)";
        let ctx = chat("dir-fd");
        let outcome = sandbox.run(&ctx, &plugins, code).await;
        assert_eq!(outcome.status, RunStatus::LimitExceeded, "{outcome:?}");
        let limit = outcome.limit.as_ref().unwrap();
        assert_eq!(limit.kind, LimitKind::Workspace, "{outcome:?}");
        assert!(limit.message.contains("max_files"), "{limit:?}");
        let made = entries_under(root.path());
        assert!(made <= 20, "{made} entries on disk");
        // Folders alone: 4 KiB each of the byte quota, so 1 MiB holds
        // fewer than 200 of them beside a file of 600 KiB.
        let root = TempDir::new();
        let quotas = WorkspaceOptions::new(root.path())
            .max_bytes(1 << 20)
            .max_files(1_000);
        let (_host, sandbox) = each_with_workspaces(&quotas).await.remove(which);
        let code = "import os\nopen('big', 'wb').write(bytes(600 << 10))\n\
                    for i in range(200):\n    os.mkdir(f'd{i}')";
        assert_byte_quota(code, &sandbox.run(&ctx, &plugins, code).await);
    }
}

/// A tree the code moves deeper than `max_path` (each path it named
/// within the quota) is listed only to that depth: what the host lists,
/// and the outcome, stay small, and the chat's next run finds its
/// workspace full, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn a_tree_moved_past_the_path_quota_is_listed_within_it() {
    let root = TempDir::new();
    let quotas = WorkspaceOptions::new(root.path()).max_files(1_000);
    for (host, sandbox) in each_with_workspaces(&quotas).await {
        let plugins = Toolbox::default();
        let code = "import os\nL = 'L' * 200\ncur = 'a'\nos.mkdir(cur)\nfor i in range(16):\n    \
                    open(cur + '/f', 'w').close()\n    nxt = 'b' if cur == 'a' else 'a'\n    \
                    os.mkdir(nxt)\n    os.rename(cur, nxt + '/' + L)\n    cur = nxt";
        let ctx = chat_of(&sandbox, "deep");
        let outcome = sandbox.run(&ctx, &plugins, code).await;
        assert_ok(&outcome);
        let longest = outcome
            .files
            .iter()
            .map(|f| f.path.len())
            .max()
            .unwrap_or(0);
        assert!(longest <= 255 + 255, "a listed path of {longest} bytes");
        assert!(format!("{outcome:?}").len() < 64 << 10);
        let listed = host.workspace_files(&ctx).unwrap();
        assert!(listed.iter().all(|f| f.path.len() <= 255 + 255));
        // The chat's next run cannot add to it, and is told why.
        let next = sandbox.run(&ctx, &plugins, "open('x', 'w').close()").await;
        let hit = next.limit.as_ref().expect("a limit");
        assert_eq!(hit.kind, LimitKind::Workspace, "{next:?}");
        assert!(hit.message.contains("past its quotas"), "{}", hit.message);
    }
}

/// The entries on disk in the chats' folders under `root`, counted by
/// walking them (the chats' folders and the placeholder not counted).
fn entries_under(root: &Path) -> usize {
    let mut count = 0;
    let mut stack: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            count += 1;
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            }
        }
    }
    count
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_is_listed_and_read_by_the_host() {
    let root = TempDir::new();
    for (host, sandbox) in each_with_workspaces(&WorkspaceOptions::new(root.path())).await {
        let plugins = Toolbox::default();
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
    let plugins = Toolbox::default();
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
