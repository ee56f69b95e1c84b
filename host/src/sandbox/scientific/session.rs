//! The scientific interpreter's sessions: a session's own interpreter,
//! live in this process between its runs and never restored, and after
//! every run that ends well its memory stored as the pages that differ from
//! the prepared one (`sessions/keeper.rs`), so that another process (a
//! replica, this host after a restart) restores it, and a run that fails
//! leaves the session as its last good run left it.
//!
//! The base is the prepared memory. It is prepared with fixed entropy and
//! clocks (`runtime/fixed.rs`) over files with fixed times
//! (`scripts/scientific`), which makes it the same in every process of one
//! machine, but not always across machines (the files' other metadata
//! differs). So each process puts its base in the store once, by hash,
//! before it saves a session over it, and a process restoring a session
//! saved over another base reads that base from the store, checks its hash
//! and restores over it. A session saved again is saved over the saver's
//! own base. A base no session was saved over for longer than the idle
//! limit is removed (the sessions saved over it are past that limit too).
//!
//! Why memory is the whole of a session's state: see `template.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::template::{Interpreter, Template};
use crate::sandbox::SandboxHost;
use crate::sandbox::sessions::SessionError;
use crate::sandbox::sessions::keeper::{Base, Keeper, NotStarted};
use crate::sandbox::sessions::saved::{Header, Packs, now_secs};
use crate::sandbox::sessions::stored::Head;
use crate::sandbox::sessions::stored::SCIENTIFIC_SESSIONS;

/// A WebAssembly memory page.
pub(super) const WASM_PAGE: usize = 65536;
/// How often a process marks its base used, at most, in seconds; the sweep
/// of bases allows twice as long past the idle limit.
const TOUCH_EVERY: u64 = 60;

/// A session's interpreter between its runs.
pub(crate) struct Live {
    pub(crate) interpreter: Interpreter,
    /// The head of the stored session this copy is current with (another
    /// means another run stored the session since).
    pub(crate) head: Option<Head>,
    /// What its last save compressed.
    pub(crate) packs: Packs,
}

/// The sandbox's sessions beyond its process.
pub(crate) struct Durable {
    pub(crate) keeper: Keeper,
    image: Arc<[u8]>,
    /// The prepared memory as a base, hashed when first needed.
    own: OnceLock<Base>,
    /// Held while the own base is put in the store or marked used.
    publishing: tokio::sync::Mutex<()>,
    /// When the own base was last marked used, in seconds.
    touched: AtomicU64,
    /// The last other process's base a session was restored over.
    other: Mutex<Option<(String, Arc<[u8]>)>>,
    idle: u64,
}

impl Durable {
    pub(crate) fn new(host: &SandboxHost, template: &Template) -> Self {
        Durable {
            keeper: Keeper::new(
                (host.plugins.services.store.clone(), SCIENTIFIC_SESSIONS),
                host.session_key.clone(),
                // The preopens' layout is in the memory: a session saved
                // with a workspace restores only where there is one.
                &match template.workspaces {
                    true => format!("{}+workspace", template.hash),
                    false => template.hash.clone(),
                },
                host.session_limits,
            ),
            image: template.image.clone(),
            own: OnceLock::new(),
            publishing: tokio::sync::Mutex::new(()),
            touched: AtomicU64::new(0),
            other: Mutex::new(None),
            idle: host.session_limits.idle.as_secs(),
        }
    }

    pub(super) fn own(&self) -> &Base {
        self.own.get_or_init(|| Base::of(self.image.clone()))
    }

    /// Makes sure the own base is in the store and marks it used, at most
    /// once every [`TOUCH_EVERY`] seconds (putting it there again if a
    /// sweep removed it meanwhile); then removes the bases long unused, as
    /// far as it can (a failure there stops no session's save).
    pub(super) async fn publish(&self) -> anyhow::Result<()> {
        let fresh =
            |now: u64| now.saturating_sub(self.touched.load(Ordering::Relaxed)) < TOUCH_EVERY;
        if fresh(now_secs()) {
            return Ok(());
        }
        let _one = self.publishing.lock().await;
        let now = now_secs();
        if fresh(now) {
            return Ok(());
        }
        let stored = self.keeper.stored();
        let hash = self.own().hash.clone();
        // A sweep removes a base's mark before the base: with the mark
        // there, so is the base.
        if stored.has_base(&hash).await? {
            stored.touch_base(&hash, now).await?;
        } else {
            let image = self.image.clone();
            let packed =
                tokio::task::spawn_blocking(move || zstd::bulk::compress(&image, 1)).await??;
            stored.put_base(&hash, packed).await?;
        }
        self.touched.store(now, Ordering::Relaxed);
        let idle = self.idle + 2 * TOUCH_EVERY;
        if let Err(e) = stored.sweep_bases(&hash, now, idle).await {
            tracing::warn!("removing the bases of sessions long unused: {e:#}");
        }
        Ok(())
    }

    /// Marks the base `hash` used now, for a session loaded over it: this
    /// host's own (put in the store if it is not), or another that the
    /// store holds; refused if it does not.
    pub(super) async fn hold_base(&self, hash: &str) -> Result<(), SessionError> {
        if hash == self.own().hash {
            self.touched.store(0, Ordering::Relaxed);
            return Ok(self.publish().await?);
        }
        let stored = self.keeper.stored();
        if !stored.has_base(hash).await? {
            return Err(SessionError::Refused(format!(
                "the session dump was saved over a prepared interpreter (base {}) this host's \
                 store does not hold: it loads only where that interpreter's sessions are stored",
                hash.get(..12).unwrap_or(hash)
            )));
        }
        stored.touch_base(hash, now_secs()).await?;
        Ok(())
    }

    /// The base the session `header` describes was saved over: this
    /// process's, or another's read from the store and checked against its
    /// hash.
    pub(super) async fn base_for(&self, header: &Header) -> Result<Arc<[u8]>, NotStarted> {
        let own = self.own();
        if header.base == own.hash {
            return Ok(own.image.clone());
        }
        let cached = self.other.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((hash, image)) = cached
            && hash == header.base
        {
            return Ok(image);
        }
        let name = &header.name;
        let refused = |why: &str| {
            NotStarted::Refused(format!(
                "the stored session {name:?} was saved over a prepared interpreter this host does \
                 not have (base {}), and {why}",
                header.base.get(..12).unwrap_or(&header.base)
            ))
        };
        let stored = self.keeper.stored();
        let packed = (stored.base(&header.base).await)
            .map_err(|e| NotStarted::Failed(e.context("reading a session's base")))?
            .ok_or_else(|| refused("the store does not hold it"))?;
        let size = header.base_bytes as usize;
        let image = tokio::task::spawn_blocking(move || zstd::bulk::decompress(&packed, size))
            .await
            .map_err(|e| NotStarted::Failed(e.into()))?
            .map_err(|_| refused("the stored copy of it does not decompress"))?;
        let base = Base::of(image.into());
        if base.image.len() != size || base.hash != header.base {
            return Err(refused("the stored copy of it is not that base"));
        }
        let image = base.image.clone();
        *self.other.lock().unwrap_or_else(|p| p.into_inner()) = Some((base.hash, base.image));
        Ok(image)
    }
}
