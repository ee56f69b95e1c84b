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
        crate::trace::host_call_now("config.get", || {
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
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value as Json, json};

    use super::*;
    use crate::capabilities::config::PluginConfig;
    use crate::capabilities::env::Services;
    use crate::capabilities::testing::{TestCall, config, ctx, env, refusal};
    use sandwit_contract::json::BytesAs;

    /// Plugin `weather` granted `caps`, configured with `config`, in a call.
    fn call(caps: &[&str], config: PluginConfig) -> TestCall {
        let env = env("weather", caps, config, Services::for_tests());
        TestCall::new(&env, Some(ctx("chat-1", None)))
    }

    /// `config.get(key)`, the value as JSON.
    fn get(call: &mut TestCall, key: &str) -> Result<Option<Json>, (&'static str, String)> {
        let got = ConfigCtx(call.scope()).get(key.into()).unwrap();
        let limits = sandwit_value::DecodeLimits::default();
        got.map_err(refusal).map(|value| {
            value.map(|v| {
                let value = crate::bindings::convert::value_from_wit(v, &limits).unwrap();
                sandwit_contract::json::value_to_json(&value, BytesAs::Summary)
            })
        })
    }

    fn weather_config() -> PluginConfig {
        config(
            json!({
                "base_url": "http://weather.example",
                "api_key": "tok-123456",
                "units": {"temperature": "celsius", "days": 3},
            }),
            &["api_key"],
        )
    }

    #[test]
    fn a_plugin_without_the_config_grant_is_refused_and_its_request_keeps_no_secret() {
        let mut call = call(&["store", "chat"], weather_config());
        let denied = Err((
            "denied",
            "plugin `weather` was not granted the capability `config`".to_string(),
        ));
        assert_eq!(get(&mut call, "base_url"), denied);
        // A request naming a secret value is recorded without it.
        assert_eq!(get(&mut call, "tok-123456"), denied);
        let config = |request: &str| ("config".to_string(), request.to_string());
        assert_eq!(
            call.take_denied(),
            [
                config("config.get(\"base_url\")"),
                config("config.get(\"[secret]\")")
            ]
        );
    }

    #[test]
    fn a_plugin_reads_its_own_configuration_secrets_included() {
        let mut call = call(&["config"], weather_config());
        assert_eq!(
            get(&mut call, "base_url"),
            Ok(Some(json!("http://weather.example")))
        );
        assert_eq!(
            get(&mut call, "units"),
            Ok(Some(json!({"temperature": "celsius", "days": 3})))
        );
        assert_eq!(get(&mut call, "colour"), Ok(None));
        // The plugin itself is given a secret: what leaves the plugin
        // (events, messages, results, logs) has it hidden, not this.
        assert_eq!(get(&mut call, "api_key"), Ok(Some(json!("tok-123456"))));
        assert!(call.take_events().is_empty());
    }

    #[test]
    fn without_a_configuration_reading_one_is_unavailable() {
        let mut call = call(&["config"], PluginConfig::default());
        let none = Err((
            "unavailable",
            "the operator supplied no configuration for plugin `weather`".to_string(),
        ));
        assert_eq!(get(&mut call, "base_url"), none);
        // Describing itself, a plugin may read its configuration.
        let configured = env(
            "weather",
            &["config"],
            weather_config(),
            Services::for_tests(),
        );
        let mut describing = TestCall::new(&configured, None);
        assert_eq!(
            get(&mut describing, "base_url"),
            Ok(Some(json!("http://weather.example")))
        );
    }
}
