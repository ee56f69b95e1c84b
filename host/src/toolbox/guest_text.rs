//! Text a plugin or a tool source wrote (a docstring, a description), as
//! the listings show it to the LLM: every character that is invisible or
//! reorders the text escaped, and, inside a Python docstring, no way to end
//! the docstring.

use std::fmt::Write as _;

/// `text` with every character that is invisible or reorders the text
/// around it shown as its Python escape (`\u202e`): controls but `\n` and
/// `\t`, Unicode's format characters (bidi embeddings, overrides and
/// isolates, marks, zero-width characters, tags), line and paragraph
/// separators, and the invisible filler letters. What a plugin or tool
/// source wrote then reads, to the LLM and to a person, in the order and
/// with the characters it has.
pub fn visible(text: &str) -> String {
    let text = text.replace("\r\n", "\n");
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hidden(c) {
            let code = u32::from(c);
            let _ = match code {
                0..=0xFF => write!(out, "\\x{code:02x}"),
                0x100..=0xFFFF => write!(out, "\\u{code:04x}"),
                _ => write!(out, "\\U{code:08x}"),
            };
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` as the body of a `"""` docstring in the Python listing
/// ([`Toolbox::prompt`](crate::toolbox::Toolbox::prompt)): [`visible`],
/// and each `"` of a run of three or more escaped (`\"`). No run of three unescaped quotes is left, so the
/// text cannot end the docstring and be read as code (a method of another
/// plugin, say): a `\` written before a run pairs with its first escape's
/// and frees one quote, never three.
pub(crate) fn docstring_body(text: &str) -> String {
    let text = visible(text);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find('"') {
        out.push_str(&rest[..at]);
        let run = rest[at..].len() - rest[at..].trim_start_matches('"').len();
        if run >= 3 {
            out.push_str(&"\\\"".repeat(run));
        } else {
            out.push_str(&rest[at..at + run]);
        }
        rest = &rest[at + run..];
    }
    out.push_str(rest);
    out
}

/// Whether [`visible`] shows `c` as its escape.
fn is_hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            u32::from(c),
            0x00AD
                | 0x034F
                | 0x0600..=0x0605
                | 0x061C
                | 0x06DD
                | 0x070F
                | 0x0890..=0x0891
                | 0x08E2
                | 0x115F..=0x1160
                | 0x17B4..=0x17B5
                | 0x180B..=0x180F
                | 0x200B..=0x200F
                | 0x2028..=0x202E
                | 0x2060..=0x206F
                | 0x3164
                | 0xFEFF
                | 0xFFA0
                | 0xFFF9..=0xFFFB
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0000..=0xE007F
        )
}
