//! The methods the service offers: those of the plugins of its plugin
//! directory, loaded at start and on reload, less those an admin disabled,
//! and those of the policy's tool sources (`[tools.<id>]`), loaded at start.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;
use sandwit::{Host, HostMethod, Plugin, Toolbox};

/// The loaded plugins and which are disabled. A run takes the enabled set
/// when it starts: a change applies from the next run on.
pub struct Catalog {
    plugins: Vec<Plugin>,
    /// The tool sources' methods.
    tools: Vec<HostMethod>,
    disabled: BTreeSet<String>,
    enabled: Toolbox,
}

impl Catalog {
    /// Loads every `.wasm` file of `dir`, in name order; the first that
    /// fails to load fails it all, naming the file.
    pub async fn load(host: &Host, dir: &Path) -> anyhow::Result<Vec<Plugin>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading the plugin directory {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
            .collect();
        files.sort();
        let mut plugins = Vec::new();
        for file in &files {
            let plugin = host
                .load_plugin_file(file)
                .await
                .with_context(|| format!("loading the plugin {}", file.display()))?;
            plugins.push(plugin);
        }
        Ok(plugins)
    }

    /// A catalog of `plugins` and the tool sources' methods `tools`, with
    /// `disabled` (plugin ids) kept disabled.
    pub fn new(
        plugins: Vec<Plugin>,
        tools: Vec<HostMethod>,
        disabled: BTreeSet<String>,
    ) -> anyhow::Result<Self> {
        // Checked whole, so that enabling any subset later cannot clash.
        Toolbox::with_host_methods(&plugins, &tools)?;
        let mut catalog = Catalog {
            plugins,
            tools,
            disabled,
            enabled: Toolbox::default(),
        };
        catalog.rebuild();
        Ok(catalog)
    }

    fn rebuild(&mut self) {
        let enabled: Vec<Plugin> = self
            .plugins
            .iter()
            .filter(|p| !self.disabled.contains(p.id()))
            .cloned()
            .collect();
        self.enabled = Toolbox::with_host_methods(&enabled, &self.tools)
            .expect("a subset of a valid set is valid");
    }

    /// Replaces the tool sources' methods, unless they clash with a
    /// plugin's.
    pub fn set_tools(&mut self, tools: Vec<HostMethod>) -> Result<(), sandwit::ToolboxError> {
        Toolbox::with_host_methods(&self.plugins, &tools)?;
        self.tools = tools;
        self.rebuild();
        Ok(())
    }

    /// The tool sources' methods.
    pub fn tools(&self) -> &[HostMethod] {
        &self.tools
    }

    /// Whether `id` is a tool source's.
    pub fn is_tool_source(&self, id: &str) -> bool {
        self.tools.iter().any(|m| m.provider() == id)
    }

    /// The methods of the enabled plugins and of the tool sources.
    pub fn enabled(&self) -> &Toolbox {
        &self.enabled
    }

    /// The ids disabled.
    pub fn disabled(&self) -> &BTreeSet<String> {
        &self.disabled
    }

    /// Every loaded plugin, enabled or not.
    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// An enabled plugin by id.
    pub fn plugin(&self, id: &str) -> Option<&Plugin> {
        self.plugins
            .iter()
            .find(|p| p.id() == id && !self.disabled.contains(id))
    }

    /// Enables or disables the plugin `id`; false when no plugin has it.
    pub fn set_enabled(&mut self, id: &str, enabled: bool) -> bool {
        if !self.plugins.iter().any(|p| p.id() == id) {
            return false;
        }
        if enabled {
            self.disabled.remove(id);
        } else {
            self.disabled.insert(id.to_string());
        }
        self.rebuild();
        true
    }
}
