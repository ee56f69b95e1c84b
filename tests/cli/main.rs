//! The `sandwit` command's tests: one binary, a module per topic, each
//! running the built `sandwit` as a user would. They share the library
//! tests' compiled-code cache folder (the CPython component is compiled once
//! per test run).

mod commands;
mod common;
mod js_plugins;
mod mcp;
mod plugin_projects;
mod registry;
mod registry_client;
mod registry_fake;
mod replicas;
mod serve;
mod serve_scientific;
mod service_limits;
mod store;
mod tenants;
mod tools;
mod traces;
