//! `sandwit plugin new/build` and the lifecycle hooks in `sandwit prompt`.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{artifacts, assert_succeeded, pin_line, tempdir};

fn sandwit_in(dir: &Path, args: &[&str]) -> Output {
    sandwit_with(dir, args, &[])
}

fn sandwit_with(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Output {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .envs(env.iter().copied())
        .current_dir(dir)
        .arg("--cache-dir")
        .arg(tmp.join("cli-cache"))
        .env("SANDWIT_STORE", dir.join("store.db"))
        // The pinned componentize-py interpreter/build installed: the test
        // downloads nothing.
        .env(
            "SANDWIT_COMPONENTIZE_PY",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/componentize-py"),
        )
        .env_remove("SANDWIT_POLICY")
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A Python project `name` in a folder of the test's own (`case`), its
/// `plugin.py` being `source`: the folder, to build and run in.
fn python_project(case: &str, name: &str, source: &str) -> std::path::PathBuf {
    let dir = tempdir("plugin-projects", case);
    let project = dir.join(name);
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("plugin.py"), source).unwrap();
    dir
}

/// The text of a file of sdk/python.
fn sdk_file(path: &str) -> String {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python");
    std::fs::read_to_string(sdk.join(path)).unwrap()
}

/// Asserts that `said` contains every one of `parts`.
#[track_caller]
fn assert_mentions(said: &str, parts: &[&str]) {
    for part in parts {
        assert!(said.contains(part), "{part}: {said}");
    }
}

#[test]
fn a_new_python_project_builds_validates_and_answers() {
    let dir = tempdir("plugin-projects", "python");
    assert_succeeded(&sandwit_in(
        &dir,
        &["plugin", "new", "greeter", "--lang", "python"],
    ));
    let source = std::fs::read_to_string(dir.join("greeter/plugin.py")).unwrap();
    assert!(source.contains("@plugin.mount_sandbox_method(SandboxMethodType.TOOL"));
    assert!(dir.join("greeter/tests/test_plugin.py").exists());

    let out = sandwit_in(&dir, &["plugin", "build", "greeter"]);
    assert_succeeded(&out);
    assert!(
        text(&out.stdout)
            .contains("greeter/target/greeter.wasm: acceptable (greeter 0.1.0, 1 methods"),
        "{}",
        text(&out.stdout)
    );
    let out = sandwit_in(
        &dir,
        &[
            "call",
            "greeter/target/greeter.wasm",
            "greet",
            "--args",
            r#"{"name": "Ada"}"#,
        ],
    );
    assert_succeeded(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"kind": "tool", "value": "Hello, Ada!"})
    );
}

#[test]
fn plugin_new_and_build_name_what_is_wrong() {
    let dir = tempdir("plugin-projects", "errors");
    let out = sandwit_in(&dir, &["plugin", "new", "Not-An-Id", "--lang", "python"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a plugin id"),
        "{}",
        text(&out.stderr)
    );
    assert_succeeded(&sandwit_in(
        &dir,
        &["plugin", "new", "twice", "--lang", "python"],
    ));
    let out = sandwit_in(&dir, &["plugin", "new", "twice", "--lang", "rust"]);
    assert!(
        text(&out.stderr).contains("twice already exists"),
        "{}",
        text(&out.stderr)
    );
    let out = sandwit_in(&dir, &["plugin", "build", "."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "is not a plugin project: it has no Cargo.toml (Rust), plugin.py (Python) or package.json (JavaScript, TypeScript)"
        ),
        "{}",
        text(&out.stderr)
    );
    for args in [
        &["plugin", "--help"][..],
        &["plugin", "new", "--help"],
        &["plugin", "build", "--help"],
    ] {
        let out = sandwit_in(&dir, args);
        assert_succeeded(&out);
        assert!(
            text(&out.stdout).contains("Usage: sandwit plugin"),
            "{args:?}"
        );
    }
}

#[test]
fn prompt_lists_what_a_plugin_injects_for_the_chat() {
    let dir = tempdir("plugin-projects", "prompt");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[plugins.memo]\n{}grant = [\"store\"]\n",
            pin_line(artifacts::MEMO)
        ),
    )
    .unwrap();
    let policy = policy.to_str().unwrap();
    let with_user = [
        "--policy",
        policy,
        "--plugin",
        artifacts::MEMO,
        "--user-id",
        "ada",
    ];
    let out = sandwit_in(&dir, &[&["prompt"][..], &with_user].concat());
    assert_succeeded(&out);
    let listing = text(&out.stdout);
    assert!(listing.contains("def save_memo(memo"), "{listing}");
    assert!(!listing.contains("[plugin `memo`]"), "{listing}");

    let out = sandwit_in(
        &dir,
        &[&["run"][..], &with_user, &["-c", "save_memo('tea')"]].concat(),
    );
    assert_succeeded(&out);
    let out = sandwit_in(&dir, &[&["prompt"][..], &with_user].concat());
    let listing = text(&out.stdout);
    assert!(
        listing.contains("[plugin `memo`]\nThe user has 1 memo(s) saved; list_memos() reads them."),
        "{listing}"
    );
    // Without a user the plugin offers no method: none is listed or callable.
    let out = sandwit_in(
        &dir,
        &["prompt", "--policy", policy, "--plugin", artifacts::MEMO],
    );
    assert!(
        !text(&out.stdout).contains("def save_memo"),
        "{}",
        text(&out.stdout)
    );
    let out = sandwit_in(
        &dir,
        &[
            "run",
            "--policy",
            policy,
            "--plugin",
            artifacts::MEMO,
            "-c",
            "list_memos()",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    // The run's report is on stderr.
    assert!(
        text(&out.stderr).contains("NameError"),
        "{}",
        text(&out.stderr)
    );
}

/// A loopback weather API answering every request with 200 and
/// `{"temperature_c": 17.5, "summary": "Clear"}`, counting the requests.
fn weather_api() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let body = r#"{"temperature_c": 17.5, "summary": "Clear"}"#;
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, count)
}

/// The issue's "done when" in one place: a plugin written with Nekro's
/// decorator API (the forecast example) builds with `sandwit plugin build`,
/// passes `sandwit validate`, works from sandboxed code with the config,
/// store, chat and HTTP capabilities (HTTP to a loopback API granted by
/// port), is listed by `sandwit prompt` with its injected prompt, and is
/// refused the API when HTTP is not granted.
#[test]
fn a_nekro_style_python_plugin_builds_validates_and_reaches_a_granted_api() {
    let source = sdk_file("examples/forecast/plugin.py");
    let dir = python_project("forecast", "forecast", &source);
    let project = dir.join("forecast");
    let out = sandwit_in(&dir, &["plugin", "build", "forecast"]);
    assert_succeeded(&out);
    assert!(
        text(&out.stdout)
            .contains("forecast/target/forecast.wasm: acceptable (forecast 0.1.0, 2 methods"),
        "{}",
        text(&out.stdout)
    );
    let wasm = project.join("target/forecast.wasm");
    let wasm = wasm.to_str().unwrap();
    assert_succeeded(&sandwit_in(&dir, &["validate", wasm]));

    let (port, requests) = weather_api();
    let policy = |grant: &str| {
        let path = dir.join(format!("policy-{}.toml", grant.len()));
        std::fs::write(
            &path,
            format!(
                "[plugins.forecast]\n{}grant = [{grant}]\n\
                 config = {{ BASE_URL = \"http://127.0.0.1:{port}\", API_KEY = \"k-123456\" }}\n\
                 secrets = [\"API_KEY\"]\n",
                pin_line(wasm)
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    };
    let granted = policy(&format!(
        "\"config\", \"store\", \"chat\", \"http:127.0.0.1:{port}\""
    ));
    let as_ada = ["--plugin", wasm, "--user-id", "ada"];
    let out = sandwit_in(
        &dir,
        &[
            &["run", "--policy", &granted][..],
            &as_ada,
            &[
                "-c",
                "w = current_weather('Porto')\nprint(w['temperature_c'], w['summary'])",
            ],
        ]
        .concat(),
    );
    assert_succeeded(&out);
    assert!(
        text(&out.stdout).contains("17.5 Clear"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    let out = sandwit_in(
        &dir,
        &[&["prompt", "--policy", &granted][..], &as_ada].concat(),
    );
    assert_succeeded(&out);
    let listing = text(&out.stdout);
    assert!(listing.contains("def current_weather(city"), "{listing}");
    assert!(
        listing.contains("[plugin `forecast`]\nThe user last asked about the weather in Porto."),
        "{listing}"
    );

    let refused = policy("\"config\", \"store\", \"chat\"");
    let out = sandwit_in(
        &dir,
        &[
            &["run", "--policy", &refused][..],
            &as_ada,
            &["-c", "current_weather('Porto')"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(1));
    let report = text(&out.stderr);
    assert!(
        report.contains(&format!(
            "current_weather: http: the host did not grant a capability for 127.0.0.1:{port} \
             (request one like `http:127.0.0.1:{port}`)"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "denied [forecast] GET http://127.0.0.1:{port}/v1/current?city=Porto: \
             capability `http:127.0.0.1:{port}` not granted"
        )),
        "{report}"
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "nothing more reached the API"
    );
}

/// `sandwit plugin new --lang rust` and `plugin build`: the project depends
/// on this tree's sdk/rust by path and builds offline, in the guests'
/// target directory (tests/artifacts builds there) so the SDK's
/// dependencies are compiled once.
#[test]
fn a_new_rust_project_builds_and_validates() {
    let dir = tempdir("plugin-projects", "rust");
    assert_succeeded(&sandwit_in(
        &dir,
        &["plugin", "new", "adder", "--lang", "rust"],
    ));
    let manifest = std::fs::read_to_string(dir.join("adder/Cargo.toml")).unwrap();
    let sdk =
        std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/rust")).unwrap();
    assert!(
        manifest.contains(&format!(
            "sandwit-sdk = {{ path = {:?} }}",
            sdk.display().to_string()
        )),
        "{manifest}"
    );
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guests");
    let out = sandwit_with(
        &dir,
        &["plugin", "build", "adder"],
        &[
            ("CARGO_TARGET_DIR", target.as_os_str()),
            ("CARGO_NET_OFFLINE", "true".as_ref()),
        ],
    );
    assert_succeeded(&out);
    assert!(
        text(&out.stdout).contains("adder.wasm: acceptable (adder 0.1.0, 1 methods"),
        "{}",
        text(&out.stdout)
    );
    let wasm = target.join("wasm32-wasip2/release/adder.wasm");
    let out = sandwit_in(
        &dir,
        &[
            "call",
            wasm.to_str().unwrap(),
            "greet",
            "--args",
            r#"{"name": "Ada"}"#,
        ],
    );
    assert_succeeded(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"kind": "tool", "value": "Hello, Ada!"})
    );
}

/// A Python plugin's exceptions reach its author as Python errors: the
/// type, the message and the plugin's own file and line, in a method's
/// error (`sandwit call`, a run's events) and in a failing hook's warning,
/// with no wasm backtrace; the failing prompt hook costs only its text.
#[test]
fn a_python_plugins_errors_name_the_exception_and_its_line() {
    let dir = python_project(
        "python-errors",
        "broken",
        r#"from sandwit_plugin import AgentCtx, NekroPlugin, SandboxMethodType

plugin = NekroPlugin(name="Broken", module_name="broken", description="Fails on purpose.",
                     version="0.1.0", author="tests", url="")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="ok", description="Works")
async def fine(_ctx: AgentCtx) -> str:
    """Works.

    Returns:
        str: The chat key.
    """
    return _ctx.from_chat_key


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="bad", description="Fails")
async def bad(_ctx: AgentCtx) -> str:
    """Fails.

    Returns:
        str: Nothing.
    """
    return helper(_ctx)


def helper(ctx):
    return ctx.no_such_field


@plugin.mount_prompt_inject_method(name="p")
async def prompt(_ctx: AgentCtx) -> str:
    return "chat " + _ctx.missing_in_hook
"#,
    );
    // The build runs the hooks once on a sample chat: the prompt hook's
    // exception fails it, naming the exception and its line.
    let out = sandwit_in(&dir, &["plugin", "build", "broken"]);
    assert!(!out.status.success());
    let said = text(&out.stdout);
    assert_mentions(
        &said,
        &[
            "rejected",
            "its prompt-inject hook fails on a sample chat",
            "AttributeError: 'AgentCtx' object has no attribute 'missing_in_hook'",
            "File \"plugin.py\", line 33, in prompt",
        ],
    );
    // The component it built, served anyway, shows the same at run time.
    let wasm = "broken/target/broken.wasm";

    let out = sandwit_in(&dir, &["call", "--json", wasm, "bad"]);
    assert!(!out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = json["error"]["kind"]["message"]
        .as_str()
        .unwrap_or_default();
    assert_mentions(
        said,
        &[
            "AttributeError",
            "no_such_field",
            "File \"plugin.py\", line 24, in bad",
            "File \"plugin.py\", line 28, in helper",
        ],
    );
    assert!(!said.contains("wasm backtrace"), "{said}");

    let out = sandwit_in(&dir, &["run", "--plugin", wasm, "-c", "print(fine())"]);
    assert_succeeded(&out);
    // The prompt hook failed: its text is lost, the methods stay.
    assert_eq!(text(&out.stdout), "cli\n");
    let err = text(&out.stderr);
    assert_mentions(
        &err,
        &[
            "prompt hook failed",
            "AttributeError",
            "missing_in_hook",
            "File \"plugin.py\", line 33, in prompt",
        ],
    );
    assert!(
        !err.contains("wasm backtrace") && !err.contains("libc.so"),
        "{err}"
    );
}

/// A plugin written as Nekro Agent's documentation shows
/// (sdk/python/tests/nekro_style), with no edit: `sandwit plugin build`
/// builds it with Nekro's import paths and pydantic's `Field`, and its
/// methods, hooks, config and store work in a run.
#[test]
fn a_nekro_plugin_builds_and_runs_unchanged() {
    let source = sdk_file("tests/nekro_style/plugin.py");
    let dir = python_project("nekro-unchanged", "nekro_notes", &source);
    let project = dir.join("nekro_notes");
    let out = sandwit_in(&dir, &["plugin", "build", "nekro_notes"]);
    assert_succeeded(&out);
    assert!(
        text(&out.stdout).contains("acceptable (nekro_notes 0.1.0, 4 methods"),
        "{}",
        text(&out.stdout)
    );
    let wasm = "nekro_notes/target/nekro_notes.wasm";
    let policy = dir.join("policy.toml");
    let pin = pin_line(project.join("target/nekro_notes.wasm").to_str().unwrap());
    std::fs::write(
        &policy,
        format!(
            "[plugins.nekro_notes]\n{pin}grant = [\"store\", \"chat\", \"config\"]\n\
             config = {{ MAX_NOTE_LENGTH = 5 }}\n"
        ),
    )
    .unwrap();
    let policy = policy.to_str().unwrap();
    let run = |code: &str| {
        let args = [
            "run",
            "--json",
            "--policy",
            policy,
            "--plugin",
            wasm,
            "--chat-key",
            "g1",
            "-c",
            code,
        ];
        let out = sandwit_in(&dir, &args);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)))
    };
    let json = run("print(set_note('g1', 'buy milk and eggs'))\nprint(read_note('g1'))");
    assert_eq!(json["status"], "ok", "{json}");
    // The operator's MAX_NOTE_LENGTH, read through the module-level config.
    assert_eq!(json["stdout"], "5\nbuy m\n", "{json}");
    let events = json["events"].to_string();
    assert!(
        events.contains("note: buy m"),
        "the message reached the chat: {events}"
    );
    let out = sandwit_in(
        &dir,
        &[
            "prompt",
            "--policy",
            policy,
            "--plugin",
            wasm,
            "--chat-key",
            "g1",
        ],
    );
    assert_succeeded(&out);
    assert!(
        text(&out.stdout).contains("The chat's note: buy m"),
        "{}",
        text(&out.stdout)
    );
}

/// A Python plugin whose module raises on import fails its build with the
/// Python traceback (its file and line), not componentize-py's backtrace.
#[test]
fn a_python_plugin_that_raises_on_import_fails_its_build_with_the_traceback() {
    let dir = python_project(
        "python-import-error",
        "importerr",
        "from sandwit_plugin import NekroPlugin\n\n\
         plugin = NekroPlugin(name=\"x\", module_name=\"importerr\", description=\"d\", \
         version=\"0.1.0\", author=\"t\", url=\"\")\n\
         SETTINGS = {\"a\": 1}\n\
         LIMIT = SETTINGS[\"missing\"]\n",
    );
    let out = sandwit_in(&dir, &["plugin", "build", "importerr"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_mentions(&err, &["plugin.py\", line 5", "KeyError: 'missing'"]);
    assert!(!err.contains("Stack backtrace"), "{err}");
}
