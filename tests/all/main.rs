//! sandwit's integration tests: one binary, a module per topic, sharing one
//! compiled-code cache (the CPython component is compiled once per run);
//! most modules build hosts of their own with the limits and policy they
//! test, `common::host()` is the shared one.

mod admission;
mod bad_input;
mod cache;
mod caps;
mod common;
mod contained;
mod controls;
mod embedding;
mod functions;
mod fuzzed;
mod hostile;
mod installed;
mod lifecycle;
mod loading;
mod pauses;
mod plugins;
mod python;
mod python_plugins;
mod scientific;
mod services;
mod sessions;
mod workspaces;
