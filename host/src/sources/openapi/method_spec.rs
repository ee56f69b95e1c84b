//! What a method made of an operation says: its one-line description and
//! docstring (from the operation's summary and description, and its
//! parameters' descriptions) and its result's schema.

use serde_json::{Map, Value as Json};

use sandwit_contract::manifest::{MAX_DESCRIPTION_LEN, MAX_DOCSTRING_LEN};

use super::document::{Problem, follow, is_json};
use super::text::{clean, cut, one_line, text_of};
use crate::sources::schema::{Budget, standalone};

/// The method's one-line description: the operation's summary, else the
/// first line of its description, else `METHOD /path`.
pub(super) fn description(op: &Map<String, Json>, method: &http::Method, path: &str) -> String {
    let summary = text_of(op.get("summary"));
    let description = text_of(op.get("description"));
    let line = [summary.as_str(), description.lines().next().unwrap_or("")]
        .into_iter()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("{} {}", method, path));
    cut(&one_line(&line), MAX_DESCRIPTION_LEN)
}

/// The method's docstring: the operation's summary and description
/// (`METHOD /path` without either), then `docs`, its parameters'
/// descriptions, under `Args:`.
pub(super) fn docstring(
    op: &Map<String, Json>,
    method: &http::Method,
    path: &str,
    docs: &[(String, String)],
) -> String {
    let summary = text_of(op.get("summary"));
    let description = text_of(op.get("description"));
    let mut docstring = [summary.as_str(), description.as_str()]
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if docstring.is_empty() {
        docstring = format!("{} {}", method, path);
    }
    if !docs.is_empty() {
        docstring.push_str("\n\nArgs:");
        for (name, text) in docs {
            docstring.push_str(&format!("\n    {name}: {}", one_line(text)));
        }
    }
    cut(&clean(&docstring), MAX_DOCSTRING_LEN)
}

/// The schema of the first 2xx response with a JSON body.
pub(super) fn returns(
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
