//! `sandwit prepare`: compiles into the cache everything a host will use,
//! so that a host started on it is as fast in its first seconds as one that
//! has served for a while; the cache can then be copied to replicas.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use sandwit::Host;
use sandwit::paths::env_path;

/// The longest `prepare` waits for the interpreter's code for reuse.
const REUSE_WAIT: Duration = Duration::from_secs(900);

#[derive(Args)]
pub struct PrepareArgs {
    #[command(flatten)]
    plugins: crate::run::PluginArgs,
    /// The CPython component [default: as for `sandwit run`].
    #[arg(long, value_name = "FILE")]
    python: Option<PathBuf>,
    /// The scientific interpreter's directory, compiled and prepared too
    /// [default: $SANDWIT_SCIENTIFIC, if set; else it is left out].
    #[arg(long, value_name = "DIR")]
    scientific_dir: Option<PathBuf>,
}

pub async fn prepare(host: Host, args: PrepareArgs) -> anyhow::Result<ExitCode> {
    let Some(cache) = host.cache_dir().map(PathBuf::from) else {
        anyhow::bail!("there is nothing to prepare without a cache: drop --no-cache");
    };
    let started = Instant::now();
    let plugins = crate::run::load_plugins(&host, &args.plugins).await?;
    eprintln!("sandwit: {} plugin(s) compiled", plugins.len());
    let python = crate::interpreter::load(&host, args.python.clone()).await?;
    // The interpreter runs are served by is compiled a second time, for the
    // engine that reuses interpreters (on an idle-priority thread).
    if !python.reuses_interpreters() {
        eprint!("sandwit: compiling the interpreter for reuse across runs (once)...");
        let waiting = Instant::now();
        while !python.reuses_interpreters() {
            anyhow::ensure!(
                waiting.elapsed() < REUSE_WAIT,
                "the interpreter's code for reuse was not compiled within {} s",
                REUSE_WAIT.as_secs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(" done in {:.1} s", waiting.elapsed().as_secs_f64());
    }
    if let Some(dir) = args
        .scientific_dir
        .or_else(|| env_path("SANDWIT_SCIENTIFIC"))
    {
        let scientific = crate::interpreter::load_scientific(&host, Some(dir)).await?;
        eprintln!(
            "sandwit: the scientific interpreter is ready (prepared in {:.1} s)",
            scientific.prepared_in().as_secs_f64()
        );
    }
    outln!(
        "prepared {} in {:.1} s: a host started with --cache-dir {} compiles nothing. The \
         directory may be copied to replicas running this sandwit build on the same CPU \
         family (docs/SERVICE.md, \"Prepared caches\").",
        cache.display(),
        started.elapsed().as_secs_f64(),
        cache.display()
    );
    Ok(ExitCode::SUCCESS)
}
