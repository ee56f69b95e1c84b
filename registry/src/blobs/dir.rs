//! Blobs in a local directory (the default): `DIR/blobs/sha256/<hex>`.
//! Every file access goes through a capability on that one directory
//! (cap-std), and the only name a request can lead to is a checked
//! 64-digit hex digest: no path from a request reaches the file system.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use crate::names::is_sha256_hex;

/// The blob directory.
pub struct DirBlobs {
    dir: Dir,
}

impl DirBlobs {
    /// Opens `root/blobs/sha256`, creating it if need be.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        let root_dir = Dir::open_ambient_dir(root, ambient_authority())
            .with_context(|| format!("opening {}", root.display()))?;
        root_dir
            .create_dir_all("blobs/sha256")
            .with_context(|| format!("creating {}/blobs/sha256", root.display()))?;
        let dir = root_dir.open_dir("blobs/sha256")?;
        Ok(DirBlobs { dir })
    }

    /// Removes the blob `hex` (nothing if there is none).
    pub fn remove(&self, hex: &str) -> anyhow::Result<()> {
        anyhow::ensure!(is_sha256_hex(hex), "not a SHA-256 digest: {hex:?}");
        match self.dir.remove_file(hex) {
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
            // Content-addressed: the same name holds the same bytes (and a
            // read checks that it does).
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

    /// Opens the blob `hex` for reading; `None` if absent.
    pub fn get(&self, hex: &str) -> anyhow::Result<Option<std::fs::File>> {
        anyhow::ensure!(is_sha256_hex(hex), "not a SHA-256 digest: {hex:?}");
        match self.dir.open(hex) {
            Ok(file) => Ok(Some(file.into_std())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
