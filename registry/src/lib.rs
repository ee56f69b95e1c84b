//! A plugin registry for sandwit: publishers upload signed components, the
//! registry checks each with the host's full load check (in a worker the
//! embedder supplies, never in its own process), stores the bytes
//! content-addressed and the metadata in SQLite, and serves search, plugin
//! pages and downloads over HTTP.
//!
//! [`Registry`] holds the data and the logic (publish, search, yank, owners,
//! tokens, keys): the JSON API ([`api`]) and any other surface (the web page)
//! call the same methods. [`serve`] runs the HTTP service with its rate
//! limits, request log and graceful shutdown. The wire contract is in
//! docs/REGISTRY.md.

mod accounts;
pub mod api;
mod blobs;
mod db;
mod error;
mod manage;
mod names;
mod publish;
mod query;
#[cfg(test)]
mod scratch;
mod server;
mod types;
mod validate;
pub mod web;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rusqlite::Connection;

pub use accounts::{Account, Role};
/// The router type of [`app`] and [`serve`], for routes added to the API.
pub use axum::Router;
pub use error::{Error, Result};
pub use publish::UploadSlot;
pub use sandwit_net::RateLimit;
pub use server::{Config, app, serve};
pub use types::{
    Blob, KeyRegistered, KeyRevoked, OwnerList, PluginInfo, PluginSummary, Published, SearchPage,
    SearchQuery, VersionDetail, VersionInfo,
};
pub use validate::{Validator, Verdict};

/// The most plugin versions one page of search lists.
pub const PER_PAGE: u32 = 20;

/// A registry's data directory, opened: the metadata database, the blobs and
/// the bound on validations running at once.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    /// The registry's id, which key registrations sign.
    id: String,
    db: Mutex<Connection>,
    blobs: blobs::Blobs,
    validations: Arc<tokio::sync::Semaphore>,
    /// Uploads being read or checked: each holds up to the component size
    /// cap in memory, so their number bounds the service's memory.
    uploads: Arc<tokio::sync::Semaphore>,
    /// Uploads being read or checked, per account id with any.
    uploads_by_account: Arc<Mutex<std::collections::HashMap<i64, usize>>>,
    validator: Option<Arc<dyn Validator>>,
    /// The most bytes of versions one account may have published
    /// (`u64::MAX`: no quota).
    account_quota: std::sync::atomic::AtomicU64,
    /// Runs once between a publish's blob write and its commit: a test
    /// makes another publish win the race there.
    #[cfg(test)]
    before_commit: Mutex<Option<BeforeCommit>>,
}

/// A test's hook between a publish's blob write and its commit.
#[cfg(test)]
type BeforeCommit = Box<dyn FnOnce(&mut Connection) + Send>;

/// The storage quota of each account by default: 1 GiB of published
/// versions (sixteen at the component size cap).
pub const DEFAULT_ACCOUNT_QUOTA: u64 = 1 << 30;

/// How many plugin checks may run at once by default.
pub const DEFAULT_MAX_VALIDATIONS: usize = 2;

/// Uploads that may be read or checked at once, per validation allowed at
/// once: a few wait for a check while others are read, and each holds at
/// most the component size cap (64 MiB) in memory.
pub const UPLOADS_PER_VALIDATION: usize = 4;

/// Uploads one account may have read or checked at once (within the
/// registry's bound): one publisher's slow bodies leave the other places
/// to other publishers.
pub const UPLOADS_PER_ACCOUNT: usize = 2;

impl Registry {
    /// Opens the registry in `dir` (created, mode 0700, if need be): the
    /// SQLite file `dir/registry.db` and the blobs under `dir/blobs`. Without
    /// a validator it serves reads and manages tokens but refuses publishes.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        Self::open_with(dir, None, DEFAULT_MAX_VALIDATIONS)
    }

    /// Opens the registry in `dir`, checking uploads with `validator`, at
    /// most `max_validations` at once (more are refused as busy).
    pub fn open_with(
        dir: &Path,
        validator: Option<Arc<dyn Validator>>,
        max_validations: usize,
    ) -> anyhow::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        let db = db::open(&dir.join("registry.db"))?;
        let id = db::registry_id(&db).context("reading the registry's id")?;
        let blobs = blobs::Blobs::open(dir)?;
        Ok(Registry {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                id,
                db: Mutex::new(db),
                blobs,
                validations: Arc::new(tokio::sync::Semaphore::new(max_validations.max(1))),
                uploads: Arc::new(tokio::sync::Semaphore::new(
                    max_validations.max(1) * UPLOADS_PER_VALIDATION,
                )),
                uploads_by_account: Arc::default(),
                validator,
                account_quota: std::sync::atomic::AtomicU64::new(DEFAULT_ACCOUNT_QUOTA),
                #[cfg(test)]
                before_commit: Mutex::new(None),
            }),
        })
    }

    /// Sets the most bytes of versions each account may publish (`None`:
    /// no quota; [`DEFAULT_ACCOUNT_QUOTA`] until set). An upload past it is
    /// refused with [`Error::QuotaExceeded`], before it is checked.
    pub fn set_account_quota(&self, bytes: Option<u64>) {
        self.inner.account_quota.store(
            bytes.unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The storage quota of each account, if any.
    pub fn account_quota(&self) -> Option<u64> {
        match self
            .inner
            .account_quota
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            u64::MAX => None,
            bytes => Some(bytes),
        }
    }

    /// The registry's id (`swreg_...`), made with its database: what a key
    /// registration's proof names, so it is refused by any other registry.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Runs `f` on the database on a blocking thread (SQLite calls block).
    async fn db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let registry = self.clone();
        tokio::task::spawn_blocking(move || registry.db_now(f))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("a database task failed: {e}")))?
    }

    /// Runs `f` on the database in this thread.
    fn db_now<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        // A panic while holding the lock leaves SQLite consistent (every
        // change is in a transaction): the lock is still usable.
        let mut conn = self
            .inner
            .db
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut conn)
    }
}

/// A SQLite failure as an internal error.
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Internal(e.into())
    }
}
