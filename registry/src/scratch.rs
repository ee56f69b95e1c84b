//! Test support: a folder of a test's own, removed when the test ends.

use std::path::{Path, PathBuf};

/// A fresh folder under the system's temporary directory, named after the
/// test, the process and the time; removed (with what it holds) on drop.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    pub(crate) fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(format!(
            "sandwit-registry-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        )))
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
