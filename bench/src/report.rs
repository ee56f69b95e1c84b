//! The rows the scenarios produce, their statistics, and the printed table
//! and JSON.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use crate::workloads::{PACES, SCRIPTS};

/// One row of the table.
pub struct Row {
    pub scenario: String,
    /// The measure (a p50, a median, a rate, an amount of memory), or NaN
    /// when it could not be measured.
    pub value: f64,
    pub unit: &'static str,
    pub note: String,
    /// The p90, for the rows of agent scripts.
    pub p90: Option<f64>,
    /// sandwit's value ÷ this one, for a peer's row that has a sandwit row
    /// doing the same work.
    pub ratio: Option<f64>,
}

impl Row {
    pub fn new(scenario: impl Into<String>, value: f64, unit: &'static str, note: String) -> Row {
        Row {
            scenario: scenario.into(),
            value,
            unit,
            note,
            p90: None,
            ratio: None,
        }
    }
}

/// Sorted samples of a latency.
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn new(mut times: Vec<Duration>) -> Samples {
        assert!(!times.is_empty(), "no samples");
        times.sort();
        Samples(times)
    }

    /// The `p` quantile (0 to 1), the nearest sample.
    pub fn at(&self, p: f64) -> Duration {
        let i = ((self.0.len() as f64 - 1.0) * p).round() as usize;
        self.0[i.min(self.0.len() - 1)]
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A row of memory measured, or NaN and why it could not be.
pub fn memory_row(
    scenario: &str,
    value: anyhow::Result<f64>,
    unit: &'static str,
    note: String,
) -> Row {
    match value {
        Ok(value) => Row::new(scenario, value, unit, note),
        Err(e) => Row::new(scenario, f64::NAN, unit, format!("not measured: {e:#}")),
    }
}

/// A peer (or one of its scenarios) that could not run, and why.
pub fn not_run(peer: &str, scenario: Option<&str>, reason: &str) -> Row {
    let scenario = match scenario {
        Some(scenario) => format!("peer {peer}: {scenario}: not run"),
        None => format!("peer {peer}: not run"),
    };
    Row::new(scenario, f64::NAN, "", reason.to_string())
}

/// "sandwit ÷ peer = r (n× faster|slower)".
pub fn ratio_text(ratio: f64) -> String {
    let (times, word) = if ratio <= 1.0 {
        (1.0 / ratio, "faster")
    } else {
        (ratio, "slower")
    };
    format!("sandwit ÷ peer = {ratio:.3} ({times:.1}× {word})")
}

/// Prints the table of every row but the agent scripts', then the agent
/// scripts as a grid: script and pace by peer.
pub fn print(rows: &[Row]) {
    // A script's row that did not run stays in the table, with the reason.
    let (scripts, others): (Vec<&Row>, Vec<&Row>) = rows
        .iter()
        .partition(|r| r.scenario.contains(SCRIPT_PREFIX) && !r.value.is_nan());
    let width = others.iter().map(|r| r.scenario.len()).max().unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(out, "{:width$}  {:>12}  note", "scenario", "value");
    for r in &others {
        let _ = writeln!(
            out,
            "{:width$}  {:>9.1} {:<6} {}",
            r.scenario, r.value, r.unit, r.note
        );
    }
    if !scripts.is_empty() {
        out.push('\n');
        out.push_str(&script_grid(rows));
    }
    // A closed stdout (`| head`) ends the output, not the process with a
    // panic.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
}

/// The scenario of the agent scripts' rows start with this (after `peer
/// NAME: ` in a peer's).
pub const SCRIPT_PREFIX: &str = "agent script ";

/// The grid of the agent scripts: p50 / p90 in ms per script, pace and
/// implementation, with sandwit ÷ peer at p50.
fn script_grid(rows: &[Row]) -> String {
    let columns = [
        ("sandwit", String::new()),
        ("pydantic-monty", "peer monty: ".to_string()),
        ("python3 -c", "peer python3 -c: ".to_string()),
        ("CPython in process", "peer cpython: ".to_string()),
    ];
    let mut lines = vec![vec![
        "agent script".to_string(),
        "pace".to_string(),
        columns[0].0.to_string() + " p50 / p90 ms",
        columns[1].0.to_string() + " (sandwit ÷ it)",
        columns[2].0.to_string() + " (sandwit ÷ it)",
        columns[3].0.to_string() + " (sandwit ÷ it)",
    ]];
    for script in SCRIPTS {
        for pace in PACES {
            let scenario = script_scenario(script.name, pace.label);
            let mut line = vec![script.name.to_string(), pace.label.to_string()];
            for (_, prefix) in &columns {
                let name = format!("{prefix}{scenario}");
                let cell = match rows.iter().find(|r| r.scenario == name) {
                    Some(r) if !r.value.is_nan() => {
                        let mut cell = format!(
                            "{:.2} / {:.2}",
                            r.value / 1e3,
                            r.p90.unwrap_or(f64::NAN) / 1e3
                        );
                        if let Some(ratio) = r.ratio {
                            let _ = write!(cell, " ({ratio:.3})");
                        }
                        cell
                    }
                    _ => "not run".to_string(),
                };
                line.push(cell);
            }
            lines.push(line);
        }
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

/// The scenario of a script's row at a pace (a peer's adds `peer NAME: `).
pub fn script_scenario(script: &str, pace: &str) -> String {
    format!("{SCRIPT_PREFIX}{script}, {pace}")
}

/// Writes the rows as a JSON list to `path`.
pub fn write_json(rows: &[Row], path: &Path) -> anyhow::Result<()> {
    let json: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut row = json!({
                "scenario": r.scenario, "value": r.value, "unit": r.unit, "note": r.note,
            });
            if let Some(p90) = r.p90 {
                row["p90"] = json!(p90);
            }
            if let Some(ratio) = r.ratio {
                row["ratio"] = json!(ratio);
            }
            row
        })
        .collect();
    std::fs::write(path, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_the_nearest_sample() {
        let samples = Samples::new((1..=10).rev().map(Duration::from_millis).collect());
        assert_eq!(samples.at(0.5), Duration::from_millis(6));
        assert_eq!(samples.at(0.9), Duration::from_millis(9));
        assert_eq!(samples.at(1.0), Duration::from_millis(10));
        assert_eq!(Samples::new(vec![Duration::ZERO]).at(0.99), Duration::ZERO);
    }

    #[test]
    fn the_grid_has_a_line_per_script_and_pace_and_marks_what_did_not_run() {
        let scenario = script_scenario(SCRIPTS[0].name, PACES[0].label);
        let mut peer = Row::new(
            format!("peer monty: {scenario}"),
            500.0,
            "µs",
            String::new(),
        );
        peer.p90 = Some(700.0);
        peer.ratio = Some(2.0);
        let mut ours = Row::new(scenario, 1000.0, "µs", String::new());
        ours.p90 = Some(1500.0);
        let grid = script_grid(&[ours, peer]);
        assert_eq!(grid.lines().count(), 1 + SCRIPTS.len() * PACES.len());
        let first = grid.lines().nth(1).unwrap();
        assert!(first.contains("1.00 / 1.50"), "{first}");
        assert!(first.contains("0.50 / 0.70 (2.000)"), "{first}");
        assert!(first.ends_with("not run"), "{first}");
    }
}
