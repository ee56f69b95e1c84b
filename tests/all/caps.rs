//! The caps on what one plugin call may print and send, and on what a
//! plugin may keep in the store, each at its edge: at the cap accepted, one
//! past it cut or refused with an error that names the limit, and the host
//! serving on.

use sandwit::{Host, MethodResult, Plugin, PluginEvent, Policy, Value};
use serde_json::json;

use crate::common::{args, artifacts, assert_still_serving, cache_dir, ctx, load, logs, pinned};

/// The most a plugin may write to stdout and stderr together in one call.
const MAX_STDIO_BYTES: usize = 64 << 10;
/// The most chat messages one call may send.
const MAX_MESSAGES: usize = 32;
/// The longest text or system message.
const MAX_MESSAGE_BYTES: usize = 64 << 10;
/// The largest image.
const MAX_IMAGE_BYTES: usize = 8 << 20;
/// The longest store key (`StoreLimits::default`).
const MAX_KEY_BYTES: usize = 256;

/// A host that grants the `services` fixture the store and the chat, with
/// `policy`'s store limits.
fn host_with(store: sandwit::policy::StoreLimits) -> Host {
    let mut policy = Policy::default();
    policy.grant("services", ["store", "chat"]).unwrap();
    policy.store.limits = store;
    Host::builder()
        .cache_dir(cache_dir())
        .policy(pinned(policy))
        .build()
        .unwrap()
}

async fn services(store: sandwit::policy::StoreLimits) -> (Host, Plugin) {
    let host = host_with(store);
    let plugin = load(&host, artifacts::SERVICES).await;
    (host, plugin)
}

async fn call(plugin: &Plugin, method: &str, a: serde_json::Value) -> sandwit::CallReport {
    let budget = sandwit::Budget::from_limits(plugin.limits());
    plugin.call_within(&ctx(), method, args(a), budget).await
}

/// The value a tool call returned, as JSON.
fn tool(report: &sandwit::CallReport) -> serde_json::Value {
    match &report.result {
        Ok(MethodResult::Tool(v)) => {
            sandwit::json::value_to_json(v, sandwit::json::BytesAs::String)
        }
        other => panic!("not a tool result: {other:?}"),
    }
}

// ---- stdout ---------------------------------------------------------------

/// The lines a call printed, as its events record them (`info` lines), and
/// the `warn` line that says what was cut, if any.
fn printed(report: &sandwit::CallReport) -> (Vec<String>, Option<String>) {
    let mut lines = Vec::new();
    let mut cut = None;
    for line in logs(&report.events) {
        match line.level {
            "info" => lines.push(line.message.clone()),
            "warn" if cut.is_none() => cut = Some(line.message.clone()),
            other => panic!("a {other} line: {}", line.message),
        }
    }
    (lines, cut)
}

/// Has the plugin print `lines` numbered lines of `size` bytes, checking
/// each write (`checked`, returning how many failed) or with `println!`.
async fn print(plugin: &Plugin, lines: u32, size: u32, checked: bool) -> sandwit::CallReport {
    let a = json!({"lines": lines, "size": size, "checked": checked});
    call(plugin, "print_lines", a).await
}

/// The bytes of what a call printed that its events hold.
fn printed_bytes(report: &sandwit::CallReport) -> usize {
    printed(report).0.iter().map(|l| l.len() + 1).sum()
}

#[tokio::test]
async fn a_plugins_stdout_is_cut_at_64_kib_per_call() {
    let (host, plugin) = services(Default::default()).await;
    // Under the cap and at it: 511 and 512 lines of 128 bytes, all kept,
    // no write refused, nothing said to be cut.
    for lines in [511, 512] {
        let report = print(&plugin, lines, 128, true).await;
        assert_eq!(tool(&report), json!(0), "{:?}", report.result);
        let (kept, cut) = printed(&report);
        assert_eq!(kept.len(), lines as usize);
        assert_eq!(kept[lines as usize - 1], format!("{:0127}", lines - 1));
        assert_eq!(cut, None);
    }
    assert_eq!(
        printed_bytes(&print(&plugin, 512, 128, true).await),
        MAX_STDIO_BYTES
    );

    // Past it: no write fails, the call succeeds, the first 64 KiB are
    // kept and a warning says how much was dropped.
    for lines in [513, 8192] {
        let report = print(&plugin, lines, 128, true).await;
        assert_eq!(tool(&report), json!(0), "{:?}", report.result);
        assert_eq!(printed_bytes(&report), MAX_STDIO_BYTES);
        let dropped = lines as usize * 128 - MAX_STDIO_BYTES;
        let cut = printed(&report).1.expect("a warning that output was cut");
        assert!(
            cut.contains(&format!("{dropped} more bytes"))
                && cut.contains(&MAX_STDIO_BYTES.to_string()),
            "{cut}"
        );
    }

    // The cap is per call: the next call has the whole of it again.
    let report = print(&plugin, 3, 10, true).await;
    assert_eq!(
        printed(&report),
        (
            vec!["000000000".into(), "000000001".into(), "000000002".into()],
            None
        )
    );
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn println_past_the_stdout_cap_is_cut_not_a_trap() {
    // `println!` panics when a write fails; past the cap writes succeed and
    // are dropped, so a plugin that prints too much still returns.
    let (host, plugin) = services(Default::default()).await;
    let report = print(&plugin, 1024, 128, false).await;
    assert_eq!(tool(&report), json!(0), "{:?}", report.result);
    assert_eq!(printed_bytes(&report), MAX_STDIO_BYTES);
    assert!(printed(&report).1.is_some());
    assert_still_serving(&host).await;
}

// ---- chat -----------------------------------------------------------------

/// What `send_many` returned: how many were sent, and the refusal.
async fn send(plugin: &Plugin, kind: &str, count: usize, size: usize) -> (usize, Option<String>) {
    let report = call(
        plugin,
        "send_many",
        json!({"kind": kind, "count": count, "size": size}),
    )
    .await;
    let result = tool(&report);
    let sent = result["sent"].as_u64().unwrap() as usize;
    let chats = report
        .events
        .iter()
        .filter(|e| matches!(e, PluginEvent::Chat { .. }))
        .count();
    assert_eq!(chats, sent, "every message sent is an event of the call");
    (sent, result["error"].as_str().map(String::from))
}

#[tokio::test]
async fn a_call_sends_at_most_32_messages() {
    let (host, plugin) = services(Default::default()).await;
    assert_eq!(
        send(&plugin, "text", MAX_MESSAGES, 1).await,
        (MAX_MESSAGES, None)
    );
    let (sent, error) = send(&plugin, "system", MAX_MESSAGES + 1, 1).await;
    assert_eq!(sent, MAX_MESSAGES);
    assert_eq!(
        error.as_deref(),
        Some("chat: limit exceeded: sent more than 32 messages in one call")
    );
    // Per call: the next one may send again.
    assert_eq!(send(&plugin, "text", 1, 1).await, (1, None));
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn a_message_holds_at_most_64_kib() {
    let (host, plugin) = services(Default::default()).await;
    for kind in ["text", "system"] {
        assert_eq!(
            send(&plugin, kind, 1, MAX_MESSAGE_BYTES).await,
            (1, None),
            "{kind}"
        );
        let (sent, error) = send(&plugin, kind, 1, MAX_MESSAGE_BYTES + 1).await;
        assert_eq!(sent, 0, "{kind}");
        assert_eq!(
            error.as_deref(),
            Some(
                "chat: limit exceeded: the message is 65537 bytes, more than the limit of \
                 65536 bytes"
            ),
            "{kind}"
        );
    }
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn an_image_holds_at_most_8_mib() {
    let (host, plugin) = services(Default::default()).await;
    assert_eq!(send(&plugin, "image", 1, MAX_IMAGE_BYTES).await, (1, None));
    let (sent, error) = send(&plugin, "image", 1, MAX_IMAGE_BYTES + 1).await;
    assert_eq!(sent, 0);
    assert_eq!(
        error.as_deref(),
        Some(
            "chat: limit exceeded: the image is 8388609 bytes, more than the limit of 8388608 \
             bytes"
        )
    );
    assert_still_serving(&host).await;
}

// ---- the store ------------------------------------------------------------

/// Stores `value` under `key` in the global scope: the value now stored, or
/// the error's message.
async fn put(plugin: &Plugin, key: &str, value: &str) -> Result<Value, String> {
    let report = call(
        plugin,
        "put",
        json!({"scope": "global", "key": key, "value": value}),
    )
    .await;
    match report.result {
        Ok(MethodResult::Tool(v)) => Ok(v),
        Ok(other) => panic!("not a tool result: {other:?}"),
        Err(e) => Err(e.to_string()),
    }
}

#[track_caller]
fn assert_refused(result: Result<Value, String>, message: &str) {
    let err = result.expect_err("refused");
    assert!(err.contains(message), "{err}");
}

#[tokio::test]
async fn a_store_key_holds_at_most_256_bytes() {
    let (host, plugin) = services(Default::default()).await;
    let key = "k".repeat(MAX_KEY_BYTES);
    assert_eq!(put(&plugin, &key, "v").await, Ok(Value::Text("v".into())));
    // Bytes, not characters: 128 two-byte characters fit, one more does not.
    assert!(
        put(&plugin, &"é".repeat(MAX_KEY_BYTES / 2), "v")
            .await
            .is_ok()
    );
    assert_refused(
        put(&plugin, &"k".repeat(MAX_KEY_BYTES + 1), "v").await,
        "store: limit exceeded: the key is 257 bytes, more than the limit of 256 bytes",
    );
    assert_refused(
        put(&plugin, &"é".repeat(MAX_KEY_BYTES / 2 + 1), "v").await,
        "the key is 258 bytes, more than the limit of 256 bytes",
    );
    assert_refused(put(&plugin, "", "v").await, "store: the key is empty");
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn a_store_value_holds_at_most_its_cap() {
    let limits = sandwit::policy::StoreLimits {
        max_value_bytes: 100,
        ..Default::default()
    };
    let (host, plugin) = services(limits).await;
    let at_cap = "v".repeat(100);
    assert_eq!(
        put(&plugin, "k", &at_cap).await,
        Ok(Value::Text(at_cap.clone()))
    );
    assert_refused(
        put(&plugin, "k", &"v".repeat(101)).await,
        "store: limit exceeded: the value is 101 bytes, more than the limit of 100 bytes",
    );
    // The refused value left the stored one alone.
    let report = call(&plugin, "put", json!({"scope": "global", "key": "k"})).await;
    assert_eq!(tool(&report), json!(at_cap));
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn a_plugins_store_holds_at_most_its_cap() {
    // An entry of the global scope (no owner) counts 64 bytes besides its
    // key and value: one with a 1-byte key and a 935-byte value is 1,000.
    let limits = sandwit::policy::StoreLimits {
        max_plugin_bytes: 1_000,
        ..Default::default()
    };
    let (host, plugin) = services(limits).await;
    assert!(put(&plugin, "k", &"v".repeat(935)).await.is_ok());
    assert_refused(
        put(&plugin, "j", "").await,
        "store: limit exceeded: the plugin's data would take 1065 bytes, more than its limit \
         of 1000 bytes",
    );
    // Replacing an entry counts the new one instead of the old.
    assert_refused(
        put(&plugin, "k", &"v".repeat(936)).await,
        "the plugin's data would take 1001 bytes, more than its limit of 1000 bytes",
    );
    assert!(put(&plugin, "k", &"v".repeat(934)).await.is_ok());
    assert_refused(
        put(&plugin, "j", "").await,
        "the plugin's data would take 1064 bytes",
    );
    assert_still_serving(&host).await;
}

#[tokio::test]
async fn listing_keys_returns_at_most_the_cap() {
    let limits = sandwit::policy::StoreLimits {
        max_listed_keys: 3,
        ..Default::default()
    };
    let (host, plugin) = services(limits).await;
    let keys = async || tool(&call(&plugin, "keys", json!({"scope": "global"})).await);
    for key in ["d", "b", "c"] {
        put(&plugin, key, "v").await.unwrap();
    }
    assert_eq!(keys().await, json!(["b", "c", "d"]));
    // One more stored: the listing is the first three, sorted.
    put(&plugin, "a", "v").await.unwrap();
    assert_eq!(keys().await, json!(["a", "b", "c"]));
    assert_still_serving(&host).await;
}
