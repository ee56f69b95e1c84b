//! A component's or document's SHA-256 as a policy pins it.

use serde::Deserialize;

/// A SHA-256 digest: 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest(String);

impl Digest {
    /// The digest of `hex`, if it is 64 hex digits (either case).
    pub fn parse(hex: &str) -> Option<Self> {
        let hex = hex.strip_prefix("sha256:").unwrap_or(hex);
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Digest(hex.to_ascii_lowercase()))
    }

    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Digest::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{}` is not a SHA-256 digest (64 hex digits)",
                crate::text::cut(text, 80)
            ))
        })
    }
}
