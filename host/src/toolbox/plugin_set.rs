//! The methods a run may call (of plugins, and the embedder's own), indexed
//! by name.

use std::collections::HashMap;
use std::sync::Arc;

use crate::bindings::wit;
use crate::plugin::Plugin;
use crate::toolbox::host_method::HostMethod;
use sandwit_contract::manifest::MethodSpec;
use sandwit_contract::types::MethodKind;

/// The methods a run may call: of plugins, and host methods the embedder
/// defines ([`HostMethod`]), indexed by name. Cheap to clone.
#[derive(Clone, Default)]
pub struct PluginSet {
    inner: Arc<PluginSetInner>,
}

#[derive(Default)]
struct PluginSetInner {
    by_method: HashMap<String, Provider>,
    specs: Vec<wit::MethodSpec>,
}

/// Who answers a method.
#[derive(Clone)]
pub(crate) enum Provider {
    Plugin(Plugin),
    Host(HostMethod),
}

impl Provider {
    /// The plugin's id, or the host method's provider.
    pub(crate) fn id(&self) -> &str {
        match self {
            Provider::Plugin(plugin) => plugin.id(),
            Provider::Host(method) => method.provider(),
        }
    }

    fn spec(&self, method: &str) -> &MethodSpec {
        match self {
            Provider::Plugin(plugin) => plugin.manifest().method(method).expect("indexed"),
            Provider::Host(host) => host.spec(),
        }
    }
}

/// Why plugins cannot make one [`PluginSet`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginSetError {
    /// Two plugins offer a method of the same name.
    #[error("method `{method}` is offered by both plugin `{first}` and plugin `{second}`")]
    Method {
        /// The method's name.
        method: String,
        /// The plugin listed first.
        first: String,
        /// The plugin listed second.
        second: String,
    },
    /// A host method's provider is a plugin's id: events and errors would
    /// not tell them apart.
    #[error("host method `{method}` is offered as `{id}`, the id of a plugin of the set")]
    Provider {
        /// The provider and plugin id.
        id: String,
        /// The host method.
        method: String,
    },
    /// Two plugins claim the same id: grants, configuration and stored data
    /// are the id's, so one of them would act as the other.
    #[error("two plugins claim the id `{id}` (SHA-256 {first} and {second})")]
    Id {
        /// The id.
        id: String,
        /// The components' SHA-256 digests, hex.
        first: String,
        /// The second's.
        second: String,
    },
}

impl PluginSet {
    /// The methods of `plugins`; plugin ids and method names must be unique
    /// across them.
    pub fn new(plugins: &[Plugin]) -> Result<Self, PluginSetError> {
        Self::with_host_methods(plugins, &[])
    }

    /// The methods of `plugins` and the host methods `methods`, after
    /// them; method names must be unique across all of them, plugin ids
    /// unique and none a host method's provider.
    pub fn with_host_methods(
        plugins: &[Plugin],
        methods: &[HostMethod],
    ) -> Result<Self, PluginSetError> {
        let mut inner = PluginSetInner::default();
        for (i, plugin) in plugins.iter().enumerate() {
            if let Some(first) = plugins[..i].iter().find(|p| p.id() == plugin.id()) {
                return Err(PluginSetError::Id {
                    id: plugin.id().to_string(),
                    first: first.hash().to_string(),
                    second: plugin.hash().to_string(),
                });
            }
        }
        if let Some(host) = methods
            .iter()
            .find(|m| plugins.iter().any(|p| p.id() == m.provider()))
        {
            return Err(PluginSetError::Provider {
                id: host.provider().to_string(),
                method: host.spec().name.clone(),
            });
        }
        let offered = plugins
            .iter()
            .flat_map(|plugin| {
                let methods = plugin.manifest().methods.iter();
                methods.map(|method| (Provider::Plugin(plugin.clone()), method))
            })
            .chain(
                methods
                    .iter()
                    .map(|m| (Provider::Host(m.clone()), m.spec())),
            );
        for (provider, method) in offered {
            if let Some(first) = inner.by_method.get(&method.name) {
                return Err(PluginSetError::Method {
                    method: method.name.clone(),
                    first: first.id().to_string(),
                    second: provider.id().to_string(),
                });
            }
            inner.specs.push(method.into());
            inner.by_method.insert(method.name.clone(), provider);
        }
        Ok(PluginSet {
            inner: Arc::new(inner),
        })
    }

    /// The set of the methods `keep` chooses, for one context (as Nekro's
    /// `mount_collect_methods` chooses per chat): the prompt listing and a
    /// run's functions follow it, and a method left out is not callable.
    /// `keep` is given each method's provider (a plugin id, or a host
    /// method's provider) and spec.
    pub fn filter(&self, mut keep: impl FnMut(&str, &MethodSpec) -> bool) -> PluginSet {
        let mut inner = PluginSetInner::default();
        for spec in &self.inner.specs {
            let provider = &self.inner.by_method[&spec.name];
            if keep(provider.id(), provider.spec(&spec.name)) {
                inner.by_method.insert(spec.name.clone(), provider.clone());
                inner.specs.push(spec.clone());
            }
        }
        PluginSet {
            inner: Arc::new(inner),
        }
    }

    /// The methods as the interpreter's `prepare` and `exec` take them.
    pub(crate) fn specs(&self) -> &[wit::MethodSpec] {
        &self.inner.specs
    }

    /// The plugins whose methods are in the set, each once, in the order of
    /// their first method.
    pub(crate) fn plugins(&self) -> Vec<&Plugin> {
        let mut plugins: Vec<&Plugin> = Vec::new();
        for spec in &self.inner.specs {
            if let Provider::Plugin(plugin) = &self.inner.by_method[&spec.name]
                && !plugins.iter().any(|p| p.key() == plugin.key())
            {
                plugins.push(plugin);
            }
        }
        plugins
    }

    /// A plugin of the set that another host than `host` loaded, if any: a
    /// run or call of `host` must not call it (it would act with that host's
    /// grants, configuration and store: for an embedder with a host per
    /// tenant, a path between tenants).
    pub(crate) fn foreign_plugin(
        &self,
        host: &Arc<crate::plugin::shared::PluginHost>,
    ) -> Option<&Plugin> {
        // Per run: by the methods, with no list of plugins made.
        self.inner
            .specs
            .iter()
            .find_map(|spec| match &self.inner.by_method[&spec.name] {
                Provider::Plugin(plugin) if !plugin.loaded_by(host) => Some(plugin),
                _ => None,
            })
    }

    /// Whether `other` is this set (a clone of it), not just equal to it.
    pub(crate) fn same(&self, other: &PluginSet) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The plugin that offers `method` (none for a host method).
    pub fn plugin_for(&self, method: &str) -> Option<&Plugin> {
        match self.inner.by_method.get(method)? {
            Provider::Plugin(plugin) => Some(plugin),
            Provider::Host(_) => None,
        }
    }

    /// Who answers `method`.
    pub(crate) fn provider(&self, method: &str) -> Option<&Provider> {
        self.inner.by_method.get(method)
    }

    /// Every method, with its provider's id (a plugin id, or a host
    /// method's provider), in the order given.
    pub fn methods(&self) -> impl Iterator<Item = (&str, &MethodSpec)> {
        self.inner.specs.iter().map(|spec| {
            let provider = &self.inner.by_method[&spec.name];
            (provider.id(), provider.spec(&spec.name))
        })
    }

    /// The listing an LLM is given of these methods: each as a Python
    /// function with its signature, kind (and what the kind does to the
    /// script) and docstring, under a line on what goes in and how a call
    /// fails.
    pub fn prompt(&self) -> String {
        let mut out = String::from(
            "Your Python code can call these functions. Plain Python values go in \
             (None, bool, int, float, str, bytes, list, tuple, dict); a failing call \
             raises PluginError.\n",
        );
        for (provider, method) in self.methods() {
            let what = match method.kind {
                MethodKind::Tool => "tool: returns a value and the code goes on",
                MethodKind::Agent => "agent: STOPS THE SCRIPT; its text goes to you in a new round",
                MethodKind::Behavior => {
                    "behavior: returns a string, recorded as a system message; the code goes on"
                }
                MethodKind::MultimodalAgent => {
                    "multimodal agent: STOPS THE SCRIPT; its text and images go to you in a new round"
                }
            };
            out.push_str(&format!(
                "\ndef {}:  # {what} (plugin `{}`)\n    \"\"\"",
                method.signature(),
                provider
            ));
            for (i, line) in method.docstring.lines().enumerate() {
                if i > 0 {
                    out.push('\n');
                    if !line.is_empty() {
                        out.push_str("    ");
                    }
                }
                out.push_str(line);
            }
            out.push_str("\n    \"\"\"\n");
        }
        out
    }
}
