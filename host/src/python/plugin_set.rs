//! The plugins a run may call, indexed by method name.

use std::collections::HashMap;
use std::sync::Arc;

use crate::bindings::wit;
use crate::manifest::MethodSpec;
use crate::plugin::Plugin;
use crate::types::MethodKind;

/// The plugins a run may call, indexed by method name. Cheap to clone.
#[derive(Clone, Default)]
pub struct PluginSet {
    inner: Arc<PluginSetInner>,
}

#[derive(Default)]
struct PluginSetInner {
    by_method: HashMap<String, Plugin>,
    specs: Vec<wit::MethodSpec>,
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
        for plugin in plugins {
            for method in &plugin.manifest().methods {
                if let Some(first) = inner.by_method.get(&method.name) {
                    return Err(PluginSetError::Method {
                        method: method.name.clone(),
                        first: first.id().to_string(),
                        second: plugin.id().to_string(),
                    });
                }
                inner.by_method.insert(method.name.clone(), plugin.clone());
                inner.specs.push(spec_to_wit(method));
            }
        }
        Ok(PluginSet {
            inner: Arc::new(inner),
        })
    }

    /// The set of the methods `keep` chooses, for one context (as Nekro's
    /// `mount_collect_methods` chooses per chat): the prompt listing and a
    /// run's functions follow it, and a method left out is not callable.
    pub fn filter(&self, mut keep: impl FnMut(&Plugin, &MethodSpec) -> bool) -> PluginSet {
        let mut inner = PluginSetInner::default();
        for (plugin, method) in self.methods() {
            if keep(plugin, method) {
                inner.by_method.insert(method.name.clone(), plugin.clone());
                inner.specs.push(spec_to_wit(method));
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

    /// Whether `other` is this set (a clone of it), not just equal to it.
    pub(crate) fn same(&self, other: &PluginSet) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The plugin that offers `method`.
    pub fn plugin_for(&self, method: &str) -> Option<&Plugin> {
        self.inner.by_method.get(method)
    }

    /// Every method, with the plugin that offers it, in the order given.
    pub fn methods(&self) -> impl Iterator<Item = (&Plugin, &MethodSpec)> {
        self.inner.specs.iter().map(|spec| {
            let plugin = &self.inner.by_method[&spec.name];
            (
                plugin,
                plugin.manifest().method(&spec.name).expect("indexed"),
            )
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
        for (plugin, method) in self.methods() {
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
                plugin.id()
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

fn spec_to_wit(spec: &MethodSpec) -> wit::MethodSpec {
    wit::MethodSpec {
        name: spec.name.clone(),
        kind: spec.kind.into(),
        description: spec.description.clone(),
        docstring: spec.docstring.clone(),
        params: spec
            .params
            .iter()
            .map(|p| wit::Param {
                name: p.name.clone(),
                schema: p.schema.to_string(),
                required: p.required,
            })
            .collect(),
        returns: spec.returns.as_ref().map(|r| r.to_string()),
    }
}
