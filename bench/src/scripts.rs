//! The agent scripts (bench/workloads): code of the kind an agent writes,
//! each run at two paces, by sandwit here and by the peers (peers.rs).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::report::{Row, Samples, script_scenario, us};
use crate::scenarios::check;
use crate::setup::Setup;
use crate::workloads::{PACES, Pace, SCRIPTS};

/// Untimed runs before each script and pace's timed ones.
pub const WARM_UP: usize = 2;

/// The times of `runs` calls of `run` at `pace`, after [`WARM_UP`] untimed
/// ones at the same pace.
pub async fn paced(
    pace: &Pace,
    runs: usize,
    mut run: impl AsyncFnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Samples> {
    let mut times = Vec::with_capacity(runs);
    let mut next = Instant::now();
    for i in 0..WARM_UP + runs {
        if let Some(period) = pace.period {
            tokio::time::sleep_until(next.into()).await;
            next = Instant::now() + period;
        }
        let start = Instant::now();
        run().await?;
        if i >= WARM_UP {
            times.push(start.elapsed());
        }
    }
    Ok(Samples::new(times))
}

/// A row of a script at a pace, its value the p50 in µs.
pub fn script_row(scenario: String, times: &Samples, note: String) -> Row {
    let mut row = Row::new(scenario, us(times.at(0.5)), "µs", note);
    row.p90 = Some(us(times.at(0.9)));
    row
}

/// Runs every script at every pace in sandwit's sandbox with the echo and
/// calc plugins, and returns what each script printed (the same every run),
/// which the peers' output must match.
pub async fn sandwit(
    setup: &Setup,
    rows: &mut Vec<Row>,
) -> anyhow::Result<BTreeMap<&'static str, String>> {
    let runs = setup.options.reps(setup.options.runs);
    let mut outputs = BTreeMap::new();
    for script in &SCRIPTS {
        for pace in &PACES {
            let mut prepared = 0;
            let printed = outputs.get(script.name).cloned();
            let mut printed_now = None;
            let times = paced(pace, runs, async || {
                let outcome = setup
                    .python
                    .run(&setup.ctx, &setup.plugins, script.code)
                    .await;
                check(&outcome)?;
                prepared += usize::from(outcome.prepared);
                let expected = printed.as_ref().or(printed_now.as_ref());
                if let Some(expected) = expected {
                    anyhow::ensure!(
                        outcome.stdout == *expected,
                        "agent script {} printed {:?}, then {:?}",
                        script.name,
                        expected,
                        outcome.stdout
                    );
                } else {
                    printed_now = Some(outcome.stdout);
                }
                Ok(())
            })
            .await?;
            if let Some(output) = printed_now {
                outputs.insert(script.name, output);
            }
            let note = format!(
                "p50 of {runs} runs, {}; p90 {:.0} µs; {prepared} of {} on a prepared interpreter",
                pace_note(pace),
                us(times.at(0.9)),
                runs + WARM_UP,
            );
            rows.push(script_row(
                script_scenario(script.name, pace.label),
                &times,
                note,
            ));
        }
    }
    Ok(outputs)
}

/// How a pace's runs came, for a row's note.
pub fn pace_note(pace: &Pace) -> String {
    match pace.period {
        Some(period) => format!("one started every {} ms", period.as_millis()),
        None => "back to back".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn spaced_runs_start_a_period_apart_and_warm_ups_are_not_timed() {
        let pace = Pace {
            label: "test",
            period: Some(Duration::from_millis(10)),
        };
        let mut starts = Vec::new();
        let times = paced(&pace, 3, async || {
            starts.push(Instant::now());
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(times.len(), 3);
        assert_eq!(starts.len(), WARM_UP + 3);
        for pair in starts.windows(2) {
            assert!(pair[1] - pair[0] >= Duration::from_millis(10));
        }
    }

    #[test]
    fn every_script_is_in_the_grid_once() {
        let mut names: Vec<_> = SCRIPTS.iter().map(|s| s.name).collect();
        names.dedup();
        assert_eq!(names.len(), SCRIPTS.len());
        assert!(SCRIPTS[2].code.contains("calculate_sum("));
    }
}
