//! The small interpreter's sessions: where a session's run gets its
//! interpreter, and what is kept of it after the run.
//!
//! A session's interpreter runs on the sandbox's own engine (`reusable.rs`),
//! whose memories sandwit creates and can read and write. Every one starts
//! as the *base*: instantiated and prepared with no methods
//! (`runner.prepare([])`), which leaves the same memory byte for byte in
//! every process of the same build and interpreter, and the same handles
//! (the streams and preopen it opened) in the same places. The first one a
//! sandbox starts is copied aside as its base, and each later one is
//! checked against it. After each run that ends well, the pages that
//! differ from the base are sealed (`sessions/saved.rs`) and stored
//! (`sessions/stored.rs`); the live instance stays for the next run here.
//!
//! A run whose live copy is gone or stale (another replica ran the session
//! since, the host restarted, or the last run failed) restores it: a base
//! instance whose memory is created at the saved size, checked to be the
//! base, then the saved pages written over it. Globals outside linear
//! memory need nothing: when an export returns they are back at their
//! values (the stack pointer), or are addresses set by preparing, which is
//! the same every time (see `Prepared::reusable`). A run that leaves a
//! handle open (a file in a global) cannot be saved (a restored instance
//! would not have it): the session stays live here, and its report says
//! it was not stored.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ring::digest;
use wasmtime::Store;

use super::prepared::{Base as Prepare, instantiate_prepared};
use super::reusable::Reusable;
use crate::bindings::python::PythonSandbox as Interpreter;
use crate::capabilities::store::StoreBackend;
use crate::sandbox::SandboxHost;
use crate::sandbox::run::state::RunState;
use crate::sandbox::sessions::SessionLimits;
use crate::sandbox::sessions::saved::{
    self, Expected, Header, Opened, PAGE, SessionKey, now_secs, sandwit_version,
};
use crate::sandbox::sessions::stored::{Head, Stored};
use crate::sandbox::snapshot::Mapping;
use sandwit_contract::types::AgentCtx;

/// The longest a session's run waits for the interpreter on the sandbox's
/// own engine to be loaded (a compile takes longer: the run then keeps its
/// session in this process only, or, for a stored one, is refused).
pub(super) const OWN_WAIT: Duration = Duration::from_secs(20);

/// A session's interpreter between its runs.
pub(crate) struct Live {
    pub(crate) store: Store<RunState>,
    pub(crate) interpreter: Interpreter,
    /// Its memory, when the session can be stored: on the sandbox's own
    /// engine, started as the base.
    pub(crate) memory: Option<Arc<Mapping>>,
    /// The runs of the stored session this copy is current with: `None`
    /// when none is stored. A head with other runs means another run
    /// (another replica's, a run before a restart) stored it since.
    pub(crate) head_runs: Option<u32>,
}

/// The memory every session's interpreter of a sandbox starts as.
struct Base {
    image: Box<[u8]>,
    /// Its SHA-256, in hex.
    hash: String,
}

/// What a sandbox keeps its sessions with beyond its process.
pub(crate) struct Durable {
    stored: Stored,
    key: SessionKey,
    /// The interpreter's component hash, which blobs are bound to.
    interpreter: String,
    base: OnceLock<Base>,
    limits: SessionLimits,
}

/// Why a session run could not start.
pub(crate) enum NotStarted {
    /// The stored session was refused: the message.
    Refused(String),
    /// The host failed (the store, an instantiation).
    Failed(anyhow::Error),
}

impl Durable {
    pub(crate) fn new(
        store: Arc<dyn StoreBackend>,
        key: SessionKey,
        interpreter: &str,
        limits: SessionLimits,
    ) -> Self {
        Durable {
            stored: Stored::new(store),
            key,
            interpreter: interpreter.to_string(),
            base: OnceLock::new(),
            limits,
        }
    }

    /// The stored head of `ctx`'s session `name`.
    pub(crate) async fn head(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<Option<Head>> {
        self.stored.head(ctx, name).await
    }

    /// The stored sessions of `ctx`'s chat.
    pub(crate) async fn list(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<(String, Head)>> {
        self.stored.list(ctx).await
    }

    /// Removes `ctx`'s stored session `name`: whether there was one.
    pub(crate) async fn delete(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<bool> {
        self.stored.delete(ctx, name).await
    }

    /// Sessions of `ctx`'s chat stored and idle past the limit are removed;
    /// the names of those left.
    pub(crate) async fn sweep(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<String>> {
        let now = now_secs();
        let idle = self.limits.idle.as_secs();
        let mut left = Vec::new();
        for (name, head) in self.stored.list(ctx).await? {
            if now.saturating_sub(head.saved_at) > idle {
                self.stored.delete(ctx, &name).await?;
            } else {
                left.push(name);
            }
        }
        Ok(left)
    }

    /// A new session's interpreter: a base instance, its memory `None` if
    /// it is not the base (then it is kept in this process only).
    pub(crate) async fn start(&self, host: &SandboxHost, own: &Reusable) -> anyhow::Result<Live> {
        let (store, interpreter, memory) =
            instantiate_prepared(host, own, None, Prepare::Session(None)).await?;
        let memory = memory.filter(|memory| self.is_base(memory));
        Ok(Live {
            store,
            interpreter,
            memory,
            head_runs: None,
        })
    }

    /// Whether `memory`, just prepared, is the base; the first one a
    /// sandbox checks becomes it.
    fn is_base(&self, memory: &Mapping) -> bool {
        // SAFETY: the instance is its caller's alone, and nothing runs in it.
        let bytes = unsafe { memory.bytes() };
        let base = self.base.get_or_init(|| Base {
            image: bytes.into(),
            hash: hex(digest::digest(&digest::SHA256, bytes).as_ref()),
        });
        let same = *base.image == *bytes;
        if !same {
            tracing::warn!(
                "a session's interpreter was prepared otherwise than the first: its session \
                 is kept in this process only"
            );
        }
        same
    }

    /// The stored session `name` of `ctx`, described by `head`, restored
    /// into a new instance; the runs it had.
    pub(crate) async fn restore(
        &self,
        host: &SandboxHost,
        own: &Reusable,
        ctx: &AgentCtx,
        name: &str,
        max_memory: usize,
    ) -> Result<(Live, u32), NotStarted> {
        let blob = match self.stored.blob(ctx, name).await {
            Ok(Some(blob)) => blob,
            Ok(None) => {
                return Err(NotStarted::Refused(format!(
                    "the stored session {name:?} has no pages (removed while this run read it)"
                )));
            }
            Err(e) => return Err(NotStarted::Failed(e.context("reading the session's pages"))),
        };
        if self.base.get().is_none() {
            // This process has started no session yet: the base comes first.
            let first = self.start(host, own).await.map_err(NotStarted::Failed)?;
            drop(first);
        }
        let base = self.base.get().ok_or_else(|| {
            NotStarted::Refused(format!(
                "the stored session {name:?} cannot be restored: this host's interpreters are \
                 not prepared the same way every time"
            ))
        })?;
        let namespace = ctx.namespace.as_deref().unwrap_or("");
        let expected = Expected {
            interpreter: &self.interpreter,
            base: &base.hash,
            namespace,
            chat: &ctx.chat_key,
            name,
            max_memory: max_memory as u64,
        };
        let opened = saved::open(&self.key, &blob, &expected)
            .map_err(|e| NotStarted::Refused(e.to_string()))?;
        drop(blob);
        let size = opened.header.memory_bytes as usize;
        let (mut store, interpreter, memory) =
            instantiate_prepared(host, own, None, Prepare::Session(Some(size)))
                .await
                .map_err(NotStarted::Failed)?;
        let memory = memory.filter(|m| m.byte_size() == size).ok_or_else(|| {
            NotStarted::Refused(format!(
                "the stored session {name:?} cannot be restored: its interpreter did not come \
                 up with the {size} byte memory it was saved with"
            ))
        })?;
        // SAFETY: the instance is ours alone, and nothing runs in it.
        unsafe { write_pages(&memory, &base.image, &opened) }.map_err(|why| {
            NotStarted::Refused(format!(
                "the stored session {name:?} cannot be restored: {why}"
            ))
        })?;
        // The limiter was told of the module's minimum when the memory was
        // created at the saved size.
        let limiter = &mut store.data_mut().limiter;
        limiter.total_memory = limiter.total_memory.max(size);
        limiter.peak_memory = limiter.peak_memory.max(size);
        let runs = opened.header.runs;
        let live = Live {
            store,
            interpreter,
            memory: Some(memory),
            head_runs: Some(runs),
        };
        Ok((live, runs))
    }

    /// Stores `live`'s session `name` of `ctx` after its run (its `runs`th)
    /// ended well: the stored size, or why it was not stored (`Err(None)`:
    /// it cannot be, it stays live; `Err(Some(..))`: a limit or the store
    /// failed, the message).
    pub(crate) async fn save(
        &self,
        ctx: &AgentCtx,
        name: &str,
        live: &mut Live,
        runs: u32,
    ) -> Result<u64, Option<Unsaved>> {
        let (Some(memory), Some(base)) = (&live.memory, self.base.get()) else {
            return Err(None);
        };
        let data = live.store.data_mut();
        let kept = data.prepared_handles.clone();
        if data.dropped_stream || data.occupied().iter().any(|rep| !kept.contains(rep)) {
            // A handle the run left (an open file in a global) is not in a
            // restored instance.
            return Err(None);
        }
        // SAFETY: the run's export returned, and the store is ours alone.
        let (pages, contents) = changed_pages(unsafe { memory.bytes() }, &base.image);
        let header = Header {
            format: saved::FORMAT,
            sandwit: sandwit_version().into(),
            interpreter: self.interpreter.clone(),
            base: base.hash.clone(),
            base_bytes: base.image.len() as u64,
            namespace: ctx.namespace.clone().unwrap_or_default(),
            chat: ctx.chat_key.clone(),
            name: name.into(),
            runs,
            memory_bytes: memory.byte_size() as u64,
            pages: pages.len() as u32,
            saved_at: now_secs(),
        };
        let blob = saved::seal(&self.key, &header, &pages, &contents)
            .map_err(|e| Some(Unsaved::Failed(e.context("sealing the session"))))?;
        let bytes = blob.len() as u64;
        self.check_room(ctx, name, bytes).await?;
        let head = Head {
            runs,
            bytes,
            memory_bytes: header.memory_bytes,
            saved_at: header.saved_at,
        };
        (self.stored.save(ctx, name, &head, blob).await)
            .map_err(|e| Some(Unsaved::Failed(e.context("storing the session"))))?;
        live.head_runs = Some(runs);
        Ok(bytes)
    }

    /// Whether `bytes` more of session `name` fit its limit and its chat's.
    async fn check_room(
        &self,
        ctx: &AgentCtx,
        name: &str,
        bytes: u64,
    ) -> Result<(), Option<Unsaved>> {
        let limits = &self.limits;
        if bytes > limits.max_bytes {
            return Err(Some(Unsaved::Limit(format!(
                "the session {name:?} would take {bytes} bytes stored, more than its limit of {} \
                 (SessionLimits::max_bytes): it is left as its last good run made it",
                limits.max_bytes
            ))));
        }
        let listed = (self.stored.list(ctx).await)
            .map_err(|e| Some(Unsaved::Failed(e.context("listing the chat's sessions"))))?;
        let others: u64 = (listed.iter())
            .filter(|(other, _)| other != name)
            .map(|(_, head)| head.bytes)
            .sum();
        if others + bytes > limits.chat_bytes {
            return Err(Some(Unsaved::Limit(format!(
                "the chat's sessions would take {} bytes stored, more than its limit of {} \
                 (SessionLimits::chat_bytes): the session {name:?} is left as its last good \
                 run made it",
                others + bytes,
                limits.chat_bytes
            ))));
        }
        Ok(())
    }
}

/// Why a session that could be stored was not.
pub(crate) enum Unsaved {
    /// A limit of `SessionLimits`: the message.
    Limit(String),
    /// The store failed.
    Failed(anyhow::Error),
}

/// The pages of `memory` that differ from `base` (past its end, from
/// zeros), as indices and their bytes.
fn changed_pages(memory: &[u8], base: &[u8]) -> (Vec<u32>, Vec<u8>) {
    let zero = [0u8; PAGE];
    let mut pages = Vec::new();
    let mut contents = Vec::new();
    for (index, page) in memory.chunks(PAGE).enumerate() {
        let at = index * PAGE;
        let was = base
            .get(at..(at + page.len()).min(base.len()))
            .unwrap_or(&[]);
        let same = if was.len() == page.len() {
            page == was
        } else {
            page[..was.len()] == *was && page[was.len()..] == zero[..page.len() - was.len()]
        };
        if !same {
            pages.push(index as u32);
            contents.extend_from_slice(page);
            contents.resize(pages.len() * PAGE, 0);
        }
    }
    (pages, contents)
}

/// Writes the saved pages of `opened` over `memory`, a base instance's
/// memory created at the saved size.
///
/// # Safety
///
/// Nothing runs in the instance, or reads or writes its memory, meanwhile.
unsafe fn write_pages(memory: &Mapping, base: &[u8], opened: &Opened) -> Result<(), String> {
    // SAFETY: the caller has the memory to itself.
    let bytes = unsafe { memory.bytes_mut() };
    if bytes.len() < base.len() || bytes[..base.len()] != *base {
        return Err("the interpreter it would go into was not prepared as its base".into());
    }
    for (page, contents) in opened.pages.iter().zip(opened.contents.chunks(PAGE)) {
        let at = *page as usize * PAGE;
        let end = (at + PAGE).min(bytes.len());
        bytes[at..end].copy_from_slice(&contents[..end - at]);
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_pages_are_those_that_differ_from_the_base_or_from_zeros_past_it() {
        let base = vec![1u8; 4 * PAGE];
        let mut memory = vec![1u8; 4 * PAGE];
        memory.extend(vec![0u8; 3 * PAGE]);
        memory[PAGE + 5] = 9;
        memory[5 * PAGE] = 7;
        let (pages, contents) = changed_pages(&memory, &base);
        assert_eq!(pages, [1, 5]);
        assert_eq!(contents.len(), 2 * PAGE);
        assert_eq!((contents[5], contents[PAGE]), (9, 7));
    }
}
