//! The checks a method's result passes before it reaches the code or the
//! AI, whoever answered the method (a plugin or a host method): its kind is
//! the declared one, it is within the value size limit, and a multimodal
//! result's images are ones a chat client may be handed.

use crate::error::CallErrorKind;
use crate::limits::LimitKind;
use crate::text::quote;
use crate::types::{ContentPart, MethodKind};

/// Ok if a value of `size` bytes, as [`sandwit_value::encoded_size`] counts
/// them, is within `max`; else the `value_size` limit it exceeds. `what`
/// names the value with its verb: "the result takes", "the arguments take".
pub fn check_size(what: &str, size: usize, max: usize) -> Result<(), CallErrorKind> {
    if size > max {
        return Err(too_large(what, size, max));
    }
    Ok(())
}

/// The `value_size` limit a value of `size` bytes exceeds: more than `max`
/// (`what` as for [`check_size`]).
pub fn too_large(what: &str, size: usize, max: usize) -> CallErrorKind {
    CallErrorKind::LimitExceeded {
        limit: LimitKind::ValueSize,
        message: format!("{what} {size} bytes, more than the limit of {max} bytes"),
    }
}

/// Whether `url` is one a chat client may be handed as an image: `http`,
/// `https` or `data:image/`, printable ASCII with no spaces.
fn is_image_url(url: &str) -> bool {
    let lower = url.get(..11).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("data:image/"))
        && url.bytes().all(|b| b.is_ascii_graphic())
}

/// Ok if `mime` is `image/` and a subtype of token characters (RFC 6838),
/// optionally with parameters: what a chat client may be handed as is;
/// otherwise what is wrong, quoting at most 80 bytes of it.
pub fn check_image_mime_type(mime: &str) -> Result<(), String> {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    let subtype = essence.strip_prefix("image/").unwrap_or_default();
    let ok = mime.len() <= 255
        && !subtype.is_empty()
        && subtype
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        && mime.bytes().all(|b| (0x20..0x7f).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} is not an image MIME type (`image/` and a subtype)",
            quote(mime, 80)
        ))
    }
}

/// The bytes of a multimodal result's text and images.
pub fn parts_bytes(parts: &[ContentPart]) -> usize {
    parts
        .iter()
        .map(|part| match part {
            ContentPart::Text(text) | ContentPart::ImageUrl(text) => text.len(),
            ContentPart::Image(media) => media.data.len() + media.mime_type.len(),
        })
        .sum()
}

/// Ok if a chat client may be handed every image of `parts`: URLs that
/// `is_image_url` accepts, image MIME types.
pub fn check_parts(parts: &[ContentPart]) -> Result<(), CallErrorKind> {
    for part in parts {
        match part {
            ContentPart::ImageUrl(url) if !is_image_url(url) => {
                return Err(CallErrorKind::BadResult {
                    message: format!(
                        "image URL {} is not an http, https or data:image URL of printable ASCII",
                        quote(url, 80)
                    ),
                });
            }
            ContentPart::Image(media) => check_image_mime_type(&media.mime_type)
                .map_err(|message| CallErrorKind::BadResult { message })?,
            _ => {}
        }
    }
    Ok(())
}

/// Ok if a result of kind `got` answers a method declared as `declared`.
pub fn check_kind(got: MethodKind, declared: MethodKind) -> Result<(), CallErrorKind> {
    if got == declared {
        return Ok(());
    }
    Err(CallErrorKind::BadResult {
        message: format!("a result of kind {got} from a method declared as {declared}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_urls_and_types() {
        for ok in [
            "https://x.org/a.png",
            "HTTP://x",
            "data:image/png;base64,AAAA",
        ] {
            assert!(is_image_url(ok), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://x.org/a b",
            "https://x\n",
        ] {
            assert!(!is_image_url(bad), "{bad}");
        }
        for ok in ["image/png", "image/svg+xml", "image/jpeg; q=1"] {
            assert!(check_image_mime_type(ok).is_ok(), "{ok}");
        }
        for bad in [
            "text/html",
            "image/",
            "image/png\n",
            "image/p g",
            "imagex/png",
        ] {
            assert!(check_image_mime_type(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_value_over_the_size_limit_names_it_and_the_limit() {
        assert!(check_size("the result takes", 100, 100).is_ok());
        let Err(CallErrorKind::LimitExceeded { limit, message }) =
            check_size("the arguments take", 101, 100)
        else {
            panic!("101 bytes pass a limit of 100");
        };
        assert_eq!(limit, LimitKind::ValueSize);
        assert_eq!(
            message,
            "the arguments take 101 bytes, more than the limit of 100 bytes"
        );
    }
}
