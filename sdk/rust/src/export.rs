//! What [`plugin!`](crate::plugin) expands to: the manifest `describe`
//! answers, the dispatch of `invoke` to the methods, and the panic hook both
//! set.

use crate::bindings::wit::sandwit::plugin::types as t;
use crate::bindings::wit::sandwit::plugin::types::{MethodResult, MethodSpec};
use crate::convert::nodes_from_wit;
use crate::method::{Args, CallFn};
use sandwit_value::Value;

/// Has a panic logged at error level before it traps the plugin: its
/// message and where (`panicked at src/lib.rs:12:5: index out of
/// bounds`), which the host names as the call's failure instead of the
/// trap. Set once, at the first export called.
pub fn report_panics() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            crate::log::error(&format!("panicked{at}: {message}"));
        }));
    });
}

/// The manifest fields given to `plugin!`.
pub struct PluginInfo {
    /// `id`.
    pub id: &'static str,
    /// `name`.
    pub name: &'static str,
    /// `version`.
    pub version: &'static str,
    /// `author`.
    pub author: &'static str,
    /// `description`.
    pub description: &'static str,
    /// `capabilities`, none if left out.
    pub capabilities: &'static [&'static str],
    /// `config_schema`, if given.
    pub config_schema: Option<&'static str>,
}

/// The manifest: the fields given to `plugin!` and the methods' specs.
pub fn describe(info: &PluginInfo, methods: Vec<MethodSpec>) -> t::PluginManifest {
    t::PluginManifest {
        id: info.id.into(),
        name: info.name.into(),
        version: info.version.into(),
        author: info.author.into(),
        description: info.description.into(),
        methods,
        config_schema: info.config_schema.map(Into::into),
        capabilities: info.capabilities.iter().map(|c| c.to_string()).collect(),
    }
}

/// Calls the method named `method` with `args`, which must be an object.
pub fn invoke(
    ctx: &t::AgentCtx,
    method: &str,
    args: t::Value,
    methods: &[(&str, CallFn)],
) -> Result<MethodResult, t::CallError> {
    let Some((_, call)) = methods.iter().find(|(name, _)| *name == method) else {
        return Err(t::CallError::UnknownMethod(method.to_string()));
    };
    let args = match Value::from_nodes(nodes_from_wit(args), &Default::default()) {
        Ok(Value::Object(entries)) => Args::new(entries),
        Ok(other) => {
            return Err(t::CallError::InvalidArguments(format!(
                "arguments must be an object, not {}",
                other.type_name()
            )));
        }
        Err(e) => return Err(t::CallError::InvalidArguments(e.to_string())),
    };
    call(ctx, args).map_err(|e| e.into_wit())
}
