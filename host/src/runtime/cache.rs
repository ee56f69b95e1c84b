//! Compiled code, cached in memory and on disk.
//!
//! The disk cache keeps `Component::serialize` output under
//! `<dir>/<engine key>/<sha-256 of the component>.cwasm`, the engine key being a
//! hash of the engine's compatibility settings (wasmtime version, target,
//! tunables), so a second process with the same settings loads machine code
//! without compiling. Entries are written to a temporary file and renamed, so a
//! crash never leaves half a file.
//!
//! The cache is capped ([`DEFAULT_CACHE_MAX_BYTES`] unless the host says
//! otherwise): each new entry is followed by deleting the least recently
//! used ones, in the directories of every engine key (those of older
//! wasmtime versions or other settings included), until the rest fits. An
//! entry counts as used when it is written or loaded (its modification time
//! is set then). Deleting a file another process has mapped is safe: the
//! mapping keeps it until it is dropped.
//!
//! Loading compiled code runs it as native code, so the cache trusts nothing
//! another user could have written: a cache directory (or an engine's
//! directory in it) that is not owned by the user running the host, or that
//! its group or others may write, is refused when the host is built; an
//! entry that is not a regular file owned by that user and writable only by
//! it is ignored (and compiled afresh). New directories are made `0700`,
//! temporary files are created exclusively with mode `0600`.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use sandwit_contract::signing::component_hash;
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

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

/// The default cap on the compiled code a disk cache keeps, as wasmtime's own
/// cache: 1 GiB (sandwit's interpreter compiles to ~41 MB; a plugin to
/// ~0.3 MB).
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 1 << 30;

pub(crate) struct CodeCache {
    /// The cache's directory, and in it this engine's.
    dirs: Option<(PathBuf, PathBuf)>,
    /// The most bytes of compiled code kept in all of the cache's directory.
    max_bytes: u64,
    loaded: Mutex<HashMap<String, Component>>,
}

impl CodeCache {
    /// The cache of `engine`'s code in `dir` (in memory only without it),
    /// keeping at most `max_bytes` there. Makes the directories if needed;
    /// refuses ones another user could write.
    pub(crate) fn new(
        engine: &Engine,
        dir: Option<PathBuf>,
        max_bytes: u64,
    ) -> anyhow::Result<Self> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dirs = match dir {
            Some(root) => {
                let own = root.join(format!("{:016x}", hasher.finish()));
                private_dir(&root)?;
                private_dir(&own)?;
                Some((root, own))
            }
            None => None,
        };
        Ok(CodeCache {
            dirs,
            max_bytes,
            loaded: Mutex::new(HashMap::new()),
        })
    }

    /// This engine's directory in the cache.
    fn dir(&self) -> Option<&Path> {
        self.dirs.as_ref().map(|(_, own)| own.as_path())
    }

    /// The cache's directory, if it has one.
    pub(crate) fn root(&self) -> Option<&Path> {
        self.dirs.as_ref().map(|(root, _)| root.as_path())
    }

    /// Whether the compiled code of the component whose hash is `hash` is in
    /// memory or in an entry [`CodeCache::lookup`] would load, without
    /// loading it (an entry that then fails to load is compiled afresh).
    pub(crate) fn contains(&self, hash: &str) -> bool {
        let is_hash = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        is_hash
            && (self.loaded.lock().unwrap().contains_key(hash)
                || self
                    .dir()
                    .is_some_and(|d| trusted_file(&d.join(format!("{hash}.cwasm")))))
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
        let path = self.dir().map(|d| d.join(format!("{hash}.cwasm")));
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
        memory_images(hash, || component.initialize_copy_on_write_image());
        if let Some(path) = path {
            self.keep(&path, component.serialize());
        }
        self.remember(hash, &component);
        Ok(Ok((component, CodeSource::Compiled)))
    }

    /// The compiled component whose hash is `hash`, from memory or disk.
    pub(crate) fn lookup(&self, engine: &Engine, hash: &str) -> Option<(Component, CodeSource)> {
        // The hash names a file: only a SHA-256 as `component_hash` spells
        // it (64 lowercase hex digits) may.
        if !(hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))) {
            return None;
        }
        if let Some(c) = self.loaded.lock().unwrap().get(hash) {
            return Some((c.clone(), CodeSource::MemoryCache));
        }
        let path = self.dir()?.join(format!("{hash}.cwasm"));
        if !trusted_file(&path) {
            return None;
        }
        // SAFETY: the file was written by `Component::serialize` of an engine
        // with the same compatibility hash, into a directory only this user
        // may write (see the module docs).
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => {
                tracing::debug!(path = %path.display(), "loaded compiled code from the cache");
                memory_images(hash, || c.initialize_copy_on_write_image());
                mark_used(&path);
                self.remember(hash, &c);
                Some((c, CodeSource::DiskCache))
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring a bad cache entry: {e}");
                None
            }
        }
    }

    /// Writes `serialized` code at `path` and keeps the cache within its
    /// cap. The cache only saves time: failing to write it is not the
    /// code's fault, nor a reason to refuse it.
    fn keep(&self, path: &Path, serialized: wasmtime::Result<Vec<u8>>) {
        match serialized
            .map_err(anyhow::Error::from)
            .and_then(|bytes| Ok(write_atomically(path, &bytes)?))
        {
            Ok(()) => self.prune(path),
            Err(e) => tracing::warn!(
                path = %path.display(),
                "cannot write the compiled-code cache: {e:#}"
            ),
        }
    }

    /// The compiled core module whose hash is `hash`, from disk, or compiled
    /// from `bytes()` now and written there. Core modules (the scientific
    /// interpreter) are loaded once per sandbox, so none is kept in memory.
    pub(crate) fn module(
        &self,
        engine: &Engine,
        hash: &str,
        bytes: impl FnOnce() -> anyhow::Result<Vec<u8>>,
    ) -> anyhow::Result<(Module, CodeSource)> {
        anyhow::ensure!(
            hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "not a SHA-256: {hash:?}"
        );
        let path = self.dir().map(|d| d.join(format!("{hash}.cwasm")));
        if let Some(path) = path.as_deref().filter(|p| trusted_file(p)) {
            // SAFETY: as in `lookup`: written by `Module::serialize` of an
            // engine with the same compatibility hash, in a directory only
            // this user may write.
            match unsafe { Module::deserialize_file(engine, path) } {
                Ok(module) => {
                    memory_images(hash, || module.initialize_copy_on_write_image());
                    mark_used(path);
                    return Ok((module, CodeSource::DiskCache));
                }
                Err(e) => tracing::warn!(path = %path.display(), "ignoring a bad cache entry: {e}"),
            }
        }
        let bytes = bytes()?;
        let start = Instant::now();
        let module = Module::new(engine, &bytes)?;
        tracing::info!(
            bytes = bytes.len(),
            ms = start.elapsed().as_millis() as u64,
            "compiled a core module"
        );
        memory_images(hash, || module.initialize_copy_on_write_image());
        if let Some(path) = path {
            self.keep(&path, module.serialize());
        }
        Ok((module, CodeSource::Compiled))
    }

    /// A cache of the same directory and size for `engine`'s code, another
    /// engine's: in a directory of its own if their compiled code differs.
    pub(crate) fn for_engine(&self, engine: &Engine) -> anyhow::Result<CodeCache> {
        CodeCache::new(engine, self.root().map(Path::to_path_buf), self.max_bytes)
    }

    /// The hash of the component file at `path` as last loaded, if the file
    /// is unchanged since: same device, inode, size, modification and
    /// status-change times (the checks of git's index). Spares reading and
    /// hashing a large file (the interpreter is ~21 MB) on every start.
    pub(crate) fn file_hash(&self, path: &Path, meta: &std::fs::Metadata) -> Option<String> {
        let index = self.file_index(path, meta)?;
        if !trusted_file(&index) {
            return None;
        }
        let hash = std::fs::read_to_string(index).ok()?;
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
        let dir = self.dir()?;
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

    /// Deletes the least recently used entries of every engine's directory
    /// until the cache's compiled code fits in `max_bytes`, never `keep` (the
    /// entry just written). What another process deleted meanwhile is
    /// skipped; nothing here is an error, the cache only saves time.
    fn prune(&self, keep: &Path) {
        let Some((root, _)) = &self.dirs else {
            return;
        };
        let mut entries = entries(root);
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        if total <= self.max_bytes {
            return;
        }
        entries.sort_by_key(|e| e.used);
        for entry in entries {
            if total <= self.max_bytes {
                break;
            }
            if entry.path == keep {
                continue;
            }
            match std::fs::remove_file(&entry.path) {
                Ok(()) => tracing::debug!(
                    path = %entry.path.display(),
                    "deleted the least recently used compiled code: the cache holds at most {} bytes",
                    self.max_bytes
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %entry.path.display(), "cannot delete from the compiled-code cache: {e}");
                    continue;
                }
            }
            total -= entry.bytes;
        }
    }

    fn remember(&self, hash: &str, component: &Component) {
        self.loaded
            .lock()
            .unwrap()
            .insert(hash.to_string(), component.clone());
    }
}

/// A file of compiled code in the cache.
struct Entry {
    path: PathBuf,
    bytes: u64,
    /// When it was last written or loaded.
    used: std::time::SystemTime,
}

/// How many times the memory images of loaded code are made before the
/// first instantiation is left to make them.
const IMAGE_TRIES: u32 = 5;

/// Makes the copy-on-write images of loaded code's memories now, rather
/// than in the first instantiation, which would fail a run or a call. On
/// Linux an image is a memfd that wasmtime seals, and sealing fails with
/// EBUSY when the kernel sees its pages pinned for a moment (compaction or
/// migration under memory pressure): such a failure is retried, and one
/// that persists is logged and left to the instantiation, which makes them
/// itself.
fn memory_images(hash: &str, make: impl Fn() -> wasmtime::Result<()>) {
    for attempt in 1..=IMAGE_TRIES {
        match make() {
            Ok(()) => return,
            Err(e) if attempt < IMAGE_TRIES => {
                tracing::debug!(
                    hash,
                    attempt,
                    "making the memory images failed, again: {e:#}"
                );
                std::thread::sleep(std::time::Duration::from_millis(10 << attempt));
            }
            Err(e) => tracing::warn!(hash, "cannot make the memory images ahead: {e:#}"),
        }
    }
}

/// The compiled code in the cache at `root`: `<engine key>/<hash>.cwasm`
/// files, named as sandwit names them (so nothing else a misconfigured
/// directory holds is ever deleted).
fn entries(root: &Path) -> Vec<Entry> {
    let is_hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let dirs = std::fs::read_dir(root).into_iter().flatten().flatten();
    let dirs = dirs.filter(|d| is_hex(&d.file_name().to_string_lossy(), 16));
    dirs.flat_map(|dir| {
        std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
    })
    .filter_map(|file| {
        let name = file.file_name();
        let hash = name.to_str()?.strip_suffix(".cwasm")?;
        let meta = file
            .metadata()
            .ok()
            .filter(|m| m.is_file() && is_hex(hash, 64))?;
        Some(Entry {
            path: file.path(),
            bytes: meta.len(),
            used: meta.modified().ok()?,
        })
    })
    .collect()
}

/// Records that the entry at `path` was used now, for [`CodeCache::prune`].
fn mark_used(path: &Path) {
    let now = std::time::SystemTime::now();
    let marked = std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(now));
    if let Err(e) = marked {
        tracing::debug!(path = %path.display(), "cannot mark compiled code as used: {e}");
    }
}

/// Makes `dir` (mode `0700`) if it is missing; refuses it if it is not a
/// directory owned by this user that only this user may write.
fn private_dir(dir: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                anyhow::anyhow!("cannot create the cache directory {}: {e}", dir.display())
            })?;
        let meta = std::fs::metadata(dir).map_err(|e| {
            anyhow::anyhow!("cannot read the cache directory {}: {e}", dir.display())
        })?;
        anyhow::ensure!(
            meta.is_dir(),
            "the cache directory {} is not a directory",
            dir.display()
        );
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        anyhow::ensure!(
            meta.uid() == me,
            "the cache directory {} belongs to user {}, not to this user ({me}): compiled code in \
             it runs as native code, so it must be yours",
            dir.display(),
            meta.uid()
        );
        anyhow::ensure!(
            meta.mode() & 0o022 == 0,
            "the cache directory {} may be written by its group or others (mode {:o}): compiled \
             code in it runs as native code; `chmod go-w` it or choose another",
            dir.display(),
            meta.mode() & 0o7777
        );
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)?;
    Ok(())
}

/// Whether the cache file at `path` is one this host may trust: a regular
/// file (not a link) owned by this user, writable only by it.
fn trusted_file(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let ok = meta.is_file() && meta.uid() == me && meta.mode() & 0o022 == 0;
        if !ok && meta.is_file() {
            tracing::warn!(path = %path.display(), "ignoring a cache entry that is not this user's alone");
        }
        ok
    }
    #[cfg(not(unix))]
    meta.is_file()
}

/// Writes through a temporary file unique to this process and write, created
/// exclusively (never through a file or link already there) with mode
/// `0600`, so hosts compiling the same component at once never see each
/// other's halves.
fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("cache paths have a parent");
    if !dir.exists() {
        private_dir(dir).map_err(std::io::Error::other)?;
    }
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().unwrap().to_string_lossy(),
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = std::fs::File::options();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut file| file.write_all(data));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_named_as_sandwit_names_them_are_entries() {
        let root =
            std::env::temp_dir().join(format!("sandwit-cache-entries-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let hash = "ab".repeat(32);
        let ours = root.join("0123456789abcdef").join(format!("{hash}.cwasm"));
        for path in [
            &ours,
            // Another program's files in a directory given as the cache.
            &root.join("0123456789abcdef").join("notes.cwasm"),
            &root.join("projects").join(format!("{hash}.cwasm")),
            &root.join(format!("{hash}.cwasm")),
            // The index of file hashes.
            &root.join("0123456789abcdef").join("files").join(&hash),
        ] {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"code").unwrap();
        }
        let found: Vec<_> = entries(&root)
            .into_iter()
            .map(|e| (e.path, e.bytes))
            .collect();
        assert_eq!(found, vec![(ours, 4)]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
