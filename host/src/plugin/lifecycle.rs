//! The lifecycle hooks of a 0.2 plugin (`sandwit:plugin/lifecycle@0.2`):
//! the prompt it injects into a chat's method listing and the methods that
//! chat sees. A 0.1 plugin has none: no injected prompt, every method.

use super::state::PluginState;
use super::{Plugin, new_store, stopped_to_error_said};
use crate::bindings::lifecycle_api::GuestIndices;
use crate::bindings::plugin::SandboxMethodPre;
use crate::bindings::wit;
use crate::plugin::shared::PluginHost;
use crate::runtime::guard::guarded;
use crate::runtime::limits::Budget;
use crate::runtime::loader::Compiled;
use sandwit_contract::error::{CallError, CallErrorKind, LoadError};
use sandwit_contract::text::{cut, quote};
use sandwit_contract::types::AgentCtx;

/// The lifecycle export, by its name up to the version's minor.
const LIFECYCLE_EXPORT_PREFIX: &str = "sandwit:plugin/lifecycle@0.2.";

/// The longest prompt a plugin may inject, in bytes.
pub const MAX_INJECTED_PROMPT_BYTES: usize = 8 << 10;

/// What a plugin tailors for one agent context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginContext {
    /// Text for the method listing of the context's chat, if any.
    pub prompt: Option<String>,
    /// The methods the context sees, in the manifest's order; `None` when
    /// all are available.
    pub methods: Option<Vec<String>>,
    /// Why the prompt hook gave no text, when it failed (trapped, hit a
    /// limit, answered too much): the prompt is lost, the methods stand.
    pub prompt_error: Option<CallError>,
}

/// The lifecycle export's indices in `compiled`, if it exports one; a
/// lifecycle export of another shape rejects the plugin.
pub(super) fn indices(
    compiled: &Compiled,
    host: &PluginHost,
    pre: &SandboxMethodPre<PluginState>,
) -> Result<Option<GuestIndices>, LoadError> {
    let exported = compiled
        .component
        .component_type()
        .exports(&host.runtime.engine)
        .any(|(name, _)| name.starts_with(LIFECYCLE_EXPORT_PREFIX));
    if !exported {
        return Ok(None);
    }
    GuestIndices::new(pre.instance_pre())
        .map(Some)
        .map_err(|e| {
            compiled.rejected(vec![cut(
                format!("exports `{LIFECYCLE_EXPORT_PREFIX}x` of another shape: {e:#}"),
                2_000,
            )])
        })
}

impl Plugin {
    /// Whether the plugin exports the lifecycle hooks (a 0.2 plugin).
    pub fn has_lifecycle(&self) -> bool {
        self.inner.lifecycle.is_some()
    }

    /// The prompt the plugin injects and the methods it makes available in
    /// `ctx`, asked of a fresh instance under the call limits with the
    /// plugin's grants: the methods first, then the prompt. A failing
    /// methods hook is the error (the plugin is closed for the context); a
    /// failing prompt hook costs only its text
    /// ([`PluginContext::prompt_error`]). A plugin without lifecycle hooks
    /// answers the default (no prompt, every method) without running.
    pub async fn in_context(&self, ctx: &AgentCtx) -> Result<PluginContext, CallError> {
        let Some(indices) = &self.inner.lifecycle else {
            return Ok(PluginContext::default());
        };
        let error = |kind| CallError {
            plugin: self.id().to_string(),
            method: "lifecycle".to_string(),
            kind,
        };
        let inner = &self.inner;
        let budget = Budget::for_hooks(&inner.host.runtime.limits);
        let mut store = new_store(&inner.host, inner.env.clone(), Some(ctx.clone()), budget);
        let wit_ctx = wit::AgentCtx::from(ctx);
        let pre = &inner.pre;
        let (hooks, methods) = guarded(&mut store, budget, async |store| {
            let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
            let hooks = indices.load(&mut *store, &instance)?;
            let methods = hooks.call_available_methods(&mut *store, &wit_ctx).await?;
            Ok((hooks, methods))
        })
        .await
        .map_err(|stopped| error(stopped_to_error_said(stopped, store.data().last_said())))?;
        let log_events = |store: &mut wasmtime::Store<PluginState>| {
            for event in store.data_mut().take_events() {
                tracing::debug!(event = %event.line(self.id()), "lifecycle hook");
            }
        };
        if let Some(unknown) = methods
            .iter()
            .find(|name| inner.manifest.method(name).is_none())
        {
            log_events(&mut store);
            return Err(error(CallErrorKind::BadResult {
                message: format!(
                    "available-methods names {}, which the plugin does not offer",
                    quote(unknown, 80)
                ),
            }));
        }
        let methods = inner
            .manifest
            .methods
            .iter()
            .filter(|spec| methods.contains(&spec.name))
            .map(|spec| spec.name.clone())
            .collect();
        // The same instance, its methods answered: a trap here loses the
        // text alone. What the plugin said is read before its events are
        // taken.
        let prompt = guarded(&mut store, budget, async |store| {
            hooks.call_prompt_inject(&mut *store, &wit_ctx).await
        })
        .await
        .map_err(|stopped| error(stopped_to_error_said(stopped, store.data().last_said())));
        log_events(&mut store);
        let redactor = &inner.env.config.redactor;
        let (prompt, prompt_error) = match prompt {
            Err(e) => (None, Some(e)),
            Ok(Some(text)) if text.len() > MAX_INJECTED_PROMPT_BYTES => {
                let message = format!(
                    "the injected prompt is {} bytes, more than the limit of \
                     {MAX_INJECTED_PROMPT_BYTES} bytes",
                    text.len()
                );
                (None, Some(error(CallErrorKind::BadResult { message })))
            }
            Ok(Some(text)) if text.trim().is_empty() => (None, None),
            Ok(Some(text)) => (Some(redactor.redact(&text)), None),
            Ok(None) => (None, None),
        };
        Ok(PluginContext {
            prompt,
            methods: Some(methods),
            prompt_error,
        })
    }
}
