//! `sandwit:plugin/config`: the plugin's own configuration, as checked when
//! it was loaded.

use wasmtime::component::{HasData, Linker};

use crate::bindings::config_api::{self, Host};
use crate::bindings::wit::{ServiceError, Value};
use crate::capabilities::env::MAX_REQUEST_TEXT;
use crate::capabilities::scope::{CallData, CallScope};
use sandwit_contract::capability::Capability;
use sandwit_contract::json::value_from_json;
use sandwit_contract::text::quote;

/// The context of `config`: the call's scope.
pub(crate) struct ConfigCtx<'a>(CallScope<'a>);

struct Config;

impl HasData for Config {
    type Data<'a> = ConfigCtx<'a>;
}

pub(crate) fn add_to_linker<T: CallData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    config_api::add_to_linker::<T, Config>(linker, |data| ConfigCtx(data.scope()))
}

impl Host for ConfigCtx<'_> {
    fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Value>, ServiceError>> {
        let call = &mut self.0;
        call.meter.charge(key.len());
        let request = || format!("config.get({})", quote(&key, MAX_REQUEST_TEXT / 2));
        if let Err(e) = call.require(Capability::Config, request) {
            return Ok(Err(e));
        }
        let Some(values) = &call.env.config.values else {
            return Ok(Err(ServiceError::Unavailable(format!(
                "the operator supplied no configuration for plugin `{}`",
                call.env.id
            ))));
        };
        let value = values
            .get(&key)
            .map(|v| value_from_json(v.clone()).into_nodes());
        call.meter
            .charge(value.as_deref().map_or(0, sandwit_value::encoded_size));
        Ok(Ok(value.map(crate::bindings::convert::nodes_to_wit)))
    }
}
