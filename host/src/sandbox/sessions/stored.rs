//! Where sessions are kept between runs and across processes: the host's
//! plugin store ([`StoreBackend`]: SQLite embedded, PostgreSQL for
//! replicas), in a namespace of sandwit's own that no plugin can name (a
//! plugin's id is a manifest's, which never has a `:`). Each session is two
//! entries of its chat: its head (`NAME`, a small JSON [`Head`]), read
//! before every run to learn whether a live copy is current, and the blob
//! the head names (`NAME/pages/WRITTEN_AT-SAVE`, [`saved`](super::saved)).
//!
//! A save writes its own blob, then swaps the head it read at the run's
//! start for its own ([`StoreBackend::swap`]), then removes the blob the old
//! head named. So a head always names a blob that is there, and of two
//! hosts that ran the session's next run at once only one stores it: the
//! other finds the head changed, removes its blob and is told
//! ([`Saved::Conflict`]). A blob no head names (its host stopped between
//! the two writes) is removed once it is older than the idle limit. A
//! session found idle is removed only if its head is still the one found
//! ([`Stored::delete_if`]), so a sweep never removes a turn saved since.

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
/// What a blob's key adds to its session's name, before the save's time
/// and number.
const PAGES: &str = "/pages/";
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
    /// Its bytes as stored, which a save that replaces it swaps: empty for
    /// a head not yet stored.
    #[serde(skip)]
    raw: Vec<u8>,
    /// Runs it has had: a live copy with as many is current.
    pub(crate) runs: u32,
    /// Its blob's size.
    pub(crate) bytes: u64,
    /// Its memory's size.
    pub(crate) memory_bytes: u64,
    /// When its last run ended, in seconds since the Unix epoch.
    pub(crate) saved_at: u64,
    /// A number drawn for each save: its blob's key has it, and a live
    /// copy current with another save of as many runs (a session forked,
    /// loaded or closed and started again) is stale.
    pub(crate) save: u64,
    /// When its blob was written, in seconds since the Unix epoch (a
    /// fork's `saved_at` is its source's): its blob's key has it, so a
    /// sweep tells an abandoned blob from one being saved.
    pub(crate) written_at: u64,
}

impl Head {
    /// The head of a save of `runs` runs, its blob `bytes` long, of a
    /// `memory_bytes` memory, at `saved_at`: its number drawn.
    pub(crate) fn new(runs: u32, bytes: u64, memory_bytes: u64, saved_at: u64) -> Head {
        Head {
            raw: Vec::new(),
            runs,
            bytes,
            memory_bytes,
            saved_at,
            save: rand::random(),
            written_at: super::saved::now_secs(),
        }
    }

    /// The key of its blob in its session's chat.
    fn blob_key(&self, name: &str) -> String {
        format!("{name}{PAGES}{}-{:016x}", self.written_at, self.save)
    }
}

/// What became of a save.
pub(crate) enum Saved {
    /// It is the session now: its head.
    Stored(Head),
    /// The session's head was not the one the save replaces: another run
    /// (on another host) saved it, or it was closed or made, meanwhile.
    /// Nothing of this save is kept.
    Conflict,
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
            Some(Entry::Bytes(raw)) => {
                let mut head: Head = serde_json::from_slice(&raw).map_err(|e| {
                    anyhow::anyhow!(
                        "the stored head of the session {name:?} is not readable ({e}): close the \
                         session to start it again"
                    )
                })?;
                head.raw = raw;
                Ok(Some(head))
            }
            _ => Ok(None),
        }
    }

    /// The blob `head` names of `ctx`'s chat's session `name`, if it is
    /// stored (a later save removes it).
    pub(crate) async fn blob(
        &self,
        ctx: &AgentCtx,
        name: &str,
        head: &Head,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let ns = self.namespace(ctx);
        match self.backend.get(&ns, &head.blob_key(name)).await? {
            Some(Entry::Bytes(bytes)) => Ok(Some(bytes)),
            _ => Ok(None),
        }
    }

    /// Stores `blob` as `ctx`'s chat's session `name`, described by `head`,
    /// if the session's head is still `replaces` (`None`: it has none).
    pub(crate) async fn save(
        &self,
        ctx: &AgentCtx,
        name: &str,
        mut head: Head,
        blob: Vec<u8>,
        replaces: Option<&Head>,
    ) -> anyhow::Result<Saved> {
        let ns = self.namespace(ctx);
        let limits = unbounded();
        let key = head.blob_key(name);
        let blob = Entry::Bytes(blob);
        self.backend.set(&ns, &key, &blob, &limits).await?;
        head.raw = serde_json::to_vec(&head)?;
        let new = Entry::Bytes(head.raw.clone());
        let old = replaces.map(|old| Entry::Bytes(old.raw.clone()));
        let swapped = (self.backend)
            .swap(&ns, name, old.as_ref(), Some(&new), &limits)
            .await;
        // A swap that failed may yet have committed (the answer lost on
        // the way): its blob stays, for the head may name it, and goes with
        // the sweep if not.
        if !swapped? {
            // Not the session's: its blob goes.
            if let Err(e) = self.backend.delete(&ns, &key).await {
                tracing::warn!(session = name, "removing a blob not stored: {e}");
            }
            return Ok(Saved::Conflict);
        }
        if let Some(old) = replaces.filter(|old| old.blob_key(name) != key)
            && let Err(e) = self.backend.delete(&ns, &old.blob_key(name)).await
        {
            // Stored all the same; the sweep removes the old blob.
            tracing::warn!(session = name, "removing the blob a save replaced: {e}");
        }
        Ok(Saved::Stored(head))
    }

    /// Removes `ctx`'s chat's session `name` if its head is still `head`
    /// (one found idle): whether it did. A session saved since stays.
    pub(crate) async fn delete_if(
        &self,
        ctx: &AgentCtx,
        name: &str,
        head: &Head,
    ) -> anyhow::Result<bool> {
        let ns = self.namespace(ctx);
        let was = Entry::Bytes(head.raw.clone());
        let limits = unbounded();
        if !(self.backend.swap(&ns, name, Some(&was), None, &limits)).await? {
            return Ok(false);
        }
        self.backend.delete(&ns, &head.blob_key(name)).await?;
        Ok(true)
    }

    /// Removes `ctx`'s chat's session `name`: whether it was stored.
    pub(crate) async fn delete(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<bool> {
        let ns = self.namespace(ctx);
        let head = self.head(ctx, name).await.ok().flatten();
        let had = self.backend.delete(&ns, name).await?;
        if let Some(head) = head {
            self.backend.delete(&ns, &head.blob_key(name)).await?;
        }
        Ok(had)
    }

    /// Removes the blobs of `ctx`'s chat no head names that were saved
    /// more than `idle` seconds before `now` (a save in progress is never
    /// that old).
    pub(crate) async fn sweep_blobs(
        &self,
        ctx: &AgentCtx,
        now: u64,
        idle: u64,
    ) -> anyhow::Result<()> {
        let ns = self.namespace(ctx);
        let keys = self.backend.keys(&ns, MAX_LISTED).await?;
        for key in &keys {
            let Some((name, saved)) = key.split_once(PAGES) else {
                continue;
            };
            let saved_at = (saved.split_once('-'))
                .and_then(|(at, _)| at.parse::<u64>().ok())
                .unwrap_or(0);
            if now.saturating_sub(saved_at) <= idle {
                continue;
            }
            // A head that cannot be read now keeps its blob.
            let named = match self.head(ctx, name).await {
                Ok(Some(head)) => head.blob_key(name) == *key,
                Ok(None) => false,
                Err(_) => true,
            };
            if !named {
                self.backend.delete(&ns, key).await?;
            }
        }
        Ok(())
    }

    /// The stored sessions of `ctx`'s chat, by name.
    pub(crate) async fn list(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<(String, Head)>> {
        let ns = self.namespace(ctx);
        let keys = self.backend.keys(&ns, MAX_LISTED).await?;
        let mut listed = Vec::new();
        for name in keys.into_iter().filter(|k| !k.contains('/')) {
            match self.head(ctx, &name).await {
                Ok(Some(head)) => listed.push((name, head)),
                Ok(None) => {}
                // Listed, so that it counts and can be closed.
                Err(e) => {
                    tracing::warn!(session = name, "{e:#}");
                    listed.push((name, Head::new(0, 0, 0, 0)));
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::store::SqliteStore;

    async fn blobs(stored: &Stored, ctx: &AgentCtx) -> Vec<String> {
        let keys = stored.backend.keys(&stored.namespace(ctx), 64).await;
        (keys.unwrap().into_iter())
            .filter(|k| k.contains(PAGES))
            .collect()
    }

    #[tokio::test]
    async fn a_save_over_a_head_it_did_not_read_keeps_nothing_and_orphans_are_swept() {
        let stored = Stored::new(Arc::new(SqliteStore::in_memory().unwrap()), SMALL_SESSIONS);
        let ctx = AgentCtx::new("chat");
        let now = super::super::saved::now_secs();
        let Saved::Stored(first) =
            (stored.save(&ctx, "s", Head::new(1, 3, 9, now), vec![1; 3], None))
                .await
                .unwrap()
        else {
            panic!("a new session's first save conflicted");
        };
        // Two saves of the next run from the first: the second conflicts,
        // and its blob goes.
        let Saved::Stored(second) =
            (stored.save(&ctx, "s", Head::new(2, 3, 9, now), vec![2; 3], Some(&first)))
                .await
                .unwrap()
        else {
            panic!("the next run's save conflicted");
        };
        let lost = stored.save(&ctx, "s", Head::new(2, 3, 9, now), vec![3; 3], Some(&first));
        assert!(matches!(lost.await.unwrap(), Saved::Conflict));
        assert!(matches!(
            stored
                .save(&ctx, "s", Head::new(1, 3, 9, now), vec![4; 3], None)
                .await
                .unwrap(),
            Saved::Conflict
        ));
        assert_eq!(stored.head(&ctx, "s").await.unwrap(), Some(second.clone()));
        assert_eq!(blobs(&stored, &ctx).await, [second.blob_key("s")]);
        assert_eq!(
            stored.blob(&ctx, "s", &second).await.unwrap(),
            Some(vec![2; 3])
        );
        assert_eq!(stored.blob(&ctx, "s", &first).await.unwrap(), None);

        // Blobs no head names (a host stopped between its two writes): the
        // old one is swept, the young one (a save in progress) kept.
        let ns = stored.namespace(&ctx);
        let orphan = |at: u64| {
            let head = Head::new(3, 1, 9, now);
            Head {
                written_at: at,
                ..head
            }
            .blob_key("s")
        };
        let (old, young) = (orphan(now - 100), orphan(now - 5));
        for key in [&old, &young] {
            let entry = Entry::Bytes(vec![0]);
            stored
                .backend
                .set(&ns, key, &entry, &unbounded())
                .await
                .unwrap();
        }
        stored.sweep_blobs(&ctx, now, 50).await.unwrap();
        let mut left = blobs(&stored, &ctx).await;
        left.sort();
        let mut expected = vec![second.blob_key("s"), young];
        expected.sort();
        assert_eq!(left, expected);

        // Closed: its head and blob go.
        assert!(stored.delete(&ctx, "s").await.unwrap());
        assert_eq!(stored.head(&ctx, "s").await.unwrap(), None);
        assert_eq!(blobs(&stored, &ctx).await.len(), 1, "the young orphan");
    }
}
