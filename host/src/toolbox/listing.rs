//! The methods of a toolbox as an LLM's tool definitions, OpenAI's
//! function calling and MCP's (the listing of Python signatures is
//! `Toolbox::prompt`).

use serde_json::{Map, Value as Json, json};

use crate::toolbox::Toolbox;
use crate::toolbox::guest_text::visible;
use sandwit_contract::manifest::MethodSpec;

impl Toolbox {
    /// OpenAI function-calling definitions of the methods:
    /// `{"type": "function", "function": {"name", "description",
    /// "parameters"}}` with the docstring (its `Args:` section moved into
    /// the parameters' descriptions) and the parameters' JSON Schemas, each
    /// standing alone (local `$ref`s inlined).
    pub fn openai_tools(&self) -> Json {
        Json::Array(
            self.methods()
                .map(|(_, method)| {
                    let (description, parameters) = tool_schema(method);
                    json!({
                        "type": "function",
                        "function": {
                            "name": method.name,
                            "description": description,
                            "parameters": parameters,
                        },
                    })
                })
                .collect(),
        )
    }

    /// MCP tool definitions of the methods (`tools/list`'s `tools`):
    /// `{"name", "description", "inputSchema"}`, described and typed as in
    /// [`Toolbox::openai_tools`].
    pub fn mcp_tools(&self) -> Json {
        Json::Array(
            self.methods()
                .map(|(_, method)| {
                    let (description, schema) = tool_schema(method);
                    json!({
                        "name": method.name,
                        "description": description,
                        "inputSchema": schema,
                    })
                })
                .collect(),
        )
    }
}

/// A method's description (its docstring without the `Args:` section) and
/// the JSON Schema of its arguments object.
fn tool_schema(method: &MethodSpec) -> (String, Json) {
    let (description, arg_docs) = split_args(&visible(&method.docstring));
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in &method.params {
        let mut schema = inline_refs(&param.schema, &param.schema, 0);
        if let Json::Object(map) = &mut schema {
            // `shift_remove`: the schema's keys keep their order.
            map.shift_remove("$defs");
            map.shift_remove("definitions");
            map.shift_remove("$schema");
            map.shift_remove("$id");
            if !map.contains_key("description")
                && let Some((_, doc)) = arg_docs.iter().find(|(n, _)| *n == param.name)
            {
                map.insert("description".into(), Json::String(doc.clone()));
            }
        }
        properties.insert(param.name.clone(), schema);
        if param.required {
            required.push(Json::String(param.name.clone()));
        }
    }
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    (description, schema)
}

/// How deep `$ref`s are followed when inlined: the host checked that the
/// schemas have no cycles and are at most 256 levels deep once expanded.
const MAX_REF_DEPTH: usize = 256;

/// `schema` with every local `$ref` (`#/...`, relative to `root`) replaced
/// by what it points to, so the schema stands alone inside another.
fn inline_refs(schema: &Json, root: &Json, depth: usize) -> Json {
    match schema {
        Json::Object(map) => {
            if depth < MAX_REF_DEPTH
                && let Some(Json::String(reference)) = map.get("$ref")
                && let Some(pointer) = reference.strip_prefix('#')
                && let Some(target) = root.pointer(pointer)
            {
                let mut inlined = inline_refs(target, root, depth + 1);
                // Keywords beside the `$ref` apply too.
                if let Json::Object(out) = &mut inlined {
                    for (k, v) in map {
                        if k != "$ref" {
                            out.insert(k.clone(), inline_refs(v, root, depth + 1));
                        }
                    }
                }
                return inlined;
            }
            Json::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), inline_refs(v, root, depth + 1)))
                    .collect(),
            )
        }
        Json::Array(items) => Json::Array(
            items
                .iter()
                .map(|v| inline_refs(v, root, depth + 1))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A Google-style docstring without its `Args:` section, and that
/// section's entries (`name: text` or `name (type): text`, continued on more
/// indented lines).
fn split_args(docstring: &str) -> (String, Vec<(String, String)>) {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut kept = Vec::new();
    let mut args: Vec<(String, String)> = Vec::new();
    // In the section: the header's indent, and its entries' once seen.
    let mut section: Option<(usize, Option<usize>)> = None;
    for line in docstring.lines() {
        let trimmed = line.trim();
        if let Some((header, entries)) = &mut section {
            if trimmed.is_empty() {
                continue;
            }
            let at = indent(line);
            if at > *header {
                let entry_indent = *entries.get_or_insert(at);
                let entry = trimmed.split_once(':').and_then(|(name, text)| {
                    let name = name.split_whitespace().next()?;
                    is_identifier(name).then(|| (name.to_string(), text.trim().to_string()))
                });
                match (entry, args.last_mut()) {
                    (Some(entry), _) if at == entry_indent => args.push(entry),
                    (_, Some((_, text))) => {
                        if !text.is_empty() {
                            text.push(' ');
                        }
                        text.push_str(trimmed);
                    }
                    (_, None) => {}
                }
                continue;
            }
            section = None;
        }
        if matches!(trimmed, "Args:" | "Arguments:" | "Parameters:") {
            section = Some((indent(line), None));
            continue;
        }
        kept.push(line);
    }
    // Blank lines left doubled where the section was.
    let mut description = String::new();
    let mut blank = false;
    for line in kept {
        if line.trim().is_empty() {
            blank = !description.is_empty();
            continue;
        }
        if blank {
            description.push_str("\n\n");
        } else if !description.is_empty() {
            description.push('\n');
        }
        blank = false;
        description.push_str(line);
    }
    (description, args)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}
