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

/// Where a front end's small interpreter (the CPython component) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterpreterFile {
    /// A file the caller gave (`--python`, `Host(python=...)`).
    Given(PathBuf),
    /// The file `$SANDWIT_PYTHON` names.
    FromEnv(PathBuf),
    /// The one embedded in the front end's build.
    Embedded,
    /// The installed one ([`installed_interpreter`]).
    Installed(PathBuf),
    /// None of them: none given, none embedded, none installed.
    Missing,
}

impl InterpreterFile {
    /// The interpreter of a front end given `given`, whose build embeds one
    /// if `embedded`, in this order: `given`, `$SANDWIT_PYTHON`, the
    /// embedded one, the installed file. A file named is taken as named:
    /// whether it is there is the caller's to check and say. Nothing is
    /// guessed from where the program is, so a copied or installed binary
    /// behaves as the built one.
    pub fn find(given: Option<PathBuf>, embedded: bool) -> InterpreterFile {
        if let Some(path) = given {
            return InterpreterFile::Given(path);
        }
        if let Some(path) = env_path("SANDWIT_PYTHON") {
            return InterpreterFile::FromEnv(path);
        }
        if embedded {
            return InterpreterFile::Embedded;
        }
        match installed_interpreter().filter(|p| p.exists()) {
            Some(path) => InterpreterFile::Installed(path),
            None => InterpreterFile::Missing,
        }
    }
}
