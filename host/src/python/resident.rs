//! A sandbox's resident pool: an engine of its own whose slots keep the
//! interpreter's whole initial memory resident ([`Pool::Resident`]), so an
//! interpreter there takes no page fault in its image, and the count of its
//! free slots, so neither the preparing thread nor a run asks the pool for
//! more than it holds (a run that finds none instantiates in the host's
//! pool).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wasmtime::component::Component;

use super::methods::linker;
use super::state::RunState;
use crate::bindings::python::PythonSandboxPre;
use crate::engine::Pool;
use crate::runtime::HostInner;

/// Bytes in a WebAssembly page.
const WASM_PAGE: usize = 64 << 10;

/// The interpreter on the resident pool's engine, and its free slots.
pub(crate) struct Resident {
    pub(crate) pre: PythonSandboxPre<RunState>,
    slots: Slots,
    /// The slots the pool has.
    #[cfg_attr(not(feature = "internals"), expect(dead_code))]
    pub(crate) size: usize,
}

/// The free slots of a pool.
struct Slots(Arc<AtomicUsize>);

/// A slot of the resident pool, given back when dropped: keep it beside the
/// store that uses it, dropped after the store.
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Slots {
    fn new(count: usize) -> Self {
        Slots(Arc::new(AtomicUsize::new(count)))
    }

    fn take(&self) -> Option<Slot> {
        self.0
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| n.checked_sub(1))
            .ok()
            .map(|_| Slot(self.0.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl Resident {
    /// A pool of `slots` slots for the interpreter `component` (whose hash
    /// is `hash`); `None` for a component whose memory size is unknown (one
    /// importing core modules), which stays in the host's pool.
    pub(crate) fn new(
        host: &HostInner,
        component: &Component,
        hash: &str,
        slots: usize,
    ) -> anyhow::Result<Option<Self>> {
        let Some(needs) = component.resources_required() else {
            return Ok(None);
        };
        let Some(pages) = needs.max_initial_memory_size else {
            return Ok(None);
        };
        let engine = host.engine_with(Pool::Resident {
            instances: u32::try_from(slots)?,
            memories: needs.num_memories,
            tables: needs.num_tables,
            keep_resident: usize::try_from(pages)? * WASM_PAGE,
        })?;
        let component = host.cache.for_engine(&engine, component, hash)?;
        let pre = linker(&engine)?.instantiate_pre(&component)?;
        Ok(Some(Resident {
            pre: PythonSandboxPre::new(pre)?,
            slots: Slots::new(slots),
            size: slots,
        }))
    }

    /// A free slot, if there is one.
    pub(crate) fn take(&self) -> Option<Slot> {
        self.slots.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_until_dropped() {
        let slots = Slots::new(2);
        let (a, b) = (slots.take(), slots.take());
        assert!(a.is_some() && b.is_some());
        assert!(slots.take().is_none());
        drop(a);
        let c = slots.take();
        assert!(c.is_some());
        assert!(slots.take().is_none());
        drop((b, c));
        assert_eq!(slots.0.load(Ordering::Relaxed), 2);
    }
}
