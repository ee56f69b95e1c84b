//! A plugin set as one agent context sees it: the methods each 0.2 plugin
//! makes available there and the prompts they inject into its listing
//! (`sandwit:plugin/lifecycle`).

use std::collections::{HashMap, HashSet};

use crate::error::CallError;
use crate::python::PluginSet;
use crate::types::AgentCtx;

/// The methods of a [`PluginSet`] available in one context, and what its
/// plugins inject into that context's listing.
#[derive(Clone)]
pub struct ContextSet {
    /// The methods the context may call: a run for the context is given
    /// this set.
    pub methods: PluginSet,
    /// Each injected prompt with its plugin's id, in the set's order.
    pub injected: Vec<(String, String)>,
    /// The plugins whose hooks failed in this context (a trap, a breached
    /// limit, a bad answer), each with its error. Their methods are withheld
    /// from [`ContextSet::methods`] and they inject nothing: one broken or
    /// hostile plugin costs the context that plugin, not the listing.
    pub failed: Vec<CallError>,
}

impl PluginSet {
    /// The set as `ctx` sees it: each plugin with lifecycle hooks is asked
    /// (in a fresh instance, under the call limits) for its prompt and its
    /// available methods; host methods and 0.1 plugins keep every method.
    /// A plugin whose hooks fail is closed for the context: none of its
    /// methods, no prompt, and its error in [`ContextSet::failed`].
    pub async fn in_context(&self, ctx: &AgentCtx) -> ContextSet {
        let mut asked = HashSet::new();
        let mut available: HashMap<String, Option<Vec<String>>> = HashMap::new();
        let mut injected = Vec::new();
        let mut failed = Vec::new();
        let plugins: Vec<_> = self
            .methods()
            .filter_map(|(_, spec)| self.plugin_for(&spec.name))
            .filter(|plugin| plugin.has_lifecycle() && asked.insert(plugin.key()))
            .cloned()
            .collect();
        // The hooks run at once, each in its own task: a listing waits for
        // the slowest plugin (at most the call limits), not their sum. A
        // dropped listing aborts them (JoinSet's drop).
        let mut hooks = tokio::task::JoinSet::new();
        for (index, plugin) in plugins.iter().enumerate() {
            let (plugin, ctx) = (plugin.clone(), ctx.clone());
            hooks.spawn(async move { (index, plugin.in_context(&ctx).await) });
        }
        let mut answers: Vec<_> = hooks.join_all().await;
        answers.sort_by_key(|(index, _)| *index);
        for ((_, answer), plugin) in answers.into_iter().zip(&plugins) {
            let seen = match answer {
                Ok(seen) => seen,
                Err(error) => {
                    tracing::warn!(%error, chat = %ctx.chat_key.escape_debug(), "a lifecycle hook failed; the plugin's methods are withheld");
                    available.insert(plugin.id().to_string(), Some(Vec::new()));
                    failed.push(error);
                    continue;
                }
            };
            if let Some(prompt) = seen.prompt {
                injected.push((plugin.id().to_string(), prompt));
            }
            available.insert(plugin.id().to_string(), seen.methods);
        }
        let methods = self.filter(|provider, spec| match available.get(provider) {
            Some(Some(names)) => names.contains(&spec.name),
            _ => true,
        });
        ContextSet {
            methods,
            injected,
            failed,
        }
    }
}

impl ContextSet {
    /// The listing an LLM is given in the context: [`PluginSet::prompt`] of
    /// the available methods, then each injected prompt under its plugin's
    /// id.
    pub fn prompt(&self) -> String {
        let mut out = self.methods.prompt();
        if !self.injected.is_empty() {
            out.push_str("\nWhat the plugins say about this chat:\n");
            for (plugin, text) in &self.injected {
                out.push_str(&format!("\n[plugin `{plugin}`]\n{}\n", text.trim_end()));
            }
        }
        out
    }
}
