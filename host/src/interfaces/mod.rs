//! The host's implementations of the interfaces plugins import, one file
//! each. (The interpreter's one import, `methods`, is the Python sandbox's:
//! `python/methods.rs`.)

pub(crate) mod chat;
pub(crate) mod config;
pub(crate) mod http;
pub(crate) mod log;
pub(crate) mod store;

use crate::bindings::wit::ServiceError;
use crate::capability::Capability;
use crate::state::PluginState;

/// `sandwit:plugin/types` has types only: nothing to implement.
impl crate::bindings::wit::Host for PluginState {}

impl PluginState {
    /// Ok when `cap` was granted; otherwise records and logs the refusal and
    /// returns the `denied` error naming the capability.
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
        self.push_denied(cap.to_string(), request());
        Err(ServiceError::Denied(message))
    }
}
