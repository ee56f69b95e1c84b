//! One plugin call built by hand, for the unit tests of each capability's
//! host implementation: the tests call the generated `Host` functions on a
//! context made from [`TestCall::scope`], with no component and no wasmtime
//! store, so a capability's checks are tested on their own.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::bindings::wit::ServiceError;
use crate::capabilities::chat::{ChatMessage, ChatSink};
use crate::capabilities::config::PluginConfig;
use crate::capabilities::env::{PluginEnv, Services};
use crate::capabilities::events::{CallEvents, PluginEvent};
use crate::capabilities::scope::CallScope;
use crate::runtime::guard::HostMeter;
use sandwit_contract::capability::{Capability, Grants};
use sandwit_contract::types::{AgentCtx, ServiceFuture};

/// The event bytes a call may hold unless a test says otherwise: far more
/// than any test here records.
const EVENT_BYTES: usize = 64 << 20;

/// What a plugin was granted, as the host computes it when the operator
/// grants exactly what the plugin requests.
pub(crate) fn grants(caps: &[&str]) -> Grants {
    let caps: Vec<Capability> = caps.iter().map(|c| c.parse().unwrap()).collect();
    Grants::effective(&caps, &caps)
}

/// The environment of plugin `id`: `caps` granted, `config`, `services`.
pub(crate) fn env(
    id: &str,
    caps: &[&str],
    config: PluginConfig,
    services: Services,
) -> Arc<PluginEnv> {
    PluginEnv::new(id, grants(caps), config, services)
}

/// A configuration of `values`, the top-level properties named in
/// `secrets` secret, bound as a plugin's is when it loads (against a
/// schema that takes any object).
pub(crate) fn config(values: Json, secrets: &[&str]) -> PluginConfig {
    let schema = serde_json::json!({"type": "object"});
    let validator = sandwit_contract::schema::compile(&schema)
        .unwrap()
        .validator;
    let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
    let values = values.as_object().expect("an object").clone();
    PluginConfig::bind(Some((&schema, &validator)), Some(&values), &secrets).unwrap()
}

/// A context for `chat` and `user`.
pub(crate) fn ctx(chat: &str, user: Option<&str>) -> AgentCtx {
    AgentCtx {
        user_id: user.map(str::to_string),
        ..AgentCtx::new(chat)
    }
}

/// One call of a plugin: what a plugin's store data lends its host
/// functions.
pub(crate) struct TestCall {
    pub(crate) env: Arc<PluginEnv>,
    /// `None` while the plugin describes itself.
    pub(crate) ctx: Option<AgentCtx>,
    pub(crate) meter: HostMeter,
    pub(crate) events: CallEvents,
}

impl TestCall {
    /// A call of `env`'s plugin in `ctx`.
    pub(crate) fn new(env: &Arc<PluginEnv>, ctx: Option<AgentCtx>) -> Self {
        TestCall {
            env: env.clone(),
            ctx,
            meter: HostMeter::new(Instant::now() + Duration::from_secs(60)),
            events: CallEvents::new(EVENT_BYTES),
        }
    }

    /// The call's scope, as `CallData::scope` lends it.
    pub(crate) fn scope(&mut self) -> CallScope<'_> {
        CallScope {
            env: &self.env,
            ctx: self.ctx.as_ref(),
            meter: &mut self.meter,
            events: &mut self.events,
        }
    }

    /// The call's events so far, leaving none.
    pub(crate) fn take_events(&mut self) -> Vec<PluginEvent> {
        self.events.take(&self.env)
    }

    /// The refusals among the call's events so far, as (capability,
    /// request), leaving no events.
    pub(crate) fn take_denied(&mut self) -> Vec<(String, String)> {
        self.take_events()
            .into_iter()
            .filter_map(|e| match e {
                PluginEvent::Denied {
                    capability,
                    request,
                } => Some((capability, request)),
                _ => None,
            })
            .collect()
    }
}

/// A chat sink that records what it is given, or refuses everything with
/// `failure`.
#[derive(Default)]
pub(crate) struct Inbox {
    /// (plugin, chat key, message), in the order delivered.
    pub(crate) delivered: Mutex<Vec<(String, String, ChatMessage)>>,
    pub(crate) failure: Option<String>,
}

impl Inbox {
    /// The messages delivered so far.
    pub(crate) fn messages(&self) -> Vec<(String, String, ChatMessage)> {
        self.delivered.lock().unwrap().clone()
    }
}

impl ChatSink for Inbox {
    fn deliver<'a>(
        &'a self,
        plugin: &'a str,
        ctx: &'a AgentCtx,
        message: &'a ChatMessage,
    ) -> ServiceFuture<'a, Result<(), String>> {
        let result = match &self.failure {
            Some(failure) => Err(failure.clone()),
            None => {
                let delivered = (plugin.to_string(), ctx.chat_key.clone(), message.clone());
                self.delivered.lock().unwrap().push(delivered);
                Ok(())
            }
        };
        Box::pin(std::future::ready(result))
    }
}

/// A host function's refusal as (its kind as the WIT names it, its text).
pub(crate) fn refusal(e: ServiceError) -> (&'static str, String) {
    match e {
        ServiceError::Denied(m) => ("denied", m),
        ServiceError::Invalid(m) => ("invalid", m),
        ServiceError::LimitExceeded(m) => ("limit-exceeded", m),
        ServiceError::Unavailable(m) => ("unavailable", m),
    }
}
