//! The plugin store: key-value data each plugin keeps per chat, per user, per
//! user in a chat, or globally. [`SqliteStore`] is the embedded default; an
//! application can put any [`StoreBackend`] behind the host.

mod backend;
pub mod conformance;
pub(crate) mod interface;
mod sqlite;

pub use backend::{Entry, Namespace, ROW_OVERHEAD_BYTES, Scope, StoreBackend, StoreError};
pub use sqlite::SqliteStore;
