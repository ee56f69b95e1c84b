//! What every [`StoreBackend`] must do, as checks a backend's tests run:
//! namespaces kept apart, usage counted in bytes as
//! [`Namespace::entry_bytes`] says, the per-plugin cap enforced per tenant,
//! deletes giving back what they free. [`SqliteStore`](super::SqliteStore)
//! and the PostgreSQL store (`sandwit-postgres`) both pass them; a backend of
//! an embedder's can run them too. Each check panics on the first
//! difference, naming it, and uses plugin ids beginning with `prefix` so
//! that several checks can share one store.

use sandwit_contract::policy::StoreLimits;

use super::backend::{Entry, Namespace, Scope, StoreBackend};

/// Runs every check against `store`, with plugin ids beginning with
/// `prefix` (a store that already holds data for other plugins is fine).
pub async fn check_backend(store: &dyn StoreBackend, prefix: &str) {
    keeps_namespaces_apart_and_counts_usage(store, &format!("{prefix}apart-")).await;
    enforces_the_per_plugin_cap(store, &format!("{prefix}cap-")).await;
    each_tenant_has_a_quota_of_its_own(store, &format!("{prefix}tenants-")).await;
    usage_counts_bytes_not_characters(store, &format!("{prefix}bytes-")).await;
    keeps_every_byte_and_character(store, &format!("{prefix}exact-")).await;
    swaps_only_what_it_was_told_is_there(store, &format!("{prefix}swap-")).await;
}

fn ns(plugin: &str, scope: Scope, owner: &str) -> Namespace {
    Namespace {
        plugin: plugin.into(),
        scope,
        owner: owner.into(),
        tenant: String::new(),
    }
}

/// Rows of `owner_len` owner bytes and `key_value` bytes of key and value.
fn row(owner_len: usize, key_value: u64) -> u64 {
    ns("p", Scope::Chat, &"o".repeat(owner_len)).entry_bytes(key_value)
}

/// Entries of one plugin's namespaces and of another plugin are apart;
/// replacing counts the difference; `delete` says whether the key was there.
pub async fn keeps_namespaces_apart_and_counts_usage(store: &dyn StoreBackend, prefix: &str) {
    let (notes, spy) = (format!("{prefix}notes"), format!("{prefix}spy"));
    let limits = StoreLimits::default();
    let a = ns(&notes, Scope::User, "alice");
    let b = ns(&notes, Scope::User, "bob");
    let other = ns(&spy, Scope::User, "alice");
    let chat = ns(&notes, Scope::Chat, "alice");
    store
        .set(&a, "k", &Entry::Text("v1".into()), &limits)
        .await
        .unwrap();
    store
        .set(&b, "k", &Entry::Bytes(vec![1, 2, 3]), &limits)
        .await
        .unwrap();
    assert_eq!(
        store.get(&a, "k").await.unwrap(),
        Some(Entry::Text("v1".into()))
    );
    assert_eq!(
        store.get(&b, "k").await.unwrap(),
        Some(Entry::Bytes(vec![1, 2, 3]))
    );
    assert_eq!(
        store.get(&other, "k").await.unwrap(),
        None,
        "another plugin's key"
    );
    assert_eq!(
        store.get(&chat, "k").await.unwrap(),
        None,
        "another scope's key"
    );
    assert_eq!(
        store.usage(&notes).await.unwrap(),
        row(5, 1 + 2) + row(3, 1 + 3)
    );
    store
        .set(&a, "k", &Entry::Text("longer".into()), &limits)
        .await
        .unwrap();
    assert_eq!(
        store.usage(&notes).await.unwrap(),
        row(5, 1 + 6) + row(3, 1 + 3)
    );
    assert!(store.delete(&a, "k").await.unwrap());
    assert!(
        !store.delete(&a, "k").await.unwrap(),
        "a second delete finds nothing"
    );
    assert_eq!(store.usage(&notes).await.unwrap(), row(3, 1 + 3));
    for key in ["c", "a", "b"] {
        store
            .set(&b, key, &Entry::Text(String::new()), &limits)
            .await
            .unwrap();
    }
    assert_eq!(store.keys(&b, 10).await.unwrap(), ["a", "b", "c", "k"]);
    assert_eq!(
        store.keys(&b, 2).await.unwrap(),
        ["a", "b"],
        "at most `max`, sorted"
    );
    assert_eq!(store.usage(&spy).await.unwrap(), 0);
}

/// A write past `max_plugin_bytes` fails, naming the limit, and changes
/// nothing; replacing a value counts only the difference.
pub async fn enforces_the_per_plugin_cap(store: &dyn StoreBackend, prefix: &str) {
    let plugin = format!("{prefix}p");
    let limits = StoreLimits {
        max_plugin_bytes: row(0, 60),
        ..StoreLimits::default()
    };
    let a = ns(&plugin, Scope::Global, "");
    store
        .set(&a, "a", &Entry::Bytes(vec![0; 20]), &limits)
        .await
        .unwrap();
    let e = store
        .set(&a, "b", &Entry::Bytes(vec![0; 20]), &limits)
        .await
        .unwrap_err();
    let limit = format!("limit of {} bytes", limits.max_plugin_bytes);
    assert!(e.to_string().contains(&limit), "{e}");
    assert_eq!(
        store.get(&a, "b").await.unwrap(),
        None,
        "a refused write changes nothing"
    );
    store
        .set(&a, "a", &Entry::Bytes(vec![0; 59]), &limits)
        .await
        .unwrap();
    assert_eq!(store.usage(&plugin).await.unwrap(), row(0, 60));
}

/// Each tenant has the plugin's whole quota: one that fills it leaves the
/// others theirs, and its deletes free its own share. An entry one tenant
/// wrote and another replaced moves to the second's share.
pub async fn each_tenant_has_a_quota_of_its_own(store: &dyn StoreBackend, prefix: &str) {
    let plugin = format!("{prefix}notes");
    let limits = StoreLimits {
        max_plugin_bytes: 200,
        ..StoreLimits::default()
    };
    let of = |tenant: &str, owner: &str| Namespace {
        tenant: tenant.into(),
        ..ns(&plugin, Scope::Chat, owner)
    };
    let (a, b) = (of("a:", "a:chat"), of("b:", "b:chat"));
    let hundred = Entry::Bytes(vec![0; 100]);
    store.set(&a, "k", &hundred, &limits).await.unwrap();
    let full = store.set(&a, "k2", &hundred, &limits).await.unwrap_err();
    assert!(
        full.to_string().contains("of the namespace \"a:\""),
        "{full}"
    );
    store.set(&b, "k", &hundred, &limits).await.unwrap();
    assert!(store.delete(&a, "k").await.unwrap());
    store.set(&a, "k2", &hundred, &limits).await.unwrap();
    assert_eq!(
        store.usage(&plugin).await.unwrap(),
        row(6, 102) + row(6, 101)
    );
    // A trusted writer (no namespace) replacing B's entry takes it over.
    let trusted = Namespace {
        tenant: String::new(),
        ..b.clone()
    };
    store
        .set(&trusted, "k", &Entry::Bytes(vec![0; 10]), &limits)
        .await
        .unwrap();
    store.set(&b, "k3", &hundred, &limits).await.unwrap();
    assert_eq!(
        store.usage(&plugin).await.unwrap(),
        row(6, 102) + row(6, 11) + row(6, 102)
    );
}

/// Usage counts UTF-8 bytes, and a delete gives back exactly what the
/// write took, however often.
pub async fn usage_counts_bytes_not_characters(store: &dyn StoreBackend, prefix: &str) {
    let plugin = format!("{prefix}p");
    let limits = StoreLimits::default();
    let a = ns(&plugin, Scope::Chat, "çhat");
    for round in 0..3 {
        store
            .set(&a, "ключ", &Entry::Text("värde".into()), &limits)
            .await
            .unwrap();
        assert_eq!(
            store.usage(&plugin).await.unwrap(),
            row(5, 8 + 6),
            "round {round}"
        );
        assert!(store.delete(&a, "ключ").await.unwrap());
        assert_eq!(store.usage(&plugin).await.unwrap(), 0, "round {round}");
    }
}

/// Text and bytes come back as written: every byte value, NUL included, in
/// values, keys and owners (a chat-user owner is `chat` NUL `user`), and
/// keys sort by their bytes.
pub async fn keeps_every_byte_and_character(store: &dyn StoreBackend, prefix: &str) {
    let plugin = format!("{prefix}p");
    let limits = StoreLimits::default();
    let a = ns(&plugin, Scope::ChatUser, "chat\0user");
    let all: Vec<u8> = (0..=255).collect();
    store
        .set(&a, "bytes", &Entry::Bytes(all.clone()), &limits)
        .await
        .unwrap();
    store
        .set(&a, "nul\0key", &Entry::Text("a\0b ✓".into()), &limits)
        .await
        .unwrap();
    store
        .set(&a, "Z", &Entry::Text(String::new()), &limits)
        .await
        .unwrap();
    store
        .set(&a, "é", &Entry::Text(String::new()), &limits)
        .await
        .unwrap();
    assert_eq!(
        store.get(&a, "bytes").await.unwrap(),
        Some(Entry::Bytes(all))
    );
    assert_eq!(
        store.get(&a, "nul\0key").await.unwrap(),
        Some(Entry::Text("a\0b ✓".into()))
    );
    let chat_only = ns(&plugin, Scope::ChatUser, "chat");
    assert_eq!(
        store.get(&chat_only, "bytes").await.unwrap(),
        None,
        "the owner is not cut at NUL"
    );
    assert_eq!(
        store.keys(&a, 10).await.unwrap(),
        ["Z", "bytes", "nul\0key", "é"]
    );
}

/// `swap` writes (or removes) only over the value it names (or no value),
/// says whether it did, counts usage as `set` and `delete` do, and keeps
/// the cap; of writers swapping one value at once, exactly one succeeds.
pub async fn swaps_only_what_it_was_told_is_there(store: &dyn StoreBackend, prefix: &str) {
    let plugin = format!("{prefix}p");
    let limits = StoreLimits::default();
    let a = ns(&plugin, Scope::Chat, "c");
    let (one, two) = (Entry::Bytes(vec![1]), Entry::Text("two".into()));
    assert!(
        store
            .swap(&a, "k", None, Some(&one), &limits)
            .await
            .unwrap()
    );
    assert!(
        !store
            .swap(&a, "k", None, Some(&two), &limits)
            .await
            .unwrap(),
        "swapped over a value it was told was absent"
    );
    assert!(
        !store
            .swap(&a, "k", Some(&two), Some(&two), &limits)
            .await
            .unwrap()
    );
    assert_eq!(store.get(&a, "k").await.unwrap(), Some(one.clone()));
    assert!(
        store
            .swap(&a, "k", Some(&one), Some(&two), &limits)
            .await
            .unwrap()
    );
    assert_eq!(store.get(&a, "k").await.unwrap(), Some(two.clone()));
    assert_eq!(store.usage(&plugin).await.unwrap(), row(1, 1 + 3));
    // Text and bytes of the same bytes are different values.
    let as_bytes = Entry::Bytes(b"two".to_vec());
    assert!(
        !store
            .swap(&a, "k", Some(&as_bytes), Some(&one), &limits)
            .await
            .unwrap()
    );
    let tight = StoreLimits {
        max_plugin_bytes: row(1, 1 + 3),
        ..StoreLimits::default()
    };
    let big = Entry::Bytes(vec![0; 64]);
    assert!(matches!(
        store.swap(&a, "k", Some(&two), Some(&big), &tight).await,
        Err(super::StoreError::LimitExceeded(_))
    ));
    // Racing writers that all read `two`: one wins.
    let racers: Vec<Entry> = (0..4).map(|n| Entry::Bytes(vec![n; 3])).collect();
    let swap = |current, value| store.swap(&a, "k", current, Some(value), &limits);
    let won = tokio::join!(
        swap(Some(&two), &racers[0]),
        swap(Some(&two), &racers[1]),
        swap(Some(&two), &racers[2]),
        swap(Some(&two), &racers[3]),
    );
    let won = [won.0, won.1, won.2, won.3].map(Result::unwrap);
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
    let winner = won.iter().position(|w| *w).unwrap();
    assert_eq!(
        store.get(&a, "k").await.unwrap(),
        Some(racers[winner].clone())
    );
    // Racing writers of a new key: one wins.
    let create = |value| store.swap(&a, "new", None, Some(value), &limits);
    let won = tokio::join!(
        create(&racers[0]),
        create(&racers[1]),
        create(&racers[2]),
        create(&racers[3]),
    );
    let won = [won.0, won.1, won.2, won.3].map(Result::unwrap);
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
    // Removed only if it is the value named, giving back its usage.
    let k = store.get(&a, "k").await.unwrap().unwrap();
    assert!(
        !store
            .swap(&a, "k", Some(&two), None, &limits)
            .await
            .unwrap()
    );
    assert!(!store.swap(&a, "k", None, None, &limits).await.unwrap());
    assert!(store.swap(&a, "k", Some(&k), None, &limits).await.unwrap());
    assert_eq!(store.get(&a, "k").await.unwrap(), None);
    assert!(store.swap(&a, "k", None, None, &limits).await.unwrap());
    assert!(store.delete(&a, "new").await.unwrap());
    assert_eq!(store.usage(&plugin).await.unwrap(), 0);
}
