//! The plugin's configuration, supplied by the operator and checked against
//! the `config_schema` of [`plugin!`](crate::plugin) when the plugin loads.
//! Needs the `config` capability. Mark a property `"secret": true` in the
//! schema and the host keeps its value out of every log, event and result.

use crate::bindings::wit::sandwit::plugin::config as api;
use crate::convert::nodes_from_wit;
use crate::services::to_error;
use crate::{Error, FromValue, Value};

/// The top-level value `key`, decoded, if the operator set it.
pub fn get<T: FromValue>(key: &str) -> Result<Option<T>, Error> {
    let Some(raw) = api::get(key).map_err(|e| to_error("config", e))? else {
        return Ok(None);
    };
    let value = Value::from_nodes(nodes_from_wit(raw), &Default::default())
        .map_err(|e| Error::failed(format!("config `{key}`: {e}")))?;
    T::from_value(value)
        .map(Some)
        .map_err(|e| Error::failed(format!("config `{key}`: {e}")))
}

/// The top-level value `key`, which must be set.
pub fn require<T: FromValue>(key: &str) -> Result<T, Error> {
    get(key)?.ok_or_else(|| Error::failed(format!("config `{key}` is not set")))
}
