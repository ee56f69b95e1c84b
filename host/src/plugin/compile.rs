//! Loading a component off the async runtime's workers: compiling one takes
//! seconds (10-30 s for the CPython interpreter), which would hold up every
//! other task of the worker the load was awaited on. wasmtime's compile has
//! threads of its own; the blocking pool only keeps the worker free. Used
//! for plugins (`load.rs`) and for the Python sandbox (`Host::load_python`
//! and the rest).

use std::path::{Path, PathBuf};

use crate::runtime::Runtime;
use crate::runtime::loader::Source;
use sandwit_contract::error::LoadError;

/// A [`Source`] the blocking pool can own: bytes copied, a path and labels
/// as owned strings.
enum Owned {
    Bytes {
        label: String,
        bytes: Box<[u8]>,
    },
    Hashed {
        label: String,
        bytes: Box<[u8]>,
        sha256: String,
    },
    File(PathBuf),
}

impl Owned {
    fn new(source: Source<'_>) -> Self {
        match source {
            Source::Bytes { label, bytes } => Owned::Bytes {
                label: label.to_string(),
                bytes: bytes.into(),
            },
            Source::Hashed {
                label,
                bytes,
                sha256,
            } => Owned::Hashed {
                label: label.to_string(),
                bytes: bytes.into(),
                sha256: sha256.to_string(),
            },
            Source::File(path) => Owned::File(path.to_path_buf()),
        }
    }

    fn source(&self) -> Source<'_> {
        match self {
            Owned::Bytes { label, bytes } => Source::Bytes { label, bytes },
            Owned::Hashed {
                label,
                bytes,
                sha256,
            } => Source::Hashed {
                label,
                bytes,
                sha256,
            },
            Owned::File(path) => Source::File(path),
        }
    }
}

/// What names `source` in errors.
fn label(source: &Source<'_>) -> String {
    match source {
        Source::Bytes { label, .. } | Source::Hashed { label, .. } => label.to_string(),
        Source::File(path) => Path::display(path).to_string(),
    }
}

/// Runs `load` of `source` (which compiles it, or loads its code from
/// `runtime`'s cache) on tokio's blocking pool, and awaits it; a panic in
/// it goes on here. Bytes are copied for it, except bytes whose hash is
/// given and whose code the cache has: nothing is compiled then, and the
/// load runs here (copying the tens of MB of the embedded interpreter
/// would cost more than the load itself).
pub(crate) async fn off_worker<T: Send + 'static>(
    runtime: &Runtime,
    source: Source<'_>,
    load: impl FnOnce(Source<'_>) -> Result<T, LoadError> + Send + 'static,
) -> Result<T, LoadError> {
    if let Source::Hashed { sha256, .. } = source
        && runtime.cache.contains(sha256)
    {
        return load(source);
    }
    let label = label(&source);
    let owned = Owned::new(source);
    match tokio::task::spawn_blocking(move || load(owned.source())).await {
        Ok(loaded) => loaded,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // The runtime is shutting down.
            Err(e) => Err(LoadError::Host {
                plugin: label,
                source: e.into(),
            }),
        },
    }
}
