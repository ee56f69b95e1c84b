//! An OpenAPI 3.0 or 3.1 document's operations as method specs and the
//! plans that turn a call's arguments into a request: path, query and
//! header parameters and a JSON body flattened into one parameter list,
//! the first 2xx JSON response's schema as the result's. An operation this
//! cannot call faithfully (cookies, form bodies, other parameter styles) is
//! skipped with the reason, never half offered.

use std::collections::BTreeSet;

use serde_json::{Map, Value as Json};
use sha2::Digest as _;

use sandwit_contract::manifest::{
    MAX_DESCRIPTION_LEN, MAX_DOCSTRING_LEN, MAX_NAME_LEN, MAX_PARAMS, MethodSpec, Param,
    RESERVED_PREFIX, is_free_method_name,
};
use sandwit_contract::tool_policy::{Auth, ToolSourcePolicy};
use sandwit_contract::types::MethodKind;

use super::schema::{Budget, SchemaProblem, required, resolve, standalone};

/// The HTTP methods an operation may have, as OpenAPI names them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

/// Operations one document may hold, offered or not: past it the document
/// is refused.
pub(crate) const MAX_OPERATIONS: usize = 10_000;

/// Where a parameter goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    Path,
    Query,
    Header,
    /// A member of the JSON body.
    BodyMember,
    /// The whole JSON body.
    Body,
}

/// One parameter of an operation: its Python name and its name on the wire.
#[derive(Debug, Clone)]
pub(crate) struct WireParam {
    pub name: String,
    pub wire: String,
    pub location: Location,
}

/// What a call of one operation sends.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub method: http::Method,
    /// The path as the document writes it (`/items/{item_id}`).
    pub path: String,
    pub params: Vec<WireParam>,
    /// Whether a body is sent even with no member given (`{}`).
    pub body_required: bool,
}

/// An operation ready to be offered.
pub(crate) struct Operation {
    pub plan: Plan,
    pub spec: MethodSpec,
}

/// What was not offered, and why.
#[derive(Debug, Clone)]
pub(crate) struct Skipped {
    pub operation: String,
    pub why: String,
}

/// The operations of `document` that `source` offers (all of them, named
/// as they are, without one), and those skipped.
pub(crate) fn operations(
    document: &Json,
    source: Option<&ToolSourcePolicy>,
) -> Result<(Vec<Operation>, Vec<Skipped>), String> {
    let version = document
        .get("openapi")
        .and_then(Json::as_str)
        .ok_or("it is not an OpenAPI 3 document (no `openapi` version; Swagger 2 is not read)")?;
    if !(version.starts_with("3.0") || version.starts_with("3.1")) {
        return Err(format!(
            "it is OpenAPI {}, and only 3.0 and 3.1 are read",
            cut(version, 20)
        ));
    }
    let paths = document
        .get("paths")
        .and_then(Json::as_object)
        .ok_or("it has no `paths`")?;
    let mut budget = Budget::new();
    let (mut offered, mut skipped) = (Vec::new(), Vec::new());
    let mut names = BTreeSet::new();
    let mut seen = 0usize;
    for (path, item) in paths {
        let Some(item) = item.as_object() else {
            continue;
        };
        for method in METHODS {
            let Some(op) = item.get(method).and_then(Json::as_object) else {
                continue;
            };
            seen += 1;
            if seen > MAX_OPERATIONS {
                return Err(format!("it has more than {MAX_OPERATIONS} operations"));
            }
            let operation_id = match op.get("operationId").and_then(Json::as_str) {
                Some(id) => id.to_string(),
                None => format!("{method}_{path}"),
            };
            if source.is_some_and(|s| !s.offers(&operation_id)) {
                continue;
            }
            let prefix = source.map_or("", |s| s.prefix.as_str());
            let skip = |why: String| Skipped {
                operation: cut(&operation_id, 120),
                why,
            };
            let name = match method_name(prefix, &operation_id) {
                Ok(name) => name,
                Err(why) => {
                    skipped.push(skip(why));
                    continue;
                }
            };
            if !names.insert(name.clone()) {
                skipped.push(skip(format!(
                    "its method name `{name}` is another operation's (rename with `prefix`)"
                )));
                continue;
            }
            let kind = source
                .and_then(|s| s.kinds.get(&operation_id))
                .copied()
                .unwrap_or(MethodKind::Tool);
            let credential = source.and_then(|s| match &s.auth {
                Some(Auth::Header { name, .. }) => Some((Location::Header, name.as_str())),
                Some(Auth::Query { name, .. }) => Some((Location::Query, name.as_str())),
                _ => None,
            });
            match operation(
                document,
                &mut budget,
                OperationAt {
                    credential,
                    path,
                    method,
                    item,
                    op,
                    name,
                    kind,
                },
            ) {
                Ok(operation) => offered.push(operation),
                Err(Problem::Skip(why)) => skipped.push(skip(why)),
                Err(Problem::Schema(SchemaProblem::TooLarge)) => {
                    return Err(SchemaProblem::TooLarge.to_string());
                }
                Err(Problem::Schema(problem)) => skipped.push(skip(problem.to_string())),
            }
        }
    }
    Ok((offered, skipped))
}

enum Problem {
    Skip(String),
    Schema(SchemaProblem),
}

impl From<SchemaProblem> for Problem {
    fn from(p: SchemaProblem) -> Self {
        Problem::Schema(p)
    }
}

struct OperationAt<'a> {
    /// Where the source's credential goes (a header or query parameter).
    credential: Option<(Location, &'a str)>,
    path: &'a str,
    method: &'a str,
    item: &'a Map<String, Json>,
    op: &'a Map<String, Json>,
    name: String,
    kind: MethodKind,
}

/// Header parameters a document may not have the AI fill in: those the
/// host writes, those that frame or route the request, and those a proxy or
/// framework in front of the server may take for the request's real
/// target, origin or method (`X-Original-URL` reaching a path the base URL
/// does not, `X-HTTP-Method-Override` making a `GET` a `DELETE`). Every
/// `X-Forwarded-*` header too ([`is_host_header`]).
const HOST_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "content-type",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "connection",
    "proxy-connection",
    "keep-alive",
    "upgrade",
    "expect",
    "accept",
    "host",
    "cookie",
    "forwarded",
    "via",
    "max-forwards",
    "x-original-url",
    "x-original-uri",
    "x-rewrite-url",
    "x-override-url",
    "x-original-host",
    "x-host",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "x-original-method",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Whether the header `name` (in lower case) is one the AI may not set
/// ([`HOST_HEADERS`], `X-Forwarded-*`).
fn is_host_header(name: &str) -> bool {
    HOST_HEADERS.contains(&name) || name.starts_with("x-forwarded-")
}

/// Why the path template `path` may not be called, if it may not: it must
/// stay under the base URL's path (no `.` or `..` segment) and be a path
/// only. A percent-encoded `.`, `/`, `\`, `%` or control character is
/// refused wherever it stands: a server or proxy that decodes before it
/// normalises reads `%2E%2e%2f` as `../`, and one that decodes twice reads
/// `%252e` as `.`; a path written to be called needs none of them.
fn path_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some("its path does not begin with `/`".into());
    }
    if path.contains(['?', '#', '\\']) || path.chars().any(char::is_control) {
        return Some("its path holds `?`, `#`, `\\` or a control character".into());
    }
    let hex = |b: u8| char::from(b).to_digit(16);
    let encoded = path.as_bytes().windows(3).find(|w| {
        let (Some(high), Some(low)) = (hex(w[1]), hex(w[2])) else {
            return false;
        };
        let byte = (high * 16 + low) as u8;
        w[0] == b'%' && (b"./\\%".contains(&byte) || byte.is_ascii_control())
    });
    if let Some(escape) = encoded {
        return Some(format!(
            "its path holds `{}`, a percent-encoded `.`, `/`, `\\`, `%` or control character, \
             which a server may decode into a step out of its base or a character no \
             path holds",
            String::from_utf8_lossy(escape)
        ));
    }
    let dots = path
        .split('/')
        .any(|segment| segment == "." || segment == "..");
    dots.then(|| "its path has a `.` or `..` segment".into())
}

fn operation(document: &Json, budget: &mut Budget, at: OperationAt) -> Result<Operation, Problem> {
    let skip = |why: String| Err(Problem::Skip(why));
    let method = http::Method::from_bytes(at.method.to_ascii_uppercase().as_bytes())
        .expect("the methods are valid");
    if let Some(why) = path_problem(at.path) {
        return skip(why);
    }
    // The path item's parameters, overridden by the operation's (by name
    // and location); more than can be offered are not looked at one by one.
    let lists = [at.item.get("parameters"), at.op.get("parameters")];
    let count: usize = lists
        .iter()
        .flatten()
        .map(|l| l.as_array().map_or(0, Vec::len))
        .sum();
    if count > 4 * MAX_PARAMS {
        return skip(format!(
            "it declares {count} parameters, more than the limit of {MAX_PARAMS}"
        ));
    }
    let mut raw: Vec<&Map<String, Json>> = Vec::new();
    for list in lists.into_iter().flatten() {
        for p in list.as_array().into_iter().flatten() {
            let p = follow(document, p)?;
            let Some(p) = p.as_object() else {
                return skip("a parameter is not an object".into());
            };
            let key = |p: &Map<String, Json>| (p.get("name").cloned(), p.get("in").cloned());
            raw.retain(|q| key(q) != key(p));
            raw.push(p);
        }
    }
    let mut params = Vec::new();
    let mut specs = Vec::new();
    let mut docs = Vec::new();
    for p in raw {
        let wire = p.get("name").and_then(Json::as_str).unwrap_or_default();
        let location = match p.get("in").and_then(Json::as_str) {
            Some("path") => Location::Path,
            Some("query") => Location::Query,
            Some("header") => Location::Header,
            Some(other) => {
                return skip(format!(
                    "its parameter `{}` is in `{}`, which is not sent",
                    cut(wire, 60),
                    cut(other, 20)
                ));
            }
            None => return skip(format!("its parameter `{}` has no `in`", cut(wire, 60))),
        };
        let lower = wire.to_ascii_lowercase();
        if location == Location::Header && is_host_header(&lower) {
            // The host writes these itself, or they frame or route the
            // request.
            continue;
        }
        if at
            .credential
            .is_some_and(|(at_loc, name)| at_loc == location && name.eq_ignore_ascii_case(wire))
        {
            // The source's credential goes there.
            continue;
        }
        if p.contains_key("content") {
            return skip(format!(
                "its parameter `{}` is encoded by a media type, which is not supported",
                cut(wire, 60)
            ));
        }
        let default_style = if location == Location::Query {
            "form"
        } else {
            "simple"
        };
        let style_ok = p
            .get("style")
            .and_then(Json::as_str)
            .is_none_or(|s| s == default_style);
        let explode_ok =
            location != Location::Query || p.get("explode") != Some(&Json::Bool(false));
        if !style_ok || !explode_ok {
            return skip(format!(
                "its parameter `{}` uses a serialization style other than the default",
                cut(wire, 60)
            ));
        }
        let schema = match p.get("schema") {
            Some(schema) => standalone(document, schema, budget)?,
            None => Json::Object(Map::new()),
        };
        let required =
            location == Location::Path || p.get("required").and_then(Json::as_bool) == Some(true);
        let name = param_name(wire, location);
        if let Some(text) = p.get("description").and_then(Json::as_str) {
            docs.push((name.clone(), cut(text, 1_000)));
        }
        specs.push(Param {
            name: name.clone(),
            schema,
            required,
        });
        params.push(WireParam {
            name,
            wire: wire.to_string(),
            location,
        });
    }
    let mut body_required = false;
    if let Some(body) = at.op.get("requestBody") {
        let body = follow(document, body)?;
        body_required = body.get("required").and_then(Json::as_bool) == Some(true);
        let content = body.get("content").and_then(Json::as_object);
        let json = content.and_then(|c| {
            c.iter()
                .find(|(media, _)| is_json(media))
                .map(|(_, value)| value)
        });
        let Some(json) = json else {
            let types: Vec<&str> = content
                .map(|c| c.keys().map(String::as_str).collect())
                .unwrap_or_default();
            return skip(format!(
                "its body is not JSON ({}), which is not sent",
                cut(&types.join(", "), 120)
            ));
        };
        let schema = match json.get("schema") {
            Some(schema) => standalone(document, schema, budget)?,
            None => Json::Object(Map::new()),
        };
        let members = schema.get("properties").and_then(Json::as_object);
        let taken: BTreeSet<&str> = params.iter().map(|p| p.name.as_str()).collect();
        let flat = members.filter(|members| {
            schema.get("additionalProperties").is_none()
                && members.len() + params.len() <= MAX_PARAMS
                && members
                    .keys()
                    .all(|m| !taken.contains(param_name(m, Location::BodyMember).as_str()))
        });
        match flat {
            Some(members) => {
                let required = required(&schema);
                for (member, member_schema) in members {
                    let name = param_name(member, Location::BodyMember);
                    if let Some(text) = member_schema.get("description").and_then(Json::as_str) {
                        docs.push((name.clone(), cut(text, 1_000)));
                    }
                    specs.push(Param {
                        name: name.clone(),
                        schema: member_schema.clone(),
                        required: body_required && required.contains(member.as_str()),
                    });
                    params.push(WireParam {
                        name,
                        wire: member.clone(),
                        location: Location::BodyMember,
                    });
                }
            }
            None => {
                let name = if taken.contains("body") {
                    "request_body"
                } else {
                    "body"
                };
                specs.push(Param {
                    name: name.into(),
                    schema,
                    required: body_required,
                });
                params.push(WireParam {
                    name: name.into(),
                    wire: String::new(),
                    location: Location::Body,
                });
            }
        }
    }
    if specs.len() > MAX_PARAMS {
        return skip(format!(
            "it takes {} parameters, more than the limit of {MAX_PARAMS}",
            specs.len()
        ));
    }
    let names: BTreeSet<&str> = specs.iter().map(|p| p.name.as_str()).collect();
    if names.len() != specs.len() {
        return skip("two of its parameters have one Python name".into());
    }
    // Required parameters first, as a Python signature needs; the order
    // within each stays the document's.
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by_key(|&i| !specs[i].required);
    let specs: Vec<Param> = order.iter().map(|&i| specs[i].clone()).collect();
    let params: Vec<WireParam> = order.iter().map(|&i| params[i].clone()).collect();

    let returns = returns(document, at.op, budget)?;
    let summary = text_of(at.op.get("summary"));
    let description = text_of(at.op.get("description"));
    let line = [summary.as_str(), description.lines().next().unwrap_or("")]
        .into_iter()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("{} {}", method, at.path));
    let mut docstring = [summary.as_str(), description.as_str()]
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if docstring.is_empty() {
        docstring = format!("{} {}", method, at.path);
    }
    if !docs.is_empty() {
        docstring.push_str("\n\nArgs:");
        for (name, text) in &docs {
            docstring.push_str(&format!("\n    {name}: {}", one_line(text)));
        }
    }
    let spec = MethodSpec {
        name: at.name,
        kind: at.kind,
        description: cut(&one_line(&line), MAX_DESCRIPTION_LEN),
        docstring: cut(&clean(&docstring), MAX_DOCSTRING_LEN),
        params: specs,
        returns,
    };
    Ok(Operation {
        plan: Plan {
            method,
            path: at.path.to_string(),
            params,
            body_required,
        },
        spec,
    })
}

/// The schema of the first 2xx response with a JSON body.
fn returns(
    document: &Json,
    op: &Map<String, Json>,
    budget: &mut Budget,
) -> Result<Option<Json>, Problem> {
    let Some(responses) = op.get("responses").and_then(Json::as_object) else {
        return Ok(None);
    };
    let mut codes: Vec<&String> = responses
        .keys()
        .filter(|c| c.starts_with('2') || c.as_str() == "2XX")
        .collect();
    codes.sort();
    for code in codes {
        let response = follow(document, &responses[code])?;
        let schema = response
            .get("content")
            .and_then(Json::as_object)
            .and_then(|c| c.iter().find(|(media, _)| is_json(media)))
            .and_then(|(_, media)| media.get("schema"));
        if let Some(schema) = schema {
            return Ok(Some(standalone(document, schema, budget)?));
        }
    }
    Ok(None)
}

/// `value`, or what its `$ref` names (one level: parameters, bodies and
/// responses are named, not nested).
fn follow<'a>(document: &'a Json, value: &'a Json) -> Result<&'a Json, Problem> {
    match value.get("$ref").and_then(Json::as_str) {
        Some(reference) => resolve(document, reference)
            .ok_or_else(|| SchemaProblem::Unresolved(cut(reference, 120)).into()),
        None => Ok(value),
    }
}

fn is_json(media: &str) -> bool {
    let media = media.split(';').next().unwrap_or("").trim();
    media == "application/json" || media.ends_with("+json")
}

/// A Python name for a parameter: a header's in lower case.
fn param_name(wire: &str, location: Location) -> String {
    if location == Location::Header {
        python_name(&wire.to_ascii_lowercase())
    } else {
        python_name(wire)
    }
}

/// The method name of the operation or tool `name` after `prefix`, or why
/// it has none. Python reads an identifier in its NFKC form, so a name in
/// fullwidth letters (`ｄｉｖｉｄｅ`) is `divide` there: it is refused rather
/// than taken for the ASCII name it imitates (another tool's, perhaps) or
/// turned into `_`s. A name that comes to a reserved prefix (`__`, Python's
/// own names; `sandwit_`, the host's) is refused with that reason.
pub(crate) fn method_name(prefix: &str, name: &str) -> Result<String, String> {
    let shown = cut(name, 60);
    let fullwidth = |c: char| ('\u{FF01}'..='\u{FF5E}').contains(&c);
    if name.chars().any(fullwidth) {
        let read: String = name
            .chars()
            .map(|c| {
                if fullwidth(c) {
                    // The fullwidth forms are ASCII's `!` to `~`, 0xFEE0 up.
                    char::from_u32(u32::from(c) - 0xFEE0).unwrap_or(c)
                } else {
                    c
                }
            })
            .collect();
        return Err(format!(
            "its name `{shown}` is written in fullwidth characters, which Python reads as `{}`: \
             a method name is ASCII letters, digits and `_`, and a look-alike is not taken for \
             the name it imitates",
            cut(&read, 60)
        ));
    }
    let method = python_name(&format!("{prefix}{name}"));
    if is_free_method_name(&method) {
        return Ok(method);
    }
    Err(if !name.chars().any(|c| c.is_ascii_alphanumeric()) {
        format!(
            "its name `{shown}` has no ASCII letter or digit to make a Python name of (a method \
             name is ASCII letters, digits and `_`; it would be `{method}`)"
        )
    } else if method.starts_with("__") {
        format!("its method name `{method}` begins with `__`, which Python's own names take")
    } else {
        format!(
            "its method name `{method}` begins with `{RESERVED_PREFIX}`, which the host's own \
             methods take (rename with `prefix`)"
        )
    })
}

/// `text` as a Python name no keyword, builtin or reserved prefix takes
/// ([`identifier`], then `_` after it if need be).
pub(crate) fn python_name(text: &str) -> String {
    let name = identifier(text);
    if is_free_method_name(&name) {
        name
    } else {
        identifier(&format!("{name}_"))
    }
}

/// `text` as a Python identifier: other characters as `_`, a leading digit
/// after `op_`, and a name longer than [`MAX_NAME_LEN`] cut, with 8 hex
/// digits of its SHA-256 to tell it from others cut alike.
pub(crate) fn identifier(text: &str) -> String {
    let mut name: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "op_");
    }
    if name.len() > MAX_NAME_LEN {
        let hash = sha2::Sha256::digest(text.as_bytes());
        let hex: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
        name.truncate(MAX_NAME_LEN - 9);
        name = format!("{name}_{hex}");
    }
    name
}

/// A text of the document, cut to what a docstring may hold.
fn text_of(value: Option<&Json>) -> String {
    let text = value.and_then(Json::as_str).unwrap_or("");
    cut(text, MAX_DOCSTRING_LEN).trim().to_string()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` without control characters but newlines and tabs.
fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

fn cut(text: &str, max: usize) -> String {
    sandwit_contract::text::cut(text.to_string(), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source(operations: &[&str]) -> ToolSourcePolicy {
        let policy = sandwit_contract::Policy::from_toml(&format!(
            "[tools.shop]\nopenapi = \"spec.json\"\nbase_url = \"http://127.0.0.1:1\"\noperations = {operations:?}\nprefix = \"shop_\"\n"
        ))
        .unwrap();
        policy.tool("shop").unwrap().clone()
    }

    fn document() -> Json {
        json!({
            "openapi": "3.1.0",
            "paths": {
                "/items/{item_id}": {
                    "parameters": [{"name": "item_id", "in": "path", "required": true,
                                    "schema": {"type": "integer"}}],
                    "get": {
                        "operationId": "get_item",
                        "summary": "Read an item",
                        "parameters": [
                            {"name": "q", "in": "query", "schema": {"type": "string"},
                             "description": "A filter"},
                            {"name": "X-Trace-Id", "in": "header", "schema": {"type": "string"}},
                        ],
                        "responses": {"200": {"content": {"application/json": {"schema":
                            {"$ref": "#/components/schemas/Item"}}}}},
                    },
                },
                "/items": {"post": {
                    "operationId": "create_item",
                    "requestBody": {"required": true, "content": {"application/json": {"schema":
                        {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"}, "price": {"type": "number"}}}}}},
                    "responses": {"201": {"content": {"application/json": {"schema":
                        {"$ref": "#/components/schemas/Item"}}}}},
                }},
                "/upload": {"post": {
                    "operationId": "upload",
                    "requestBody": {"content": {"multipart/form-data": {"schema": {}}}},
                }},
                "/session": {"get": {
                    "operationId": "session",
                    "parameters": [{"name": "sid", "in": "cookie"}],
                }},
            },
            "components": {"schemas": {"Item": {"type": "object", "properties": {
                "id": {"type": "integer"}, "name": {"type": "string"}}}}},
        })
    }

    #[test]
    fn operations_become_methods_with_flat_parameters() {
        let (offered, skipped) = operations(&document(), Some(&source(&["*"]))).unwrap();
        // In the document's order.
        let names: Vec<&str> = offered.iter().map(|o| o.spec.name.as_str()).collect();
        assert_eq!(names, ["shop_get_item", "shop_create_item"]);
        let get = &offered[0];
        assert_eq!(
            get.spec.signature(),
            "shop_get_item(item_id, q=None, x_trace_id=None)"
        );
        assert_eq!(get.spec.description, "Read an item");
        assert!(
            get.spec.docstring.contains("q: A filter"),
            "{}",
            get.spec.docstring
        );
        assert_eq!(
            get.spec.returns.as_ref().unwrap()["properties"]["id"]["type"],
            "integer"
        );
        assert_eq!(get.plan.params[2].wire, "X-Trace-Id");
        let create = &offered[1];
        assert_eq!(
            create.spec.signature(),
            "shop_create_item(name, price=None)"
        );
        assert!(create.plan.body_required);
        assert_eq!(create.plan.params[0].location, Location::BodyMember);
        let why: Vec<String> = skipped
            .iter()
            .map(|s| format!("{}: {}", s.operation, s.why))
            .collect();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(
            why[0].starts_with("upload: its body is not JSON (multipart/form-data)"),
            "{why:?}"
        );
        assert!(
            why[1].starts_with("session: its parameter `sid` is in `cookie`"),
            "{why:?}"
        );
    }

    #[test]
    fn only_the_named_operations_are_offered() {
        let (offered, skipped) = operations(&document(), Some(&source(&["get_*"]))).unwrap();
        assert_eq!(offered.len(), 1);
        assert!(skipped.is_empty());
    }

    #[test]
    fn names_are_python_identifiers() {
        assert_eq!(
            identifier("read_item_items__item_id__get"),
            "read_item_items__item_id__get"
        );
        assert_eq!(identifier("my-tool.v2"), "my_tool_v2");
        assert_eq!(identifier("2fa"), "op_2fa");
        let long = identifier(&"x".repeat(100));
        assert_eq!(long.len(), MAX_NAME_LEN);
        assert_ne!(long, identifier(&"x".repeat(101)));
        assert_eq!(param_name("class", Location::Query), "class_");
    }

    #[test]
    fn other_documents_are_refused() {
        let err = operations(&json!({"swagger": "2.0"}), None).err().unwrap();
        assert!(err.contains("Swagger 2 is not read"), "{err}");
    }

    #[test]
    fn paths_and_headers_that_escape_are_skipped() {
        for path in [
            "/../admin/{x}",
            "/a/%2e%2E/b",
            "/x?debug=1",
            "/x#",
            "x/{y}",
            "/a\\b",
            // Percent-encoded dots, slashes, backslashes, escapes, controls.
            "/files/%2E%2e%2f/etc/{x}",
            "/a%2Fb",
            "/a/.%2e/b",
            "/a/%5c..",
            "/a/%252e%252e/b",
            "/a/%00",
        ] {
            assert!(path_problem(path).is_some(), "{path}");
        }
        for path in [
            "/items/{item_id}/v1.2",
            "/caf%C3%A9/{x}",
            "/a%20b",
            "/a/..b/c.",
        ] {
            assert!(path_problem(path).is_none(), "{path}");
        }
        let document = json!({"openapi": "3.1.0", "paths": {
            "/files/%2E%2e%2f{name}": {"get": {"operationId": "escape"}},
            "/files/{name}": {"get": {"operationId": "read"}},
        }});
        let (offered, skipped) = operations(&document, None).unwrap();
        assert_eq!(offered.len(), 1);
        assert_eq!(skipped[0].operation, "escape");
        assert!(
            skipped[0]
                .why
                .contains("its path holds `%2E`, a percent-encoded `.`"),
            "{}",
            skipped[0].why
        );
        let document = json!({"openapi": "3.1.0", "paths": {"/x": {"get": {
            "operationId": "x",
            "parameters": [
                {"name": "Content-Length", "in": "header", "schema": {"type": "string"}},
                {"name": "api_key", "in": "query", "schema": {"type": "string"}},
                {"name": "q", "in": "query", "schema": {"type": "string"}},
            ],
        }}}});
        let policy = sandwit_contract::Policy::from_toml(
            "[tools.s]\nopenapi = \"s.json\"\nbase_url = \"http://127.0.0.1:1\"\noperations = [\"*\"]\n\
             auth = { type = \"query\", name = \"api_key\", value = \"secret-123\" }\n",
        )
        .unwrap();
        let (offered, _) = operations(&document, policy.tool("s")).unwrap();
        // Neither the framing header nor the credential's own parameter is
        // the AI's to fill.
        assert_eq!(offered[0].spec.signature(), "x(q=None)");
    }

    #[test]
    fn body_members_keep_the_documents_order() {
        // Parsed from text, as a document is. GitHub's
        // repos/create-or-update-file-contents: `message` before `content`.
        let document = crate::sources::spec::parse(
            br#"{"openapi": "3.1.0", "paths": {"/repos/{owner}/{repo}/contents/{path}": {"put": {
                "operationId": "repos/create-or-update-file-contents",
                "parameters": [
                    {"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "path", "in": "path", "required": true, "schema": {"type": "string"}}
                ],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["message", "content"],
                    "properties": {"message": {"type": "string"}, "content": {"type": "string"},
                                   "sha": {"type": "string"}, "branch": {"type": "string"}}}}}}
            }}}}"#,
        )
        .unwrap();
        let (offered, _) = operations(&document, None).unwrap();
        assert_eq!(
            offered[0].spec.signature(),
            "repos_create_or_update_file_contents(owner, repo, path, message, content, \
             sha=None, branch=None)"
        );
        let wires: Vec<&str> = offered[0]
            .plan
            .params
            .iter()
            .map(|p| p.wire.as_str())
            .collect();
        assert_eq!(
            wires,
            [
                "owner", "repo", "path", "message", "content", "sha", "branch"
            ]
        );
    }

    #[test]
    fn headers_that_override_the_target_or_method_are_not_offered() {
        let header =
            |name: &str| json!({"name": name, "in": "header", "schema": {"type": "string"}});
        let document = json!({"openapi": "3.1.0", "paths": {"/x": {"get": {
            "operationId": "x",
            "parameters": [
                header("X-Original-URL"),
                header("X-Rewrite-URL"),
                header("X-Forwarded-Host"),
                header("X-Forwarded-Prefix"),
                header("x-forwarded-for"),
                header("X-HTTP-Method-Override"),
                header("X-HTTP-Method"),
                header("X-Method-Override"),
                header("Forwarded"),
                header("X-Request-Id"),
            ],
        }}}});
        let (offered, _) = operations(&document, None).unwrap();
        assert_eq!(offered[0].spec.signature(), "x(x_request_id=None)");
    }

    #[test]
    fn a_name_that_makes_no_method_name_is_skipped_saying_why() {
        let why = method_name("", "\u{ff44}\u{ff49}\u{ff56}\u{ff49}\u{ff44}\u{ff45}").unwrap_err();
        assert!(
            why.contains("is written in fullwidth characters, which Python reads as `divide`"),
            "{why}"
        );
        // Fullwidth among ASCII, and after a prefix: still a look-alike.
        let why = method_name("shop_", "get_\u{ff49}tem").unwrap_err();
        assert!(why.contains("reads as `get_item`"), "{why}");
        let why = method_name("", "\u{5929}\u{6c14}").unwrap_err();
        assert!(why.contains("has no ASCII letter or digit"), "{why}");
        let why = method_name("", "__init__").unwrap_err();
        assert!(why.contains("begins with `__`"), "{why}");
        let why = method_name("", "sandwit_run").unwrap_err();
        assert!(why.contains("begins with `sandwit_`"), "{why}");
        assert_eq!(
            method_name("shop_", "my-tool.v2").unwrap(),
            "shop_my_tool_v2"
        );
        assert_eq!(method_name("", "print").unwrap(), "print_");
    }
}
