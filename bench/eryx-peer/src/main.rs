//! The eryx peer of `sandwit-bench`: eryx (a CPython-in-wasmtime sandbox
//! with host callbacks) doing the work sandwit's rows do, printed as the JSON
//! rows bench/peers.py prints (`peer`, `scenario`, `value` in µs, `note`; or
//! `peer` and `error`).
//!
//! The interpreter is pre-initialised and pre-compiled once, as eryx's own
//! precompile example recommends for the fastest sandboxes; each
//! `Sandbox::execute` is then a fresh instance of it.
//!
//! Usage: eryx-peer [--runs N] [--calls N]

use std::time::Instant;

use eryx::{DynamicCallback, Sandbox};
use serde_json::json;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn p50(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

async fn measure(runs: usize, calls: usize) -> Result<Vec<serde_json::Value>, String> {
    let stdlib = eryx::embedded_stdlib::EmbeddedStdlib::get().map_err(|e| e.to_string())?;
    let preinit = eryx::preinit::pre_initialize(stdlib.path(), None, &[], &[])
        .await
        .map_err(|e| format!("pre-initialising the interpreter: {e}"))?;
    let compiled = eryx::PythonExecutor::precompile(&preinit).map_err(|e| e.to_string())?;
    let nop = DynamicCallback::builder("nop", "does nothing", |_| {
        Box::pin(async { Ok(serde_json::Value::Null) })
    })
    .build();
    let sum = DynamicCallback::builder("calculate_sum", "adds two numbers", |args| {
        Box::pin(async move {
            let a = args["num1"].as_i64().unwrap_or(0);
            let b = args["num2"].as_i64().unwrap_or(0);
            Ok(json!(a + b))
        })
    })
    .param("num1", "integer", "first", true)
    .param("num2", "integer", "second", true)
    .build();
    // SAFETY: the bytes were compiled just above by this process's eryx.
    #[allow(unsafe_code)]
    let sandbox = unsafe {
        Sandbox::builder()
            .with_precompiled_bytes(compiled)
            .with_python_stdlib(stdlib.path())
            .with_callback(nop)
            .with_callback(sum)
            .build()
            .map_err(|e| e.to_string())?
    };
    let run = async |code: &str| -> Result<f64, String> {
        let t = Instant::now();
        let out = sandbox.execute(code).await.map_err(|e| e.to_string())?;
        let elapsed = t.elapsed().as_secs_f64();
        if out.stdout.trim() != "2" && code.starts_with("print") {
            return Err(format!("unexpected output {:?}", out.stdout));
        }
        Ok(elapsed)
    };
    for _ in 0..10 {
        run("print(1+1)").await?;
    }
    let mut fresh = Vec::with_capacity(runs);
    for _ in 0..runs {
        fresh.push(run("print(1+1)").await?);
    }
    let mut rows = vec![json!({
        "peer": "eryx", "scenario": "fresh run, 1+1", "value": p50(fresh) * 1e6,
        "note": format!("p50 of {runs} Sandbox::execute, pre-initialised and pre-compiled interpreter"),
    })];
    for (name, body) in [
        ("call nop()", "await nop()"),
        (
            "call calculate_sum(1, 2)",
            "await calculate_sum(num1=1, num2=2)",
        ),
    ] {
        let with_calls: Vec<f64> = {
            let mut v = Vec::new();
            for _ in 0..5 {
                v.push(run(&format!("for _ in range({calls}):\n    {body}\n")).await?);
            }
            v
        };
        let without: Vec<f64> = {
            let mut v = Vec::new();
            for _ in 0..5 {
                v.push(run(&format!("for _ in range({calls}):\n    pass\n")).await?);
            }
            v
        };
        rows.push(json!({
            "peer": "eryx", "scenario": name,
            "value": (p50(with_calls) - p50(without)) / calls as f64 * 1e6,
            "note": format!("{calls} awaited callbacks in one run, minus the empty loop"),
        }));
    }
    Ok(rows)
}

#[tokio::main]
async fn main() {
    let rows = match measure(arg("--runs", 300), arg("--calls", 1000)).await {
        Ok(rows) => rows,
        Err(e) => vec![json!({"peer": "eryx", "error": e})],
    };
    println!("{}", serde_json::Value::Array(rows));
}
