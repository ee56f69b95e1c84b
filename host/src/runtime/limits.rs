//! How the host enforces the contract's limits (`sandwit_contract::limits`):
//! metering, the budget of a call, the store-level limiter that enforces the
//! memory and table caps and remembers which one a guest hit, and capped
//! event lists.

use std::fmt;
use std::time::{Duration, Instant};

use sandwit_contract::limits::{CallLimits, HOOK_FUEL};
use wasmtime::ResourceLimiter;

/// How a host bounds the CPU its guests use. Part of the engine: code
/// compiled under one setting is not used under another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Metering {
    /// Fuel (a deterministic instruction budget, [`CallLimits::fuel`] and
    /// [`RunLimits::fuel`](crate::RunLimits::fuel)) and the wall-clock deadline. The default. Running
    /// guest code yields to the host every million units of fuel, where
    /// the deadline's timer can end it, so the deadline adds no check to the
    /// compiled code.
    #[default]
    FuelAndDeadline,
    /// Only the wall-clock deadline, by epoch interruption (a check at every
    /// function entry and loop header, against a 1 ms tick): faster code
    /// than fuel's, but the fuel limits are not enforced and fuel used
    /// reads 0.
    DeadlineOnly,
    /// Neither: guest code that never returns runs forever (a deadline still
    /// ends a guest blocked in the host). For measuring what the limits cost,
    /// never for untrusted code. Only with the `internals` feature.
    #[cfg(feature = "internals")]
    Off,
}

impl Metering {
    /// Whether guests consume fuel.
    pub fn fuel(self) -> bool {
        self == Metering::FuelAndDeadline
    }

    /// Whether running guest code is interrupted at its deadline.
    pub fn deadline(self) -> bool {
        #[cfg(feature = "internals")]
        if self == Metering::Off {
            return false;
        }
        true
    }

    /// Whether the deadline is kept by epoch interruption (compiled into the
    /// code) rather than by yielding on fuel.
    pub(crate) fn epochs(self) -> bool {
        self == Metering::DeadlineOnly
    }
}

/// The fuel a store holds when its limits give it no budget of its own:
/// more than any deadline lets it burn.
pub(crate) const UNBUDGETED_FUEL: u64 = i64::MAX as u64;

/// Fuel a metered guest uses between two yields to the host, where a passed
/// deadline ends it: a deadline is kept to within the time this much fuel
/// takes, and a yield's cost is paid once per this much fuel.
pub(crate) const YIELD_FUEL: u64 = 1_000_000;

/// Bytes an event counts for besides its text: what holding it costs.
pub(crate) const EVENT_OVERHEAD_BYTES: usize = 64;

/// What an event holds, as the event caps count it.
pub(crate) trait EventSize {
    /// Its text's bytes (the caps add [`EVENT_OVERHEAD_BYTES`]).
    fn text_bytes(&self) -> usize;
}

/// The events of a call or a run, kept within a count and a byte cap.
#[derive(Debug)]
pub(crate) struct CappedEvents<E> {
    list: Vec<E>,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

/// The cap an event would break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventsFull {
    Count(usize),
    Bytes(usize),
}

impl fmt::Display for EventsFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventsFull::Count(max) => write!(f, "more than {max} events"),
            EventsFull::Bytes(max) => write!(f, "more than {max} bytes of events"),
        }
    }
}

impl<E: EventSize> CappedEvents<E> {
    /// No events, at most `max_count` of them and `max_bytes` in all.
    pub(crate) fn new(max_count: usize, max_bytes: usize) -> Self {
        CappedEvents {
            list: Vec::new(),
            bytes: 0,
            max_count,
            max_bytes,
        }
    }

    /// Whether `event` fits; if not, the cap it would break.
    pub(crate) fn room(&self, event: &E) -> Result<(), EventsFull> {
        if self.list.len() >= self.max_count {
            return Err(EventsFull::Count(self.max_count));
        }
        if self.bytes + EVENT_OVERHEAD_BYTES + event.text_bytes() > self.max_bytes {
            return Err(EventsFull::Bytes(self.max_bytes));
        }
        Ok(())
    }

    /// Records `event` if it fits.
    pub(crate) fn push(&mut self, event: E) -> Result<(), EventsFull> {
        self.room(&event)?;
        self.bytes += EVENT_OVERHEAD_BYTES + event.text_bytes();
        self.list.push(event);
        Ok(())
    }

    /// The events, leaving none (the caps stay).
    pub(crate) fn take(&mut self) -> Vec<E> {
        self.bytes = 0;
        std::mem::take(&mut self.list)
    }

    /// The byte cap.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

/// A [`ResourceLimiter`] that refuses growth past the caps by trapping, and
/// records that it did so the trap can be reported as a memory limit.
///
/// The memory cap is on all the store's linear memories together: a
/// component of eight core instances cannot take eight times the cap.
#[derive(Debug)]
pub(crate) struct StoreLimiter {
    memory_bytes: usize,
    table_elements: usize,
    max_core_instances: usize,
    /// Set when a guest asked for more than it may have.
    pub(crate) hit: Option<String>,
    /// The bytes of all the store's memories now.
    pub(crate) total_memory: usize,
    /// The most the store's memories held together so far, in bytes.
    pub(crate) peak_memory: usize,
}

impl StoreLimiter {
    pub(crate) fn new(limits: &CallLimits) -> Self {
        Self::with_memory(limits, limits.memory_bytes)
    }

    /// The caps of `limits`, with another memory cap.
    pub(crate) fn with_memory(limits: &CallLimits, memory_bytes: usize) -> Self {
        StoreLimiter {
            memory_bytes,
            table_elements: limits.table_elements,
            max_core_instances: limits.max_core_instances,
            hit: None,
            total_memory: 0,
            peak_memory: 0,
        }
    }

    /// The same store with another memory cap (a prepared interpreter taken
    /// by a run with its own limits); what its memories hold is kept.
    pub(crate) fn recapped(&self, limits: &CallLimits, memory_bytes: usize) -> Self {
        StoreLimiter {
            total_memory: self.total_memory,
            peak_memory: self.total_memory,
            ..StoreLimiter::with_memory(limits, memory_bytes)
        }
    }

    fn refuse(&mut self, what: String) -> wasmtime::Result<bool> {
        let err = wasmtime::format_err!("{what}");
        self.hit = Some(what);
        Err(err)
    }
}

impl ResourceLimiter for StoreLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = (self.total_memory - current.min(self.total_memory)).saturating_add(desired);
        if total > self.memory_bytes {
            return self.refuse(format!(
                "memory grew to {total} bytes, past the limit of {} bytes",
                self.memory_bytes
            ));
        }
        self.total_memory = total;
        self.peak_memory = self.peak_memory.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            return self.refuse(format!(
                "a table grew to {desired} elements, past the limit of {}",
                self.table_elements
            ));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.max_core_instances
    }

    fn tables(&self) -> usize {
        self.max_core_instances * 4
    }

    fn memories(&self) -> usize {
        self.max_core_instances
    }
}

/// The fuel and time a call may use.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Fuel units (for limits with none, `i64::MAX`: more than any deadline
    /// lets a guest burn).
    pub fuel: u64,
    /// When the call must have finished.
    pub deadline: Instant,
}

impl Budget {
    /// The budget the limits give a call starting now.
    pub fn from_limits(limits: &CallLimits) -> Self {
        Budget::new(limits.fuel, limits.time, Instant::now())
    }

    /// The budget of the host's own calls into a plugin (`describe`, the
    /// lifecycle hooks), which run for every load, and every run's context,
    /// on no user's behalf: the limits', with at most [`HOOK_FUEL`] fuel.
    pub(crate) fn for_hooks(limits: &CallLimits) -> Self {
        let fuel = limits.fuel.map_or(HOOK_FUEL, |fuel| fuel.min(HOOK_FUEL));
        Budget::new(Some(fuel), limits.time, Instant::now())
    }

    /// The budget of `fuel` (none: [`UNBUDGETED_FUEL`]) and `time` from `start`.
    pub(crate) fn new(fuel: Option<u64>, time: Duration, start: Instant) -> Self {
        Budget {
            fuel: fuel.unwrap_or(UNBUDGETED_FUEL),
            deadline: start + time,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_refuses_and_remembers() {
        let limits = CallLimits {
            memory_bytes: 1 << 20,
            table_elements: 10,
            ..CallLimits::default()
        };
        let mut limiter = StoreLimiter::new(&limits);
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        assert!(limiter.hit.is_none());
        assert!(limiter.memory_growing(1 << 20, 2 << 20, None).is_err());
        assert_eq!(
            limiter.peak_memory,
            1 << 20,
            "what was granted, not what was asked"
        );
        assert!(
            limiter
                .hit
                .as_deref()
                .unwrap()
                .contains("limit of 1048576 bytes")
        );
        // The cap is on all memories together.
        let mut limiter = StoreLimiter::new(&limits);
        assert!(limiter.memory_growing(0, 600 << 10, None).unwrap());
        assert!(limiter.memory_growing(0, 400 << 10, None).unwrap());
        assert!(limiter.memory_growing(0, 64 << 10, None).is_err());
        assert!(limiter.memory_growing(400 << 10, 424 << 10, None).unwrap());
        assert_eq!(limiter.peak_memory, 1 << 20);
        let mut limiter = StoreLimiter::new(&limits);
        assert!(limiter.table_growing(0, 11, None).is_err());
        assert!(limiter.hit.as_deref().unwrap().contains("elements"));
    }

    struct Line(usize);

    impl EventSize for Line {
        fn text_bytes(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn events_keep_to_their_count_and_bytes() {
        let mut events = CappedEvents::new(3, 3 * EVENT_OVERHEAD_BYTES + 10);
        events.push(Line(4)).unwrap();
        events.push(Line(6)).unwrap();
        assert_eq!(
            events.push(Line(1)),
            Err(EventsFull::Bytes(3 * EVENT_OVERHEAD_BYTES + 10))
        );
        events.push(Line(0)).unwrap();
        assert_eq!(events.push(Line(0)), Err(EventsFull::Count(3)));
        assert_eq!(events.take().len(), 3);
        events.push(Line(10)).unwrap();
    }
}
