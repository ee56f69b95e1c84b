//! `probe`: what one agent script's runs cost, in measures that survive a
//! busy machine, for BENCHMARKS.md's "What dominates each cost": per run,
//! the CPU time and the page faults of the thread that runs
//! it (`CLOCK_THREAD_CPUTIME_ID` and `getrusage`, so the preparing thread's work is
//! not counted), beside its wall-clock time.
//!
//!     probe [--pace MS] [--runs N] [--metering fuel|deadline|off]
//!           [--python FILE] [--prepared N] [--ready] [--inside K | --once] SCRIPT
//!
//! SCRIPT is a file, or one of `print`, `data`, `text`, `tool`, `compute`,
//! `table`, `tree`
//! (bench/workloads). `--pace 0` (the default) runs back to back, else one
//! run starts every MS ms; `--ready` waits, untimed, before each run until
//! the sandbox has its interpreters prepared (restored). `--inside K` instead runs one sandboxed run that
//! compiles and executes the script K times, timing each part inside the
//! interpreter (warm, on one instance); `--once` runs it once and prints
//! what it printed. The CPython component and the calc
//! plugin are this tree's (`target/`; `--python` names another interpreter), as for `sandwit-bench`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use sandwit::{AgentCtx, Host, Metering, PythonSandbox, Toolbox};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn quantile(mut xs: Vec<f64>, q: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

/// The calling thread's CPU time, in ns (the VM has no hardware counters
/// for `perf_event_open` to count instructions with).
fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime fills the structure.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

fn minor_faults() -> i64 {
    // SAFETY: getrusage fills the structure.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage.ru_minflt
    }
}

fn workload(name: &str) -> anyhow::Result<String> {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = match name {
        "print" => return Ok("print(1 + 1)\n".into()),
        "data" => "data.py",
        "text" => "text.py",
        "tool" => "tool_loop.py",
        "compute" => "compute.py",
        "table" => "table.py",
        "tree" => "tree.py",
        path => {
            return std::fs::read_to_string(path).with_context(|| {
                format!("reading the script {path} (nor is it a bench script's name)")
            });
        }
    };
    let path = tree.join("workloads").join(file);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Code that compiles and runs `script` `k` times in fresh namespaces and
/// prints the medians of each part in µs: compiling, running, and of the
/// run the time `re` spent compiling patterns (its cache emptied before
/// each time, as a fresh run finds it), then the modules the script
/// imported that the interpreter had not (none, when the snapshot holds
/// them all). The script goes in as the hex of
/// its UTF-8 (`bytes.fromhex`, a builtin): a Rust string literal (`{:?}`)
/// is not a Python one (`\u{1b}` is a SyntaxError there).
fn inside(script: &str, k: usize) -> String {
    let hex: String = script.bytes().map(|b| format!("{b:02x}")).collect();
    format!(
        "import time as _t, gc as _gc, sys as _s, io as _io, re as _re\n\
         _src = bytes.fromhex('{hex}').decode('utf-8')\n\
         _c, _r, _x = [], [], []\n\
         _out = _s.stdout\n\
         _compile_re, _re_ns = _re._compile, [0]\n\
         def _timed_re(*a, **kw):\n\
         \x20   _a = _t.perf_counter_ns()\n\
         \x20   try:\n\
         \x20       return _compile_re(*a, **kw)\n\
         \x20   finally:\n\
         \x20       _re_ns[0] += _t.perf_counter_ns() - _a\n\
         _re._compile = _timed_re\n\
         _known = set(_s.modules)\n\
         for _i in range({k}):\n\
         \x20   _re.purge(); _re_ns[0] = 0\n\
         \x20   _a = _t.perf_counter_ns()\n\
         \x20   _code = compile(_src, '<code>', 'exec')\n\
         \x20   _b = _t.perf_counter_ns()\n\
         \x20   _s.stdout = _io.StringIO()\n\
         \x20   exec(_code, {{'__name__': '__main__', 'calculate_sum': calculate_sum}})\n\
         \x20   _s.stdout = _out\n\
         \x20   _e = _t.perf_counter_ns()\n\
         \x20   _c.append(_b - _a); _r.append(_e - _b); _x.append(_re_ns[0])\n\
         _c.sort(); _r.sort(); _x.sort()\n\
         _new = sorted(set(_s.modules) - _known)\n\
         print('compile', _c[len(_c)//2] / 1e3, 'run', _r[len(_r)//2] / 1e3, 'of which re compiling', _x[len(_x)//2] / 1e3, 'us (medians of {k}); modules imported:', ' '.join(_new) or 'none')\n"
    )
}

/// How the interrupt checks are paid for (`Metering`), as `--metering` names it.
#[derive(Clone, Copy, clap::ValueEnum)]
enum MeteringArg {
    /// Fuel and the deadline (the default).
    Fuel,
    /// The deadline only (epoch interruption).
    Deadline,
    /// No metering.
    Off,
}

impl From<MeteringArg> for Metering {
    fn from(arg: MeteringArg) -> Self {
        match arg {
            MeteringArg::Fuel => Metering::FuelAndDeadline,
            MeteringArg::Deadline => Metering::DeadlineOnly,
            MeteringArg::Off => Metering::Off,
        }
    }
}

#[derive(Parser)]
#[command(
    about = "What one agent script's runs cost: per run, wall-clock time, the run thread's CPU time \
             and minor page faults, fuel, and the pages restored (BENCHMARKS.md)"
)]
struct Args {
    /// A Python file, or one of the bench's scripts: print, data, text, tool,
    /// compute, table, tree (bench/workloads).
    #[arg(default_value = "print")]
    script: String,
    /// Start one run every MS ms (0: back to back).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pace: u64,
    /// Timed runs (after 2 untimed ones; the medians need one).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// How the runs' interrupt checks are paid for.
    #[arg(long, value_enum, default_value = "fuel")]
    metering: MeteringArg,
    /// The CPython component [default: this tree's target/python/sandbox.wasm].
    #[arg(long, value_name = "FILE")]
    python: Option<PathBuf>,
    /// Interpreters the sandbox keeps prepared (restored).
    #[arg(long, default_value_t = 2)]
    prepared: usize,
    /// Before each run, wait (untimed) until the sandbox has its
    /// interpreters prepared again.
    #[arg(long)]
    ready: bool,
    /// Instead, one run that compiles and executes the script K times, timing
    /// each part inside the interpreter.
    #[arg(long, value_name = "K", conflicts_with = "once",
          value_parser = clap::value_parser!(u64).range(1..))]
    inside: Option<u64>,
    /// Instead, run the script once and print what it printed.
    #[arg(long)]
    once: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let Args {
        script,
        pace,
        runs,
        metering,
        python: python_file,
        prepared,
        ready: ready_first,
        inside: inside_times,
        once,
    } = Args::parse();
    let runs = runs as usize;
    let metering = Metering::from(metering);
    let script = workload(&script)?;
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let host = Host::builder()
        .cache_dir(tree.join("target/sandwit-cache"))
        .metering(metering)
        .prepared_interpreters(prepared)
        .build()?;
    let python = host
        .load_python_file(python_file.unwrap_or_else(|| tree.join("target/python/sandbox.wasm")))
        .await?;
    let guests = tree.join("target/guests/wasm32-wasip2/guest");
    let calc = host.load_plugin_file(guests.join("calc.wasm")).await?;
    let plugins = Toolbox::new(&[calc])?;
    let ctx = AgentCtx::new("probe");
    if inside_times.is_some() || once {
        let code = match inside_times {
            Some(k) => inside(&script, k as usize),
            None => script.clone(),
        };
        let outcome = python.run(&ctx, &plugins, &code).await;
        print!("{}", outcome.stdout);
        eprint!("{}", outcome.stderr);
        if outcome.status != sandwit::RunStatus::Ok {
            eprintln!("{:?}: {:?}", outcome.status, outcome.limit);
        }
        if let Some(error) = outcome.error {
            anyhow::bail!("{}: {}", error.type_name, error.message);
        }
        return Ok(());
    }
    // Until the thread has its reusable interpreters (compiled once per cache).
    let ready = Instant::now();
    while prepared > 0
        && !(python.reuses_interpreters() && python.prepared() >= prepared)
        && ready.elapsed() < Duration::from_secs(600)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "reuses {} prepared {}",
        python.reuses_interpreters(),
        python.prepared()
    );
    let (mut wall, mut cpu, mut faults) = (Vec::new(), Vec::new(), Vec::new());
    let (mut on_prepared, mut on_reused, mut fuel) = (0, 0, Vec::new());
    // Until the sandbox holds `prepared` restored interpreters again (a
    // run's restore happens after it, on the preparing thread).
    let restored = async || {
        while python.prepared() < prepared {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    };
    let mut pages_before = (0, 0);
    let mut next = Instant::now();
    for i in 0..runs + 2 {
        if i == 2 {
            // The warm-up runs' restores are not counted.
            restored().await;
            pages_before = PythonSandbox::restored_pages();
        }
        if pace > 0 {
            tokio::time::sleep_until(next.into()).await;
            next = Instant::now() + Duration::from_millis(pace);
        }
        if ready_first {
            restored().await;
        }
        let (i0, f0, t0) = (thread_cpu_ns(), minor_faults(), Instant::now());
        let outcome = python.run(&ctx, &plugins, &script).await;
        let (t1, f1, i1) = (t0.elapsed(), minor_faults(), thread_cpu_ns());
        anyhow::ensure!(outcome.error.is_none(), "{:?}", outcome.error);
        if i >= 2 {
            wall.push(t1.as_secs_f64() * 1e6);
            cpu.push((i1 - i0) as f64);
            faults.push((f1 - f0) as f64);
            on_prepared += usize::from(outcome.prepared);
            on_reused += usize::from(outcome.reused);
            fuel.push(outcome.fuel_used as f64);
        }
    }
    restored().await;
    let pages_after = PythonSandbox::restored_pages();
    let per_run = |after: usize, before: usize| (after - before) as f64 / runs as f64;
    println!(
        "wall p50 {:.0} µs p90 {:.0} µs | thread CPU p50 {:.0} µs | minor faults p50 {} mean {:.1} | fuel p50 {:.0} | pages restored per run: written {:.1}, copied back {:.1} | {on_prepared}/{runs} prepared, {on_reused} reused",
        median(wall.clone()),
        quantile(wall, 0.9),
        median(cpu) / 1e3,
        median(faults.clone()),
        faults.iter().sum::<f64>() / faults.len() as f64,
        median(fuel),
        per_run(pages_after.0, pages_before.0),
        per_run(pages_after.1, pages_before.1),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::inside;

    #[test]
    fn inside_embeds_any_script_as_the_hex_of_its_utf8() {
        let script = "print('\x1b[1mbold\\n', \"é\", '\u{1F600}')\n\t\r\0\u{7f}";
        let code = inside(script, 3);
        let line = code
            .lines()
            .find(|l| l.starts_with("_src = "))
            .expect("the _src line");
        let hex = line
            .strip_prefix("_src = bytes.fromhex('")
            .and_then(|l| l.strip_suffix("').decode('utf-8')"))
            .expect("a hex literal");
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(String::from_utf8(bytes).unwrap(), script);
        // Nothing but printable ASCII and newlines reaches the Python source.
        assert!(
            code.chars().all(|c| c == '\n' || (' '..='~').contains(&c)),
            "{code}"
        );
        assert!(code.contains("range(3)"));
    }
}
