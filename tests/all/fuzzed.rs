//! The fuzzers' regression inputs (`fuzz/regressions/<target>/`: crashes
//! found and fixed, and seeds), replayed through the same entry functions of
//! `sandwit::fuzzing` the fuzz targets call (scripts/fuzz runs those).

use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

/// The inputs of `target`, by file name.
fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs every input of `target` and fails naming each one that panicked
/// (a hang shows as a test that does not end).
fn replay(target: &str) {
    let (_, run) = sandwit_fuzz::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    let files = inputs(target);
    assert!(!files.is_empty(), "fuzz/regressions/{target} has no inputs");
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).unwrap();
            catch_unwind(|| run(&data)).is_err()
        })
        .map(|path| format!("{} panicked", path.display()))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn every_target_has_its_regression_directory() {
    for (target, _) in sandwit_fuzz::TARGETS {
        assert!(!inputs(target).is_empty(), "{target}");
    }
}

#[test]
fn value_nodes_regressions() {
    replay("value_nodes");
}

#[test]
fn value_marshal_regressions() {
    replay("value_marshal");
}

#[test]
fn manifest_regressions() {
    replay("manifest");
}

#[test]
fn schema_regressions() {
    replay("schema");
}

#[test]
fn policy_regressions() {
    replay("policy");
}

#[test]
fn component_regressions() {
    replay("component");
}
