//! Compiled code, cached in memory and on disk.
//!
//! The disk cache keeps `Component::serialize` output under
//! `<dir>/<engine key>/<sha-256 of the component>.cwasm`, the engine key being a
//! hash of the engine's compatibility settings (wasmtime version, target,
//! tunables), so a second process with the same settings loads machine code
//! without compiling. Entries are written to a temporary file and renamed, so a
//! crash never leaves half a file.
//!
//! Loading compiled code runs it as native code: the cache directory must be
//! writable only by the user running the host, as with wasmtime's own cache.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a plugin's machine code came from when it was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeSource {
    /// Compiled now.
    Compiled,
    /// Read from the on-disk cache, not compiled.
    DiskCache,
    /// Already loaded by this host.
    MemoryCache,
}

/// The SHA-256 of a component, hex-encoded.
pub(crate) fn component_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) struct CodeCache {
    dir: Option<PathBuf>,
    loaded: Mutex<HashMap<String, Component>>,
}

impl CodeCache {
    pub(crate) fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = dir.map(|d| d.join(format!("{:016x}", hasher.finish())));
        CodeCache {
            dir,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The component for `bytes` (whose hash is `hash`), from memory, disk, or
    /// compiled now; a compile error is the component's fault and comes back
    /// as `Ok(Err(..))`.
    pub(crate) fn get(
        &self,
        engine: &Engine,
        hash: &str,
        bytes: &[u8],
    ) -> anyhow::Result<Result<(Component, CodeSource), wasmtime::Error>> {
        if let Some(found) = self.lookup(engine, hash) {
            return Ok(Ok(found));
        }
        let path = self.dir.as_ref().map(|d| d.join(format!("{hash}.cwasm")));
        let start = Instant::now();
        let component = match Component::new(engine, bytes) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        tracing::info!(
            bytes = bytes.len(),
            ms = start.elapsed().as_millis() as u64,
            "compiled a component"
        );
        if let Some(path) = path {
            // The cache only saves time: failing to write it is not the
            // component's fault, nor a reason to refuse it.
            if let Err(e) = component
                .serialize()
                .map_err(anyhow::Error::from)
                .and_then(|bytes| Ok(write_atomically(&path, &bytes)?))
            {
                tracing::warn!(path = %path.display(), "cannot write the compiled-code cache: {e:#}");
            }
        }
        self.remember(hash, &component);
        Ok(Ok((component, CodeSource::Compiled)))
    }

    /// The compiled component whose hash is `hash`, from memory or disk.
    pub(crate) fn lookup(&self, engine: &Engine, hash: &str) -> Option<(Component, CodeSource)> {
        if let Some(c) = self.loaded.lock().unwrap().get(hash) {
            return Some((c.clone(), CodeSource::MemoryCache));
        }
        let path = self.dir.as_ref()?.join(format!("{hash}.cwasm"));
        if !path.exists() {
            return None;
        }
        // SAFETY: the file was written by `Component::serialize` of an engine
        // with the same compatibility hash, into a directory only this user
        // may write (see the module docs).
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => {
                tracing::debug!(path = %path.display(), "loaded compiled code from the cache");
                self.remember(hash, &c);
                Some((c, CodeSource::DiskCache))
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring a bad cache entry: {e}");
                None
            }
        }
    }

    /// `component` (whose hash is `hash`) for `engine`, another engine with
    /// the same compatibility settings: mapped from its cache file if there
    /// is one, else copied from `component`'s code. Not remembered (the
    /// memory cache holds the host engine's components).
    pub(crate) fn for_engine(
        &self,
        engine: &Engine,
        component: &Component,
        hash: &str,
    ) -> anyhow::Result<Component> {
        if let Some(path) = self.dir.as_ref().map(|d| d.join(format!("{hash}.cwasm")))
            && path.exists()
        {
            // SAFETY: as in `lookup`.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(c) => return Ok(c),
                Err(e) => tracing::warn!(path = %path.display(), "ignoring a bad cache entry: {e}"),
            }
        }
        let bytes = component.serialize()?;
        // SAFETY: wasmtime serialized `bytes` just now, from a component of
        // an engine with the same compatibility settings.
        Ok(unsafe { Component::deserialize(engine, &bytes)? })
    }

    /// The hash of the component file at `path` as last loaded, if the file
    /// is unchanged since: same device, inode, size, modification and
    /// status-change times (the checks of git's index). Spares reading and
    /// hashing a large file (the interpreter is ~21 MB) on every start.
    pub(crate) fn file_hash(&self, path: &Path, meta: &std::fs::Metadata) -> Option<String> {
        let hash = std::fs::read_to_string(self.file_index(path, meta)?).ok()?;
        let valid = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then_some(hash)
    }

    /// Records the hash of the component file at `path` for
    /// [`CodeCache::file_hash`].
    pub(crate) fn remember_file(&self, path: &Path, meta: &std::fs::Metadata, hash: &str) {
        let Some(index) = self.file_index(path, meta) else {
            return;
        };
        if let Err(e) = write_atomically(&index, hash.as_bytes()) {
            tracing::warn!(path = %index.display(), "cannot write the compiled-code cache: {e}");
        }
    }

    /// Where the hash of the file at `path` in the state `meta` is recorded.
    #[cfg(unix)]
    fn file_index(&self, path: &Path, meta: &std::fs::Metadata) -> Option<PathBuf> {
        use std::os::unix::fs::MetadataExt;
        let dir = self.dir.as_ref()?;
        let path = std::fs::canonicalize(path).ok()?;
        let key = format!(
            "{}\0{}\0{}\0{}\0{}.{}\0{}.{}",
            path.display(),
            meta.dev(),
            meta.ino(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        );
        Some(dir.join("files").join(component_hash(key.as_bytes())))
    }

    #[cfg(not(unix))]
    fn file_index(&self, _path: &Path, _meta: &std::fs::Metadata) -> Option<PathBuf> {
        None
    }

    fn remember(&self, hash: &str, component: &Component) {
        self.loaded
            .lock()
            .unwrap()
            .insert(hash.to_string(), component.clone());
    }
}

/// Writes through a temporary file unique to this process and write, so
/// hosts compiling the same component at once never see each other's halves.
fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("cache paths have a parent");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().unwrap().to_string_lossy(),
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}
