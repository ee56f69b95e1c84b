//! Writing HTML: escaping (every string from a manifest or a request is a
//! stranger's text), URL components, and the page every view fills in.

use std::fmt::{self, Display, Write as _};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `text` escaped for HTML text and quoted attribute values: `&`, `<`,
/// `>`, `"` and `'` become character references, so no string can open a
/// tag or leave an attribute.
pub struct Esc<'a>(pub &'a str);

impl Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// `text` percent-encoded for a URL path segment or query value: every
/// byte but ASCII letters, digits and `-._~`. (Still HTML-escape the URL
/// it goes into.)
pub struct Url<'a>(pub &'a str);

impl Display for Url<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0.as_bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                f.write_char(char::from(b))?;
            } else {
                write!(f, "%{b:02X}")?;
            }
        }
        Ok(())
    }
}

/// The path of a plugin's page, or of one version's page.
pub fn plugin_path(id: &str, version: Option<&str>) -> String {
    match version {
        Some(v) => format!("/plugins/{}/{}", Url(id), Url(v)),
        None => format!("/plugins/{}", Url(id)),
    }
}

/// A whole HTML page: the status, the `<title>` and the `<main>`'s HTML
/// (already escaped by whoever wrote it).
pub struct Page {
    /// The response status.
    pub status: StatusCode,
    /// The title, as text.
    pub title: String,
    /// The main content, as HTML.
    pub main: String,
    /// `Retry-After`, in seconds, for a refusal a client may retry.
    pub retry_after: Option<u64>,
}

impl Page {
    /// A 200 page.
    pub fn ok(title: impl Into<String>, main: String) -> Self {
        Page {
            status: StatusCode::OK,
            title: title.into(),
            main,
            retry_after: None,
        }
    }
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let mut html = String::with_capacity(self.main.len() + 1024);
        // Writing to a String cannot fail.
        let _ = write!(
            html,
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{} · sandwit registry</title>\n\
             <link rel=\"stylesheet\" href=\"/style.css\">\n</head>\n<body>\n\
             <header><nav aria-label=\"Site\"><a class=\"brand\" href=\"/\">sandwit registry</a> \
             <a href=\"/\">Plugins</a> <a href=\"/upload\">Upload</a> \
             <a href=\"/openapi.json\">API</a></nav></header>\n\
             <main>\n{}\n</main>\n</body>\n</html>\n",
            Esc(&self.title),
            self.main
        );
        let mut response = (
            self.status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            html,
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            Esc("<script>alert('x')</script> & \"y\"").to_string(),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;y&quot;"
        );
        assert_eq!(Esc("plain ünïcode").to_string(), "plain ünïcode");
    }

    #[test]
    fn encodes_url_components() {
        assert_eq!(Url("a b&c=d/é").to_string(), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(
            plugin_path("calc", Some("1.0.0+b")),
            "/plugins/calc/1.0.0%2Bb"
        );
    }
}
