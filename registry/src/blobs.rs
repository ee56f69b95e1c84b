//! Component bytes, content-addressed: `DIR/blobs/sha256/<hex>`. Every file
//! access goes through a capability on that one directory (cap-std), and the
//! only name a request can lead to is a checked 64-digit hex digest: no path
//! from a request reaches the file system.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use crate::names::is_sha256_hex;

/// The blob directory.
pub struct Blobs {
    dir: Dir,
    /// Digests (hex) being published, with how many publishes hold each:
    /// a blob a publish wrote is removed when its publish fails only if no
    /// other holds it.
    pending: Arc<Mutex<HashMap<String, usize>>>,
}

/// A digest held pending by one publish, until dropped or given to
/// [`Blobs::remove_unless_pending`].
pub struct Pending {
    pending: Arc<Mutex<HashMap<String, usize>>>,
    hex: String,
    /// Already released (by [`Blobs::remove_unless_pending`]).
    released: bool,
}

impl Pending {
    /// The digest (hex) held.
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.released {
            release(&mut lock(&self.pending), &self.hex);
        }
    }
}

/// Takes one hold off `hex`: how many publishes still hold it.
fn release(pending: &mut HashMap<String, usize>, hex: &str) -> usize {
    let Some(n) = pending.get_mut(hex) else {
        return 0;
    };
    *n = n.saturating_sub(1);
    let left = *n;
    if left == 0 {
        pending.remove(hex);
    }
    left
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Blobs {
    /// Opens `root/blobs/sha256`, creating it if need be.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        let root_dir = Dir::open_ambient_dir(root, ambient_authority())
            .with_context(|| format!("opening {}", root.display()))?;
        root_dir
            .create_dir_all("blobs/sha256")
            .with_context(|| format!("creating {}/blobs/sha256", root.display()))?;
        let dir = root_dir.open_dir("blobs/sha256")?;
        Ok(Blobs {
            dir,
            pending: Arc::default(),
        })
    }

    /// Holds `hex` pending (see [`Blobs::remove_unless_pending`]) until
    /// the returned guard is dropped: take it before writing the blob, and
    /// keep it until the version naming it is committed.
    pub fn pending(&self, hex: &str) -> Pending {
        *lock(&self.pending).entry(hex.to_string()).or_insert(0) += 1;
        Pending {
            pending: self.pending.clone(),
            hex: hex.to_string(),
            released: false,
        }
    }

    /// Releases the caller's hold on its blob and removes the blob if no
    /// other publish holds it. The release and the count are one step
    /// under the lock: of several failing publishes of the same bytes, the
    /// last to release removes the blob (each looking at the count first,
    /// all would see another's hold and leave an orphan). The caller has
    /// checked that no version names it.
    pub fn remove_unless_pending(&self, mut held: Pending) -> anyhow::Result<()> {
        held.released = true;
        let hex = std::mem::take(&mut held.hex);
        let mut pending = lock(&self.pending);
        if release(&mut pending, &hex) > 0 {
            return Ok(());
        }
        anyhow::ensure!(is_sha256_hex(&hex), "not a SHA-256 digest: {hex:?}");
        match self.dir.remove_file(&hex) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Stores `bytes` under `hex` (their SHA-256) atomically: written to a
    /// temporary file, synced, renamed into place and the directory synced,
    /// so a reader sees the whole blob or none, even after a crash.
    pub fn put(&self, hex: &str, bytes: &[u8]) -> anyhow::Result<()> {
        anyhow::ensure!(is_sha256_hex(hex), "not a SHA-256 digest: {hex:?}");
        if self.dir.try_exists(hex)? {
            // Content-addressed: the same name holds the same bytes.
            return Ok(());
        }
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|e| anyhow::anyhow!("getrandom: {e}"))?;
        let temp = format!(
            ".tmp-{hex}-{}",
            suffix
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let write = || -> anyhow::Result<()> {
            let mut file = self.dir.open_with(
                &temp,
                OpenOptions::new().write(true).create_new(true).mode(0o644),
            )?;
            file.write_all(bytes)?;
            file.sync_all()?;
            self.dir.rename(&temp, &self.dir, hex)?;
            // The rename is durable once the directory is synced (its own
            // handle is an O_PATH one, which cannot be).
            self.dir.open(".")?.sync_all()?;
            Ok(())
        };
        write().inspect_err(|_| {
            let _ = self.dir.remove_file(&temp);
        })
    }

    /// Opens the blob `hex` for reading, with its size; `None` if absent.
    pub fn open_blob(&self, hex: &str) -> anyhow::Result<Option<(std::fs::File, u64)>> {
        anyhow::ensure!(is_sha256_hex(hex), "not a SHA-256 digest: {hex:?}");
        match self.dir.open(hex) {
            Ok(file) => {
                let file = file.into_std();
                let size = file.metadata()?.len();
                Ok(Some((file, size)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
