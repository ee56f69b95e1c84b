//! Messages to the current chat. Needs the `chat` capability. The host
//! records each one as an event of the run and hands it to the application.

use crate::Error;
use crate::bindings::wit::sandwit::plugin::chat as api;
use crate::bindings::wit::sandwit::plugin::types::Media;
use crate::services::to_error;

/// Sends a text message.
pub fn send_text(text: &str) -> Result<(), Error> {
    api::send_text(text).map_err(|e| to_error("chat", e))
}

/// Sends an image given by its MIME type (e.g. `image/png`) and bytes.
pub fn send_image(mime_type: &str, data: Vec<u8>) -> Result<(), Error> {
    let media = Media {
        mime_type: mime_type.to_string(),
        data,
    };
    api::send_image(&media).map_err(|e| to_error("chat", e))
}

/// Adds a system message to the conversation; with `trigger_agent` the agent
/// answers it in a new round.
pub fn push_system(message: &str, trigger_agent: bool) -> Result<(), Error> {
    api::push_system(message, trigger_agent).map_err(|e| to_error("chat", e))
}
