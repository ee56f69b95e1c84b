//! The agent scripts (bench/workloads) and the paces they are run at, as
//! the scenarios and the report name them.

use std::time::Duration;

/// One agent script.
pub struct Script {
    /// Its name in the table and in bench/workloads.
    pub name: &'static str,
    pub code: &'static str,
}

pub const SCRIPTS: [Script; 6] = [
    Script {
        name: "data",
        code: include_str!("../workloads/data.py"),
    },
    Script {
        name: "text",
        code: include_str!("../workloads/text.py"),
    },
    Script {
        name: "tool loop",
        code: include_str!("../workloads/tool_loop.py"),
    },
    Script {
        name: "compute",
        code: include_str!("../workloads/compute.py"),
    },
    Script {
        name: "table",
        code: include_str!("../workloads/table.py"),
    },
    Script {
        name: "tree",
        code: include_str!("../workloads/tree.py"),
    },
];

/// `calculate_sum` as plain Python (the calc plugin's semantics), for the
/// peers that have no plugin.
pub const CALCULATE_SUM: &str = include_str!("../workloads/calculate_sum.py");

/// How runs follow each other.
pub struct Pace {
    pub label: &'static str,
    /// Start to start, or none: each run starts when the last one ended.
    pub period: Option<Duration>,
}

/// One run every 20 ms, as an agent's turns come (the machine idles
/// between them; a run longer than that is followed at once), and back to
/// back, as under load.
pub const PACES: [Pace; 2] = [
    Pace {
        label: "spaced 20 ms",
        period: Some(Duration::from_millis(20)),
    },
    Pace {
        label: "back to back",
        period: None,
    },
];
