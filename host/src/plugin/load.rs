//! Loading a plugin with every check a marketplace needs: the component's
//! world, imports and exports (`loader`), then its manifest, asked of a
//! fresh instance and checked, the policy's pin and grants, and its
//! configuration.

use std::sync::Arc;

use super::compile::off_worker;
use super::installed::Installed;
use super::spares::Spares;
use super::{Plugin, PluginInner, stopped_to_error_said};
use super::{lifecycle, state};
use crate::bindings::plugin::SandboxMethodPre;
use crate::bindings::wit;
use crate::capabilities::config::PluginConfig;
use crate::capabilities::env::PluginEnv;
use crate::plugin::installed;
use crate::plugin::shared::PluginHost;
use crate::runtime::loader::{self, Compiled, Source, World};
use sandwit_contract::capability::Grants;
use sandwit_contract::error::{CallErrorKind, LoadError};
use sandwit_contract::manifest;

/// The world plugins implement: any 0.1.x version of the plugin export;
/// beyond WASI, `wasi:http` through the gate and sandwit's own interfaces.
const SANDBOX_METHOD: World = World {
    name: "sandbox-method",
    what: "a sandwit plugin",
    export_prefix: "sandwit:plugin/plugin@0.1.",
    imports: &[
        "wasi:http/",
        "sandwit:plugin/log@0.1.",
        "sandwit:plugin/types@0.1.",
        "sandwit:plugin/store@0.1.",
        "sandwit:plugin/config@0.1.",
        "sandwit:plugin/chat@0.1.",
    ],
};

impl Plugin {
    /// Loads and checks the plugin from `source`.
    pub(crate) async fn load(
        host: &Arc<PluginHost>,
        source: Source<'_>,
    ) -> Result<Self, LoadError> {
        let (compiled, installed) = compile(host, source).await?;
        let pre = compiled.link(&host.runtime, &SANDBOX_METHOD, &host.linker, |pre| {
            SandboxMethodPre::new(pre)
        })?;
        let lifecycle = lifecycle::indices(&compiled, host, &pre)?;
        let raw = describe(host, &compiled.label, &pre).await.map_err(|e| {
            compiled.rejected(vec![format!("describe() did not return a manifest: {e}")])
        })?;
        let manifest::Checked {
            manifest,
            checkers,
            config_validator,
        } = manifest::check(raw.into()).map_err(|problems| compiled.rejected(problems))?;
        if let Some(installed) = &installed {
            installed.check_manifest(&manifest.id, &manifest.version)?;
        }
        let Compiled {
            code_source, hash, ..
        } = &compiled;
        let policy = host.policy.plugin(&manifest.id);
        if let Some(policy) = policy.filter(|p| p.gives_anything() && !p.pins(hash)) {
            return Err(LoadError::Unpinned {
                plugin: manifest.id.clone(),
                digest: hash.clone(),
                pinned: policy.sha256.len(),
            });
        }
        let granted = policy.map_or(&[][..], |p| &p.grant[..]);
        let grants = Grants::effective(&manifest.capabilities, granted);
        let config = PluginConfig::bind(
            manifest
                .config_schema
                .as_ref()
                .zip(config_validator.as_ref()),
            policy.and_then(|p| p.config.as_ref()),
            policy.map_or(&[][..], |p| &p.secrets[..]),
        )
        .map_err(|problems| LoadError::Config {
            plugin: manifest.id.clone(),
            problems,
        })?;
        let env = PluginEnv::new(&manifest.id, grants, config, host.services.clone());
        tracing::info!(plugin = %manifest.id, version = %manifest.version, ?code_source, "loaded a plugin");
        Ok(Plugin {
            inner: Arc::new(PluginInner {
                host: host.clone(),
                manifest,
                env,
                checkers,
                pre,
                lifecycle,
                imports: compiled.imports(&host.runtime),
                code_source: *code_source,
                hash: hash.clone(),
                spares: Spares::new(host.prepared_plugin_instances, host.spare_room.clone()),
            }),
        })
    }
}

/// Compiles the plugin from `source` (or loads its code from the cache) on
/// the blocking pool ([`off_worker`]): a file with its entry in its
/// folder's lock file, if it has one, its digest checked against it; bytes
/// if the policy takes plugins without a lock file.
async fn compile(
    host: &Arc<PluginHost>,
    source: Source<'_>,
) -> Result<(Compiled, Option<Installed>), LoadError> {
    if let Source::Bytes { label, .. } | Source::Hashed { label, .. } = source {
        installed::check_bytes(&host.policy.registry, label)?;
    }
    let shared = host.clone();
    off_worker(&host.runtime, source, move |source| match source {
        Source::File(path) => {
            let installed = installed::lookup(&shared.policy.registry, path)?;
            let check = |hash: &str| installed.as_ref().map_or(Ok(()), |i| i.check_hash(hash));
            let compiled = loader::compile_file(&shared.runtime, path, &check)?;
            Ok((compiled, installed))
        }
        Source::Bytes { .. } | Source::Hashed { .. } => {
            Ok((loader::compile(&shared.runtime, source)?, None))
        }
    })
    .await
}

/// The manifest the plugin gives of itself, asked of a fresh instance with
/// nothing granted, under the hooks' budget.
async fn describe(
    host: &PluginHost,
    label: &str,
    pre: &SandboxMethodPre<state::PluginState>,
) -> Result<wit::PluginManifest, CallErrorKind> {
    let (store, described) = super::described_instance(host, label, pre).await;
    described
        .map(|(_, manifest)| manifest)
        .map_err(|stopped| stopped_to_error_said(stopped, store.data().last_said()))
}
