//! A plugin registry for sandwit: publishers upload signed components, the
//! registry checks each with the host's full load check (in a worker the
//! embedder supplies, never in its own process), stores the bytes
//! content-addressed (in a directory, or an object store such as S3) and
//! the metadata in SQLite (or PostgreSQL, which replicas share), and serves
//! search, plugin pages and downloads over HTTP.
//!
//! [`Registry`] holds the data and the logic (publish, search, yank, owners,
//! tokens, keys): the JSON API ([`api`]) and any other surface (the web page)
//! call the same methods. [`serve`] runs the HTTP service with its rate
//! limits, request log and graceful shutdown. The wire contract is in
//! docs/REGISTRY.md.

mod accounts;
pub mod api;
mod blobs;
mod driver;
mod error;
mod manage;
mod meta;
mod names;
mod publish;
mod query;
#[cfg(test)]
mod scratch;
mod server;
#[cfg(test)]
mod tests;
mod types;
mod validate;
pub mod web;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;

pub use accounts::{Account, Role};
/// The router type of [`app`] and [`serve`], for routes added to the API.
pub use axum::Router;
pub use blobs::{BlobLocation, S3Location};
pub use error::{Error, Result};
pub use meta::Database;
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

/// A registry, opened: its metadata database, its blobs and the bound on
/// validations running at once. Several `Registry` values (in one process
/// or several) may share one PostgreSQL database and one object store:
/// each is a replica, and what one commits the others serve.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    meta: meta::Meta,
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
}

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

/// Where a registry keeps its data, and how it checks uploads.
#[derive(Clone)]
pub struct Options {
    /// The metadata: SQLite's file in the directory by default.
    pub database: Database,
    /// The blobs: `blobs/` in the directory by default.
    pub blobs: BlobLocation,
    /// What checks uploads; without one the registry serves reads and
    /// manages tokens but refuses publishes.
    pub validator: Option<Arc<dyn Validator>>,
    /// How many checks may run at once (more are refused as busy).
    pub max_validations: usize,
}

impl Default for Options {
    /// SQLite and blobs in the directory, no validator, the default bound
    /// on checks.
    fn default() -> Self {
        Options {
            database: Database::default(),
            blobs: BlobLocation::default(),
            validator: None,
            max_validations: DEFAULT_MAX_VALIDATIONS,
        }
    }
}

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
        Self::open_with_options(
            dir,
            Options {
                validator,
                max_validations,
                ..Options::default()
            },
        )
    }

    /// Opens the registry with its data where `options` say; `dir` (created,
    /// mode 0700, if need be) holds what is not elsewhere (SQLite's file,
    /// the default blobs) and this process's scratch files.
    pub fn open_with_options(dir: &Path, options: Options) -> anyhow::Result<Self> {
        Self::open_with_store(dir, options, |blobs| blobs)
    }

    /// [`Registry::open_with_options`], keeping the blobs in what `store`
    /// makes of the blob store `options` name (a test wraps it in a fake).
    pub(crate) fn open_with_store(
        dir: &Path,
        options: Options,
        store: impl FnOnce(blobs::Blobs) -> blobs::Blobs + Send,
    ) -> anyhow::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        let (meta, blobs) = driver::off_runtime(|| -> anyhow::Result<_> {
            let meta = meta::Meta::open(&options.database, dir)?;
            let blobs = store(blobs::open(&options.blobs, dir)?);
            Ok((meta, blobs))
        })?;
        let max_validations = options.max_validations.max(1);
        Ok(Registry {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                meta,
                blobs,
                validations: Arc::new(tokio::sync::Semaphore::new(max_validations)),
                uploads: Arc::new(tokio::sync::Semaphore::new(
                    max_validations * UPLOADS_PER_VALIDATION,
                )),
                uploads_by_account: Arc::default(),
                validator: options.validator,
                account_quota: std::sync::atomic::AtomicU64::new(DEFAULT_ACCOUNT_QUOTA),
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
        self.inner.meta.id()
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Runs `f` on the metadata on a blocking thread (its calls block),
    /// each statement committed on its own.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn meta::Conn) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let registry = self.clone();
        tokio::task::spawn_blocking(move || registry.inner.meta.read(f))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("a database task failed: {e}")))?
    }

    /// Runs `f` in a write transaction (see [`meta::Meta::write`]) on a
    /// blocking thread.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn meta::Conn) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let registry = self.clone();
        tokio::task::spawn_blocking(move || registry.inner.meta.write(f))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("a database task failed: {e}")))?
    }

    /// Runs `f` in a write transaction, waiting for it in this thread.
    fn write_now<T: Send>(
        &self,
        f: impl FnOnce(&mut dyn meta::Conn) -> Result<T> + Send,
    ) -> Result<T> {
        driver::off_runtime(|| self.inner.meta.write(f))
    }
}
