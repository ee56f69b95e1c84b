//! `sandwit:plugin/config`: the plugin's own configuration, as checked when
//! it was loaded.

use crate::bindings::config_api::Host;
use crate::bindings::wit::{ServiceError, Value};
use crate::capability::Capability;
use crate::json::value_from_json;
use crate::state::PluginState;
use crate::types;

impl Host for PluginState {
    fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Value>, ServiceError>> {
        if let Err(e) = self.require(Capability::Config, || format!("config.get({key:?})")) {
            return Ok(Err(e));
        }
        let Some(values) = &self.env.config.values else {
            return Ok(Err(ServiceError::Unavailable(format!(
                "the operator supplied no configuration for plugin `{}`",
                self.env.id
            ))));
        };
        Ok(Ok(values.get(&key).map(|v| {
            types::nodes_to_wit(value_from_json(v.clone()).into_nodes())
        })))
    }
}
