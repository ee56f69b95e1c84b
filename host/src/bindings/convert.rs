//! Conversions between the contract's types and the generated WIT types.

use sandwit_contract::manifest::{MethodSpec, RawManifest, RawMethod, RawParam};
use sandwit_contract::types::{AgentCtx, ContentPart, Media, MethodKind, Value};

use super::wit;

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

impl From<&MethodSpec> for wit::MethodSpec {
    /// The spec as the WIT spells it (the interpreter's `prepare` and `exec`
    /// take it so).
    fn from(spec: &MethodSpec) -> Self {
        let raw = RawMethod::from(spec);
        wit::MethodSpec {
            name: raw.name,
            kind: raw.kind.into(),
            description: raw.description,
            docstring: raw.docstring,
            params: raw
                .params
                .into_iter()
                .map(|p| wit::Param {
                    name: p.name,
                    schema: p.schema,
                    required: p.required,
                })
                .collect(),
            returns: raw.returns,
        }
    }
}

impl From<wit::PluginManifest> for RawManifest {
    /// A manifest as a plugin's `describe` returned it, to be checked.
    fn from(m: wit::PluginManifest) -> Self {
        RawManifest {
            id: m.id,
            name: m.name,
            version: m.version,
            author: m.author,
            description: m.description,
            methods: m
                .methods
                .into_iter()
                .map(|m| RawMethod {
                    name: m.name,
                    kind: m.kind.into(),
                    description: m.description,
                    docstring: m.docstring,
                    params: m
                        .params
                        .into_iter()
                        .map(|p| RawParam {
                            name: p.name,
                            schema: p.schema,
                            required: p.required,
                        })
                        .collect(),
                    returns: m.returns,
                })
                .collect(),
            config_schema: m.config_schema,
            capabilities: m.capabilities,
        }
    }
}
