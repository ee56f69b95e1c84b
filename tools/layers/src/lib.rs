//! The layering check: which modules of a crate name which others, read
//! from the code as the compiler reads it (`syn`: comments, strings and raw
//! strings are tokens, never text a pattern could misread), and the cycles
//! among them, at two levels:
//!
//! - **files**: each file is a node (an inline module belongs to its file);
//! - **modules**: each top-level module of the crate is a node (a folder and
//!   everything in it), the crate root another.
//!
//! A module depends on every module a path in its code names: `use` trees
//! (globs and `self` included), paths in types, expressions, patterns and
//! attributes, and the `crate::`/`super::`/`self::` paths inside macro
//! invocations. A path names a module by `crate::`, `super::`, `self::`, or
//! a first segment that is a child module; the longest prefix that is a
//! module is the one named. Declaring a child (`mod x;`) is not a
//! dependency, and `#[cfg(test)]` modules are left out (a test may reach
//! anything).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module's path from the crate root (empty for the root).
pub type ModPath = Vec<String>;

/// The modules of one crate and what each names.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every module, with the file it is in.
    pub modules: BTreeMap<ModPath, PathBuf>,
    /// Whether a module is a file of its own (not inline).
    file_modules: BTreeSet<ModPath>,
    /// Each module's paths as written, to resolve once every module is known.
    refs: BTreeMap<ModPath, Vec<Vec<String>>>,
    /// The crate root's `pub use` re-exports: name -> the path re-exported.
    /// The root is the crate's facade: a re-export is no dependency of its
    /// own, and `crate::Name` names the module the item comes from.
    reexports: BTreeMap<String, Vec<String>>,
}

/// A cycle: its members and the references that close it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The nodes, sorted.
    pub members: Vec<String>,
    /// `(from, to, a path from's code writes)` for each edge within it.
    pub edges: Vec<(String, String, String)>,
}

/// What the check found in a crate.
#[derive(Debug)]
pub struct Report {
    /// How many modules it has.
    pub modules: usize,
    /// How many files.
    pub files: usize,
    /// Cycles among its files.
    pub file_cycles: Vec<Cycle>,
    /// Cycles among its top-level modules.
    pub module_cycles: Vec<Cycle>,
    /// Every edge at both levels, for `--graph`.
    pub file_edges: BTreeMap<String, BTreeMap<String, String>>,
    /// Likewise between top-level modules.
    pub module_edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl Report {
    /// Whether it found no cycle.
    pub fn clean(&self) -> bool {
        self.file_cycles.is_empty() && self.module_cycles.is_empty()
    }
}

/// Reads the crate whose root file is `root` (`src/lib.rs`, `src/main.rs`)
/// and finds its cycles.
pub fn check(root: &Path) -> anyhow::Result<Report> {
    let mut graph = Graph::default();
    graph.load(
        Vec::new(),
        root,
        root.parent().context("a root file has a folder")?,
    )?;
    Ok(graph.report())
}

impl Graph {
    /// Reads the file module `path` at `file`, whose child files are in `dir`.
    fn load(&mut self, path: ModPath, file: &Path, dir: &Path) -> anyhow::Result<()> {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let parsed =
            syn::parse_file(&text).with_context(|| format!("parsing {}", file.display()))?;
        self.file_modules.insert(path.clone());
        self.items(path, file, dir, &parsed.items)
    }

    /// The items of module `path` (in `file`; its child files in `dir`).
    fn items(
        &mut self,
        path: ModPath,
        file: &Path,
        dir: &Path,
        items: &[syn::Item],
    ) -> anyhow::Result<()> {
        self.modules.insert(path.clone(), file.to_path_buf());
        let mut refs = Refs::default();
        for item in items {
            match item {
                syn::Item::Mod(m) if cfg_test(&m.attrs) => {}
                syn::Item::Mod(m) => {
                    let mut child = path.clone();
                    child.push(m.ident.to_string());
                    let name = m.ident.to_string();
                    match &m.content {
                        // An inline module: its own module, in this file.
                        Some((_, inner)) => self.items(child, file, &dir.join(&name), inner)?,
                        None => {
                            let single = dir.join(format!("{name}.rs"));
                            let (child_file, child_dir) = if single.exists() {
                                (single, dir.join(&name))
                            } else {
                                (dir.join(&name).join("mod.rs"), dir.join(&name))
                            };
                            self.load(child, &child_file, &child_dir)?;
                        }
                    }
                    // Its attributes belong to this module's code.
                    for attr in &m.attrs {
                        refs.visit_attribute(attr);
                    }
                }
                syn::Item::Use(u)
                    if path.is_empty() && matches!(u.vis, syn::Visibility::Public(_)) =>
                {
                    let mut uses = Refs::default();
                    uses.use_tree(&mut Vec::new(), &u.tree);
                    for (name, target) in uses.renamed {
                        self.reexports.insert(name, target);
                    }
                }
                item => refs.visit_item(item),
            }
        }
        self.refs.entry(path).or_default().extend(refs.paths);
        Ok(())
    }

    /// The module a path written in module `from` names, if any: through
    /// the root's re-exports to the module an item comes from.
    fn resolve(&self, from: &ModPath, path: &[String]) -> Option<ModPath> {
        let module = self.resolve_once(from, path)?;
        let rest = path
            .iter()
            .skip_while(|s| matches!(s.as_str(), "crate" | "self" | "super"));
        let named: Vec<&String> = rest.collect();
        if module.is_empty()
            && let Some(first) = named.first()
            && let Some(target) = self.reexports.get(first.as_str())
        {
            // `pub use crate::a::X`, `pub use a::X`, or another crate's item
            // (no module of this one).
            return match target.first().map(String::as_str) {
                Some("crate" | "self") => self.resolve_once(&Vec::new(), target),
                Some(top) if self.modules.contains_key(&vec![top.to_string()]) => {
                    let mut target = target.clone();
                    target.insert(0, "crate".to_string());
                    self.resolve_once(&Vec::new(), &target)
                }
                _ => None,
            };
        }
        Some(module)
    }

    fn resolve_once(&self, from: &ModPath, path: &[String]) -> Option<ModPath> {
        let (mut base, mut rest): (ModPath, &[String]) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" | "super" => (from.clone(), path),
            first => {
                let mut child = from.clone();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                (from.clone(), path)
            }
        };
        while let Some(seg) = rest.first() {
            match seg.as_str() {
                "self" => rest = &rest[1..],
                "super" => {
                    base.pop()?;
                    rest = &rest[1..];
                }
                _ => break,
            }
        }
        let mut best = base.clone();
        for seg in rest {
            base.push(seg.clone());
            if self.modules.contains_key(&base) {
                best = base.clone();
            } else {
                break;
            }
        }
        Some(best)
    }

    /// The file module a module is in (itself, or the nearest file-module
    /// ancestor of an inline one).
    fn file_of(&self, module: &ModPath) -> ModPath {
        let mut m = module.clone();
        while !self.file_modules.contains(&m) {
            m.pop();
        }
        m
    }

    fn report(&self) -> Report {
        let mut file_edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut module_edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for module in self.file_modules.iter() {
            file_edges.entry(name(module)).or_default();
            module_edges.entry(top(module)).or_default();
        }
        for (from, paths) in &self.refs {
            for path in paths {
                let Some(to) = self.resolve(from, path) else {
                    continue;
                };
                let written = path.join("::");
                let (a, b) = (self.file_of(from), self.file_of(&to));
                if a != b {
                    let edges = file_edges.entry(name(&a)).or_default();
                    edges.entry(name(&b)).or_insert_with(|| written.clone());
                }
                let (a, b) = (top(from), top(&to));
                if a != b {
                    let edges = module_edges.entry(a).or_default();
                    edges.entry(b).or_insert(written);
                }
            }
        }
        Report {
            modules: self.modules.len(),
            files: self.file_modules.len(),
            file_cycles: cycles(&file_edges),
            module_cycles: cycles(&module_edges),
            file_edges,
            module_edges,
        }
    }
}

/// A module's name as written in Rust (`crate` for the root).
fn name(module: &ModPath) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The top-level module a module is in (`crate` for the root).
fn top(module: &ModPath) -> String {
    module
        .first()
        .cloned()
        .unwrap_or_else(|| "crate".to_string())
}

/// Whether attributes hold `#[cfg(test)]`.
fn cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

/// The paths a module's code writes.
#[derive(Default)]
struct Refs {
    paths: Vec<Vec<String>>,
    /// For `use` trees: the name each brings in, with its path.
    renamed: Vec<(String, Vec<String>)>,
}

impl Refs {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                let name = path.last().cloned().unwrap_or_default();
                self.renamed.push((name, path.clone()));
                self.paths.push(path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.renamed.push((r.rename.to_string(), path.clone()));
                self.paths.push(path);
            }
            syn::UseTree::Glob(_) => self.paths.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// Paths in a macro's tokens that start with `crate`, `super` or
    /// `self`: `crate :: a :: b` sequences.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(ident)
                    if ident == "crate" || ident == "super" || ident == "self" =>
                {
                    let mut path = vec![ident.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) =
                        (trees.get(j), trees.get(j + 1))
                    {
                        match (a.as_char(), b.as_char(), trees.get(j + 2)) {
                            (':', ':', Some(TokenTree::Ident(seg))) => {
                                path.push(seg.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if path.len() > 1 {
                        self.paths.push(path);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // Nested modules are modules of their own (Graph::items).
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() > 1 {
            self.paths.push(segs);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }
}

/// The strongly connected components of more than one node (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Cycle> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let targets = s.edges.get(v).into_iter().flat_map(|t| t.keys());
        for w in targets {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                connect(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                scc.push(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                s.found.push(scc);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            connect(&mut s, v);
        }
    }
    s.found
        .into_iter()
        .map(|scc| {
            let members: BTreeSet<&str> = scc.into_iter().collect();
            let mut cycle_edges = Vec::new();
            for from in &members {
                for (to, written) in &edges[*from] {
                    if members.contains(to.as_str()) {
                        cycle_edges.push((from.to_string(), to.clone(), written.clone()));
                    }
                }
            }
            Cycle {
                members: members.into_iter().map(str::to_string).collect(),
                edges: cycle_edges,
            }
        })
        .collect()
}
