//! What the build scripts of the `sandwit` command (cli/build.rs) and of the
//! Python package (bindings/python/build.rs) share: the CPython component
//! named by `SANDWIT_EMBED_PYTHON` (an absolute path, set by `embed_python`
//! in scripts/env.sh), read once, checked, copied into `OUT_DIR` and hashed.
//!
//! The crate embeds the copy, never the named file: the hash it is given
//! and the bytes it includes are then of the same read, even if the named
//! file is replaced while cargo builds (an embedded interpreter loads its
//! compiled code by that hash, so a mismatch would run stale code).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The variable naming the component to embed.
pub const VAR: &str = "SANDWIT_EMBED_PYTHON";

/// The interpreter a build embeds.
pub struct Embedded {
    /// The file to `include_bytes!`: the copy in `OUT_DIR`, or an empty
    /// file there when nothing is embedded.
    pub file: PathBuf,
    /// The SHA-256 of `file` in hex, empty when nothing is embedded.
    pub hash: String,
}

/// Reads `SANDWIT_EMBED_PYTHON` and prepares the file to embed in
/// `out_dir`, telling cargo when to run the build script again. A path
/// that is relative, unreadable or not a WebAssembly component ends the
/// build with an error naming it.
pub fn embed(out_dir: &Path) -> Embedded {
    println!("cargo::rerun-if-env-changed={VAR}");
    let Some(path) = std::env::var_os(VAR).filter(|v| !v.is_empty()) else {
        let none = out_dir.join("no-python.wasm");
        std::fs::write(&none, b"").expect("writing to OUT_DIR");
        return Embedded {
            file: none,
            hash: String::new(),
        };
    };
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
    let file = out_dir.join("python.wasm");
    std::fs::write(&file, &bytes).expect("writing to OUT_DIR");
    Embedded { file, hash }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}
