//! `plugin-costs`: what a plugin costs by the language it is written in, for
//! BENCHMARKS.md: component size, first compile, cached load, a call in a
//! fresh instance (the first call of a run: instantiation included), the
//! first call of a run that takes an instance made ahead
//! (`HostBuilder::prepared_plugin_instances`) and the later calls of a run
//! (the instance kept), for the Rust `notes` plugin, the Python `memo`
//! plugin and the JavaScript `jotter` plugin doing the same work (reading
//! the user's list from the store).
//!
//!     plugin-costs PYTHON_SANDBOX NOTES_WASM MEMO_WASM JOTTER_WASM [CALLS]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sandwit::json::value_from_json;
use sandwit::{AgentCtx, Event, Host, Plugin, Policy, Toolbox};

/// Runs measured per plugin and way of instantiating.
const RUNS: usize = 15;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A host; `ahead` has interpreters prepared and plugin instances made
/// ahead of runs (the defaults), else neither.
fn host(cache: &Path, policy: &Policy, store: &Path, ahead: bool) -> Host {
    let builder = Host::builder()
        .policy(policy.clone())
        .store_path(store)
        .cache_dir(cache);
    let builder = if ahead {
        builder
    } else {
        builder.prepared_interpreters(0)
    };
    builder.build().unwrap()
}

/// The time of each plugin call of a run, in order.
fn call_times(outcome: &sandwit::RunOutcome) -> Vec<f64> {
    outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Call { ms, .. } => Some(*ms),
            _ => None,
        })
        .collect()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [python, notes, memo, jotter, rest @ ..] = &args[..] else {
        eprintln!("usage: plugin-costs PYTHON_SANDBOX NOTES_WASM MEMO_WASM JOTTER_WASM [CALLS]");
        std::process::exit(2);
    };
    let calls: usize = rest.first().map_or(50, |n| n.parse().unwrap());
    let tmp = std::env::temp_dir().join(format!("sandwit-plugin-costs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let digest = |p: &str| sandwit::component_hash(&std::fs::read(p).unwrap());
    let policy = Policy::from_toml(&format!(
        "[plugins.notes]\nsha256 = [\"{}\"]\ngrant = [\"store\"]\n\
         [plugins.memo]\nsha256 = [\"{}\"]\ngrant = [\"store\"]\n\
         [plugins.jotter]\nsha256 = [\"{}\"]\ngrant = [\"store\"]\n",
        digest(notes),
        digest(memo),
        digest(jotter)
    ))
    .unwrap();
    let store = tmp.join("store.db");
    let cache = tmp.join("cache");
    let ctx = AgentCtx {
        user_id: Some("bench".into()),
        ..AgentCtx::new("bench")
    };
    println!(
        "| plugin | size | first compile | cached load | call in a fresh instance, p50 | first call of a run, p50 | first call, instance made ahead, p50 | later calls of a run, p50 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (path, method) in [
        (notes, "recall"),
        (memo, "list_memos"),
        (jotter, "jottings"),
    ] {
        let size = std::fs::metadata(path).unwrap().len();
        let cold = host(&cache, &policy, &store, false);
        let start = Instant::now();
        cold.load_plugin_file(path).await.unwrap();
        let compile = start.elapsed();
        drop(cold);
        let warm = host(&cache, &policy, &store, false);
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
        let set = Toolbox::new(std::slice::from_ref(&plugin)).unwrap();
        let code = format!("for _ in range({calls}):\n    {method}()\n");
        let (mut first, mut later) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let outcome = sandbox.run(&ctx, &set, &code).await;
            let times = call_times(&outcome);
            assert_eq!(times.len(), calls, "{outcome:?}");
            first.push(times[0]);
            later.extend(&times[1..]);
        }
        // The same runs on a host that makes instances ahead: each run waits
        // for the interpreter and the instance the thread makes after the
        // run before.
        let ahead = host(&cache, &policy, &store, true);
        let plugin_ahead = ahead.load_plugin_file(path).await.unwrap();
        let sandbox_ahead = ahead.load_python_file(PathBuf::from(python)).await.unwrap();
        let set_ahead = Toolbox::new(std::slice::from_ref(&plugin_ahead)).unwrap();
        let mut made_ahead = Vec::new();
        for i in 0..=RUNS {
            let waited = Instant::now();
            while i > 0 && (plugin_ahead.prepared_instances() == 0 || sandbox_ahead.prepared() == 0)
            {
                assert!(
                    waited.elapsed() < Duration::from_secs(60),
                    "no instance made ahead"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            let outcome = sandbox_ahead.run(&ctx, &set_ahead, &code).await;
            let times = call_times(&outcome);
            assert_eq!(times.len(), calls, "{outcome:?}");
            // The first run names the plugins to the thread.
            if i > 0 {
                made_ahead.push(times[0]);
            }
        }
        println!(
            "| {} | {:.1} MB | {:.2} s | {:.1} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.3} ms |",
            plugin.id(),
            size as f64 / 1e6,
            compile.as_secs_f64(),
            ms(cached),
            median(fresh),
            median(first),
            median(made_ahead),
            median(later),
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
