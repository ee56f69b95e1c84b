//! The pool against the TLS-only test server (`scripts/postgres start-tls`):
//! TLS is used, the server's certificate is checked, and a refused
//! connection names the server without the password.

use std::time::Duration;

use super::*;

fn settings() -> Settings {
    Settings {
        max_connections: 2,
        wait: Duration::from_secs(5),
        application_name: "sandwit-test",
        statement_timeout: Some("5s"),
    }
}

async fn connects(url: &str) -> anyhow::Result<bool> {
    let (pool, _) = pool(url, &settings())?;
    let client = pool.get().await?;
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

#[tokio::test]
async fn tls_is_used_with_the_named_authority() {
    let url = sandwit_test_artifacts::postgres_tls_server();
    assert!(connects(&url).await.unwrap(), "the connection uses TLS");
    // The same, preferred rather than required: the server offers TLS.
    let preferred = url.replace("sslmode=require", "sslmode=prefer");
    assert!(connects(&preferred).await.unwrap());
}

#[tokio::test]
async fn a_certificate_no_trusted_authority_signed_fails_the_connection() {
    let url = sandwit_test_artifacts::postgres_tls_server();
    // Without its CA the web PKI's roots are trusted, which did not sign
    // the test server's certificate: no fallback to plain text.
    let (base, _) = url.split_once('?').unwrap();
    for url in [format!("{base}?sslmode=require"), base.to_string()] {
        let err = format!("{:#}", connects(&url).await.unwrap_err());
        assert!(err.contains("certificate"), "{url}: {err}");
    }
}

#[tokio::test]
async fn plain_text_is_refused_by_a_tls_only_server() {
    let url = sandwit_test_artifacts::postgres_tls_server();
    let (base, _) = url.split_once('?').unwrap();
    let err = format!(
        "{:#}",
        connects(&format!("{base}?sslmode=disable"))
            .await
            .unwrap_err()
    );
    assert!(err.contains("no encryption"), "{err}");
}

#[test]
fn a_bad_root_certificate_file_is_named() {
    let err = pool(
        "postgres://u:pw-secret@127.0.0.1:1/db?sslrootcert=/nonexistent/ca.pem",
        &settings(),
    )
    .err()
    .unwrap();
    let err = format!("{err:#}");
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    assert!(err.contains("127.0.0.1:1/db"), "{err}");
    assert!(!err.contains("pw-secret"), "{err}");
}

#[test]
fn sslrootcert_is_taken_out_of_the_url() {
    assert_eq!(
        take_root_cert("postgres://h/db?sslmode=require&sslrootcert=/ca.pem&application_name=x"),
        (
            "postgres://h/db?sslmode=require&application_name=x".to_string(),
            Some("/ca.pem".to_string())
        )
    );
    assert_eq!(
        take_root_cert("postgres://h/db?sslrootcert=/ca.pem"),
        ("postgres://h/db".to_string(), Some("/ca.pem".to_string()))
    );
    assert_eq!(
        take_root_cert("postgres://h/db"),
        ("postgres://h/db".to_string(), None)
    );
}
