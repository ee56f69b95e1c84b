//! The `sandwit` command line, run as a separate process.

use std::process::{Command, Output};

use crate::common::artifacts;

fn sandwit(args: &[&str]) -> Output {
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache");
    Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(&cache)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn validate_accepts_and_rejects_with_exit_status() {
    let out = sandwit(&["validate", artifacts::CALC]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("acceptable (calc 0.1.0, 2 methods)"));

    let out = sandwit(&["validate", artifacts::BAD_MANIFEST]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("rejected, 5 problem(s)"), "{text}");
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
fn every_subcommand_has_help() {
    for sub in ["inspect", "validate", "call"] {
        let out = sandwit(&[sub, "--help"]);
        assert!(out.status.success(), "{sub} --help");
        assert!(stdout(&out).contains("Usage: sandwit"), "{sub}");
    }
}
