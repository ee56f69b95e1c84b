//! What a store is: scopes, namespaces, entries, errors and the
//! [`StoreBackend`] trait the host calls.

use std::fmt;

use crate::policy::StoreLimits;

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
    /// The chat key, the user id, both (`chat` NUL `user`), or empty for
    /// [`Scope::Global`].
    pub owner: String,
}

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
/// returns `Ok` is durable.
pub trait StoreBackend: Send + Sync {
    /// The value of `key`, if any.
    fn get(&self, ns: &Namespace, key: &str) -> Result<Option<Entry>, StoreError>;
    /// Stores `value` under `key`, keeping the plugin's keys and values
    /// within `limits.max_plugin_bytes`.
    fn set(
        &self,
        ns: &Namespace,
        key: &str,
        value: &Entry,
        limits: &StoreLimits,
    ) -> Result<(), StoreError>;
    /// Removes `key`; returns whether it was there.
    fn delete(&self, ns: &Namespace, key: &str) -> Result<bool, StoreError>;
    /// Up to `max` keys of `ns`, sorted.
    fn keys(&self, ns: &Namespace, max: usize) -> Result<Vec<String>, StoreError>;
    /// The bytes of keys and values `plugin` holds.
    fn usage(&self, plugin: &str) -> Result<u64, StoreError>;
}
