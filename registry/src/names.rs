//! Checks of the names a request carries (plugin ids, versions, digests,
//! account names) before anything else sees them: only strings these accept
//! reach SQL parameters, and only a digest's hex reaches the blob store.

use crate::error::{Error, Result};

/// A plugin id, checked with the manifest's rules.
pub fn plugin_id(id: &str) -> Result<&str> {
    if sandwit_contract::manifest::is_plugin_id(id) {
        Ok(id)
    } else {
        Err(Error::bad_request(
            "invalid-id",
            format!(
                "plugin id {} is not 1 to {} lowercase letters, digits, `-` or `_` starting with a letter",
                quote(id),
                sandwit_contract::manifest::MAX_NAME_LEN
            ),
        ))
    }
}

/// A semantic version (as a manifest's `version`).
pub fn version(version: &str) -> Result<semver::Version> {
    if version.len() <= 128
        && let Ok(v) = semver::Version::parse(version)
    {
        return Ok(v);
    }
    Err(Error::bad_request(
        "invalid-version",
        format!("version {} is not a semantic version", quote(version)),
    ))
}

/// The lowercase hex of a digest written `sha256:<64 lowercase hex>`.
pub fn digest_hex(digest: &str) -> Result<&str> {
    match digest.strip_prefix("sha256:") {
        Some(hex) if is_sha256_hex(hex) => Ok(hex),
        _ => Err(Error::bad_request(
            "invalid-digest",
            format!(
                "digest {} is not `sha256:` and 64 lowercase hex digits",
                quote(digest)
            ),
        )),
    }
}

/// Whether `hex` is 64 lowercase hex digits.
pub fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// An account name: 1 to 64 lowercase letters, digits, `-`, `_` or `.`,
/// starting with a letter or digit.
pub fn account(name: &str) -> Result<&str> {
    let mut bytes = name.bytes();
    let ok = matches!(bytes.next(), Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
        && name.len() <= 64;
    if ok {
        Ok(name)
    } else {
        Err(Error::bad_request(
            "invalid-account",
            format!(
                "account name {} is not 1 to 64 lowercase letters, digits, `-`, `_` or `.` \
                 starting with a letter or digit",
                quote(name)
            ),
        ))
    }
}

/// `text` quoted for a message, cut to 80 bytes: a hostile request's
/// strings are never echoed whole.
pub fn quote(text: &str) -> String {
    let cut = text.floor_char_boundary(80);
    if cut < text.len() {
        format!("{:?}…", &text[..cut])
    } else {
        format!("{text:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(plugin_id("calc").is_ok());
        assert!(plugin_id("../etc").is_err());
        assert!(plugin_id("").is_err());
        assert!(version("1.2.3-rc.1").is_ok());
        assert!(version("latest").is_err());
        let hex = "ab".repeat(32);
        assert_eq!(digest_hex(&format!("sha256:{hex}")).unwrap(), hex);
        assert!(digest_hex(&format!("sha256:{}", "AB".repeat(32))).is_err());
        assert!(digest_hex(&format!("sha512:{hex}")).is_err());
        assert!(account("alice").is_ok());
        assert!(account("Alice").is_err());
        assert!(account("a/b").is_err());
        assert_eq!(quote(&"x".repeat(100)).len(), 80 + 2 + "…".len());
    }
}
