//! sandwit: a WebAssembly component host for AI-agent plugins.
//!
//! Plugins are components of the WIT world `sandwit:plugin/sandbox-method`.
//! A [`Host`] loads them (rejecting anything that is not an acceptable plugin,
//! with every problem listed), and [`Plugin::call`] calls a method in a fresh
//! instance under fuel, time and memory [`Limits`], checking the arguments
//! against the declared schemas before the plugin runs and the result's kind
//! after.
#![deny(missing_docs)]

/// The README's Rust snippets, compiled (`no_run`) by `cargo test`'s
/// doctests, so that they keep up with the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeSnippets;

mod args;
mod bindings;
mod cache;
mod cancel;
pub mod capability;
mod capture;
pub mod chat;
mod config;
mod context;
mod control_settings;
pub mod controls;
mod engine;
mod env;
mod error;
mod events;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod guard;
mod guest;
mod host;
mod host_method;
mod installed;
mod interfaces;
pub mod json;
mod limits;
mod loader;
pub mod lock;
pub mod manifest;
mod outbound;
pub mod paths;
mod plugin;
pub mod policy;
mod results;
mod runtime;
mod sandbox;
mod schema;
pub mod signing;
pub mod store;
mod text;
mod types;

pub use cache::{CodeSource, DEFAULT_CACHE_MAX_BYTES, component_hash};
pub use cancel::Cancel;
pub use capability::{Capability, Grants};
pub use chat::{ChatMessage, ChatSink};
pub use config::REDACTED;
pub use context::ContextSet;
pub use controls::{ApprovalRequest, Approver, ControlEvent, ControlsSnapshot};
pub use error::{CallError, CallErrorKind, LoadError};
pub use events::{LogLine, PluginEvent};
pub use host::{
    DEFAULT_MAX_INSTANCES, DEFAULT_PREPARED_INTERPRETERS, DEFAULT_PREPARED_PLUGIN_INSTANCES, Host,
    HostBuilder,
};
pub use host_method::{HostMethod, HostMethodFuture};
pub use limits::{
    Budget, FUEL_PER_CPU_SECOND, HOOK_FUEL, LimitKind, Limits, MAX_COMPONENT_BYTES, Metering,
    RunLimits, SCIENTIFIC_MEMORY_BYTES,
};
pub use manifest::{Manifest, MethodSpec, Param};
pub use plugin::lifecycle::{MAX_INJECTED_PROMPT_BYTES, PluginContext};
pub use plugin::{CallReport, Plugin};
pub use policy::Policy;
pub use sandbox::admission::{DEFAULT_MAX_WAIT, DEFAULT_WAITING_RUNS, RunSlots};
pub use sandbox::scientific::{DEFAULT_PRELOAD, ScientificOptions, ScientificSandbox};
pub use sandbox::small::outcome::{
    Event, Handoff, LimitHit, LiveEvent, RunError, RunOutcome, RunStatus, WorkspaceFile,
};
pub use sandbox::small::{PluginSet, PluginSetError, PythonSandbox, RunOptions, strip_code_fence};
pub use sandbox::workspace::WorkspaceOptions;
pub use types::{AgentCtx, ContentPart, Media, MethodKind, MethodResult, ServiceFuture, Value};
