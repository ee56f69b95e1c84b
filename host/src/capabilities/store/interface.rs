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

struct Store;

impl HasData for Store {
    type Data<'a> = StoreCtx<'a>;
}

pub(crate) fn add_to_linker<T: CallData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    store_api::add_to_linker::<T, Store>(linker, |data| StoreCtx(data.scope()))
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
    }

    async fn set(&mut self, scope: WitScope, key: String, value: WitEntry) -> Answer<()> {
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
    }

    async fn delete(&mut self, scope: WitScope, key: String) -> Answer<bool> {
        let ns = match self.namespace("delete", scope, Some(&key)) {
            Ok(ns) => ns,
            Err(e) => return Ok(Err(e)),
        };
        let store = &self.0.env.services.store;
        Ok(store.delete(&ns, &key).await.map_err(to_wit))
    }

    async fn list_keys(&mut self, scope: WitScope) -> Answer<Vec<String>> {
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
    }
}
