//! A quick run of the whole bench (`sandwit-bench --quick`), checking the
//! harness end to end: every sandwit scenario measured, the `python3 -c`
//! and in-process CPython peers run, and every other peer either run or
//! listed as not run; and `--agent-scripts-only`, which A/B runs use. It
//! takes tens of seconds; its numbers mean nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use sandwit_test_artifacts as artifacts;

/// `sandwit-bench --quick` on the tests' artifacts, writing its rows to `json`.
fn quick_bench(json: &Path) -> Command {
    let mut bench = Command::new(env!("CARGO_BIN_EXE_sandwit-bench"));
    bench
        .arg("--quick")
        .arg("--python")
        .arg(artifacts::PYTHON)
        .arg("--echo")
        .arg(artifacts::ECHO)
        // The tests' cache: the interpreter compiled for the default and
        // the deadline-only metering is there already.
        .arg("--cache-dir")
        .arg(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandwit-cache"))
        .arg("--json")
        .arg(json);
    bench
}

#[test]
fn a_quick_run_measures_every_scenario() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let json = tmp.join("bench-smoke.json");
    let echo = PathBuf::from(artifacts::ECHO);
    assert_eq!(
        echo.with_file_name("calc.wasm"),
        PathBuf::from(artifacts::CALC)
    );
    let status = quick_bench(&json)
        // The machine's Python, whatever it has installed: bench/peers.py
        // lists a peer whose packages are missing (FastAPI, monty) as not
        // run, and its in-process CPython peer needs none.
        .arg("--peers-python")
        .arg("python3")
        .status()
        .expect("starting sandwit-bench");
    assert!(status.success(), "sandwit-bench --quick: {status}");

    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let measured = |row: &serde_json::Value| row["value"].as_f64().is_some();
    let (peers, ours): (Vec<_>, Vec<_>) = rows
        .iter()
        .partition(|r| r["scenario"].as_str().unwrap().starts_with("peer "));
    for row in &ours {
        assert!(measured(row), "not measured: {row}");
    }
    for expected in [
        "fresh sandbox, print(1+1), prepared interpreter, p50",
        "call Python → plugin → Python, nop()",
        "throughput, 64 concurrent runs",
        "CPU-bound loop (20000 iterations), no fuel, no epoch",
        "cold start: new process, cached code, first result",
        "agent script tool loop, spaced 20 ms",
        "agent script compute, back to back",
    ] {
        assert!(
            ours.iter().any(|r| r["scenario"] == expected),
            "no row {expected:?}"
        );
    }
    let peer = |prefix: &str| -> Vec<&serde_json::Value> {
        peers
            .iter()
            .copied()
            .filter(|r| r["scenario"].as_str().unwrap().starts_with(prefix))
            .collect()
    };
    // `print(1+1)` and each agent script at each pace, as sandwit ran them;
    // the in-process CPython the scripts only.
    let scripts = ours
        .iter()
        .filter(|r| r["scenario"].as_str().unwrap().starts_with("agent script "))
        .count();
    assert!(scripts >= 6 * 2, "{scripts} agent-script rows");
    for (prefix, rows) in [
        ("peer python3 -c: ", 1 + scripts),
        ("peer cpython: ", scripts),
    ] {
        let runs = peer(prefix);
        assert_eq!(runs.len(), rows, "{prefix}{runs:?}");
        for row in runs {
            assert!(measured(row) && row["ratio"].is_number(), "{row}");
        }
    }
    for row in &peers {
        let not_run = row["scenario"].as_str().unwrap().ends_with("not run");
        assert!(measured(row) || not_run, "{row}");
    }
}

#[test]
fn agent_scripts_only_measures_every_agent_script_and_nothing_else() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let json = tmp.join("bench-scripts-only.json");
    let status = quick_bench(&json)
        .args(["--agent-scripts-only", "--no-peers"])
        .status()
        .expect("starting sandwit-bench");
    assert!(
        status.success(),
        "sandwit-bench --agent-scripts-only: {status}"
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let scenarios: Vec<&str> = rows
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    // Six scripts at two paces, each measured; no other row.
    assert_eq!(scenarios.len(), 6 * 2, "{scenarios:?}");
    for row in &rows {
        let scenario = row["scenario"].as_str().unwrap();
        assert!(scenario.starts_with("agent script "), "{scenario}");
        assert!(row["value"].as_f64().is_some(), "not measured: {row}");
    }
}

#[test]
fn sessions_only_measures_both_interpreters_sessions() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let json = tmp.join("bench-sessions-only.json");
    let status = quick_bench(&json)
        .args(["--sessions-only", "--no-peers", "--scientific-dir"])
        .arg(artifacts::SCIENTIFIC)
        .status()
        .expect("starting sandwit-bench");
    assert!(status.success(), "sandwit-bench --sessions-only: {status}");
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // A turn in a session and fresh in each interpreter, and turns
    // alternating two hosts in each; every one measured.
    assert_eq!(rows.len(), 6, "{rows:?}");
    for row in &rows {
        let scenario = row["scenario"].as_str().unwrap();
        assert!(scenario.starts_with("session: "), "{scenario}");
        assert!(row["value"].as_f64().is_some(), "not measured: {row}");
    }
}
