//! What the language modules of `sandwit plugin` share: files the binary
//! carries and writes into a project, the WIT packages the SDK worlds
//! include, and running a build step.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

/// A file written as it is, by its path in the project.
pub(super) type Embedded = (&'static str, &'static str);

/// The WIT packages the Python and JavaScript SDKs' worlds include: the
/// 0.2 plugin world and WASI 0.2.12, laid out as sdk/python/wit/deps is
/// (its `sandwit-plugin-*` link to wit/plugin@0.2.0, whose files are read
/// from there). Each language adds its `world.wit` beside `deps`.
pub(super) const WIT_DEPS: &[Embedded] = &[
    (
        "deps/sandwit-plugin-0.2.0/lifecycle.wit",
        include_str!("../../../wit/plugin@0.2.0/lifecycle.wit"),
    ),
    (
        "deps/sandwit-plugin-0.1.0/world.wit",
        include_str!("../../../wit/plugin@0.2.0/deps/plugin-0.1.0/world.wit"),
    ),
    (
        "deps/sandwit-plugin-0.1.0/types.wit",
        include_str!("../../../wit/plugin@0.2.0/deps/plugin-0.1.0/types.wit"),
    ),
    (
        "deps/sandwit-plugin-0.1.0/services.wit",
        include_str!("../../../wit/plugin@0.2.0/deps/plugin-0.1.0/services.wit"),
    ),
    (
        "deps/wasi-cli-0.2.12/cli.wit",
        include_str!("../../../sdk/python/wit/deps/wasi-cli-0.2.12/cli.wit"),
    ),
    (
        "deps/wasi-clocks-0.2.12/clocks.wit",
        include_str!("../../../sdk/python/wit/deps/wasi-clocks-0.2.12/clocks.wit"),
    ),
    (
        "deps/wasi-filesystem-0.2.12/filesystem.wit",
        include_str!("../../../sdk/python/wit/deps/wasi-filesystem-0.2.12/filesystem.wit"),
    ),
    (
        "deps/wasi-http-0.2.12/http.wit",
        include_str!("../../../sdk/python/wit/deps/wasi-http-0.2.12/http.wit"),
    ),
    (
        "deps/wasi-io-0.2.12/io.wit",
        include_str!("../../../sdk/python/wit/deps/wasi-io-0.2.12/io.wit"),
    ),
    (
        "deps/wasi-random-0.2.12/random.wit",
        include_str!("../../../sdk/python/wit/deps/wasi-random-0.2.12/random.wit"),
    ),
    (
        "deps/wasi-sockets-0.2.12/sockets.wit",
        include_str!("../../../sdk/python/wit/deps/wasi-sockets-0.2.12/sockets.wit"),
    ),
];

/// Writes `files` under `root`, each through `fill`.
pub(super) fn write_all(
    root: &Path,
    files: &[Embedded],
    fill: impl Fn(&str) -> String,
) -> anyhow::Result<()> {
    for (path, text) in files {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, fill(text)).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Runs `cmd`, failing with `what` and its exit status if it fails.
pub(super) fn run_step(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// The project's directory name, for the component's file name.
pub(super) fn project_name(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "plugin".into())
}
