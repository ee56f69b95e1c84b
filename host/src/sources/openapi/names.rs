//! Python names for operations, tools and parameters.

use sha2::Digest as _;

use sandwit_contract::manifest::{MAX_NAME_LEN, RESERVED_PREFIX, is_free_method_name};

use super::plan::Location;
use super::text::cut;

/// A Python name for a parameter: a header's in lower case.
pub(super) fn param_name(wire: &str, location: Location) -> String {
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
