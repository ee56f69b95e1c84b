//! The check of an upload. The registry never loads untrusted bytes in its
//! own process: the embedder supplies a [`Validator`] that runs the host's
//! load check elsewhere (the `sandwit` command runs its budgeted worker
//! process, as `sandwit validate` does).

/// What the check found.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// The plugin loads: its manifest, as `sandwit inspect --json` prints it
    /// under `manifest`.
    Accepted {
        /// The manifest (id, version, methods with kinds, schemas and
        /// docstrings, capabilities requested, ...).
        manifest: serde_json::Value,
    },
    /// The plugin does not load: `sandwit validate --json`'s report
    /// (`{"file", "ok": false, "problems": [...], "plugin": null}`).
    Rejected {
        /// The report, listing every problem.
        report: serde_json::Value,
    },
}

/// Checks uploaded components with the host's full load check (world,
/// imports, manifest, schemas, docstrings, size) under a time and memory
/// budget.
pub trait Validator: Send + Sync + 'static {
    /// Checks `component`, whose digest is `digest` (`sha256:<hex>`). It is
    /// called on a blocking thread and may take as long as its budget. An
    /// `Err` is the validator's own failure (the plugin is neither accepted
    /// nor rejected); a hostile component must give a [`Verdict::Rejected`].
    fn validate(&self, component: &[u8], digest: &str) -> anyhow::Result<Verdict>;
}
