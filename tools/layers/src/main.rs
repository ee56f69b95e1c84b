//! `sandwit-layers`: fails when the modules of a crate of the workspace
//! name each other around a cycle, at file level or at top-level module
//! level (see the library's docs for what counts as naming).
//!
//!     cargo run -p sandwit-layers                 # every crate of the workspace
//!     cargo run -p sandwit-layers -- ROOT.rs ...  # these crate roots
//!     cargo run -p sandwit-layers -- --graph ...  # also print every edge
//!
//! Every cycle fails the check: the workspace has none.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "sandwit-layers [--graph] [ROOT.rs ...]: fails on a cycle among a crate's files or \
             top-level modules; without roots, checks every library and binary of the workspace"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let graph = args.iter().any(|a| a == "--graph");
    let given: Vec<(String, PathBuf)> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(|a| (a.clone(), PathBuf::from(a)))
        .collect();
    let roots = if given.is_empty() {
        workspace_roots()?
    } else {
        given
    };
    let mut failed = false;
    for (label, root) in &roots {
        let report = sandwit_layers::check(root).with_context(|| format!("checking {label}"))?;
        if graph {
            for (level, edges) in [
                ("file", &report.file_edges),
                ("module", &report.module_edges),
            ] {
                for (from, to) in edges {
                    let to: Vec<&str> = to.keys().map(String::as_str).collect();
                    println!("{label} {level} {from} -> {}", to.join(", "));
                }
            }
        }
        if report.clean() {
            println!(
                "layers: {label}: {} files, {} modules, no cycle",
                report.files, report.modules
            );
            continue;
        }
        for (level, cycles) in [
            ("files", &report.file_cycles),
            ("modules", &report.module_cycles),
        ] {
            for cycle in cycles {
                failed = true;
                let members = cycle.members.join(", ");
                println!("layers: {label}: a cycle among {level}: {members}");
                for (from, to, written) in &cycle.edges {
                    println!("    {from} -> {to}  ({written})");
                }
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The root files of every library and binary target of the workspace, as
/// `cargo metadata` lists them, labelled `package (kind)`.
fn workspace_roots() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .output()
        .context("running cargo metadata")?;
    anyhow::ensure!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut roots = Vec::new();
    for package in metadata["packages"].as_array().context("no packages")? {
        let name = package["name"].as_str().unwrap_or("?");
        for target in package["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = (target["kind"].as_array().into_iter().flatten())
                .filter_map(|k| k.as_str())
                .collect();
            let kind = kinds
                .iter()
                .find(|k| matches!(**k, "lib" | "cdylib" | "rlib" | "proc-macro" | "bin"));
            let (Some(kind), Some(src)) = (kind, target["src_path"].as_str()) else {
                continue;
            };
            let label = match *kind {
                "bin" => format!("{name} (bin {})", target["name"].as_str().unwrap_or("?")),
                _ => name.to_string(),
            };
            roots.push((label, PathBuf::from(src)));
        }
    }
    Ok(roots)
}
