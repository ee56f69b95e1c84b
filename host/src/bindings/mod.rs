//! Every `bindgen!` of the host, in one place.

/// The `sandbox-method` world that plugins implement.
pub mod plugin {
    wasmtime::component::bindgen!({
        path: "../wit/plugin@0.1.0",
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

/// The 0.2 `sandbox-method` world: 0.1's, and the `lifecycle` export. Its
/// imports and the `plugin` export are 0.1's, bound above (a plugin of
/// either version is linked and called through them): only the lifecycle's
/// export bindings are used.
pub mod plugin_v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/plugin@0.2.0",
        world: "sandwit:plugin/sandbox-method@0.2.0",
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "sandwit:plugin/types@0.1.0": super::plugin::sandwit::plugin::types,
            "sandwit:plugin/log@0.1.0": super::plugin::sandwit::plugin::log,
            "sandwit:plugin/store@0.1.0": super::plugin::sandwit::plugin::store,
            "sandwit:plugin/config@0.1.0": super::plugin::sandwit::plugin::config,
            "sandwit:plugin/chat@0.1.0": super::plugin::sandwit::plugin::chat,
        },
    });
}

/// The `python-sandbox` world of the CPython component. Its `methods` import
/// is linked by hand (`sandbox/small/linker.rs`, answered by
/// `sandbox/run/calls.rs`) because a call needs the store's fuel; only the
/// export bindings are used.
pub mod python {
    wasmtime::component::bindgen!({
        path: "../wit/interpreter",
        world: "python-sandbox",
        imports: { default: async | trappable },
        exports: { default: async },
        with: { "sandwit:plugin/types@0.1.0": super::plugin::sandwit::plugin::types },
    });
}

pub mod convert;

pub use plugin::sandwit::plugin::chat as chat_api;
pub use plugin::sandwit::plugin::config as config_api;
pub use plugin::sandwit::plugin::log as log_api;
pub use plugin::sandwit::plugin::store as store_api;
pub use plugin::sandwit::plugin::types as wit;
pub use plugin_v0_2::exports::sandwit::plugin0_2_0::lifecycle as lifecycle_api;

#[cfg(test)]
mod tests {
    /// `wit/plugin@0.2.0/deps/plugin-0.1.0` is 0.1 as released: the files
    /// of `wit/plugin@0.1.0`, unchanged.
    #[test]
    fn the_0_2_world_depends_on_0_1_as_released() {
        let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        for file in ["world.wit", "types.wit", "services.wit"] {
            let released = std::fs::read_to_string(wit.join("plugin@0.1.0").join(file)).unwrap();
            let copy =
                std::fs::read_to_string(wit.join("plugin@0.2.0/deps/plugin-0.1.0").join(file));
            assert_eq!(
                copy.unwrap(),
                released,
                "wit/plugin@0.1.0/{file} and its copy differ"
            );
        }
    }
}
