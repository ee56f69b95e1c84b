//! JSON Schemas that come from plugins (parameters, results, configuration):
//! bounded before they are compiled, compiled with a linear-time regular
//! expression engine, and the work of checking a value against one bounded
//! before the check starts.
//!
//! A schema is a document an attacker wrote, and a validator's work is not
//! bounded by the document's size: each `$ref` to a subschema that refers
//! twice to the next doubles it (40 levels in 2.6 KB run for hours). So a
//! schema's *expanded size*, the nodes it would have with every `$ref`
//! replaced by its target, is computed first (each target once) and capped;
//! a `$ref` cycle, which would make it unbounded, is refused. Checking a
//! value then visits each expanded node at most once per node of the value,
//! so `expanded size × value nodes` bounds the work of one check. The
//! keywords that break that are refused: `unevaluatedProperties` and
//! `unevaluatedItems` check their schema's subschemas again to learn what
//! they evaluated, so nesting them multiplies the work at each level (20
//! levels in 1.5 KB ran for minutes on a value of 2 nodes).

use std::collections::HashMap;

use jsonschema::{PatternOptions, Validator};
use serde_json::Value as Json;

/// The most nodes a schema may have once every `$ref` is expanded.
pub const MAX_EXPANDED_NODES: u64 = 20_000;
/// The deepest a schema may nest, within the document.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// The deepest a schema may nest once its `$ref`s are expanded. This also
/// bounds the walk's own recursion: a 60 KB chain of `$ref`s would
/// otherwise overflow the stack of the thread loading the plugin.
pub const MAX_EXPANDED_DEPTH: usize = 256;
/// The most work one check may take: expanded schema nodes times value
/// nodes. A check over it is refused before it starts.
pub const MAX_CHECK_WORK: u64 = 20_000_000;
/// The most bytes of compiled program one `pattern` may take.
const MAX_REGEX_BYTES: usize = 1 << 20;

/// A compiled schema and its expanded size.
pub struct Compiled {
    /// The compiled validator.
    pub validator: Validator,
    /// The schema's size with every `$ref` expanded, in nodes.
    pub expanded: u64,
}

/// Bounds, meta-checks and compiles a schema, or says what is wrong with it.
pub fn compile(schema: &Json) -> Result<Compiled, String> {
    let expanded = expanded_size(schema)?;
    if let Err(e) = jsonschema::meta::validate(schema) {
        return Err(format!(
            "is not a valid JSON Schema: {}",
            crate::text::cut(e.to_string(), 300)
        ));
    }
    let validator = validator(schema).map_err(|e| format!("cannot be used: {e}"))?;
    Ok(Compiled {
        validator,
        expanded,
    })
}

/// The validator of a schema already bounded: formats are annotations
/// (a `format: regex` would compile the value as a pattern), and `pattern`
/// uses the `regex` crate, whose matching is linear in the text.
fn validator(schema: &Json) -> Result<Validator, String> {
    jsonschema::options()
        .should_validate_formats(false)
        .with_pattern_options(PatternOptions::regex().size_limit(MAX_REGEX_BYTES))
        .build(schema)
        .map_err(|e| crate::text::cut(e.to_string(), 300))
}

/// Whether checking a value of `value_nodes` nodes against a schema of
/// `expanded` nodes stays within [`MAX_CHECK_WORK`]; if not, why.
pub(crate) fn check_work(expanded: u64, value_nodes: usize) -> Result<(), String> {
    let work = expanded.saturating_mul(value_nodes as u64);
    if work > MAX_CHECK_WORK {
        return Err(format!(
            "checking a value of {value_nodes} nodes against a schema of {expanded} nodes \
             would take {work} steps, more than the limit of {MAX_CHECK_WORK}"
        ));
    }
    Ok(())
}

/// The nodes `schema` has with every `$ref` expanded, if at most
/// [`MAX_EXPANDED_NODES`]. Only references within the document by JSON
/// pointer (`#`, `#/$defs/x`) are allowed: a schema reaches nothing outside
/// itself, and its cost can be known here.
pub(crate) fn expanded_size(schema: &Json) -> Result<u64, String> {
    let mut walk = Walk {
        root: schema,
        memo: HashMap::new(),
        expanding: Vec::new(),
    };
    walk.node(schema, 0, 0).map(|m| m.size)
}

struct Walk<'a> {
    root: &'a Json,
    /// What each `$ref` target expands to, by pointer.
    memo: HashMap<String, Measure>,
    /// The targets being expanded, to find cycles.
    expanding: Vec<String>,
}

/// A subschema expanded: its nodes, and how deep it nests below itself.
#[derive(Clone, Copy)]
struct Measure {
    size: u64,
    height: usize,
}

/// Refuses nesting past [`MAX_EXPANDED_DEPTH`] with `$ref`s expanded.
fn too_deep_expanded(expanded: usize) -> Result<(), String> {
    if expanded > MAX_EXPANDED_DEPTH {
        return Err(format!(
            "nests deeper than {MAX_EXPANDED_DEPTH} levels once its `$ref`s are expanded"
        ));
    }
    Ok(())
}

impl<'a> Walk<'a> {
    /// `node`, `depth` levels down in the document and `expanded` levels
    /// down with `$ref`s expanded.
    fn node(&mut self, node: &'a Json, depth: usize, expanded: usize) -> Result<Measure, String> {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(format!("nests deeper than {MAX_SCHEMA_DEPTH} levels"));
        }
        too_deep_expanded(expanded)?;
        let mut size: u64 = 1;
        let mut height = 0;
        let mut add = |child: Measure| {
            size = size.saturating_add(child.size);
            height = height.max(child.height + 1);
            over(size)
        };
        match node {
            Json::Object(fields) => {
                for (key, value) in fields {
                    add(match (key.as_str(), value) {
                        ("$ref", Json::String(target)) => self.reference(target, expanded + 1)?,
                        ("$dynamicRef" | "$recursiveRef", _) => {
                            return Err(format!("uses `{key}`, which sandwit does not support"));
                        }
                        ("unevaluatedProperties" | "unevaluatedItems", _) => {
                            return Err(format!(
                                "uses `{key}`, which sandwit does not support: checking it \
                                 checks its subschemas again, so its work is not bounded by \
                                 the schema's size"
                            ));
                        }
                        ("$id", _) if depth > 0 => {
                            return Err(
                                "has an `$id` below the top level, which sandwit does not support"
                                    .to_string(),
                            );
                        }
                        _ => self.node(value, depth + 1, expanded + 1)?,
                    })?;
                }
            }
            Json::Array(items) => {
                for item in items {
                    add(self.node(item, depth + 1, expanded + 1)?)?;
                }
            }
            _ => {}
        }
        Ok(Measure { size, height })
    }

    /// The target of a `$ref` found `expanded` levels down, expanded.
    fn reference(&mut self, target: &str, expanded: usize) -> Result<Measure, String> {
        let shown = crate::text::quote(target, 64);
        let Some(pointer) = target.strip_prefix('#') else {
            return Err(format!(
                "refers to {shown}: only references within the schema (`#/...`) are allowed"
            ));
        };
        if let Some(&measure) = self.memo.get(pointer) {
            // Walked before, perhaps higher up: it must fit here too.
            too_deep_expanded(expanded + measure.height)?;
            return Ok(measure);
        }
        if self.expanding.iter().any(|p| p == pointer) {
            return Err(format!(
                "refers to {shown} from inside it: recursive schemas are not supported"
            ));
        }
        let decoded = percent_decode(pointer)
            .ok_or_else(|| format!("refers to {shown}, which is not a JSON pointer"))?;
        let Some(node) = self.root.pointer(&decoded) else {
            return Err(format!("refers to {shown}, which is not in the schema"));
        };
        self.expanding.push(pointer.to_string());
        let measure = self.node(node, 1, expanded);
        self.expanding.pop();
        let measure = measure?;
        self.memo.insert(pointer.to_string(), measure);
        Ok(measure)
    }
}

fn over(size: u64) -> Result<(), String> {
    if size > MAX_EXPANDED_NODES {
        return Err(format!(
            "has more than {MAX_EXPANDED_NODES} nodes once its `$ref`s are expanded"
        ));
    }
    Ok(())
}

/// A URI fragment's percent-encoding undone (JSON pointers in `$ref` are
/// fragments); `None` if it is malformed or not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_string());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each level `allOf` two `$ref`s to the next: 2^levels nodes expanded.
    fn doubling(levels: usize, combinator: &str) -> Json {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            let next = format!("#/$defs/l{}", i + 1);
            defs.insert(
                format!("l{i}"),
                json!({combinator: [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert(format!("l{levels}"), json!({"type": "integer"}));
        json!({"$defs": defs, "$ref": "#/$defs/l0"})
    }

    #[test]
    fn a_doubling_chain_is_refused_before_it_is_compiled() {
        for combinator in ["allOf", "anyOf", "oneOf"] {
            let err = compile(&doubling(40, combinator)).err().unwrap();
            assert!(err.contains("more than 20000 nodes"), "{err}");
        }
        // A short chain is fine, and its size is what it expands to.
        let size = expanded_size(&doubling(3, "allOf")).unwrap();
        assert!((16..200).contains(&size), "{size}");
    }

    #[test]
    fn cycles_and_outside_references_are_refused() {
        for (schema, needle) in [
            (
                json!({"$defs": {"a": {"items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"}),
                "recursive",
            ),
            (json!({"$ref": "#"}), "recursive"),
            (
                json!({"$ref": "https://example.com/s.json"}),
                "only references within",
            ),
            (json!({"$ref": "#/$defs/missing"}), "not in the schema"),
            (json!({"$dynamicRef": "#x"}), "`$dynamicRef`"),
            (
                json!({"properties": {"a": {"$id": "https://x/y"}}}),
                "below the top level",
            ),
        ] {
            let err = expanded_size(&schema).unwrap_err();
            assert!(err.contains(needle), "{schema}: {err}");
        }
        // A chain of `$ref`s nests as deep as it is long (2,000 links, 60
        // KB: under the size limits, deep enough to overflow a 2 MiB stack
        // if the walk followed it).
        let chain = |links: usize, end: Json| {
            let mut defs = serde_json::Map::new();
            for i in 0..links {
                let next = format!("#/$defs/d{}", i + 1);
                defs.insert(format!("d{i}"), json!({"$ref": next}));
            }
            defs.insert(format!("d{links}"), end);
            defs
        };
        let long = json!({"$defs": chain(2_000, json!({"type": "integer"})), "$ref": "#/$defs/d0"});
        let err = expanded_size(&long).unwrap_err();
        assert!(err.contains("deeper than 256 levels once"), "{err}");
        // A definition walked first near the top must fit where it is used
        // again, deep down.
        let mut deep = json!({"type": "integer"});
        for _ in 0..60 {
            deep = json!({"items": deep});
        }
        let mut defs = chain(200, json!({"$ref": "#/$defs/deep"}));
        defs.insert("deep".into(), deep);
        let shared =
            json!({"$defs": defs, "anyOf": [{"$ref": "#/$defs/deep"}, {"$ref": "#/$defs/d0"}]});
        let err = expanded_size(&shared).unwrap_err();
        assert!(err.contains("deeper than 256 levels once"), "{err}");
        let mut deep = json!({"type": "integer"});
        for _ in 0..70 {
            deep = json!({"items": deep});
        }
        assert!(expanded_size(&deep).unwrap_err().contains("deeper"));
    }

    #[test]
    fn keywords_whose_work_is_not_bounded_are_refused() {
        // Each level checks the next one again for what it evaluated: the
        // work grows about 2.6 times a level (fuzz/regressions/schema/
        // unevaluated*).
        for keyword in ["unevaluatedProperties", "unevaluatedItems"] {
            let mut schema = json!({"properties": {"a": true}, "prefixItems": [true]});
            for _ in 0..20 {
                schema = json!({"anyOf": [schema, true], keyword: false});
            }
            let err = compile(&schema).err().unwrap();
            assert!(err.contains(&format!("uses `{keyword}`")), "{err}");
        }
    }

    #[test]
    fn shared_definitions_count_where_they_are_used() {
        let schema = json!({
            "$defs": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
            "type": "array",
            "items": {"anyOf": [{"$ref": "#/$defs/p"}, {"$ref": "#/$defs/p"}]},
        });
        let compiled = compile(&schema).unwrap();
        assert!(compiled.validator.is_valid(&json!([{"x": 1}])));
        assert!(!compiled.validator.is_valid(&json!([{"x": "no"}])));
        assert!(check_work(compiled.expanded, 10).is_ok());
        assert!(
            check_work(compiled.expanded, 1_000_000)
                .unwrap_err()
                .contains("more than the limit")
        );
    }

    #[test]
    fn patterns_match_in_linear_time() {
        // Catastrophic for a backtracking engine on a non-matching text:
        // 2^100000 steps there, so this returning at all is the check.
        let compiled = compile(&json!({"type": "string", "pattern": "^(a+)+$"})).unwrap();
        let text = format!("{}!", "a".repeat(100_000));
        assert!(!compiled.validator.is_valid(&json!(text)));
        // Look-around needs backtracking: refused when compiled.
        let err = compile(&json!({"type": "string", "pattern": "(?=a)a"}))
            .err()
            .unwrap();
        assert!(err.contains("cannot be used"), "{err}");
    }
}
