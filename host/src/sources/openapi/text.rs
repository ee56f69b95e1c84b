//! The document's texts as methods show them: cut, on one line, without
//! control characters.

use sandwit_contract::manifest::MAX_DOCSTRING_LEN;
use serde_json::Value as Json;

/// A text of the document, cut to what a docstring may hold.
pub(super) fn text_of(value: Option<&Json>) -> String {
    let text = value.and_then(Json::as_str).unwrap_or("");
    cut(text, MAX_DOCSTRING_LEN).trim().to_string()
}

/// `text` on one line, its runs of white space one space each.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` without control characters but newlines and tabs.
pub(super) fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// `text` cut to `max` bytes (see [`sandwit_contract::text::cut`]).
pub(super) fn cut(text: &str, max: usize) -> String {
    sandwit_contract::text::cut(text.to_string(), max)
}
