//! A paused run as the host's store keeps it until it is resumed: what
//! replays it (its code, inputs, limits and chat, the answers its calls
//! got, what it read of random bytes and the clocks), the call it paused
//! at and where it stood. Compressed (zstd) and signed with the host's
//! [`SessionKey`], so replicas and restarts sharing the store and the key
//! resume each other's pauses and no one else can forge one.
//!
//! Its token is `swp1_` and two hex strings: the record's id (16 random
//! bytes, its key in the store) and the id's MAC. A
//! token is checked before the store is read, and resumes once: the record
//! is deleted by the resume that claims it. Records are kept per chat (a
//! token read in another chat finds nothing there), at most
//! [`SessionLimits::pauses_per_chat`](crate::SessionLimits::pauses_per_chat)
//! of them: keeping one more first drops the chat's expired ones.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::capabilities::store::{Entry, Namespace, Scope, StoreBackend};
use crate::runtime::tape::Readings;
use crate::sandbox::pauses::journal::{Answered, ArgsDigest, Standing};
use crate::sandbox::run::functions::ClientFunction;
use crate::sandbox::sessions::saved::{MAC_BYTES, SessionKey, now_secs, sandwit_version};
use sandwit_contract::limits::RunLimits;
use sandwit_contract::policy::StoreLimits;
use sandwit_contract::types::AgentCtx;

/// The store's "plugin" paused runs are kept under (no plugin's id has a
/// `:`).
const PAUSES: &str = "sandwit:pauses";
/// What every token starts with.
const TOKEN_PREFIX: &str = "swp1_";
/// The format [`Record`]s are written in.
pub(crate) const FORMAT: u32 = 1;
/// The largest record [`open`] decompresses.
const MAX_RECORD_BYTES: usize = 256 << 20;

/// A run's limits, as a record keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedLimits {
    fuel: Option<u64>,
    time_ms: u64,
    memory_bytes: usize,
    max_output_bytes: usize,
    max_calls: u32,
    max_events: usize,
    max_event_bytes: usize,
}

impl From<&RunLimits> for SavedLimits {
    fn from(l: &RunLimits) -> Self {
        SavedLimits {
            fuel: l.fuel,
            time_ms: l.time.as_millis() as u64,
            memory_bytes: l.memory_bytes,
            max_output_bytes: l.max_output_bytes,
            max_calls: l.max_calls,
            max_events: l.max_events,
            max_event_bytes: l.max_event_bytes,
        }
    }
}

impl From<&SavedLimits> for RunLimits {
    fn from(l: &SavedLimits) -> Self {
        RunLimits {
            fuel: l.fuel,
            time: Duration::from_millis(l.time_ms),
            memory_bytes: l.memory_bytes,
            max_output_bytes: l.max_output_bytes,
            max_calls: l.max_calls,
            max_events: l.max_events,
            max_event_bytes: l.max_event_bytes,
        }
    }
}

/// A paused run, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) format: u32,
    /// The version of sandwit that paused it.
    pub(crate) sandwit: String,
    /// The interpreter's component hash.
    pub(crate) interpreter: String,
    pub(crate) ctx: AgentCtx,
    pub(crate) code: String,
    /// Its inputs, marshalled (empty for none).
    pub(crate) inputs: Vec<u8>,
    pub(crate) limits: SavedLimits,
    pub(crate) answers: Vec<Answered>,
    pub(crate) readings: Readings,
    /// The call it paused at.
    pub(crate) plugin: String,
    pub(crate) method: String,
    /// Its arguments, marshalled, and their digest.
    pub(crate) args: Vec<u8>,
    pub(crate) digest: ArgsDigest,
    pub(crate) standing: Standing,
    /// When it paused, and when its token expires, in seconds since the
    /// Unix epoch.
    pub(crate) paused_at: u64,
    pub(crate) expires_at: u64,
    /// The session it ran in, if any.
    #[serde(default)]
    pub(crate) session: Option<SessionAt>,
    /// The application's functions the run was given.
    #[serde(default)]
    pub(crate) functions: Vec<ClientFunction>,
}

/// The session a paused run ran in, as it stood when the run began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionAt {
    pub(crate) name: String,
    /// The runs of its stored copy then; none for a session not stored yet.
    pub(crate) runs: Option<u32>,
}

/// A token's id, as the store keys its record.
pub(crate) struct TokenId(String);

/// Why a token resumed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unresumable {
    /// Not a token this host (or one with its key) issued.
    #[error("{0}")]
    Forged(String),
    /// Issued, but resumed or discarded already, expired, or another chat's.
    #[error("{0}")]
    Gone(String),
    /// Paused by another version of sandwit or of the interpreter.
    #[error("{0}")]
    Version(String),
}

/// The paused runs in the host's store.
#[derive(Clone)]
pub(crate) struct Pauses {
    backend: std::sync::Arc<dyn StoreBackend>,
    key: SessionKey,
    /// The most paused runs a chat keeps at once.
    per_chat: usize,
}

/// Where `ctx`'s chat's paused runs are kept.
fn namespace(ctx: &AgentCtx) -> Namespace {
    let tenant = ctx.namespace.clone().unwrap_or_default();
    Namespace {
        plugin: PAUSES.into(),
        scope: Scope::Chat,
        owner: format!("{tenant}\0{}", ctx.chat_key),
        tenant,
    }
}

/// Why a paused run was not kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unkept {
    /// The chat has as many paused runs as it may.
    #[error(
        "this chat has {0} paused runs waiting for an answer, as many as it may \
         (SessionLimits::pauses_per_chat): answer one first"
    )]
    Full(usize),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] anyhow::Error),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Pauses {
    pub(crate) fn new(
        backend: std::sync::Arc<dyn StoreBackend>,
        key: SessionKey,
        per_chat: usize,
    ) -> Self {
        Pauses {
            backend,
            key,
            per_chat,
        }
    }

    /// Stores `record` in its chat and returns the token that resumes it;
    /// a chat with `per_chat` records left after its expired ones are
    /// dropped keeps no more.
    pub(crate) async fn keep(&self, record: &Record) -> Result<String, Unkept> {
        let ns = namespace(&record.ctx);
        let kept = (self.backend.keys(&ns, self.per_chat).await).map_err(anyhow::Error::from)?;
        if kept.len() >= self.per_chat && self.sweep(&ns, kept).await? >= self.per_chat {
            return Err(Unkept::Full(self.per_chat));
        }
        let id: [u8; 16] = rand::random();
        let id = hex(&id);
        let tag = self.key.sign(id.as_bytes());
        let sealed = self.seal(record)?;
        self.put(&ns, &id, sealed).await?;
        Ok(format!("{TOKEN_PREFIX}{id}_{}", hex(&tag)))
    }

    /// Drops the expired records among `ids` of `ns`: how many are left
    /// (one this host's key does not open is left: another key's host may
    /// share the store by mistake, and it is not this host's to drop).
    async fn sweep(&self, ns: &Namespace, ids: Vec<String>) -> anyhow::Result<usize> {
        let now = now_secs();
        let mut left = 0;
        for id in ids {
            let expired = match self.backend.get(ns, &id).await? {
                Some(Entry::Bytes(sealed)) => self.open(&sealed).map(|r| r.expires_at < now),
                _ => Some(true),
            };
            match expired {
                Some(true) => {
                    self.backend.delete(ns, &id).await?;
                }
                _ => left += 1,
            }
        }
        Ok(left)
    }

    async fn put(&self, ns: &Namespace, id: &str, sealed: Vec<u8>) -> anyhow::Result<()> {
        // Bounded by the journal's and the tape's caps and `per_chat`, not
        // by a plugin's quota.
        let limits = StoreLimits {
            max_plugin_bytes: u64::MAX,
            ..StoreLimits::default()
        };
        (self.backend)
            .set(ns, id, &Entry::Bytes(sealed), &limits)
            .await?;
        Ok(())
    }

    /// The id of `token`, if this host's key issued it.
    pub(crate) fn check(&self, token: &str) -> Result<TokenId, Unresumable> {
        let forged = || {
            Unresumable::Forged(
                "the resume token is not one this host issued (mistyped, changed, or from a host \
                 with another session key)"
                    .into(),
            )
        };
        let rest = token.trim().strip_prefix(TOKEN_PREFIX).ok_or_else(forged)?;
        let (id, tag) = rest.split_once('_').ok_or_else(forged)?;
        let ok_hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !ok_hex(id, 32) || !ok_hex(tag, 2 * MAC_BYTES) {
            return Err(forged());
        }
        let tag: Vec<u8> = (0..MAC_BYTES)
            .map(|i| u8::from_str_radix(&tag[2 * i..2 * i + 2], 16).expect("hex digits"))
            .collect();
        if !self.key.verify(id.as_bytes(), &tag) {
            return Err(forged());
        }
        Ok(TokenId(id.to_string()))
    }

    /// Claims the paused run of `id` for `ctx`'s chat: read, checked and
    /// deleted, so that no other resume gets it.
    pub(crate) async fn claim(
        &self,
        id: &TokenId,
        ctx: &AgentCtx,
        interpreter: &str,
    ) -> anyhow::Result<Result<Record, Unresumable>> {
        let record = match self.read(id, ctx, interpreter).await? {
            Ok(record) => record,
            Err(e) => return Ok(Err(e)),
        };
        if !self.backend.delete(&namespace(ctx), &id.0).await? {
            return Ok(Err(gone()));
        }
        Ok(Ok(record))
    }

    /// The paused run of `id` for `ctx`'s chat, checked as
    /// [`Pauses::claim`] checks it, left in the store.
    pub(crate) async fn read(
        &self,
        id: &TokenId,
        ctx: &AgentCtx,
        interpreter: &str,
    ) -> anyhow::Result<Result<Record, Unresumable>> {
        let ns = namespace(ctx);
        let Some(Entry::Bytes(sealed)) = self.backend.get(&ns, &id.0).await? else {
            return Ok(Err(gone()));
        };
        let Some(record) = self.open(&sealed) else {
            return Ok(Err(Unresumable::Forged(
                "the paused run's record is not signed by this host's session key".into(),
            )));
        };
        // Another chat learns nothing of it: the same answer as for none.
        if record.ctx.namespace != ctx.namespace || record.ctx.chat_key != ctx.chat_key {
            return Ok(Err(gone()));
        }
        if record.expires_at < now_secs() {
            self.backend.delete(&ns, &id.0).await?;
            return Ok(Err(gone()));
        }
        if record.format != FORMAT
            || record.sandwit != sandwit_version()
            || record.interpreter != interpreter
        {
            return Ok(Err(Unresumable::Version(format!(
                "the run was paused by sandwit {} with interpreter {}, and this host is sandwit \
                 {} with interpreter {}: resume it on a host of that version",
                record.sandwit,
                short(&record.interpreter),
                sandwit_version(),
                short(interpreter)
            ))));
        }
        Ok(Ok(record))
    }

    /// Stores `record` again under `id`, for a resume that never reached
    /// the paused call: its token resumes it once more.
    pub(crate) async fn put_back(&self, id: &TokenId, record: &Record) -> anyhow::Result<()> {
        let sealed = self.seal(record)?;
        self.put(&namespace(&record.ctx), &id.0, sealed).await
    }

    fn seal(&self, record: &Record) -> anyhow::Result<Vec<u8>> {
        let plain = serde_json::to_vec(record)?;
        let mut sealed = zstd::bulk::compress(&plain, 1)?;
        let tag = self.key.sign(&sealed);
        sealed.extend_from_slice(&tag);
        Ok(sealed)
    }

    fn open(&self, sealed: &[u8]) -> Option<Record> {
        let split = sealed.len().checked_sub(MAC_BYTES)?;
        let (packed, tag) = sealed.split_at(split);
        if !self.key.verify(packed, tag) {
            return None;
        }
        let plain = zstd::bulk::decompress(packed, MAX_RECORD_BYTES).ok()?;
        serde_json::from_slice(&plain).ok()
    }
}

/// The answer for a token with no record in this chat: the same for one
/// spent, expired or another chat's, so it tells nothing of which.
fn gone() -> Unresumable {
    Unresumable::Gone(
        "no paused run has this token: it was resumed or discarded already, it expired, or it is \
         another chat's"
            .into(),
    )
}

/// The first characters of a hash, for messages.
fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pauses(key: &SessionKey) -> Pauses {
        let store = crate::store::SqliteStore::in_memory().expect("an in-memory store");
        Pauses::new(std::sync::Arc::new(store), key.clone(), 2)
    }

    #[test]
    fn a_token_is_checked_against_the_key_before_the_store_is_read() {
        let key = SessionKey::generate();
        let pauses = pauses(&key);
        let id = "0123456789abcdef0123456789abcdef";
        let tag = hex(&key.sign(id.as_bytes()));
        assert!(pauses.check(&format!("swp1_{id}_{tag}")).is_ok());
        let other = pauses.check(&format!("swp1_{id}_{}", "0".repeat(64)));
        assert!(matches!(other, Err(Unresumable::Forged(_))));
        for bad in ["", "swp1_", "swp1_zz_zz", "swp2_a_b"] {
            assert!(pauses.check(bad).is_err(), "{bad:?}");
        }
        let foreign = self::pauses(&SessionKey::generate());
        assert!(foreign.check(&format!("swp1_{id}_{tag}")).is_err());
    }
}
