//! JavaScript and TypeScript plugins (sdk/js): a TypeScript project from
//! `sandwit plugin new` to AI code, the examples (sdk/js/examples) from AI
//! code, and a hostile plugin contained as Rust and Python ones are.
//!
//! Components are built with `sandwit plugin build` and the pinned tools of
//! .js-tools (`js_tools` of scripts/env.sh, or `$SANDWIT_JS_TOOLS`), except
//! the new project's, which installs its own with npm as an author's does.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use crate::common::{assert_succeeded, cache_dir, pin_line, tempdir};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The folder with the pinned tools' node_modules: `$SANDWIT_JS_TOOLS`
/// (scripts/test exports it), else .js-tools, made by `js_tools` once.
fn js_tools() -> &'static Path {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SANDWIT_JS_TOOLS").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
        let out = Command::new("bash")
            .current_dir(ROOT)
            .args([
                "-c",
                "source scripts/env.sh && js_tools >&2 && printf %s \"$SANDWIT_JS_TOOLS\"",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "js_tools: {}", text(&out.stderr));
        PathBuf::from(text(&out.stdout))
    })
}

/// `sandwit args` in `dir`, with the tests' cache, no policy from the
/// environment, and `env`.
fn sandwit(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .current_dir(dir)
        .arg("--cache-dir")
        .arg(cache_dir())
        .env_remove("SANDWIT_POLICY")
        .env_remove("SANDWIT_PLUGINS")
        // Only the builds that mean to share the tools say so.
        .env_remove("SANDWIT_JS_TOOLS")
        .env("SANDWIT_STORE", dir.join("store.db"))
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap()
}

/// The component of the JavaScript project at `source` (relative to the
/// tree), built once per test process by `sandwit plugin build` in a copy,
/// with the shared tools. Builds run one at a time: each takes both cores.
pub(crate) fn built(source: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = (BUILT.get_or_init(Default::default).lock()).unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(source) {
        return path.clone();
    }
    let name = Path::new(source).file_name().unwrap().to_str().unwrap();
    let dir = tempdir("js-plugins", &format!("build-{name}"));
    let project = dir.join(name);
    copy_dir(&Path::new(ROOT).join(source), &project);
    let out = sandwit(
        &dir,
        &["plugin", "build", name],
        &[("SANDWIT_JS_TOOLS", js_tools().as_os_str())],
    );
    assert_succeeded(&out);
    let wasm = project.join("target").join(format!("{name}.wasm"));
    assert!(wasm.exists(), "{}", text(&out.stderr));
    built.insert(source.to_string(), wasm.clone());
    wasm
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let name = entry.file_name();
        if name == "node_modules" || name == "target" || name == ".sandwit" {
            continue;
        }
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// `sandwit args` in `dir` under its `policy.toml`.
fn with_policy(dir: &Path, args: &[&str]) -> Output {
    let policy = dir.join("policy.toml");
    let args: Vec<&str> = ["--policy", policy.to_str().unwrap()]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    sandwit(dir, &args, &[])
}

/// Asserts that Node's test runner passed every test, showing its report
/// when it did not.
#[track_caller]
fn assert_node_tests_passed(out: &Output) {
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success() && report.contains("# fail 0"),
        "{report}"
    );
}

/// A folder holding `components`, and a policy pinning each and granting
/// it `grants` (a TOML table body per plugin id).
fn plugins_with_policy(case: &str, components: &[(&str, &Path, &str)]) -> (PathBuf, PathBuf) {
    let dir = tempdir("js-plugins", case);
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let mut policy = String::new();
    for (id, wasm, grants) in components {
        std::fs::copy(wasm, plugins.join(format!("{id}.wasm"))).unwrap();
        policy.push_str(&format!(
            "[plugins.{id}]\n{}{grants}\n",
            pin_line(wasm.to_str().unwrap())
        ));
    }
    std::fs::write(dir.join("policy.toml"), policy).unwrap();
    (dir, plugins)
}

#[test]
fn the_examples_answer_ai_code_with_the_store_the_chat_and_an_image() {
    let jotter = built("sdk/js/examples/jotter");
    let sketch = built("sdk/js/examples/sketch");
    // Their own tests pass in Node, on the SDK's fake host (TypeScript
    // through the shared tools' tsx, as `npm test` runs it).
    let tsx = js_tools().join("node_modules/tsx/dist/loader.mjs");
    for (wasm, test) in [(&jotter, "tests/"), (&sketch, "tests/plugin.test.ts")] {
        let project = wasm.parent().unwrap().parent().unwrap();
        let out = Command::new("node")
            .current_dir(project)
            .arg("--import")
            .arg(&tsx)
            .args(["--test", test])
            .output()
            .unwrap();
        assert_node_tests_passed(&out);
    }
    let (dir, plugins) = plugins_with_policy(
        "examples",
        &[
            ("jotter", &jotter, "grant = [\"store\"]"),
            ("sketch", &sketch, "grant = [\"chat\"]"),
        ],
    );
    let run = |code: &str, user: &str| {
        with_policy(
            &dir,
            &[
                "run",
                "--plugins",
                plugins.to_str().unwrap(),
                "--user-id",
                user,
                "--out-dir",
                dir.join("out").to_str().unwrap(),
                "-c",
                code,
            ],
        )
    };
    let out = run(
        "jot('Ada prefers tea.')\nprint('notes:', jot(\"Ada's talk is on Friday.\"))\nprint(jottings())\n\
         print(post_bars([3, 1, 4, 1, 5], 'Pi'))\nsketch_bars([2, 7, 1, 8], 'e')\nprint('not reached')",
        "ada",
    );
    assert_succeeded(&out);
    let said = text(&out.stdout);
    assert!(said.contains("notes: 2\n"), "{said}");
    assert!(
        said.contains("['Ada prefers tea.', \"Ada's talk is on Friday.\"]"),
        "{said}"
    );
    assert!(said.contains("Pi: 5 values, the largest 5."), "{said}");
    assert!(!said.contains("not reached"), "{said}");
    // The chart posted to the chat is an event; the one handed to the AI a
    // multimodal part, its image written to --out-dir.
    let events = text(&out.stderr);
    assert!(
        events.contains("chat [sketch] image: image/png"),
        "{events}"
    );
    assert!(events.contains("e: 4 values, the largest 8."), "{events}");
    let images: Vec<PathBuf> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "png"))
        .collect();
    assert_eq!(images.len(), 1, "{images:?}\n{events}");
    assert!(
        std::fs::read(&images[0])
            .unwrap()
            .starts_with(b"\x89PNG\r\n\x1a\n")
    );

    // Another user sees none of Ada's notes; Ada's prompt counts hers.
    let out = run("print(jottings())", "bob");
    assert_succeeded(&out);
    assert!(
        text(&out.stdout).starts_with("[]\n"),
        "{}",
        text(&out.stdout)
    );
    let out = with_policy(
        &dir,
        &[
            "prompt",
            "--plugins",
            plugins.to_str().unwrap(),
            "--user-id",
            "ada",
        ],
    );
    assert_succeeded(&out);
    let prompt = text(&out.stdout);
    assert!(
        prompt.contains("The user has 2 note(s); jottings() reads them."),
        "{prompt}"
    );
    assert!(prompt.contains("sketch_bars"), "{prompt}");
    assert!(prompt.contains("values"), "{prompt}");
}

#[test]
fn a_hostile_js_plugin_is_contained_and_the_host_keeps_serving() {
    let hostile = built("tests/cli/js/hostile");
    let (dir, _) = plugins_with_policy(
        "hostile",
        &[(
            "hostile-js",
            &hostile,
            "grant = [\"config\", \"chat\"]\nconfig = { api_key = \"sk-live-0123456789\" }",
        )],
    );
    // Short limits, so the endless loop ends soon.
    let call = |method: &str| {
        with_policy(
            &dir,
            &[
                "--timeout-ms",
                "3000",
                "call",
                hostile.to_str().unwrap(),
                method,
                "--json",
            ],
        )
    };
    for (method, says) in [
        ("spin", "ran past its wall-clock deadline"),
        ("grow", "past the limit of 67108864 bytes"),
        ("huge", "more than the limit of 16777216 bytes"),
        ("boom", "TypeError: can't access property"),
    ] {
        let out = call(method);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "{method}: {said}");
        assert!(
            said.contains("hostile-js") && said.contains(method) && said.contains(says),
            "{method}: {said}"
        );
        let out = call("ok");
        assert_succeeded(&out);
        assert!(text(&out.stdout).contains("still serving"));
    }
    // The exception names its line in the author's file.
    let out = call("boom");
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("at parse (plugin.js:37:"), "{said}");
    assert!(!said.contains("initializer.js"), "{said}");
    // The secret (a `key` the SDK marks `secret: true`) is the plugin's to
    // use, and nobody's to read: not in its result, its log line or its
    // chat message.
    let out = call("leak");
    assert_succeeded(&out);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    for redacted in [
        "returned key [secret]",
        "the key is [secret]",
        "chat key [secret]",
    ] {
        assert!(said.contains(redacted), "{redacted}: {said}");
    }
    assert!(!said.contains("sk-live-0123456789"), "{said}");
}

#[test]
fn a_typescript_project_goes_from_new_to_ai_code() {
    let dir = tempdir("js-plugins", "new-ts");
    assert_succeeded(&sandwit(
        &dir,
        &["plugin", "new", "greeter-ts", "--lang", "ts"],
        &[],
    ));
    let project = dir.join("greeter-ts");
    for file in [
        "plugin.ts",
        "tests/plugin.test.ts",
        "tsconfig.json",
        "package.json",
    ] {
        assert!(project.join(file).exists(), "{file}");
    }
    // A type error fails the build, naming the file and line.
    let source = std::fs::read_to_string(project.join("plugin.ts")).unwrap();
    std::fs::write(
        project.join("plugin.ts"),
        source.replace("`${'Hello, '.repeat(times)}${name}!`", "name * 2"),
    )
    .unwrap();
    let out = sandwit(&dir, &["plugin", "build", "greeter-ts"], &[]);
    assert!(!out.status.success());
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("plugin.ts(") && said.contains("tsc --noEmit"),
        "{said}"
    );

    // As written, it builds with the tools npm installs into the project,
    // its tests pass in Node, and AI code calls it.
    std::fs::write(project.join("plugin.ts"), &source).unwrap();
    let out = sandwit(&dir, &["plugin", "build", "greeter-ts"], &[]);
    assert_succeeded(&out);
    let said = text(&out.stderr);
    assert!(said.contains("MB); compiling and checking it"), "{said}");
    assert!(
        text(&out.stdout).contains("acceptable (greeter-ts 0.1.0, 1 methods"),
        "{}",
        text(&out.stdout)
    );
    let test = Command::new("npm")
        .current_dir(&project)
        .args(["test", "--silent"])
        .output()
        .unwrap();
    assert_node_tests_passed(&test);
    assert!(text(&test.stdout).contains("# pass 1"));

    let wasm = project.join("target/greeter-ts.wasm");
    let out = sandwit(
        &dir,
        &[
            "call",
            wasm.to_str().unwrap(),
            "greet",
            "--args",
            r#"{"name": "Ada", "times": 2}"#,
        ],
        &[],
    );
    assert_succeeded(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"kind": "tool", "value": "Hello, Hello, Ada!"})
    );
    // The host checks arguments against the schema made from the type.
    let out = sandwit(
        &dir,
        &[
            "call",
            wasm.to_str().unwrap(),
            "greet",
            "--args",
            r#"{"times": 2}"#,
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("name"), "{}", text(&out.stderr));

    let plugins = project.join("target");
    let out = sandwit(
        &dir,
        &[
            "run",
            "--plugins",
            plugins.to_str().unwrap(),
            "-c",
            "print(greet('Grace'))\nprint(greet(name='Ada', times=3))",
        ],
        &[],
    );
    assert_succeeded(&out);
    assert_eq!(
        text(&out.stdout),
        "Hello, Grace!\nHello, Hello, Hello, Ada!\n"
    );
}

/// A loopback HTTP server answering every request with `{"hello": "js"}`
/// and the `x-asked-by` header it got: its port.
fn echo_api() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut asked_by = String::new();
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("x-asked-by:") {
                    asked_by = v.trim().to_string();
                }
                line.clear();
            }
            let body = format!("{{\"hello\": \"js\", \"asked_by\": \"{asked_by}\"}}");
            let _ = write!(
                &stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn fetch_reaches_a_granted_host_and_no_other() {
    let hostile = built("tests/cli/js/hostile");
    let port = echo_api();
    let (dir, _) = plugins_with_policy(
        "fetch",
        &[(
            "hostile-js",
            &hostile,
            &format!("grant = [\"http:127.0.0.1:{port}\"]"),
        )],
    );
    let get = |url: &str| {
        with_policy(
            &dir,
            &[
                "call",
                hostile.to_str().unwrap(),
                "get",
                "--args",
                &serde_json::json!({ "url": url }).to_string(),
            ],
        )
    };
    let out = get(&format!("http://127.0.0.1:{port}/hello"));
    assert_succeeded(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["value"]["status"], 200);
    assert_eq!(
        json["value"]["body"],
        r#"{"hello": "js", "asked_by": "hostile-js"}"#
    );
    // Another port of the same address was not granted: the request is
    // refused, and the refusal is an event of the call.
    let other = echo_api();
    let out = get(&format!("http://127.0.0.1:{other}/hello"));
    assert!(!out.status.success());
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("hostile-js") && said.contains("get"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "the operator may not have granted `http:127.0.0.1:{other}`"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "denied [hostile-js] GET http://127.0.0.1:{other}/hello"
        )),
        "{said}"
    );
    // A host the plugin does not ask for: the error says so.
    let out = get("http://example.invalid/");
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains(
            "does not ask for `http:example.invalid` (its http capabilities: http:127.0.0.1:*)"
        ),
        "{said}"
    );
}
