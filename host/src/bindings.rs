//! Every `bindgen!` of the host, in one place.

/// The `sandbox-method` world that plugins implement.
pub mod plugin {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "sandbox-method",
        imports: { default: trappable },
        exports: { default: async },
    });
}

pub use plugin::sandwit::plugin::log as log_api;
pub use plugin::sandwit::plugin::types as wit;
