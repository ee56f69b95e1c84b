//! sandwit's integration tests: one binary, a module per topic, sharing one
//! host and one compiled-code cache.

mod bad_input;
mod cache;
mod cli;
mod common;
mod contained;
mod hostile;
mod loading;
mod plugins;
mod python;
mod services;
