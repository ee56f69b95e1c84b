//! What plugins may use, one folder or file per capability: its backend
//! (the embedder's service trait or the host's own), the host's
//! implementation of the interface plugins import (`interface.rs`: a context
//! type implementing the generated `Host` trait, as wasmtime's WASI crates
//! do, lent by the store data through [`scope::CallData`] and
//! [`chat::interface::ChatData`]) and what the grant allows. `env` is what
//! one loaded plugin was granted, `events` what its calls did. (The
//! interpreter's one import, `methods`, is the Python sandbox's:
//! `sandbox/small/linker.rs`, answered by `sandbox/run/calls.rs`.)

pub mod chat;
pub(crate) mod config;
pub(crate) mod env;
pub(crate) mod events;
pub(crate) mod http;
pub(crate) mod log;
pub(crate) mod scope;
pub mod store;
#[cfg(test)]
pub(crate) mod testing;

use wasmtime::component::Linker;

use chat::interface::ChatData;
use scope::CallData;

/// Adds sandwit's own interfaces (`types`, `log`, `config`, `store`,
/// `chat`) to a plugin linker.
pub(crate) fn add_to_linker<T: CallData + ChatData>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    scope::add_types_to_linker(linker)?;
    log::add_to_linker(linker)?;
    config::interface::add_to_linker(linker)?;
    store::interface::add_to_linker(linker)?;
    chat::interface::add_to_linker(linker)
}
