//! Test support: a folder of a test's own, removed when the test ends.

use std::path::{Path, PathBuf};

/// A fresh folder under the system's temporary directory, named after the
/// test, the process and the time; removed (with what it holds) on drop.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    pub(crate) fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(format!(
            "sandwit-registry-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        )))
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The metadata backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// SQLite's file in the test's directory.
    Sqlite,
    /// A database of its own on the test cluster (see [`postgres_url`]).
    Postgres,
}

/// Runs a test's `async fn(Backend)` once on each backend: a module named
/// after the test with one test per backend.
macro_rules! on_both_backends {
    ($name:ident, $case:path) => {
        mod $name {
            use crate::scratch::Backend;

            #[tokio::test]
            async fn sqlite() {
                $case(Backend::Sqlite).await
            }

            #[tokio::test]
            async fn postgres() {
                $case(Backend::Postgres).await
            }
        }
    };
}
pub(crate) use on_both_backends;

/// A test's data: a scratch directory and, on PostgreSQL, a database of
/// its own (dropped at the end).
pub(crate) struct TestData {
    pub(crate) dir: ScratchDir,
    pub(crate) database: crate::Database,
    _postgres: Option<TestDatabase>,
}

impl TestData {
    pub(crate) fn new(name: &str, backend: Backend) -> Self {
        let (database, postgres) = match backend {
            Backend::Sqlite => (crate::Database::Sqlite, None),
            Backend::Postgres => {
                let db = TestDatabase::create();
                (crate::Database::Postgres(db.url.clone()), Some(db))
            }
        };
        TestData {
            dir: ScratchDir::new(name),
            database,
            _postgres: postgres,
        }
    }

    /// A registry on this data, checking uploads with `validator`.
    pub(crate) fn open(
        &self,
        validator: Option<std::sync::Arc<dyn crate::Validator>>,
    ) -> crate::Registry {
        self.open_in(&self.dir, validator, crate::BlobLocation::Dir)
    }

    /// A registry on this data, checking uploads with `validator`, its
    /// blobs in what `store` makes of the blob directory (a fake).
    pub(crate) fn open_with_store(
        &self,
        validator: Option<std::sync::Arc<dyn crate::Validator>>,
        store: impl FnOnce(crate::blobs::Blobs) -> crate::blobs::Blobs + Send,
    ) -> crate::Registry {
        crate::Registry::open_with_store(
            &self.dir,
            self.options(validator, crate::BlobLocation::Dir),
            store,
        )
        .unwrap()
    }

    /// A registry (a replica) on this data's metadata, with its own
    /// directory `dir` and its blobs at `blobs`.
    pub(crate) fn open_in(
        &self,
        dir: &Path,
        validator: Option<std::sync::Arc<dyn crate::Validator>>,
        blobs: crate::BlobLocation,
    ) -> crate::Registry {
        crate::Registry::open_with_options(dir, self.options(validator, blobs)).unwrap()
    }

    /// The options of a registry on this data.
    fn options(
        &self,
        validator: Option<std::sync::Arc<dyn crate::Validator>>,
        blobs: crate::BlobLocation,
    ) -> crate::Options {
        crate::Options {
            database: self.database.clone(),
            blobs,
            validator,
            max_validations: 2,
        }
    }
}

/// The URL of the test S3 server (moto): `SANDWIT_TEST_S3`, else the one
/// `scripts/moto start` starts (or finds running).
pub(crate) fn s3_url() -> &'static str {
    static URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("SANDWIT_TEST_S3") {
            return url;
        }
        run_script("moto", &["start"])
    })
}

/// Runs `scripts/<name> <args>`: what it prints.
fn run_script(name: &str, args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts")
        .join(name);
    let out = std::process::Command::new(&script)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(out.status.success(), "{} {args:?} failed", script.display());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A random name for a test's database or bucket: `prefix` and 16 hex digits.
pub(crate) fn random_name(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

/// A database of the test cluster (`SANDWIT_TEST_POSTGRES`, else the one
/// `scripts/postgres` starts), made for one test, dropped after it.
pub(crate) struct TestDatabase {
    pub(crate) url: String,
}

impl TestDatabase {
    pub(crate) fn create() -> Self {
        // One at a time: the first starts the cluster.
        static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = STARTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        TestDatabase {
            url: run_script("postgres", &["createdb"]),
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Best effort, never a panic (this may run while a test unwinds): a
        // database left behind is dropped with the cluster's data.
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres");
        let _ = std::process::Command::new(script)
            .args(["dropdb", &self.url])
            .status();
    }
}
