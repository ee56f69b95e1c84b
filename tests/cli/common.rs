//! What the command's tests share: the cache, the fixtures' paths and
//! checks of a finished process.

use std::path::PathBuf;

pub use sandwit_test_artifacts as artifacts;

/// The compiled-code cache every test shares (the library tests' too).
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandwit-cache")
}

/// A fresh, empty folder for one test.
pub fn tempdir(topic: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(topic)
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The base URL a server just started prints as its first line on stdout
/// (`listening on http://ADDR`); a server that failed to start fails the
/// test, showing what it printed instead.
pub fn listening_base(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("the server's stdout is piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the server did not start: {line:?}"))
        .to_string()
}

/// The `sha256 = [...]` line of a policy file that pins a plugin to the
/// component at `path`, as an operator pins the plugins they trust.
pub fn pin_line(path: &str) -> String {
    let digest = sandwit::component_hash(&std::fs::read(path).unwrap());
    format!("sha256 = [\"{digest}\"]\n")
}

/// Asserts that a `sandwit` process exited with success, showing its
/// stderr when it did not.
pub fn assert_succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sandwit` with `args` as a publisher runs it, with `token` as its
/// registry token and the tests' cache: exit code, stdout, stderr.
pub fn sandwit_with_token(token: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(cache_dir())
        .args(args)
        .env("SANDWIT_REGISTRY_TOKEN", token)
        .env_remove("SANDWIT_POLICY")
        .output()
        .unwrap();
    exited(out)
}

/// A finished process's exit code, stdout and stderr.
pub fn exited(out: std::process::Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
