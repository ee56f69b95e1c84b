//! Bearer tokens: an admin or a user role each. The server keeps only
//! their SHA-256 digests, read from a token file (one `name role sha256-hex`
//! a line; `#` starts a comment) or made for one token it generates at
//! start. Tokens are never logged or echoed; a caller is named by its
//! token's name.

use std::path::Path;

use anyhow::{Context, bail};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Runs, calls and discovery.
    User,
    /// As a user, and enabling, disabling and reloading plugins.
    Admin,
}

/// The tokens the server accepts, by digest.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    entries: Vec<(String, Role, [u8; 32])>,
}

/// The bytes a generated token is made of (hex in the token).
const GENERATED_BYTES: usize = 32;

impl Tokens {
    /// The tokens of a token file; an error names the line that is wrong.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the token file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in the token file {}", path.display()))
    }

    /// The tokens of a token file's text.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, role, digest] = fields[..] else {
                bail!(
                    "line {}: expected `name role sha256-hex`, found {} field(s)",
                    i + 1,
                    fields.len()
                );
            };
            let role = match role {
                "admin" => Role::Admin,
                "user" => Role::User,
                other => bail!("line {}: role `{other}` is not `admin` or `user`", i + 1),
            };
            let Some(digest) = parse_digest(digest) else {
                bail!(
                    "line {}: the token's digest is not a SHA-256 (64 hex digits)",
                    i + 1
                );
            };
            if entries.iter().any(|(n, _, _)| n == name) {
                bail!("line {}: the name `{name}` is given twice", i + 1);
            }
            entries.push((name.to_string(), role, digest));
        }
        if entries.is_empty() {
            bail!("no tokens: every request would be refused");
        }
        Ok(Tokens { entries })
    }

    /// One admin token, generated from the system's random source: the
    /// tokens accepted and the token, to show once.
    pub fn generate() -> anyhow::Result<(Self, String)> {
        use std::io::Read;
        let mut bytes = [0u8; GENERATED_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .context("reading /dev/urandom for a token")?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let tokens = Tokens {
            entries: vec![("admin".to_string(), Role::Admin, digest(&token))],
        };
        Ok((tokens, token))
    }

    /// The name and role of `token`, if it is one of these.
    fn find(&self, token: &str) -> Option<(&str, Role)> {
        let presented = digest(token);
        self.entries
            .iter()
            .find(|(_, _, d)| *d == presented)
            .map(|(name, role, _)| (name.as_str(), *role))
    }
}

/// The SHA-256 of a token, as the token file holds it (hex).
pub fn token_digest_hex(token: &str) -> String {
    digest(token).iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The caller of a request, from its `Authorization: Bearer` token.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name.
    pub name: String,
    /// The token's role.
    pub role: Role,
}

impl Caller {
    /// Refuses a caller who is not an admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::User => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "admin-only",
                format!(
                    "the token `{}` is a user token; this needs an admin's",
                    self.name
                ),
            )),
        }
    }
}

impl FromRequestParts<crate::Shared> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &crate::Shared,
    ) -> Result<Self, Self::Rejection> {
        let unauthorized = |message: &str| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                message.to_string(),
            )
        };
        let value = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("no `Authorization: Bearer <token>` header"))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| unauthorized("the Authorization header is not `Bearer <token>`"))?;
        let (name, role) = state
            .config
            .tokens
            .find(token.trim())
            .ok_or_else(|| unauthorized("the token is not one this server accepts"))?;
        Ok(Caller {
            name: name.to_string(),
            role,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_names_its_wrong_line() {
        let good = format!(
            "# ops\nalice admin {}\nbob user {}\n",
            token_digest_hex("a"),
            token_digest_hex("b")
        );
        let tokens = Tokens::parse(&good).unwrap();
        assert_eq!(tokens.find("a"), Some(("alice", Role::Admin)));
        assert_eq!(tokens.find("b"), Some(("bob", Role::User)));
        assert_eq!(tokens.find("c"), None);
        let err = Tokens::parse("alice root 00").unwrap_err().to_string();
        assert!(err.contains("line 1: role `root`"), "{err}");
        let err = Tokens::parse("alice admin 00").unwrap_err().to_string();
        assert!(err.contains("line 1: the token's digest"), "{err}");
        assert!(Tokens::parse("# nothing\n").is_err());
    }
}
