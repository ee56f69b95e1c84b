//! Where sessions are kept between runs and across processes: the host's
//! plugin store ([`StoreBackend`]: SQLite embedded, PostgreSQL for
//! replicas), in a namespace of sandwit's own that no plugin can name (a
//! plugin's id is a manifest's, which never has a `:`). Each session is two
//! entries of its chat: its head (`NAME`, a small JSON [`Head`]), read
//! before every run to learn whether a live copy is current, and its blob
//! (`NAME/pages`, [`saved`](super::saved)). The blob is written first, so a
//! head never names a blob that is not there.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::capabilities::store::{Entry, Namespace, Scope, StoreBackend};
use sandwit_contract::policy::StoreLimits;
use sandwit_contract::types::AgentCtx;

/// The store's "plugin" sessions are kept under.
const SESSIONS: &str = "sandwit:sessions";
/// What a blob's key adds to its session's name.
const PAGES: &str = "/pages";
/// The most sessions a chat's listing reads.
const MAX_LISTED: usize = 1024;

/// What is known of a stored session without reading its blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Head {
    /// Runs it has had: a live copy with as many is current.
    pub(crate) runs: u32,
    /// Its blob's size.
    pub(crate) bytes: u64,
    /// Its memory's size.
    pub(crate) memory_bytes: u64,
    /// When its last run ended, in seconds since the Unix epoch.
    pub(crate) saved_at: u64,
}

/// A sandbox's sessions in the host's store.
#[derive(Clone)]
pub(crate) struct Stored {
    backend: Arc<dyn StoreBackend>,
}

impl Stored {
    pub(crate) fn new(backend: Arc<dyn StoreBackend>) -> Self {
        Stored { backend }
    }

    /// The chat's entries: its owner is the namespace (length-prefixed, so
    /// no two pairs of namespace and chat key share one) and the chat key.
    fn namespace(ctx: &AgentCtx) -> Namespace {
        let tenant = ctx.namespace.clone().unwrap_or_default();
        Namespace {
            plugin: SESSIONS.into(),
            scope: Scope::Chat,
            owner: format!("{}:{tenant}{}", tenant.len(), ctx.chat_key),
            tenant,
        }
    }

    /// The head of `ctx`'s chat's session `name`, if it is stored.
    pub(crate) async fn head(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<Option<Head>> {
        let ns = Self::namespace(ctx);
        match self.backend.get(&ns, name).await? {
            Some(Entry::Bytes(bytes)) => Ok(serde_json::from_slice(&bytes).ok()),
            _ => Ok(None),
        }
    }

    /// The blob of `ctx`'s chat's session `name`, if it is stored.
    pub(crate) async fn blob(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let ns = Self::namespace(ctx);
        match self.backend.get(&ns, &format!("{name}{PAGES}")).await? {
            Some(Entry::Bytes(bytes)) => Ok(Some(bytes)),
            _ => Ok(None),
        }
    }

    /// Stores `blob` as `ctx`'s chat's session `name`, described by `head`.
    pub(crate) async fn save(
        &self,
        ctx: &AgentCtx,
        name: &str,
        head: &Head,
        blob: Vec<u8>,
    ) -> anyhow::Result<()> {
        let ns = Self::namespace(ctx);
        // The caps are the sessions' own (`SessionLimits`), checked before.
        let limits = StoreLimits {
            max_plugin_bytes: u64::MAX,
            ..StoreLimits::default()
        };
        let blob = Entry::Bytes(blob);
        (self.backend)
            .set(&ns, &format!("{name}{PAGES}"), &blob, &limits)
            .await?;
        let head = Entry::Bytes(serde_json::to_vec(head)?);
        self.backend.set(&ns, name, &head, &limits).await?;
        Ok(())
    }

    /// Removes `ctx`'s chat's session `name`: whether it was stored.
    pub(crate) async fn delete(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<bool> {
        let ns = Self::namespace(ctx);
        let had = self.backend.delete(&ns, name).await?;
        let pages = (self.backend)
            .delete(&ns, &format!("{name}{PAGES}"))
            .await?;
        Ok(had || pages)
    }

    /// The stored sessions of `ctx`'s chat, by name.
    pub(crate) async fn list(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<(String, Head)>> {
        let ns = Self::namespace(ctx);
        let keys = self.backend.keys(&ns, MAX_LISTED).await?;
        let mut listed = Vec::new();
        for name in keys.into_iter().filter(|k| !k.contains('/')) {
            if let Some(head) = self.head(ctx, &name).await? {
                listed.push((name, head));
            }
        }
        Ok(listed)
    }
}
