//! The worker process `sandwit validate` checks a component in: a child
//! `sandwit` with this process's arguments and [`WORKER_ENV`] set (it then
//! checks in-process and prints JSON), whose writable memory
//! (`RLIMIT_DATA`) and CPU time (`RLIMIT_CPU`) the kernel caps, and whose
//! wall time this process caps. Compiling a component has no bound of its
//! own inside wasmtime; in the worker, a component crafted to make it slow
//! or large costs the validating host a bounded amount, and the verdict is
//! a rejection naming the budget.
//!
//! The worker's scratch directory ([`ScratchDir`], which the validating
//! process owns and removes, however the worker ends) is its compiled-code
//! cache when it is given none: the check loads the plugin twice (as given,
//! then with what it requests granted, to run its lifecycle hooks), and
//! without a cache the second load would compile it again, doubling the
//! CPU time a large component (a JavaScript plugin's engine) needs of the
//! budget.

use std::ffi::OsString;
use std::io::Read;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Set in the worker's environment, to its scratch directory: check in
/// this process, print JSON. The arguments stay as the user gave them, `--`
/// and all.
pub const WORKER_ENV: &str = "SANDWIT_VALIDATE_WORKER";

/// In the worker, the compiled-code cache to use if it was given none: in
/// its scratch directory.
pub fn scratch_cache() -> Option<PathBuf> {
    std::env::var_os(WORKER_ENV)
        .filter(|dir| !dir.is_empty())
        .map(|dir| PathBuf::from(dir).join("cache"))
}

/// A private directory (mode 0700), removed when dropped: a check's files
/// and its worker's scratch space.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A new directory in `parent` (made if needed), named after `label`.
    pub fn new(parent: &Path, label: &str) -> anyhow::Result<Self> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
        // Unique in this process; `create` (not recursive) fails rather than
        // reuse a directory left by another.
        static MADE: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "{label}-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(ScratchDir(dir))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `bytes` to a new file `name` in it (mode 0600).
    pub fn write(&self, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
        let path = self.0.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(bytes)?;
        Ok(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the worker may use.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Writable memory, in MiB.
    pub memory_mib: u64,
    /// CPU time over all its threads, in seconds; the wall clock gets twice
    /// this and 10 s more (a loaded machine gives the worker less than a
    /// core).
    pub cpu_seconds: u64,
}

/// How the worker ended.
pub enum Ended {
    /// It finished the check and printed its JSON report.
    Reported(serde_json::Value),
    /// It ran out of its budget, or died: why, as a problem to list.
    Failed(String),
}

/// The most the worker's report may take; a report lists at most 100
/// problems of bounded size, far less than this.
const MAX_REPORT_BYTES: u64 = 8 << 20;
/// What is kept of the worker's stderr, to explain a death.
const MAX_STDERR_BYTES: u64 = 64 << 10;

/// Runs `sandwit <args>` as the worker under `budget`, without the
/// environment variables `unset`, with `scratch` as its scratch directory,
/// and reads its report.
pub fn check(
    args: Vec<OsString>,
    budget: Budget,
    unset: &[&str],
    scratch: &ScratchDir,
) -> anyhow::Result<Ended> {
    let mut cmd = Command::new(std::env::current_exe()?);
    for key in unset {
        cmd.env_remove(key);
    }
    cmd.args(args)
        .env(WORKER_ENV, scratch.path())
        // A backtrace needs memory the worker may no longer have; printing
        // one after a failed allocation can hang.
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let data = budget.memory_mib.saturating_mul(1 << 20);
    let cpu = budget.cpu_seconds.max(1);
    let parent = std::process::id();
    // SAFETY: between fork and exec the closure only makes async-signal-safe
    // system calls (setrlimit, prctl, getppid) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            set_limit(libc::RLIMIT_DATA, data, data)?;
            // SIGXCPU at the budget, SIGKILL a second later if it is caught.
            set_limit(libc::RLIMIT_CPU, cpu, cpu.saturating_add(1))?;
            // A hostile component must not make the worker write a core of
            // up to its whole budget wherever it runs.
            set_limit(libc::RLIMIT_CORE, 0, 0)?;
            // The worker dies with this process, even of SIGKILL...
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // ...including if this process died before the call above.
            if libc::getppid() != parent as libc::pid_t {
                return Err(std::io::Error::other("the validating process is gone"));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let read_out = std::thread::spawn(move || read_capped(stdout, MAX_REPORT_BYTES));
    let read_err = std::thread::spawn(move || read_capped(stderr, MAX_STDERR_BYTES));

    let wall = Duration::from_secs(cpu.saturating_mul(2).saturating_add(10));
    let start = Instant::now();
    let mut killed = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.into());
            }
        }
        if start.elapsed() > wall {
            let _ = child.kill();
            killed = true;
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = read_out.join().unwrap_or_default();
    let err = read_err.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&err);

    if killed {
        return Ok(Ended::Failed(format!(
            "checking it took more than {} s of wall-clock time (the worker's budget)",
            wall.as_secs()
        )));
    }
    if let Ok(report) = serde_json::from_slice::<serde_json::Value>(&out)
        && report.get("ok").is_some()
    {
        return Ok(Ended::Reported(report));
    }
    let why = match status.signal() {
        Some(libc::SIGXCPU) => {
            format!("checking it used more than {cpu} s of CPU time (the worker's budget)")
        }
        Some(libc::SIGKILL) => format!(
            "the worker checking it was killed: past its CPU budget of {cpu} s, or by the \
             system (out of memory?)"
        ),
        // A thread that cannot get its stack fails with EAGAIN.
        _ if [
            "memory allocation",
            "out of memory",
            "Cannot allocate memory",
            "Resource temporarily unavailable",
        ]
        .iter()
        .any(|m| err.contains(m)) =>
        {
            format!(
                "checking it needed more than {} MiB of memory (the worker's budget)",
                budget.memory_mib
            )
        }
        Some(signal) => format!(
            "the worker checking it died of signal {signal}: {}",
            last_line(&err)
        ),
        None => format!(
            "the worker checking it failed ({status}): {}",
            last_line(&err)
        ),
    };
    Ok(Ended::Failed(why))
}

/// The type of setrlimit's resource argument, which glibc names apart.
#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

fn set_limit(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `limit` is a valid rlimit for the call's duration.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reads up to `max` bytes, then drains the rest so the child never blocks
/// on a full pipe.
fn read_capped(from: impl Read, max: u64) -> Vec<u8> {
    let mut from = from;
    let mut kept = Vec::new();
    let _ = from.by_ref().take(max).read_to_end(&mut kept);
    let _ = std::io::copy(&mut from, &mut std::io::sink());
    kept
}

fn last_line(text: &str) -> &str {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    &line[..line.floor_char_boundary(500)]
}
