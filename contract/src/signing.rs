//! Plugin signatures, in the registry's formats (docs/REGISTRY.md):
//!
//! - a digest is `sha256:` and the 64 lowercase hex digits of the component's
//!   SHA-256 ([`digest_of`]; the hex of [`component_hash`]);
//! - a public key is `ed25519:` and the standard base64 of its 32 bytes;
//! - a signature is the standard base64 of the 64-byte ed25519 signature of
//!   the ASCII message `sandwit-plugin-signature-v1:<digest>`: a detached
//!   signature over the digest, with a prefix of its own so a key that signs
//!   plugins can be made to sign nothing else;
//! - a key file holds the secret key as PKCS#8 PEM (`BEGIN PRIVATE KEY`, as
//!   openssl writes and reads it), mode `0600`; its public key is in the file
//!   of the same name and `.pub`, one line.
//!
//! Verification is strict ([`ed25519_dalek::VerifyingKey::verify_strict`]):
//! weak keys and malleable signatures are refused.
//!

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::Signer;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey, KeypairBytes};

use crate::text::quote;

/// What a signed message starts with, before the digest.
pub const SIGNATURE_DOMAIN: &str = "sandwit-plugin-signature-v1:";

/// What a key registration's statement starts with, before the registry,
/// the account and the key: a signature over it proves the account holds
/// the secret key, and can never be taken for a plugin signature (another
/// prefix). (`-v1:` statements named no registry, so one registry could
/// replay them to another; none is accepted.)
pub const KEY_REGISTRATION_DOMAIN: &str = "sandwit-key-registration-v2:";

/// The SHA-256 of a component, hex-encoded: what the host's `Plugin::hash`
/// reports and what a policy pins (`sha256 = [...]`, [`Policy::pin`]).
///
/// [`Policy::pin`]: crate::policy::Policy::pin
pub fn component_hash(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a public key's text starts with.
const KEY_PREFIX: &str = "ed25519:";

/// The digest of a component's bytes: `sha256:<64 lowercase hex>`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", component_hash(bytes))
}

/// Checks that `digest` is `sha256:` and 64 lowercase hex digits.
pub fn check_digest(digest: &str) -> Result<(), SigningError> {
    let hex = digest.strip_prefix("sha256:");
    match hex {
        Some(hex)
            if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
        {
            Ok(())
        }
        _ => Err(SigningError::Digest(quote(digest, 80))),
    }
}

/// The message a signature signs: the domain prefix and the digest.
fn message(digest: &str) -> Result<Vec<u8>, SigningError> {
    check_digest(digest)?;
    Ok(format!("{SIGNATURE_DOMAIN}{digest}").into_bytes())
}

/// The statement a key registration signs:
/// `sandwit-key-registration-v2:<registry id>:<account>:<public key>`. The
/// registry's id and the account name hold no `:` (the registry and its
/// clients check), so no two statements read alike.
pub fn key_registration_message(registry: &str, account: &str, key: &PublicKey) -> Vec<u8> {
    format!("{KEY_REGISTRATION_DOMAIN}{registry}:{account}:{key}").into_bytes()
}

/// Why a key, signature or digest was refused.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    /// Not a digest in the registry's format.
    #[error("{0} is not a digest: it must be `sha256:` and 64 lowercase hex digits")]
    Digest(String),
    /// Not a public key in the registry's format.
    #[error("{text} is not a public key: {why}")]
    PublicKey {
        /// The text, quoted and cut.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// Not a signature in the registry's format.
    #[error("{text} is not a signature: {why}")]
    Signature {
        /// The text, quoted and cut.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// The secret key (file) could not be read or is not an ed25519 key.
    #[error("{0}")]
    KeyFile(String),
    /// The proof of possession is not the key's signature over the
    /// registration statement for the registry and the account.
    #[error(
        "the proof does not verify with the key {key}: it must be that key's signature of \
         `sandwit-key-registration-v2:{registry}:{account}:{key}` (a proof made for another \
         registry or account is refused)"
    )]
    RegistrationMismatch {
        /// The registry's id.
        registry: String,
        /// The account the key is registered for.
        account: String,
        /// The key.
        key: String,
    },
    /// The signature is well formed but is not the key's over the digest.
    #[error("the signature over {digest} does not verify with the key {key}")]
    Mismatch {
        /// The digest signed.
        digest: String,
        /// The key it was checked with.
        key: String,
    },
}

/// An ed25519 public key: `ed25519:<base64 of 32 bytes>`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

impl PublicKey {
    /// Parses `ed25519:<base64>`.
    pub fn parse(text: &str) -> Result<Self, SigningError> {
        let text = text.trim();
        let bad = |why: String| SigningError::PublicKey {
            text: quote(text, 80),
            why,
        };
        let Some(b64) = text.strip_prefix(KEY_PREFIX) else {
            let algorithm = text.split_once(':').map(|(a, _)| a);
            return Err(bad(match algorithm {
                Some(a) => format!(
                    "`{}` keys are not supported; a key is `ed25519:` and the base64 of 32 bytes",
                    a.chars().take(20).collect::<String>()
                ),
                None => "it must be `ed25519:` and the base64 of 32 bytes".to_string(),
            }));
        };
        let bytes = BASE64
            .decode(b64)
            .map_err(|e| bad(format!("not standard base64 ({e})")))?;
        let bytes: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
            bad(format!(
                "it is {} bytes; an ed25519 public key is 32",
                bytes.len()
            ))
        })?;
        let key = ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map_err(|_| bad("not a point of the curve".to_string()))?;
        if key.is_weak() {
            return Err(bad("a weak key (of small order)".to_string()));
        }
        Ok(PublicKey(key))
    }

    /// Checks that `signature` is this key's over `digest`.
    pub fn verify_digest(&self, digest: &str, signature: &Signature) -> Result<(), SigningError> {
        self.0
            .verify_strict(&message(digest)?, &signature.0)
            .map_err(|_| SigningError::Mismatch {
                digest: digest.to_string(),
                key: self.to_string(),
            })
    }

    /// Checks that `proof` is this key's signature of the registration
    /// statement for `account` at the registry `registry`
    /// ([`key_registration_message`]).
    pub fn verify_registration(
        &self,
        registry: &str,
        account: &str,
        proof: &Signature,
    ) -> Result<(), SigningError> {
        self.0
            .verify_strict(&key_registration_message(registry, account, self), &proof.0)
            .map_err(|_| SigningError::RegistrationMismatch {
                registry: registry.to_string(),
                account: account.to_string(),
                key: self.to_string(),
            })
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{KEY_PREFIX}{}", BASE64.encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl std::str::FromStr for PublicKey {
    type Err = SigningError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PublicKey::parse(s)
    }
}

impl<'de> serde::Deserialize<'de> for PublicKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        PublicKey::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for PublicKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// An ed25519 signature over a digest: standard base64 of 64 bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature(ed25519_dalek::Signature);

impl Signature {
    /// Parses the base64 of a 64-byte signature.
    pub fn parse(text: &str) -> Result<Self, SigningError> {
        let text = text.trim();
        let bad = |why: String| SigningError::Signature {
            text: quote(text, 100),
            why,
        };
        let bytes = BASE64
            .decode(text)
            .map_err(|e| bad(format!("not standard base64 ({e})")))?;
        let bytes: [u8; 64] = bytes.as_slice().try_into().map_err(|_| {
            bad(format!(
                "it is {} bytes; an ed25519 signature is 64",
                bytes.len()
            ))
        })?;
        Ok(Signature(ed25519_dalek::Signature::from_bytes(&bytes)))
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&BASE64.encode(self.0.to_bytes()))
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({self})")
    }
}

impl std::str::FromStr for Signature {
    type Err = SigningError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Signature::parse(s)
    }
}

impl<'de> serde::Deserialize<'de> for Signature {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Signature::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Signature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// An ed25519 secret key that signs plugins. It is never displayed: its
/// `Debug` shows the public key only, and it is wiped from memory when
/// dropped.
pub struct SigningKey(ed25519_dalek::SigningKey);

impl SigningKey {
    /// A new key from the operating system's random generator.
    pub fn generate() -> Result<Self, SigningError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| SigningError::KeyFile(format!("no randomness for a new key: {e}")))?;
        let key = ed25519_dalek::SigningKey::from_bytes(&secret);
        secret.fill(0);
        Ok(SigningKey(key))
    }

    /// Parses a PKCS#8 PEM secret key (`-----BEGIN PRIVATE KEY-----`).
    pub fn parse(pem: &str) -> Result<Self, SigningError> {
        ed25519_dalek::SigningKey::from_pkcs8_pem(pem)
            .map(SigningKey)
            .map_err(|e| {
                SigningError::KeyFile(format!(
                    "not an ed25519 secret key in PKCS#8 PEM (`BEGIN PRIVATE KEY`, as `sandwit \
                     keygen` writes): {e}"
                ))
            })
    }

    /// Reads a key file `sandwit keygen` wrote (or `openssl genpkey
    /// -algorithm ed25519`).
    pub fn read(path: &Path) -> Result<Self, SigningError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            SigningError::KeyFile(format!("cannot read the key file {}: {e}", path.display()))
        })?;
        SigningKey::parse(&text)
            .map_err(|e| SigningError::KeyFile(format!("the key file {}: {e}", path.display())))
    }

    /// Writes the secret key to `path` (created, never replaced: mode
    /// `0600`) and the public key to [`public_key_path`]`(path)`, and
    /// returns the public key's path.
    pub fn write_new(&self, path: &Path) -> Result<PathBuf, SigningError> {
        let fail = |what: &Path, e: std::io::Error| {
            SigningError::KeyFile(format!("cannot write {}: {e}", what.display()))
        };
        let pem = self.pem()?;
        let public = public_key_path(path);
        let mut pub_file = create_new(&public, 0o644).map_err(|e| fail(&public, e))?;
        let written = create_new(path, 0o600)
            .and_then(|mut file| {
                file.write_all(pem.as_bytes())
                    .and_then(|()| file.sync_all())
            })
            .map_err(|e| fail(path, e));
        if let Err(e) = written {
            // The public key alone would stand for a secret key there is not.
            let _ = std::fs::remove_file(&public);
            return Err(e);
        }
        writeln!(pub_file, "{}", self.public_key()).map_err(|e| fail(&public, e))?;
        Ok(public)
    }

    /// The PKCS#8 v1 PEM of the secret key, as openssl writes it (v2, with
    /// the public key, is not read by openssl 3.0), wiped when dropped.
    fn pem(&self) -> Result<impl std::ops::Deref<Target = String>, SigningError> {
        KeypairBytes {
            secret_key: self.0.to_bytes(),
            public_key: None,
        }
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| SigningError::KeyFile(format!("cannot encode the key: {e}")))
    }

    /// Its public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Signs `digest` (`sha256:<hex>`), with the domain prefix.
    pub fn sign_digest(&self, digest: &str) -> Result<Signature, SigningError> {
        Ok(Signature(self.0.sign(&message(digest)?)))
    }

    /// The proof that whoever registers this key for `account` at the
    /// registry `registry` holds it: its signature of
    /// [`key_registration_message`].
    pub fn sign_registration(&self, registry: &str, account: &str) -> Signature {
        Signature(self.0.sign(&key_registration_message(
            registry,
            account,
            &self.public_key(),
        )))
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(public: {})", self.public_key())
    }
}

/// Where the public key of the key file `path` is: `path` and `.pub`.
pub fn public_key_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Creates `path` with `mode`, failing if anything (a file, a link) is there.
fn create_new(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl genpkey -algorithm ed25519` and its public key, from
    /// `openssl pkey -pubout`: the formats agree with openssl's.
    const OPENSSL_KEY: &str = "-----BEGIN PRIVATE KEY-----\n\
        MC4CAQAwBQYDK2VwBCIEII69kEFQ0yYmsZFa1YDBqUP/6jSzaEUojVDykFlqoqkE\n\
        -----END PRIVATE KEY-----\n";
    const OPENSSL_PUBLIC: &str = "ed25519:NV8HSH8rhpK/0zClolLWV7cknL1liUxL2q181nQv6A8=";
    /// A P-256 key from `openssl genpkey -algorithm EC`: PKCS#8, another
    /// algorithm.
    const P256_KEY: &str = "-----BEGIN PRIVATE KEY-----\n\
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLvTGFQqi8gmlHVZm\n\
        Qf47nj2M3LCNzLREbaFqpBm5/h+hRANCAAR1mvP70CK3xihch8K8124g/lyMLz1+\n\
        F/x2Ln55/OySwOdGKm0Olmy8xNiGt2OTgC6ctncRQ9YQwSk6/0r+6o2H\n\
        -----END PRIVATE KEY-----\n";

    #[test]
    fn signs_and_verifies_a_digest() {
        let key = SigningKey::generate().unwrap();
        let digest = digest_of(b"\0asm component");
        assert!(digest.starts_with("sha256:") && digest.len() == 71);
        let signature = key.sign_digest(&digest).unwrap();
        let public = PublicKey::parse(&key.public_key().to_string()).unwrap();
        let parsed = Signature::parse(&signature.to_string()).unwrap();
        public.verify_digest(&digest, &parsed).unwrap();
        // The message has the domain prefix: the bare digest is not what
        // was signed.
        let bare = ed25519_dalek::Signature::from_bytes(&key.0.sign(digest.as_bytes()).to_bytes());
        assert!(public.verify_digest(&digest, &Signature(bare)).is_err());
        // Another key's signature does not verify.
        let other = SigningKey::generate().unwrap();
        let e = other
            .public_key()
            .verify_digest(&digest, &signature)
            .unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
    }

    /// A registration proof binds the key to one account at one registry,
    /// and is never a plugin signature (nor the other way round): another
    /// domain.
    #[test]
    fn a_registration_proof_binds_the_registry_and_the_account() {
        let key = SigningKey::generate().unwrap();
        let public = key.public_key();
        let proof = key.sign_registration("swreg_a", "alice");
        public
            .verify_registration("swreg_a", "alice", &proof)
            .unwrap();
        let e = public
            .verify_registration("swreg_a", "mallory", &proof)
            .unwrap_err();
        assert!(
            e.to_string().contains(&format!(
                "sandwit-key-registration-v2:swreg_a:mallory:{public}"
            )),
            "{e}"
        );
        // Replayed to another registry.
        assert!(
            public
                .verify_registration("swreg_b", "alice", &proof)
                .is_err()
        );
        let other = SigningKey::generate()
            .unwrap()
            .sign_registration("swreg_a", "alice");
        assert!(
            public
                .verify_registration("swreg_a", "alice", &other)
                .is_err()
        );
        let digest = digest_of(b"bytes");
        let plugin = key.sign_digest(&digest).unwrap();
        assert!(
            public
                .verify_registration("swreg_a", "alice", &plugin)
                .is_err()
        );
        assert!(public.verify_digest(&digest, &proof).is_err());
    }

    #[test]
    fn a_flipped_bit_fails() {
        let key = SigningKey::generate().unwrap();
        let digest = digest_of(b"plugin");
        let signature = key.sign_digest(&digest).unwrap();
        // A bit of the digest.
        let mut other = digest.clone().into_bytes();
        other[10] = if other[10] == b'0' { b'1' } else { b'0' };
        let other = String::from_utf8(other).unwrap();
        assert!(key.public_key().verify_digest(&other, &signature).is_err());
        // Each bit of the signature.
        let bytes = signature.0.to_bytes();
        for bit in 0..512 {
            let mut flipped = bytes;
            flipped[bit / 8] ^= 1 << (bit % 8);
            let flipped = Signature(ed25519_dalek::Signature::from_bytes(&flipped));
            assert!(
                key.public_key().verify_digest(&digest, &flipped).is_err(),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn reads_openssl_keys_and_refuses_other_algorithms() {
        let key = SigningKey::parse(OPENSSL_KEY).unwrap();
        assert_eq!(key.public_key().to_string(), OPENSSL_PUBLIC);
        // And it is written back as openssl wrote it.
        assert_eq!(key.pem().unwrap().as_str(), OPENSSL_KEY);
        let e = SigningKey::parse(P256_KEY).unwrap_err().to_string();
        assert!(e.contains("not an ed25519 secret key"), "{e}");
        let e = SigningKey::parse("not pem").unwrap_err().to_string();
        assert!(e.contains("PKCS#8 PEM"), "{e}");
        // The debug form shows no secret.
        assert!(!format!("{key:?}").contains("MC4C"));
    }

    #[test]
    fn malformed_text_is_a_clear_error() {
        for (text, needle) in [
            ("rsa:AAAA", "`rsa` keys are not supported"),
            ("AAAA", "must be `ed25519:`"),
            ("ed25519:AAAA", "3 bytes; an ed25519 public key is 32"),
            ("ed25519:not base64!", "not standard base64"),
        ] {
            let e = PublicKey::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        let e = Signature::parse(&BASE64.encode([1u8; 63]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("63 bytes; an ed25519 signature is 64"), "{e}");
        for digest in ["sha256:AB", &format!("sha256:{}", "A".repeat(64)), "md5:00"] {
            let e = check_digest(digest).unwrap_err().to_string();
            assert!(e.contains("is not a digest"), "{e}");
        }
        let key = SigningKey::generate().unwrap();
        assert!(key.sign_digest("sha256:00").is_err());
    }

    #[test]
    fn key_files_are_private_and_never_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sandwit-signing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        let key = SigningKey::generate().unwrap();
        let public = key.write_new(&path).unwrap();
        assert_eq!(public, dir.join("key.pub"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("-----BEGIN PRIVATE KEY-----"), "{text}");
        let read = SigningKey::read(&path).unwrap();
        assert_eq!(read.public_key(), key.public_key());
        let line = std::fs::read_to_string(&public).unwrap();
        assert_eq!(PublicKey::parse(&line).unwrap(), key.public_key());
        // A second key is refused; the first is intact.
        let e = SigningKey::generate()
            .unwrap()
            .write_new(&path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("exists"), "{e}");
        assert_eq!(
            SigningKey::read(&path).unwrap().public_key(),
            key.public_key()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
