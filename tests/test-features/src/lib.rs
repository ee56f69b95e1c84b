//! Empty: this crate only depends on `sandwit` with the `internals`
//! feature. `sandwit` has it as a dev-dependency, so `cargo test` (and
//! `cargo clippy --all-targets`) build the library with the internals the
//! tests observe (prepared interpreters and their restores). A plain `cargo
//! build` does not: dev-dependencies' features are unified only into test
//! builds.
