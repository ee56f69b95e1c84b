//! `plugin-costs`: what a plugin costs by the language it is written in, for
//! BENCHMARKS.md: component size, first compile, cached load, a call in a
//! fresh instance (the first call of a run: instantiation included) and the
//! later calls of a run (the instance kept), for the Rust `notes` plugin and
//! the Python `memo` plugin doing the same work (reading the user's list
//! from the store).
//!
//!     plugin-costs PYTHON_SANDBOX NOTES_WASM MEMO_WASM [CALLS]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sandwit::json::value_from_json;
use sandwit::{AgentCtx, Event, Host, Plugin, PluginSet, Policy};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn host(cache: &Path, policy: &Policy, store: &Path) -> Host {
    Host::builder()
        .policy(policy.clone())
        .store_path(store)
        .cache_dir(cache)
        .prepared_interpreters(0)
        .build()
        .unwrap()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [python, notes, memo, rest @ ..] = &args[..] else {
        eprintln!("usage: plugin-costs PYTHON_SANDBOX NOTES_WASM MEMO_WASM [CALLS]");
        std::process::exit(2);
    };
    let calls: usize = rest.first().map_or(50, |n| n.parse().unwrap());
    let tmp = std::env::temp_dir().join(format!("sandwit-plugin-costs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let digest = |p: &str| sandwit::component_hash(&std::fs::read(p).unwrap());
    let policy = Policy::from_toml(&format!(
        "[plugins.notes]\nsha256 = [\"{}\"]\ngrant = [\"store\"]\n\
         [plugins.memo]\nsha256 = [\"{}\"]\ngrant = [\"store\"]\n",
        digest(notes),
        digest(memo)
    ))
    .unwrap();
    let store = tmp.join("store.db");
    let cache = tmp.join("cache");
    let ctx = AgentCtx {
        user_id: Some("bench".into()),
        ..AgentCtx::new("bench")
    };
    println!(
        "| plugin | size | first compile | cached load | call in a fresh instance, p50 | first call of a run, p50 | later calls of a run, p50 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (path, method) in [(notes, "recall"), (memo, "list_memos")] {
        let size = std::fs::metadata(path).unwrap().len();
        let cold = host(&cache, &policy, &store);
        let start = Instant::now();
        cold.load_plugin_file(path).await.unwrap();
        let compile = start.elapsed();
        drop(cold);
        let warm = host(&cache, &policy, &store);
        let start = Instant::now();
        let plugin: Plugin = warm.load_plugin_file(path).await.unwrap();
        let cached = start.elapsed();
        let args = value_from_json(serde_json::json!({}));
        let mut fresh = Vec::new();
        for _ in 0..calls {
            let start = Instant::now();
            plugin.call(&ctx, method, args.clone()).await.unwrap();
            fresh.push(ms(start.elapsed()));
        }
        let sandbox = warm.load_python_file(PathBuf::from(python)).await.unwrap();
        let set = PluginSet::new(std::slice::from_ref(&plugin)).unwrap();
        let code = format!("for _ in range({calls}):\n    {method}()\n");
        let (mut first, mut later) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let outcome = sandbox.run(&ctx, &set, &code).await;
            let times: Vec<f64> = outcome
                .events
                .iter()
                .filter_map(|e| match e {
                    Event::Call { ms, .. } => Some(*ms),
                    _ => None,
                })
                .collect();
            assert_eq!(times.len(), calls, "{outcome:?}");
            first.push(times[0]);
            later.extend(&times[1..]);
        }
        println!(
            "| {} | {:.1} MB | {:.2} s | {:.1} ms | {:.2} ms | {:.2} ms | {:.3} ms |",
            plugin.id(),
            size as f64 / 1e6,
            compile.as_secs_f64(),
            ms(cached),
            median(fresh),
            median(first),
            median(later),
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
