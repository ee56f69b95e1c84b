//! The pool against the TLS-only test server (`scripts/postgres start-tls`):
//! TLS is used, the server's certificate is checked, and a refused
//! connection names the server without the password. Against the plain
//! one behind a proxy that freezes (`sandwit_test_artifacts::freeze`): a
//! server that does not answer fails statements and connections in time,
//! and is used again once it answers.

use std::time::{Duration, Instant};

use sandwit_test_artifacts::freeze::FreezingProxy;

use super::*;

fn settings() -> Settings {
    Settings {
        max_connections: 2,
        wait: Duration::from_secs(5),
        answer_timeout: Duration::from_secs(5),
        application_name: "sandwit-test",
        statement_timeout: Some("5s"),
    }
}

async fn connects(url: &str) -> anyhow::Result<bool> {
    let db = pool(url, &settings())?;
    let client = db.get().await?;
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

#[test]
fn connections_have_keepalives_and_a_connect_timeout_unless_the_url_sets_its_own() {
    let (c, _) = config("postgres://u@h/db", &settings()).unwrap();
    assert!(c.get_keepalives());
    assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
    assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
    assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
    assert_eq!(c.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
    assert_eq!(c.get_connect_timeout(), Some(&settings().answer_timeout));
    let (c, _) = config(
        "postgres://u@h/db?keepalives_idle=60&tcp_user_timeout=7&connect_timeout=3",
        &settings(),
    )
    .unwrap();
    assert_eq!(c.get_keepalives_idle(), Duration::from_secs(60));
    assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(7)));
    assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
}

/// `test`, failed rather than hung when it outlasts a minute: a client
/// without timeouts waits for a frozen server for ever.
async fn within_a_minute<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test outlasted a minute: something waits for the frozen server")
}

/// `db.get()`'s error (a `Conn` is not `Debug`).
async fn get_error(db: &Db) -> Error {
    match db.get().await {
        Ok(_) => panic!("a connection was handed out"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_does_not_answer_fails_in_time_and_is_used_again_once_it_answers() {
    within_a_minute(async {
        let (proxy, url) = FreezingProxy::postgres(&sandwit_test_artifacts::postgres_server());
        let settings = Settings {
            answer_timeout: Duration::from_secs(1),
            statement_timeout: None,
            ..settings()
        };
        let db = pool(&url, &settings).unwrap();
        let shown = db.shown().to_string();
        let answered = |row: tokio_postgres::Row| row.get::<_, i32>(0) == 1;
        let conn = db.get().await.unwrap();
        assert!(answered(conn.query_one("SELECT 1", &[]).await.unwrap()));
        drop(conn);

        proxy.freeze();
        // The idle connection is handed out; its statement gets no answer.
        let start = Instant::now();
        let conn = db.get().await.unwrap();
        let e = conn.query_one("SELECT 1", &[]).await.unwrap_err();
        let waited = start.elapsed();
        let timed_out = format!(
            "PostgreSQL at {shown} did not answer within 1 s (the client-side statement timeout)"
        );
        assert!(e.is_unanswered(), "{e}");
        assert_eq!(e.to_string(), timed_out);
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        // Nothing is sent behind the lost answer: the next statement of
        // that connection fails at once, not after another timeout.
        let again = Instant::now();
        let e = conn.query_one("SELECT 1", &[]).await.unwrap_err();
        assert_eq!(e.to_string(), timed_out);
        assert!(again.elapsed() < settings.answer_timeout);
        drop(conn);
        // Then operations are refused at once, with that error.
        let e = get_error(&db).await;
        assert!(e.is_unanswered());
        assert!(
            e.to_string()
                .starts_with(&format!("{timed_out}; operations are refused")),
            "{e}"
        );
        // The connection that timed out was closed, not handed out again:
        // the next operation makes one, which the server does not answer.
        tokio::time::sleep(REFUSED_FOR).await;
        let e = get_error(&db).await;
        assert_eq!(
            e.to_string(),
            format!("PostgreSQL at {shown} did not answer within 1 s (the connect timeout)")
        );
        assert_eq!(db.status().size, 0, "{:?}", db.status());

        proxy.thaw();
        tokio::time::sleep(REFUSED_FOR).await;
        let conn = db.get().await.unwrap();
        assert!(answered(conn.query_one("SELECT 1", &[]).await.unwrap()));
        let mut conn = db.get().await.unwrap();
        let tx = conn
            .transaction(tokio_postgres::IsolationLevel::ReadCommitted)
            .await
            .unwrap();
        assert!(answered(tx.query_one("SELECT 1", &[]).await.unwrap()));
        tx.commit().await.unwrap();
    })
    .await
}
