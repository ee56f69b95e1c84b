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

/// The store's "plugins" sessions are kept under, by interpreter: a
/// session is of one chat and one interpreter.
pub(crate) const SMALL_SESSIONS: &str = "sandwit:sessions";
pub(crate) const SCIENTIFIC_SESSIONS: &str = "sandwit:sessions:scientific";
/// The store's "plugin" the bases sessions are kept over are, where an
/// interpreter prepares its base otherwise in each process (the
/// scientific one, when its files differ): `HASH`, the base compressed,
/// and `HASH/used`, when a session was last saved over it.
const BASES: &str = "sandwit:bases";
/// What a base's key adds for the time it was last used.
const USED: &str = "/used";
/// What a blob's key adds to its session's name.
const PAGES: &str = "/pages";
/// The most sessions a chat's listing reads.
const MAX_LISTED: usize = 1024;

/// The store's caps for sandwit's own entries: none beyond the backend's.
/// Sessions are capped by `SessionLimits`, checked before they are
/// written; a base is one per prepared interpreter.
fn unbounded() -> StoreLimits {
    StoreLimits {
        max_plugin_bytes: u64::MAX,
        ..StoreLimits::default()
    }
}

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
    /// A number drawn for each save: two hosts that both saved a session's
    /// next run tell their copies apart by it (the later save is the
    /// session; the other's live copy is stale).
    #[serde(default)]
    pub(crate) save: u64,
}

/// A sandbox's sessions in the host's store.
#[derive(Clone)]
pub(crate) struct Stored {
    backend: Arc<dyn StoreBackend>,
    /// [`SMALL_SESSIONS`] or [`SCIENTIFIC_SESSIONS`].
    plugin: &'static str,
}

impl Stored {
    pub(crate) fn new(backend: Arc<dyn StoreBackend>, plugin: &'static str) -> Self {
        Stored { backend, plugin }
    }

    /// The chat's entries: its owner is the namespace (length-prefixed, so
    /// no two pairs of namespace and chat key share one) and the chat key.
    fn namespace(&self, ctx: &AgentCtx) -> Namespace {
        let tenant = ctx.namespace.clone().unwrap_or_default();
        Namespace {
            plugin: self.plugin.into(),
            scope: Scope::Chat,
            owner: format!("{}:{tenant}{}", tenant.len(), ctx.chat_key),
            tenant,
        }
    }

    /// The head of `ctx`'s chat's session `name`, if it is stored.
    pub(crate) async fn head(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<Option<Head>> {
        let ns = self.namespace(ctx);
        match self.backend.get(&ns, name).await? {
            Some(Entry::Bytes(bytes)) => Ok(serde_json::from_slice(&bytes).ok()),
            _ => Ok(None),
        }
    }

    /// The blob of `ctx`'s chat's session `name`, if it is stored.
    pub(crate) async fn blob(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let ns = self.namespace(ctx);
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
        let ns = self.namespace(ctx);
        let limits = unbounded();
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
        let ns = self.namespace(ctx);
        let had = self.backend.delete(&ns, name).await?;
        let pages = (self.backend)
            .delete(&ns, &format!("{name}{PAGES}"))
            .await?;
        Ok(had || pages)
    }

    /// The stored sessions of `ctx`'s chat, by name.
    pub(crate) async fn list(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<(String, Head)>> {
        let ns = self.namespace(ctx);
        let keys = self.backend.keys(&ns, MAX_LISTED).await?;
        let mut listed = Vec::new();
        for name in keys.into_iter().filter(|k| !k.contains('/')) {
            if let Some(head) = self.head(ctx, &name).await? {
                listed.push((name, head));
            }
        }
        Ok(listed)
    }

    fn bases() -> Namespace {
        Namespace {
            plugin: BASES.into(),
            scope: Scope::Global,
            owner: String::new(),
            tenant: String::new(),
        }
    }

    /// The base `hash`, compressed, if it is stored.
    pub(crate) async fn base(&self, hash: &str) -> anyhow::Result<Option<Vec<u8>>> {
        match self.backend.get(&Self::bases(), hash).await? {
            Some(Entry::Bytes(bytes)) => Ok(Some(bytes)),
            _ => Ok(None),
        }
    }

    /// Whether the base `hash` is stored: its mark is (a sweep removes the
    /// mark before the base, and `put_base` writes it after).
    pub(crate) async fn has_base(&self, hash: &str) -> anyhow::Result<bool> {
        let used = format!("{hash}{USED}");
        Ok(self.backend.get(&Self::bases(), &used).await?.is_some())
    }

    /// Stores the base `hash` (`packed`, compressed), then marks it used
    /// now: a mark names only a base that is there.
    pub(crate) async fn put_base(&self, hash: &str, packed: Vec<u8>) -> anyhow::Result<()> {
        let limits = unbounded();
        let entry = Entry::Bytes(packed);
        self.backend
            .set(&Self::bases(), hash, &entry, &limits)
            .await?;
        self.touch_base(hash, super::saved::now_secs()).await
    }

    /// Marks the base `hash` used at `now` (seconds since the epoch).
    pub(crate) async fn touch_base(&self, hash: &str, now: u64) -> anyhow::Result<()> {
        let used = Entry::Bytes(now.to_le_bytes().to_vec());
        let limits = unbounded();
        let key = format!("{hash}{USED}");
        self.backend
            .set(&Self::bases(), &key, &used, &limits)
            .await?;
        Ok(())
    }

    /// Removes the bases other than `keep` last used more than `idle`
    /// seconds before `now`: every session saved over one was saved before
    /// it was last used, so those sessions are past their idle limit too.
    pub(crate) async fn sweep_bases(&self, keep: &str, now: u64, idle: u64) -> anyhow::Result<()> {
        let ns = Self::bases();
        for key in self.backend.keys(&ns, MAX_LISTED).await? {
            let Some(hash) = key.strip_suffix(USED) else {
                continue;
            };
            if hash == keep {
                continue;
            }
            let used = match self.backend.get(&ns, &key).await? {
                Some(Entry::Bytes(b)) if b.len() == 8 => {
                    u64::from_le_bytes(b.try_into().expect("8 bytes"))
                }
                _ => 0,
            };
            // The mark first: a base without one is put again by its host
            // (`has_base`), one with a mark is never missing.
            if now.saturating_sub(used) > idle {
                self.backend.delete(&ns, &key).await?;
                self.backend.delete(&ns, hash).await?;
            }
        }
        Ok(())
    }
}
