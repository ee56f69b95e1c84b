//! Component bytes, content-addressed by their SHA-256: in a local
//! directory by default, or in an object store that replicas share (S3 or
//! an S3-compatible server, or a folder through the object store's file
//! system). Whatever holds them, a blob is checked on every read: bytes
//! that are not the digest's are refused, never served.

mod dir;
mod object;

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use object::S3Location;

/// Where the blobs are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BlobLocation {
    /// `blobs/sha256/` in the registry's directory.
    #[default]
    Dir,
    /// This folder, through the object store's local file system
    /// (`file://DIR`).
    File(PathBuf),
    /// An S3 bucket (`s3://bucket/prefix`).
    S3(S3Location),
}

impl std::str::FromStr for BlobLocation {
    type Err = String;

    /// `s3://bucket[/prefix]` or `file://DIR`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("{s:?} names no bucket (s3://bucket/prefix)"));
            }
            Ok(BlobLocation::S3(S3Location {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
                endpoint: None,
                credentials: None,
            }))
        } else if let Some(dir) = s.strip_prefix("file://") {
            if dir.is_empty() {
                return Err(format!("{s:?} names no folder (file:///path/to/dir)"));
            }
            Ok(BlobLocation::File(PathBuf::from(dir)))
        } else {
            Err(format!(
                "{s:?} is neither s3://bucket/prefix nor file://DIR"
            ))
        }
    }
}

/// A blob read from the store.
pub enum Opened {
    /// Its bytes are the digest's: the file, at its start, and its size.
    Verified(std::fs::File, u64),
    /// There is no such blob.
    Missing,
    /// The store holds other bytes under the digest (their digest, hex).
    Tampered(String),
}

/// What keeps the blobs' bytes: a local directory or an object store (or,
/// in a test, a fake wrapping one of them).
pub trait Store: Send + Sync {
    /// Stores `bytes` under `hex` (their SHA-256), whole or not at all.
    fn put(&self, hex: &str, bytes: &axum::body::Bytes) -> anyhow::Result<()>;

    /// Removes the blob `hex` (nothing if there is none). The caller holds
    /// the metadata's write lock and has checked that no version names it
    /// and no publish holds it.
    fn remove(&self, hex: &str) -> anyhow::Result<()>;

    /// The blob `hex` as the store holds it, unchecked, read from its
    /// start; `None` if absent. Readers call [`Store::open_checked`].
    fn get(&self, hex: &str) -> anyhow::Result<Option<std::fs::File>>;

    /// The blob `hex`, its bytes checked against the digest.
    fn open_checked(&self, hex: &str) -> anyhow::Result<Opened> {
        let Some(mut file) = self.get(hex)? else {
            return Ok(Opened::Missing);
        };
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 16];
        let mut size = 0u64;
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            size += n as u64;
        }
        let actual: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if actual != hex {
            return Ok(Opened::Tampered(actual));
        }
        file.rewind()?;
        Ok(Opened::Verified(file, size))
    }
}

/// The blob store.
pub type Blobs = Box<dyn Store>;

/// Opens the blobs at `location`; `root` is the registry's directory (the
/// default blobs' parent, and the scratch space of downloads from an object
/// store). Call it where [`crate::driver::Driver::block_on`] may be called.
pub fn open(location: &BlobLocation, root: &Path) -> anyhow::Result<Blobs> {
    let scratch = root.join("tmp");
    Ok(match location {
        BlobLocation::Dir => Box::new(dir::DirBlobs::open(root)?),
        BlobLocation::File(dir) => Box::new(object::ObjectBlobs::local(dir, &scratch)?),
        BlobLocation::S3(s3) => Box::new(object::ObjectBlobs::s3(s3, &scratch)?),
    })
}

impl Store for dir::DirBlobs {
    fn put(&self, hex: &str, bytes: &axum::body::Bytes) -> anyhow::Result<()> {
        dir::DirBlobs::put(self, hex, bytes)
    }

    fn remove(&self, hex: &str) -> anyhow::Result<()> {
        dir::DirBlobs::remove(self, hex)
    }

    fn get(&self, hex: &str) -> anyhow::Result<Option<std::fs::File>> {
        dir::DirBlobs::get(self, hex)
    }
}

impl Store for object::ObjectBlobs {
    fn put(&self, hex: &str, bytes: &axum::body::Bytes) -> anyhow::Result<()> {
        object::ObjectBlobs::put(self, hex, bytes)
    }

    fn remove(&self, hex: &str) -> anyhow::Result<()> {
        object::ObjectBlobs::remove(self, hex)
    }

    fn get(&self, hex: &str) -> anyhow::Result<Option<std::fs::File>> {
        object::ObjectBlobs::get(self, hex)
    }
}
