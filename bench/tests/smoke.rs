//! A quick run of the whole bench (`sandwit-bench --quick`), checking the
//! harness end to end: every sandwit scenario measured, the `python3 -c`
//! peer run, and every other peer either run or listed as not run. It takes
//! tens of seconds; its numbers mean nothing.

use std::path::PathBuf;
use std::process::Command;

use sandwit_test_artifacts as artifacts;

#[test]
fn a_quick_run_measures_every_scenario() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let json = tmp.join("bench-smoke.json");
    let echo = PathBuf::from(artifacts::ECHO);
    assert_eq!(
        echo.with_file_name("calc.wasm"),
        PathBuf::from(artifacts::CALC)
    );
    let status = Command::new(env!("CARGO_BIN_EXE_sandwit-bench"))
        .arg("--quick")
        .arg("--python")
        .arg(artifacts::PYTHON)
        .arg("--echo")
        .arg(&echo)
        // The tests' cache: the interpreter compiled for the default and
        // the deadline-only metering is there already.
        .arg("--cache-dir")
        .arg(tmp.join("sandwit-cache"))
        .arg("--json")
        .arg(&json)
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
    let python3: Vec<_> = peers
        .iter()
        .filter(|r| {
            r["scenario"]
                .as_str()
                .unwrap()
                .starts_with("peer python3 -c: ")
        })
        .collect();
    assert_eq!(python3.len(), 1 + 4 * 2, "{python3:?}");
    for row in python3 {
        assert!(measured(row) && row["ratio"].is_number(), "{row}");
    }
    for row in &peers {
        let not_run = row["scenario"].as_str().unwrap().ends_with("not run");
        assert!(measured(row) || not_run, "{row}");
    }
}
