//! The host's implementations of the interfaces guests import, one file each.

pub(crate) mod log;
pub(crate) mod methods;

/// `sandwit:plugin/types` has types only: nothing to implement.
impl crate::bindings::wit::Host for crate::state::PluginState {}
