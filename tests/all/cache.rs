//! The compiled-code cache: a second host (as a second process would) loads
//! a plugin without compiling it.

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
    let entries: Vec<_> = walk(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
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
