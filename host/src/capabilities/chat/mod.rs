//! Messages plugins send to the current chat, and the [`ChatSink`] through
//! which the embedding application delivers them.

pub(crate) mod interface;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use sandwit_contract::types::{AgentCtx, Media, ServiceFuture};

/// The most messages one call may send.
pub const MAX_MESSAGES_PER_CALL: usize = 32;
/// The longest text or system message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 << 10;
/// The largest image, in bytes.
pub const MAX_IMAGE_BYTES: usize = 8 << 20;

/// One message a plugin sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    /// A text message.
    Text(String),
    /// An image.
    Image(Media),
    /// A system message for the conversation.
    System {
        /// The message.
        message: String,
        /// Whether the agent should answer it in a new round.
        trigger_agent: bool,
    },
}

impl ChatMessage {
    /// The bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            ChatMessage::Text(text) | ChatMessage::System { message: text, .. } => text.len(),
            ChatMessage::Image(media) => media.mime_type.len() + media.data.len(),
        }
    }
}

/// On one line: `text: ...`, `image: image/png, 120 bytes`, `system
/// message (triggers the agent): ...`.
impl std::fmt::Display for ChatMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatMessage::Text(text) => write!(f, "text: {text}"),
            ChatMessage::Image(m) => write!(f, "image: {}, {} bytes", m.mime_type, m.data.len()),
            ChatMessage::System {
                message,
                trigger_agent: true,
            } => write!(f, "system message (triggers the agent): {message}"),
            ChatMessage::System { message, .. } => write!(f, "system message: {message}"),
        }
    }
}

/// Serialised for events and the CLI: an image as its MIME type and size.
impl Serialize for ChatMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ChatMessage::Text(text) => {
                let mut m = s.serialize_struct("ChatMessage", 2)?;
                m.serialize_field("kind", "text")?;
                m.serialize_field("text", text)?;
                m.end()
            }
            ChatMessage::Image(media) => {
                let mut m = s.serialize_struct("ChatMessage", 3)?;
                m.serialize_field("kind", "image")?;
                m.serialize_field("mime_type", &media.mime_type)?;
                m.serialize_field("bytes", &media.data.len())?;
                m.end()
            }
            ChatMessage::System {
                message,
                trigger_agent,
            } => {
                let mut m = s.serialize_struct("ChatMessage", 3)?;
                m.serialize_field("kind", "system")?;
                m.serialize_field("text", message)?;
                m.serialize_field("trigger_agent", trigger_agent)?;
                m.end()
            }
        }
    }
}

/// Where an application receives chat messages. Every message is also
/// recorded as an event of the call (and of the Python run that made it), so
/// without a sink the application finds them there.
///
/// `deliver` is awaited inside the plugin call, under the call's deadline:
/// it may send the message on (an HTTP request, a queue) without blocking a
/// runtime thread, and a call whose time runs out meanwhile ends with the
/// time limit. An `Err` is returned to the plugin as `unavailable`.
///
/// ```
/// use sandwit::{AgentCtx, ChatMessage, ChatSink, ServiceFuture};
///
/// struct Queue(tokio::sync::mpsc::Sender<(String, ChatMessage)>);
///
/// impl ChatSink for Queue {
///     fn deliver<'a>(
///         &'a self,
///         _plugin: &'a str,
///         ctx: &'a AgentCtx,
///         message: &'a ChatMessage,
///     ) -> ServiceFuture<'a, Result<(), String>> {
///         Box::pin(async move {
///             let sent = self.0.send((ctx.chat_key.clone(), message.clone()));
///             sent.await.map_err(|_| "the chat is closed".to_string())
///         })
///     }
/// }
/// ```
pub trait ChatSink: Send + Sync {
    /// Delivers `message` from `plugin` to the chat of `ctx`.
    fn deliver<'a>(
        &'a self,
        plugin: &'a str,
        ctx: &'a AgentCtx,
        message: &'a ChatMessage,
    ) -> ServiceFuture<'a, Result<(), String>>;
}
