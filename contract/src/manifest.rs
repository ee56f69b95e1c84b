//! A plugin's manifest: the public types, and the checks every manifest must
//! pass before its plugin is accepted.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::args::ArgChecker;
use crate::capability::Capability;
use crate::schema;
use crate::text::quote;
use crate::types::MethodKind;

/// Method names starting with this are reserved for the host.
pub const RESERVED_PREFIX: &str = "sandwit_";
/// The most methods one plugin may offer.
pub const MAX_METHODS: usize = 256;
/// The most parameters one method may take.
pub const MAX_PARAMS: usize = 32;
/// The longest name (id, method or parameter).
pub const MAX_NAME_LEN: usize = 64;
/// The longest one-line description.
pub const MAX_DESCRIPTION_LEN: usize = 1_000;
/// The longest docstring.
pub const MAX_DOCSTRING_LEN: usize = 16_000;
/// The longest JSON Schema text.
pub const MAX_SCHEMA_LEN: usize = 64_000;
/// The most capabilities one plugin may request.
pub const MAX_CAPABILITIES: usize = 32;
/// The most bytes of JSON Schema text in one manifest, all schemas together.
pub const MAX_TOTAL_SCHEMA_BYTES: usize = 512 << 10;
/// The most bytes of text in one manifest, all of its strings together.
pub const MAX_MANIFEST_BYTES: usize = 8 << 20;
/// The most problems listed for one manifest; the rest are counted.
pub const MAX_PROBLEMS: usize = 100;
/// How much of a name or value a problem quotes.
const QUOTED: usize = 80;

/// The names of Python's builtins (CPython 3.14) and of what sandwit's
/// interpreter adds to them: a method named after one would replace it in
/// the AI code's globals (a method called `print` would receive what the
/// code prints).
const PYTHON_BUILTINS: &[&str] = &[
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "BaseExceptionGroup",
    "BlockingIOError",
    "BrokenPipeError",
    "BufferError",
    "BytesWarning",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "DeprecationWarning",
    "EOFError",
    "Ellipsis",
    "EncodingWarning",
    "EnvironmentError",
    "Exception",
    "ExceptionGroup",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "FutureWarning",
    "GeneratorExit",
    "IOError",
    "ImportError",
    "ImportWarning",
    "IndentationError",
    "IndexError",
    "InterruptedError",
    "IsADirectoryError",
    "KeyError",
    "KeyboardInterrupt",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "NotADirectoryError",
    "NotImplemented",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PendingDeprecationWarning",
    "PermissionError",
    "ProcessLookupError",
    "PythonFinalizationError",
    "RecursionError",
    "ReferenceError",
    "ResourceWarning",
    "RuntimeError",
    "RuntimeWarning",
    "StopAsyncIteration",
    "StopIteration",
    "SyntaxError",
    "SyntaxWarning",
    "SystemError",
    "SystemExit",
    "TabError",
    "TimeoutError",
    "TypeError",
    "UnboundLocalError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeError",
    "UnicodeTranslateError",
    "UnicodeWarning",
    "UserWarning",
    "ValueError",
    "Warning",
    "ZeroDivisionError",
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
    "PluginError",
    "PluginArgumentError",
];

/// Python's keywords: no method or parameter may be named after one.
const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// A plugin manifest as a plugin's `describe` returns it, not yet checked;
/// mirrors the WIT record `plugin-manifest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawManifest {
    /// `id`.
    pub id: String,
    /// `name`.
    pub name: String,
    /// `version`.
    pub version: String,
    /// `author`.
    pub author: String,
    /// `description`.
    pub description: String,
    /// `methods`.
    pub methods: Vec<RawMethod>,
    /// `config-schema`: JSON Schema text.
    pub config_schema: Option<String>,
    /// `capabilities`.
    pub capabilities: Vec<String>,
}

/// A method as a manifest declares it; mirrors the WIT record `method-spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawMethod {
    /// `name`.
    pub name: String,
    /// `kind`.
    pub kind: MethodKind,
    /// `description`.
    pub description: String,
    /// `docstring`.
    pub docstring: String,
    /// `params`.
    pub params: Vec<RawParam>,
    /// `returns`: JSON Schema text.
    pub returns: Option<String>,
}

/// A parameter as a manifest declares it; mirrors the WIT record `param`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawParam {
    /// `name`.
    pub name: String,
    /// `schema`: JSON Schema text.
    pub schema: String,
    /// `required`.
    pub required: bool,
}

impl From<&MethodSpec> for RawMethod {
    /// A checked spec as a manifest declares it, schemas as text: checking
    /// it again gives the spec back.
    fn from(spec: &MethodSpec) -> Self {
        RawMethod {
            name: spec.name.clone(),
            kind: spec.kind,
            description: spec.description.clone(),
            docstring: spec.docstring.clone(),
            params: spec
                .params
                .iter()
                .map(|p| RawParam {
                    name: p.name.clone(),
                    schema: p.schema.to_string(),
                    required: p.required,
                })
                .collect(),
            returns: spec.returns.as_ref().map(|r| r.to_string()),
        }
    }
}

/// What a plugin says about itself, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// A stable id: lowercase letters, digits, `-` and `_`, starting with a letter.
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// A semantic version.
    pub version: String,
    /// Who wrote it.
    pub author: String,
    /// What it does.
    pub description: String,
    /// Its methods.
    pub methods: Vec<MethodSpec>,
    /// The JSON Schema of its configuration, if any.
    pub config_schema: Option<serde_json::Value>,
    /// The capabilities it requests (see [`crate::capability`]); it gets
    /// those the operator also grants.
    pub capabilities: Vec<Capability>,
}

/// One method, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodSpec {
    /// A Python identifier.
    pub name: String,
    /// What the framework does with the result.
    pub kind: MethodKind,
    /// A one-line summary.
    pub description: String,
    /// The docstring the AI reads.
    pub docstring: String,
    /// Parameters in positional order; required ones first.
    pub params: Vec<Param>,
    /// The JSON Schema of a tool's result, if declared.
    pub returns: Option<serde_json::Value>,
}

impl MethodSpec {
    /// `name(a, b=None)`, as Python shows the function the AI calls.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                if p.required {
                    p.name.clone()
                } else {
                    format!("{}=None", p.name)
                }
            })
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }
}

/// One parameter, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// A Python identifier.
    pub name: String,
    /// The JSON Schema its argument must satisfy.
    pub schema: serde_json::Value,
    /// Whether a call must supply it.
    pub required: bool,
}

impl Manifest {
    /// The method called `name`.
    pub fn method(&self, name: &str) -> Option<&MethodSpec> {
        self.methods.iter().find(|m| m.name == name)
    }
}

/// A checked manifest, its methods' compiled argument checks and its
/// config schema's validator.
pub struct Checked {
    /// The manifest in the contract's types.
    pub manifest: Manifest,
    /// Each method's argument check, by method name.
    pub checkers: HashMap<String, ArgChecker>,
    /// The config schema, compiled.
    pub config_validator: Option<jsonschema::Validator>,
}

/// The bytes of text a manifest holds, all strings together.
fn text_bytes(raw: &RawManifest) -> usize {
    let strings = [
        &raw.id,
        &raw.name,
        &raw.version,
        &raw.author,
        &raw.description,
    ];
    strings.iter().map(|s| s.len()).sum::<usize>()
        + raw.config_schema.as_ref().map_or(0, String::len)
        + raw.capabilities.iter().map(String::len).sum::<usize>()
        + raw
            .methods
            .iter()
            .map(|m| {
                m.name.len()
                    + m.description.len()
                    + m.docstring.len()
                    + m.returns.as_ref().map_or(0, String::len)
                    + m.params
                        .iter()
                        .map(|p| p.name.len() + p.schema.len())
                        .sum::<usize>()
            })
            .sum::<usize>()
}

/// Collects problems, at most [`MAX_PROBLEMS`] of them.
#[derive(Default)]
struct Problems {
    listed: Vec<String>,
    more: usize,
}

impl Problems {
    fn push(&mut self, problem: String) {
        if self.listed.len() < MAX_PROBLEMS {
            self.listed.push(problem);
        } else {
            self.more += 1;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.more > 0 {
            self.listed
                .push(format!("and {} more problems, not listed", self.more));
        }
        self.listed
    }
}

/// The schema bytes a manifest may still use.
struct SchemaBudget(usize);

/// Checks a manifest as the plugin described itself, returning it in the
/// host's types with its schemas compiled, or every problem found (at most
/// [`MAX_PROBLEMS`]). Each schema is parsed, bounded and compiled once.
pub fn check(raw: RawManifest) -> Result<Checked, Vec<String>> {
    let bytes = text_bytes(&raw);
    if bytes > MAX_MANIFEST_BYTES {
        return Err(vec![format!(
            "its manifest holds {bytes} bytes of text, more than the limit of {MAX_MANIFEST_BYTES}"
        )]);
    }
    let mut problems = Problems::default();
    let mut budget = SchemaBudget(MAX_TOTAL_SCHEMA_BYTES);
    let mut p = |s: String| problems.push(s);

    if !is_plugin_id(&raw.id) {
        p(format!(
            "id {} is not 1 to {MAX_NAME_LEN} lowercase letters, digits, `-` or `_` starting with a letter",
            quote(&raw.id, QUOTED)
        ));
    }
    if raw.version.len() > MAX_NAME_LEN || semver::Version::parse(&raw.version).is_err() {
        p(format!(
            "version {} is not a semantic version like 1.0.0",
            quote(&raw.version, QUOTED)
        ));
    }
    check_text("name", &raw.name, MAX_NAME_LEN, &mut p);
    check_text("author", &raw.author, MAX_NAME_LEN * 4, &mut p);
    check_text("description", &raw.description, MAX_DESCRIPTION_LEN, &mut p);
    let (config_schema, config_validator) = raw
        .config_schema
        .as_deref()
        .and_then(|s| parse_schema("config schema", s, &mut budget, &mut p))
        .map(|(json, compiled)| (json, compiled.validator))
        .unzip();

    if raw.capabilities.len() > MAX_CAPABILITIES {
        p(format!(
            "requests {} capabilities, more than the limit of {MAX_CAPABILITIES}",
            raw.capabilities.len()
        ));
    }
    let mut capabilities = Vec::new();
    for text in raw.capabilities.iter().take(MAX_CAPABILITIES) {
        match text.parse::<Capability>() {
            Ok(cap) if capabilities.contains(&cap) => {
                p(format!("requests capability `{cap}` more than once"))
            }
            Ok(cap) => capabilities.push(cap),
            Err(_) if text.len() > QUOTED => p(format!(
                "requests an unknown capability {}",
                quote(text, QUOTED)
            )),
            Err(e) => p(format!("requests an {e}")),
        }
    }

    if raw.methods.is_empty() {
        p("offers no methods".to_string());
    }
    if raw.methods.len() > MAX_METHODS {
        p(format!(
            "offers {} methods, more than the limit of {MAX_METHODS}",
            raw.methods.len()
        ));
    }
    let mut seen = HashSet::new();
    let mut methods = Vec::new();
    let mut checkers = HashMap::new();
    for m in raw.methods.into_iter().take(MAX_METHODS) {
        if !seen.insert(m.name.clone()) {
            p(format!(
                "method {} is declared more than once",
                quote(&m.name, QUOTED)
            ));
        }
        let (spec, checker) = check_method(m, &mut budget, &mut p);
        checkers.insert(spec.name.clone(), checker);
        methods.push(spec);
    }

    let problems = problems.finish();
    if problems.is_empty() {
        Ok(Checked {
            manifest: Manifest {
                id: raw.id,
                name: raw.name,
                version: raw.version,
                author: raw.author,
                description: raw.description,
                methods,
                config_schema,
                capabilities,
            },
            checkers,
            config_validator,
        })
    } else {
        Err(problems)
    }
}

fn check_method(
    m: RawMethod,
    budget: &mut SchemaBudget,
    p: &mut impl FnMut(String),
) -> (MethodSpec, ArgChecker) {
    let shown = quote(&m.name, QUOTED);
    let name = &shown;
    check_identifier(&format!("method {name}"), &m.name, p);
    if m.name.starts_with(RESERVED_PREFIX) {
        p(format!(
            "method {name} uses the prefix `{RESERVED_PREFIX}`, which is reserved for the host"
        ));
    }
    if PYTHON_BUILTINS.contains(&m.name.as_str()) || m.name.starts_with("__") {
        p(format!(
            "method {name} would replace Python's builtin of that name in the AI code's globals"
        ));
    }
    check_text(
        &format!("method {name}: description"),
        &m.description,
        MAX_DESCRIPTION_LEN,
        p,
    );
    if m.description.contains('\n') {
        p(format!("method {name}: description is not one line"));
    }
    check_text(
        &format!("method {name}: docstring"),
        &m.docstring,
        MAX_DOCSTRING_LEN,
        p,
    );
    if m.params.len() > MAX_PARAMS {
        p(format!(
            "method {name} takes {} parameters, more than the limit of {MAX_PARAMS}",
            m.params.len()
        ));
    }
    let mut seen = HashSet::new();
    let mut optional_seen = false;
    let mut params = Vec::new();
    let mut compiled = Vec::new();
    for param in m.params.into_iter().take(MAX_PARAMS) {
        let what = format!("method {name}, parameter {}", quote(&param.name, QUOTED));
        check_identifier(&what, &param.name, p);
        if !seen.insert(param.name.clone()) {
            p(format!("{what} is declared more than once"));
        }
        if param.required && optional_seen {
            p(format!("{what} is required but follows an optional one"));
        }
        optional_seen |= !param.required;
        let (schema, check) =
            parse_schema(&format!("{what}: schema"), &param.schema, budget, p).unzip();
        compiled.push((param.name.clone(), param.required, check));
        params.push(Param {
            name: param.name,
            schema: schema.unwrap_or_default(),
            required: param.required,
        });
    }
    let returns = m
        .returns
        .as_deref()
        .and_then(|s| parse_schema(&format!("method {name}: returns schema"), s, budget, p))
        .map(|(json, _)| json);
    let checker = ArgChecker::new(params.iter().map(|p| &p.schema).zip(compiled));
    let spec = MethodSpec {
        name: m.name,
        kind: m.kind,
        description: m.description,
        docstring: m.docstring,
        params,
        returns,
    };
    (spec, checker)
}

fn check_text(what: &str, text: &str, max: usize, p: &mut impl FnMut(String)) {
    if text.len() <= max && text.trim().is_empty() {
        p(format!("{what} is empty"));
    } else if text.len() > max {
        p(format!(
            "{what} is {} bytes, more than the limit of {max}",
            text.len()
        ));
    }
}

fn check_identifier(what: &str, name: &str, p: &mut impl FnMut(String)) {
    if !is_identifier(name) {
        p(format!(
            "{what}: the name is not a Python identifier of at most {MAX_NAME_LEN} ASCII letters, digits and `_`"
        ));
    } else if PYTHON_KEYWORDS.contains(&name) {
        p(format!("{what}: the name is a Python keyword"));
    }
}

/// Parses `text` as a JSON Schema within the manifest's schema budget, bounds
/// it and compiles it (see [`crate::schema`]).
fn parse_schema(
    what: &str,
    text: &str,
    budget: &mut SchemaBudget,
    p: &mut impl FnMut(String),
) -> Option<(serde_json::Value, schema::Compiled)> {
    if text.len() > MAX_SCHEMA_LEN {
        p(format!(
            "{what} is {} bytes, more than the limit of {MAX_SCHEMA_LEN}",
            text.len()
        ));
        return None;
    }
    if text.len() > budget.0 {
        p(format!(
            "{what} would bring the manifest's schemas past the limit of {MAX_TOTAL_SCHEMA_BYTES} bytes"
        ));
        budget.0 = 0;
        return None;
    }
    budget.0 -= text.len();
    let schema: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            p(format!("{what} is not JSON: {e}"));
            return None;
        }
    };
    match schema::compile(&schema) {
        Ok(compiled) => Some((schema, compiled)),
        Err(e) => {
            p(format!("{what} {e}"));
            None
        }
    }
}

/// Whether `name` can name a method: a Python identifier of at most
/// [`MAX_NAME_LEN`] ASCII characters that is no keyword, shadows no builtin
/// and takes no reserved prefix (`sandwit_`, `__`).
pub fn is_free_method_name(name: &str) -> bool {
    is_identifier(name)
        && !PYTHON_KEYWORDS.contains(&name)
        && !PYTHON_BUILTINS.contains(&name)
        && !name.starts_with("__")
        && !name.starts_with(RESERVED_PREFIX)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= MAX_NAME_LEN
}

/// Whether `id` is a valid plugin id (what a manifest's `id` must be).
pub fn is_plugin_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && id.len() <= MAX_NAME_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(name: &str) -> RawMethod {
        RawMethod {
            name: name.into(),
            kind: MethodKind::Tool,
            description: "Does it.".into(),
            docstring: "Does it.\n\nArgs:\n    x: a number".into(),
            params: vec![RawParam {
                name: "x".into(),
                schema: r#"{"type":"integer"}"#.into(),
                required: true,
            }],
            returns: None,
        }
    }

    fn manifest(methods: Vec<RawMethod>) -> RawManifest {
        RawManifest {
            id: "demo".into(),
            name: "Demo".into(),
            version: "1.0.0".into(),
            author: "me".into(),
            description: "A demo.".into(),
            methods,
            config_schema: None,
            capabilities: vec![],
        }
    }

    #[test]
    fn accepts_a_good_manifest() {
        let m = check(manifest(vec![method("do_it")])).unwrap().manifest;
        assert_eq!(m.methods[0].params[0].schema["type"], "integer");
    }

    #[test]
    fn lists_every_problem() {
        let mut bad = manifest(vec![
            method("dup"),
            method("dup"),
            method("sandwit_x"),
            method("class"),
            method("9lives"),
        ]);
        bad.id = "Bad Id".into();
        bad.version = "one".into();
        bad.capabilities = vec!["root".into()];
        bad.methods[0].params[0].schema = r#"{"type": 12}"#.into();
        bad.methods[1].params[0].schema = "not json".into();
        bad.methods[1].docstring = " ".into();
        let problems = check(bad).err().unwrap();
        let all = problems.join("\n");
        for needle in [
            "id \"Bad Id\"",
            "version \"one\"",
            "unknown capability `root`",
            "\"dup\" is declared more than once",
            "reserved for the host",
            "Python keyword",
            "not a Python identifier",
            "not a valid JSON Schema",
            "is not JSON",
            "docstring is empty",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in:\n{all}");
        }
    }

    #[test]
    fn required_params_come_first() {
        let mut m = method("f");
        m.params.insert(
            0,
            RawParam {
                name: "opt".into(),
                schema: "{}".into(),
                required: false,
            },
        );
        let problems = check(manifest(vec![m])).err().unwrap();
        assert!(
            problems[0].contains("follows an optional one"),
            "{problems:?}"
        );
    }

    #[test]
    fn builtins_and_dunders_cannot_be_methods() {
        for name in ["print", "__import__", "__x", "open", "PluginError"] {
            let all = check(manifest(vec![method(name)]))
                .err()
                .unwrap()
                .join("\n");
            assert!(
                all.contains("would replace Python's builtin"),
                "{name}: {all}"
            );
        }
        assert!(check(manifest(vec![method("printer")])).is_ok());
    }

    #[test]
    fn problems_quote_little_and_are_counted_past_the_cap() {
        let huge = "x".repeat(20_000);
        let mut methods: Vec<_> = (0..MAX_METHODS).map(|_| method(&huge)).collect();
        methods[0].params[0].name = huge.clone();
        let problems = check(manifest(methods)).err().unwrap();
        assert_eq!(problems.len(), MAX_PROBLEMS + 1);
        assert!(problems.iter().all(|p| p.len() < 1_000), "quoted in full");
        assert!(
            problems[MAX_PROBLEMS].starts_with("and "),
            "{}",
            problems[MAX_PROBLEMS]
        );
    }

    #[test]
    fn the_schemas_of_a_manifest_share_one_budget() {
        // 24 KB of schema per parameter: under the per-schema limit, but 32
        // parameters of 256 methods would be 196 MB.
        let big = format!(
            r#"{{"anyOf": [{}]}}"#,
            vec![r#"{"type":"string","minLength":1}"#; 800].join(",")
        );
        assert!(big.len() < MAX_SCHEMA_LEN);
        let methods: Vec<_> = (0..40)
            .map(|i| {
                let mut m = method(&format!("m{i}"));
                m.params[0].schema = big.clone();
                m
            })
            .collect();
        let all = check(manifest(methods)).err().unwrap().join("\n");
        assert!(
            all.contains(&format!("past the limit of {MAX_TOTAL_SCHEMA_BYTES} bytes")),
            "{all}"
        );
    }

    #[test]
    fn a_manifest_too_large_is_refused_before_anything_else() {
        let mut m = manifest(vec![method("f")]);
        m.description = "d".repeat(MAX_MANIFEST_BYTES);
        let problems = check(m).err().unwrap();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("more than the limit"), "{problems:?}");
    }
}
