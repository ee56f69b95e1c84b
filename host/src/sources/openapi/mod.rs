//! An OpenAPI 3.0 or 3.1 document's operations as method specs and the
//! plans that turn a call's arguments into a request: path, query and
//! header parameters and a JSON body flattened into one parameter list,
//! the first 2xx JSON response's schema as the result's. An operation this
//! cannot call faithfully (cookies, form bodies, other parameter styles) is
//! skipped with the reason, never half offered.
//!
//! [`operation`] takes one operation through its steps: its path checked
//! (`plan.rs`), its parameters (`parameters.rs`) and its body's
//! (`body.rs`) gathered, its texts and result's schema (`method_spec.rs`).
//! `names.rs` makes the Python names; `document.rs` follows `$ref`s and
//! names the problems that skip an operation.

mod body;
mod document;
mod method_spec;
mod names;
mod parameters;
mod plan;
#[cfg(test)]
mod tests;
mod text;

use std::collections::BTreeSet;

use serde_json::{Map, Value as Json};

use sandwit_contract::manifest::MethodSpec;
use sandwit_contract::tool_policy::{Auth, ToolSourcePolicy};
use sandwit_contract::types::MethodKind;

use super::schema::{Budget, SchemaProblem};
use body::add_body;
use document::Problem;
use method_spec::{description, docstring, returns};
pub(crate) use names::{method_name, python_name};
use parameters::parameters;
use plan::path_problem;
pub(crate) use plan::{Location, Plan};
// What a call's tests build plans of (call.rs).
#[cfg(test)]
pub(crate) use plan::WireParam;
use text::cut;

/// The HTTP methods an operation may have, as OpenAPI names them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

/// Operations one document may hold, offered or not: past it the document
/// is refused.
pub(crate) const MAX_OPERATIONS: usize = 10_000;

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

/// An operation of the document, where it is and what it is offered as.
struct OperationAt<'a> {
    /// Where the source's credential goes (a header or query parameter).
    credential: Option<(Location, &'a str)>,
    /// Its path template.
    path: &'a str,
    /// Its HTTP method, as OpenAPI names it (`get`).
    method: &'a str,
    /// Its path item.
    item: &'a Map<String, Json>,
    /// The operation.
    op: &'a Map<String, Json>,
    /// Its method name.
    name: String,
    /// Its method kind.
    kind: MethodKind,
}

/// The operation `at` as a method and the plan of its calls: its path
/// checked, its parameters and body's members gathered into one list
/// (required ones first), its result's schema and its texts. Skipped, with
/// the reason, if it cannot be called as the document says.
fn operation(document: &Json, budget: &mut Budget, at: OperationAt) -> Result<Operation, Problem> {
    let method = http::Method::from_bytes(at.method.to_ascii_uppercase().as_bytes())
        .expect("the methods are valid");
    if let Some(why) = path_problem(at.path) {
        return Err(Problem::Skip(why));
    }
    let mut params = parameters(document, budget, at.item, at.op, at.credential)?;
    let body_required = add_body(&mut params, document, budget, at.op)?;
    let params = params.in_signature_order()?;
    let returns = returns(document, at.op, budget)?;
    let spec = MethodSpec {
        name: at.name,
        kind: at.kind,
        description: description(at.op, &method, at.path),
        docstring: docstring(at.op, &method, at.path, &params.docs),
        params: params.specs,
        returns,
    };
    Ok(Operation {
        plan: Plan {
            method,
            path: at.path.to_string(),
            params: params.wire,
            body_required,
        },
        spec,
    })
}
