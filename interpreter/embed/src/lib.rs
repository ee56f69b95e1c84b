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

/// Where a source tree keeps the interpreter once built, relative to its
/// root: scripts/env.sh's stable copy, then interpreter/build's output.
const IN_TREE: [&str; 2] = ["target/embed/sandbox.wasm", "target/python/sandbox.wasm"];

/// Reads `SANDWIT_EMBED_PYTHON` and prepares the file to embed in
/// `out_dir`, telling cargo when to run the build script again. A path
/// that is relative, unreadable or not a WebAssembly component ends the
/// build with an error naming it.
///
/// Without the variable, a release build (what `pip install
/// ./bindings/python` and `cargo install --path cli` make) embeds the
/// interpreter the source tree has built, and fails, naming the one
/// command to run, when it has none: an installed package or binary that
/// cannot run Python is never made. A debug build embeds none (a plain
/// `cargo build` needs no componentize-py).
pub fn embed(out_dir: &Path) -> Embedded {
    println!("cargo::rerun-if-env-changed={VAR}");
    let given = std::env::var_os(VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let path = match (given, release) {
        (Some(path), _) => path,
        (None, false) => {
            let none = out_dir.join("no-python.wasm");
            std::fs::write(&none, b"").expect("writing to OUT_DIR");
            return Embedded {
                file: none,
                hash: String::new(),
            };
        }
        (None, true) => match in_tree(&manifest_dir) {
            Ok(found) => found,
            Err(message) => fail(&message),
        },
    };
    if !path.is_absolute() {
        fail(&format!(
            "{VAR}={} must be an absolute path (cargo builds in another directory)",
            path.display()
        ));
    }
    println!("cargo::rerun-if-changed={}", path.display());
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        fail(&format!(
            "{VAR}={}: cannot read it ({e}); build it with interpreter/build",
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

/// The interpreter the source tree around `manifest_dir` has built, or
/// why there is none, naming the command that builds it.
fn in_tree(manifest_dir: &Path) -> Result<PathBuf, String> {
    let root = manifest_dir
        .ancestors()
        .find(|dir| dir.join("interpreter/build").is_file())
        .ok_or_else(|| {
            format!(
                "this release build would carry no Python interpreter, and {} is not in \
                 sandwit's source tree: set {VAR} to the absolute path of the CPython component \
                 (target/python/sandbox.wasm after `interpreter/build`)",
                manifest_dir.display()
            )
        })?;
    for candidate in IN_TREE {
        println!("cargo::rerun-if-changed={}", root.join(candidate).display());
    }
    IN_TREE
        .iter()
        .map(|candidate| root.join(candidate))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            format!(
                "this release build would carry no Python interpreter, and none is built yet: \
                 run `{}/interpreter/build` (it installs the pinned componentize-py into a local \
                 virtualenv and writes target/python/sandbox.wasm), then build again",
                root.display()
            )
        })
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}

#[cfg(test)]
mod tests {
    use super::in_tree;

    #[test]
    fn a_release_build_finds_the_trees_interpreter_or_names_the_command() {
        let root = std::env::temp_dir().join(format!("embed-python-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let crate_dir = root.join("bindings/python");
        std::fs::create_dir_all(&crate_dir).unwrap();
        let err = in_tree(&crate_dir).unwrap_err();
        assert!(err.contains("not in sandwit's source tree"), "{err}");
        std::fs::create_dir_all(root.join("interpreter")).unwrap();
        std::fs::write(root.join("interpreter/build"), "").unwrap();
        let err = in_tree(&crate_dir).unwrap_err();
        assert!(err.contains("interpreter/build`"), "{err}");
        std::fs::create_dir_all(root.join("target/python")).unwrap();
        std::fs::write(root.join("target/python/sandbox.wasm"), "").unwrap();
        assert_eq!(
            in_tree(&crate_dir).unwrap(),
            root.join("target/python/sandbox.wasm")
        );
        std::fs::create_dir_all(root.join("target/embed")).unwrap();
        std::fs::write(root.join("target/embed/sandbox.wasm"), "").unwrap();
        assert_eq!(
            in_tree(&crate_dir).unwrap(),
            root.join("target/embed/sandbox.wasm")
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
