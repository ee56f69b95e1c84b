//! The plugin store behind the command: what one `sandwit` process stores,
//! the next one finds.

use std::process::Command;

use crate::common::{artifacts, assert_succeeded, cache_dir, pin_line, tempdir};

fn sandwit_cli(store: &std::path::Path, policy: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(cache_dir().join("cli"))
        .arg("--store")
        .arg(store)
        .arg("--policy")
        .arg(policy)
        .args(args)
        .output()
        .unwrap();
    assert_succeeded(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn stored_data_survives_a_restart_of_the_process() {
    let dir = tempdir("store", "restart");
    let (store, policy) = (dir.join("store.db"), dir.join("policy.toml"));
    let pins = pin_line(artifacts::NOTES);
    std::fs::write(
        &policy,
        format!("[plugins.notes]\ngrant = [\"store\"]\n{pins}"),
    )
    .unwrap();
    let user = ["--user-id", "ada"];
    let remember = [
        &[
            "call",
            artifacts::NOTES,
            "remember",
            "--args",
            r#"{"note": "tea, no sugar"}"#,
        ][..],
        &user,
    ]
    .concat();
    assert!(sandwit_cli(&store, &policy, &remember).contains("1"));
    let recall = [&["call", artifacts::NOTES, "recall"][..], &user].concat();
    let out = sandwit_cli(&store, &policy, &recall);
    assert!(out.contains("tea, no sugar"), "{out}");
}
