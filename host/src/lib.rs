//! sandwit: a WebAssembly component host for AI-agent plugins.
//!
//! Plugins are components of the WIT world `sandwit:plugin/sandbox-method`.
//! A [`Host`] loads them (rejecting anything that is not an acceptable plugin,
//! with every problem listed), and [`Plugin::call`] calls a method in a fresh
//! instance under fuel, time and memory [`CallLimits`], checking the arguments
//! against the declared schemas before the plugin runs and the result's kind
//! after.
#![deny(missing_docs)]

/// The README's Rust snippets, compiled (`no_run`) by `cargo test`'s
/// doctests, so that they keep up with the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeSnippets;

/// docs/EMBEDDING.md's Rust snippets (moved there from the README), compiled
/// the same way, so that the embedding guide keeps up with the API too.
#[cfg(doctest)]
#[doc = include_str!("../../docs/EMBEDDING.md")]
struct EmbeddingSnippets;

mod bindings;
mod capabilities;
pub mod controls;
mod host;
pub mod paths;
mod plugin;
mod runtime;
mod sandbox;
pub mod sources;
mod sys;
mod toolbox;
pub mod trace;

pub use capabilities::chat::{ChatMessage, ChatSink};
pub use capabilities::config::REDACTED;
pub use capabilities::events::{LogLine, PluginEvent};
pub use capabilities::{chat, store};
pub use controls::{
    ApprovalRequest, Approver, ControlEvent, ControlsSnapshot, SharedControls, SharedControlsError,
};
pub use host::{
    DEFAULT_MAX_INSTANCES, DEFAULT_PREPARED_INTERPRETERS, DEFAULT_PREPARED_PLUGIN_INSTANCES, Host,
    HostBuilder,
};
pub use plugin::lifecycle::{MAX_INJECTED_PROMPT_BYTES, PluginContext};
pub use plugin::{CallReport, Plugin};
pub use runtime::cache::{CodeSource, DEFAULT_CACHE_MAX_BYTES};
pub use runtime::cancel::Cancel;
pub use runtime::limits::{Budget, Metering};
pub use sandbox::interpreter::{Interpreter, InterpreterKind};
pub use sandbox::pauses::{Paused, Resume};
pub use sandbox::run::outcome::{
    Event, Handoff, LimitHit, LiveEvent, RunError, RunOutcome, RunStatus, WorkspaceFile,
};
pub use sandbox::run::slots::{
    DEFAULT_MAX_WAIT, DEFAULT_WAITING_RUNS, NoRunPlace, RunPlace, RunSlots,
};
pub use sandbox::run::{
    CLIENT_FUNCTIONS, ClientFunction, RunOptions, is_exception_type_name, strip_code_fence,
};
pub use sandbox::scientific::{DEFAULT_PRELOAD, ScientificOptions, ScientificSandbox};
pub use sandbox::sessions::saved::SessionKey;
pub use sandbox::sessions::{
    LoadedSession, MAX_SESSION_NAME_BYTES, SessionError, SessionInfo, SessionLimits, SessionReport,
    check_name as check_session_name,
};
pub use sandbox::small::PythonSandbox;
pub use sandbox::workspace::WorkspaceOptions;
pub use toolbox::context::ContextSet;
pub use toolbox::guest_text::visible as visible_text;
pub use toolbox::host_method::{HostMethod, HostMethodFuture};
pub use toolbox::set::{Toolbox, ToolboxError};

// The plugin contract (crate `sandwit-contract`), re-exported: the host's API
// speaks its types.
pub use sandwit_contract::signing::component_hash;
pub use sandwit_contract::{
    AgentCtx, CallError, CallErrorKind, CallLimits, Capability, ContentPart, FUEL_PER_CPU_SECOND,
    Grants, HOOK_FUEL, LimitKind, LoadError, MAX_COMPONENT_BYTES, MAX_MESSAGE_BYTES, Manifest,
    Media, MethodKind, MethodResult, MethodSpec, Param, Policy, RunLimits, SCIENTIFIC_MEMORY_BYTES,
    ServiceFuture, StoreLocation, Value,
};
pub use sandwit_contract::{capability, json, lock, manifest, policy, signing, tool_policy};
