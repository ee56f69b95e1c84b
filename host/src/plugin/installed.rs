//! The check of a plugin file against its folder's lock file
//! ([`sandwit_contract::lock`]) and the policy's `[registry]`, made when the file is
//! loaded, before its bytes are compiled.
//!
//! It belongs to loading a file ([`Host::load_plugin_file`]), not to a front
//! end: every way of loading an installed plugin (the CLI's `--plugins DIR`,
//! `--plugin FILE`, `call`, `inspect`, an embedder, the Python package) goes
//! through it, as it does through the policy's `sha256` pins. Like those
//! pins, it is keyed by content: the lock file names the digest of the bytes
//! that were verified when they were installed, and a file that no longer
//! has it is refused whatever it claims to be.
//!
//! [`Host::load_plugin_file`]: crate::Host::load_plugin_file

use std::path::{Path, PathBuf};

use sandwit_contract::error::LoadError;
use sandwit_contract::lock::{LockEntry, LockFile};
use sandwit_contract::policy::RegistryPolicy;

/// A plugin file's entry in its folder's lock file.
pub(crate) struct Installed {
    pub(crate) entry: LockEntry,
    lock: PathBuf,
    file: String,
}

/// The lock entry of the plugin file at `path`, if its folder has a lock
/// file that lists it; with `require_signature`, refuses a file without one
/// signed by a trusted key.
pub(crate) fn lookup(policy: &RegistryPolicy, path: &Path) -> Result<Option<Installed>, LoadError> {
    let file = path.display().to_string();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str());
    let lock = LockFile::read(dir).map_err(|error| LoadError::Lock {
        plugin: file.clone(),
        error,
    })?;
    let entry = lock.as_ref().zip(name).and_then(|(l, n)| l.by_file(n));
    let unsigned = |why: String| LoadError::Unsigned {
        plugin: file.clone(),
        why,
    };
    if policy.require_signature {
        let lock_path = LockFile::path(dir);
        let Some(entry) = entry else {
            return Err(unsigned(format!(
                "it is not listed in {} (install it with `sandwit install`)",
                lock_path.display()
            )));
        };
        entry
            .check_signature(&policy.trusted_keys)
            .map_err(|why| unsigned(format!("in {}, {why}", lock_path.display())))?;
    }
    Ok(entry.map(|entry| Installed {
        entry: entry.clone(),
        lock: LockFile::path(dir),
        file,
    }))
}

/// With `require_signature`, a plugin from bytes is refused: it has no
/// folder, so no lock file to be listed in.
pub(crate) fn check_bytes(policy: &RegistryPolicy, label: &str) -> Result<(), LoadError> {
    if policy.require_signature {
        return Err(LoadError::Unsigned {
            plugin: label.to_string(),
            why: "it was loaded from bytes, not from a file listed in a folder's lock file"
                .to_string(),
        });
    }
    Ok(())
}

impl Installed {
    /// Refuses bytes whose SHA-256 (`hash`, hex) is not the recorded digest.
    pub(crate) fn check_hash(&self, hash: &str) -> Result<(), LoadError> {
        let actual = format!("sha256:{hash}");
        if actual != self.entry.digest {
            return Err(LoadError::Tampered {
                plugin: self.entry.id.clone(),
                file: self.file.clone(),
                expected: self.entry.digest.clone(),
                actual,
                lock: self.lock.display().to_string(),
            });
        }
        Ok(())
    }

    /// Refuses a plugin whose manifest names another id or version than its
    /// entry. The signature covers only the bytes' digest, so a registry
    /// could list the signed bytes of an old version under a new version
    /// number; the manifest inside the bytes says which version they are.
    pub(crate) fn check_manifest(&self, id: &str, version: &str) -> Result<(), LoadError> {
        let same_version = match (
            semver::Version::parse(version),
            semver::Version::parse(&self.entry.version),
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => version == self.entry.version,
        };
        let problem = if id != self.entry.id {
            format!(
                "its manifest names the id `{id}`, but {} records it as `{}`",
                self.lock.display(),
                self.entry.id
            )
        } else if !same_version {
            format!(
                "its manifest says version {version}, but {} records it as {} `{}`",
                self.lock.display(),
                self.entry.id,
                self.entry.version
            )
        } else {
            return Ok(());
        };
        Err(LoadError::Rejected {
            plugin: self.file.clone(),
            problems: vec![problem],
        })
    }
}
