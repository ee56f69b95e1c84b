//! Rust plugin projects: a cdylib on the `sandwit-sdk` crate, built with
//! `cargo build --target wasm32-wasip2 --release`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use super::files::Embedded;

pub(super) const TEMPLATE: &[Embedded] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/rust/src/lib.rs"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/rust/.gitignore"),
    ),
];

/// Where the Rust SDK is when this binary was built from a sandwit tree.
pub(super) const SDK_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk/rust");

pub(super) fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut child = Command::new(cargo)
        .current_dir(dir)
        .args(["build", "--target", "wasm32-wasip2", "--release"])
        .args(["--message-format", "json-render-diagnostics"])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo")?;
    let mut built = None;
    for line in std::io::BufReader::new(child.stdout.take().expect("piped")).lines() {
        let message: serde_json::Value = serde_json::from_str(&line?).unwrap_or_default();
        if message["reason"] == "compiler-artifact" {
            let wasm = message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(".wasm"));
            if let Some(wasm) = wasm {
                built = Some(PathBuf::from(wasm));
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("cargo build --target wasm32-wasip2 --release failed ({status})");
    }
    built.context("cargo built no .wasm: is the crate a cdylib (`crate-type = [\"cdylib\"]`)?")
}
