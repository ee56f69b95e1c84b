//! The registry's behaviour through its API, on both metadata backends
//! (each test once on SQLite, once on a PostgreSQL database of its own),
//! then replicas sharing one PostgreSQL database and one blob store, and
//! blobs on S3 (moto, started by `scripts/moto`).

use std::sync::Arc;

use axum::body::Bytes;
use sandwit_contract::signing::{SigningKey, digest_of};

use crate::scratch::{Backend, TestData, on_both_backends};
use crate::{
    Account, BlobLocation, Error, Published, Registry, Result, Role, S3Location, SearchQuery,
    Validator, Verdict,
};

/// Accepts an upload whose bytes are `ID VERSION [DESCRIPTION...]` as that
/// plugin, with one tool method.
pub(crate) struct ByBytes;

impl Validator for ByBytes {
    fn validate(&self, bytes: &[u8], _: &str) -> anyhow::Result<Verdict> {
        let text = std::str::from_utf8(bytes)?;
        let mut words = text.split_whitespace();
        let (id, version) = (words.next().unwrap(), words.next().unwrap());
        let description = words.collect::<Vec<_>>().join(" ");
        Ok(Verdict::Accepted {
            manifest: serde_json::json!({
                "id": id, "name": id, "version": version, "author": "a",
                "description": description,
                "methods": [{"name": "go", "kind": "tool", "description": "Go.",
                             "docstring": "Go.", "params": [], "returns": null}],
                "config_schema": null, "capabilities": [],
            }),
        })
    }
}

/// An account with a token and a registered key.
pub(crate) struct Publisher {
    pub(crate) registry: Registry,
    pub(crate) account: Account,
    token: String,
    key: Arc<SigningKey>,
}

impl Publisher {
    /// Makes the account `name` on `registry`, with a key registered.
    pub(crate) async fn new(registry: &Registry, name: &str, role: Role) -> Self {
        let token = registry.create_token(name, role).unwrap();
        let account = registry.authenticate(&token).await.unwrap();
        let key = Arc::new(SigningKey::generate().unwrap());
        let registered = registry
            .register_key(
                &account,
                &key.public_key().to_string(),
                &key.sign_registration(registry.id(), name).to_string(),
            )
            .await
            .unwrap();
        assert!(registered.created);
        Publisher {
            registry: registry.clone(),
            account,
            token,
            key,
        }
    }

    /// The same account and key on `other` (a replica).
    pub(crate) async fn on(&self, other: &Registry) -> Self {
        Publisher {
            registry: other.clone(),
            account: other.authenticate(&self.token).await.unwrap(),
            token: self.token.clone(),
            key: self.key.clone(),
        }
    }

    /// Publishes `text` (see [`ByBytes`]), signed with the key.
    pub(crate) async fn publish(&self, text: &str) -> Result<Published> {
        let bytes = Bytes::from(text.to_string());
        let signature = self
            .key
            .sign_digest(&digest_of(&bytes))
            .unwrap()
            .to_string();
        let slot = self.registry.upload_slot(&self.account)?;
        self.registry
            .publish(&self.account, bytes, Some(&signature), slot)
            .await
    }
}

/// The bytes of the blob `digest`, read through the registry.
pub(crate) async fn download(registry: &Registry, digest: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut blob = registry.blob(digest).await?;
    let mut bytes = Vec::new();
    blob.file.read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes.len() as u64, blob.size);
    Ok(bytes)
}

/// The ids a search finds.
async fn found(registry: &Registry, q: &str) -> Vec<String> {
    let page = registry
        .search(SearchQuery {
            q: Some(q.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    page.plugins.into_iter().map(|p| p.id).collect()
}

on_both_backends!(
    publish_then_search_read_and_download,
    super::publish_then_search_read_and_download
);
/// A published version is found by search, described by its plugin and
/// version pages, and downloaded as the bytes published.
async fn publish_then_search_read_and_download(backend: Backend) {
    let data = TestData::new("publish", backend);
    let registry = data.open(Some(Arc::new(ByBytes)));
    let alice = Publisher::new(&registry, "alice", Role::Publisher).await;
    let published = alice.publish("calc 1.0.0 Adds Numbers").await.unwrap();
    assert_eq!(
        (published.id.as_str(), published.version.as_str()),
        ("calc", "1.0.0")
    );
    alice.publish("zeta 0.1.0 Another one").await.unwrap();

    assert_eq!(found(&registry, "numbers").await, ["calc"]);
    assert_eq!(found(&registry, "ANOTHER").await, ["zeta"]);
    assert!(found(&registry, "nowhere").await.is_empty());
    let all = registry.search(SearchQuery::default()).await.unwrap();
    assert_eq!(all.total, 2);
    let ids: Vec<_> = all.plugins.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["calc", "zeta"]);
    assert_eq!(all.plugins[0].kinds, ["tool"]);
    let tools = registry
        .search(SearchQuery {
            kind: Some("tool".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tools.total, 2);
    let agents = registry
        .search(SearchQuery {
            kind: Some("agent".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(agents.total, 0);

    let plugin = registry.plugin("calc").await.unwrap();
    assert_eq!(plugin.owners, ["alice"]);
    assert_eq!(plugin.versions.len(), 1);
    assert_eq!(plugin.versions[0].digest, published.digest);
    assert!(!plugin.versions[0].yanked && !plugin.versions[0].signer_revoked);
    let version = registry.version("calc", "1.0.0").await.unwrap();
    assert_eq!(version.manifest["description"], "Adds Numbers");
    assert_eq!(version.size, published.size);
    assert!(matches!(
        registry.version("calc", "9.9.9").await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        registry.plugin("nope").await,
        Err(Error::NotFound(_))
    ));

    let bytes = download(&registry, &published.digest).await.unwrap();
    assert_eq!(bytes, b"calc 1.0.0 Adds Numbers");
    let unknown = digest_of(b"never published");
    assert!(matches!(
        registry.blob(&unknown).await,
        Err(Error::NotFound(_))
    ));
}

on_both_backends!(
    versions_are_immutable_and_ids_owned,
    super::versions_are_immutable_and_ids_owned
);
/// A version is published once; an id belongs to its owners.
async fn versions_are_immutable_and_ids_owned(backend: Backend) {
    let data = TestData::new("immutable", backend);
    let registry = data.open(Some(Arc::new(ByBytes)));
    let alice = Publisher::new(&registry, "alice", Role::Publisher).await;
    let bob = Publisher::new(&registry, "bob", Role::Publisher).await;
    alice.publish("calc 1.0.0").await.unwrap();
    let again = alice.publish("calc 1.0.0 other bytes").await.unwrap_err();
    assert!(matches!(again, Error::VersionExists(_)), "{again:?}");
    let stranger = bob.publish("calc 2.0.0").await.unwrap_err();
    assert!(matches!(stranger, Error::NotAnOwner(_)), "{stranger:?}");
    alice.publish("calc 1.1.0").await.unwrap();
    let versions: Vec<_> = registry
        .plugin("calc")
        .await
        .unwrap()
        .versions
        .into_iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(versions, ["1.1.0", "1.0.0"]);
}

on_both_backends!(
    yanks_move_the_latest_version,
    super::yanks_move_the_latest_version
);
/// Search shows a plugin as its highest version not yanked; a plugin with
/// every version yanked is not listed; only owners and admins yank.
async fn yanks_move_the_latest_version(backend: Backend) {
    let data = TestData::new("yanks", backend);
    let registry = data.open(Some(Arc::new(ByBytes)));
    let alice = Publisher::new(&registry, "alice", Role::Publisher).await;
    let bob = Publisher::new(&registry, "bob", Role::Publisher).await;
    let root = Publisher::new(&registry, "root", Role::Admin).await;
    alice.publish("calc 1.0.0").await.unwrap();
    alice.publish("calc 1.10.0").await.unwrap();
    alice.publish("calc 1.9.0").await.unwrap();
    let latest = async || {
        let page = registry.search(SearchQuery::default()).await.unwrap();
        page.plugins.first().map(|p| p.latest_version.clone())
    };
    assert_eq!(latest().await.as_deref(), Some("1.10.0"));
    registry
        .set_yanked(&alice.account, "calc", "1.10.0", true)
        .await
        .unwrap();
    assert_eq!(latest().await.as_deref(), Some("1.9.0"));
    let refused = registry
        .set_yanked(&bob.account, "calc", "1.9.0", true)
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::NotAnOwner(_)), "{refused:?}");
    for version in ["1.9.0", "1.0.0"] {
        registry
            .set_yanked(&root.account, "calc", version, true)
            .await
            .unwrap();
    }
    assert_eq!(latest().await, None);
    let plugin = registry.plugin("calc").await.unwrap();
    assert!(plugin.versions.iter().all(|v| v.yanked));
    registry
        .set_yanked(&alice.account, "calc", "1.0.0", false)
        .await
        .unwrap();
    assert_eq!(latest().await.as_deref(), Some("1.0.0"));
    let missing = registry
        .set_yanked(&alice.account, "calc", "3.0.0", true)
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing:?}");
}

on_both_backends!(
    owners_are_invited_accept_and_never_all_go,
    super::owners_are_invited_accept_and_never_all_go
);
/// An owner invites, the invited account accepts and may then publish; an
/// owner may be removed, never the last.
async fn owners_are_invited_accept_and_never_all_go(backend: Backend) {
    let data = TestData::new("owners", backend);
    let registry = data.open(Some(Arc::new(ByBytes)));
    let alice = Publisher::new(&registry, "alice", Role::Publisher).await;
    let bob = Publisher::new(&registry, "bob", Role::Publisher).await;
    alice.publish("calc 1.0.0").await.unwrap();
    let owners = registry
        .invite_owners(&alice.account, "calc", vec!["bob".into(), "alice".into()])
        .await
        .unwrap();
    assert_eq!(
        (owners.users, owners.invited),
        (vec!["alice".to_string()], vec!["bob".to_string()])
    );
    assert!(matches!(
        bob.publish("calc 1.1.0").await,
        Err(Error::NotAnOwner(_))
    ));
    let owners = registry
        .accept_ownership(&bob.account, "calc")
        .await
        .unwrap();
    assert_eq!(owners.users, ["alice", "bob"]);
    assert!(owners.invited.is_empty());
    bob.publish("calc 1.1.0").await.unwrap();
    let owners = registry
        .remove_owner(&bob.account, "calc", "alice")
        .await
        .unwrap();
    assert_eq!(owners.users, ["bob"]);
    let last = registry
        .remove_owner(&bob.account, "calc", "bob")
        .await
        .unwrap_err();
    assert!(matches!(last, Error::LastOwner(_)), "{last:?}");
    let none = registry
        .remove_owner(&bob.account, "calc", "alice")
        .await
        .unwrap_err();
    assert!(matches!(none, Error::NotFound(_)), "{none:?}");
    let unknown = registry
        .invite_owners(&bob.account, "calc", vec!["nobody".into()])
        .await
        .unwrap_err();
    assert!(matches!(unknown, Error::NotFound(_)), "{unknown:?}");
}

on_both_backends!(
    keys_are_one_accounts_and_revocable,
    super::keys_are_one_accounts_and_revocable
);
/// A key is one account's; registering it again is no change; a revoked
/// key verifies no publish and is never registered again.
async fn keys_are_one_accounts_and_revocable(backend: Backend) {
    let data = TestData::new("keys", backend);
    let registry = data.open(Some(Arc::new(ByBytes)));
    let alice = Publisher::new(&registry, "alice", Role::Publisher).await;
    let bob = Publisher::new(&registry, "bob", Role::Publisher).await;
    let public = alice.key.public_key().to_string();
    let again = registry
        .register_key(
            &alice.account,
            &public,
            &alice
                .key
                .sign_registration(registry.id(), "alice")
                .to_string(),
        )
        .await
        .unwrap();
    assert!(!again.created);
    let taken = registry
        .register_key(
            &bob.account,
            &public,
            &alice
                .key
                .sign_registration(registry.id(), "bob")
                .to_string(),
        )
        .await
        .unwrap_err();
    assert!(matches!(taken, Error::KeyTaken(_)), "{taken:?}");
    let missing = registry
        .revoke_key(&bob.account, &public)
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing:?}");
    alice.publish("calc 1.0.0").await.unwrap();
    let revoked = registry.revoke_key(&alice.account, &public).await.unwrap();
    let twice = registry.revoke_key(&alice.account, &public).await.unwrap();
    assert_eq!(revoked.revoked_at, twice.revoked_at);
    let refused = alice.publish("calc 1.1.0").await.unwrap_err();
    assert!(
        matches!(&refused, Error::BadSignature(m) if m.contains("revoked")),
        "{refused:?}"
    );
    let plugin = registry.plugin("calc").await.unwrap();
    assert!(plugin.versions[0].signer_revoked);
    let back = registry
        .register_key(
            &alice.account,
            &public,
            &alice
                .key
                .sign_registration(registry.id(), "alice")
                .to_string(),
        )
        .await
        .unwrap_err();
    assert!(matches!(back, Error::KeyRevoked(_)), "{back:?}");
}

on_both_backends!(
    tokens_and_quotas_are_checked,
    super::tokens_and_quotas_are_checked
);
/// Tokens name their account and keep its role; an account's versions
/// count against its quota.
async fn tokens_and_quotas_are_checked(backend: Backend) {
    let data = TestData::new("tokens", backend);
    let registry = data.open(Some(Arc::new(ByBytes)));
    let alice = Publisher::new(&registry, "alice", Role::Publisher).await;
    let second = registry.create_token("alice", Role::Publisher).unwrap();
    assert_eq!(
        registry.authenticate(&second).await.unwrap().id,
        alice.account.id
    );
    let mismatch = registry.create_token("alice", Role::Admin).unwrap_err();
    assert!(
        mismatch.to_string().contains("role publisher"),
        "{mismatch}"
    );
    let bogus = format!("swr_{}", "A".repeat(43));
    assert!(matches!(
        registry.authenticate(&bogus).await,
        Err(Error::Unauthorized(_))
    ));

    let first = alice.publish("calc 1.0.0").await.unwrap();
    let used = registry.version("calc", "1.0.0").await.unwrap();
    assert_eq!(used.size, first.size);
    registry.set_account_quota(Some(first.size + 10));
    let refused = alice.publish("calc 1.1.0").await.unwrap_err();
    let Error::QuotaExceeded { used, .. } = refused else {
        panic!("{refused:?}")
    };
    assert!(used > first.size, "the manifest counts: {used}");
    registry.set_account_quota(None);
    alice.publish("calc 1.1.0").await.unwrap();
}

/// A blob location that replicas share: a folder through the object
/// store's file system.
fn shared_folder(data: &TestData) -> BlobLocation {
    BlobLocation::File(data.dir.join("shared-blobs"))
}

/// Two replicas on one PostgreSQL database and one blob store: what one
/// publishes the other finds, describes, serves and yanks; the account and
/// key made on one work on the other.
#[tokio::test]
async fn replicas_share_publishes_yanks_and_accounts() {
    let data = TestData::new("replicas", Backend::Postgres);
    let (dir_a, dir_b) = (data.dir.join("a"), data.dir.join("b"));
    let a = data.open_in(&dir_a, Some(Arc::new(ByBytes)), shared_folder(&data));
    let b = data.open_in(&dir_b, Some(Arc::new(ByBytes)), shared_folder(&data));
    assert_eq!(a.id(), b.id(), "one registry, two replicas");
    let alice_a = Publisher::new(&a, "alice", Role::Publisher).await;
    let alice_b = alice_a.on(&b).await;
    let published = alice_a.publish("calc 1.0.0 Adds numbers").await.unwrap();
    assert_eq!(found(&b, "numbers").await, ["calc"]);
    assert_eq!(
        download(&b, &published.digest).await.unwrap(),
        b"calc 1.0.0 Adds numbers"
    );
    alice_b.publish("calc 1.1.0").await.unwrap();
    b.set_yanked(&alice_b.account, "calc", "1.1.0", true)
        .await
        .unwrap();
    let plugin = a.plugin("calc").await.unwrap();
    let yanked: Vec<_> = plugin
        .versions
        .iter()
        .map(|v| (v.version.as_str(), v.yanked))
        .collect();
    assert_eq!(yanked, [("1.1.0", true), ("1.0.0", false)]);
    let page = a.search(SearchQuery::default()).await.unwrap();
    assert_eq!(page.plugins[0].latest_version, "1.0.0");
    let again = alice_a.publish("calc 1.1.0 again").await.unwrap_err();
    assert!(matches!(again, Error::VersionExists(_)), "{again:?}");
}

/// The same version published on two replicas at once, with different
/// bytes, many times over: each time exactly one publish wins, the other
/// gets the conflict a single registry gives, the winner's bytes are served
/// by both replicas and the loser's blob is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_publishes_on_two_replicas_one_wins() {
    let data = TestData::new("race", Backend::Postgres);
    let (dir_a, dir_b) = (data.dir.join("a"), data.dir.join("b"));
    let a = data.open_in(&dir_a, Some(Arc::new(ByBytes)), shared_folder(&data));
    let b = data.open_in(&dir_b, Some(Arc::new(ByBytes)), shared_folder(&data));
    let alice_a = Publisher::new(&a, "alice", Role::Publisher).await;
    let alice_b = alice_a.on(&b).await;
    for round in 0..10 {
        let version = format!("1.0.{round}");
        let (text_a, text_b) = (
            format!("calc {version} from a"),
            format!("calc {version} from b"),
        );
        let (won_a, won_b) = tokio::join!(alice_a.publish(&text_a), alice_b.publish(&text_b));
        let (winner, winner_text, loser_text, lost) = match (won_a, won_b) {
            (Ok(p), Err(e)) => (p, text_a, text_b, e),
            (Err(e), Ok(p)) => (p, text_b, text_a, e),
            other => panic!("round {round}: not exactly one winner: {other:?}"),
        };
        assert!(matches!(lost, Error::VersionExists(_)), "{lost:?}");
        assert_eq!(winner.digest, digest_of(winner_text.as_bytes()));
        let detail = b.version("calc", &version).await.unwrap();
        assert_eq!(detail.digest, winner.digest);
        for replica in [&a, &b] {
            let bytes = download(replica, &winner.digest).await.unwrap();
            assert_eq!(bytes, winner_text.as_bytes());
        }
        let lost_digest = digest_of(loser_text.as_bytes());
        assert!(
            !data
                .dir
                .join("shared-blobs/sha256")
                .join(&lost_digest[7..])
                .exists(),
            "round {round}: the losing publish left its blob"
        );
    }
}

/// A bucket of its own on the test S3 server (moto), and its location with
/// the server's test credentials.
fn s3_bucket() -> S3Location {
    let url = crate::scratch::s3_url();
    let bucket = crate::scratch::random_name("reg-");
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    // Creating a bucket is no registry operation: a plain HTTP request,
    // which moto takes unsigned.
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "creating {bucket}: {answer}"
    );
    S3Location {
        bucket,
        prefix: "blobs".into(),
        endpoint: Some(url.to_string()),
        credentials: Some(("testing".into(), "testing".into())),
    }
}

/// The object store a test reaches its bucket through, as anyone with the
/// bucket's credentials could.
fn s3_store(location: &S3Location) -> object_store::aws::AmazonS3 {
    let (id, secret) = location.credentials.clone().unwrap();
    object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(&location.bucket)
        .with_endpoint(location.endpoint.clone().unwrap())
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id(id)
        .with_secret_access_key(secret)
        .build()
        .unwrap()
}

/// With blobs on S3: a publish stores the component under its digest, a
/// download serves it, and an object overwritten through the S3 API with
/// other bytes is refused (blob-mismatch), never served.
#[tokio::test]
async fn blobs_on_s3_are_served_and_checked_on_read() {
    use object_store::ObjectStoreExt;
    let location = s3_bucket();
    let data = TestData::new("s3", Backend::Sqlite);
    let registry = data.open_in(
        &data.dir,
        Some(Arc::new(ByBytes)),
        BlobLocation::S3(location.clone()),
    );
    let alice = Publisher::new(&registry, "alice", Role::Publisher).await;
    let published = alice.publish("calc 1.0.0 On S3").await.unwrap();
    assert_eq!(
        download(&registry, &published.digest).await.unwrap(),
        b"calc 1.0.0 On S3"
    );
    let key = object_store::path::Path::from(format!(
        "blobs/sha256/{}",
        &published.digest["sha256:".len()..]
    ));
    let store = s3_store(&location);
    let stored = store.get(&key).await.unwrap().bytes().await.unwrap();
    assert_eq!(&stored[..], b"calc 1.0.0 On S3", "stored under its digest");

    store
        .put(
            &key,
            object_store::PutPayload::from_static(b"calc 1.0.0 Evil"),
        )
        .await
        .unwrap();
    let refused = registry.blob(&published.digest).await.unwrap_err();
    assert!(
        matches!(&refused, Error::BlobMismatch(m) if m.contains(&published.digest)),
        "{refused:?}"
    );
    assert_eq!(refused.code(), "blob-mismatch");
}

/// Replicas on PostgreSQL with their blobs on S3: a publish on one is
/// downloaded from the other.
#[tokio::test]
async fn replicas_share_blobs_on_s3() {
    let location = s3_bucket();
    let data = TestData::new("replicas-s3", Backend::Postgres);
    let (dir_a, dir_b) = (data.dir.join("a"), data.dir.join("b"));
    let a = data.open_in(
        &dir_a,
        Some(Arc::new(ByBytes)),
        BlobLocation::S3(location.clone()),
    );
    let b = data.open_in(&dir_b, None, BlobLocation::S3(location));
    let alice = Publisher::new(&a, "alice", Role::Publisher).await;
    let published = alice.publish("calc 2.0.0 Shared").await.unwrap();
    assert_eq!(
        download(&b, &published.digest).await.unwrap(),
        b"calc 2.0.0 Shared"
    );
}
