//! Blobs in an object store (`--blobs s3://bucket/prefix` or
//! `--blobs file://DIR`), through the `object_store` crate: the object
//! `<prefix>/sha256/<hex>`. The only key the registry makes is that one,
//! from a checked 64-digit hex digest, so no name from a request reaches
//! the store. Its async client is driven by a [`Driver`] of its own.

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::driver::Driver;
use crate::names::is_sha256_hex;

/// An S3 bucket (or an S3-compatible server's) holding the blobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The keys' prefix within it (empty: none).
    pub prefix: String,
    /// The server's URL, for S3-compatible servers (MinIO...); `None`: AWS,
    /// or `AWS_ENDPOINT`.
    pub endpoint: Option<String>,
    /// The access key id and secret; `None`: the usual AWS environment
    /// variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, `AWS_REGION`...) or the instance's role.
    pub credentials: Option<(String, String)>,
}

/// The blobs in an object store.
pub struct ObjectBlobs {
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    /// Where downloads are spooled before they are checked (`DIR/tmp`).
    scratch: PathBuf,
    driver: Driver,
}

/// How a request to the store is retried: a few times, within a bound, so
/// a store that is down fails the request rather than holding it.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(30),
        ..Default::default()
    }
}

impl ObjectBlobs {
    /// The bucket of `location`. Call it where [`Driver::block_on`] may be
    /// called.
    pub fn s3(location: &S3Location, scratch: &Path) -> anyhow::Result<Self> {
        let mut builder = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(&location.bucket)
            .with_retry(retry());
        if let Some(endpoint) = &location.endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        if let Some((id, secret)) = &location.credentials {
            builder = builder
                .with_access_key_id(id)
                .with_secret_access_key(secret);
        }
        let store = builder
            .build()
            .with_context(|| format!("the S3 bucket {}", location.bucket))?;
        Self::new(Arc::new(store), &location.prefix, scratch)
    }

    /// The folder `dir` (created if need be), through the object store's
    /// local file system.
    pub fn local(dir: &Path, scratch: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir)
            .with_context(|| format!("opening {}", dir.display()))?;
        Self::new(Arc::new(store), "", scratch)
    }

    fn new(store: Arc<dyn ObjectStore>, prefix: &str, scratch: &Path) -> anyhow::Result<Self> {
        let prefix = Key::parse(prefix.trim_matches('/'))
            .with_context(|| format!("the key prefix {prefix:?}"))?;
        std::fs::create_dir_all(scratch)
            .with_context(|| format!("creating {}", scratch.display()))?;
        Ok(ObjectBlobs {
            store,
            prefix,
            scratch: scratch.to_path_buf(),
            driver: Driver::new()?,
        })
    }

    /// The key of the blob `hex`, once it is checked to be a digest.
    fn key(&self, hex: &str) -> anyhow::Result<Key> {
        anyhow::ensure!(is_sha256_hex(hex), "not a SHA-256 digest: {hex:?}");
        Ok(self.prefix.clone().join("sha256").join(hex))
    }

    /// Stores `bytes` under `hex` (their SHA-256). A put is atomic in an
    /// object store: a reader sees the whole object or none. It always
    /// writes, so an object whose bytes were changed is mended.
    pub fn put(&self, hex: &str, bytes: &axum::body::Bytes) -> anyhow::Result<()> {
        let key = self.key(hex)?;
        self.driver
            .block_on(self.store.put(&key, PutPayload::from(bytes.clone())))
            .with_context(|| format!("storing {key} in {}", self.store))?;
        Ok(())
    }

    /// Removes the blob `hex` (nothing if there is none).
    pub fn remove(&self, hex: &str) -> anyhow::Result<()> {
        let key = self.key(hex)?;
        match self.driver.block_on(self.store.delete(&key)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(anyhow::Error::new(e).context(format!("removing {key}"))),
        }
    }

    /// The blob `hex`, downloaded into a file of its own (already unlinked,
    /// so it goes when closed), read from its start; `None` if absent.
    pub fn get(&self, hex: &str) -> anyhow::Result<Option<std::fs::File>> {
        let key = self.key(hex)?;
        let mut file = self.spool(hex)?;
        let fetched = self.driver.block_on(async {
            let got = match self.store.get(&key).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(anyhow::Error::new(e)),
            };
            let mut chunks = got.into_stream();
            while let Some(chunk) = chunks.next().await {
                file.write_all(&chunk?)?;
            }
            anyhow::Ok(true)
        });
        if !fetched.with_context(|| format!("reading {key} from {}", self.store))? {
            return Ok(None);
        }
        file.rewind()?;
        Ok(Some(file))
    }

    /// A new file in the scratch folder, unlinked at once.
    fn spool(&self, hex: &str) -> anyhow::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|e| anyhow::anyhow!("getrandom: {e}"))?;
        let name = format!(
            "blob-{}-{}",
            &hex[..16],
            suffix
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let path = self.scratch.join(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        Ok(file)
    }
}
