//! What a store is: scopes, namespaces, entries, errors and the
//! [`StoreBackend`] trait the host calls.

use std::fmt;

use sandwit_contract::policy::StoreLimits;
use sandwit_contract::types::ServiceFuture;

/// Where a key lives. The owner of a scope comes from the agent context of
/// the call, never from the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The current chat.
    Chat,
    /// The current user, across chats.
    User,
    /// The current user in the current chat.
    ChatUser,
    /// The whole plugin.
    Global,
}

impl Scope {
    /// Its name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Chat => "chat",
            Scope::User => "user",
            Scope::ChatUser => "chat-user",
            Scope::Global => "global",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One plugin's keys in one scope for one owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Namespace {
    /// The plugin's id.
    pub plugin: String,
    /// The scope.
    pub scope: Scope,
    /// The chat key, the user id, both (`chat` NUL `user`), or for
    /// [`Scope::Global`] the call's [namespace](crate::AgentCtx::namespace)
    /// (empty without one).
    pub owner: String,
    /// The call's [namespace](crate::AgentCtx::namespace) (empty without
    /// one): the tenant whose share of the plugin's quota a write counts
    /// against, so that one tenant filling it leaves others theirs.
    pub tenant: String,
}

impl Namespace {
    /// What an entry of this namespace counts for against its tenant's
    /// quota: [`ROW_OVERHEAD_BYTES`], the owner's bytes, and `key_value`
    /// bytes of key and value (UTF-8 bytes, not characters). Every backend
    /// counts this way, so a quota means the same on each.
    pub fn entry_bytes(&self, key_value: u64) -> u64 {
        (ROW_OVERHEAD_BYTES + self.owner.len()) as u64 + key_value
    }

    /// The error of a write that would bring this namespace's tenant to
    /// `used` bytes of the plugin's, past `limits.max_plugin_bytes`.
    pub fn over_quota(&self, used: u64, limits: &StoreLimits) -> StoreError {
        let whose = if self.tenant.is_empty() {
            String::new()
        } else {
            format!(" of the namespace {:?}", self.tenant)
        };
        StoreError::LimitExceeded(format!(
            "the plugin's data{whose} would take {used} bytes, more than its limit of {} bytes",
            limits.max_plugin_bytes
        ))
    }
}

/// Bytes an entry counts for against the plugin's quota, besides its key
/// and value: what a row costs the database (owner, scope, index).
pub const ROW_OVERHEAD_BYTES: usize = 64;

/// A stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// UTF-8 text.
    Text(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
}

impl Entry {
    /// Its size in bytes.
    pub fn len(&self) -> usize {
        match self {
            Entry::Text(t) => t.len(),
            Entry::Bytes(b) => b.len(),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A cap was reached; the text names it.
    #[error("{0}")]
    LimitExceeded(String),
    /// The backend failed.
    #[error("the store failed: {0}")]
    Backend(String),
}

/// Where plugin data lives. Every method is one transaction; a `set` that
/// returns `Ok` is durable. Each is awaited inside the plugin call, under
/// the call's deadline, so a backend may talk to its database without
/// blocking a runtime thread (blocking work belongs on
/// `tokio::task::spawn_blocking`, as [`SqliteStore`](crate::store::SqliteStore)
/// does).
pub trait StoreBackend: Send + Sync {
    /// The value of `key`, if any.
    fn get<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
    ) -> ServiceFuture<'a, Result<Option<Entry>, StoreError>>;
    /// Stores `value` under `key`, keeping the plugin's keys and values
    /// of `ns.tenant` within `limits.max_plugin_bytes`.
    fn set<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
        value: &'a Entry,
        limits: &'a StoreLimits,
    ) -> ServiceFuture<'a, Result<(), StoreError>>;
    /// Stores `value` under `key` as [`set`](Self::set) does (`None`:
    /// removes the key, as [`delete`](Self::delete) does), if the key's
    /// value is `current` now (`None`: if it has none), and says whether it
    /// did. The comparison and the write are one transaction, so of
    /// writers that read the same value and swap it at once on any replica,
    /// one succeeds: how sandwit keeps two hosts from both saving the next
    /// run of one session, or a sweep from removing a session saved since
    /// it looked.
    fn swap<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
        current: Option<&'a Entry>,
        value: Option<&'a Entry>,
        limits: &'a StoreLimits,
    ) -> ServiceFuture<'a, Result<bool, StoreError>>;
    /// Removes `key`; returns whether it was there.
    fn delete<'a>(
        &'a self,
        ns: &'a Namespace,
        key: &'a str,
    ) -> ServiceFuture<'a, Result<bool, StoreError>>;
    /// Up to `max` keys of `ns`, sorted.
    fn keys<'a>(
        &'a self,
        ns: &'a Namespace,
        max: usize,
    ) -> ServiceFuture<'a, Result<Vec<String>, StoreError>>;
    /// The bytes of keys and values `plugin` holds, every tenant's together.
    fn usage<'a>(&'a self, plugin: &'a str) -> ServiceFuture<'a, Result<u64, StoreError>>;
}
