//! A sandbox's own engine, whose interpreters' memories sandwit creates
//! (`snapshot.rs`), so an interpreter prepared there is put back as it was
//! prepared after a run and serves the next one instead of being
//! instantiated again. Only the preparing thread instantiates there: runs
//! that find no interpreter prepared instantiate in the host's pool.
//!
//! That engine initialises memory by copying the data segments (wasmtime's
//! copy-on-write images need memory it maps itself), which is compiled
//! into the code: the interpreter is compiled for it separately, once per
//! cache, on the preparing thread while it has nothing else to do.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use wasmtime::Engine;

use crate::bindings::python::PythonSandboxPre;
use crate::sandbox::run::state::RunState;
use crate::sandbox::small::linker::linker;
use crate::sandbox::snapshot::Memories;
use sandwit_contract::signing::component_hash;

use crate::runtime::cache::CodeCache;
use crate::runtime::engine::Pool;
use crate::runtime::loader::Source;
use crate::sandbox::SandboxHost;

/// The interpreter on the sandbox's own engine.
#[derive(Clone)]
pub(crate) struct Reusable {
    pub(crate) pre: PythonSandboxPre<RunState>,
    /// Where that engine's memories come from.
    pub(crate) memories: Arc<Memories>,
}

/// The sandbox's own engine, before the interpreter is compiled for it.
pub(crate) struct Pending {
    engine: Engine,
    memories: Arc<Memories>,
    cache: CodeCache,
    hash: String,
    /// The interpreter's bytes, when its code for this engine is not in the
    /// cache yet.
    origin: Option<Origin>,
}

/// Where the interpreter's bytes are found again.
enum Origin {
    Bytes(Arc<[u8]>),
    File(PathBuf),
}

/// Compiling the interpreter takes a core for up to a minute: one sandbox
/// at a time does it in a process, and the others then find it cached.
static COMPILING: Mutex<()> = Mutex::new(());

impl Pending {
    /// The sandbox's own engine for the interpreter `source`, whose hash is
    /// `hash`, with the host's settings.
    pub(crate) fn new(host: &SandboxHost, source: &Source<'_>, hash: &str) -> anyhow::Result<Self> {
        let memories = Arc::new(Memories::default());
        let engine = host.runtime().engine_with(Pool::Owned {
            memories: memories.clone(),
        })?;
        let cache = host.runtime().cache.for_engine(&engine)?;
        let origin = (!cache.contains(hash)).then(|| match source {
            Source::Bytes { bytes, .. } | Source::Hashed { bytes, .. } => {
                Origin::Bytes(Arc::from(*bytes))
            }
            Source::File(path) => Origin::File(path.to_path_buf()),
        });
        Ok(Pending {
            engine,
            memories,
            cache,
            hash: hash.to_string(),
            origin,
        })
    }

    /// Whether the interpreter's code for this engine is still to be
    /// compiled (seconds of a core's time, unlike loading it).
    pub(crate) fn compiles(&self) -> bool {
        self.origin.is_some()
    }

    /// The interpreter on this engine: loaded from the cache or compiled.
    pub(crate) fn finish(self) -> anyhow::Result<Reusable> {
        let _one_at_a_time = self
            .origin
            .as_ref()
            .map(|_| COMPILING.lock().unwrap_or_else(|p| p.into_inner()));
        let component = match self.cache.lookup(&self.engine, &self.hash) {
            Some((component, _)) => component,
            None => {
                let bytes = match self.origin {
                    Some(Origin::Bytes(bytes)) => bytes,
                    Some(Origin::File(path)) => Arc::from(std::fs::read(&path)?),
                    None => anyhow::bail!("the interpreter's cached code is gone"),
                };
                anyhow::ensure!(
                    component_hash(&bytes) == self.hash,
                    "the interpreter's file changed since it was loaded"
                );
                tracing::info!("compiling the interpreter for reuse across runs (once per cache)");
                self.cache.get(&self.engine, &self.hash, &bytes)??.0
            }
        };
        let pre = linker(&self.engine)?.instantiate_pre(&component)?;
        Ok(Reusable {
            pre: PythonSandboxPre::new(pre)?,
            memories: self.memories,
        })
    }
}
