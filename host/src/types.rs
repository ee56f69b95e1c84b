//! The host's public data types, and their conversions from the generated
//! WIT bindings (which stay private).

use serde::{Deserialize, Serialize};

use crate::bindings::wit;
pub use sandwit_value::Value;

/// The future an embedder's service returns ([`ChatSink`](crate::ChatSink),
/// [`StoreBackend`](crate::StoreBackend)): boxed, so the traits can be used
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

impl From<wit::MethodKind> for MethodKind {
    fn from(kind: wit::MethodKind) -> Self {
        match kind {
            wit::MethodKind::Tool => MethodKind::Tool,
            wit::MethodKind::Agent => MethodKind::Agent,
            wit::MethodKind::Behavior => MethodKind::Behavior,
            wit::MethodKind::MultimodalAgent => MethodKind::MultimodalAgent,
        }
    }
}

impl From<MethodKind> for wit::MethodKind {
    fn from(kind: MethodKind) -> Self {
        match kind {
            MethodKind::Tool => wit::MethodKind::Tool,
            MethodKind::Agent => wit::MethodKind::Agent,
            MethodKind::Behavior => wit::MethodKind::Behavior,
            MethodKind::MultimodalAgent => wit::MethodKind::MultimodalAgent,
        }
    }
}

impl From<&AgentCtx> for wit::AgentCtx {
    fn from(ctx: &AgentCtx) -> Self {
        wit::AgentCtx {
            chat_key: ctx.chat_key.clone(),
            user_id: ctx.user_id.clone(),
            channel_id: ctx.channel_id.clone(),
            channel_name: ctx.channel_name.clone(),
            channel_type: ctx.channel_type.clone(),
            adapter_key: ctx.adapter_key.clone(),
        }
    }
}

impl From<ContentPart> for wit::ContentPart {
    fn from(part: ContentPart) -> Self {
        match part {
            ContentPart::Text(t) => wit::ContentPart::Text(t),
            ContentPart::Image(m) => wit::ContentPart::Image(wit::Media {
                mime_type: m.mime_type,
                data: m.data,
            }),
            ContentPart::ImageUrl(u) => wit::ContentPart::ImageUrl(u),
        }
    }
}

impl From<wit::ContentPart> for ContentPart {
    fn from(part: wit::ContentPart) -> Self {
        match part {
            wit::ContentPart::Text(t) => ContentPart::Text(t),
            wit::ContentPart::Image(m) => ContentPart::Image(Media {
                mime_type: m.mime_type,
                data: m.data,
            }),
            wit::ContentPart::ImageUrl(u) => ContentPart::ImageUrl(u),
        }
    }
}

/// Converts a flattened value into its WIT form.
pub(crate) fn nodes_to_wit(nodes: Vec<sandwit_value::Node>) -> wit::Value {
    use sandwit_value::Node;
    let nodes = nodes
        .into_iter()
        .map(|node| match node {
            Node::Null => wit::Node::Null,
            Node::Boolean(b) => wit::Node::Boolean(b),
            Node::Integer(i) => wit::Node::Integer(i),
            Node::Float(x) => wit::Node::Float(x),
            Node::Text(s) => wit::Node::Text(s),
            Node::Bytes(b) => wit::Node::Bytes(b),
            Node::Array(items) => wit::Node::Array(items),
            Node::Object(entries) => wit::Node::Object(entries),
        })
        .collect();
    wit::Value { nodes }
}

/// Decodes a value in WIT form that came from a guest, within `limits`.
pub(crate) fn value_from_wit(
    value: wit::Value,
    limits: &sandwit_value::DecodeLimits,
) -> Result<Value, sandwit_value::DecodeError> {
    use sandwit_value::Node;
    let nodes = value
        .nodes
        .into_iter()
        .map(|node| match node {
            wit::Node::Null => Node::Null,
            wit::Node::Boolean(b) => Node::Boolean(b),
            wit::Node::Integer(i) => Node::Integer(i),
            wit::Node::Float(x) => Node::Float(x),
            wit::Node::Text(s) => Node::Text(s),
            wit::Node::Bytes(b) => Node::Bytes(b),
            wit::Node::Array(items) => Node::Array(items),
            wit::Node::Object(entries) => Node::Object(entries),
        })
        .collect();
    Value::from_nodes(nodes, limits)
}
