//! What a host's plugins share: the runtime, their linker, the policy, the
//! services behind their capabilities and the execution controls.

use std::sync::Arc;

use sandwit_contract::policy::Policy;
use wasmtime::component::Linker;

use crate::capabilities::env::Services;
use crate::controls::Controls;
use crate::plugin::spares::Room;
use crate::plugin::state::PluginState;
use crate::runtime::Runtime;

/// The shared state of a host's plugins; each [`Plugin`](crate::Plugin)
/// holds it, and a plugin is the host's whose `PluginHost` it holds.
pub(crate) struct PluginHost {
    pub(crate) runtime: Runtime,
    pub(crate) linker: Linker<PluginState>,
    /// Instances each plugin keeps made ahead of its calls.
    pub(crate) prepared_plugin_instances: usize,
    /// The share of the pool those of all plugins may hold.
    pub(crate) spare_room: Room,
    pub(crate) policy: Policy,
    pub(crate) services: Services,
    /// The execution controls' state, for the host's life.
    pub(crate) controls: Arc<Controls>,
}
