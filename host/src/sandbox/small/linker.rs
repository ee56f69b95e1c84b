//! The small interpreter's linker: WASI, its streams, and
//! `sandwit:interpreter/methods`, the code's calls of methods
//! ([`call`]).
//!
//! Linked by hand rather than through a generated `Host` trait because a call
//! needs the store itself: the plugin runs on the run's remaining fuel, which
//! is read from the interpreter's store and charged back to it.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceType, WasmList};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::p2::bindings::io::streams::{HostInputStream, HostOutputStream};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};

use crate::sandbox::run::calls::{answer, call};
use crate::sandbox::run::state::RunState;

/// A linker for the interpreter on `engine`: WASI, its streams' drops
/// noted in the run's state, and the plugin methods.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<RunState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    note_stream_drops(&mut linker)?;
    super::workspace::add_to_linker(&mut linker)?;
    add_to_linker(&mut linker)?;
    Ok(linker)
}

/// The `wasi:io/streams` wasmtime-wasi defines (the interpreter's imports of
/// earlier 0.2 versions resolve to it).
const STREAMS: &str = "wasi:io/streams@0.2.12";

/// Redefines the stream resources of [`STREAMS`] so that dropping one the
/// interpreter held since it was prepared also sets
/// [`Run::dropped_stream`](crate::sandbox::run::state::Run): the interpreter's memory,
/// restored after a run, refers to the stdout stream it opened while
/// prepared, and a run that closed that stream (and maybe opened another,
/// which the instance's handle table would put in its place) must not
/// leave it to the next run. The drop itself is wasmtime-wasi's.
fn note_stream_drops(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut streams = linker.instance(STREAMS)?;
    streams.resource_async(
        "output-stream",
        ResourceType::host::<DynOutputStream>(),
        |mut store, rep| {
            Box::new(async move {
                store.data_mut().note_drop(rep);
                let table = store.data_mut().ctx().table;
                HostOutputStream::drop(table, Resource::new_own(rep)).await
            })
        },
    )?;
    streams.resource_async(
        "input-stream",
        ResourceType::host::<DynInputStream>(),
        |mut store, rep| {
            Box::new(async move {
                store.data_mut().note_drop(rep);
                let table = store.data_mut().ctx().table;
                HostInputStream::drop(table, Resource::new_own(rep)).await
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Adds `sandwit:interpreter/methods@0.3.0` to a Python run's linker.
pub(crate) fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    let mut methods = linker.instance("sandwit:interpreter/methods@0.3.0")?;
    methods.func_wrap_async(
        "call",
        |store: StoreContextMut<'_, RunState>, (method, args): (String, WasmList<u8>)| {
            Box::new(async move { Ok((answer(call(store, method, args).await?),)) })
        },
    )
}
