//! Embeds the CPython component in the `sandwit` binary when
//! `SANDWIT_EMBED_PYTHON` names it (an absolute path, e.g.
//! `$PWD/target/python/sandbox.wasm` after `interpreter/build`), so an
//! installed binary runs Python with nothing beside it. Without it the binary
//! is built without one (a plain `cargo build` needs no componentize-py) and
//! `sandwit run` looks for the component elsewhere (cli/src/interpreter.rs).
//!
//! Sets for the crate: `SANDWIT_EMBEDDED_PYTHON`, the file to embed (an empty
//! one without one), `SANDWIT_EMBEDDED_PYTHON_SHA256`, its hash (empty
//! without one: a start then finds its compiled code without hashing 21 MB),
//! and `SANDWIT_EMBEDDED_PYTHON_NOTE`, what `sandwit --version` says about it.

use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let embedded = sandwit_embed_python::embed(&out_dir);
    let note = if embedded.hash.is_empty() {
        " (no Python interpreter embedded)".to_string()
    } else {
        format!(
            " (Python interpreter embedded, sha256 {})",
            &embedded.hash[..12]
        )
    };
    println!(
        "cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON={}",
        embedded.file.display()
    );
    println!(
        "cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON_SHA256={}",
        embedded.hash
    );
    println!("cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON_NOTE={note}");
}
