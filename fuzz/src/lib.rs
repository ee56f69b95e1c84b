//! The fuzz targets' entry functions and input generators, outside the
//! shipped library: they reach sandwit through its public API and the
//! contract crate's.
//!
//! Each fuzz target of `fuzz/libfuzzer/` (run by `scripts/fuzz`) is one call to a
//! function here that takes the fuzzer's raw input, so the integration test
//! that replays the committed inputs of `fuzz/regressions/<target>/` runs
//! exactly what the fuzzer ran. [`TARGETS`] lists them by target name.
//!
//! Every entry function returns whatever the input is; it panics only when
//! sandwit breaks one of its promises: a panic in the code under test, or
//! an invariant checked here (a decoded value that does not round-trip, a
//! manifest refused with more problems than it may list, ...). Refusing an
//! input is fine; that is what most inputs get.
//!
//! The structured targets (`value_nodes`, `value_marshal`, and `manifest`'s
//! and `schema`'s binary modes) read their input with
//! [`arbitrary::Unstructured`], biased towards inputs that get past the first
//! checks: indices that mostly point forward, valid kinds, JSON Schemas
//! generated as JSON (with `$defs` referring to each other), names that are
//! mostly identifiers. `manifest` and `schema` also take text (JSON, for
//! inputs a person writes), and `policy` and `component` take their input as
//! it is.

use std::time::Duration;

use arbitrary::{Result as Arb, Unstructured};
use serde_json::{Map, Value as Json, json};

use sandwit::{CallLimits, Host, LoadError, Policy};
use sandwit_contract::args::{ArgChecker, Refused};
use sandwit_contract::manifest::{self, Manifest, RawManifest, RawMethod, RawParam};
use sandwit_contract::types::{MethodKind, Value};
use sandwit_value::{DecodeError, DecodeLimits, Node, code};

/// The stack tokio gives its worker threads, where a plugin's load (and so
/// its manifest's and schemas' checks) runs: the `manifest`, `schema` and
/// `component` targets run on a thread with this much, not on libFuzzer's
/// bigger main thread, so a recursion that would overflow it is found.
pub const WORKER_STACK: usize = 2 << 20;

/// Runs `f` on a thread with a [`WORKER_STACK`], passing on its panic.
fn on_worker_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .stack_size(WORKER_STACK)
            .spawn_scoped(scope, f)
            .expect("a thread starts");
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// A fuzz target's entry function: it takes the fuzzer's input.
pub type Target = fn(&[u8]);

/// The fuzz targets by name (the directory names under `fuzz/regressions/`
/// and the binaries of `fuzz/libfuzzer/fuzz_targets/`), with their entry functions.
pub const TARGETS: &[(&str, Target)] = &[
    ("value_nodes", value_nodes),
    ("value_marshal", value_marshal),
    ("manifest", manifest),
    ("schema", schema),
    ("policy", policy),
    ("component", component),
];

// ---------------------------------------------------------------------------
// Values, as nodes and in marshal format.

/// Target `value_nodes`: nodes read from `data` (children mostly after their
/// parent, so some form trees), decoded with [`decode_nodes`] under limits
/// read from `data` too.
///
/// Text mode, if `data` starts with `{`: JSON, `{"limits": {...}, "nodes":
/// [...]}` (see [`nodes_from_json`]), for inputs a person writes.
pub fn value_nodes(data: &[u8]) {
    if data.first() == Some(&b'{') {
        if let Ok(json) = serde_json::from_slice::<Json>(data) {
            let _ = decode_nodes(nodes_from_json(&json["nodes"]), &limits_from_json(&json));
        }
        return;
    }
    let mut u = Unstructured::new(data);
    let Ok((limits, nodes)) =
        arbitrary_limits(&mut u).and_then(|l| Ok((l, arbitrary_nodes(&mut u)?)))
    else {
        return;
    };
    let _ = decode_nodes(nodes, &limits);
}

/// Target `value_marshal`: a value's marshal form (the Python sandbox's
/// arguments) read from `data` (mostly valid codes, small counts and
/// lengths), decoded with [`decode_marshal`].
///
/// Text mode, if `data` is a JSON object with a `marshal` string: `{"limits":
/// {...}, "marshal": "<hex>"}`, for inputs a person writes.
pub fn value_marshal(data: &[u8]) {
    if data.first() == Some(&b'{')
        && let Ok(json) = serde_json::from_slice::<Json>(data)
        && let Some(hex) = json["marshal"].as_str()
    {
        let _ = decode_marshal(&bytes_from_hex(hex), &limits_from_json(&json));
        return;
    }
    let mut u = Unstructured::new(data);
    let Ok((limits, bytes)) =
        arbitrary_limits(&mut u).and_then(|l| Ok((l, arbitrary_marshal(&mut u)?)))
    else {
        return;
    };
    let _ = decode_marshal(&bytes, &limits);
}

/// The bytes of a hex string (pairs of hex digits; anything else ends it).
fn bytes_from_hex(hex: &str) -> Vec<u8> {
    hex.as_bytes()
        .chunks_exact(2)
        .map_while(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// The decode limits of a text-mode input: its `limits` object's
/// `max_nodes`, `max_depth` and `max_bytes`, each defaulting to
/// [`DecodeLimits::default`]'s.
fn limits_from_json(json: &Json) -> DecodeLimits {
    let d = DecodeLimits::default();
    let get = |key: &str, default: usize| {
        json["limits"][key]
            .as_u64()
            .map_or(default, |n| n.try_into().unwrap_or(usize::MAX))
    };
    DecodeLimits {
        max_nodes: get("max_nodes", d.max_nodes),
        max_depth: get("max_depth", d.max_depth),
        max_bytes: get("max_bytes", d.max_bytes),
    }
}

/// Nodes written as JSON: `null`, `true`, `false`, an integer, a float, a
/// string, `{"bytes": [1, 2]}`, `{"array": [1, 2]}` (child indices) or
/// `{"object": [["key", 1]]}`; anything else is `null`.
pub fn nodes_from_json(json: &Json) -> Vec<Node> {
    let index = |v: &Json| v.as_u64().map_or(u32::MAX, |i| i as u32);
    let list = |v: &Json| v.as_array().cloned().unwrap_or_default();
    list(json)
        .iter()
        .map(|node| match node {
            Json::Bool(b) => Node::Boolean(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Node::Integer(i),
                None => Node::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => Node::Text(s.clone()),
            Json::Object(o) if o.contains_key("bytes") => Node::Bytes(
                list(&o["bytes"])
                    .iter()
                    .map(|b| b.as_u64().unwrap_or(0) as u8)
                    .collect(),
            ),
            Json::Object(o) if o.contains_key("array") => {
                Node::Array(list(&o["array"]).iter().map(index).collect())
            }
            Json::Object(o) if o.contains_key("object") => Node::Object(
                list(&o["object"])
                    .iter()
                    .map(|e| (e[0].as_str().unwrap_or_default().to_string(), index(&e[1])))
                    .collect(),
            ),
            _ => Node::Null,
        })
        .collect()
}

/// Decodes `nodes` as a guest's value is decoded and, if they are a value,
/// checks that it round-trips: it has one node per input node, flattens to
/// nodes of the same size that decode to it again, and its marshal form
/// decodes to it too, under the same limits.
pub fn decode_nodes(nodes: Vec<Node>, limits: &DecodeLimits) -> Result<Value, DecodeError> {
    let count = nodes.len();
    let size = sandwit_value::encoded_size(&nodes);
    let value = Value::from_nodes(nodes, limits)?;
    assert_eq!(value.node_count(), count, "every node is in the value once");
    let again = value.clone().into_nodes();
    assert_eq!(again.len(), count);
    assert_eq!(sandwit_value::encoded_size(&again), size);
    let back = Value::from_nodes(again, limits).expect("a decoded value's nodes decode");
    assert!(same(&back, &value), "nodes round-trip");
    let back = Value::from_marshal(&value.to_marshal(), limits)
        .expect("a decoded value's marshal form decodes under the same limits");
    assert!(same(&back, &value), "marshal round-trips");
    Ok(value)
}

/// Decodes `bytes` as the Python sandbox's values are decoded and, if they
/// are a value, checks that its own marshal form decodes to it again (the
/// input may differ: a tuple, an `l` for a small integer) and that its nodes
/// decode to it, under the same limits.
pub fn decode_marshal(bytes: &[u8], limits: &DecodeLimits) -> Result<Value, DecodeError> {
    let value = Value::from_marshal(bytes, limits)?;
    let again = value.to_marshal();
    assert!(
        again.len() <= bytes.len(),
        "the canonical form is the shortest"
    );
    let back = Value::from_marshal(&again, limits).expect("a decoded value's form decodes");
    assert!(same(&back, &value), "marshal round-trips");
    let back = Value::from_nodes(value.clone().into_nodes(), limits)
        .expect("a decoded value's nodes decode");
    assert!(same(&back, &value), "nodes round-trip");
    Ok(value)
}

/// Whether two values are equal, floats compared by their bits (so NaN
/// equals itself), without recursion.
fn same(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Value::Float(x), Value::Float(y)) if x.to_bits() != y.to_bits() => return false,
            (Value::Float(_), Value::Float(_)) => {}
            (Value::List(xs), Value::List(ys)) if xs.len() == ys.len() => {
                stack.extend(xs.iter().zip(ys));
            }
            (Value::Object(xs), Value::Object(ys)) if xs.len() == ys.len() => {
                for ((kx, x), (ky, y)) in xs.iter().zip(ys) {
                    if kx != ky {
                        return false;
                    }
                    stack.push((x, y));
                }
            }
            (Value::List(_) | Value::Object(_), _) => return false,
            (a, b) if a != b => return false,
            _ => {}
        }
    }
    true
}

/// True for one input in `n`, false once the input is used up: the costly
/// or odd choices are the rare ones, so an input cut short stays small
/// (`Unstructured::ratio` is true once out of data).
fn rarely(u: &mut Unstructured, n: u32) -> Arb<bool> {
    Ok(!u.ratio(n - 1, n)?)
}

/// The default limits, or small ones, so inputs of a few hundred bytes reach
/// every limit.
fn arbitrary_limits(u: &mut Unstructured) -> Arb<DecodeLimits> {
    if u.ratio(1, 2)? {
        return Ok(DecodeLimits::default());
    }
    Ok(DecodeLimits {
        max_nodes: u.int_in_range(0..=64)?,
        max_depth: u.int_in_range(0..=8)?,
        max_bytes: u.int_in_range(0..=2_048)?,
    })
}

/// A short string: mostly from a few, so object keys repeat.
fn short_text(u: &mut Unstructured) -> Arb<String> {
    Ok(match u.int_in_range(0..=3)? {
        0 => String::new(),
        1 => u.choose(&["a", "b", "key", "é", "\u{0}"])?.to_string(),
        _ => u.arbitrary()?,
    })
}

fn arbitrary_float(u: &mut Unstructured) -> Arb<f64> {
    Ok(match u.int_in_range(0..=4)? {
        0 => f64::NAN,
        1 => *u.choose(&[0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, 0.5, 1e300])?,
        _ => f64::from_bits(u.arbitrary()?),
    })
}

fn arbitrary_nodes(u: &mut Unstructured) -> Arb<Vec<Node>> {
    let count = u.arbitrary_len::<[u8; 2]>()?.min(4_096);
    let mut nodes = Vec::with_capacity(count);
    for i in 0..count {
        // A child index: mostly just after this node, sometimes anywhere.
        let child = |u: &mut Unstructured| -> Arb<u32> {
            Ok(if u.ratio(7, 8)? {
                (i as u32).saturating_add(u.int_in_range(1..=8)?)
            } else {
                u.arbitrary()?
            })
        };
        let node = match u.int_in_range(0..=7)? {
            0 => Node::Null,
            1 => Node::Boolean(u.arbitrary()?),
            2 => Node::Integer(u.arbitrary()?),
            3 => Node::Float(arbitrary_float(u)?),
            4 => Node::Text(short_text(u)?),
            5 => Node::Bytes(u.arbitrary()?),
            6 => {
                let n = u.int_in_range(0..=4)?;
                Node::Array((0..n).map(|_| child(u)).collect::<Arb<_>>()?)
            }
            _ => {
                let n = u.int_in_range(0..=4)?;
                Node::Object(
                    (0..n)
                        .map(|_| Ok((short_text(u)?, child(u)?)))
                        .collect::<Arb<_>>()?,
                )
            }
        };
        nodes.push(node);
    }
    Ok(nodes)
}

/// A marshal form, token by token: mostly codes a value uses, each with a
/// payload of the right shape (small counts and lengths, keys before an
/// object's values), sometimes a stray byte, a huge count, a bad digit or
/// an object's end anywhere, so some inputs decode and the rest fail at
/// every check.
fn arbitrary_marshal(u: &mut Unstructured) -> Arb<Vec<u8>> {
    let mut out = Vec::new();
    let tokens = u.arbitrary_len::<u8>()?.min(4_096);
    for _ in 0..tokens {
        let c = if u.ratio(15, 16)? {
            *u.choose(&[
                code::NONE,
                code::FALSE,
                code::TRUE,
                code::INT,
                code::LONG,
                code::FLOAT,
                code::TEXT,
                code::BYTES,
                code::LIST,
                code::TUPLE,
                code::DICT,
                code::END,
            ])?
        } else {
            u.arbitrary()?
        };
        out.push(c);
        let count = |u: &mut Unstructured| -> Arb<u32> {
            Ok(if u.ratio(15, 16)? {
                u.int_in_range(0..=4)?
            } else {
                u.arbitrary()?
            })
        };
        match c {
            code::INT => out.extend_from_slice(&u.arbitrary::<i32>()?.to_le_bytes()),
            code::LONG => {
                let n: i32 = u.int_in_range(-6..=6)?;
                out.extend_from_slice(&n.to_le_bytes());
                for _ in 0..n.unsigned_abs() {
                    let digit: u16 = if u.ratio(15, 16)? {
                        u.int_in_range(0..=0x7fff)?
                    } else {
                        u.arbitrary()?
                    };
                    out.extend_from_slice(&digit.to_le_bytes());
                }
            }
            code::FLOAT => out.extend_from_slice(&arbitrary_float(u)?.to_le_bytes()),
            code::TEXT => {
                let text = short_text(u)?;
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            code::BYTES => {
                let n = count(u)?;
                out.extend_from_slice(&n.to_le_bytes());
                for _ in 0..n.min(64) {
                    out.push(u.arbitrary()?);
                }
            }
            code::LIST | code::TUPLE => out.extend_from_slice(&count(u)?.to_le_bytes()),
            _ => {}
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Manifests.

/// The longest problem a refused manifest may list: names and values are
/// quoted from at most 80 bytes, error messages cut to a few hundred.
pub const MAX_PROBLEM_LEN: usize = 2_000;

/// Target `manifest`: a manifest checked with [`check_manifest`]. Text mode,
/// if `data` starts with `{`: the manifest as JSON (see
/// [`raw_manifest_from_json`]; not JSON: nothing to do). Otherwise read from
/// `data` structure-aware: names mostly identifiers, schemas mostly JSON
/// Schemas generated as JSON.
pub fn manifest(data: &[u8]) {
    let raw = if data.first() == Some(&b'{') {
        match serde_json::from_slice(data) {
            Ok(json) => raw_manifest_from_json(&json),
            Err(_) => return,
        }
    } else {
        match arbitrary_manifest(&mut Unstructured::new(data)) {
            Ok(raw) => raw,
            Err(_) => return,
        }
    };
    let _ = on_worker_stack(|| check_manifest(raw));
}

/// A manifest written as JSON, for inputs a person writes: an object with
/// the WIT record's fields (`config_schema` with an underscore), each
/// optional; a method's `kind` is its WIT name, and a schema (`schema`,
/// `returns`, `config_schema`) is its text as a JSON string or the schema
/// itself as JSON.
pub fn raw_manifest_from_json(json: &Json) -> RawManifest {
    let text = |v: &Json, key: &str| v[key].as_str().unwrap_or_default().to_string();
    let schema = |v: &Json| match v {
        Json::Null => None,
        Json::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    };
    let list = |v: &Json| v.as_array().cloned().unwrap_or_default();
    let methods = list(&json["methods"])
        .iter()
        .map(|m| RawMethod {
            name: text(m, "name"),
            kind: match m["kind"].as_str() {
                Some("agent") => MethodKind::Agent,
                Some("behavior") => MethodKind::Behavior,
                Some("multimodal-agent") => MethodKind::MultimodalAgent,
                _ => MethodKind::Tool,
            },
            description: text(m, "description"),
            docstring: text(m, "docstring"),
            params: list(&m["params"])
                .iter()
                .map(|p| RawParam {
                    name: text(p, "name"),
                    schema: schema(&p["schema"]).unwrap_or_default(),
                    required: p["required"].as_bool().unwrap_or(true),
                })
                .collect(),
            returns: schema(&m["returns"]),
        })
        .collect();
    RawManifest {
        id: text(json, "id"),
        name: text(json, "name"),
        version: text(json, "version"),
        author: text(json, "author"),
        description: text(json, "description"),
        methods,
        config_schema: schema(&json["config_schema"]),
        capabilities: list(&json["capabilities"])
            .iter()
            .map(|c| c.as_str().unwrap_or_default().to_string())
            .collect(),
    }
}

/// Checks `raw` as a plugin's manifest is checked when it loads, and checks
/// the outcome: at most [`manifest::MAX_PROBLEMS`] problems listed and one
/// counting the rest, each at most [`MAX_PROBLEM_LEN`] bytes; an accepted
/// manifest within the limits, with a compiled check per method.
pub fn check_manifest(raw: RawManifest) -> Result<Manifest, Vec<String>> {
    match manifest::check(raw) {
        Ok(checked) => {
            let m = &checked.manifest;
            assert!(manifest::is_plugin_id(&m.id));
            assert!((1..=manifest::MAX_METHODS).contains(&m.methods.len()));
            assert!(m.capabilities.len() <= manifest::MAX_CAPABILITIES);
            for method in &m.methods {
                assert!(method.params.len() <= manifest::MAX_PARAMS);
                assert!(checked.checkers.contains_key(&method.name));
            }
            assert_eq!(checked.checkers.len(), m.methods.len());
            assert_eq!(
                checked.config_validator.is_some(),
                m.config_schema.is_some()
            );
            Ok(checked.manifest)
        }
        Err(problems) => {
            assert!(!problems.is_empty(), "refused without a reason");
            assert!(
                problems.len() <= manifest::MAX_PROBLEMS + 1,
                "{} problems",
                problems.len()
            );
            for p in &problems {
                assert!(
                    p.len() <= MAX_PROBLEM_LEN,
                    "a problem of {} bytes: {}…",
                    p.len(),
                    &p[..p.floor_char_boundary(200)]
                );
            }
            Err(problems)
        }
    }
}

/// Names: mostly identifiers, some that are refused for what they are.
fn arbitrary_name(u: &mut Unstructured) -> Arb<String> {
    Ok(match u.int_in_range(0..=9)? {
        0..=3 => u
            .choose(&[
                "x", "y", "n", "do_it", "f", "num1", "text", "_", "a1", "calc", "notes",
            ])?
            .to_string(),
        4 => u
            .choose(&[
                "print",
                "class",
                "None",
                "sandwit_x",
                "__init__",
                "__x",
                "9lives",
                "Bad Id",
                "",
                "é",
                "open",
                "PluginError",
            ])?
            .to_string(),
        5..=6 => {
            let len = u.int_in_range(1..=70)?;
            let alphabet = b"abcxyz_09-A";
            (0..len)
                .map(|_| Ok(*u.choose(alphabet)? as char))
                .collect::<Arb<String>>()?
        }
        7 => "x".repeat(u.int_in_range(60..=2_000)?),
        _ => u.arbitrary()?,
    })
}

/// Free text: mostly short and good, sometimes empty, long or odd.
fn arbitrary_text(u: &mut Unstructured, long: usize) -> Arb<String> {
    Ok(match u.int_in_range(0..=7)? {
        0..=3 => u
            .choose(&[
                "Demo",
                "Does it.",
                "Adds two numbers.\n\nArgs:\n    x: a number",
            ])?
            .to_string(),
        4 => u.choose(&["", " ", "\n", "two\nlines"])?.to_string(),
        5 => "d".repeat(u.int_in_range(0..=long)?),
        _ => u.arbitrary()?,
    })
}

fn arbitrary_manifest(u: &mut Unstructured) -> Arb<RawManifest> {
    let id = match u.int_in_range(0..=3)? {
        0..=1 => u.choose(&["demo", "calc", "a-b_1", "x"])?.to_string(),
        _ => arbitrary_name(u)?,
    };
    let version = match u.int_in_range(0..=3)? {
        0..=1 => u
            .choose(&["1.0.0", "0.1.0-alpha.1+build", "1", "", "01.0.0"])?
            .to_string(),
        _ => u.arbitrary()?,
    };
    let name = arbitrary_text(u, 100)?;
    let author = arbitrary_text(u, 300)?;
    let description = arbitrary_text(u, 1_100)?;
    let config_schema = if rarely(u, 3)? {
        Some(arbitrary_schema_text(u)?)
    } else {
        None
    };
    let mut capabilities = Vec::new();
    for _ in 0..u.int_in_range(0..=3)? {
        capabilities.push(match u.int_in_range(0..=4)? {
            0..=2 => u
                .choose(&[
                    "store",
                    "config",
                    "chat",
                    "http:example.com",
                    "http:127.0.0.1:8080",
                    "http:[::1]:443",
                    "http:",
                    "http:a:b:c",
                    "root",
                ])?
                .to_string(),
            3 => "store".repeat(u.int_in_range(0..=40)?),
            _ => u.arbitrary()?,
        });
    }
    if rarely(u, 64)? {
        // Past the limit on capabilities.
        capabilities.extend((0..40).map(|i| format!("http:h{i}.example")));
    }
    let mut methods = Vec::new();
    let count = if rarely(u, 64)? {
        u.int_in_range(250..=300)?
    } else {
        u.int_in_range(0..=4)?
    };
    for _ in 0..count {
        methods.push(arbitrary_method(u)?);
    }
    Ok(RawManifest {
        id,
        name,
        version,
        author,
        description,
        methods,
        config_schema,
        capabilities,
    })
}

fn arbitrary_method(u: &mut Unstructured) -> Arb<RawMethod> {
    let name = arbitrary_name(u)?;
    let kind = *u.choose(&[
        MethodKind::Tool,
        MethodKind::Agent,
        MethodKind::Behavior,
        MethodKind::MultimodalAgent,
    ])?;
    let description = arbitrary_text(u, 1_100)?;
    let docstring = arbitrary_text(u, 17_000)?;
    let count = if rarely(u, 32)? {
        u.int_in_range(30..=40)?
    } else {
        u.int_in_range(0..=3)?
    };
    let mut params = Vec::new();
    for _ in 0..count {
        params.push(RawParam {
            name: arbitrary_name(u)?,
            schema: arbitrary_schema_text(u)?,
            required: u.arbitrary()?,
        });
    }
    let returns = if rarely(u, 4)? {
        Some(arbitrary_schema_text(u)?)
    } else {
        None
    };
    Ok(RawMethod {
        name,
        kind,
        description,
        docstring,
        params,
        returns,
    })
}

/// JSON Schema text: mostly a schema generated as JSON, sometimes that text
/// cut short, sometimes anything.
fn arbitrary_schema_text(u: &mut Unstructured) -> Arb<String> {
    Ok(match u.int_in_range(0..=15)? {
        0..=12 => arbitrary_schema(u)?.to_string(),
        13 => {
            let mut text = arbitrary_schema(u)?.to_string();
            let at = u.int_in_range(0..=text.len())?;
            text.truncate(text.floor_char_boundary(at));
            text
        }
        _ => u.arbitrary()?,
    })
}

/// Generates JSON Schemas: keywords of every kind, `$defs` that refer to
/// each other (chains, doublings, cycles) and references of every form.
struct SchemaGen<'u, 'a> {
    u: &'u mut Unstructured<'a>,
    /// How many `$defs` the schema has (`d0`, `d1`, ...).
    defs: usize,
    /// The definition being generated, if any: its references favour the
    /// next one, making chains.
    current: Option<usize>,
    /// Nodes generated so far; past a few thousand, only leaves.
    nodes: usize,
}

/// Generates a JSON Schema from `u`: `$defs` at the top (up to 48 of them,
/// each generated or, half the time, all one level repeated as a chain) and
/// nested keywords.
pub fn arbitrary_schema(u: &mut Unstructured) -> Arb<Json> {
    let defs = if u.ratio(1, 2)? {
        u.int_in_range(0..=48)?
    } else {
        0
    };
    let mut g = SchemaGen {
        u,
        defs,
        current: None,
        nodes: 0,
    };
    let mut root = g.schema(0)?;
    if defs > 0 {
        let mut table = Map::new();
        if g.u.ratio(1, 2)? {
            // A chain: every definition the first one, referring to the
            // next, and the last a leaf. Repeating one level is what makes
            // a schema's work grow exponentially with its depth.
            g.current = Some(0);
            let first = g.schema(1)?.to_string();
            for i in 0..defs {
                let next = format!("\"#/$defs/d{}\"", i + 1);
                let def = first.replace("\"#/$defs/d1\"", &next);
                table.insert(format!("d{i}"), serde_json::from_str(&def).expect("JSON"));
            }
            let last = match g.u.int_in_range(0..=2)? {
                0 => json!(true),
                1 => json!({"type": "integer"}),
                _ => json!({"properties": {"a": true}, "prefixItems": [true]}),
            };
            table.insert(format!("d{defs}"), last);
        } else {
            for i in 0..defs {
                g.current = Some(i);
                table.insert(format!("d{i}"), g.schema(1)?);
            }
        }
        g.current = None;
        let top = if rarely(g.u, 8)? {
            "definitions"
        } else {
            "$defs"
        };
        match &mut root {
            Json::Object(fields) => {
                fields.insert(top.to_string(), Json::Object(table));
            }
            _ => {
                root = json!({ top: table, "$ref": g.reference()? });
            }
        }
    }
    Ok(root)
}

const TYPES: &[&str] = &[
    "null", "boolean", "integer", "number", "string", "array", "object",
];

const PATTERNS: &[&str] = &[
    "^[a-z]+$",
    "^(a+)+$",
    "\\d{2,}",
    "(a|aa)*b",
    "\\p{L}+",
    "^.*$",
    "\\w{1,64}",
];

/// Patterns refused when compiled: not a regular expression, look-around,
/// too large.
const ODD_PATTERNS: &[&str] = &["[", "(?=a)a", "a{1000}{1000}", "\\w{1000}"];

/// Keywords generated with valid values.
const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "items",
    "prefixItems",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "$ref",
    "if",
    "then",
    "else",
    "additionalProperties",
    "patternProperties",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "minProperties",
    "enum",
    "const",
    "required",
    "dependentRequired",
    "format",
    "propertyNames",
    "dependentSchemas",
    "$comment",
    "description",
    "secret",
    "default",
    "x-other",
];

/// Keywords sandwit refuses or that change how the schema is read.
const ODD_KEYWORDS: &[&str] = &[
    "unevaluatedProperties",
    "unevaluatedItems",
    "$id",
    "$schema",
    "$anchor",
    "$dynamicRef",
    "$recursiveRef",
    "additionalItems",
    "definitions",
];

impl SchemaGen<'_, '_> {
    fn schema(&mut self, depth: usize) -> Arb<Json> {
        self.nodes += 1;
        if depth >= 8 || self.nodes > 2_000 || self.u.ratio(1, 4)? {
            return self.leaf();
        }
        let mut fields = Map::new();
        for _ in 0..self.u.int_in_range(1..=4)? {
            let (key, value) = self.keyword(depth)?;
            fields.insert(key, value);
        }
        Ok(Json::Object(fields))
    }

    fn leaf(&mut self) -> Arb<Json> {
        Ok(match self.u.int_in_range(0..=6)? {
            0 => Json::Bool(self.u.arbitrary()?),
            1 => json!({}),
            2..=3 if self.defs > 0 => json!({ "$ref": self.reference()? }),
            _ => json!({ "type": self.type_name()? }),
        })
    }

    fn reference(&mut self) -> Arb<String> {
        if let Some(i) = self.current
            && self.u.ratio(2, 3)?
        {
            return Ok(format!("#/$defs/d{}", i + 1));
        }
        if self.defs > 0 && !rarely(self.u, 16)? {
            // The last one exists only in a chain.
            return Ok(format!("#/$defs/d{}", self.u.int_in_range(0..=self.defs)?));
        }
        Ok(self
            .u
            .choose(&[
                "#",
                "#/properties/a",
                "#/$defs/d0/allOf/0",
                "#/%24defs/d0",
                "#/$defs/d%",
                "#/definitions/d0",
                "#/$defs/d0/~1",
                "https://example.com/s.json",
                "d0",
                "#x",
                "",
            ])?
            .to_string())
    }

    fn list(&mut self, depth: usize, min: usize, max: usize) -> Arb<Json> {
        let n = self.u.int_in_range(min..=max)?;
        let items = (0..n).map(|_| self.schema(depth + 1)).collect::<Arb<_>>()?;
        Ok(Json::Array(items))
    }

    /// Mostly a small count, valid for every numeric keyword.
    fn number(&mut self) -> Arb<Json> {
        if !rarely(self.u, 8)? {
            return Ok(json!(self.u.int_in_range(0..=10u32)?));
        }
        Ok(match self.u.int_in_range(0..=2)? {
            0 => json!(self.u.arbitrary::<i64>()?),
            1 => json!(f64::from_bits(self.u.arbitrary()?)),
            _ => json!(-1),
        })
    }

    fn type_name(&mut self) -> Arb<&'static str> {
        Ok(if rarely(self.u, 32)? {
            "int"
        } else {
            self.u.choose(TYPES)?
        })
    }

    fn pattern(&mut self) -> Arb<&'static str> {
        Ok(if rarely(self.u, 8)? {
            self.u.choose(ODD_PATTERNS)?
        } else {
            self.u.choose(PATTERNS)?
        })
    }

    fn keyword(&mut self, depth: usize) -> Arb<(String, Json)> {
        // Mostly keywords with valid values, so most schemas pass the
        // meta-schema and get to be checked; sometimes one that is refused.
        let key = match *self.u.choose(KEYWORDS)? {
            _ if rarely(self.u, 64)? => *self.u.choose(ODD_KEYWORDS)?,
            // Without definitions, a reference is mostly refused.
            "$ref" if self.defs == 0 && !rarely(self.u, 16)? => "type",
            key => key,
        };
        let value = match key {
            "type" => {
                if rarely(self.u, 4)? {
                    let n = self.u.int_in_range(0..=3)?;
                    Json::Array(
                        (0..n)
                            .map(|_| Ok(json!(self.type_name()?)))
                            .collect::<Arb<_>>()?,
                    )
                } else {
                    json!(self.type_name()?)
                }
            }
            "properties" | "patternProperties" | "dependentSchemas" => {
                let mut props = Map::new();
                for _ in 0..self.u.int_in_range(0..=3)? {
                    let name = if key == "patternProperties" {
                        self.pattern()?.to_string()
                    } else {
                        arbitrary_name(self.u)?
                    };
                    props.insert(name, self.schema(depth + 1)?);
                }
                Json::Object(props)
            }
            "prefixItems" => self.list(depth, 0, 4)?,
            // Empty is not valid for these; rarely, to test that.
            "allOf" | "anyOf" | "oneOf" => {
                let min = if rarely(self.u, 32)? { 0 } else { 1 };
                self.list(depth, min, 4)?
            }
            "items"
            | "not"
            | "if"
            | "then"
            | "else"
            | "additionalProperties"
            | "contains"
            | "propertyNames"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "additionalItems"
            | "definitions" => self.schema(depth + 1)?,
            "$ref" => json!(self.reference()?),
            "$dynamicRef" | "$recursiveRef" => json!("#meta"),
            "$anchor" => json!("a"),
            "pattern" => json!(self.pattern()?),
            "minimum" | "maximum" | "exclusiveMinimum" | "multipleOf" | "minLength"
            | "maxLength" | "minItems" | "maxItems" | "minContains" | "maxContains"
            | "minProperties" => self.number()?,
            "enum" => {
                let n = self.u.int_in_range(0..=3)?;
                Json::Array(
                    (0..n)
                        .map(|_| arbitrary_json(self.u, 2))
                        .collect::<Arb<_>>()?,
                )
            }
            "dependentRequired" => {
                let mut deps = Map::new();
                for _ in 0..self.u.int_in_range(0..=2)? {
                    deps.insert(arbitrary_name(self.u)?, json!([arbitrary_name(self.u)?]));
                }
                Json::Object(deps)
            }
            "required" => {
                let n = self.u.int_in_range(0..=3)?;
                Json::Array(
                    (0..n)
                        .map(|_| Ok(json!(arbitrary_name(self.u)?)))
                        .collect::<Arb<_>>()?,
                )
            }
            "format" => json!(
                *self
                    .u
                    .choose(&["email", "regex", "date-time", "uri", "x"])?
            ),
            "$id" => json!(*self.u.choose(&["https://example.com/s", "urn:x", "#a"])?),
            "$schema" => json!(*self.u.choose(&[
                "https://json-schema.org/draft/2020-12/schema",
                "http://json-schema.org/draft-07/schema#",
                "http://json-schema.org/draft-04/schema#",
                "https://example.com/meta",
            ])?),
            "secret" | "uniqueItems" => Json::Bool(self.u.arbitrary()?),
            "$comment" | "description" => json!(short_text(self.u)?),
            _ => arbitrary_json(self.u, 2)?,
        };
        Ok((key.to_string(), value))
    }
}

/// A JSON value from `u`, nested at most `depth` levels.
pub fn arbitrary_json(u: &mut Unstructured, depth: usize) -> Arb<Json> {
    let last = if depth == 0 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=last)? {
        0 => Json::Null,
        1 => Json::Bool(u.arbitrary()?),
        2 => match u.int_in_range(0..=2)? {
            0 => json!(u.int_in_range(-3..=10)?),
            1 => json!(u.arbitrary::<i64>()?),
            _ => json!(f64::from_bits(u.arbitrary()?)),
        },
        3 => json!(short_text(u)?),
        4 => json!(u.choose(&["a", "aaaa!", "2024-01-01", "x@y.z"])?),
        5 => {
            let n = u.int_in_range(0..=4)?;
            Json::Array(
                (0..n)
                    .map(|_| arbitrary_json(u, depth - 1))
                    .collect::<Arb<_>>()?,
            )
        }
        _ => {
            let mut map = Map::new();
            for _ in 0..u.int_in_range(0..=4)? {
                map.insert(arbitrary_name(u)?, arbitrary_json(u, depth - 1)?);
            }
            Json::Object(map)
        }
    })
}

/// A value to check against a schema: an [`arbitrary_json`] nested up to 4
/// levels, or a long array of one small element repeated (so the check's
/// work bound is reached with the larger schemas).
fn arbitrary_argument(u: &mut Unstructured) -> Arb<Json> {
    if rarely(u, 8)? {
        let element = arbitrary_json(u, 1)?;
        let n = *u.choose(&[10, 1_000, 20_000])?;
        return Ok(Json::Array(vec![element; n]));
    }
    arbitrary_json(u, 4)
}

// ---------------------------------------------------------------------------
// Schemas.

/// Target `schema`. Text mode, if `data` starts with `{`, `t` or `f` (as a
/// schema does): a JSON Schema's text up to the first NUL byte, then the
/// JSON text of a value (not JSON: a string of it; nothing: `null`).
/// Otherwise a schema and a value generated from `data`. Either way checked
/// with [`check_schema`].
pub fn schema(data: &[u8]) {
    if matches!(data.first(), Some(b'{' | b't' | b'f')) {
        let (schema, value) = match data.iter().position(|&b| b == 0) {
            Some(at) => (&data[..at], &data[at + 1..]),
            None => (data, &[][..]),
        };
        let Ok(schema) = std::str::from_utf8(schema) else {
            return;
        };
        let value = if value.is_empty() {
            Json::Null
        } else {
            serde_json::from_slice(value)
                .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(value).into_owned()))
        };
        let _ = on_worker_stack(|| check_schema(schema, &value));
    } else {
        let mut u = Unstructured::new(data);
        let Ok(schema) = arbitrary_schema_text(&mut u) else {
            return;
        };
        let Ok(value) = arbitrary_argument(&mut u) else {
            return;
        };
        let _ = on_worker_stack(|| check_schema(&schema, &value));
    }
}

/// Checks `schema` as a parameter's schema is checked when a plugin loads
/// (at most [`manifest::MAX_SCHEMA_LEN`] bytes, JSON, within
/// [`sandwit_contract::schema`]'s bounds, a valid JSON Schema) and, if it passes, checks
/// `value` against it as an argument is checked before a call: decoded
/// within [`CallLimits::default`]'s value limits, refused before the check
/// starts if the work would pass the bound, else validated. `Err` says why
/// the schema or the value was refused.
pub fn check_schema(schema: &str, value: &Json) -> Result<(), String> {
    if schema.len() > manifest::MAX_SCHEMA_LEN {
        return Err("too long".to_string());
    }
    let json: Json = serde_json::from_str(schema).map_err(|e| e.to_string())?;
    let compiled = sandwit_contract::schema::compile(&json)?;
    assert!(compiled.expanded <= sandwit_contract::schema::MAX_EXPANDED_NODES);
    let expanded = compiled.expanded;
    let checker = ArgChecker::new(std::iter::once((
        &json,
        ("x".to_string(), true, Some(compiled)),
    )));
    // A call's arguments reach the check decoded within the call's limits
    // (16 MiB, 1,000,000 nodes, 64 levels by default): so do these. (The
    // work bound counts nodes, not bytes; a string keyword's check is linear
    // in the string's bytes, which only these limits bound.)
    let value = sandwit_contract::json::value_from_json(value.clone());
    let value = Value::from_nodes(value.into_nodes(), &CallLimits::default().decode_limits())
        .map_err(|e| e.to_string())?;
    let nodes = value.node_count();
    let args = Value::Object(vec![("x".to_string(), value)]);
    match checker.check(&args) {
        Ok(()) => Ok(()),
        Err(Refused::TooCostly(m)) => {
            assert!(
                expanded.saturating_mul(nodes as u64) > sandwit_contract::schema::MAX_CHECK_WORK,
                "refused as too costly within the bound: {m}"
            );
            Err(m)
        }
        Err(Refused::Invalid(m)) => Err(m),
    }
}

// ---------------------------------------------------------------------------
// The policy file.

/// Target `policy`: `data` as the text of a policy file (not UTF-8: nothing
/// to do), parsed with [`parse_policy`].
pub fn policy(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_policy(text);
    }
}

/// Parses `text` as an operator's policy file is parsed.
pub fn parse_policy(text: &str) -> Result<Policy, sandwit_contract::policy::PolicyError> {
    Policy::from_toml(text)
}

// ---------------------------------------------------------------------------
// Components.

/// Target `component`: `data` loaded as a plugin component with
/// [`load_component`]; if it starts with `(`, it is WebAssembly text
/// (`(component ...)`) and loaded if it parses.
pub fn component(data: &[u8]) {
    if data.first() == Some(&b'(') {
        if let Ok(bytes) = wat::parse_bytes(data) {
            let _ = on_worker_stack(|| load_component(&bytes));
        }
    } else {
        let _ = on_worker_stack(|| load_component(data));
    }
}

/// The limits of the host that loads fuzzed components: the defaults, but a
/// `describe` that spins ends within a second.
pub fn component_limits() -> CallLimits {
    CallLimits {
        fuel: Some(100_000_000),
        time: Duration::from_secs(1),
        ..CallLimits::default()
    }
}

/// Loads `bytes` as a plugin in a new host (no cache directory, a policy
/// that grants nothing, [`component_limits`]) on a runtime of its own, as
/// [`Host::load_plugin`] does: compiled, its imports and exports checked,
/// `describe` run, its manifest checked. A new host each time, so the
/// outcome does not depend on what was loaded before and its memory cache
/// does not grow for the length of a fuzzing run.
pub fn load_component(bytes: &[u8]) -> Result<Manifest, LoadError> {
    let host = Host::builder()
        .limits(component_limits())
        .max_instances(4)
        .build()
        .expect("a host builds");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime builds");
    let plugin = runtime.block_on(host.load_plugin("fuzzed.wasm", bytes))?;
    Ok(plugin.manifest().clone())
}
