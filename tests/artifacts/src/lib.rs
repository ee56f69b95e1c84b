//! Paths of the guest components the tests use, built from source by this
//! crate's build script.
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));

pub mod freeze;

/// The `"""` of `listing` a Python tokenizer would take for quotes (not
/// escaped by a `\`): a docstring's text can end its docstring only
/// through one of them.
pub fn unescaped_triple_quotes(listing: &str) -> usize {
    let (mut count, mut run, mut escaped) = (0, 0, false);
    for c in listing.chars() {
        if c == '"' && !escaped {
            run += 1;
            if run == 3 {
                count += 1;
                run = 0;
            }
        } else {
            run = 0;
        }
        escaped = c == '\\' && !escaped;
    }
    count
}

/// The URL of the PostgreSQL server the tests of the scale-out backends
/// share: `SANDWIT_TEST_POSTGRES` (scripts/test starts one and exports it),
/// else the developer's cluster that `scripts/postgres start` starts once in
/// target/postgres and leaves running. Tests make databases of their own on
/// it; none skips for want of a server.
pub fn postgres_server() -> String {
    static SERVER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SERVER
        .get_or_init(|| start_postgres("SANDWIT_TEST_POSTGRES", "start"))
        .clone()
}

/// The URL of a PostgreSQL server that takes TLS connections only, its
/// certificate signed by a CA of its own: `SANDWIT_TEST_POSTGRES_TLS`, else
/// `scripts/postgres start-tls` (target/postgres-tls). The URL requires TLS
/// and names the CA (`sslmode=require&sslrootcert=...`).
pub fn postgres_tls_server() -> String {
    static SERVER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SERVER
        .get_or_init(|| start_postgres("SANDWIT_TEST_POSTGRES_TLS", "start-tls"))
        .clone()
}

fn start_postgres(variable: &str, command: &str) -> String {
    if let Ok(url) = std::env::var(variable) {
        return url;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres");
    let out = std::process::Command::new(script)
        .arg(command)
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    assert!(
        out.status.success(),
        "scripts/postgres {command} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("scripts/postgres prints a URL")
        .trim()
        .to_string()
}
