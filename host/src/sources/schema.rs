//! A tool source's schemas made standalone: every local `$ref`
//! (`#/components/schemas/Item`) replaced by what it names, within bounds a
//! hostile document cannot push past. A reference back into itself (a
//! recursive type) becomes `{}` (anything) at the point it recurs, as does a
//! chain of references deeper than [`MAX_REF_DEPTH`]: the server still
//! checks what it gets. OpenAPI 3.0's dialect is brought to JSON Schema's
//! (`nullable`, boolean `exclusiveMinimum`/`exclusiveMaximum`).

use serde_json::{Map, Value as Json};

/// References followed within one another at most.
pub(crate) const MAX_REF_DEPTH: usize = 32;

/// Nodes one document's schemas may expand to, all operations together:
/// past it the document is refused.
pub(crate) const MAX_EXPANDED_NODES: usize = 200_000;

/// Bytes of text (strings, and the values copied whole: `enum`, `const`,
/// `default`, `examples`) one document's schemas may expand to: a long
/// string that many references copy costs what it copies.
pub(crate) const MAX_EXPANDED_BYTES: usize = 32 << 20;

/// Schemas nested deeper than this, references followed, are cut to `{}`:
/// the expansion recurses, on a worker thread's stack.
pub(crate) const MAX_EXPANDED_DEPTH: usize = 256;

/// What a document's schemas have cost so far.
pub(crate) struct Budget {
    nodes: usize,
    bytes: usize,
}

impl Budget {
    pub(crate) fn new() -> Self {
        Budget { nodes: 0, bytes: 0 }
    }

    /// Charges one node and `bytes`; an error past either bound.
    fn charge(&mut self, bytes: usize) -> Result<(), SchemaProblem> {
        self.nodes += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.nodes > MAX_EXPANDED_NODES || self.bytes > MAX_EXPANDED_BYTES {
            return Err(SchemaProblem::TooLarge);
        }
        Ok(())
    }

    /// Charges a value copied whole: each of its nodes, and its strings'
    /// bytes.
    fn charge_copy(&mut self, value: &Json) -> Result<(), SchemaProblem> {
        match value {
            Json::String(text) => self.charge(text.len()),
            Json::Array(items) => {
                self.charge(8)?;
                items.iter().try_for_each(|item| self.charge_copy(item))
            }
            Json::Object(map) => {
                self.charge(8)?;
                map.iter().try_for_each(|(key, item)| {
                    self.charge(key.len())?;
                    self.charge_copy(item)
                })
            }
            _ => self.charge(8),
        }
    }
}

/// Why a schema could not be made standalone.
#[derive(Debug)]
pub(crate) enum SchemaProblem {
    /// The document's schemas expand past [`MAX_EXPANDED_NODES`].
    TooLarge,
    /// A reference to somewhere else than this document, or to nothing.
    Unresolved(String),
}

impl std::fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaProblem::TooLarge => write!(
                f,
                "its schemas expand to more than {MAX_EXPANDED_NODES} nodes or {MAX_EXPANDED_BYTES} \
                 bytes once their references are followed"
            ),
            SchemaProblem::Unresolved(r) => write!(f, "the reference `{r}` names nothing in it"),
        }
    }
}

/// The names an object schema's `required` lists.
pub(crate) fn required(schema: &Json) -> std::collections::BTreeSet<&str> {
    schema
        .get("required")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect()
}

/// `schema`, its references into `root` followed, in JSON Schema's dialect.
pub(crate) fn standalone(
    root: &Json,
    schema: &Json,
    budget: &mut Budget,
) -> Result<Json, SchemaProblem> {
    let mut stack = Vec::new();
    expand(root, schema, budget, &mut stack, 0)
}

/// What `reference` (`#/a/b`, JSON Pointer escapes) names in `root`.
pub(crate) fn resolve<'a>(root: &'a Json, reference: &str) -> Option<&'a Json> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

fn expand(
    root: &Json,
    schema: &Json,
    budget: &mut Budget,
    stack: &mut Vec<String>,
    depth: usize,
) -> Result<Json, SchemaProblem> {
    budget.charge(0)?;
    if depth > MAX_EXPANDED_DEPTH {
        return Ok(Json::Object(Map::new()));
    }
    let depth = depth + 1;
    match schema {
        Json::Object(map) => {
            if let Some(Json::String(reference)) = map.get("$ref") {
                if stack.iter().any(|r| r == reference) || stack.len() >= MAX_REF_DEPTH {
                    // Recursive, or too deep a chain: anything, here.
                    return Ok(Json::Object(Map::new()));
                }
                let target = resolve(root, reference)
                    .ok_or_else(|| SchemaProblem::Unresolved(cut(reference)))?;
                stack.push(reference.clone());
                let expanded = expand(root, target, budget, stack, depth);
                stack.pop();
                let mut expanded = expanded?;
                // 3.1 allows keywords beside `$ref`: those that annotate
                // (a description, a default) are kept where the target has
                // none.
                if let Json::Object(out) = &mut expanded {
                    for (key, value) in map {
                        if key != "$ref" && !out.contains_key(key) {
                            out.insert(key.clone(), expand(root, value, budget, stack, depth)?);
                        }
                    }
                }
                return Ok(expanded);
            }
            let mut out = Map::new();
            for (key, value) in map {
                match key.as_str() {
                    // Annotations of OpenAPI's, not JSON Schema's.
                    "example" | "xml" | "externalDocs" | "discriminator" | "nullable" => {}
                    // Property names and examples are data, not schemas.
                    "properties" | "patternProperties" | "$defs" | "definitions" => {
                        let Json::Object(members) = value else {
                            budget.charge_copy(value)?;
                            out.insert(key.clone(), value.clone());
                            continue;
                        };
                        let mut expanded = Map::new();
                        for (name, member) in members {
                            budget.charge(name.len())?;
                            expanded
                                .insert(name.clone(), expand(root, member, budget, stack, depth)?);
                        }
                        out.insert(key.clone(), Json::Object(expanded));
                    }
                    "enum" | "const" | "default" | "examples" | "required" => {
                        budget.charge_copy(value)?;
                        out.insert(key.clone(), value.clone());
                    }
                    _ => {
                        budget.charge(key.len())?;
                        out.insert(key.clone(), expand(root, value, budget, stack, depth)?);
                    }
                }
            }
            openapi_30_dialect(map, &mut out);
            Ok(Json::Object(out))
        }
        Json::Array(items) => Ok(Json::Array(
            items
                .iter()
                .map(|item| expand(root, item, budget, stack, depth))
                .collect::<Result<_, _>>()?,
        )),
        leaf => {
            budget.charge_copy(leaf)?;
            Ok(leaf.clone())
        }
    }
}

/// OpenAPI 3.0's `nullable: true` as a `null` type, and its boolean
/// exclusive bounds as JSON Schema's numbers.
fn openapi_30_dialect(original: &Map<String, Json>, out: &mut Map<String, Json>) {
    if original.get("nullable") == Some(&Json::Bool(true)) {
        match out.get_mut("type") {
            Some(Json::String(ty)) => {
                let ty = ty.clone();
                out.insert("type".into(), Json::Array(vec![ty.into(), "null".into()]));
            }
            Some(Json::Array(types)) if !types.contains(&Json::from("null")) => {
                types.push("null".into())
            }
            _ => {}
        }
    }
    for (flag, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Json::Bool(exclusive)) = original.get(flag) {
            // `shift_remove`: the other keywords keep their order.
            out.shift_remove(flag);
            if *exclusive && let Some(value) = out.shift_remove(bound) {
                out.insert(flag.into(), value);
            }
        }
    }
}

fn cut(text: &str) -> String {
    sandwit_contract::text::cut(text.to_string(), 120)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_are_followed_and_recursion_is_cut() {
        let root = json!({"components": {"schemas": {
            "Item": {"type": "object", "properties": {
                "name": {"type": "string"},
                "child": {"$ref": "#/components/schemas/Item"},
            }},
        }}});
        let schema = standalone(
            &root,
            &json!({"$ref": "#/components/schemas/Item"}),
            &mut Budget::new(),
        )
        .unwrap();
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {
                "name": {"type": "string"},
                "child": {},
            }})
        );
    }

    #[test]
    fn a_long_chain_is_cut_and_a_fan_out_is_refused() {
        let mut schemas = Map::new();
        for i in 0..10_000 {
            schemas.insert(
                format!("S{i}"),
                json!({"$ref": format!("#/components/schemas/S{}", i + 1)}),
            );
        }
        schemas.insert("S10000".into(), json!({"type": "integer"}));
        let root = json!({"components": {"schemas": schemas}});
        let schema = standalone(
            &root,
            &json!({"$ref": "#/components/schemas/S0"}),
            &mut Budget::new(),
        )
        .unwrap();
        assert_eq!(schema, json!({}), "cut at {MAX_REF_DEPTH} references");

        // Each level refers to the next twice: 2^30 nodes once expanded.
        let mut schemas = Map::new();
        for i in 0..30 {
            let next = format!("#/components/schemas/F{}", i + 1);
            schemas.insert(
                format!("F{i}"),
                json!({"type": "array", "prefixItems": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        schemas.insert("F30".into(), json!({"type": "integer"}));
        let root = json!({"components": {"schemas": schemas}});
        let err = standalone(
            &root,
            &json!({"$ref": "#/components/schemas/F0"}),
            &mut Budget::new(),
        )
        .unwrap_err();
        assert!(matches!(err, SchemaProblem::TooLarge));
    }

    #[test]
    fn openapi_30_is_brought_to_json_schema() {
        let schema = standalone(
            &json!({}),
            &json!({"type": "integer", "nullable": true, "minimum": 0, "exclusiveMinimum": true,
                    "example": 3}),
            &mut Budget::new(),
        )
        .unwrap();
        assert_eq!(
            schema,
            json!({"type": ["integer", "null"], "exclusiveMinimum": 0})
        );
        let err = standalone(
            &json!({}),
            &json!({"$ref": "other.json#/Item"}),
            &mut Budget::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("other.json#/Item"), "{err}");
    }

    #[test]
    fn long_text_copied_by_many_references_is_refused() {
        // 64 references to a schema holding 1 MB of text: 64 MB copied.
        let mut properties = Map::new();
        for i in 0..64 {
            properties.insert(format!("p{i}"), json!({"$ref": "#/components/schemas/B"}));
        }
        let root = json!({"components": {"schemas": {
            "B": {"type": "string", "description": "x".repeat(1 << 20)},
        }}});
        let err = standalone(
            &root,
            &json!({"type": "object", "properties": properties}),
            &mut Budget::new(),
        )
        .unwrap_err();
        assert!(matches!(err, SchemaProblem::TooLarge));
    }

    #[test]
    fn deep_nesting_is_cut() {
        let mut schema = json!({"type": "integer"});
        for _ in 0..1_000 {
            schema = json!({"type": "array", "items": schema});
        }
        // Built without serde_json's parser, so deeper than it allows.
        let expanded = standalone(&json!({}), &schema, &mut Budget::new()).unwrap();
        assert!(
            expanded.to_string().contains("{}"),
            "cut at {MAX_EXPANDED_DEPTH}"
        );
    }
}
