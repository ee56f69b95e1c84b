//! The generated bindings, in one place: every other module reaches the WIT
//! through here, and this module names none of them.

/// The bindings of the `sandwit:plugin/sandbox-method` world. Generated, so
/// undocumented: the SDK re-exports what plugins see with its own docs.
#[allow(missing_docs)]
pub mod wit {
    wit_bindgen::generate!({
        path: "../../wit/plugin@0.1.0",
        world: "sandbox-method",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "::sandwit_sdk::__private::wit",
    });
}

/// The bindings of the 0.2 lifecycle export alone (its types are the 0.1
/// bindings'). Only a plugin that exports through them links them, so a
/// plugin without hooks stays a 0.1 component.
#[allow(missing_docs)]
pub mod wit_v0_2 {
    wit_bindgen::generate!({
        path: "../../wit/plugin@0.2.0",
        world: "sandwit:plugin/lifecycle-hooks@0.2.0",
        pub_export_macro: true,
        export_macro_name: "export_lifecycle",
        default_bindings_module: "::sandwit_sdk::__private::wit_v0_2",
        with: {
            "sandwit:plugin/types@0.1.0": super::wit::sandwit::plugin::types,
        },
    });
}
