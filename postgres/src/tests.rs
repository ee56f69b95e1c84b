//! Against a real PostgreSQL: `SANDWIT_TEST_POSTGRES` (scripts/test starts
//! one), else the developer's cluster `scripts/postgres start` keeps in
//! target/postgres. Each test has a database of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sandwit::policy::StoreLimits;
use sandwit::store::{Entry, Namespace, Scope, StoreBackend};

use super::*;

/// The URL of a fresh, empty database of the test cluster.
async fn fresh_database() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let server = sandwit_test_artifacts::postgres_server();
    let name = format!(
        "sandwit_test_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) = tokio_postgres::connect(&server, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to the test cluster {server}: {e}"));
    tokio::spawn(connection);
    for statement in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        client.batch_execute(&statement).await.unwrap();
    }
    let (base, _) = server.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_store_passes_the_backend_checks() {
    let pg = Postgres::connect(&fresh_database().await).await.unwrap();
    sandwit::store::conformance::check_backend(&pg, "").await;
}

/// Three replicas starting at once on an empty database: one makes the
/// tables, the others wait for it; connecting again changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn replicas_starting_together_migrate_once() {
    let url = fresh_database().await;
    let starting: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { Postgres::connect(&url).await })
        })
        .collect();
    for replica in starting {
        if let Err(e) = replica.await.unwrap() {
            panic!("a replica failed to start: {e:#}");
        }
    }
    let pg = Postgres::connect(&url).await.unwrap();
    let client = pg.client().await.unwrap();
    let versions: Vec<i32> = client
        .query("SELECT version FROM sandwit_schema ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=schema::VERSION).collect::<Vec<_>>());
}

/// What one replica writes, another reads; writes racing from two replicas
/// never take a tenant past its quota, and the usage counted is the rows'.
#[tokio::test(flavor = "multi_thread")]
async fn replicas_share_the_store_and_its_quota() {
    let url = fresh_database().await;
    let (a, b) = (
        Arc::new(Postgres::connect(&url).await.unwrap()),
        Arc::new(Postgres::connect(&url).await.unwrap()),
    );
    let ns = Namespace {
        plugin: "notes".into(),
        scope: Scope::Chat,
        owner: "c".into(),
        tenant: "t:".into(),
    };
    a.set(
        &ns,
        "hello",
        &Entry::Text("from a".into()),
        &StoreLimits::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        b.get(&ns, "hello").await.unwrap(),
        Some(Entry::Text("from a".into()))
    );
    assert!(b.delete(&ns, "hello").await.unwrap());
    assert_eq!(a.get(&ns, "hello").await.unwrap(), None);

    // Room for exactly 5 of the 40 writes.
    let row = ns.entry_bytes(2 + 100);
    let limits = StoreLimits {
        max_plugin_bytes: 5 * row + row / 2,
        ..StoreLimits::default()
    };
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let (store, ns) = (if i % 2 == 0 { a.clone() } else { b.clone() }, ns.clone());
            tokio::spawn(async move {
                store
                    .set(
                        &ns,
                        &format!("{i:02}"),
                        &Entry::Bytes(vec![7; 100]),
                        &limits,
                    )
                    .await
            })
        })
        .collect();
    let mut written = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => written += 1,
            Err(e) => assert!(e.to_string().contains("more than its limit"), "{e}"),
        }
    }
    assert_eq!(written, 5, "the quota holds across replicas");
    assert_eq!(a.keys(&ns, 100).await.unwrap().len(), 5);
    assert_eq!(b.usage("notes").await.unwrap(), 5 * row);
}

/// Many writers of one tenant at once, from two replicas, all get their
/// write in (they queue on the tenant's usage; none fails for having raced
/// another), and the usage counted is the rows'.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_writers_of_one_tenant_all_succeed() {
    let url = fresh_database().await;
    let replicas = [
        Arc::new(Postgres::connect(&url).await.unwrap()),
        Arc::new(Postgres::connect(&url).await.unwrap()),
    ];
    let ns = Namespace {
        plugin: "busy".into(),
        scope: Scope::Global,
        owner: String::new(),
        tenant: "t:".into(),
    };
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (store, ns) = (replicas[i % 2].clone(), ns.clone());
            tokio::spawn(async move {
                let limits = StoreLimits::default();
                // Half write a key of their own, half one key they share.
                let key = if i % 2 == 0 {
                    format!("own{i:02}")
                } else {
                    "shared".into()
                };
                store
                    .set(&ns, &key, &Entry::Bytes(vec![1; 10]), &limits)
                    .await
            })
        })
        .collect();
    for task in tasks {
        task.await
            .unwrap()
            .expect("a write of one tenant among many");
    }
    let keys = replicas[0].keys(&ns, 100).await.unwrap();
    assert_eq!(keys.len(), 33);
    let rows: u64 = keys
        .iter()
        .map(|k| ns.entry_bytes((k.len() + 10) as u64))
        .sum();
    assert_eq!(replicas[1].usage("busy").await.unwrap(), rows);
}

/// A bucket of 10 calls a minute gives 10 calls to three replicas taking
/// from it at once, not 30; an empty one says when the next call is due.
#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_holds_across_replicas() {
    let url = fresh_database().await;
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(Arc::new(Postgres::connect(&url).await.unwrap()));
    }
    let start = Instant::now();
    let tasks: Vec<_> = (0..45)
        .map(|i| {
            let replica = replicas[i % 3].clone();
            tokio::spawn(async move { replica.take_call("notes/add", 10).await.unwrap() })
        })
        .collect();
    let mut admitted = 0;
    let mut waits = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => admitted += 1,
            Err(wait) => waits.push(wait),
        }
    }
    // A token comes back every 6 s.
    let refilled = (start.elapsed().as_secs_f64() / 6.0).floor() as usize;
    assert!(
        (10..=10 + refilled).contains(&admitted),
        "{admitted} calls admitted in {:?}",
        start.elapsed()
    );
    assert!(
        waits
            .iter()
            .all(|w| *w > Duration::ZERO && *w <= Duration::from_secs(6)),
        "{waits:?}"
    );
    // Other buckets are untouched.
    assert_eq!(
        replicas[0].take_call("notes/other", 10).await.unwrap(),
        Ok(())
    );
}

/// A chat's budget holds across replicas reserving at once; a refund gives
/// back; a cost above the budget never fits.
#[tokio::test(flavor = "multi_thread")]
async fn a_chat_budget_holds_across_replicas() {
    let url = fresh_database().await;
    let (a, b) = (
        Arc::new(Postgres::connect(&url).await.unwrap()),
        Arc::new(Postgres::connect(&url).await.unwrap()),
    );
    let tasks: Vec<_> = (0..30)
        .map(|i| {
            let replica = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { replica.reserve("chat\0one", 3, 30).await.unwrap() })
        })
        .collect();
    let mut reserved = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => reserved += 1,
            Err(spent) => assert_eq!(spent, 30),
        }
    }
    assert_eq!(reserved, 10);
    assert_eq!(b.spent("chat\0one").await.unwrap(), 30);
    a.refund("chat\0one", 3).await.unwrap();
    assert_eq!(b.spent("chat\0one").await.unwrap(), 27);
    assert_eq!(b.reserve("chat\0one", 3, 30).await.unwrap(), Ok(()));
    assert_eq!(a.reserve("other", 31, 30).await.unwrap(), Err(0));
    assert_eq!(a.spent("other").await.unwrap(), 0);
}

/// A breaker one replica opens, another sees open for the recovery time;
/// a shorter opening after it does not shorten it; others stay closed.
#[tokio::test(flavor = "multi_thread")]
async fn a_breaker_opened_on_one_replica_is_open_on_another() {
    let url = fresh_database().await;
    let (a, b) = (
        Postgres::connect(&url).await.unwrap(),
        Postgres::connect(&url).await.unwrap(),
    );
    assert_eq!(b.breaker_open_for("calc/sum").await.unwrap(), None);
    a.open_breaker("calc/sum", Duration::from_secs(600))
        .await
        .unwrap();
    b.open_breaker("calc/sum", Duration::from_secs(1))
        .await
        .unwrap();
    let open_for = b.breaker_open_for("calc/sum").await.unwrap().unwrap();
    assert!(
        open_for > Duration::from_secs(590) && open_for <= Duration::from_secs(600),
        "{open_for:?}"
    );
    assert_eq!(a.breaker_open_for("calc/other").await.unwrap(), None);
    b.open_breaker("calc/brief", Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        a.breaker_open_for("calc/brief").await.unwrap(),
        None,
        "it closed"
    );
}

/// A server that is not there fails the connection in bounded time, naming
/// the server and not the password.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_server_fails_fast_without_leaking_the_password() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let start = Instant::now();
    let e = Postgres::connect(&format!(
        "postgres://sandwit:hunter2secret@127.0.0.1:{port}/db"
    ))
    .await
    .unwrap_err();
    let text = format!("{e:#}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    assert!(text.contains(&format!("127.0.0.1:{port}/db")), "{text}");
    assert!(!text.contains("hunter2secret"), "{text}");
    let bad = Postgres::connect("mysql://x").await.unwrap_err();
    assert!(format!("{bad:#}").contains("not valid"), "{bad:#}");
}

/// A database that stops answering (a proxy in front of it freezes, as a
/// hung host or a partition leaves a client) fails the store's operations
/// and the controls' in time, naming the server and the timeout, where
/// they waited for ever; once it answers again they succeed.
#[tokio::test(flavor = "multi_thread")]
async fn a_database_that_does_not_answer_fails_the_store_and_the_controls_in_time() {
    use sandwit_test_artifacts::freeze::FreezingProxy;
    let test = async {
        let (proxy, url) = FreezingProxy::postgres(&fresh_database().await);
        let pg = Postgres::connect(&url).await.unwrap();
        let shown = pg.db.shown().to_string();
        let ns = Namespace {
            plugin: "notes".into(),
            scope: Scope::Global,
            owner: String::new(),
            tenant: String::new(),
        };
        let kept = Entry::Text("kept".into());
        pg.set(&ns, "k", &kept, &StoreLimits::default())
            .await
            .unwrap();
        let timed_out = format!("PostgreSQL at {shown} did not answer within 2 s");

        proxy.freeze();
        let start = Instant::now();
        let e = pg.get(&ns, "k").await.unwrap_err().to_string();
        assert_eq!(
            e,
            format!("the store failed: {timed_out} (the client-side statement timeout)")
        );
        // Refused at once now, with the same error.
        let e = pg.take_call("notes/add", 10).await.unwrap_err().0;
        assert!(e.starts_with(&timed_out), "{e}");
        // Tried again a second later: a new connection (the one that got
        // no answer was closed), which the server does not answer either.
        tokio::time::sleep(sandwit_postgres_connect::REFUSED_FOR).await;
        let e = pg.reserve("chat", 1, 10).await.unwrap_err().0;
        assert!(
            e.starts_with(&format!("{timed_out} (the connect timeout)")),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(9),
            "{:?}",
            start.elapsed()
        );

        proxy.thaw();
        tokio::time::sleep(sandwit_postgres_connect::REFUSED_FOR).await;
        assert_eq!(pg.get(&ns, "k").await.unwrap(), Some(kept));
        assert_eq!(pg.take_call("notes/add", 10).await.unwrap(), Ok(()));
    };
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test outlasted a minute: something waits for the frozen database");
}
