//! `sandwit:plugin/store`: the plugin's key-value data, scoped by the call's
//! agent context, capped per value and per plugin.

use wasmtime::component::{HasData, Linker};

use crate::bindings::store_api::{self, Entry as WitEntry, Host, Scope as WitScope};
use crate::bindings::wit::ServiceError;
use crate::capabilities::env::MAX_REQUEST_TEXT;
use crate::capabilities::scope::{CallData, CallScope};
use crate::capabilities::store::{Entry, Namespace, Scope, StoreError};
use sandwit_contract::capability::Capability;
use sandwit_contract::text::quote;

type Answer<T> = wasmtime::Result<Result<T, ServiceError>>;

/// The context of `store`: the call's scope.
pub(crate) struct StoreCtx<'a>(CallScope<'a>);

struct StoreInterface;

impl HasData for StoreInterface {
    type Data<'a> = StoreCtx<'a>;
}

pub(crate) fn add_to_linker<T: CallData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    store_api::add_to_linker::<T, StoreInterface>(linker, |data| StoreCtx(data.scope()))
}

impl StoreCtx<'_> {
    /// The namespace of `scope` for this call, after the capability and key
    /// checks.
    fn namespace(
        &mut self,
        op: &str,
        scope: WitScope,
        key: Option<&str>,
    ) -> Result<Namespace, ServiceError> {
        let scope = match scope {
            WitScope::Chat => Scope::Chat,
            WitScope::User => Scope::User,
            WitScope::ChatUser => Scope::ChatUser,
            WitScope::Global => Scope::Global,
        };
        let call = &mut self.0;
        call.meter.charge(key.map_or(0, str::len));
        call.require(Capability::Store, || match key {
            Some(key) => format!("store.{op}({scope}, {})", quote(key, MAX_REQUEST_TEXT / 2)),
            None => format!("store.{op}({scope})"),
        })?;
        if let Some(key) = key {
            let max = call.env.services.store_limits.max_key_bytes;
            if key.is_empty() {
                return Err(ServiceError::Invalid("the key is empty".into()));
            }
            if key.len() > max {
                return Err(ServiceError::LimitExceeded(format!(
                    "the key is {} bytes, more than the limit of {max} bytes",
                    key.len()
                )));
            }
        }
        let Some(ctx) = call.ctx else {
            return Err(ServiceError::Unavailable(
                "the store is not available while the plugin describes itself".into(),
            ));
        };
        let user = || {
            ctx.user_id.clone().ok_or_else(|| {
                ServiceError::Invalid(format!(
                    "scope `{scope}` needs a user, and this call's context has none"
                ))
            })
        };
        // The chat-user owner joins the two with NUL: neither may hold one,
        // or two pairs could share an owner.
        if ctx.chat_key.contains('\0') || ctx.user_id.as_deref().is_some_and(|u| u.contains('\0')) {
            return Err(ServiceError::Invalid(
                "the call's chat key or user id holds a NUL character".into(),
            ));
        }
        let owner = match scope {
            Scope::Chat => ctx.chat_key.clone(),
            Scope::User => user()?,
            Scope::ChatUser => format!("{}\0{}", ctx.chat_key, user()?),
            // Shared by the plugin's chats, so kept apart per namespace:
            // chat and user owners already carry the namespace's prefix.
            Scope::Global => ctx.namespace.clone().unwrap_or_default(),
        };
        Ok(Namespace {
            plugin: call.env.id.clone(),
            scope,
            owner,
            tenant: ctx.namespace.clone().unwrap_or_default(),
        })
    }
}

fn to_wit(e: StoreError) -> ServiceError {
    match e {
        StoreError::LimitExceeded(m) => ServiceError::LimitExceeded(m),
        StoreError::Backend(m) => {
            tracing::error!("plugin store: {m}");
            ServiceError::Unavailable(m)
        }
    }
}

impl Host for StoreCtx<'_> {
    async fn get(&mut self, scope: WitScope, key: String) -> Answer<Option<WitEntry>> {
        crate::trace::host_call("store.get", async {
            let ns = match self.namespace("get", scope, Some(&key)) {
                Ok(ns) => ns,
                Err(e) => return Ok(Err(e)),
            };
            let entry = match self.0.env.services.store.get(&ns, &key).await {
                Ok(entry) => entry,
                Err(e) => return Ok(Err(to_wit(e))),
            };
            self.0.meter.charge(entry.as_ref().map_or(0, Entry::len));
            Ok(Ok(entry.map(|e| match e {
                Entry::Text(t) => WitEntry::Text(t),
                Entry::Bytes(b) => WitEntry::Bytes(b),
            })))
        })
        .await
    }

    async fn set(&mut self, scope: WitScope, key: String, value: WitEntry) -> Answer<()> {
        crate::trace::host_call("store.set", async {
            let entry = match value {
                WitEntry::Text(t) => Entry::Text(t),
                WitEntry::Bytes(b) => Entry::Bytes(b),
            };
            // The value is charged whether or not it is stored: the plugin made
            // the host read it.
            self.0.meter.charge(entry.len());
            let ns = match self.namespace("set", scope, Some(&key)) {
                Ok(ns) => ns,
                Err(e) => return Ok(Err(e)),
            };
            let limits = self.0.env.services.store_limits;
            if entry.len() > limits.max_value_bytes {
                return Ok(Err(ServiceError::LimitExceeded(format!(
                    "the value is {} bytes, more than the limit of {} bytes",
                    entry.len(),
                    limits.max_value_bytes
                ))));
            }
            let store = &self.0.env.services.store;
            Ok(store.set(&ns, &key, &entry, &limits).await.map_err(to_wit))
        })
        .await
    }

    async fn delete(&mut self, scope: WitScope, key: String) -> Answer<bool> {
        crate::trace::host_call("store.delete", async {
            let ns = match self.namespace("delete", scope, Some(&key)) {
                Ok(ns) => ns,
                Err(e) => return Ok(Err(e)),
            };
            let store = &self.0.env.services.store;
            Ok(store.delete(&ns, &key).await.map_err(to_wit))
        })
        .await
    }

    async fn list_keys(&mut self, scope: WitScope) -> Answer<Vec<String>> {
        crate::trace::host_call("store.list_keys", async {
            let ns = match self.namespace("list_keys", scope, None) {
                Ok(ns) => ns,
                Err(e) => return Ok(Err(e)),
            };
            let max = self.0.env.services.store_limits.max_listed_keys;
            let keys = match self.0.env.services.store.keys(&ns, max).await {
                Ok(keys) => keys,
                Err(e) => return Ok(Err(to_wit(e))),
            };
            self.0.meter.charge(keys.iter().map(String::len).sum());
            Ok(Ok(keys))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::capabilities::config::PluginConfig;
    use crate::capabilities::env::{PluginEnv, Services};
    use crate::capabilities::store::StoreBackend;
    use crate::capabilities::testing::{TestCall, ctx, env, refusal};
    use sandwit_contract::policy::StoreLimits;
    use sandwit_contract::types::{AgentCtx, ServiceFuture};

    type Reply<T> = Result<T, (&'static str, String)>;

    async fn get(call: &mut TestCall, scope: WitScope, key: &str) -> Reply<Option<String>> {
        let got = StoreCtx(call.scope()).get(scope, key.into()).await.unwrap();
        got.map_err(refusal).map(|entry| {
            entry.map(|e| match e {
                WitEntry::Text(t) => t,
                WitEntry::Bytes(b) => format!("bytes {b:?}"),
            })
        })
    }

    async fn set(call: &mut TestCall, scope: WitScope, key: &str, value: WitEntry) -> Reply<()> {
        let mut store = StoreCtx(call.scope());
        store
            .set(scope, key.into(), value)
            .await
            .unwrap()
            .map_err(refusal)
    }

    async fn set_text(call: &mut TestCall, scope: WitScope, key: &str, value: &str) -> Reply<()> {
        set(call, scope, key, WitEntry::Text(value.into())).await
    }

    async fn delete(call: &mut TestCall, scope: WitScope, key: &str) -> Reply<bool> {
        let deleted = StoreCtx(call.scope()).delete(scope, key.into()).await;
        deleted.unwrap().map_err(refusal)
    }

    async fn keys(call: &mut TestCall, scope: WitScope) -> Reply<Vec<String>> {
        let keys = StoreCtx(call.scope()).list_keys(scope).await;
        keys.unwrap().map_err(refusal)
    }

    /// Plugin `id` granted `caps`, on `services`.
    fn plugin(id: &str, caps: &[&str], services: &Services) -> Arc<PluginEnv> {
        env(id, caps, PluginConfig::default(), services.clone())
    }

    const SCOPES: [WitScope; 4] = [
        WitScope::Chat,
        WitScope::User,
        WitScope::ChatUser,
        WitScope::Global,
    ];

    #[tokio::test]
    async fn a_plugin_without_the_store_grant_is_refused_and_nothing_is_stored() {
        let services = Services::for_tests();
        let notes = plugin("notes", &["chat", "config"], &services);
        let mut call = TestCall::new(&notes, Some(ctx("chat-1", Some("u1"))));
        let denied = (
            "denied",
            "plugin `notes` was not granted the capability `store`".to_string(),
        );
        let g = WitScope::Global;
        assert_eq!(set_text(&mut call, g, "k", "v").await.unwrap_err(), denied);
        let got = get(&mut call, WitScope::ChatUser, "k").await;
        assert_eq!(got.unwrap_err(), denied);
        assert_eq!(delete(&mut call, g, "k").await.unwrap_err(), denied);
        assert_eq!(keys(&mut call, WitScope::User).await.unwrap_err(), denied);
        // The grant is checked before the request itself: an empty key is
        // refused as not granted, not as invalid.
        assert_eq!(set_text(&mut call, g, "", "v").await.unwrap_err(), denied);
        let store = |request: &str| ("store".to_string(), request.to_string());
        assert_eq!(
            call.take_denied(),
            [
                store("store.set(global, \"k\")"),
                store("store.get(chat-user, \"k\")"),
                store("store.delete(global, \"k\")"),
                store("store.list_keys(user)"),
                store("store.set(global, \"\")"),
            ]
        );
        assert_eq!(services.store.usage("notes").await.unwrap(), 0);
    }

    #[tokio::test]
    async fn keys_values_and_listings_are_held_to_the_caps() {
        let mut services = Services::for_tests();
        services.store_limits = StoreLimits {
            max_key_bytes: 8,
            max_value_bytes: 10,
            max_plugin_bytes: 1 << 20,
            max_listed_keys: 3,
        };
        let notes = plugin("notes", &["store"], &services);
        let mut call = TestCall::new(&notes, Some(ctx("chat-1", Some("u1"))));
        let g = WitScope::Global;

        let empty = ("invalid", "the key is empty".to_string());
        assert_eq!(set_text(&mut call, g, "", "v").await.unwrap_err(), empty);
        assert_eq!(get(&mut call, g, "").await.unwrap_err(), empty);
        let long = (
            "limit-exceeded",
            "the key is 9 bytes, more than the limit of 8 bytes".to_string(),
        );
        let key = "123456789";
        assert_eq!(set_text(&mut call, g, key, "v").await.unwrap_err(), long);
        assert_eq!(get(&mut call, g, key).await.unwrap_err(), long);
        assert_eq!(delete(&mut call, g, key).await.unwrap_err(), long);
        assert_eq!(set_text(&mut call, g, "12345678", "v").await, Ok(()));

        let big = Err((
            "limit-exceeded",
            "the value is 11 bytes, more than the limit of 10 bytes".to_string(),
        ));
        assert_eq!(set_text(&mut call, g, "text", "0123456789a").await, big);
        let bytes = WitEntry::Bytes(vec![0; 11]);
        assert_eq!(set(&mut call, g, "bytes", bytes).await, big);
        assert_eq!(get(&mut call, g, "text").await, Ok(None), "nothing stored");
        assert_eq!(get(&mut call, g, "bytes").await, Ok(None), "nothing stored");
        assert_eq!(set_text(&mut call, g, "text", "0123456789").await, Ok(()));
        let bytes = WitEntry::Bytes(vec![1, 2]);
        assert_eq!(set(&mut call, g, "bytes", bytes).await, Ok(()));
        assert_eq!(
            get(&mut call, g, "bytes").await,
            Ok(Some("bytes [1, 2]".into())),
            "bytes come back as bytes"
        );

        // A listing is the first keys in order, cut at the cap.
        for key in ["e", "a", "d"] {
            set_text(&mut call, g, key, "v").await.unwrap();
        }
        assert_eq!(
            keys(&mut call, g).await,
            Ok(vec!["12345678".into(), "a".into(), "bytes".into()])
        );
        assert_eq!(delete(&mut call, g, "12345678").await, Ok(true));
        assert_eq!(delete(&mut call, g, "12345678").await, Ok(false));
        assert_eq!(
            keys(&mut call, g).await,
            Ok(vec!["a".into(), "bytes".into(), "d".into()])
        );
        // None of it was a refusal of a grant.
        assert!(call.take_denied().is_empty());
    }

    #[tokio::test]
    async fn a_plugins_whole_store_is_held_to_its_cap() {
        let mut services = Services::for_tests();
        services.store_limits.max_plugin_bytes = 100;
        let notes = plugin("notes", &["store"], &services);
        let mut call = TestCall::new(&notes, Some(ctx("chat-1", None)));
        let chat = WitScope::Chat;
        assert_eq!(set_text(&mut call, chat, "one", "0123456789").await, Ok(()));
        let (kind, message) = set_text(&mut call, chat, "two", "0123456789")
            .await
            .unwrap_err();
        assert_eq!(kind, "limit-exceeded", "{message}");
        assert!(message.contains("its limit of 100 bytes"), "{message}");
        assert_eq!(get(&mut call, chat, "two").await, Ok(None));
        // Another plugin's share is its own.
        let memo = plugin("memo", &["store"], &services);
        let mut other = TestCall::new(&memo, Some(ctx("chat-1", None)));
        assert_eq!(
            set_text(&mut other, chat, "two", "0123456789").await,
            Ok(())
        );
    }

    #[tokio::test]
    async fn keys_are_kept_apart_per_plugin_chat_user_and_namespace() {
        let services = Services::for_tests();
        let notes = plugin("notes", &["store"], &services);
        let memo = plugin("memo", &["store"], &services);
        let call = |env: &Arc<PluginEnv>, chat: &str, user: &str| {
            TestCall::new(env, Some(ctx(chat, Some(user))))
        };
        let mut a1 = call(&notes, "chat-a", "u1");
        for (scope, name) in SCOPES
            .into_iter()
            .zip(["chat", "user", "chat-user", "global"])
        {
            set_text(&mut a1, scope, "k", name).await.unwrap();
        }
        let seen = async |call: &mut TestCall| {
            let mut seen = Vec::new();
            for scope in SCOPES {
                seen.push(get(call, scope, "k").await.unwrap());
            }
            seen
        };
        let some = |s: &str| Some(s.to_string());
        // Another chat of the same user.
        assert_eq!(
            seen(&mut call(&notes, "chat-b", "u1")).await,
            [None, some("user"), None, some("global")]
        );
        // Another user of the same chat.
        assert_eq!(
            seen(&mut call(&notes, "chat-a", "u2")).await,
            [some("chat"), None, None, some("global")]
        );
        // Another plugin in the same chat, for the same user: nothing, and
        // its writes leave the first plugin's values alone.
        let mut other = call(&memo, "chat-a", "u1");
        assert_eq!(seen(&mut other).await, [None, None, None, None]);
        for scope in SCOPES {
            assert_eq!(keys(&mut other, scope).await, Ok(vec![]));
            set_text(&mut other, scope, "k", "memo's").await.unwrap();
        }
        assert_eq!(
            seen(&mut a1).await,
            [
                some("chat"),
                some("user"),
                some("chat-user"),
                some("global")
            ]
        );
        // Another namespace (tenant): even the global scope is its own.
        let tenant = |namespace: &str| AgentCtx {
            namespace: Some(namespace.into()),
            ..ctx("t-chat", Some("t-user"))
        };
        let mut t1 = TestCall::new(&notes, Some(tenant("t1")));
        assert_eq!(get(&mut t1, WitScope::Global, "k").await, Ok(None));
        set_text(&mut t1, WitScope::Global, "k", "t1's")
            .await
            .unwrap();
        let mut t2 = TestCall::new(&notes, Some(tenant("t2")));
        assert_eq!(get(&mut t2, WitScope::Global, "k").await, Ok(None));
        assert_eq!(
            get(&mut a1, WitScope::Global, "k").await,
            Ok(some("global"))
        );
    }

    #[tokio::test]
    async fn a_scope_needs_what_it_is_kept_by() {
        let services = Services::for_tests();
        let notes = plugin("notes", &["store"], &services);
        // No user: the chat and global scopes only.
        let mut anonymous = TestCall::new(&notes, Some(ctx("chat-1", None)));
        assert_eq!(
            set_text(&mut anonymous, WitScope::Chat, "k", "v").await,
            Ok(())
        );
        assert_eq!(
            set_text(&mut anonymous, WitScope::Global, "k", "v").await,
            Ok(())
        );
        for (scope, name) in [(WitScope::User, "user"), (WitScope::ChatUser, "chat-user")] {
            let needs = format!("scope `{name}` needs a user, and this call's context has none");
            assert_eq!(
                get(&mut anonymous, scope, "k").await,
                Err(("invalid", needs))
            );
        }
        // A NUL in the chat key or the user id could make two pairs one
        // chat-user owner (`a` NUL `b\0c` and `a\0b` NUL `c`): refused.
        for (chat, user) in [("a\0b", "c"), ("a", "b\0c")] {
            let mut call = TestCall::new(&notes, Some(ctx(chat, Some(user))));
            let (kind, message) = set_text(&mut call, WitScope::ChatUser, "k", "v")
                .await
                .unwrap_err();
            assert_eq!(kind, "invalid");
            assert!(message.contains("NUL"), "{message}");
        }
        // While the plugin describes itself there is no call to scope by.
        let mut describing = TestCall::new(&notes, None);
        for scope in SCOPES {
            let (kind, message) = get(&mut describing, scope, "k").await.unwrap_err();
            assert_eq!(kind, "unavailable");
            assert!(message.contains("describes itself"), "{message}");
        }
    }

    /// A backend whose every operation fails.
    struct Broken;

    impl StoreBackend for Broken {
        fn get<'a>(
            &'a self,
            _: &'a Namespace,
            _: &'a str,
        ) -> ServiceFuture<'a, Result<Option<Entry>, StoreError>> {
            Box::pin(async { Err(StoreError::Backend("the disk is gone".into())) })
        }
        fn set<'a>(
            &'a self,
            _: &'a Namespace,
            _: &'a str,
            _: &'a Entry,
            _: &'a StoreLimits,
        ) -> ServiceFuture<'a, Result<(), StoreError>> {
            Box::pin(async { Err(StoreError::Backend("the disk is gone".into())) })
        }
        fn swap<'a>(
            &'a self,
            _: &'a Namespace,
            _: &'a str,
            _: Option<&'a Entry>,
            _: Option<&'a Entry>,
            _: &'a StoreLimits,
        ) -> ServiceFuture<'a, Result<bool, StoreError>> {
            Box::pin(async { Err(StoreError::Backend("the disk is gone".into())) })
        }
        fn delete<'a>(
            &'a self,
            _: &'a Namespace,
            _: &'a str,
        ) -> ServiceFuture<'a, Result<bool, StoreError>> {
            Box::pin(async { Err(StoreError::Backend("the disk is gone".into())) })
        }
        fn keys<'a>(
            &'a self,
            _: &'a Namespace,
            _: usize,
        ) -> ServiceFuture<'a, Result<Vec<String>, StoreError>> {
            Box::pin(async { Err(StoreError::Backend("the disk is gone".into())) })
        }
        fn usage<'a>(&'a self, _: &'a str) -> ServiceFuture<'a, Result<u64, StoreError>> {
            Box::pin(async { Err(StoreError::Backend("the disk is gone".into())) })
        }
    }

    #[tokio::test]
    async fn a_failing_backend_is_unavailable_to_the_plugin() {
        let mut services = Services::for_tests();
        services.store = Arc::new(Broken);
        let notes = plugin("notes", &["store"], &services);
        let mut call = TestCall::new(&notes, Some(ctx("chat-1", None)));
        let gone = ("unavailable", "the disk is gone".to_string());
        let g = WitScope::Global;
        assert_eq!(set_text(&mut call, g, "k", "v").await.unwrap_err(), gone);
        assert_eq!(get(&mut call, g, "k").await.unwrap_err(), gone);
        assert_eq!(delete(&mut call, g, "k").await.unwrap_err(), gone);
        assert_eq!(keys(&mut call, g).await.unwrap_err(), gone);
    }
}
