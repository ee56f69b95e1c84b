//! The methods a run or a direct call may use: a [`Toolbox`] of plugins
//! and embedder-defined [`HostMethod`]s, their listings for the AI's prompt,
//! and the per-context sets a plugin's lifecycle hooks choose.

pub(crate) mod context;
pub(crate) mod guest_text;
pub(crate) mod host_method;
pub(crate) mod listing;
pub(crate) mod set;

pub use set::Toolbox;
