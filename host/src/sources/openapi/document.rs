//! Reading an operation of the document: its `$ref`s, its JSON media
//! types, and the problems that skip it.

use serde_json::Value as Json;

use super::text::cut;
use crate::sources::schema::{SchemaProblem, resolve};

/// Why an operation is not offered.
pub(super) enum Problem {
    /// The operation is skipped, for this reason.
    Skip(String),
    /// A schema of the operation is not taken (a document too large for
    /// any is refused whole).
    Schema(SchemaProblem),
}

impl From<SchemaProblem> for Problem {
    fn from(p: SchemaProblem) -> Self {
        Problem::Schema(p)
    }
}

/// An operation skipped for `why`.
pub(super) fn skip<T>(why: String) -> Result<T, Problem> {
    Err(Problem::Skip(why))
}

/// `value`, or what its `$ref` names (one level: parameters, bodies and
/// responses are named, not nested).
pub(super) fn follow<'a>(document: &'a Json, value: &'a Json) -> Result<&'a Json, Problem> {
    match value.get("$ref").and_then(Json::as_str) {
        Some(reference) => resolve(document, reference)
            .ok_or_else(|| SchemaProblem::Unresolved(cut(reference, 120)).into()),
        None => Ok(value),
    }
}

/// Whether `media` (parameters aside) is JSON: `application/json` or a
/// `+json` type.
pub(super) fn is_json(media: &str) -> bool {
    let media = media.split(';').next().unwrap_or("").trim();
    media == "application/json" || media.ends_with("+json")
}
