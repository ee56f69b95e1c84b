//! `scale-costs`: what running as replicas costs, for BENCHMARKS.md: plugin
//! store operations a second on PostgreSQL beside the embedded SQLite
//! store (one client, then 16 at once), and the time a plugin call takes
//! with its rate limit and chat budget kept in PostgreSQL (shared by
//! replicas) beside kept in memory. Measured in one run, so the ratios
//! compare like with like.
//!
//!     scale-costs POSTGRES_URL CALC_WASM [OPS]

use std::sync::Arc;
use std::time::{Duration, Instant};

use sandwit::policy::StoreLimits;
use sandwit::store::{Entry, Namespace, Scope, SqliteStore, StoreBackend};
use sandwit::{AgentCtx, Host, Policy};
use sandwit_postgres::Postgres;

/// `ops` operations from `clients` tasks at once: operations a second.
async fn store_rate(store: Arc<dyn StoreBackend>, clients: usize, ops: usize, write: bool) -> f64 {
    let limits = StoreLimits::default();
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let store = store.clone();
            tokio::spawn(async move {
                let ns = Namespace {
                    plugin: "bench".into(),
                    scope: Scope::Chat,
                    owner: format!("chat{c}"),
                    tenant: String::new(),
                };
                for i in 0..ops / clients {
                    let key = format!("k{}", i % 100);
                    if write {
                        let value = Entry::Text(format!("value {i}"));
                        store.set(&ns, &key, &value, &limits).await.unwrap();
                    } else {
                        store.get(&ns, &key).await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (ops / clients * clients) as f64 / start.elapsed().as_secs_f64()
}

/// The median time of a call of calc's `calculate_sum` under a rate limit
/// and a chat budget, over `calls` calls.
async fn call_time(host: &Host, calc: &str, calls: usize) -> Duration {
    let plugin = host.load_plugin_file(calc).await.unwrap();
    let ctx = AgentCtx::new("bench-chat");
    let args = sandwit::json::value_from_json(serde_json::json!({"num1": 1, "num2": 2}));
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let result = plugin.call(&ctx, "calculate_sum", args.clone()).await;
        times.push(start.elapsed());
        result.unwrap_or_else(|e| panic!("the call failed: {e}"));
    }
    times.sort();
    times[times.len() / 2]
}

fn policy() -> Policy {
    Policy::from_toml(
        "[plugins.calc.methods.calculate_sum]\nrate_limit = 1000000\ncost_per_use = 0.000001\n\
         [budgets]\nper_chat = 1000000000.0\n",
    )
    .expect("the bench's policy")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, calc, rest @ ..] = &args[..] else {
        anyhow::bail!("usage: scale-costs POSTGRES_URL CALC_WASM [OPS]");
    };
    let ops: usize = rest.first().map_or(Ok(4000), |n| n.parse())?;
    let dir = std::env::temp_dir().join(format!("scale-costs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let pg = Arc::new(Postgres::connect(url).await?);
    let sqlite: Arc<dyn StoreBackend> = Arc::new(SqliteStore::open(dir.join("store.db"))?);

    println!(
        "| store operation | clients | SQLite (ops/s) | PostgreSQL (ops/s) | PostgreSQL / SQLite |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, write) in [("set", true), ("get", false)] {
        for clients in [1, 16] {
            let local = store_rate(sqlite.clone(), clients, ops, write).await;
            let shared = store_rate(pg.clone(), clients, ops, write).await;
            println!(
                "| {name} | {clients} | {local:.0} | {shared:.0} | {:.2} |",
                shared / local
            );
        }
    }

    let calls = ops.min(2000);
    let in_memory = Host::builder().policy(policy()).build()?;
    let shared = Host::builder()
        .policy(policy())
        .shared_controls(pg.clone())
        .build()?;
    // Warm both (instances, code) before measuring.
    call_time(&in_memory, calc, 50).await;
    call_time(&shared, calc, 50).await;
    let local = call_time(&in_memory, calc, calls).await;
    let remote = call_time(&shared, calc, calls).await;
    println!();
    println!("| a call under a rate limit and a chat budget | median (µs) |");
    println!("|---|---:|");
    println!("| controls in memory | {:.0} |", local.as_secs_f64() * 1e6);
    println!(
        "| controls in PostgreSQL (shared by replicas) | {:.0} |",
        remote.as_secs_f64() * 1e6
    );
    println!(
        "| the shared controls' cost per call | {:.0} |",
        (remote.as_secs_f64() - local.as_secs_f64()) * 1e6
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
