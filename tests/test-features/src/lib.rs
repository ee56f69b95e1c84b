//! Empty: this crate only depends on `sandwit` with the `fuzzing` and
//! `internals` features. `sandwit` has it as a dev-dependency, so `cargo
//! test` (and `cargo clippy --all-targets`) build the library with
//! `sandwit::fuzzing`, whose entry functions `tests/all/fuzzed.rs` replays the
//! inputs of `fuzz/regressions/` through, and with the internals the tests
//! observe (prepared interpreters and their restores). A plain `cargo build`
//! does not: dev-dependencies' features are unified only into test builds.
