//! The plugin store: key-value data kept between calls, scoped to the chat,
//! the user, the user in the chat, or the whole plugin. Needs the `store`
//! capability. A `set` that returns `Ok` is on disk.
//!
//! ```no_run
//! use sandwit_sdk::store::{self, Scope};
//! # fn f() -> Result<(), sandwit_sdk::Error> {
//! store::set_text(Scope::User, "name", "Ada")?;
//! assert_eq!(store::get_text(Scope::User, "name")?.as_deref(), Some("Ada"));
//! # Ok(()) }
//! ```

use crate::Error;
use crate::bindings::wit::sandwit::plugin::store as api;
use crate::services::to_error;

/// A stored value: text or bytes.
pub use api::Entry;
/// Where a key lives: [`Scope::Chat`], [`Scope::User`], [`Scope::ChatUser`]
/// or [`Scope::Global`]. The host takes the chat and user from the call's
/// context.
pub use api::Scope;

fn err(e: api::ServiceError) -> Error {
    to_error("store", e)
}

/// The value of `key`, if any.
pub fn get(scope: Scope, key: &str) -> Result<Option<Entry>, Error> {
    api::get(scope, key).map_err(err)
}

/// The text value of `key`, if any (bytes that are UTF-8 count as text).
pub fn get_text(scope: Scope, key: &str) -> Result<Option<String>, Error> {
    Ok(match get(scope, key)? {
        Some(Entry::Text(t)) => Some(t),
        Some(Entry::Bytes(b)) => Some(
            String::from_utf8(b)
                .map_err(|_| Error::failed(format!("store: `{key}` holds bytes, not text")))?,
        ),
        None => None,
    })
}

/// Stores `value` under `key`.
pub fn set(scope: Scope, key: &str, value: &Entry) -> Result<(), Error> {
    api::set(scope, key, value).map_err(err)
}

/// Stores text under `key`.
pub fn set_text(scope: Scope, key: &str, value: &str) -> Result<(), Error> {
    set(scope, key, &Entry::Text(value.to_string()))
}

/// Removes `key`; returns whether it was there.
pub fn delete(scope: Scope, key: &str) -> Result<bool, Error> {
    api::delete(scope, key).map_err(err)
}

/// The keys of `scope`, sorted.
pub fn keys(scope: Scope) -> Result<Vec<String>, Error> {
    api::list_keys(scope).map_err(err)
}
