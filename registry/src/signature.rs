//! Publisher keys and detached plugin signatures, in the registry contract's
//! formats: a key is `ed25519:<base64 of 32 bytes>`, a signature the base64
//! of the 64-byte ed25519 signature of `sandwit-plugin-signature-v1:<digest>`.
//!
//! The host library's `sandwit::signing` will own these formats; this module
//! is the registry's only use of ed25519 until then, so swapping it is one
//! file.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};

/// The domain prefix of the signed message: a key that signs plugins signs
/// nothing else.
const MESSAGE_PREFIX: &str = "sandwit-plugin-signature-v1:";

/// A publisher's public key.
#[derive(Debug, Clone)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// Parses `ed25519:<base64>`; the error says what was wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let b64 = text
            .strip_prefix("ed25519:")
            .ok_or("a public key starts with `ed25519:`")?;
        let bytes = STANDARD
            .decode(b64)
            .map_err(|_| "the public key is not standard base64")?;
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| "an ed25519 public key is 32 bytes")?;
        let key = VerifyingKey::from_bytes(&bytes)
            .map_err(|_| "the bytes are not an ed25519 public key")?;
        if key.is_weak() {
            return Err("the public key is a weak (small-order) ed25519 key".into());
        }
        Ok(PublicKey(key))
    }

    /// Whether `signature` signs `digest` (`sha256:<hex>`) with this key.
    pub fn verifies(&self, digest: &str, signature: &DetachedSignature) -> bool {
        let message = format!("{MESSAGE_PREFIX}{digest}");
        self.0
            .verify_strict(message.as_bytes(), &signature.0)
            .is_ok()
    }
}

impl std::fmt::Display for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ed25519:{}", STANDARD.encode(self.0.as_bytes()))
    }
}

/// A detached signature of a component's digest.
#[derive(Debug, Clone)]
pub struct DetachedSignature(Signature);

impl DetachedSignature {
    /// Parses the standard base64 of 64 bytes.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| "the signature is not standard base64")?;
        let bytes: [u8; 64] = bytes
            .try_into()
            .map_err(|_| "an ed25519 signature is 64 bytes")?;
        Ok(DetachedSignature(Signature::from_bytes(&bytes)))
    }
}

impl std::fmt::Display for DetachedSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&STANDARD.encode(self.0.to_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    #[test]
    fn a_signature_of_the_digest_verifies_and_nothing_else_does() {
        let secret = SigningKey::from_bytes(&[7; 32]);
        let public = PublicKey::parse(&format!(
            "ed25519:{}",
            STANDARD.encode(secret.verifying_key().as_bytes())
        ))
        .unwrap();
        let digest = format!("sha256:{}", "ab".repeat(32));
        let signed = secret.sign(format!("{MESSAGE_PREFIX}{digest}").as_bytes());
        let signature = DetachedSignature::parse(&STANDARD.encode(signed.to_bytes())).unwrap();
        assert!(public.verifies(&digest, &signature));
        assert!(!public.verifies(&format!("sha256:{}", "cd".repeat(32)), &signature));
        // The bare digest, without the domain prefix, is not what is signed.
        let bare = secret.sign(digest.as_bytes());
        let bare = DetachedSignature::parse(&STANDARD.encode(bare.to_bytes())).unwrap();
        assert!(!public.verifies(&digest, &bare));
        assert!(PublicKey::parse("ed25519:AAAA").is_err());
        assert!(PublicKey::parse("rsa:AAAA").is_err());
        assert!(DetachedSignature::parse("not base64!").is_err());
    }
}
