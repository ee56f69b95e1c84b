//! Embeds the CPython component in the extension when `SANDWIT_EMBED_PYTHON`
//! names it (scripts/test-python sets it with `embed_python` from
//! scripts/env.sh), as cli/build.rs does for the command: a wheel built so
//! needs no other download.
//!
//! Sets for the crate: `SANDWIT_EMBEDDED_PYTHON`, the file to embed (an empty
//! one without one), and `SANDWIT_EMBEDDED_PYTHON_SHA256`, its hash (empty
//! without one), so that a start finds the interpreter's compiled code
//! without hashing 21 MB.

use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let embedded = sandwit_embed_python::embed(&out_dir);
    println!(
        "cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON={}",
        embedded.file.display()
    );
    println!(
        "cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON_SHA256={}",
        embedded.hash
    );
}
