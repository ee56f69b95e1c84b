//! Plugin files installed from a registry: checked against their folder's
//! lock file when loaded, and signatures required when the policy says so.

use std::path::{Path, PathBuf};

use sandwit::lock::{LockEntry, LockFile};
use sandwit::signing::{SigningKey, digest_of};
use sandwit::{Host, LoadError, Policy};

use crate::common::{artifacts, cache_dir};

fn folder(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("installed")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Installs `component` as `id` in `dir`, as `sandwit install` does,
/// signed by `key`.
fn install(dir: &Path, id: &str, component: &str, key: &SigningKey) {
    let bytes = std::fs::read(component).unwrap();
    let file = format!("{id}.wasm");
    std::fs::write(dir.join(&file), &bytes).unwrap();
    let digest = digest_of(&bytes);
    let mut lock = LockFile::read(dir).unwrap().unwrap_or_default();
    lock.insert(LockEntry {
        id: id.to_string(),
        version: "0.1.0".to_string(),
        file,
        signature: key.sign_digest(&digest).unwrap(),
        digest,
        registry: "https://plugins.example".to_string(),
        signer: key.public_key(),
    });
    lock.write(dir).unwrap();
}

fn host(policy: Policy) -> Host {
    Host::builder()
        .cache_dir(cache_dir())
        .policy(policy)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_changed_installed_file_is_refused_before_it_is_compiled() {
    let dir = folder("changed");
    let key = SigningKey::generate().unwrap();
    install(&dir, "calc", artifacts::CALC, &key);
    let host = host(Policy::default());
    let calc = dir.join("calc.wasm");
    host.load_plugin_file(&calc).await.unwrap();

    let echo = std::fs::read(artifacts::ECHO).unwrap();
    std::fs::write(&calc, &echo).unwrap();
    let err = host.load_plugin_file(&calc).await.err().unwrap();
    let LoadError::Tampered {
        plugin,
        file,
        expected,
        actual,
        lock,
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(plugin, "calc");
    assert_eq!(file, &calc.display().to_string());
    assert_eq!(
        expected,
        &digest_of(&std::fs::read(artifacts::CALC).unwrap())
    );
    assert_eq!(actual, &digest_of(&echo));
    assert!(lock.ends_with("sandwit.lock"));
    let message = err.to_string();
    assert!(
        message.contains(expected) && message.contains(actual),
        "{message}"
    );

    // Checked before anything else: bytes that are not even wasm are
    // refused for their digest, not their header.
    std::fs::write(&calc, b"not wasm").unwrap();
    let err = host.load_plugin_file(&calc).await.err().unwrap();
    assert!(matches!(err, LoadError::Tampered { .. }), "{err}");

    // A file the lock does not list loads as any file does.
    std::fs::copy(artifacts::ECHO, dir.join("echo.wasm")).unwrap();
    host.load_plugin_file(dir.join("echo.wasm")).await.unwrap();
    // An entry whose id is not the plugin's is refused.
    install(&dir, "other", artifacts::ECHO, &key);
    let err = host
        .load_plugin_file(dir.join("other.wasm"))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("records it as `other`"), "{err}");
}

#[tokio::test]
async fn required_signatures_come_from_trusted_keys() {
    let dir = folder("required");
    let trusted = SigningKey::generate().unwrap();
    let stranger = SigningKey::generate().unwrap();
    install(&dir, "calc", artifacts::CALC, &trusted);
    install(&dir, "echo", artifacts::ECHO, &stranger);
    std::fs::copy(artifacts::KNOWLEDGE, dir.join("knowledge.wasm")).unwrap();
    let policy = Policy::from_toml(&format!(
        "[registry]\ntrusted_keys = [\"{}\"]\nrequire_signature = true\n",
        trusted.public_key()
    ))
    .unwrap();
    let host = host(policy);

    host.load_plugin_file(dir.join("calc.wasm")).await.unwrap();
    for (file, why) in [
        ("echo.wasm", "which is not a trusted key"),
        ("knowledge.wasm", "it is not listed in"),
    ] {
        let err = host.load_plugin_file(dir.join(file)).await.err().unwrap();
        assert!(matches!(err, LoadError::Unsigned { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains("requires a signature from a trusted key") && message.contains(why),
            "{message}"
        );
    }
    // A signature that does not verify.
    let mut lock = LockFile::read(&dir).unwrap().unwrap();
    let mut forged = lock.by_id("calc").unwrap().clone();
    forged.signature = trusted.sign_digest(&digest_of(b"other")).unwrap();
    lock.insert(forged);
    lock.write(&dir).unwrap();
    let err = host
        .load_plugin_file(dir.join("calc.wasm"))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("does not verify"), "{err}");
    // Bytes have no folder, so no lock file to be listed in.
    let bytes = std::fs::read(artifacts::CALC).unwrap();
    let err = host.load_plugin("calc.wasm", &bytes).await.err().unwrap();
    assert!(err.to_string().contains("loaded from bytes"), "{err}");
}

#[tokio::test]
async fn a_malformed_lock_file_refuses_its_folder() {
    let dir = folder("malformed");
    std::fs::copy(artifacts::CALC, dir.join("calc.wasm")).unwrap();
    std::fs::write(LockFile::path(&dir), "version = 7\n").unwrap();
    let err = host(Policy::default())
        .load_plugin_file(dir.join("calc.wasm"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::Lock { .. }), "{err}");
    assert!(err.to_string().contains("of version 7"), "{err}");
}

/// A registry that lists the signed bytes of an old version under a newer
/// version number: the signature verifies (it covers only the digest), and
/// the manifest inside the bytes gives the substitution away at load.
#[tokio::test]
async fn bytes_of_another_version_than_the_lock_records_are_refused() {
    let dir = folder("other-version");
    let key = SigningKey::generate().unwrap();
    install(&dir, "calc", artifacts::CALC, &key);
    let mut lock = LockFile::read(&dir).unwrap().unwrap();
    let mut entry = lock.by_file("calc.wasm").unwrap().clone();
    entry.version = "9.9.9".to_string();
    lock.insert(entry);
    lock.write(&dir).unwrap();
    let err = host(Policy::default())
        .load_plugin_file(dir.join("calc.wasm"))
        .await
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("its manifest says version 0.1.0") && text.contains("`9.9.9`"),
        "{text}"
    );
}
