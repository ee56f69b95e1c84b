//! Embeds the CPython component in the `sandwit` binary when
//! `SANDWIT_EMBED_PYTHON` names it (an absolute path, e.g.
//! `$PWD/target/python/sandbox.wasm` after `python-guest/build`), so an
//! installed binary runs Python with nothing beside it. Without it the binary
//! is built without one (a plain `cargo build` needs no componentize-py) and
//! `sandwit run` looks for the component elsewhere
//! (cli/src/interpreter.rs).
//!
//! Sets for the crate: `SANDWIT_EMBEDDED_PYTHON`, the file to embed (an empty
//! one in `OUT_DIR` without one), `SANDWIT_EMBEDDED_PYTHON_SHA256`, its hash
//! (empty without one: a start then finds its compiled code without hashing
//! 21 MB), and `SANDWIT_EMBEDDED_PYTHON_NOTE`, what `sandwit --version` says
//! about it.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

const VAR: &str = "SANDWIT_EMBED_PYTHON";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed={VAR}");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (file, hash, note) = match std::env::var_os(VAR).filter(|v| !v.is_empty()) {
        None => {
            let none = out_dir.join("no-python.wasm");
            std::fs::write(&none, b"").expect("writing to OUT_DIR");
            (
                none,
                String::new(),
                " (no Python interpreter embedded)".to_string(),
            )
        }
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                fail(&format!(
                    "{VAR}={} must be an absolute path (cargo builds in another directory)",
                    path.display()
                ));
            }
            println!("cargo::rerun-if-changed={}", path.display());
            let bytes = std::fs::read(&path).unwrap_or_else(|e| {
                fail(&format!(
                    "{VAR}={}: cannot read it ({e}); build it with python-guest/build",
                    path.display()
                ))
            });
            // A WebAssembly component: the magic, a version, layer 1.
            if bytes.get(..4) != Some(b"\0asm") || bytes.get(6..8) != Some(&[1, 0]) {
                fail(&format!(
                    "{VAR}={} is not a WebAssembly component",
                    path.display()
                ));
            }
            let hash: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let note = format!(" (Python interpreter embedded, sha256 {})", &hash[..12]);
            (path, hash, note)
        }
    };
    println!(
        "cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON={}",
        file.display()
    );
    println!("cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON_SHA256={hash}");
    println!("cargo::rustc-env=SANDWIT_EMBEDDED_PYTHON_NOTE={note}");
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}
