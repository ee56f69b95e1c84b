//! Bearer tokens: an admin or a user role each, and optionally a
//! namespace. The server keeps only their SHA-256 digests, read from a token
//! file (one `name role sha256-hex [namespace]` a line; `#` starts a
//! comment) or made for one token it generates at start. Tokens are never
//! logged or echoed; a caller is named by its token's name ([`crate::auth`]).
//!
//! A token without a namespace is a trusted application backend: it may
//! name any chat and user. A token with one (a chat-key prefix such as
//! `acme:`) may name only chat keys and user ids that start with it, and
//! what a plugin's chats share (its store's global scope, plugin-wide rate
//! limits and breakers) is kept apart for it (docs/SERVICE.md, "Trust
//! model").

use std::path::Path;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

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
    entries: Vec<Entry>,
}

/// One token of a token file.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The token's name, which names its caller.
    pub(crate) name: String,
    pub(crate) role: Role,
    digest: [u8; 32],
    /// The prefix of every chat key and user id it may name.
    pub(crate) namespace: Option<String>,
}

/// The bytes a generated token is made of (hex in the token).
const GENERATED_BYTES: usize = 32;

/// The longest namespace a token may have, in bytes: it prefixes chat keys
/// and user ids, which are bounded by [`crate::chat::MAX_KEY_BYTES`], and
/// leaves most of that to the caller.
pub const MAX_NAMESPACE_BYTES: usize = 64;

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
            let (name, role, digest, namespace) = match fields[..] {
                [name, role, digest] => (name, role, digest, None),
                [name, role, digest, namespace] => (name, role, digest, Some(namespace)),
                _ => bail!(
                    "line {}: expected `name role sha256-hex [namespace]`, found {} field(s)",
                    i + 1,
                    fields.len()
                ),
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
            if entries.iter().any(|e: &Entry| e.name == name) {
                bail!("line {}: the name `{name}` is given twice", i + 1);
            }
            if let Some(namespace) = namespace {
                check_namespace(namespace).map_err(|e| anyhow::anyhow!("line {}: {e}", i + 1))?;
                // A namespace that begins another would let its tokens name
                // the other's chats and users (`a:` names `a:b:room`).
                if let Some(other) = entries.iter().find(|e: &&Entry| {
                    e.namespace.as_deref().is_some_and(|o| {
                        o != namespace && (o.starts_with(namespace) || namespace.starts_with(o))
                    })
                }) {
                    bail!(
                        "line {}: the namespace `{namespace}` and the namespace `{}` of the token \
                         `{}` overlap (one begins the other): each token could name the other's \
                         chats and users",
                        i + 1,
                        other.namespace.as_deref().unwrap_or_default(),
                        other.name
                    );
                }
            }
            entries.push(Entry {
                name: name.to_string(),
                role,
                digest,
                namespace: namespace.map(str::to_string),
            });
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
            entries: vec![Entry {
                name: "admin".to_string(),
                role: Role::Admin,
                digest: digest(&token),
                namespace: None,
            }],
        };
        Ok((tokens, token))
    }

    /// The entry of `token`, if it is one of these.
    pub(crate) fn find(&self, token: &str) -> Option<&Entry> {
        let presented = digest(token);
        self.entries.iter().find(|e| e.digest == presented)
    }
}

/// What a namespace ends with: a separator, so that `acme:` and `acme2:`
/// are two namespaces, where `acme` would begin `acme2`'s every key.
pub const NAMESPACE_SEPARATORS: [char; 2] = [':', '/'];

/// Checks a token's namespace: not empty, at most [`MAX_NAMESPACE_BYTES`],
/// ending with one of [`NAMESPACE_SEPARATORS`], no whitespace or control
/// characters (it is written in logs, metrics labels and error messages,
/// and begins every chat key of its token).
fn check_namespace(namespace: &str) -> Result<(), String> {
    if namespace.is_empty() {
        return Err("the namespace is empty".to_string());
    }
    if namespace.len() > MAX_NAMESPACE_BYTES {
        return Err(format!(
            "the namespace is {} bytes, more than the limit of {MAX_NAMESPACE_BYTES}",
            namespace.len()
        ));
    }
    if let Some(c) = namespace
        .chars()
        .find(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "the namespace {namespace:?} holds the whitespace or control character {c:?}"
        ));
    }
    if !namespace.ends_with(NAMESPACE_SEPARATORS) {
        return Err(format!(
            "the namespace `{namespace}` does not end with `:` or `/` (without one, `acme` \
             would begin the keys of `acme2`): write `{namespace}:`"
        ));
    }
    Ok(())
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
        let found = |token| tokens.find(token).map(|e| (e.name.as_str(), e.role));
        assert_eq!(found("a"), Some(("alice", Role::Admin)));
        assert_eq!(found("b"), Some(("bob", Role::User)));
        assert_eq!(found("c"), None);
        assert_eq!(tokens.find("b").unwrap().namespace, None);
        let err = Tokens::parse("alice root 00").unwrap_err().to_string();
        assert!(err.contains("line 1: role `root`"), "{err}");
        let err = Tokens::parse("alice admin 00").unwrap_err().to_string();
        assert!(err.contains("line 1: the token's digest"), "{err}");
        assert!(Tokens::parse("# nothing\n").is_err());
    }

    #[test]
    fn a_token_file_binds_a_token_to_a_namespace() {
        let text = format!(
            "acme user {} acme:  # a tenant\nops admin {}\n",
            token_digest_hex("a"),
            token_digest_hex("o")
        );
        let tokens = Tokens::parse(&text).unwrap();
        assert_eq!(
            tokens.find("a").unwrap().namespace.as_deref(),
            Some("acme:")
        );
        assert_eq!(tokens.find("o").unwrap().namespace, None);

        let d = token_digest_hex("x");
        let long = "n".repeat(MAX_NAMESPACE_BYTES + 1);
        let err = Tokens::parse(&format!("ok user {d}\nt user {d} {long}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2: the namespace is 65 bytes"), "{err}");
        let err = Tokens::parse(&format!("t user {d} ac\u{1b}me"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 1: the namespace") && err.contains("control"),
            "{err}"
        );
        let err = Tokens::parse(&format!("t user {d} a b"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 1: expected `name role sha256-hex [namespace]`, found 5"),
            "{err}"
        );
        assert!(check_namespace("").unwrap_err().contains("empty"));
        let long = format!("{}:", "n".repeat(MAX_NAMESPACE_BYTES - 1));
        assert!(Tokens::parse(&format!("t user {d} {long}")).is_ok());
        let err = Tokens::parse(&format!("t user {d} acme"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 1: the namespace `acme` does not end with `:` or `/`"),
            "{err}"
        );
        // One namespace beginning another, either way round, is refused;
        // two tokens of one namespace are not.
        for (first, second) in [("a:", "a:b:"), ("a:b:", "a:")] {
            let err = Tokens::parse(&format!("x user {d} {first}\ny user {d} {second}"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!(
                    "line 2: the namespace `{second}` and the namespace `{first}` of the token `x` overlap"
                )),
                "{err}"
            );
        }
        assert!(Tokens::parse(&format!("x user {d} a:\ny user {d} a:\nz user {d} b/")).is_ok());
    }
}
