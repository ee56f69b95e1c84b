//! A toolbox as one agent context sees it: the methods each 0.2 plugin
//! makes available there and the prompts they inject into its listing
//! (`sandwit:plugin/lifecycle`).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::toolbox::Toolbox;
use sandwit_contract::error::CallError;
use sandwit_contract::types::AgentCtx;

/// The methods of a [`Toolbox`] available in one context, and what its
/// plugins inject into that context's listing.
#[derive(Clone)]
pub struct ContextSet {
    /// The methods the context may call: a run for the context is given
    /// this set.
    pub methods: Toolbox,
    /// Each injected prompt with its plugin's id, in the set's order.
    pub injected: Vec<(String, String)>,
    /// The plugins whose methods hook failed in this context (a trap, a
    /// breached limit, a bad answer), each with its error. Their methods
    /// are withheld from [`ContextSet::methods`] (fail closed) and they
    /// inject nothing: one broken or hostile plugin costs the context that
    /// plugin, not the listing.
    pub failed: Vec<CallError>,
    /// The plugins whose prompt hook failed in this context, each with its
    /// error: their text is lost, their methods stay available.
    pub lost_prompts: Vec<CallError>,
}

/// How often a plugin's failing hook is warned of in one chat: not once
/// per run, which for a hook that always fails would be every listing.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// When each (plugin, namespace, chat) was last warned of, in this process.
/// Pruned of entries past [`WARN_EVERY`] as it grows: at most the chats
/// with failing hooks in the last minute are kept.
static WARNED: Mutex<Option<HashMap<(String, String), Instant>>> = Mutex::new(None);

/// Whether a failing hook of `plugin` in `ctx`'s chat is to be warned of
/// now (not within the last [`WARN_EVERY`]).
fn warn_now(plugin: &str, ctx: &AgentCtx) -> bool {
    let chat = format!(
        "{}\0{}",
        ctx.namespace.as_deref().unwrap_or(""),
        ctx.chat_key
    );
    let now = Instant::now();
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    let warned = warned.get_or_insert_with(HashMap::new);
    if warned.len() >= 4096 {
        warned.retain(|_, at| now.duration_since(*at) < WARN_EVERY);
    }
    match warned.get(&(plugin.to_string(), chat.clone())) {
        Some(at) if now.duration_since(*at) < WARN_EVERY => false,
        _ => {
            warned.insert((plugin.to_string(), chat), now);
            true
        }
    }
}

impl Toolbox {
    /// The set as `ctx` sees it: each plugin with lifecycle hooks is asked
    /// (in a fresh instance, under the call limits) for its prompt and its
    /// available methods; host methods and 0.1 plugins keep every method.
    /// A plugin whose methods hook fails is closed for the context: none of
    /// its methods, no prompt, and its error in [`ContextSet::failed`]. One
    /// whose prompt hook fails loses its text alone
    /// ([`ContextSet::lost_prompts`]). Either is logged as a warning at
    /// most once a minute per plugin and chat.
    pub async fn in_context(&self, ctx: &AgentCtx) -> ContextSet {
        let mut asked = HashSet::new();
        let mut available: HashMap<String, Option<Vec<String>>> = HashMap::new();
        let mut injected = Vec::new();
        let mut failed = Vec::new();
        let mut lost_prompts = Vec::new();
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
                    if warn_now(plugin.id(), ctx) {
                        tracing::warn!(%error, chat = %ctx.chat_key.escape_debug(), "the plugin's available-methods hook failed; its methods are withheld from the chat (said once a minute)");
                    }
                    available.insert(plugin.id().to_string(), Some(Vec::new()));
                    failed.push(error);
                    continue;
                }
            };
            if let Some(error) = seen.prompt_error {
                if warn_now(plugin.id(), ctx) {
                    tracing::warn!(%error, chat = %ctx.chat_key.escape_debug(), "the plugin's prompt hook failed; its text is left out, its methods stay (said once a minute)");
                }
                lost_prompts.push(error);
            }
            if let Some(prompt) = seen.prompt {
                injected.push((plugin.id().to_string(), prompt));
            }
            available.insert(plugin.id().to_string(), seen.methods);
        }
        let methods = self.filtered(Some(ctx.clone()), |provider, spec| {
            match available.get(provider) {
                Some(Some(names)) => names.contains(&spec.name),
                _ => true,
            }
        });
        ContextSet {
            methods,
            injected,
            failed,
            lost_prompts,
        }
    }
}

impl ContextSet {
    /// The listing an LLM is given in the context: [`Toolbox::prompt`] of
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

#[cfg(test)]
mod tests {
    use super::warn_now;
    use sandwit_contract::types::AgentCtx;

    #[test]
    fn a_failing_hook_is_warned_of_once_a_minute_per_plugin_and_chat() {
        let chat = AgentCtx::new("warn-test");
        assert!(warn_now("p", &chat));
        assert!(!warn_now("p", &chat), "twice within the minute");
        assert!(warn_now("q", &chat), "another plugin");
        assert!(warn_now("p", &AgentCtx::new("warn-test-2")), "another chat");
        let other_tenant = AgentCtx {
            namespace: Some("t/".into()),
            ..chat.clone()
        };
        assert!(warn_now("p", &other_tenant), "another namespace's chat");
    }
}
