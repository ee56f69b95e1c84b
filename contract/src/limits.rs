//! The limits a host applies to plugin calls and sandbox runs, as plain
//! data: what each bounds and its default. The host enforces them (fuel,
//! deadlines, a store limiter); the contract only says what they are.

use std::fmt;
use std::time::Duration;

/// Fuel units a core burns in a second of interpreted Python, about: the
/// rate to turn a CPU-time budget into [`RunLimits::fuel`] or
/// [`CallLimits::fuel`]. It varies with the code and the core (BENCHMARKS.md,
/// "Fuel and CPU time", has the measurement), which is why the time limit,
/// not fuel, bounds busy code by default.
pub const FUEL_PER_CPU_SECOND: u64 = 8_000_000_000;

/// The most fuel `describe` and a lifecycle hook may burn, whatever the
/// limits say (about a quarter of a CPU-second): a plugin that spins there
/// would otherwise cost every load, or every run's context, its whole time
/// limit of CPU.
pub const HOOK_FUEL: u64 = 2_000_000_000;

/// The most bytes a `.wasm` file may have before it is even parsed.
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// Limits on one call into a plugin: a direct call, or one a run makes (within
/// the run's own [`RunLimits`]).
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
pub struct CallLimits {
    /// A deterministic CPU budget in fuel units (one per wasm instruction,
    /// roughly; [`FUEL_PER_CPU_SECOND`] in CPU-time terms), or `None` for
    /// none of its own: then [`CallLimits::time`] alone bounds busy code, and
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

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
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

impl CallLimits {
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
/// remaining fuel and time (within the plugin's own [`CallLimits`] for memory and
/// value sizes).
///
/// Defaults:
///
/// | limit | default |
/// | --- | --- |
/// | `fuel` | none: the time limit bounds busy code |
/// | `time` | 10 s wall clock, counted from when the run gets a slot (the host's run slots, `sandwit::RunSlots`) |
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
    /// bounded on its own (`sandwit::RunSlots::max_wait`).
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
    /// `sandwit::HostBuilder::max_instances`):
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
    /// (the host's run slots, `sandwit::RunSlots`): too many runs waited for one
    /// already, or it waited the most a run may. The host is busy; the
    /// code never ran, and a later run may.
    Queue,
    /// The run's chat has as many sessions as it may, or the host keeps as
    /// many as it may (`sandwit::SessionLimits`): the code never ran.
    Session,
}

impl LimitKind {
    /// Its name as its JSON spells it (`value_size`), for labels and
    /// attributes.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Fuel => "fuel",
            LimitKind::Time => "time",
            LimitKind::Memory => "memory",
            LimitKind::ValueSize => "value_size",
            LimitKind::Output => "output",
            LimitKind::Calls => "calls",
            LimitKind::Events => "events",
            LimitKind::Instances => "instances",
            LimitKind::Rate => "rate",
            LimitKind::Budget => "budget",
            LimitKind::Workspace => "workspace",
            LimitKind::Queue => "queue",
            LimitKind::Session => "session",
        }
    }
}

/// In words: the JSON name with spaces (`value size`).
impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str().replace('_', " "))
    }
}

#[cfg(test)]
mod tests {
    use super::LimitKind;

    #[test]
    fn a_limits_name_is_its_json_spelling() {
        use LimitKind::*;
        for limit in [
            Fuel, Time, Memory, ValueSize, Output, Calls, Events, Instances, Rate, Budget,
            Workspace, Queue,
        ] {
            let json = serde_json::to_value(limit).unwrap();
            assert_eq!(json, limit.as_str(), "{limit:?}");
        }
        assert_eq!(ValueSize.to_string(), "value size");
    }
}
