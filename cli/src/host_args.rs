//! The options every command takes for its host: the cache, the limits,
//! the policy and the store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sandwit::SessionKey;
use sandwit::paths::{data_dir, default_cache_dir, env_path};
use sandwit::{CallLimits, Host, HostBuilder, Policy, RunLimits, StoreLocation};

/// Options for the host, before or after the subcommand.
#[derive(Args)]
pub struct HostArgs {
    /// Where compiled code is cached [default: $SANDWIT_CACHE_DIR, else
    /// $XDG_CACHE_HOME/sandwit, else ~/.cache/sandwit].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// The most compiled code the cache keeps, in MiB: a new entry deletes
    /// the least recently used ones beyond it [default: 1024].
    #[arg(long, global = true, value_name = "MIB")]
    cache_max_mib: Option<u64>,
    /// Compile in memory only; read and write no cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Fuel per call, and per run for `run`: a deterministic CPU budget of
    /// roughly wasm instructions, about 8000000000 a CPU-second of Python
    /// [default: none; the time limit bounds busy code].
    #[arg(long, global = true)]
    fuel: Option<u64>,
    /// Wall-clock limit per call, and per run for `run`, in milliseconds
    /// [default: 10000].
    #[arg(long, global = true, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Memory per instance, in MiB [default: 64].
    #[arg(long, global = true, value_name = "MIB")]
    memory_mib: Option<usize>,
    /// The operator's policy (TOML): capabilities granted and configuration
    /// per plugin, caps of the store and of HTTP. See docs/POLICY.md
    /// [default: $SANDWIT_POLICY, else nothing is granted].
    #[arg(long, global = true, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Where plugin data lives: a SQLite file, or a PostgreSQL URL
    /// (`postgres://user:password@host:port/db`, `?sslmode=require` to insist
    /// on TLS, `&sslrootcert=FILE` for a private CA) that replicas of one service share. With PostgreSQL the
    /// execution controls' rate limits, chat budgets and open breakers are
    /// kept there too, so they hold across every replica using it (see
    /// docs/DEPLOY.md) [default: $SANDWIT_STORE, else the policy's
    /// `[store] url`, else $XDG_DATA_HOME/sandwit/store.db, else
    /// ~/.local/share/sandwit/store.db].
    #[arg(long, global = true, value_name = "FILE|URL")]
    store: Option<String>,
    /// The key sessions are signed with in the store (`run --session`, and
    /// `serve`'s and `mcp`'s sessions): a file of at least 32 bytes that
    /// only its owner may read. Hosts over one store (replicas, or the same
    /// host after a restart) need the same key to resume each other's
    /// sessions [default: $SANDWIT_SESSION_KEY_FILE, else session.key in
    /// the data directory, made on first use].
    #[arg(long, global = true, value_name = "FILE")]
    session_key_file: Option<PathBuf>,
}

impl HostArgs {
    /// A host builder with these settings (connected to the store's
    /// database, when it is PostgreSQL).
    pub async fn builder(&self) -> anyhow::Result<HostBuilder> {
        let defaults = CallLimits::default();
        let limits = CallLimits {
            fuel: self.fuel.or(defaults.fuel),
            time: self.timeout_ms.map_or(defaults.time, Duration::from_millis),
            memory_bytes: self.memory_mib.map_or(defaults.memory_bytes, |m| m << 20),
            ..defaults
        };
        let run_defaults = RunLimits::default();
        let run_limits = RunLimits {
            fuel: self.fuel.or(run_defaults.fuel),
            time: limits.time,
            ..run_defaults
        };
        let policy = self.policy()?;
        let store = self.store(&policy);
        let mut builder = Host::builder()
            .limits(limits)
            .run_limits(run_limits)
            .policy(policy);
        match store {
            Some(StoreLocation::Postgres(url)) => {
                let pg = Arc::new(sandwit_postgres::Postgres::connect(&url).await?);
                builder = builder.store(pg.clone()).shared_controls(pg);
            }
            Some(StoreLocation::Sqlite(path)) => builder = builder.store_path(path),
            None => {}
        }
        if let Some(dir) = self.cache_dir() {
            builder = builder.cache_dir(dir);
        }
        if let Some(mib) = self.cache_max_mib {
            builder = builder.cache_max_bytes(mib.saturating_mul(1 << 20));
        }
        Ok(builder)
    }

    /// The compiled-code cache: none with --no-cache, else --cache-dir, else
    /// the default one.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir.clone().or_else(default_cache_dir)
    }

    /// The options that give a child `sandwit` the same cache and store as
    /// this one.
    pub fn shared_args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        if let Some(dir) = &self.cache_dir {
            args.extend(["--cache-dir".into(), dir.into()]);
        }
        if let Some(mib) = self.cache_max_mib {
            args.extend(["--cache-max-mib".into(), mib.to_string().into()]);
        }
        if self.no_cache {
            args.push("--no-cache".into());
        }
        // A PostgreSQL URL stays out of the child's command line (`ps` shows
        // it, with its password); the children these are for (checks of a
        // plugin) keep nothing in the store.
        if let Some(StoreLocation::Sqlite(path)) = self.store.as_deref().map(StoreLocation::named) {
            args.extend(["--store".into(), path.into()]);
        }
        args
    }

    /// The operator's policy: --policy, else $SANDWIT_POLICY, else the
    /// default (nothing granted).
    pub fn policy(&self) -> anyhow::Result<Policy> {
        Ok(
            match self.policy.clone().or_else(|| env_path("SANDWIT_POLICY")) {
                Some(path) => Policy::load(path)?,
                None => Policy::default(),
            },
        )
    }
}

impl HostArgs {
    /// `builder` signing sessions with the key of --session-key-file, else
    /// $SANDWIT_SESSION_KEY_FILE, else the data directory's `session.key`
    /// (made, 32 random bytes readable by the user only, if missing).
    /// Without a data directory the host makes a key for its process alone.
    pub fn with_session_key(&self, builder: HostBuilder) -> anyhow::Result<HostBuilder> {
        let given =
            (self.session_key_file.clone()).or_else(|| env_path("SANDWIT_SESSION_KEY_FILE"));
        let (path, made) = match given {
            Some(path) => (path, false),
            None => match data_dir() {
                Some(dir) => (dir.join("session.key"), true),
                None => return Ok(builder),
            },
        };
        let key = read_session_key(&path, made)
            .with_context(|| format!("the session key {}", path.display()))?;
        Ok(builder.session_key(key))
    }

    /// --store, else $SANDWIT_STORE, else the policy's `[store] url`, else
    /// the SQLite file in the data directory.
    fn store(&self, policy: &Policy) -> Option<StoreLocation> {
        let given = self.store.clone().or_else(|| {
            std::env::var("SANDWIT_STORE")
                .ok()
                .filter(|s| !s.is_empty())
        });
        match given {
            Some(given) => Some(StoreLocation::named(&given)),
            None => policy
                .store
                .url
                .clone()
                .or_else(|| data_dir().map(|d| StoreLocation::Sqlite(d.join("store.db")))),
        }
    }
}

/// The session key in `path`: made there first if `make` and it is missing.
/// Refused if others than its owner may read it.
fn read_session_key(path: &std::path::Path, make: bool) -> anyhow::Result<SessionKey> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if make && !path.exists() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut bytes = [0u8; 32];
        getrandom(&mut bytes)?;
        // `create_new`: of two processes making it at once, one writes it
        // and the other reads it.
        match (std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600))
        .open(path)
        {
            Ok(mut file) => file.write_all(&bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mode = std::fs::metadata(path)?.permissions().mode();
    anyhow::ensure!(
        mode & 0o077 == 0,
        "is readable by others than its owner (mode {:o}): `chmod 600` it",
        mode & 0o777
    );
    let bytes = std::fs::read(path)?;
    SessionKey::from_bytes(&bytes).map_err(anyhow::Error::msg)
}

/// Fills `bytes` from the system's entropy.
fn getrandom(bytes: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(bytes)
}
