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

pub mod chat;
pub mod config;
mod convert;
mod error;
pub mod http;
pub mod log;
mod output;
mod services;
pub mod store;

pub use convert::{Bytes, FromValue, IntoValue, Schema};
pub use error::Error;
pub use sandwit_sdk_macros::{agent, behavior, multimodal_agent, tool};
pub use sandwit_value::Value;

/// Who and where the AI code runs for.
pub use crate::__private::wit::sandwit::plugin::types::AgentCtx;
/// One part of a multimodal message: text, image bytes with a MIME type, or an
/// image URL.
pub use crate::__private::wit::sandwit::plugin::types::ContentPart;
/// Binary content with its MIME type.
pub use crate::__private::wit::sandwit::plugin::types::Media;

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
    //! What the macros expand to; not a public API.

    pub use crate::output::{Agent, Behavior, MultimodalAgent, Output, Tool};
    pub use wit::sandwit::plugin::types::{MethodResult, MethodSpec};

    use crate::convert::{nodes_from_wit, to_wit};
    use crate::{AgentCtx, Error, FromValue, Schema, Value};
    use wit::sandwit::plugin::types as t;

    /// The generated bindings.
    pub mod wit {
        wit_bindgen::generate!({
            path: "../wit",
            world: "sandbox-method",
            pub_export_macro: true,
            export_macro_name: "export",
            default_bindings_module: "::sandwit_sdk::__private::wit",
        });
    }

    /// The bindings of the 0.2 lifecycle export alone (its types are the
    /// 0.1 bindings'). Only a plugin that exports through them links them,
    /// so a plugin without hooks stays a 0.1 component.
    pub mod wit_v0_2 {
        wit_bindgen::generate!({
            path: "../wit/v0.2",
            world: "sandwit:plugin/lifecycle-hooks@0.2.0",
            pub_export_macro: true,
            export_macro_name: "export_lifecycle",
            default_bindings_module: "::sandwit_sdk::__private::wit_v0_2",
            with: {
                "sandwit:plugin/types@0.1.0": super::wit::sandwit::plugin::types,
            },
        });
    }

    /// A method as the attribute macros describe it.
    pub trait Method {
        /// The method's name.
        const NAME: &'static str;
        /// Its spec.
        fn spec() -> MethodSpec;
        /// Decodes the arguments, calls the function, encodes the result.
        fn call(ctx: &AgentCtx, args: Args) -> Result<MethodResult, Error>;
    }

    /// A method's entry point.
    pub type CallFn = fn(&AgentCtx, Args) -> Result<MethodResult, Error>;

    /// Has a panic logged at error level before it traps the plugin: its
    /// message and where (`panicked at src/lib.rs:12:5: index out of
    /// bounds`), which the host names as the call's failure instead of the
    /// trap. Set once, at the first export called.
    pub fn report_panics() {
        static SET: std::sync::Once = std::sync::Once::new();
        SET.call_once(|| {
            std::panic::set_hook(Box::new(|info| {
                let payload = info.payload();
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_string());
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                    .unwrap_or_default();
                crate::log::error(&format!("panicked{at}: {message}"));
            }));
        });
    }

    /// The manifest fields given to `plugin!`.
    pub struct PluginInfo {
        pub id: &'static str,
        pub name: &'static str,
        pub version: &'static str,
        pub author: &'static str,
        pub description: &'static str,
        pub capabilities: &'static [&'static str],
        pub config_schema: Option<&'static str>,
    }

    pub fn describe(info: &PluginInfo, methods: Vec<MethodSpec>) -> t::PluginManifest {
        t::PluginManifest {
            id: info.id.into(),
            name: info.name.into(),
            version: info.version.into(),
            author: info.author.into(),
            description: info.description.into(),
            methods,
            config_schema: info.config_schema.map(Into::into),
            capabilities: info.capabilities.iter().map(|c| c.to_string()).collect(),
        }
    }

    pub fn invoke(
        ctx: &AgentCtx,
        method: &str,
        args: t::Value,
        methods: &[(&str, CallFn)],
    ) -> Result<MethodResult, t::CallError> {
        let Some((_, call)) = methods.iter().find(|(name, _)| *name == method) else {
            return Err(t::CallError::UnknownMethod(method.to_string()));
        };
        let args = match Value::from_nodes(nodes_from_wit(args), &Default::default()) {
            Ok(Value::Object(entries)) => Args { entries },
            Ok(other) => {
                return Err(t::CallError::InvalidArguments(format!(
                    "arguments must be an object, not {}",
                    other.type_name()
                )));
            }
            Err(e) => return Err(t::CallError::InvalidArguments(e.to_string())),
        };
        call(ctx, args).map_err(Error::into_wit)
    }

    /// The arguments of one call, taken out one parameter at a time.
    pub struct Args {
        entries: Vec<(String, Value)>,
    }

    impl Args {
        /// Takes and decodes the argument `name`.
        pub fn take<T: FromValue>(&mut self, name: &str) -> Result<T, Error> {
            match self.entries.iter().position(|(k, _)| k == name) {
                Some(i) => {
                    let (_, value) = self.entries.swap_remove(i);
                    T::from_value(value)
                        .map_err(|e| Error::invalid_arguments(format!("argument `{name}`: {e}")))
                }
                None => T::when_missing().ok_or_else(|| {
                    Error::invalid_arguments(format!("missing required argument `{name}`"))
                }),
            }
        }

        /// Fails if an argument was given that no parameter took.
        pub fn finish(self) -> Result<(), Error> {
            match self.entries.first() {
                Some((name, _)) => Err(Error::invalid_arguments(format!(
                    "unexpected argument `{name}`"
                ))),
                None => Ok(()),
            }
        }
    }

    pub fn param<T: Schema + FromValue>(name: &str) -> t::Param {
        t::Param {
            name: name.into(),
            schema: T::schema(),
            required: T::when_missing().is_none(),
        }
    }

    pub fn spec<K: Kind, R: Output<K>>(
        name: &str,
        description: &str,
        docstring: &str,
        params: Vec<t::Param>,
    ) -> MethodSpec {
        MethodSpec {
            name: name.into(),
            kind: K::KIND,
            description: description.into(),
            docstring: docstring.into(),
            params,
            returns: R::returns(),
        }
    }

    /// A method kind's marker type.
    pub trait Kind {
        /// The WIT kind.
        const KIND: t::MethodKind;
    }

    impl Kind for Tool {
        const KIND: t::MethodKind = t::MethodKind::Tool;
    }
    impl Kind for Agent {
        const KIND: t::MethodKind = t::MethodKind::Agent;
    }
    impl Kind for Behavior {
        const KIND: t::MethodKind = t::MethodKind::Behavior;
    }
    impl Kind for MultimodalAgent {
        const KIND: t::MethodKind = t::MethodKind::MultimodalAgent;
    }

    /// Encodes a tool's value.
    pub fn tool_result(value: Value) -> MethodResult {
        MethodResult::Tool(to_wit(value))
    }
}
