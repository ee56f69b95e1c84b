//! A plugin's manifest: the public types, and the checks every manifest must
//! pass before its plugin is accepted.

use std::collections::HashSet;

use serde::Serialize;

use crate::bindings::wit;
use crate::capability::Capability;
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

/// Python's keywords: no method or parameter may be named after one.
const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// What a plugin says about itself, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// One parameter, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Checks a manifest as the plugin described itself, returning it in the
/// host's types, or every problem found.
pub(crate) fn check(raw: wit::PluginManifest) -> Result<Manifest, Vec<String>> {
    let mut problems = Vec::new();
    let mut p = |s: String| problems.push(s);

    if !is_plugin_id(&raw.id) {
        p(format!(
            "id `{}` is not 1 to {MAX_NAME_LEN} lowercase letters, digits, `-` or `_` starting with a letter",
            raw.id
        ));
    }
    if semver::Version::parse(&raw.version).is_err() {
        p(format!(
            "version `{}` is not a semantic version like 1.0.0",
            raw.version
        ));
    }
    check_text("name", &raw.name, MAX_NAME_LEN, &mut p);
    check_text("author", &raw.author, MAX_NAME_LEN * 4, &mut p);
    check_text("description", &raw.description, MAX_DESCRIPTION_LEN, &mut p);
    let config_schema = raw
        .config_schema
        .as_deref()
        .and_then(|s| parse_schema("config schema", s, &mut p));

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
    for m in raw.methods.into_iter().take(MAX_METHODS) {
        if !seen.insert(m.name.clone()) {
            p(format!("method `{}` is declared more than once", m.name));
        }
        methods.push(check_method(m, &mut p));
    }

    if problems.is_empty() {
        Ok(Manifest {
            id: raw.id,
            name: raw.name,
            version: raw.version,
            author: raw.author,
            description: raw.description,
            methods,
            config_schema,
            capabilities,
        })
    } else {
        Err(problems)
    }
}

fn check_method(m: wit::MethodSpec, p: &mut impl FnMut(String)) -> MethodSpec {
    let name = &m.name;
    check_identifier(&format!("method `{name}`"), name, p);
    if name.starts_with(RESERVED_PREFIX) {
        p(format!(
            "method `{name}` uses the prefix `{RESERVED_PREFIX}`, which is reserved for the host"
        ));
    }
    check_text(
        &format!("method `{name}`: description"),
        &m.description,
        MAX_DESCRIPTION_LEN,
        p,
    );
    if m.description.contains('\n') {
        p(format!("method `{name}`: description is not one line"));
    }
    check_text(
        &format!("method `{name}`: docstring"),
        &m.docstring,
        MAX_DOCSTRING_LEN,
        p,
    );
    if m.params.len() > MAX_PARAMS {
        p(format!(
            "method `{name}` takes {} parameters, more than the limit of {MAX_PARAMS}",
            m.params.len()
        ));
    }
    let mut seen = HashSet::new();
    let mut optional_seen = false;
    let mut params = Vec::new();
    for param in m.params.into_iter().take(MAX_PARAMS) {
        let what = format!("method `{name}`, parameter `{}`", param.name);
        check_identifier(&what, &param.name, p);
        if !seen.insert(param.name.clone()) {
            p(format!("{what} is declared more than once"));
        }
        if param.required && optional_seen {
            p(format!("{what} is required but follows an optional one"));
        }
        optional_seen |= !param.required;
        let schema = parse_schema(&format!("{what}: schema"), &param.schema, p).unwrap_or_default();
        params.push(Param {
            name: param.name,
            schema,
            required: param.required,
        });
    }
    let returns = m
        .returns
        .as_deref()
        .and_then(|s| parse_schema(&format!("method `{name}`: returns schema"), s, p));
    MethodSpec {
        name: m.name,
        kind: m.kind.into(),
        description: m.description,
        docstring: m.docstring,
        params,
        returns,
    }
}

fn check_text(what: &str, text: &str, max: usize, p: &mut impl FnMut(String)) {
    if text.trim().is_empty() {
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

/// Parses `text` as a JSON Schema and checks it against the meta-schema.
fn parse_schema(what: &str, text: &str, p: &mut impl FnMut(String)) -> Option<serde_json::Value> {
    if text.len() > MAX_SCHEMA_LEN {
        p(format!(
            "{what} is {} bytes, more than the limit of {MAX_SCHEMA_LEN}",
            text.len()
        ));
        return None;
    }
    let schema: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            p(format!("{what} is not JSON: {e}"));
            return None;
        }
    };
    if let Err(e) = jsonschema::meta::validate(&schema) {
        p(format!("{what} is not a valid JSON Schema: {e}"));
        return None;
    }
    if let Err(e) = jsonschema::validator_for(&schema) {
        p(format!("{what} cannot be used: {e}"));
        return None;
    }
    Some(schema)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= MAX_NAME_LEN
}

/// Whether `id` is a valid plugin id.
pub(crate) fn is_plugin_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && id.len() <= MAX_NAME_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(name: &str) -> wit::MethodSpec {
        wit::MethodSpec {
            name: name.into(),
            kind: wit::MethodKind::Tool,
            description: "Does it.".into(),
            docstring: "Does it.\n\nArgs:\n    x: a number".into(),
            params: vec![wit::Param {
                name: "x".into(),
                schema: r#"{"type":"integer"}"#.into(),
                required: true,
            }],
            returns: None,
        }
    }

    fn manifest(methods: Vec<wit::MethodSpec>) -> wit::PluginManifest {
        wit::PluginManifest {
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
        let m = check(manifest(vec![method("do_it")])).unwrap();
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
        let problems = check(bad).unwrap_err();
        let all = problems.join("\n");
        for needle in [
            "id `Bad Id`",
            "version `one`",
            "unknown capability `root`",
            "`dup` is declared more than once",
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
            wit::Param {
                name: "opt".into(),
                schema: "{}".into(),
                required: false,
            },
        );
        let problems = check(manifest(vec![m])).unwrap_err();
        assert!(
            problems[0].contains("follows an optional one"),
            "{problems:?}"
        );
    }
}
