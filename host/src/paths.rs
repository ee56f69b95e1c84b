//! Where sandwit keeps things on a machine unless told otherwise, as every
//! front end (the CLI, the Python package) finds them.

use std::path::PathBuf;

/// The value of the environment variable `key` as a path, if it is set and
/// not empty.
pub fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The compiled-code cache: `$SANDWIT_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/sandwit`, else `~/.cache/sandwit`.
pub fn default_cache_dir() -> Option<PathBuf> {
    env_path("SANDWIT_CACHE_DIR")
        .or_else(|| env_path("XDG_CACHE_HOME").map(|d| d.join("sandwit")))
        .or_else(|| env_path("HOME").map(|d| d.join(".cache").join("sandwit")))
}

/// sandwit's data folder: `$XDG_DATA_HOME/sandwit`, else
/// `~/.local/share/sandwit`.
pub fn data_dir() -> Option<PathBuf> {
    env_path("XDG_DATA_HOME")
        .map(|d| d.join("sandwit"))
        .or_else(|| env_path("HOME").map(|d| d.join(".local/share/sandwit")))
}

/// Where an installed CPython component is looked for when none is given
/// or embedded: `python/sandbox.wasm` in [`data_dir`].
pub fn installed_interpreter() -> Option<PathBuf> {
    data_dir().map(|d| d.join("python").join("sandbox.wasm"))
}
