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

use wasmtime::Store;

use super::prepared::{Base as Prepare, instantiate_prepared};
use super::reusable::Reusable;
use crate::bindings::python::PythonSandbox as Interpreter;
use crate::sandbox::SandboxHost;
use crate::sandbox::run::state::RunState;
use crate::sandbox::sessions::keeper::{Base, Keeper, NotStarted, Unsaved, write_pages};
use crate::sandbox::sessions::saved::Packs;
use crate::sandbox::sessions::stored::Head;
use crate::sandbox::snapshot::Mapping;
use sandwit_contract::limits::RunLimits;
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
    /// The head of the stored session this copy is current with: `None`
    /// when none is stored. Another head means another run (another
    /// replica's, a run before a restart) stored the session since.
    pub(crate) head: Option<Head>,
    /// What its last save compressed.
    pub(crate) packs: Packs,
}

/// What a sandbox keeps its sessions with beyond its process: the keeper
/// and the base.
pub(crate) struct Durable {
    pub(crate) keeper: Keeper,
    /// The memory every session's interpreter starts as.
    base: OnceLock<Base>,
}

impl Durable {
    pub(crate) fn new(keeper: Keeper) -> Self {
        Durable {
            keeper,
            base: OnceLock::new(),
        }
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
            head: None,
            packs: Packs::default(),
        })
    }

    /// Whether `memory`, just prepared, is the base; the first one a
    /// sandbox checks becomes it.
    fn is_base(&self, memory: &Mapping) -> bool {
        // SAFETY: the instance is its caller's alone, and nothing runs in it.
        let bytes = unsafe { memory.bytes() };
        let base = self.base.get_or_init(|| Base::of(bytes.into()));
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
        (host, own): (&SandboxHost, &Reusable),
        (ctx, name, head): (&AgentCtx, &str, &Head),
        max_memory: usize,
    ) -> Result<(Live, u32), NotStarted> {
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
        let opened = (self.keeper)
            .open((ctx, name, head), Some(&base.hash), max_memory)
            .await?;
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
        let bytes = unsafe { memory.bytes_mut() };
        if bytes.len() < base.image.len() || bytes[..base.image.len()] != *base.image {
            return Err(NotStarted::Refused(format!(
                "the stored session {name:?} cannot be restored: the interpreter it would go \
                 into was not prepared as its base"
            )));
        }
        write_pages(bytes, &opened).map_err(|why| {
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
            head: Some(head.clone()),
            packs: Packs::default(),
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
        limits: &RunLimits,
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
        let memory = unsafe { memory.bytes() };
        let head = (self.keeper)
            .save(
                (ctx, name),
                (memory, base, None),
                (runs, live.head.as_ref()),
                limits,
                &mut live.packs,
            )
            .await
            .map_err(Some)?;
        let bytes = head.bytes;
        live.head = Some(head);
        Ok(bytes)
    }
}
