//! The data a method call carries: the context, a method's kind, results
//! and their parts.

use serde::{Deserialize, Serialize};

pub use sandwit_value::Value;

/// The future an embedder's service returns (the host's `ChatSink` and
/// `StoreBackend`): boxed, so the traits can be used
/// as `dyn` objects.
pub type ServiceFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Who and where the AI code runs for; passed to every method.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCtx {
    /// The conversation's key.
    pub chat_key: String,
    /// The user, if known.
    pub user_id: Option<String>,
    /// The channel's id, if any.
    pub channel_id: Option<String>,
    /// The channel's name, if any.
    pub channel_name: Option<String>,
    /// The channel's type (e.g. `group`), if any.
    pub channel_type: Option<String>,
    /// The chat adapter's key, if any.
    pub adapter_key: Option<String>,
    /// The tenant the call is made for, if the embedder separates tenants
    /// (`sandwit serve` sets it from the caller's token). Data and state
    /// that every chat of a plugin shares (the store's global scope, a
    /// plugin- or method-wide rate limit, a circuit breaker) are kept
    /// apart per namespace, so one tenant cannot read, spend or trip
    /// another's. Plugins never see it: chat keys and user ids already
    /// carry the tenant's prefix where an embedder gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl AgentCtx {
    /// A context for the chat `chat_key`, with nothing else known.
    pub fn new(chat_key: impl Into<String>) -> Self {
        AgentCtx {
            chat_key: chat_key.into(),
            ..AgentCtx::default()
        }
    }
}

/// What the agent framework does with a method's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MethodKind {
    /// Any value, handed back to the calling code.
    Tool,
    /// A string for the AI; the script stops.
    Agent,
    /// A string handed back and recorded as a system message.
    Behavior,
    /// Content parts for the AI; the script stops.
    MultimodalAgent,
}

impl MethodKind {
    /// The kind's name as the WIT spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            MethodKind::Tool => "tool",
            MethodKind::Agent => "agent",
            MethodKind::Behavior => "behavior",
            MethodKind::MultimodalAgent => "multimodal-agent",
        }
    }
}

impl std::fmt::Display for MethodKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Binary content with its MIME type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// A MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// The content.
    pub data: Vec<u8>,
}

/// One part of a multimodal message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentPart {
    /// Text.
    Text(String),
    /// An image by its bytes.
    Image(Media),
    /// An image by its URL.
    ImageUrl(String),
}

/// A method's typed result.
#[derive(Debug, Clone, PartialEq)]
pub enum MethodResult {
    /// A tool's value.
    Tool(Value),
    /// An agent's message for the AI.
    Agent(String),
    /// A behavior's system message.
    Behavior(String),
    /// A multimodal agent's content.
    MultimodalAgent(Vec<ContentPart>),
}

impl MethodResult {
    /// The kind of method that returns this result.
    pub fn kind(&self) -> MethodKind {
        match self {
            MethodResult::Tool(_) => MethodKind::Tool,
            MethodResult::Agent(_) => MethodKind::Agent,
            MethodResult::Behavior(_) => MethodKind::Behavior,
            MethodResult::MultimodalAgent(_) => MethodKind::MultimodalAgent,
        }
    }
}
