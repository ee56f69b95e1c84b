//! The lock file of a plugin folder, `DIR/sandwit.lock`: what `sandwit
//! install` put there, from which registry, with which digest and
//! signature.
//!
//! ```toml
//! version = 1
//!
//! [[plugin]]
//! id = "calc"
//! version = "0.1.0"
//! file = "calc.wasm"
//! digest = "sha256:4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c4f0c"
//! registry = "https://plugins.example"
//! signer = "ed25519:NV8HSH8rhpK/0zClolLWV7cknL1liUxL2q181nQv6A8="
//! signature = "…base64 of 64 bytes…"
//! ```
//!
//! A host loading a file of the folder checks it against its entry (see
//! the host's `Host::load_plugin_file`): bytes that
//! do not have the recorded digest are refused, and with the policy's
//! `[registry] require_signature`, so is a file without an entry signed by a
//! trusted key.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::signing::{self, PublicKey, Signature};

/// The lock file's name in a plugin folder.
pub const LOCK_FILE: &str = "sandwit.lock";

/// The format version this sandwit reads and writes.
const VERSION: u32 = 1;

/// The largest lock file read: far more than thousands of entries.
const MAX_LOCK_BYTES: u64 = 4 << 20;

/// The entries of a lock file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LockFile {
    /// One per installed plugin, by id.
    pub plugins: Vec<LockEntry>,
}

/// One installed plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// The plugin's id.
    pub id: String,
    /// Its version.
    pub version: String,
    /// Its file in the folder (a name, no path).
    pub file: String,
    /// The digest of the file's bytes, `sha256:<hex>`.
    pub digest: String,
    /// The registry it was installed from.
    pub registry: String,
    /// The key that signed it.
    pub signer: PublicKey,
    /// The signature of `digest` by `signer`.
    pub signature: Signature,
}

/// The file as written: the version, then the entries.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Repr {
    version: u32,
    #[serde(default, rename = "plugin")]
    plugins: Vec<LockEntry>,
}

/// A lock file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The file could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The text is not a valid lock file.
    #[error("{} is not a valid lock file: {message}", path.display())]
    Invalid {
        /// The lock file.
        path: PathBuf,
        /// What is wrong, with line and column where TOML gives them.
        message: String,
    },
}

impl LockEntry {
    /// Checks that `signature` is `signer`'s over `digest` and that `signer`
    /// is one of `trusted`; else says why not, in a sentence.
    pub fn check_signature(&self, trusted: &[PublicKey]) -> Result<(), String> {
        if !trusted.contains(&self.signer) {
            return Err(format!(
                "it is signed by {}, which is not a trusted key",
                self.signer
            ));
        }
        self.signer
            .verify_digest(&self.digest, &self.signature)
            .map_err(|e| e.to_string())
    }

    fn check(&self) -> Result<(), String> {
        signing::check_digest(&self.digest).map_err(|e| format!("plugin `{}`: {e}", self.id))?;
        if !is_file_name(&self.file) {
            return Err(format!(
                "plugin `{}`: `file` must be a file name in the folder, not {:?}",
                self.id, self.file
            ));
        }
        Ok(())
    }
}

/// Whether `name` names a file directly in the folder.
fn is_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

impl LockFile {
    /// The path of the lock file of `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(LOCK_FILE)
    }

    /// Reads the lock file of `dir`; `None` if there is none.
    pub fn read(dir: &Path) -> Result<Option<Self>, LockError> {
        let path = LockFile::path(dir);
        let io = |error| LockError::Io {
            path: path.clone(),
            error,
        };
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let mut text = String::new();
        file.take(MAX_LOCK_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(io)?;
        let invalid = |message: String| LockError::Invalid {
            path: path.clone(),
            message,
        };
        if text.len() as u64 > MAX_LOCK_BYTES {
            return Err(invalid(format!("it is over {MAX_LOCK_BYTES} bytes")));
        }
        let repr: Repr = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if repr.version != VERSION {
            return Err(invalid(format!(
                "it is of version {}; this sandwit reads version {VERSION}",
                repr.version
            )));
        }
        for entry in &repr.plugins {
            entry.check().map_err(invalid)?;
        }
        Ok(Some(LockFile {
            plugins: repr.plugins,
        }))
    }

    /// Writes it as the lock file of `dir`, atomically: readers see the old
    /// file or the new one, never a part.
    pub fn write(&self, dir: &Path) -> Result<(), LockError> {
        let path = LockFile::path(dir);
        let mut plugins = self.plugins.clone();
        plugins.sort_by(|a, b| a.id.cmp(&b.id));
        let repr = Repr {
            version: VERSION,
            plugins,
        };
        let text = toml::to_string(&repr).map_err(|e| LockError::Invalid {
            path: path.clone(),
            message: e.to_string(),
        })?;
        write_atomically(&path, text.as_bytes()).map_err(|error| LockError::Io { path, error })
    }

    /// The entry of the file named `file` (a name in the folder).
    pub fn by_file(&self, file: &str) -> Option<&LockEntry> {
        self.plugins.iter().find(|e| e.file == file)
    }

    /// The entry of the plugin `id`.
    pub fn by_id(&self, id: &str) -> Option<&LockEntry> {
        self.plugins.iter().find(|e| e.id == id)
    }

    /// Adds `entry`, replacing any of the same id or file.
    pub fn insert(&mut self, entry: LockEntry) {
        self.plugins
            .retain(|e| e.id != entry.id && e.file != entry.file);
        self.plugins.push(entry);
    }
}

/// Writes `bytes` to `path` through a new temporary file in the same folder
/// (mode `0644`, never through a file or link already there), synced, then
/// renamed over `path`; the folder is synced so the rename survives a crash.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = dir.join(format!(".{name}.{}.{stamp}.tmp", std::process::id()));
    let written = std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&temp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::{SigningKey, digest_of};

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sandwit-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entry(key: &SigningKey, id: &str, bytes: &[u8]) -> LockEntry {
        let digest = digest_of(bytes);
        LockEntry {
            id: id.to_string(),
            version: "1.0.0".to_string(),
            file: format!("{id}.wasm"),
            signature: key.sign_digest(&digest).unwrap(),
            digest,
            registry: "http://127.0.0.1:1".to_string(),
            signer: key.public_key(),
        }
    }

    #[test]
    fn round_trips_and_looks_up_by_file() {
        let dir = temp("round-trip");
        assert_eq!(LockFile::read(&dir).unwrap(), None);
        let key = SigningKey::generate().unwrap();
        let mut lock = LockFile::default();
        lock.insert(entry(&key, "notes", b"n"));
        lock.insert(entry(&key, "calc", b"c1"));
        // A new version of calc replaces its entry.
        lock.insert(entry(&key, "calc", b"c2"));
        lock.write(&dir).unwrap();
        let text = std::fs::read_to_string(LockFile::path(&dir)).unwrap();
        assert!(text.starts_with("version = 1\n"), "{text}");
        let read = LockFile::read(&dir).unwrap().unwrap();
        assert_eq!(read.plugins.len(), 2);
        assert_eq!(read.plugins[0].id, "calc", "sorted by id");
        let calc = read.by_file("calc.wasm").unwrap();
        assert_eq!(calc.digest, digest_of(b"c2"));
        calc.check_signature(&[key.public_key()]).unwrap();
        assert!(read.by_file("other.wasm").is_none());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(names.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn signatures_are_checked_against_trusted_keys() {
        let key = SigningKey::generate().unwrap();
        let other = SigningKey::generate().unwrap();
        let mut e = entry(&key, "calc", b"c");
        let why = e.check_signature(&[other.public_key()]).unwrap_err();
        assert!(why.contains("not a trusted key"), "{why}");
        e.digest = digest_of(b"d");
        let why = e.check_signature(&[key.public_key()]).unwrap_err();
        assert!(why.contains("does not verify"), "{why}");
    }

    #[test]
    fn malformed_lock_files_are_refused() {
        let dir = temp("malformed");
        let key = SigningKey::generate().unwrap();
        let good = entry(&key, "calc", b"c");
        let fields = |file: &str, digest: &str| {
            format!(
                "[[plugin]]\nid = \"calc\"\nversion = \"1\"\nfile = \"{file}\"\ndigest = \"{digest}\"\n\
                 registry = \"r\"\nsigner = \"{}\"\nsignature = \"{}\"\n",
                good.signer, good.signature
            )
        };
        for (text, needle) in [
            ("version = 2\n".to_string(), "of version 2"),
            (
                "version = 1\nextra = 1\n".to_string(),
                "unknown field `extra`",
            ),
            (
                format!("version = 1\n{}", fields("../calc.wasm", &good.digest)),
                "must be a file name",
            ),
            (
                format!("version = 1\n{}", fields("calc.wasm", "sha256:00")),
                "is not a digest",
            ),
            (
                format!("version = 1\n{}", fields("calc.wasm", &good.digest))
                    .replace(&good.signer.to_string(), "ed25519:AAAA"),
                "is not a public key",
            ),
        ] {
            std::fs::write(LockFile::path(&dir), &text).unwrap();
            let e = LockFile::read(&dir).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(e.contains("sandwit.lock"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
