//! The host's implementations of the interfaces plugins import, one file
//! each, each with its own context type implementing the generated `Host`
//! trait (as wasmtime's WASI crates do), lent by the store data through
//! [`scope::CallData`] and [`chat::ChatData`]. (The interpreter's one import,
//! `methods`, is the Python sandbox's: `sandbox/small/methods.rs`.)

pub(crate) mod chat;
pub(crate) mod config;
pub(crate) mod http;
pub(crate) mod log;
pub(crate) mod scope;
pub(crate) mod store;

use wasmtime::component::Linker;

use chat::ChatData;
use scope::CallData;

/// Adds sandwit's own interfaces (`types`, `log`, `config`, `store`,
/// `chat`) to a plugin linker.
pub(crate) fn add_to_linker<T: CallData + ChatData>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    scope::add_types_to_linker(linker)?;
    log::add_to_linker(linker)?;
    config::add_to_linker(linker)?;
    store::add_to_linker(linker)?;
    chat::add_to_linker(linker)
}
