//! Every `bindgen!` of the host, in one place.

/// The `sandbox-method` world that plugins implement.
pub mod plugin {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "sandbox-method",
        // The store and chat call the embedder's services, which may wait
        // on I/O (`StoreBackend`, `ChatSink`).
        imports: {
            "sandwit:plugin/store": async | trappable,
            "sandwit:plugin/chat": async | trappable,
            default: trappable,
        },
        exports: { default: async },
    });
}

/// The `python-sandbox` world of the CPython component. Its `methods` import
/// is linked by hand (`interfaces/methods.rs`) because a call needs the
/// store's fuel; only the export bindings are used.
pub mod python {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "python-sandbox",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "sandwit:plugin/types": super::plugin::sandwit::plugin::types },
    });
}

pub use plugin::sandwit::plugin::chat as chat_api;
pub use plugin::sandwit::plugin::config as config_api;
pub use plugin::sandwit::plugin::log as log_api;
pub use plugin::sandwit::plugin::store as store_api;
pub use plugin::sandwit::plugin::types as wit;
