//! `sandwit-embed-wit WIT_DIR WORLD MODULE`: adds to the core wasm module
//! `MODULE` (in place) the `component-type` custom section that describes
//! the world `WORLD` of the WIT package in `WIT_DIR`, strings in UTF-8.
//!
//! This is what a wit-bindgen generator emits beside the code it
//! generates; `interpreter/methods.c` is written by hand, so interpreter/build
//! embeds its world's metadata with this, for componentize-py's linker to
//! know the type of the import the library lowers.

use anyhow::{Context, bail};
use std::path::Path;
use wit_component::StringEncoding;
use wit_parser::Resolve;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [wit, world, module] = args.as_slice() else {
        bail!("usage: sandwit-embed-wit WIT_DIR WORLD MODULE (MODULE is rewritten in place)");
    };
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_dir(Path::new(wit))
        .with_context(|| format!("reading the WIT package in {wit}"))?;
    let world = resolve
        .select_world(&[package], Some(world))
        .with_context(|| format!("finding the world {world} in {wit}"))?;
    let mut bytes = std::fs::read(module).with_context(|| format!("reading {module}"))?;
    wit_component::embed_component_metadata(&mut bytes, &resolve, world, StringEncoding::UTF8)
        .with_context(|| format!("embedding the world's metadata in {module}"))?;
    std::fs::write(module, bytes).with_context(|| format!("writing {module}"))?;
    Ok(())
}
