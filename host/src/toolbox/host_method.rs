//! Sandbox methods an embedder defines in its own language (a Rust async
//! closure; a Python function through the Python package): listed in the
//! prompt, checked against their schemas and routed like plugin methods.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandwit_contract::args::ArgChecker;
use sandwit_contract::error::CallErrorKind;
use sandwit_contract::limits::{CallLimits, LimitKind};
use sandwit_contract::manifest::{self, MethodSpec, RawManifest, RawMethod};
use sandwit_contract::results::{check_kind, check_parts, check_size, parts_bytes};
use sandwit_contract::types::{AgentCtx, MethodResult, Value};

/// The provider a run's own functions are offered as
/// ([`RunOptions::functions`](crate::RunOptions::functions)): the `plugin`
/// of the call a run pauses at ([`Paused::plugin`](crate::Paused::plugin)),
/// reserved (no plugin or host method of a toolbox has it).
pub const CLIENT_FUNCTIONS: &str = "client";

/// What a host method's handler returns: its result, or a message for the
/// calling code (raised there as a `PluginError`).
pub type HostMethodFuture = Pin<Box<dyn Future<Output = Result<MethodResult, String>> + Send>>;

type Answer = Pin<Box<dyn Future<Output = Result<MethodResult, CallErrorKind>> + Send>>;
type Handler = dyn Fn(AgentCtx, Value) -> Answer + Send + Sync;

/// A sandbox method defined by the embedder. Cheap to clone.
///
/// Its spec passes the checks a plugin's manifest does (a Python
/// identifier, a docstring, valid JSON Schemas, required parameters
/// first); a call's arguments are checked against the schemas before the
/// handler runs, and its result must be of the declared kind. A call runs
/// within what is left of the run's time, and the handler's future is
/// dropped at the deadline. It uses no fuel: it is the embedder's code.
#[derive(Clone)]
pub struct HostMethod {
    inner: Arc<Inner>,
}

struct Inner {
    provider: String,
    spec: MethodSpec,
    checker: ArgChecker,
    handler: Box<Handler>,
    /// For a function the application gives a run (`sandbox/run/functions.rs`),
    /// answered when the run pauses at its call, never by `handler`:
    /// whether it takes any arguments (`*args, **kwargs`).
    client: Option<bool>,
}

impl HostMethod {
    /// A method `spec` offered by `provider` (named in events and errors as
    /// a plugin id is: lowercase letters, digits, `-` and `_`), answered by
    /// `handler` with the call's context and its checked arguments (an
    /// object of parameter names to values). The problems of a spec that
    /// does not pass the checks are listed.
    pub fn new<F, Fut>(provider: &str, spec: MethodSpec, handler: F) -> Result<Self, Vec<String>>
    where
        F: Fn(AgentCtx, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<MethodResult, String>> + Send + 'static,
    {
        Self::with_error_kinds(provider, spec, move |ctx, args| {
            let answer = handler(ctx, args);
            async move {
                answer
                    .await
                    .map_err(|message| CallErrorKind::Failed { message })
            }
        })
    }

    /// [`HostMethod::new`], with a handler that says what kind of error a
    /// call met: the caller's (`InvalidArguments`, which the circuit
    /// breaker does not count), a refusal (`Denied`), or the method's own
    /// failure (`Failed`, which it counts).
    pub fn with_error_kinds<F, Fut>(
        provider: &str,
        spec: MethodSpec,
        handler: F,
    ) -> Result<Self, Vec<String>>
    where
        F: Fn(AgentCtx, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<MethodResult, CallErrorKind>> + Send + 'static,
    {
        // The wrapping manifest's own fields are fixed: the spec's problems
        // are reported once, as the method's, not again as the manifest's.
        let raw = RawManifest {
            id: provider.to_string(),
            name: "host methods".to_string(),
            version: "0.1.0".to_string(),
            author: "the host".to_string(),
            description: "Methods the host offers.".to_string(),
            methods: vec![RawMethod::from(&spec)],
            config_schema: None,
            capabilities: Vec::new(),
        };
        let mut checked = manifest::check(raw)?;
        let spec = checked.manifest.methods.remove(0);
        let checker = checked
            .checkers
            .remove(&spec.name)
            .expect("a checker per method");
        Ok(HostMethod {
            inner: Arc::new(Inner {
                provider: provider.to_string(),
                spec,
                checker,
                handler: Box::new(move |ctx, args| Box::pin(handler(ctx, args))),
                client: None,
            }),
        })
    }

    /// A function the application gives a run, offered as `provider`: a
    /// run calling it pauses there, and the resume's answer is its result.
    /// `variadic`: it takes any arguments, which cross as the spec's two
    /// parameters `args` and `kwargs`.
    pub(crate) fn client(
        provider: &str,
        spec: MethodSpec,
        variadic: bool,
    ) -> Result<Self, Vec<String>> {
        let method = Self::with_error_kinds(provider, spec, |_, _| async {
            Err(CallErrorKind::Failed {
                message: "the application answers this function when the run pauses at it"
                    .to_string(),
            })
        })?;
        let mut inner = Arc::into_inner(method.inner).expect("just made");
        inner.client = Some(variadic);
        Ok(HostMethod {
            inner: Arc::new(inner),
        })
    }

    /// Checks `args` against the parameters' schemas, as a call does first.
    pub(crate) fn check_args(&self, args: &Value) -> Result<(), CallErrorKind> {
        Ok(self.inner.checker.check(args)?)
    }

    /// `Some(variadic)` for a function the application answers
    /// ([`HostMethod::client`]).
    pub(crate) fn client_function(&self) -> Option<bool> {
        self.inner.client
    }

    /// Who offers it.
    pub fn provider(&self) -> &str {
        &self.inner.provider
    }

    /// Its checked spec.
    pub fn spec(&self) -> &MethodSpec {
        &self.inner.spec
    }

    /// Calls it with `args` for `ctx`, by `deadline`, under `limits`' value
    /// size; the result (an error's message cut, as a plugin's is) and how
    /// long it took.
    pub(crate) async fn call(
        &self,
        ctx: AgentCtx,
        args: Value,
        deadline: Instant,
        limits: &CallLimits,
    ) -> (Result<MethodResult, CallErrorKind>, Duration) {
        let start = Instant::now();
        let result = self.checked_call(ctx, args, deadline, limits).await;
        (result.map_err(CallErrorKind::bounded), start.elapsed())
    }

    async fn checked_call(
        &self,
        ctx: AgentCtx,
        args: Value,
        deadline: Instant,
        limits: &CallLimits,
    ) -> Result<MethodResult, CallErrorKind> {
        let inner = &self.inner;
        inner.checker.check(&args)?;
        let answer = tokio::time::timeout_at(deadline.into(), (inner.handler)(ctx, args)).await;
        let result = match answer {
            Err(_) => {
                return Err(CallErrorKind::LimitExceeded {
                    limit: LimitKind::Time,
                    message: "ran past its wall-clock deadline".to_string(),
                });
            }
            Ok(Err(kind)) => return Err(kind),
            Ok(Ok(result)) => result,
        };
        check_kind(result.kind(), inner.spec.kind)?;
        let size = match &result {
            MethodResult::Tool(value) => sandwit_value::encoded_size(&value.clone().into_nodes()),
            MethodResult::Agent(text) | MethodResult::Behavior(text) => text.len(),
            MethodResult::MultimodalAgent(parts) => parts_bytes(parts),
        };
        check_size("the result takes", size, limits.max_value_bytes)?;
        if let MethodResult::MultimodalAgent(parts) = &result {
            check_parts(parts)?;
        }
        Ok(result)
    }
}
