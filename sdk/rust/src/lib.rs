//! Write sandwit plugins as plain, documented Rust functions.
//!
//! A plugin is a WebAssembly component of the WIT world
//! `sandwit:plugin/sandbox-method`. With this crate you never touch that WIT,
//! wit-bindgen or the value encoding: mark functions with their kind, list them
//! in [`plugin!`], and build with `cargo build --target wasm32-wasip2`.
//!
//! ```no_run
//! use sandwit_sdk::{AgentCtx, Error, tool};
//!
//! /// Add two integers.
//! ///
//! /// Args:
//! ///     num1: The first number.
//! ///     num2: The second number.
//! ///
//! /// Returns:
//! ///     The sum of both.
//! #[tool]
//! fn calculate_sum(num1: i64, num2: i64) -> Result<i64, Error> {
//!     num1.checked_add(num2).ok_or_else(|| Error::failed("the sum overflows 64 bits"))
//! }
//!
//! /// Greet the user of the chat.
//! #[tool]
//! fn greet(ctx: &AgentCtx) -> String {
//!     format!("hello, {}", ctx.user_id.as_deref().unwrap_or("stranger"))
//! }
//!
//! sandwit_sdk::plugin! {
//!     id: "calc",
//!     name: "Calculator",
//!     version: "0.1.0",
//!     author: "Example Author",
//!     description: "Adds numbers.",
//!     methods: [calculate_sum, greet],
//! }
//! ```
//!
//! - The doc comment is the docstring the AI reads; its first paragraph is the
//!   one-line description.
//! - Parameter schemas come from the parameter types ([`Schema`]); arguments
//!   are decoded into them ([`FromValue`]); an `Option<T>` parameter is
//!   optional.
//! - An optional first parameter `ctx: &AgentCtx` receives the agent context.
//! - Host services are capabilities the plugin lists in `capabilities: [..]`
//!   and the operator grants: [`store`] (`"store"`), [`config`] (`"config"`),
//!   [`chat`] (`"chat"`) and [`http`] (`"http:api.example.com"`). Without the
//!   grant a call answers [`Error`] `denied`, naming the capability.
//! - The return type depends on the kind: `#[tool]` returns any [`IntoValue`],
//!   `#[agent]` and `#[behavior]` a `String`, `#[multimodal_agent]` a
//!   `Vec<ContentPart>`; each may be wrapped in `Result<_, E>` with
//!   `E: Into<Error>`.
#![deny(missing_docs)]

mod bindings;
pub mod chat;
pub mod config;
mod convert;
mod error;
mod export;
pub mod http;
pub mod log;
mod method;
mod output;
mod services;
pub mod store;

pub use convert::{Bytes, FromValue, IntoValue, Schema};
pub use error::Error;
pub use sandwit_sdk_macros::{agent, behavior, multimodal_agent, tool};
pub use sandwit_value::Value;

/// Who and where the AI code runs for.
pub use crate::bindings::wit::sandwit::plugin::types::AgentCtx;
/// One part of a multimodal message: text, image bytes with a MIME type, or an
/// image URL.
pub use crate::bindings::wit::sandwit::plugin::types::ContentPart;
/// Binary content with its MIME type.
pub use crate::bindings::wit::sandwit::plugin::types::Media;

/// Declares the plugin: its manifest fields and its methods, and exports it as
/// the component's `sandwit:plugin/plugin` interface. Use it once per plugin.
///
/// Fields, in this order: `id`, `name`, `version`, `author`, `description`,
/// then optionally `capabilities: [..]` and `config_schema: ".."` (JSON
/// Schema text), then `methods: [..]` naming functions marked `#[tool]`,
/// `#[agent]`, `#[behavior]` or `#[multimodal_agent]`.
///
/// A last, optional `lifecycle: { .. }` makes it a 0.2 plugin
/// (`sandwit:plugin@0.2.0`), exporting `sandwit:plugin/lifecycle` with the
/// hooks it names, either of which may be left out:
///
/// - `prompt_inject: f` with `fn f(&AgentCtx) -> Option<String>`: text the
///   host adds to the method listing an LLM is given for the chat;
/// - `available_methods: f` with `fn f(&AgentCtx) -> Vec<String>`: the
///   methods (by name) the chat sees; by default, all.
///
/// Without it the plugin is a 0.1 plugin: no prompt, every method.
#[macro_export]
macro_rules! plugin {
    (
        id: $id:expr,
        name: $name:expr,
        version: $version:expr,
        author: $author:expr,
        description: $description:expr,
        $(capabilities: [$($cap:expr),* $(,)?],)?
        $(config_schema: $config:expr,)?
        methods: [$($method:ident),+ $(,)?] $(,)?
    ) => {
        #[doc(hidden)]
        pub struct __SandwitPlugin;

        impl $crate::__private::wit::exports::sandwit::plugin::plugin::Guest for __SandwitPlugin {
            fn describe() -> $crate::__private::wit::sandwit::plugin::types::PluginManifest {
                $crate::__private::report_panics();
                $crate::__private::describe(
                    &$crate::__private::PluginInfo {
                        id: $id,
                        name: $name,
                        version: $version,
                        author: $author,
                        description: $description,
                        capabilities: &[$($($cap),*)?],
                        config_schema: ::std::option::Option::<&'static str>::None
                            $(.or(::std::option::Option::Some($config)))?,
                    },
                    ::std::vec![$(<$method as $crate::__private::Method>::spec()),+],
                )
            }

            fn invoke(
                ctx: $crate::AgentCtx,
                method: ::std::string::String,
                args: $crate::__private::wit::sandwit::plugin::types::Value,
            ) -> ::std::result::Result<
                $crate::__private::MethodResult,
                $crate::__private::wit::sandwit::plugin::types::CallError,
            > {
                $crate::__private::report_panics();
                $crate::__private::invoke(
                    &ctx,
                    &method,
                    args,
                    &[$((
                        <$method as $crate::__private::Method>::NAME,
                        <$method as $crate::__private::Method>::call as $crate::__private::CallFn,
                    )),+],
                )
            }
        }

        $crate::__private::wit::export!(__SandwitPlugin with_types_in $crate::__private::wit);
    };
    (
        id: $id:expr,
        name: $name:expr,
        version: $version:expr,
        author: $author:expr,
        description: $description:expr,
        $(capabilities: [$($cap:expr),* $(,)?],)?
        $(config_schema: $config:expr,)?
        methods: [$($method:ident),+ $(,)?],
        lifecycle: {
            $(prompt_inject: $inject:path,)?
            $(available_methods: $available:path,)?
        } $(,)?
    ) => {
        $crate::plugin! {
            id: $id,
            name: $name,
            version: $version,
            author: $author,
            description: $description,
            $(capabilities: [$($cap),*],)?
            $(config_schema: $config,)?
            methods: [$($method),+],
        }

        impl $crate::__private::wit_v0_2::exports::sandwit::plugin0_2_0::lifecycle::Guest
            for __SandwitPlugin
        {
            fn prompt_inject(ctx: $crate::AgentCtx) -> ::std::option::Option<::std::string::String> {
                #[allow(unused_variables)]
                let hook: fn(&$crate::AgentCtx) -> ::std::option::Option<::std::string::String> =
                    |_| ::std::option::Option::None;
                $(let hook: fn(&$crate::AgentCtx) -> ::std::option::Option<::std::string::String> = $inject;)?
                $crate::__private::report_panics();
                hook(&ctx)
            }

            fn available_methods(ctx: $crate::AgentCtx) -> ::std::vec::Vec<::std::string::String> {
                #[allow(unused_variables)]
                let hook: fn(&$crate::AgentCtx) -> ::std::vec::Vec<::std::string::String> = |_| {
                    ::std::vec![$(
                        ::std::string::String::from(<$method as $crate::__private::Method>::NAME)
                    ),+]
                };
                $(let hook: fn(&$crate::AgentCtx) -> ::std::vec::Vec<::std::string::String> = $available;)?
                $crate::__private::report_panics();
                hook(&ctx)
            }
        }

        $crate::__private::wit_v0_2::export_lifecycle!(
            __SandwitPlugin with_types_in $crate::__private::wit_v0_2
        );
    };
}

#[doc(hidden)]
pub mod __private {
    //! What the macros expand to; not a public API. Only re-exports: the
    //! code is in the modules they name.

    pub use crate::bindings::wit::sandwit::plugin::types::{MethodResult, MethodSpec};
    pub use crate::bindings::{wit, wit_v0_2};
    pub use crate::export::{PluginInfo, describe, invoke, report_panics};
    pub use crate::method::{Args, CallFn, Method, param, spec};
    pub use crate::output::{Agent, Behavior, Kind, MultimodalAgent, Output, Tool};
}
