//! The sandwit plugin contract, as plain data and the checks on it: what a
//! plugin declares (its manifest, method schemas and capabilities), what an
//! operator grants (policies, controls, lock files, signatures), the limits
//! a host applies, and the errors that name what was wrong.
//!
//! It needs no WebAssembly runtime: the registry checks ids and signatures
//! with it, the host (`sandwit`) loads and calls plugins under it and
//! re-exports what embedders use.
#![deny(missing_docs)]

pub mod args;
pub mod capability;
pub mod control_settings;
pub mod digest;
pub mod error;
pub mod json;
pub mod limits;
pub mod lock;
pub mod manifest;
pub mod policy;
pub mod results;
pub mod schema;
pub mod signing;
pub mod text;
pub mod tool_policy;
pub mod types;

pub use capability::{Capability, Grants};
pub use error::{CallError, CallErrorKind, LoadError, MAX_MESSAGE_BYTES};
pub use limits::{
    CallLimits, FUEL_PER_CPU_SECOND, HOOK_FUEL, LimitKind, MAX_COMPONENT_BYTES, RunLimits,
    SCIENTIFIC_MEMORY_BYTES,
};
pub use manifest::{Manifest, MethodSpec, Param, RawManifest, RawMethod, RawParam};
pub use policy::{Policy, StoreLocation};
pub use types::{AgentCtx, ContentPart, Media, MethodKind, MethodResult, ServiceFuture, Value};
