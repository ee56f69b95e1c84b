//! Publishing a version: the signature, the load check (the [`Validator`],
//! under the bound on checks at once), ownership, immutability, then the
//! blob and the metadata.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{OptionalExtension, params};

use crate::error::{Error, Result};
use crate::validate::{Validator, Verdict};
use crate::{Account, Published, Registry, db, names};
use sandwit_contract::Manifest;
use sandwit_contract::signing::{PublicKey, Signature, digest_of};

/// What a client busy-refused should wait: about one check's time.
const BUSY_RETRY: Duration = Duration::from_secs(10);

impl Registry {
    /// A place for `account`'s upload to be read and checked, taken before
    /// its body is read and held until it is published or refused: one of
    /// the account's [`UPLOADS_PER_ACCOUNT`] ([`Error::TooManyUploads`] when
    /// they are taken, so one publisher cannot hold every place with slow
    /// bodies) and one of the registry's ([`Error::Busy`] when all are
    /// taken: their bodies bound the service's memory).
    ///
    /// [`UPLOADS_PER_ACCOUNT`]: crate::UPLOADS_PER_ACCOUNT
    pub fn upload_slot(&self, account: &Account) -> Result<UploadSlot> {
        let held = {
            let mut counts = self
                .inner
                .uploads_by_account
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let count = counts.entry(account.id).or_insert(0);
            if *count >= crate::UPLOADS_PER_ACCOUNT {
                return Err(Error::TooManyUploads {
                    account: account.name.clone(),
                    max: crate::UPLOADS_PER_ACCOUNT,
                    after: BUSY_RETRY,
                });
            }
            *count += 1;
            AccountUpload {
                counts: self.inner.uploads_by_account.clone(),
                account: account.id,
            }
        };
        let global = self
            .inner
            .uploads
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::Busy(BUSY_RETRY))?;
        Ok(UploadSlot {
            _global: global,
            _account: held,
        })
    }

    /// Publishes `component`, signed with `signature` (base64, from the
    /// `Sandwit-Signature` header), for `account`: the whole of `POST
    /// /v1/plugins` after authentication and reading the body. `slot` is the
    /// [`Registry::upload_slot`] the body was read under: it is released
    /// only when nothing holds the body any more, by the task that writes
    /// the blob if it gets that far (that task outlives a dropped request).
    pub async fn publish(
        &self,
        account: &Account,
        component: axum::body::Bytes,
        signature: Option<&str>,
        slot: UploadSlot,
    ) -> Result<Published> {
        let signature = signature.ok_or(Error::MissingSignature)?;
        let signature =
            Signature::parse(signature).map_err(|e| Error::BadSignature(e.to_string()))?;
        let digest = digest_of(&component);
        let account_id = account.id;
        let keys = self
            .db(move |conn| Registry::keys_of(conn, account_id))
            .await?;
        let verifies = |(k, _): &&(String, bool)| {
            PublicKey::parse(k).is_ok_and(|k| k.verify_digest(&digest, &signature).is_ok())
        };
        let signer = match keys.iter().find(verifies) {
            Some((key, false)) => key.clone(),
            Some((key, true)) => {
                return Err(Error::BadSignature(format!(
                    "the signature of {digest} is by {key}, which account {} has revoked: sign \
                     with a key that is not revoked",
                    account.name
                )));
            }
            None if keys.is_empty() => {
                return Err(Error::BadSignature(format!(
                    "account {} has no registered public key (POST /v1/keys) to verify the \
                     signature with",
                    account.name
                )));
            }
            None => {
                return Err(Error::BadSignature(format!(
                    "the signature of {digest} verifies with none of the {} public key(s) of \
                     account {}",
                    keys.len(),
                    account.name
                )));
            }
        };

        // The quota before the check, so an upload past it costs no check;
        // the transaction below checks again.
        let (acct, size) = (account.clone(), component.len() as u64);
        let quota = self.account_quota();
        self.db(move |conn| within_quota(conn, &acct, size, quota))
            .await?;

        // Whatever holds the body holds its slot: the check's blocking task
        // (which runs on if the request is dropped) and the blob writer.
        let slot = Arc::new(slot);
        let manifest = self.check(&component, &digest, slot.clone()).await?;
        let indexed: Manifest = serde_json::from_value(manifest.clone()).map_err(|e| {
            Error::Internal(anyhow::anyhow!(
                "the validator accepted {digest} with a manifest the registry cannot read: {e}"
            ))
        })?;
        names::plugin_id(&indexed.id)?;
        let version = names::version(&indexed.version)?;

        // Cheap refusals first, so a refused upload writes nothing; the
        // transaction below checks again.
        // What the version stores counts against the quota: the component,
        // its manifest and its search text (each up to megabytes).
        let manifest_text = manifest.to_string();
        let search = search_text(&indexed);
        let stored = (component.len() + manifest_text.len() + search.len()) as u64;
        let (id, ver, acct) = (indexed.id.clone(), indexed.version.clone(), account.clone());
        self.db(move |conn| {
            may_publish(conn, &acct, &id, &ver)?;
            within_quota(conn, &acct, stored, quota)
        })
        .await?;

        // The rest runs as a task of its own: a request dropped meanwhile (a
        // client that hangs up, the request timeout) still commits its
        // version or removes its blob, never leaving a blob no version names.
        let this = self.clone();
        let account = account.clone();
        let signature = signature.to_string();
        tokio::spawn(async move {
            // The body is held here until the task ends, so is its slot.
            let _slot = slot;
            let hex = digest["sha256:".len()..].to_string();
            // Held until the version is committed or its blob cleaned up: a
            // publish that loses the race below removes the blob it wrote only
            // if no other publish of the same bytes is under way.
            let pending = this.inner.blobs.pending(&hex);
            let writer = this.clone();
            let bytes = component.clone();
            let blob_hex = hex.clone();
            tokio::task::spawn_blocking(move || writer.inner.blobs.put(&blob_hex, &bytes))
                .await
                .map_err(|e| Error::Internal(anyhow::anyhow!("the blob writer failed: {e}")))??;

            let published = Published {
                id: indexed.id.clone(),
                version: indexed.version.clone(),
                digest: digest.clone(),
                size: component.len() as u64,
                signer,
                manifest,
            };
            #[cfg(test)]
            let hook = this.inner.before_commit.lock().unwrap().take();
            #[cfg(test)]
            if let Some(hook) = hook {
                this.db_now(|conn| {
                    hook(conn);
                    Ok(())
                })?;
            }
            let row = published.clone();
            let acct = account.clone();
            let committed = this
                .db(move |conn| {
                    let tx =
                        conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                    let new_plugin = may_publish(&tx, &acct, &row.id, &row.version)?;
                    within_quota(&tx, &acct, stored, quota)?;
                    let now = db::now();
                    if new_plugin {
                        tx.execute(
                            "INSERT INTO plugins (id, latest, created_at) VALUES (?1, NULL, ?2)",
                            params![row.id, now],
                        )?;
                        tx.execute(
                            "INSERT INTO owners (plugin, account) VALUES (?1, ?2)",
                            params![row.id, acct.id],
                        )?;
                    }
                    let mut kinds: Vec<&str> =
                        indexed.methods.iter().map(|m| m.kind.as_str()).collect();
                    kinds.sort_unstable();
                    kinds.dedup();
                    tx.execute(
                    "INSERT INTO versions (plugin, version, digest, size, signer, signature, publisher,
                         published_at, name, description, manifest, kinds, capabilities, search_text)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                    params![
                        row.id,
                        row.version,
                        row.digest,
                        row.size as i64,
                        row.signer,
                        signature,
                        acct.id,
                        now,
                        indexed.name,
                        indexed.description,
                        manifest_text,
                        serde_json::to_string(&kinds).map_err(anyhow::Error::from)?,
                        serde_json::to_string(&indexed.capabilities).map_err(anyhow::Error::from)?,
                        search,
                    ],
                )?;
                    crate::manage::update_latest(&tx, &row.id)?;
                    tx.commit()?;
                    Ok(())
                })
                .await;
            if let Err(e) = committed {
                // Lost a race (another publish of this id and version, or past
                // the quota, committed in between) or failed: the blob written
                // above must not stay on disk with no version naming it.
                this.remove_orphan_blob(pending).await;
                return Err(e);
            }
            tracing::info!(
                id = %published.id,
                version = %version,
                digest = %published.digest,
                account = %account.name,
                "published"
            );
            Ok(published)
        })
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("the publish task failed: {e}")))?
    }

    /// Releases `pending`, the failed publish's hold on its blob, and
    /// removes the blob unless a version names it or another publish of
    /// the same bytes is under way (a failure is logged: an orphan blob
    /// wastes space but breaks nothing).
    pub(crate) async fn remove_orphan_blob(&self, pending: crate::blobs::Pending) {
        let registry = self.clone();
        let result = self
            .db(move |conn| {
                let digest = format!("sha256:{}", pending.hex());
                let named: Option<i64> = conn
                    .query_row(
                        "SELECT 1 FROM versions WHERE digest = ?1 LIMIT 1",
                        [&digest],
                        |r| r.get(0),
                    )
                    .optional()?;
                // Under the database's lock: no version naming it can be
                // committed meanwhile, and a publish of the same bytes
                // holds it pending from before it writes until after it
                // commits.
                if named.is_none() {
                    registry.inner.blobs.remove_unless_pending(pending)?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = result {
            tracing::warn!("removing the blob of a publish that failed: {e:#}");
        }
    }

    /// Runs the validator on `component` under the bound on checks at
    /// once: the manifest if it is accepted. `slot`, the upload's, is held
    /// as long as the check holds the bytes.
    async fn check(
        &self,
        component: &axum::body::Bytes,
        digest: &str,
        slot: Arc<UploadSlot>,
    ) -> Result<serde_json::Value> {
        let validator: Arc<dyn Validator> = self.inner.validator.clone().ok_or_else(|| {
            Error::Internal(anyhow::anyhow!(
                "this registry has no validator: it cannot publish"
            ))
        })?;
        let registry = self.clone();
        // The permit moves into the blocking task: a request dropped while
        // its check runs (a client that hangs up, the request timeout) must
        // not free its place while the worker process still runs, or hanging
        // up in a loop would run any number of workers at once.
        let permit = registry
            .inner
            .validations
            .clone()
            .try_acquire_owned()
            .map_err(|_| Error::Busy(BUSY_RETRY))?;
        tracing::info!(%digest, size = component.len(), "validating");
        let (bytes, owned_digest) = (component.clone(), digest.to_string());
        let verdict = tokio::task::spawn_blocking(move || {
            let verdict = validator.validate(&bytes, &owned_digest);
            drop(permit);
            drop((bytes, slot));
            verdict
        })
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("the validator task failed: {e}")))?
        .map_err(|e| Error::Internal(e.context("running the validator")))?;
        match verdict {
            Verdict::Accepted { manifest } => Ok(manifest),
            Verdict::Rejected { mut report } => {
                // The report names the upload by its digest, not by wherever
                // the validator put it.
                report["file"] = digest.into();
                let problems: Vec<&str> = report["problems"]
                    .as_array()
                    .map(|ps| ps.iter().filter_map(|p| p.as_str()).collect())
                    .unwrap_or_default();
                let mut summary = problems
                    .iter()
                    .take(3)
                    .copied()
                    .collect::<Vec<_>>()
                    .join("; ");
                if problems.len() > 3 {
                    summary.push_str(&format!("; and {} more", problems.len() - 3));
                }
                tracing::info!(%digest, problems = problems.len(), "rejected");
                Err(Error::InvalidPlugin { summary, report })
            }
        }
    }
}

/// One upload's place: the registry's and its account's, both released
/// when it is dropped.
pub struct UploadSlot {
    _global: tokio::sync::OwnedSemaphorePermit,
    _account: AccountUpload,
}

/// One of an account's places for uploads: counted in
/// `Inner::uploads_by_account` while it lives.
struct AccountUpload {
    counts: Arc<Mutex<HashMap<i64, usize>>>,
    account: i64,
}

impl Drop for AccountUpload {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.account) {
            *count -= 1;
            // An account with nothing in flight takes no room.
            if *count == 0 {
                counts.remove(&self.account);
            }
        }
    }
}

/// Whether `account` may publish `version` of `id`: `Ok(true)` for a new
/// id (the account becomes its owner), `Ok(false)` for an id it owns;
/// 403 if others own it, 409 if the version exists.
fn may_publish(
    conn: &rusqlite::Connection,
    account: &Account,
    id: &str,
    version: &str,
) -> Result<bool> {
    let exists: Option<i64> = conn
        .query_row("SELECT 1 FROM plugins WHERE id = ?1", [id], |r| r.get(0))
        .optional()?;
    if exists.is_none() {
        return Ok(true);
    }
    let owner: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2",
            params![id, account.id],
            |r| r.get(0),
        )
        .optional()?;
    if owner.is_none() {
        return Err(Error::NotAnOwner(format!(
            "plugin {id} belongs to other accounts; account {} is not among its owners",
            account.name
        )));
    }
    let taken: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM versions WHERE plugin = ?1 AND version = ?2",
            params![id, version],
            |r| r.get(0),
        )
        .optional()?;
    if taken.is_some() {
        return Err(Error::VersionExists(format!(
            "{id} {version} is already published; versions are immutable (publish a new one)"
        )));
    }
    Ok(false)
}

/// [`Error::QuotaExceeded`] if `size` more bytes would take `account` past
/// `quota` (none: no quota). What an account uses is what every version it
/// published stores (yanked ones too: they stay downloadable): the
/// component, its manifest and its search text.
fn within_quota(
    conn: &rusqlite::Connection,
    account: &Account,
    size: u64,
    quota: Option<u64>,
) -> Result<()> {
    let Some(quota) = quota else {
        return Ok(());
    };
    let used: i64 = conn.query_row(
        "SELECT coalesce(sum(size + length(CAST(manifest AS BLOB))
                              + length(CAST(search_text AS BLOB))), 0)
         FROM versions WHERE publisher = ?1",
        [account.id],
        |r| r.get(0),
    )?;
    let used = used.max(0) as u64;
    if used.saturating_add(size) > quota {
        return Err(Error::QuotaExceeded {
            account: account.name.clone(),
            size,
            used,
            quota,
        });
    }
    Ok(())
}

/// The lowercased text a search matches against.
fn search_text(m: &Manifest) -> String {
    let mut text = format!("{}\n{}\n{}\n", m.id, m.name, m.description);
    for method in &m.methods {
        text.push_str(&method.name);
        text.push('\n');
        text.push_str(&method.docstring);
        text.push('\n');
    }
    text.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use axum::body::Bytes;
    use sandwit_contract::signing::SigningKey;

    /// Accepts everything as `race` 1.0.0.
    struct AcceptAll;

    impl Validator for AcceptAll {
        fn validate(&self, _: &[u8], _: &str) -> anyhow::Result<Verdict> {
            Ok(Verdict::Accepted {
                manifest: serde_json::json!({
                    "id": "race", "name": "Race", "version": "1.0.0", "author": "a", "description": "",
                    "methods": [{"name": "go", "kind": "tool", "description": "Go.", "docstring": "Go.", "params": [], "returns": null}],
                    "config_schema": null, "capabilities": [],
                }),
            })
        }
    }

    fn blob_path(registry: &Registry, bytes: &[u8]) -> std::path::PathBuf {
        let digest = digest_of(bytes);
        registry
            .dir()
            .join("blobs/sha256")
            .join(&digest["sha256:".len()..])
    }

    /// A publish that writes its blob and then loses the race to commit
    /// (another publish of the same id and version committed in between)
    /// removes its blob; one whose bytes a version names keeps it.
    #[tokio::test]
    async fn a_publish_that_loses_the_race_removes_its_blob() {
        let dir = crate::scratch::ScratchDir::new("race");
        let registry = Registry::open_with(&dir, Some(Arc::new(AcceptAll)), 2).unwrap();
        let token = registry.create_token("alice", Role::Publisher).unwrap();
        let alice = registry.authenticate(&token).await.unwrap();
        let key = SigningKey::generate().unwrap();
        let public = key.public_key().to_string();
        registry
            .register_key(
                &alice,
                &public,
                &key.sign_registration(registry.id(), "alice").to_string(),
            )
            .await
            .unwrap();
        let publish = |bytes: &'static [u8]| {
            let signature = key.sign_digest(&digest_of(bytes)).unwrap().to_string();
            let (registry, alice) = (registry.clone(), alice.clone());
            async move {
                registry
                    .publish(
                        &alice,
                        axum::body::Bytes::from_static(bytes),
                        Some(&signature),
                        registry.upload_slot(&alice).unwrap(),
                    )
                    .await
            }
        };
        // The winner commits between the loser's blob write and commit.
        let alice_id = alice.id;
        *registry.inner.before_commit.lock().unwrap() = Some(Box::new(move |conn| {
            conn.execute(
                "INSERT INTO plugins (id, latest, created_at) VALUES ('race', '1.0.0', 0)",
                [],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO owners (plugin, account) VALUES ('race', ?1)",
                [alice_id],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO versions (plugin, version, digest, size, signer, signature,
                     publisher, published_at, name, description, manifest, kinds,
                     capabilities, search_text)
                 VALUES ('race', '1.0.0', 'sha256:' || printf('%064d', 0), 1, '', '', ?1, 0,
                     '', '', '{}', '[]', '[]', '')",
                [alice_id],
            )
            .unwrap();
        }));
        let lost = publish(b"the loser's bytes").await.unwrap_err();
        assert!(matches!(lost, Error::VersionExists(_)), "{lost:?}");
        assert!(
            !blob_path(&registry, b"the loser's bytes").exists(),
            "the losing publish left its blob"
        );
    }

    /// Accepts everything with the manifest it holds.
    struct Accept(serde_json::Value);

    impl Validator for Accept {
        fn validate(&self, _: &[u8], _: &str) -> anyhow::Result<Verdict> {
            Ok(Verdict::Accepted {
                manifest: self.0.clone(),
            })
        }
    }

    /// A registry accepting `manifest`, with alice's key registered: it and
    /// a publish of some bytes as alice.
    async fn accepting(
        name: &str,
        manifest: serde_json::Value,
    ) -> (
        crate::scratch::ScratchDir,
        Registry,
        impl AsyncFn(&'static [u8]) -> Result<Published>,
    ) {
        let dir = crate::scratch::ScratchDir::new(name);
        let registry = Registry::open_with(&dir, Some(Arc::new(Accept(manifest))), 2).unwrap();
        let token = registry.create_token("alice", Role::Publisher).unwrap();
        let alice = registry.authenticate(&token).await.unwrap();
        let key = SigningKey::generate().unwrap();
        registry
            .register_key(
                &alice,
                &key.public_key().to_string(),
                &key.sign_registration(registry.id(), "alice").to_string(),
            )
            .await
            .unwrap();
        let publisher = registry.clone();
        let publish = async move |bytes: &'static [u8]| {
            let signature = key.sign_digest(&digest_of(bytes)).unwrap().to_string();
            let slot = publisher.upload_slot(&alice).unwrap();
            publisher
                .publish(&alice, Bytes::from_static(bytes), Some(&signature), slot)
                .await
        };
        (dir, registry, publish)
    }

    fn manifest(description: &str) -> serde_json::Value {
        serde_json::json!({
            "id": "big", "name": "Big", "version": "1.0.0", "author": "a", "description": description,
            "methods": [{"name": "go", "kind": "tool", "description": "Go.", "docstring": "Go.", "params": [], "returns": null}],
            "config_schema": null, "capabilities": [],
        })
    }

    /// The quota counts what a version stores besides its component: a
    /// few bytes of component whose manifest and search text (each with a
    /// description of 600 KiB) come to more than 1 MiB are refused.
    #[tokio::test]
    async fn the_quota_counts_the_manifest_and_search_text() {
        let (_dir, registry, publish) =
            accepting("quota-text", manifest(&"x".repeat(600 << 10))).await;
        registry.set_account_quota(Some(1 << 20));
        let refused = publish(b"a small component").await.unwrap_err();
        let Error::QuotaExceeded { size, used, .. } = refused else {
            panic!("{refused:?}")
        };
        assert!(size > 2 * (600 << 10), "{size}");
        assert_eq!(used, 0);
        registry.set_account_quota(Some(4 << 20));
        publish(b"a small component").await.unwrap();
    }

    /// Search goes through the FTS5 index: a word matches as a substring
    /// (of three characters or more); once the index forgets a version,
    /// the search no longer finds it, whatever its text says.
    #[tokio::test]
    async fn search_is_served_from_the_index() {
        let (_dir, registry, publish) =
            accepting("search-index", manifest("Counts Zephyrwords quickly")).await;
        publish(b"searchable").await.unwrap();
        let search = |q: &str| {
            let registry = registry.clone();
            let q = q.to_string();
            async move {
                registry
                    .search(crate::SearchQuery {
                        q: Some(q),
                        ..Default::default()
                    })
                    .await
            }
        };
        let ids = |page: crate::SearchPage| -> Vec<String> {
            page.plugins.into_iter().map(|p| p.id).collect()
        };
        assert_eq!(ids(search("PHYRWORD count").await.unwrap()), ["big"]);
        assert!(ids(search("phyrword absent").await.unwrap()).is_empty());
        // Quotes are text, not FTS5 syntax.
        assert!(ids(search("\"phyr NOT big\"").await.unwrap()).is_empty());
        let short = search("ze").await.unwrap_err();
        assert!(short.to_string().contains("shorter than 3"), "{short}");
        registry
            .db_now(|conn| {
                conn.execute(
                    "INSERT INTO versions_search (versions_search, rowid, search_text)
                     SELECT 'delete', rowid, search_text FROM versions",
                    [],
                )?;
                Ok(())
            })
            .unwrap();
        assert!(ids(search("phyrword").await.unwrap()).is_empty());
    }

    /// A blob another publish holds pending, or a version names, stays.
    #[test]
    fn a_blob_held_by_another_publish_stays() {
        let dir = crate::scratch::ScratchDir::new("pending");
        let registry = Registry::open(&dir).unwrap();
        let bytes: &[u8] = b"shared bytes";
        let hex = digest_of(bytes)["sha256:".len()..].to_string();
        let blobs = &registry.inner.blobs;
        let (first, second) = (blobs.pending(&hex), blobs.pending(&hex));
        blobs.put(&hex, bytes).unwrap();
        blobs.remove_unless_pending(first).unwrap();
        assert!(blob_path(&registry, bytes).exists());
        drop(second);
        // Once no other publish holds it, a failing one removes it.
        blobs.remove_unless_pending(blobs.pending(&hex)).unwrap();
        assert!(!blob_path(&registry, bytes).exists());
    }

    /// Two publishes of the same bytes that both fail while both hold the
    /// blob: the second to release it removes it, leaving no orphan.
    #[test]
    fn two_failing_publishes_of_the_same_bytes_leave_no_blob() {
        let dir = crate::scratch::ScratchDir::new("both-fail");
        let registry = Registry::open(&dir).unwrap();
        let bytes: &[u8] = b"bytes twice refused";
        let hex = digest_of(bytes)["sha256:".len()..].to_string();
        let blobs = &registry.inner.blobs;
        let (first, second) = (blobs.pending(&hex), blobs.pending(&hex));
        blobs.put(&hex, bytes).unwrap();
        blobs.remove_unless_pending(first).unwrap();
        assert!(blob_path(&registry, bytes).exists(), "still held by second");
        blobs.remove_unless_pending(second).unwrap();
        assert!(
            !blob_path(&registry, bytes).exists(),
            "both publishes failed but the blob stayed"
        );
        // Nothing is left held: a third publish's hold is its alone.
        blobs.remove_unless_pending(blobs.pending(&hex)).unwrap();
    }
}
