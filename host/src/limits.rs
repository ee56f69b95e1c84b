//! Resource limits applied to every call into a guest, and the store-level
//! limiter that enforces the memory and table caps and remembers which one a
//! guest hit.

use std::fmt;
use std::time::{Duration, Instant};

use wasmtime::ResourceLimiter;

/// How a host bounds the CPU its guests use. Part of the engine: code
/// compiled under one setting is not used under another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Metering {
    /// Fuel (a deterministic instruction budget, [`Limits::fuel`] and
    /// [`RunLimits::fuel`]) and the wall-clock deadline. The default. Running
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

/// Fuel units a core burns in a second of interpreted Python, about: the
/// rate to turn a CPU-time budget into [`RunLimits::fuel`] or
/// [`Limits::fuel`]. It varies with the code and the core (BENCHMARKS.md,
/// "Fuel and CPU time", has the measurement), which is why the time limit,
/// not fuel, bounds busy code by default.
pub const FUEL_PER_CPU_SECOND: u64 = 8_000_000_000;

/// The most fuel `describe` and a lifecycle hook may burn, whatever the
/// limits say (about a quarter of a CPU-second): a plugin that spins there
/// would otherwise cost every load, or every run's context, its whole time
/// limit of CPU.
pub const HOOK_FUEL: u64 = 2_000_000_000;

/// The fuel a store holds when its limits give it no budget of its own:
/// more than any deadline lets it burn.
pub(crate) const UNBUDGETED_FUEL: u64 = i64::MAX as u64;

/// Fuel a metered guest uses between two yields to the host, where a passed
/// deadline ends it: a deadline is kept to within the time this much fuel
/// takes, and a yield's cost is paid once per this much fuel.
pub(crate) const YIELD_FUEL: u64 = 1_000_000;

/// The most bytes a `.wasm` file may have before it is even parsed.
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// Limits on one call into a plugin (and, later, one Python run).
///
/// Defaults (closed, and ample for the example plugins):
///
/// | limit | default |
/// | --- | --- |
/// | `fuel` | none: the time limit bounds busy code |
/// | `time` | 10 s wall clock |
/// | `memory_bytes` | 64 MiB for all the memories of an instance together |
/// | `table_elements` | 20,000 per table |
/// | `max_core_instances` | 64 core instances per store |
/// | `max_value_bytes` | 16 MiB per argument object or result |
/// | `max_value_nodes` | 1,000,000 nodes per value |
/// | `max_value_depth` | 64 levels |
/// | `max_event_bytes` | 16 MiB of events (logs, chat messages, refusals) per call |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// A deterministic CPU budget in fuel units (one per wasm instruction,
    /// roughly; [`FUEL_PER_CPU_SECOND`] in CPU-time terms), or `None` for
    /// none of its own: then [`Limits::time`] alone bounds busy code, and
    /// running into it is reported as [`LimitKind::Time`].
    pub fuel: Option<u64>,
    /// Wall-clock deadline.
    pub time: Duration,
    /// Linear memory of an instance: all of its memories together (a
    /// component may have several).
    pub memory_bytes: usize,
    /// Elements per table.
    pub table_elements: usize,
    /// Core instances per store (a component instantiates several).
    pub max_core_instances: usize,
    /// Size of the arguments or a result crossing the boundary, counted as
    /// [`sandwit_value::encoded_size`] does.
    pub max_value_bytes: usize,
    /// Nodes in one value.
    pub max_value_nodes: usize,
    /// Nesting depth of one value.
    pub max_value_depth: usize,
    /// Bytes the events of one call may hold (each counted with its text and
    /// a fixed overhead); log lines past it are dropped and counted, a chat
    /// message past it is refused.
    pub max_event_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: None,
            time: Duration::from_secs(10),
            memory_bytes: 64 << 20,
            table_elements: 20_000,
            max_core_instances: 64,
            max_value_bytes: 16 << 20,
            max_value_nodes: 1_000_000,
            max_value_depth: 64,
            max_event_bytes: 16 << 20,
        }
    }
}

impl Limits {
    /// The value-decoding bounds these limits imply.
    pub fn decode_limits(&self) -> sandwit_value::DecodeLimits {
        sandwit_value::DecodeLimits {
            max_nodes: self.max_value_nodes,
            max_depth: self.max_value_depth,
            max_bytes: self.max_value_bytes,
        }
    }
}

/// Limits on one Python run. A plugin call made by the run draws on the run's
/// remaining fuel and time (within the plugin's own [`Limits`] for memory and
/// value sizes).
///
/// Defaults:
///
/// | limit | default |
/// | --- | --- |
/// | `fuel` | none: the time limit bounds busy code |
/// | `time` | 10 s wall clock, counted from when the run gets a slot ([`RunSlots`](crate::RunSlots)) |
/// | `memory_bytes` | 256 MiB for the interpreter |
/// | `max_output_bytes` | 1 MiB each for stdout and stderr |
/// | `max_calls` | 1,000 method calls |
/// | `max_events` | 10,000 events |
/// | `max_event_bytes` | 64 MiB of events |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLimits {
    /// A deterministic CPU budget for the interpreter and the plugins it
    /// calls, in fuel units ([`FUEL_PER_CPU_SECOND`] in CPU-time terms), or
    /// `None` for none of its own: then [`RunLimits::time`] alone bounds
    /// busy code, and running into it is reported as [`LimitKind::Time`].
    pub fuel: Option<u64>,
    /// Wall-clock deadline for the whole run, counted from when it starts
    /// executing: the time it waited for one of the host's run slots is
    /// bounded on its own ([`RunSlots::max_wait`](crate::RunSlots)).
    pub time: Duration,
    /// Linear memory of the interpreter.
    pub memory_bytes: usize,
    /// Bytes captured from stdout, and again from stderr.
    pub max_output_bytes: usize,
    /// Method calls per run.
    pub max_calls: u32,
    /// Events per run (calls, logs, chat and system messages, refusals);
    /// the run ends at [`LimitKind::Events`] past it.
    pub max_events: usize,
    /// Bytes the run's events may hold, likewise.
    pub max_event_bytes: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            fuel: None,
            time: Duration::from_secs(10),
            memory_bytes: 256 << 20,
            max_output_bytes: 1 << 20,
            max_calls: 1_000,
            max_events: 10_000,
            max_event_bytes: 64 << 20,
        }
    }
}

/// The memory limit of a scientific sandbox's runs by default.
pub const SCIENTIFIC_MEMORY_BYTES: usize = 1 << 30;

impl RunLimits {
    /// The defaults of a scientific sandbox's runs: as [`RunLimits::default`]
    /// but 1 GiB of memory (its interpreter holds numpy, pandas and
    /// matplotlib before any code runs, past the default's 256 MiB with
    /// a chart or a large frame).
    pub fn scientific() -> Self {
        RunLimits {
            memory_bytes: SCIENTIFIC_MEMORY_BYTES,
            ..RunLimits::default()
        }
    }
}

/// Which limit a guest ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The fuel budget ran out.
    Fuel,
    /// The wall-clock deadline passed.
    Time,
    /// A memory or table grew past its cap, or too many instances.
    Memory,
    /// A value crossing the boundary was too large.
    ValueSize,
    /// A run printed more than its stdout or stderr cap.
    Output,
    /// A run made more method calls than its cap.
    Calls,
    /// A run's events (or a call's) grew past their count or bytes cap.
    Events,
    /// The host's pool had no free slot for another instance (see
    /// [`HostBuilder::max_instances`](crate::HostBuilder::max_instances)):
    /// the host is busy; the guest is not at fault, and a later call may
    /// succeed.
    Instances,
    /// A method's rate limit (`rate_limit` in the policy): its calls a
    /// minute are used up, and a later call may succeed.
    Rate,
    /// A call's cost (`cost_per_use`) would go past the run's or the chat's
    /// budget (`[budgets]` in the policy).
    Budget,
    /// A run's writes would take its chat's workspace past a quota (bytes,
    /// files or path length: the message names it).
    Workspace,
    /// The run got none of the host's run slots
    /// ([`RunSlots`](crate::RunSlots)): too many runs waited for one
    /// already, or it waited the most a run may. The host is busy; the
    /// code never ran, and a later run may.
    Queue,
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitKind::Fuel => "fuel",
            LimitKind::Time => "time",
            LimitKind::Memory => "memory",
            LimitKind::ValueSize => "value size",
            LimitKind::Output => "output",
            LimitKind::Calls => "calls",
            LimitKind::Events => "events",
            LimitKind::Instances => "instances",
            LimitKind::Rate => "rate",
            LimitKind::Budget => "budget",
            LimitKind::Workspace => "workspace",
            LimitKind::Queue => "queue",
        })
    }
}

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
    pub(crate) fn new(limits: &Limits) -> Self {
        Self::with_memory(limits, limits.memory_bytes)
    }

    /// The caps of `limits`, with another memory cap.
    pub(crate) fn with_memory(limits: &Limits, memory_bytes: usize) -> Self {
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
    pub(crate) fn recapped(&self, limits: &Limits, memory_bytes: usize) -> Self {
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
    pub fn from_limits(limits: &Limits) -> Self {
        Budget::new(limits.fuel, limits.time, Instant::now())
    }

    /// The budget of the host's own calls into a plugin (`describe`, the
    /// lifecycle hooks), which run for every load, and every run's context,
    /// on no user's behalf: the limits', with at most [`HOOK_FUEL`] fuel.
    pub(crate) fn for_hooks(limits: &Limits) -> Self {
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
        let limits = Limits {
            memory_bytes: 1 << 20,
            table_elements: 10,
            ..Limits::default()
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
