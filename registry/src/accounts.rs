//! Accounts, their tokens and their publisher keys.
//!
//! A token is `swr_` and 43 characters of base64url (32 random bytes); the
//! registry keeps only its SHA-256, so a copy of the database grants
//! nothing. Tokens are made on the data directory (`sandwit registry token
//! create`), not over HTTP.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::meta::{self, Conn, params};
use crate::{KeyRegistered, KeyRevoked, Registry, names};
use sandwit_contract::signing::{PublicKey, Signature};

/// The prefix of every token (so a leaked one is recognisable).
const TOKEN_PREFIX: &str = "swr_";

/// What an account may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Publish, yank and manage the owners of any plugin.
    Admin,
    /// Publish new plugins and new versions of the plugins it owns; yank
    /// them; add owners.
    Publisher,
}

impl Role {
    /// The role's name (`admin`, `publisher`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Publisher => "publisher",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "admin" => Ok(Role::Admin),
            "publisher" => Ok(Role::Publisher),
            other => Err(format!(
                "unknown role {}: `admin` or `publisher`",
                names::quote(other)
            )),
        }
    }
}

/// The account a request's token belongs to.
#[derive(Debug, Clone)]
pub struct Account {
    /// Its row id.
    pub(crate) id: i64,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
}

fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

impl Registry {
    /// Makes a token for the account `name`, creating the account with
    /// `role` if it does not exist. An existing account keeps its role: a
    /// different `role` is an error. The token is returned once and stored
    /// only as its hash.
    pub fn create_token(&self, name: &str, role: Role) -> anyhow::Result<String> {
        names::account(name).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("getrandom: {e}"))?;
        let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(secret));
        let hash = token_hash(&token);
        self.write_now(|conn| {
            let existing = conn.query_opt(
                "SELECT id, role FROM accounts WHERE name = ?1",
                params![name],
            )?;
            let account = match existing {
                Some(row) if row.text(1)? != role.as_str() => {
                    return Err(Error::bad_request(
                        "role-mismatch",
                        format!(
                            "account {name} exists with the role {}, not {}",
                            row.text(1)?,
                            role.as_str()
                        ),
                    ));
                }
                Some(row) => row.int(0)?,
                None => conn
                    .query_one(
                        "INSERT INTO accounts (name, role, created_at) VALUES (?1, ?2, ?3)
                         RETURNING id",
                        params![name, role.as_str(), meta::now()],
                    )?
                    .int(0)?,
            };
            conn.execute(
                "INSERT INTO tokens (hash, account, created_at) VALUES (?1, ?2, ?3)",
                params![hash, account, meta::now()],
            )?;
            Ok(())
        })
        .map_err(|e| match e {
            // The cause, for whoever runs the command (a server's answer
            // hides it).
            Error::Internal(e) => e,
            e => anyhow::anyhow!("{e}"),
        })?;
        Ok(token)
    }

    /// The account `token` belongs to; [`Error::Unauthorized`] if none.
    pub async fn authenticate(&self, token: &str) -> Result<Account> {
        let unauthorized =
            || Error::Unauthorized("the token is not one this registry issued".into());
        let well_formed = token
            .strip_prefix(TOKEN_PREFIX)
            .is_some_and(|t| t.len() == 43 && URL_SAFE_NO_PAD.decode(t).is_ok());
        if !well_formed {
            return Err(unauthorized());
        }
        let hash = token_hash(token);
        let found = self
            .read(move |conn| {
                conn.query_opt(
                    "SELECT a.id, a.name, a.role FROM tokens t JOIN accounts a ON a.id = t.account
                     WHERE t.hash = ?1",
                    params![hash],
                )?
                .map(|row| Ok::<_, Error>((row.int(0)?, row.text(1)?, row.text(2)?)))
                .transpose()
            })
            .await?;
        found
            .map(|(id, name, role)| Account {
                id,
                name,
                role: role.parse().unwrap_or(Role::Publisher),
            })
            .ok_or_else(unauthorized)
    }

    /// Registers `public_key` (`ed25519:<base64>`) as a signing key of
    /// `account` (`created` says whether it is new to the account), given
    /// `proof`, the key's signature (base64) of
    /// `sandwit-key-registration-v2:<registry id>:<account>:<public key>`:
    /// only who holds the secret key can register it, so nobody can claim
    /// (squat) another publisher's key, and a proof sent to another registry
    /// cannot be replayed here. [`Error::KeyTaken`] if another account has
    /// it, [`Error::KeyRevoked`] if this one revoked it.
    pub async fn register_key(
        &self,
        account: &Account,
        public_key: &str,
        proof: &str,
    ) -> Result<KeyRegistered> {
        let key = PublicKey::parse(public_key)
            .map_err(|why| Error::bad_request("invalid-public-key", why.to_string()))?;
        let proof = Signature::parse(proof)
            .map_err(|why| Error::bad_request("invalid-proof", why.to_string()))?;
        key.verify_registration(self.id(), &account.name, &proof)
            .map_err(|why| Error::bad_request("invalid-proof", why.to_string()))?;
        let key = key.to_string();
        let account_id = account.id;
        self.write(move |conn| {
            let owner = conn
                .query_opt(
                    "SELECT account, revoked_at FROM keys WHERE public_key = ?1",
                    params![&key],
                )?
                .map(|row| Ok::<_, Error>((row.int(0)?, row.opt_int(1)?)))
                .transpose()?;
            let created = match owner {
                Some((id, Some(_))) if id == account_id => {
                    return Err(Error::KeyRevoked(format!(
                        "the key {key} is revoked: a revoked key is never registered again \
                         (make a new one with `sandwit keygen`)"
                    )));
                }
                Some((id, None)) if id == account_id => false,
                Some(_) => {
                    return Err(Error::KeyTaken(
                        "this public key is registered to another account".into(),
                    ));
                }
                None => {
                    conn.execute(
                        "INSERT INTO keys (public_key, account, created_at) VALUES (?1, ?2, ?3)",
                        params![&key, account_id, meta::now()],
                    )?;
                    true
                }
            };
            Ok(KeyRegistered {
                public_key: key,
                created,
            })
        })
        .await
    }

    /// Revokes `public_key`, a key of `account`: it verifies no publish
    /// from now on, and is never registered again; versions it signed stay
    /// as they are, shown as signed by a revoked key. Revoking a revoked key
    /// answers when it was revoked. [`Error::NotFound`] if the account has
    /// no such key.
    pub async fn revoke_key(&self, account: &Account, public_key: &str) -> Result<KeyRevoked> {
        let key = PublicKey::parse(public_key)
            .map_err(|why| Error::bad_request("invalid-public-key", why.to_string()))?
            .to_string();
        let (account_id, name) = (account.id, account.name.clone());
        self.write(move |conn| {
            conn.execute(
                "UPDATE keys SET revoked_at = ?3
                 WHERE public_key = ?1 AND account = ?2 AND revoked_at IS NULL",
                params![&key, account_id, meta::now()],
            )?;
            let revoked_at = conn
                .query_opt(
                    "SELECT revoked_at FROM keys WHERE public_key = ?1 AND account = ?2",
                    params![&key, account_id],
                )?
                .map(|row| row.opt_int(0))
                .transpose()?
                .flatten();
            let Some(at) = revoked_at else {
                return Err(Error::NotFound(format!(
                    "account {name} has no key {key} to revoke"
                )));
            };
            Ok(KeyRevoked {
                public_key: key,
                revoked_at: meta::rfc3339(at),
            })
        })
        .await
    }

    /// The public keys registered for `account`, each with whether it is
    /// revoked.
    pub(crate) fn keys_of(conn: &mut dyn Conn, account: i64) -> Result<Vec<(String, bool)>> {
        conn.query(
            "SELECT public_key, revoked_at IS NOT NULL FROM keys WHERE account = ?1",
            params![account],
        )?
        .iter()
        .map(|row| Ok::<_, Error>((row.text(0)?, row.bool(1)?)))
        .collect()
    }
}
