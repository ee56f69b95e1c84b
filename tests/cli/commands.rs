//! The `sandwit` command line, run as a separate process.

use std::process::{Command, Output, Stdio};

use crate::common::{artifacts, assert_succeeded, tempdir};

fn sandwit(args: &[&str]) -> Output {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(tmp.join("cli-cache"))
        .env("SANDWIT_STORE", tmp.join("cli-store.db"))
        .env_remove("SANDWIT_POLICY")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn validate_accepts_and_rejects_with_exit_status() {
    let out = sandwit(&["validate", artifacts::CALC]);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("acceptable (calc 0.1.0, 2 methods, capabilities requested: none)")
    );

    let out = sandwit(&["validate", artifacts::BAD_MANIFEST]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("rejected, 7 problem(s)"), "{text}");
    assert!(text.contains("reserved for the host"), "{text}");

    let out = sandwit(&["validate", "--json", artifacts::OTHER_WORLD]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert!(
        json["problems"][0]
            .as_str()
            .unwrap()
            .contains("does not export")
    );
}

#[test]
fn validate_checks_in_a_worker_under_a_memory_and_cpu_budget() {
    // Too little memory for the check: a rejection naming the budget.
    let out = sandwit(&[
        "validate",
        "--no-cache",
        "--max-check-mib",
        "20",
        artifacts::CALC,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("needed more than 20 MiB of memory (the worker's budget)"),
        "{text}"
    );
    // Compiling the CPython component takes seconds of CPU: past a budget of
    // one, the worker is stopped and the verdict says why.
    let out = sandwit(&[
        "validate",
        "--json",
        "--no-cache",
        "--max-check-seconds",
        "1",
        artifacts::PYTHON,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    let problem = json["problems"][0].as_str().unwrap();
    assert!(problem.contains("more than 1 s of CPU time"), "{problem}");
    // The same budgets, generous, accept a good plugin; the worker gets the
    // arguments as given, `--` included.
    let out = sandwit(&["validate", "--max-check-mib", "256", "--", artifacts::CALC]);
    assert!(out.status.success(), "{}", stdout(&out));
    // Budgets out of range are refused before anything runs.
    let out = sandwit(&["validate", "--max-check-seconds", "0", artifacts::CALC]);
    assert_eq!(out.status.code(), Some(2));
}

/// A check loads a plugin with lifecycle hooks twice (as given, then with
/// what it requests granted, to run its hooks): a worker given no cache
/// compiles it once, into its scratch directory, and the validating process
/// removes that directory after the check.
#[test]
fn validate_without_a_cache_compiles_once_and_leaves_no_scratch() {
    let bin = env!("CARGO_BIN_EXE_sandwit");
    let scratch = tempdir("commands", "validate-worker-scratch");
    // As the worker: the log shows each compile.
    let out = Command::new(bin)
        .args(["--no-cache", "validate", artifacts::LIFECYCLE])
        .env("SANDWIT_VALIDATE_WORKER", &scratch)
        .env("SANDWIT_LOG", "sandwit=info")
        .env_remove("SANDWIT_POLICY")
        .output()
        .unwrap();
    assert_succeeded(&out);
    let log = stderr(&out);
    assert_eq!(log.matches("compiled a component").count(), 1, "{log}");
    assert!(scratch.join("cache").is_dir());
    // As the user runs it: the worker's scratch goes with the check.
    let tmp = tempdir("commands", "validate-tmpdir");
    let out = Command::new(bin)
        .args(["--no-cache", "validate", artifacts::LIFECYCLE])
        .env("TMPDIR", &tmp)
        .env_remove("SANDWIT_POLICY")
        .output()
        .unwrap();
    assert_succeeded(&out);
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn call_prints_typed_results_and_errors() {
    let out = sandwit(&[
        "call",
        artifacts::CALC,
        "calculate_sum",
        "--args",
        r#"{"num1": 1, "num2": 2}"#,
    ]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json, serde_json::json!({"kind": "tool", "value": 3}));

    let out = sandwit(&[
        "call",
        artifacts::CALC,
        "calculate_sum",
        "--args",
        r#"{"num1": 1}"#,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("plugin `calc`, method `calculate_sum`: invalid arguments: missing required argument `num2`"),
        "{err}"
    );

    let out = sandwit(&["call", artifacts::CALC, "calculate_sum", "--args", "{oops"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--args is not valid JSON"));
}

#[test]
fn call_writes_images_to_files() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-images");
    let out = sandwit(&[
        "call",
        artifacts::IMAGEGEN,
        "generate_image_and_comment",
        "--args",
        r#"{"topic": "tides"}"#,
        "--out-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert_succeeded(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let image = &json["result"]["parts"][1];
    assert_eq!(image["mime_type"], "image/png");
    let bytes = std::fs::read(image["path"].as_str().unwrap()).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(image["bytes"], bytes.len());
}

#[test]
fn inspect_shows_methods_and_a_second_process_uses_the_cache() {
    let out = sandwit(&["inspect", artifacts::KNOWLEDGE]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("search_knowledge_base(query, max_results=None)  [agent]"),
        "{text}"
    );
    assert!(
        text.contains("wasi:cli/environment"),
        "imports are listed: {text}"
    );
    // The first run above compiled or found the code; this second process
    // must find it in the cache.
    let out = sandwit(&["inspect", "--json", artifacts::KNOWLEDGE]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["code"], "disk_cache");
    assert_eq!(json["manifest"]["methods"][0]["kind"], "agent");
}

#[test]
fn the_cache_keeps_to_its_cap_across_processes() {
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.join("cli-cache-capped");
    let _ = std::fs::remove_dir_all(&dir);
    let code = |cap: &str, file: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
            .args(["--cache-max-mib", cap, "inspect", "--json", file])
            .arg("--cache-dir")
            .arg(&dir)
            .env("SANDWIT_STORE", tmp.join("cli-store.db"))
            .env_remove("SANDWIT_POLICY")
            .output()
            .unwrap();
        assert_succeeded(&out);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["code"].as_str().unwrap().to_string()
    };
    assert_eq!(code("0", artifacts::CALC), "compiled");
    assert_eq!(code("0", artifacts::CALC), "disk_cache");
    // A cap of 0 keeps only the entry just written: echo's deletes calc's.
    assert_eq!(code("0", artifacts::ECHO), "compiled");
    assert_eq!(code("1024", artifacts::CALC), "compiled");
    assert_eq!(code("1024", artifacts::ECHO), "disk_cache");
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["inspect", "validate", "call", "run", "prompt"] {
        let out = sandwit(&[sub, "--help"]);
        assert!(out.status.success(), "{sub} --help");
        assert!(stdout(&out).contains("Usage: sandwit"), "{sub}");
    }
}

#[test]
fn run_keeps_a_chats_files_in_its_workspace() {
    let root = tempdir("run", "workspace");
    let root = root.to_str().unwrap();
    let run = |chat: &str, code: &str| {
        let args = [
            "run",
            "--json",
            "--python",
            artifacts::PYTHON,
            "--workspace",
            root,
        ];
        let out = sandwit(&[&args[..], &["--chat-key", chat, "-c", code]].concat());
        assert_succeeded(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let json = run(
        "a",
        "import os\nprint(os.getcwd())\nopen('n.txt', 'w').write('kept')",
    );
    assert_eq!(json["stdout"], "/workspace\n");
    assert_eq!(
        json["files"],
        serde_json::json!([{"path": "n.txt", "size": 4}])
    );
    let json = run("a", "print(open('n.txt').read())");
    assert_eq!(json["stdout"], "kept\n");
    let json = run("b", "import os\nprint(os.listdir('.'))");
    assert_eq!(json["stdout"], "[]\n");
}

#[test]
fn run_prints_the_outcome_as_json_with_exit_status() {
    let python = ["--python", artifacts::PYTHON];
    let plugins = [
        "--plugin",
        artifacts::CALC,
        "--plugin",
        artifacts::KNOWLEDGE,
    ];
    let run_with = |code: &str, extra: &[&str]| {
        let mut args = vec!["run", "--json"];
        args.extend(python);
        args.extend(plugins);
        args.extend(extra);
        args.extend(["-c", code]);
        let out = sandwit(&args);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), json)
    };
    let run = |code: &str| run_with(code, &[]);
    let (code, json) = run("print(calculate_sum(1, 2))");
    assert_eq!(code, Some(0));
    assert_eq!(json["status"], "ok");
    assert_eq!(json["stdout"], "3\n");
    assert_eq!(json["error"], serde_json::Value::Null);
    assert_eq!(json["events"][0]["type"], "call");
    assert_eq!(json["events"][0]["method"], "calculate_sum");

    let (code, json) = run("search_knowledge_base('fuel')\nprint('no')");
    assert_eq!(code, Some(0), "an agent handoff is a success");
    assert_eq!(json["status"], "agent_handoff");
    assert_eq!(json["stdout"], "");
    assert_eq!(json["handoff"]["result"]["kind"], "agent");

    let (code, json) = run("x = 1\n1/0");
    assert_eq!(code, Some(1));
    assert_eq!(json["status"], "error");
    assert_eq!(json["error"]["type"], "ZeroDivisionError");
    assert_eq!(json["error"]["line"], 2);

    // Busy code runs until the time limit set, unless a fuel budget is set.
    let (code, json) = run_with("while True: pass", &["--timeout-ms", "700"]);
    assert_eq!(code, Some(1));
    assert_eq!(json["status"], "limit_exceeded");
    assert_eq!(json["limit"]["kind"], "time");
    assert!(json["ms"].as_f64().unwrap() >= 700.0, "{json}");
    let (_, json) = run_with("while True: pass", &["--fuel", "50000000"]);
    assert_eq!(json["limit"]["kind"], "fuel");

    // Inputs in, the result out.
    let inputs = [
        "--input",
        "n=20",
        "--input",
        "xs=[1, 2]",
        "--input",
        "who=Ada Lovelace",
    ];
    let (code, json) = run_with("calculate_sum(n, sum(xs)), who", &inputs);
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["result"], serde_json::json!([23, "Ada Lovelace"]));
    assert!(json["queued_ms"].as_f64().is_some(), "{json}");
    let (_, json) = run("x = 1");
    assert_eq!(json["result"], serde_json::Value::Null);
    let out = sandwit(&["run", "--input", "no-equals", "-c", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`no-equals` is not NAME=VALUE"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_closed_stdout_ends_the_process_quietly() {
    // `sandwit run ... | head` with the reader gone before anything is written.
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(tmp.join("cli-cache"))
        .args(["run", "--json", "--python", artifacts::PYTHON])
        .args(["--plugin", artifacts::CALC, "-c", "print('x' * 100_000)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn run_reads_a_file_and_uses_the_example_plugins_by_default() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("round.py");
    std::fs::write(&file, "```python\nprint(calculate_sum(2, 3))\n```\n").unwrap();
    let plugin_dir = std::path::Path::new(artifacts::CALC).parent().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .args(["--cache-dir", dir.join("cli-cache").to_str().unwrap()])
        .env("SANDWIT_STORE", dir.join("cli-store.db"))
        .env("SANDWIT_PYTHON", artifacts::PYTHON)
        .env("SANDWIT_PLUGINS", plugin_dir)
        .arg("run")
        .arg(&file)
        .output()
        .unwrap();
    assert_succeeded(&out);
    // The program's output alone on stdout; sandwit's report on stderr.
    assert_eq!(stdout(&out), "5\n");
    let err = stderr(&out);
    assert!(err.contains("── outcome: ok"), "{err}");
}

/// The `sandwit` binary copied out of target/, as an installed one is, run
/// with an empty home, no other environment and a fresh (default) cache:
/// `run` works and says on stderr that it compiles the interpreter, the
/// first time only. Built with SANDWIT_EMBED_PYTHON (scripts/test does), the
/// binary must embed the interpreter; built without, it must say it has none
/// and how to get one, then find one installed in its data folder.
#[test]
fn a_copied_binary_runs_python_and_says_when_it_compiles() {
    struct Removed(std::path::PathBuf);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let root = std::env::temp_dir().join(format!("sandwit-installed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let root = Removed(root);
    let (bin, home, work) = (root.0.join("bin"), root.0.join("home"), root.0.join("work"));
    for dir in [&bin, &home, &work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let exe = bin.join("sandwit");
    std::fs::copy(env!("CARGO_BIN_EXE_sandwit"), &exe).unwrap();
    let sandwit = |args: &[&str]| {
        // A process another test thread forks while the copy's file is
        // open for writing holds that descriptor until it execs, and until
        // then executing the copy fails with ETXTBSY: try again.
        for _ in 0..100 {
            match Command::new(&exe)
                .args(args)
                .current_dir(&work)
                .env_clear()
                .env("HOME", &home)
                .output()
            {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                out => return out.unwrap(),
            }
        }
        panic!("{} stayed busy for 2 s", exe.display());
    };
    let version = stdout(&sandwit(&["--version"]));
    if option_env!("SANDWIT_EMBED_PYTHON").is_some_and(|p| !p.is_empty()) {
        assert!(
            version.contains("(Python interpreter embedded, sha256 "),
            "{version}"
        );
    } else {
        assert!(
            version.contains("(no Python interpreter embedded)"),
            "{version}"
        );
        let out = sandwit(&["run", "-c", "print(1+1)"]);
        assert_eq!(out.status.code(), Some(1));
        let installed = home.join(".local/share/sandwit/python/sandbox.wasm");
        let err = stderr(&out);
        assert!(err.contains("interpreter/build"), "{err}");
        assert!(err.contains("SANDWIT_EMBED_PYTHON="), "{err}");
        assert!(err.contains(installed.to_str().unwrap()), "{err}");
        std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
        std::fs::copy(artifacts::PYTHON, &installed).unwrap();
    }

    let out = sandwit(&["run", "-c", "print(1+1)"]);
    assert_succeeded(&out);
    assert_eq!(stdout(&out), "2\n");
    let err = stderr(&out);
    let said = "sandwit: compiling the Python interpreter for this machine (once; about 10-30 s)... \
                done in ";
    let first = err.lines().next().unwrap_or_default();
    assert!(first.starts_with(said) && first.ends_with(" s"), "{err}");
    assert!(err.contains("── outcome: ok"), "{err}");
    // Into the default cache, in the home directory.
    assert!(home.join(".cache/sandwit").is_dir());

    let out = sandwit(&["run", "-c", "print(1+1)"]);
    assert_succeeded(&out);
    assert!(stdout(&out).starts_with("2\n"), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(!err.contains("compil"), "{err}");
}

#[test]
fn prompt_lists_methods_for_the_llm() {
    let out = sandwit(&[
        "prompt",
        "--plugin",
        artifacts::CALC,
        "--plugin",
        artifacts::KNOWLEDGE,
    ]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("def calculate_sum(num1, num2):  # tool"),
        "{text}"
    );
    assert!(
        text.contains(
            "def search_knowledge_base(query, max_results=None):  # agent: STOPS THE SCRIPT"
        ),
        "{text}"
    );
    assert!(
        text.contains("    \"\"\"Add two integers and return their sum.\n\n    Args:\n"),
        "{text}"
    );
}

/// `sandwit prepare` compiles what a host will use (here the interpreter,
/// for both its engines, and a plugin) into a fresh cache; a later process
/// on that cache compiles nothing.
#[test]
fn prepare_leaves_nothing_to_compile() {
    let cache = tempdir("prepare", "cache");
    let cache = cache.to_str().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sandwit"))
            .args(["--cache-dir", cache])
            .env_remove("SANDWIT_SCIENTIFIC")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["prepare", "--plugin", artifacts::CALC]);
    assert_succeeded(&out);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("compiling the interpreter for reuse across runs"),
        "{said}"
    );
    assert!(
        stdout(&out).contains(&format!("prepared {cache}")),
        "{}",
        stdout(&out)
    );
    let out = run(&[
        "run",
        "--plugin",
        artifacts::CALC,
        "-c",
        "print(calculate_sum(2, 3))",
    ]);
    assert_succeeded(&out);
    assert!(stdout(&out).starts_with("5\n"), "{}", stdout(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !said.contains("compiling"),
        "a prepared cache compiles nothing: {said}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .args(["--no-cache", "prepare"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("drop --no-cache"));
}

/// `sandwit run` and `sandwit prompt` see a chat as its plugins' lifecycle
/// hooks make it: the `lifecycle` fixture offers `whoami` only to a chat
/// with a user, and injects a prompt naming the chat.
#[test]
fn run_and_prompt_follow_the_plugins_lifecycle_hooks() {
    let plugin = artifacts::LIFECYCLE;
    let code = "print(chat_name())\nwhoami()";
    let out = sandwit(&["run", "--plugin", plugin, "--chat-key", "lobby", "-c", code]);
    assert!(!out.status.success());
    assert_eq!(stdout(&out), "lobby\n", "{}", stderr(&out));
    assert!(stderr(&out).contains("NameError"), "{}", stderr(&out));
    let known = ["--chat-key", "lobby", "--user-id", "ada"];
    let out = sandwit(
        &[
            &["run", "--plugin", plugin][..],
            &known,
            &["-c", "print(whoami())"],
        ]
        .concat(),
    );
    assert_succeeded(&out);
    assert_eq!(stdout(&out), "ada\n");
    let out = sandwit(&["prompt", "--plugin", plugin, "--chat-key", "lobby"]);
    assert_succeeded(&out);
    let listing = stdout(&out);
    assert!(
        listing.contains("[plugin `lifecycle`]\nThis is the chat `lobby`."),
        "{listing}"
    );
    assert!(
        listing.contains("def chat_name(") && !listing.contains("def whoami("),
        "{listing}"
    );
}
