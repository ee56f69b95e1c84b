//! What each kind of method may return, and how it is encoded.

use crate::bindings::wit::sandwit::plugin::types as t;
use crate::bindings::wit::sandwit::plugin::types::{ContentPart, MethodResult};
use crate::convert::{IntoValue, Schema, to_wit};
use crate::error::Error;

/// Marker: a tool.
pub struct Tool;
/// Marker: an agent method.
pub struct Agent;
/// Marker: a behavior.
pub struct Behavior;
/// Marker: a multimodal agent method.
pub struct MultimodalAgent;

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

/// A return type allowed for methods of kind `K`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a return type for this kind of sandwit method",
    label = "not a return type for this kind of method",
    note = "`#[tool]` returns a value (`IntoValue + Schema`), `#[agent]` and `#[behavior]` a \
            `String`, `#[multimodal_agent]` a `Vec<ContentPart>`, each may be wrapped in \
            `Result<_, E>` with `E: Into<sandwit_sdk::Error>`"
)]
pub trait Output<K> {
    /// Encodes the function's return value.
    fn into_result(self) -> Result<MethodResult, Error>;
    /// The JSON Schema of the result, for tools.
    fn returns() -> Option<String> {
        None
    }
}

impl<T: IntoValue + Schema> Output<Tool> for T {
    fn into_result(self) -> Result<MethodResult, Error> {
        Ok(MethodResult::Tool(to_wit(self.into_value())))
    }
    fn returns() -> Option<String> {
        Some(T::schema())
    }
}

impl<T: IntoValue + Schema, E: Into<Error>> Output<Tool> for Result<T, E> {
    fn into_result(self) -> Result<MethodResult, Error> {
        self.map_err(Into::into)?.into_result()
    }
    fn returns() -> Option<String> {
        Some(T::schema())
    }
}

macro_rules! text_output {
    ($kind:ident) => {
        impl Output<$kind> for String {
            fn into_result(self) -> Result<MethodResult, Error> {
                Ok(MethodResult::$kind(self))
            }
        }

        impl<E: Into<Error>> Output<$kind> for Result<String, E> {
            fn into_result(self) -> Result<MethodResult, Error> {
                Ok(MethodResult::$kind(self.map_err(Into::into)?))
            }
        }
    };
}

text_output!(Agent);
text_output!(Behavior);

impl Output<MultimodalAgent> for Vec<ContentPart> {
    fn into_result(self) -> Result<MethodResult, Error> {
        Ok(MethodResult::MultimodalAgent(self))
    }
}

impl<E: Into<Error>> Output<MultimodalAgent> for Result<Vec<ContentPart>, E> {
    fn into_result(self) -> Result<MethodResult, Error> {
        Ok(MethodResult::MultimodalAgent(self.map_err(Into::into)?))
    }
}
