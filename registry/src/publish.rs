//! Publishing a version: the signature, the load check (the [`Validator`],
//! under the bound on checks at once), ownership, immutability, then the
//! blob and the metadata.
//!
//! A publish holds its blob (a row of `blob_holds`, in the metadata every
//! replica shares) from before it writes it until its version is
//! committed. One that fails removes its blob only when, in a write
//! transaction, it finds no version naming it and no other hold: so no
//! publish, from any replica, removes a blob a committed version names or
//! one that another publish is about to commit. A hold left by a process
//! that died keeps its blob (an orphan that wastes space, never a version
//! naming missing bytes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::meta::{self, Conn, params};
use crate::validate::{Validator, Verdict};
use crate::{Account, Published, Registry, names};
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
        let signer = self.signer_of(account, &digest, &signature).await?;

        // The quota before the check, so an upload past it costs no check;
        // the transaction that commits checks again.
        let (acct, size) = (account.clone(), component.len() as u64);
        let quota = self.account_quota();
        self.read(move |conn| within_quota(conn, &acct, size, quota))
            .await?;

        // Whatever holds the body holds its slot: the check's blocking task
        // (which runs on if the request is dropped) and the blob writer.
        let slot = Arc::new(slot);
        let manifest = self.check(&component, &digest, slot.clone()).await?;
        let upload = Upload::new(account, component, digest, signer, &signature, manifest)?;
        // Cheap refusals first, so a refused upload writes nothing.
        self.may_store(&upload, quota).await?;

        // The rest runs as a task of its own: a request dropped meanwhile (a
        // client that hangs up, the request timeout) still commits its
        // version or removes its blob, never leaving a blob no version names.
        let this = self.clone();
        tokio::spawn(async move {
            // The body is held here until the task ends, so is its slot.
            let _slot = slot;
            this.store(upload, quota).await
        })
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("the publish task failed: {e}")))?
    }

    /// The key of `account` that `signature` of `digest` verifies with:
    /// refused if that key is revoked, or if none does.
    async fn signer_of(
        &self,
        account: &Account,
        digest: &str,
        signature: &Signature,
    ) -> Result<String> {
        let account_id = account.id;
        let keys = self
            .read(move |conn| Registry::keys_of(conn, account_id))
            .await?;
        let verifies = |(k, _): &&(String, bool)| {
            PublicKey::parse(k).is_ok_and(|k| k.verify_digest(digest, signature).is_ok())
        };
        match keys.iter().find(verifies) {
            Some((key, false)) => Ok(key.clone()),
            Some((key, true)) => Err(Error::BadSignature(format!(
                "the signature of {digest} is by {key}, which account {} has revoked: sign \
                 with a key that is not revoked",
                account.name
            ))),
            None if keys.is_empty() => Err(Error::BadSignature(format!(
                "account {} has no registered public key (POST /v1/keys) to verify the \
                 signature with",
                account.name
            ))),
            None => Err(Error::BadSignature(format!(
                "the signature of {digest} verifies with none of the {} public key(s) of \
                 account {}",
                keys.len(),
                account.name
            ))),
        }
    }

    /// Refuses `upload` if its account may not publish it (see
    /// [`may_publish`]) or it would take the account past `quota`: checked
    /// before anything is written, and again when its version is committed.
    async fn may_store(&self, upload: &Upload, quota: Option<u64>) -> Result<()> {
        let (id, ver) = (upload.row.plugin.clone(), upload.row.version.clone());
        let (acct, stored) = (upload.account.clone(), upload.stored);
        self.read(move |conn| {
            may_publish(conn, &acct, &id, &ver)?;
            within_quota(conn, &acct, stored, quota)
        })
        .await
    }

    /// Writes `upload`'s blob and commits its version, the blob held all
    /// along (see the module's docs): if either fails, the blob is released
    /// (and removed unless something else holds or names it).
    async fn store(&self, upload: Upload, quota: Option<u64>) -> Result<Published> {
        let Upload {
            account,
            component,
            published,
            row,
            version,
            stored,
        } = upload;
        let hex = published.digest["sha256:".len()..].to_string();
        // Held until the version is committed or its blob cleaned up.
        let hold = self.hold_blob(&published.digest).await?;
        if let Err(e) = self.write_blob(&hex, component).await {
            self.release_blob(hold, &hex).await;
            return Err(e);
        }
        let acct = account.clone();
        let committed = self
            .write(move |conn| {
                let new_plugin = may_publish(conn, &acct, &row.plugin, &row.version)?;
                within_quota(conn, &acct, stored, quota)?;
                meta::insert_version(conn, &row, new_plugin)?;
                crate::manage::update_latest(conn, &row.plugin)?;
                conn.execute("DELETE FROM blob_holds WHERE id = ?1", params![hold])?;
                Ok(())
            })
            .await;
        if let Err(e) = committed {
            // Lost a race (another publish of this id and version, or past
            // the quota, committed in between) or failed: the blob written
            // above must not stay with no version naming it.
            self.release_blob(hold, &hex).await;
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
    }

    /// Stores `bytes` as the blob `hex`, on a blocking thread.
    async fn write_blob(&self, hex: &str, bytes: axum::body::Bytes) -> Result<()> {
        let (writer, hex) = (self.clone(), hex.to_string());
        tokio::task::spawn_blocking(move || writer.inner.blobs.put(&hex, &bytes))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("the blob writer failed: {e}")))
            .and_then(|put| put.map_err(Error::Internal))
    }

    /// Holds the blob `digest` (`sha256:<hex>`) for a publish: until the
    /// hold is released, no failing publish removes it. The hold's id.
    pub(crate) async fn hold_blob(&self, digest: &str) -> Result<i64> {
        let digest = digest.to_string();
        self.write(move |conn| {
            conn.query_one(
                "INSERT INTO blob_holds (digest, created_at) VALUES (?1, ?2) RETURNING id",
                params![digest, meta::now()],
            )?
            .int(0)
        })
        .await
    }

    /// Releases `hold`, a failed publish's hold on the blob `hex`, and
    /// removes the blob unless a version names it or another publish holds
    /// it. Both are checked, and the blob removed, in one write
    /// transaction: no version naming it can be committed, and no hold
    /// taken, meanwhile. A failure is logged: an orphan blob wastes space
    /// but breaks nothing.
    pub(crate) async fn release_blob(&self, hold: i64, hex: &str) {
        let registry = self.clone();
        let hex = hex.to_string();
        let result = self
            .write(move |conn| {
                let digest = format!("sha256:{hex}");
                conn.execute("DELETE FROM blob_holds WHERE id = ?1", params![hold])?;
                let held = conn
                    .query_opt(
                        "SELECT 1 FROM blob_holds WHERE digest = ?1 LIMIT 1",
                        params![&digest],
                    )?
                    .is_some();
                let named = conn
                    .query_opt(
                        "SELECT 1 FROM versions WHERE digest = ?1 LIMIT 1",
                        params![&digest],
                    )?
                    .is_some();
                if !held && !named {
                    registry.inner.blobs.remove(&hex)?;
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

/// An upload the validator accepted: what its publish stores and
/// commits.
struct Upload {
    /// The publishing account.
    account: Account,
    /// The component's bytes.
    component: axum::body::Bytes,
    /// What the publish answers once committed.
    published: Published,
    /// Its row of `versions`.
    row: meta::NewVersion,
    /// Its version, parsed.
    version: semver::Version,
    /// What the version stores, counted against the quota: the component,
    /// its manifest and its search text (each up to megabytes).
    stored: u64,
}

impl Upload {
    /// `component` (whose digest is `digest`), signed with `signature` by
    /// `signer`, which the validator accepted with `manifest`: refused if
    /// its id or version is not valid.
    fn new(
        account: &Account,
        component: axum::body::Bytes,
        digest: String,
        signer: String,
        signature: &Signature,
        manifest: serde_json::Value,
    ) -> Result<Self> {
        let indexed: Manifest = serde_json::from_value(manifest.clone()).map_err(|e| {
            Error::Internal(anyhow::anyhow!(
                "the validator accepted {digest} with a manifest the registry cannot read: {e}"
            ))
        })?;
        names::plugin_id(&indexed.id)?;
        let version = names::version(&indexed.version)?;
        let manifest_text = manifest.to_string();
        let search_text = search_text(&indexed);
        let stored = (component.len() + manifest_text.len() + search_text.len()) as u64;
        let mut kinds: Vec<String> = indexed
            .methods
            .iter()
            .map(|m| m.kind.as_str().to_string())
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        let row = meta::NewVersion {
            plugin: indexed.id.clone(),
            version: indexed.version.clone(),
            digest: digest.clone(),
            size: component.len() as u64,
            signer: signer.clone(),
            signature: signature.to_string(),
            publisher: account.id,
            name: indexed.name,
            description: indexed.description,
            manifest: manifest_text,
            kinds,
            capabilities: indexed.capabilities,
            search_text,
        };
        let published = Published {
            id: indexed.id,
            version: indexed.version,
            digest,
            size: component.len() as u64,
            signer,
            manifest,
        };
        Ok(Upload {
            account: account.clone(),
            component,
            published,
            row,
            version,
            stored,
        })
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
fn may_publish(conn: &mut dyn Conn, account: &Account, id: &str, version: &str) -> Result<bool> {
    let exists = conn
        .query_opt("SELECT 1 FROM plugins WHERE id = ?1", params![id])?
        .is_some();
    if !exists {
        return Ok(true);
    }
    let owner = conn
        .query_opt(
            "SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2",
            params![id, account.id],
        )?
        .is_some();
    if !owner {
        return Err(Error::NotAnOwner(format!(
            "plugin {id} belongs to other accounts; account {} is not among its owners",
            account.name
        )));
    }
    let taken = conn
        .query_opt(
            "SELECT 1 FROM versions WHERE plugin = ?1 AND version = ?2",
            params![id, version],
        )?
        .is_some();
    if taken {
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
    conn: &mut dyn Conn,
    account: &Account,
    size: u64,
    quota: Option<u64>,
) -> Result<()> {
    let Some(quota) = quota else {
        return Ok(());
    };
    let used = conn
        .query_one(
            "SELECT CAST(coalesce(sum(size + octet_length(manifest) + octet_length(search_text)),
                                  0) AS BIGINT)
             FROM versions WHERE publisher = ?1",
            params![account.id],
        )?
        .int(0)?;
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
    use crate::blobs::{Blobs, Opened, Store};
    use crate::scratch::{Backend, TestData, on_both_backends};
    use axum::body::Bytes;
    use sandwit_contract::signing::SigningKey;

    /// Whether the registry's blobs hold `bytes`.
    fn stored(registry: &Registry, bytes: &[u8]) -> bool {
        let digest = digest_of(bytes);
        match registry
            .inner
            .blobs
            .open_checked(&digest["sha256:".len()..])
        {
            Ok(Opened::Verified(..)) => true,
            Ok(Opened::Missing) => false,
            Ok(Opened::Tampered(actual)) => panic!("tampered: {actual}"),
            Err(e) => panic!("{e:#}"),
        }
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

    /// What [`AfterPut`] runs.
    type Then = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;

    /// A blob store that runs what its [`Then`] holds, once, right after
    /// it writes a blob: in a publish, between the blob write and the
    /// commit.
    struct AfterPut {
        blobs: Blobs,
        then: Then,
    }

    impl Store for AfterPut {
        fn put(&self, hex: &str, bytes: &Bytes) -> anyhow::Result<()> {
            self.blobs.put(hex, bytes)?;
            let then = self.then.lock().unwrap().take();
            if let Some(then) = then {
                then();
            }
            Ok(())
        }

        fn remove(&self, hex: &str) -> anyhow::Result<()> {
            self.blobs.remove(hex)
        }

        fn get(&self, hex: &str) -> anyhow::Result<Option<std::fs::File>> {
            self.blobs.get(hex)
        }
    }

    /// A registry accepting `manifest`, with alice's key registered: its
    /// data, it, alice, and a publish of some bytes as alice.
    async fn accepting(
        name: &str,
        backend: Backend,
        manifest: serde_json::Value,
    ) -> (
        TestData,
        Registry,
        Account,
        impl AsyncFn(&'static [u8]) -> Result<Published>,
    ) {
        accepting_with_store(name, backend, manifest, |blobs| blobs).await
    }

    /// [`accepting`], its blobs in what `store` makes of the blob store.
    async fn accepting_with_store(
        name: &str,
        backend: Backend,
        manifest: serde_json::Value,
        store: impl FnOnce(Blobs) -> Blobs + Send,
    ) -> (
        TestData,
        Registry,
        Account,
        impl AsyncFn(&'static [u8]) -> Result<Published>,
    ) {
        let data = TestData::new(name, backend);
        let registry = data.open_with_store(Some(Arc::new(Accept(manifest))), store);
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
        let (publisher, account) = (registry.clone(), alice.clone());
        let publish = async move |bytes: &'static [u8]| {
            let signature = key.sign_digest(&digest_of(bytes)).unwrap().to_string();
            let slot = publisher.upload_slot(&account).unwrap();
            publisher
                .publish(&account, Bytes::from_static(bytes), Some(&signature), slot)
                .await
        };
        (data, registry, alice, publish)
    }

    fn manifest(id: &str, description: &str) -> serde_json::Value {
        serde_json::json!({
            "id": id, "name": id, "version": "1.0.0", "author": "a", "description": description,
            "methods": [{"name": "go", "kind": "tool", "description": "Go.", "docstring": "Go.", "params": [], "returns": null}],
            "config_schema": null, "capabilities": [],
        })
    }

    on_both_backends!(
        a_publish_that_loses_the_race_removes_its_blob,
        super::a_publish_that_loses_the_race_removes_its_blob
    );
    /// A publish that writes its blob and then loses the race to commit
    /// (another publish of the same id and version committed in between)
    /// gets the conflict and removes its blob.
    async fn a_publish_that_loses_the_race_removes_its_blob(backend: Backend) {
        let then = Then::default();
        let after_put = |blobs| -> Blobs {
            Box::new(AfterPut {
                blobs,
                then: then.clone(),
            })
        };
        let (data, registry, alice, publish) =
            accepting_with_store("race", backend, manifest("race", ""), after_put).await;
        // The winner commits, through another replica on the same metadata,
        // between the loser's blob write and commit.
        let replica = data.open(None);
        let alice_id = alice.id;
        let winner = format!("sha256:{}", "0".repeat(64));
        *then.lock().unwrap() = Some(Box::new(move || {
            replica
                .write_now(|conn| {
                    conn.execute(
                        "INSERT INTO plugins (id, latest, created_at) VALUES ('race', '1.0.0', 0)",
                        &[],
                    )?;
                    conn.execute(
                        "INSERT INTO owners (plugin, account) VALUES ('race', ?1)",
                        params![alice_id],
                    )?;
                    conn.execute(
                        "INSERT INTO versions (plugin, version, digest, size, signer, signature,
                             publisher, published_at, name, description, manifest, kinds,
                             capabilities, search_text)
                         VALUES ('race', '1.0.0', ?1, 1, '', '', ?2, 0, '', '', '{}', '[]',
                                 '[]', '')",
                        params![winner, alice_id],
                    )?;
                    Ok(())
                })
                .unwrap();
        }));
        let lost = publish(b"the loser's bytes").await.unwrap_err();
        assert!(then.lock().unwrap().is_none(), "the winner did not commit");
        assert!(matches!(lost, Error::VersionExists(_)), "{lost:?}");
        assert!(
            !stored(&registry, b"the loser's bytes"),
            "the losing publish left its blob"
        );
    }

    on_both_backends!(
        the_quota_counts_the_manifest_and_search_text,
        super::the_quota_counts_the_manifest_and_search_text
    );
    /// The quota counts what a version stores besides its component: a
    /// few bytes of component whose manifest and search text (each with a
    /// description of 600 KiB) come to more than 1 MiB are refused.
    async fn the_quota_counts_the_manifest_and_search_text(backend: Backend) {
        let (_data, registry, _, publish) = accepting(
            "quota-text",
            backend,
            manifest("big", &"x".repeat(600 << 10)),
        )
        .await;
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

    /// SQLite's search goes through its FTS5 index: a word matches as a
    /// substring (of three characters or more); once the index forgets a
    /// version, the search no longer finds it, whatever its text says.
    #[tokio::test]
    async fn search_is_served_from_the_index() {
        let (_data, registry, _, publish) = accepting(
            "search-index",
            Backend::Sqlite,
            manifest("big", "Counts Zephyrwords quickly"),
        )
        .await;
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
            .write_now(|conn| {
                conn.execute(
                    "INSERT INTO versions_search (versions_search, rowid, search_text)
                     SELECT 'delete', rowid, search_text FROM versions",
                    &[],
                )?;
                Ok(())
            })
            .unwrap();
        assert!(ids(search("phyrword").await.unwrap()).is_empty());
    }

    on_both_backends!(
        a_blob_held_by_another_publish_stays,
        super::a_blob_held_by_another_publish_stays
    );
    /// A blob another publish holds, or a version names, stays when a
    /// publish of the same bytes fails; once nothing holds or names it, a
    /// failing publish removes it.
    async fn a_blob_held_by_another_publish_stays(backend: Backend) {
        let (_data, registry, _, publish) = accepting("holds", backend, manifest("held", "")).await;
        let bytes: &[u8] = b"shared bytes";
        let digest = digest_of(bytes);
        let hex = &digest["sha256:".len()..];
        let first = registry.hold_blob(&digest).await.unwrap();
        let second = registry.hold_blob(&digest).await.unwrap();
        registry
            .inner
            .blobs
            .put(hex, &Bytes::from_static(bytes))
            .unwrap();
        registry.release_blob(first, hex).await;
        assert!(stored(&registry, bytes), "still held by the second");
        registry.release_blob(second, hex).await;
        assert!(
            !stored(&registry, bytes),
            "both publishes failed but the blob stayed"
        );

        // A version names these bytes: a failing publish of them keeps them.
        publish(bytes).await.unwrap();
        let third = registry.hold_blob(&digest).await.unwrap();
        registry.release_blob(third, hex).await;
        assert!(stored(&registry, bytes), "a version names it");
    }
}
