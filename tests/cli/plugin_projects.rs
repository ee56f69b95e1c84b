//! `sandwit plugin new/build` and the lifecycle hooks in `sandwit prompt`.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{artifacts, assert_succeeded, pin_line, tempdir};

fn sandwit_in(dir: &Path, args: &[&str]) -> Output {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .current_dir(dir)
        .arg("--cache-dir")
        .arg(tmp.join("cli-cache"))
        .env("SANDWIT_STORE", dir.join("store.db"))
        // The pinned componentize-py python-guest/build installed: the test
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
            "is not a plugin project: it has neither a Cargo.toml (Rust) nor a plugin.py (Python)"
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
    assert!(
        text(&out.stdout).contains("NameError"),
        "{}",
        text(&out.stdout)
    );
}
