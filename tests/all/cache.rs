//! The compiled-code cache: a second host (as a second process would) loads
//! a plugin without compiling it, and the cache keeps to its cap.

use sandwit::{CodeSource, Host};

use crate::common::{artifacts, assert_still_serving};

fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[tokio::test]
async fn a_second_host_loads_from_the_disk_cache() {
    let dir = fresh_dir("cache-second-host");
    let first = Host::builder().cache_dir(&dir).build().unwrap();
    let calc = first.load_plugin_file(artifacts::CALC).await.unwrap();
    assert_eq!(calc.code_source(), CodeSource::Compiled);
    let again = first.load_plugin_file(artifacts::CALC).await.unwrap();
    assert_eq!(again.code_source(), CodeSource::MemoryCache);

    let second = Host::builder().cache_dir(&dir).build().unwrap();
    let calc = second.load_plugin_file(artifacts::CALC).await.unwrap();
    assert_eq!(calc.code_source(), CodeSource::DiskCache);
    assert_still_serving(&second).await;
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_compiled_again() {
    let dir = fresh_dir("cache-corrupt");
    let first = Host::builder().cache_dir(&dir).build().unwrap();
    first.load_plugin_file(artifacts::CALC).await.unwrap();
    let entries = entries(&dir);
    assert_eq!(entries.len(), 1, "{entries:?}");
    std::fs::write(&entries[0], b"garbage").unwrap();

    let second = Host::builder().cache_dir(&dir).build().unwrap();
    let calc = second.load_plugin_file(artifacts::CALC).await.unwrap();
    assert_eq!(calc.code_source(), CodeSource::Compiled);
    assert_still_serving(&second).await;
}

#[tokio::test]
async fn a_file_changed_in_place_is_read_again() {
    let dir = fresh_dir("cache-file-changed");
    let file = dir.join("plugin.wasm");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(artifacts::CALC, &file).unwrap();
    // Each load is by a new host, as by a new process.
    let load = async || {
        let host = Host::builder().cache_dir(dir.join("cache")).build();
        let plugin = host.unwrap().load_plugin_file(&file).await.unwrap();
        (plugin.id().to_string(), plugin.code_source())
    };
    assert_eq!(load().await, ("calc".into(), CodeSource::Compiled));
    // The unchanged file's code is found without reading the file...
    assert_eq!(load().await, ("calc".into(), CodeSource::DiskCache));
    // ...and the file is read again once it changes under the same name.
    std::fs::write(&file, std::fs::read(artifacts::ECHO).unwrap()).unwrap();
    assert_eq!(load().await, ("echo".into(), CodeSource::Compiled));
}

#[tokio::test]
async fn a_full_cache_deletes_the_least_recently_used_code() {
    let dir = fresh_dir("cache-capped");
    let host = |max_bytes| Host::builder().cache_dir(&dir).cache_max_bytes(max_bytes);
    let load = async |max_bytes, file| {
        let host = host(max_bytes).build().unwrap();
        host.load_plugin_file(file).await.unwrap().code_source()
    };
    // What each takes, compiled into a cache of its own.
    let mut size = std::collections::HashMap::new();
    for file in [artifacts::ECHO, artifacts::CALC, artifacts::NOTES] {
        let own = fresh_dir("cache-capped-size");
        let host = Host::builder().cache_dir(&own).build().unwrap();
        host.load_plugin_file(file).await.unwrap();
        size.insert(
            file,
            entries(&own)
                .iter()
                .map(|p| p.metadata().unwrap().len())
                .sum::<u64>(),
        );
    }
    // Not capped here: echo, then calc.
    assert_eq!(load(u64::MAX, artifacts::ECHO).await, CodeSource::Compiled);
    assert_eq!(load(u64::MAX, artifacts::CALC).await, CodeSource::Compiled);
    // Loading echo from disk makes calc the least recently used.
    assert_eq!(load(u64::MAX, artifacts::ECHO).await, CodeSource::DiskCache);
    // One byte short of room for all three: writing notes deletes calc.
    let all: u64 = size.values().sum();
    assert_eq!(load(all - 1, artifacts::NOTES).await, CodeSource::Compiled);
    assert_eq!(load(u64::MAX, artifacts::ECHO).await, CodeSource::DiskCache);
    assert_eq!(
        load(u64::MAX, artifacts::NOTES).await,
        CodeSource::DiskCache
    );
    assert_eq!(entries(&dir).len(), 2, "{:?}", entries(&dir));
    assert_eq!(load(u64::MAX, artifacts::CALC).await, CodeSource::Compiled);
    // A cap below one entry keeps the entry just written, and still serves.
    let tight = host(0).build().unwrap();
    let weather = tight.load_plugin_file(artifacts::WEATHER).await.unwrap();
    assert_eq!(weather.code_source(), CodeSource::Compiled);
    let left = entries(&dir);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(
        load(u64::MAX, artifacts::WEATHER).await,
        CodeSource::DiskCache
    );
    assert_still_serving(&tight).await;
}

/// The compiled code in a cache directory.
fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    walk(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn a_cache_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("cache-world-writable");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Host::builder()
        .cache_dir(&dir)
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("may be written by its group or others (mode 777)"),
        "{err}"
    );
    // A new one is made for this user alone.
    let fresh = fresh_dir("cache-made-private");
    Host::builder().cache_dir(&fresh).build().unwrap();
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[tokio::test]
async fn an_entry_others_could_have_written_is_not_run() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("cache-foreign-entry");
    let first = Host::builder().cache_dir(&dir).build().unwrap();
    first.load_plugin_file(artifacts::CALC).await.unwrap();
    first.load_plugin_file(artifacts::ECHO).await.unwrap();
    let calc_hash = crate::common::digest(artifacts::CALC);
    let echo_hash = crate::common::digest(artifacts::ECHO);
    let found = entries(&dir);
    let path_of = |hash: &str| {
        found
            .iter()
            .find(|p| p.to_string_lossy().contains(hash))
            .unwrap()
            .clone()
    };
    // Another user's file (group-writable) where calc's entry was: ignored.
    let calc_entry = path_of(&calc_hash);
    std::fs::copy(path_of(&echo_hash), &calc_entry).unwrap();
    std::fs::set_permissions(&calc_entry, std::fs::Permissions::from_mode(0o666)).unwrap();
    let second = Host::builder().cache_dir(&dir).build().unwrap();
    let calc = second.load_plugin_file(artifacts::CALC).await.unwrap();
    assert_eq!(calc.code_source(), CodeSource::Compiled);
    assert_eq!(calc.id(), "calc");
    // A link to another file: ignored too.
    let third_dir = fresh_dir("cache-linked-entry");
    let third = Host::builder().cache_dir(&third_dir).build().unwrap();
    third.load_plugin_file(artifacts::ECHO).await.unwrap();
    let echo_entry = entries(&third_dir)[0].clone();
    let calc_link = echo_entry.with_file_name(format!("{calc_hash}.cwasm"));
    std::os::unix::fs::symlink(&echo_entry, &calc_link).unwrap();
    let fourth = Host::builder().cache_dir(&third_dir).build().unwrap();
    let calc = fourth.load_plugin_file(artifacts::CALC).await.unwrap();
    assert_eq!(
        (calc.id(), calc.code_source()),
        ("calc", CodeSource::Compiled)
    );
}
