//! `sandwit:plugin/config`: the plugin's own configuration, as checked when
//! it was loaded.

use crate::bindings::config_api::Host;
use crate::bindings::wit::{ServiceError, Value};
use crate::capability::Capability;
use crate::env::MAX_REQUEST_TEXT;
use crate::error::quote;
use crate::json::value_from_json;
use crate::state::PluginState;
use crate::types;

impl Host for PluginState {
    fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Value>, ServiceError>> {
        self.meter.charge(key.len());
        let request = || format!("config.get({})", quote(&key, MAX_REQUEST_TEXT / 2));
        if let Err(e) = self.require(Capability::Config, request) {
            return Ok(Err(e));
        }
        let Some(values) = &self.env.config.values else {
            return Ok(Err(ServiceError::Unavailable(format!(
                "the operator supplied no configuration for plugin `{}`",
                self.env.id
            ))));
        };
        let value = values
            .get(&key)
            .map(|v| value_from_json(v.clone()).into_nodes());
        self.meter
            .charge(value.as_deref().map_or(0, sandwit_value::encoded_size));
        Ok(Ok(value.map(types::nodes_to_wit)))
    }
}
