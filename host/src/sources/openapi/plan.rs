//! What a call of an operation sends: its HTTP method, its path template
//! (checked to stay under the base URL) and where each parameter goes.

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

/// Why the path template `path` may not be called, if it may not: it must
/// stay under the base URL's path (no `.` or `..` segment) and be a path
/// only. A percent-encoded `.`, `/`, `\`, `%` or control character is
/// refused wherever it stands: a server or proxy that decodes before it
/// normalises reads `%2E%2e%2f` as `../`, and one that decodes twice reads
/// `%252e` as `.`; a path written to be called needs none of them.
pub(super) fn path_problem(path: &str) -> Option<String> {
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
