//! What every capability's host functions need of the current call, and the
//! store data that lends it.

use wasmtime::component::{HasData, Linker};

use crate::bindings::wit::{self, ServiceError};
use crate::capabilities::env::PluginEnv;
use crate::capabilities::events::CallEvents;
use crate::runtime::guard::HostMeter;
use sandwit_contract::capability::Capability;
use sandwit_contract::types::AgentCtx;

/// What every capability's host functions need of the current call.
pub(crate) struct CallScope<'a> {
    /// The plugin's id, grants, configuration and the host's services.
    pub(crate) env: &'a PluginEnv,
    /// The call's context; `None` while the plugin describes itself.
    pub(crate) ctx: Option<&'a AgentCtx>,
    /// Charged for the bytes each function copies.
    pub(crate) meter: &'a mut HostMeter,
    /// The call's events, where refusals are recorded.
    pub(crate) events: &'a mut CallEvents,
}

impl CallScope<'_> {
    /// Ok when `cap` was granted; otherwise records and logs the refusal and
    /// returns the `denied` error naming the plugin and the capability.
    pub(crate) fn require(
        &mut self,
        cap: Capability,
        request: impl FnOnce() -> String,
    ) -> Result<(), ServiceError> {
        if self.env.grants.has(&cap) {
            return Ok(());
        }
        let message = format!(
            "plugin `{}` was not granted the capability `{cap}`",
            self.env.id
        );
        self.events
            .push_denied(self.env, cap.to_string(), request());
        Err(ServiceError::Denied(message))
    }
}

/// Store data that lends the contexts of sandwit's interfaces.
pub(crate) trait CallData: Send + 'static {
    /// The current call's scope.
    fn scope(&mut self) -> CallScope<'_>;
}

/// `sandwit:plugin/types` has types only: nothing to implement.
struct Types;

impl HasData for Types {
    type Data<'a> = Types;
}

impl wit::Host for Types {}

pub(crate) fn add_types_to_linker<T: 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, Types>(linker, |_| Types)
}
