//! Loading a plugin (every check a marketplace needs) and calling its methods
//! under limits.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use crate::args::{ArgChecker, Refused};
use crate::bindings::plugin::{SandboxMethod, SandboxMethodPre};
use crate::bindings::wit;
use crate::cache::{CodeSource, component_hash};
use crate::capability::Grants;
use crate::config::PluginConfig;
use crate::env::PluginEnv;
use crate::error::{CallError, CallErrorKind, LoadError, cut, quote};
use crate::guard::{Stopped, apply_budget, fuel_used, guarded, limited_store};
use crate::interfaces::chat::check_image_mime_type;
use crate::limits::{Budget, LimitKind, Limits, MAX_COMPONENT_BYTES};
use crate::manifest::{self, Manifest};
use crate::runtime::HostInner;
use crate::state::{PluginEvent, PluginState};
use crate::types::{self, AgentCtx, ContentPart, MethodResult, Value};

/// The interface every plugin must export, any 0.1.x version.
const PLUGIN_EXPORT_PREFIX: &str = "sandwit:plugin/plugin@0.1.";
/// Interfaces a plugin may import: WASI 0.2 (linked closed: no files, env,
/// network or clocks beyond reading the time) and sandwit's own.
const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
    "wasi:http/",
    "sandwit:plugin/log@0.1.",
    "sandwit:plugin/types@0.1.",
    "sandwit:plugin/store@0.1.",
    "sandwit:plugin/config@0.1.",
    "sandwit:plugin/chat@0.1.",
];

/// A compiled component, where its code came from, and its SHA-256.
pub(crate) struct Compiled {
    pub(crate) component: Component,
    pub(crate) code_source: CodeSource,
    pub(crate) hash: String,
}

/// A loaded, checked plugin, ready to call. Cheap to clone.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

struct PluginInner {
    host: Arc<HostInner>,
    manifest: Manifest,
    env: Arc<PluginEnv>,
    checkers: HashMap<String, ArgChecker>,
    pre: SandboxMethodPre<PluginState>,
    imports: Vec<String>,
    code_source: CodeSource,
    hash: String,
}

/// Everything a call produced.
#[derive(Debug)]
pub struct CallReport {
    /// The typed result, or why there is none.
    pub result: Result<MethodResult, CallError>,
    /// What the plugin logged, printed, sent to the chat and was refused, in
    /// order (secrets hidden).
    pub events: Vec<PluginEvent>,
    /// Fuel the call used.
    pub fuel_used: u64,
    /// Wall-clock time the call took.
    pub elapsed: Duration,
}

impl Plugin {
    /// The checked manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    /// The plugin's id.
    pub fn id(&self) -> &str {
        &self.inner.manifest.id
    }

    /// The component's imports, by name.
    pub fn imports(&self) -> &[String] {
        &self.inner.imports
    }

    /// Where its machine code came from when it was loaded.
    pub fn code_source(&self) -> CodeSource {
        self.inner.code_source
    }

    /// The capabilities it may use: those it requested that the policy
    /// grants.
    pub fn grants(&self) -> &Grants {
        &self.inner.env.grants
    }

    /// The limits its calls run under.
    pub fn limits(&self) -> &Limits {
        &self.inner.host.limits
    }

    /// The SHA-256 of the component, hex-encoded.
    pub fn hash(&self) -> &str {
        &self.inner.hash
    }

    /// Calls `method` with `args` (an object of parameter names to values)
    /// under the host's limits, in a fresh instance.
    pub async fn call(
        &self,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
    ) -> Result<MethodResult, CallError> {
        let budget = Budget::from_limits(&self.inner.host.limits);
        self.call_within(ctx, method, args, budget).await.result
    }

    /// Like [`Plugin::call`], within a given budget (the rest of a run's), and
    /// reporting logs, fuel and time.
    pub async fn call_within(
        &self,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
        budget: Budget,
    ) -> CallReport {
        self.call_in(&mut None, ctx, method, args, budget).await
    }

    /// Calls `method` in `session`'s instance, or in a new one (left in
    /// `session`) when it has none. The session is emptied when the call
    /// stopped the instance (a trap or a limit).
    pub(crate) async fn call_in(
        &self,
        session: &mut Option<Session>,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
        budget: Budget,
    ) -> CallReport {
        let start = Instant::now();
        let env = &self.inner.env;
        let host = &self.inner.host;
        let mut current = match session.take() {
            Some(mut reused) => {
                reused.store.data_mut().begin_call(ctx, budget.deadline);
                apply_budget(&mut reused.store, budget, host.metering);
                reused
            }
            None => Session {
                store: host.new_store(env.clone(), Some(ctx.clone()), budget),
                instance: None,
            },
        };
        let mut result = self.invoke(&mut current, ctx, method, args, budget).await;
        let store = &mut current.store;
        store.data_mut().finish_events();
        let fuel_used = fuel_used(store, budget.fuel);
        let redactor = &env.config.redactor;
        match &mut result {
            Ok(r) => redactor.redact_result(r),
            Err(kind) => {
                if let Some(m) = kind.message_mut() {
                    redactor.redact_in_place(m);
                }
            }
        }
        let error = |kind| CallError {
            plugin: self.id().to_string(),
            method: method.to_string(),
            kind,
        };
        let events = store.data_mut().events.take();
        if current.instance.is_some() {
            *session = Some(current);
        }
        CallReport {
            result: result.map_err(error),
            events,
            fuel_used,
            elapsed: start.elapsed(),
        }
    }

    /// A key that tells this loaded plugin from every other one.
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    async fn invoke(
        &self,
        session: &mut Session,
        ctx: &AgentCtx,
        method: &str,
        args: Value,
        budget: Budget,
    ) -> Result<MethodResult, CallErrorKind> {
        let inner = &self.inner;
        let limits = &inner.host.limits;
        let spec = inner
            .manifest
            .method(method)
            .ok_or(CallErrorKind::UnknownMethod)?;
        inner.checkers[method]
            .check(&args)
            .map_err(|refused| match refused {
                Refused::Invalid(message) => CallErrorKind::InvalidArguments { message },
                Refused::TooCostly(message) => CallErrorKind::LimitExceeded {
                    limit: LimitKind::ValueSize,
                    message,
                },
            })?;
        let nodes = args.into_nodes();
        let size = sandwit_value::encoded_size(&nodes);
        if size > limits.max_value_bytes {
            return Err(CallErrorKind::LimitExceeded {
                limit: LimitKind::ValueSize,
                message: format!(
                    "the arguments take {size} bytes, more than the limit of {} bytes",
                    limits.max_value_bytes
                ),
            });
        }
        let args = types::nodes_to_wit(nodes);
        let ctx = wit::AgentCtx::from(ctx);
        let pre = &inner.pre;
        let instance = &mut session.instance;
        let returned = guarded(&mut session.store, budget, async |store| {
            if instance.is_none() {
                *instance = Some(pre.instantiate_async(&mut *store).await?);
            }
            let plugin = instance.as_ref().expect("instantiated above");
            plugin
                .sandwit_plugin_plugin()
                .call_invoke(&mut *store, &ctx, method, &args)
                .await
        })
        .await;
        let returned = match returned {
            Ok(returned) => returned,
            Err(stopped) => {
                // An instance stopped mid-call is not fit to call again.
                session.instance = None;
                return Err(stopped_to_error(stopped));
            }
        };
        let result = match returned {
            Ok(result) => check_result(result, limits)?,
            Err(e) => return Err(plugin_error(e)),
        };
        if result.kind() != spec.kind {
            return Err(CallErrorKind::BadResult {
                message: format!(
                    "a result of kind {} from a method declared as {}",
                    result.kind(),
                    spec.kind
                ),
            });
        }
        Ok(result)
    }
}

/// One plugin instance and its store, serving the calls of one Python run:
/// instantiated at the run's first call to the plugin and kept for its later
/// calls (each with its own budget, caps and events), dropped with the run or
/// after a call that stopped it.
pub(crate) struct Session {
    store: Store<PluginState>,
    instance: Option<SandboxMethod>,
}

fn stopped_to_error(stopped: Stopped) -> CallErrorKind {
    match stopped {
        Stopped::Limit(limit, message) => CallErrorKind::LimitExceeded { limit, message },
        Stopped::Trap(err) => CallErrorKind::Trapped {
            message: trap_message(&err),
        },
    }
}

/// Whether `url` is one a chat client may be handed as an image: `http`,
/// `https` or `data:image/`, printable ASCII with no spaces.
fn is_image_url(url: &str) -> bool {
    let lower = url.get(..11).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("data:image/"))
        && url.bytes().all(|b| b.is_ascii_graphic())
}

/// What a trap says, without wasmtime's backtrace of the guest: the trap and
/// its causes, cut to 2,000 bytes.
pub(crate) fn trap_message(err: &wasmtime::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1).take(4).map(ToString::to_string) {
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    let text = text
        .split("\nwasm backtrace:")
        .next()
        .unwrap_or_default()
        .to_string();
    cut(text, 2_000)
}

fn plugin_error(e: wit::CallError) -> CallErrorKind {
    match e {
        wit::CallError::InvalidArguments(message) => CallErrorKind::InvalidArguments { message },
        wit::CallError::UnknownMethod(_) => CallErrorKind::UnknownMethod,
        wit::CallError::Failed(message) | wit::CallError::LimitExceeded(message) => {
            CallErrorKind::Failed { message }
        }
        wit::CallError::Denied(message) => CallErrorKind::Denied { message },
    }
}

fn check_result(result: wit::MethodResult, limits: &Limits) -> Result<MethodResult, CallErrorKind> {
    let too_large = |size: usize| CallErrorKind::LimitExceeded {
        limit: LimitKind::ValueSize,
        message: format!(
            "the result takes {size} bytes, more than the limit of {} bytes",
            limits.max_value_bytes
        ),
    };
    let check_size = |size: usize| {
        if size > limits.max_value_bytes {
            Err(too_large(size))
        } else {
            Ok(())
        }
    };
    Ok(match result {
        wit::MethodResult::Tool(value) => {
            let value =
                types::value_from_wit(value, &limits.decode_limits()).map_err(|e| match e {
                    sandwit_value::DecodeError::TooLarge { bytes, .. } => too_large(bytes),
                    other => CallErrorKind::BadResult {
                        message: format!("malformed value: {other}"),
                    },
                })?;
            MethodResult::Tool(value)
        }
        wit::MethodResult::Agent(text) => {
            check_size(text.len())?;
            MethodResult::Agent(text)
        }
        wit::MethodResult::Behavior(text) => {
            check_size(text.len())?;
            MethodResult::Behavior(text)
        }
        wit::MethodResult::MultimodalAgent(parts) => {
            let size = parts
                .iter()
                .map(|p| match p {
                    wit::ContentPart::Text(t) | wit::ContentPart::ImageUrl(t) => t.len(),
                    wit::ContentPart::Image(m) => m.data.len() + m.mime_type.len(),
                })
                .sum();
            check_size(size)?;
            for part in &parts {
                match part {
                    wit::ContentPart::ImageUrl(url) if !is_image_url(url) => {
                        return Err(CallErrorKind::BadResult {
                            message: format!(
                                "image URL {} is not an http, https or data:image URL of printable ASCII",
                                quote(url, 80)
                            ),
                        });
                    }
                    wit::ContentPart::Image(m) => check_image_mime_type(&m.mime_type)
                        .map_err(|message| CallErrorKind::BadResult { message })?,
                    _ => {}
                }
            }
            MethodResult::MultimodalAgent(parts.into_iter().map(ContentPart::from).collect())
        }
    })
}

impl HostInner {
    /// Reads and loads a plugin file.
    pub(crate) async fn load_file(self: &Arc<Self>, path: &Path) -> Result<Plugin, LoadError> {
        let (label, compiled) = self.compile_file(path)?;
        self.load_compiled(&label, compiled).await
    }

    /// Loads a plugin from its bytes; `label` names it in errors until its
    /// manifest gives its id.
    pub(crate) async fn load(
        self: &Arc<Self>,
        label: &str,
        bytes: &[u8],
    ) -> Result<Plugin, LoadError> {
        let compiled = self.compile(label, bytes)?;
        self.load_compiled(label, compiled).await
    }

    /// Checks and links a compiled plugin.
    async fn load_compiled(
        self: &Arc<Self>,
        label: &str,
        Compiled {
            component,
            code_source,
            hash,
        }: Compiled,
    ) -> Result<Plugin, LoadError> {
        let reject = |problems: Vec<String>| LoadError::Rejected {
            plugin: label.to_string(),
            problems,
        };
        let ty = component.component_type();
        let imports: Vec<String> = ty
            .imports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();
        let mut problems: Vec<String> = imports
            .iter()
            .filter(|name| !ALLOWED_IMPORT_PREFIXES.iter().any(|p| name.starts_with(p)))
            .take(manifest::MAX_PROBLEMS)
            .map(|name| {
                format!(
                    "imports {}, which sandwit does not provide",
                    quote(name, 120)
                )
            })
            .collect();
        if !self.exports_instance(&component, PLUGIN_EXPORT_PREFIX) {
            problems.push(format!(
                "does not export `{PLUGIN_EXPORT_PREFIX}x`: it is not a sandwit plugin (world `sandbox-method`)"
            ));
        }
        if !problems.is_empty() {
            return Err(reject(problems));
        }
        let pre = self
            .plugin_linker
            .instantiate_pre(&component)
            .map_err(|e| reject(vec![cut(format!("cannot be linked: {e:#}"), 2_000)]))?;
        let pre = SandboxMethodPre::new(pre).map_err(|e| {
            reject(vec![cut(
                format!("does not match the world `sandbox-method`: {e:#}"),
                2_000,
            )])
        })?;

        let raw = self
            .describe(label, &pre)
            .await
            .map_err(|e| reject(vec![format!("describe() did not return a manifest: {e}")]))?;
        let manifest::Checked {
            manifest,
            checkers,
            config_validator,
        } = manifest::check(raw).map_err(reject)?;
        let policy = self.policy.plugin(&manifest.id);
        if let Some(policy) = policy.filter(|p| p.gives_anything() && !p.pins(&hash)) {
            return Err(LoadError::Unpinned {
                plugin: manifest.id.clone(),
                digest: hash,
                pinned: policy.sha256.len(),
            });
        }
        let granted = policy.map_or(&[][..], |p| &p.grant[..]);
        let grants = Grants::effective(&manifest.capabilities, granted);
        let config = PluginConfig::bind(
            manifest
                .config_schema
                .as_ref()
                .zip(config_validator.as_ref()),
            policy.and_then(|p| p.config.as_ref()),
            policy.map_or(&[][..], |p| &p.secrets[..]),
        )
        .map_err(|problems| LoadError::Config {
            plugin: manifest.id.clone(),
            problems,
        })?;
        let env = PluginEnv::new(&manifest.id, grants, config, self.services.clone());
        tracing::info!(plugin = %manifest.id, version = %manifest.version, ?code_source, "loaded a plugin");
        Ok(Plugin {
            inner: Arc::new(PluginInner {
                host: self.clone(),
                manifest,
                env,
                checkers,
                pre,
                imports,
                code_source,
                hash,
            }),
        })
    }

    /// The compiled component in the file at `path`, labelled by the path:
    /// from the cache without reading the file when it is unchanged since it
    /// was last loaded, else read, checked and compiled as
    /// [`HostInner::compile`] does.
    pub(crate) fn compile_file(&self, path: &Path) -> Result<(String, Compiled), LoadError> {
        let label = path.display().to_string();
        let io = |error| LoadError::Io {
            plugin: label.clone(),
            error,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if let Some(hash) = self.cache.file_hash(path, &meta)
            && let Some((component, source)) = self.cache.lookup(&self.engine, &hash)
        {
            let compiled = Compiled {
                component,
                code_source: source,
                hash,
            };
            return Ok((label, compiled));
        }
        // Refuse a file over the size cap before reading it.
        if meta.len() > MAX_COMPONENT_BYTES as u64 {
            return Err(too_big(&label, meta.len() as usize));
        }
        let bytes = std::fs::read(path).map_err(io)?;
        let compiled = self.compile(&label, &bytes)?;
        self.cache.remember_file(path, &meta, &compiled.hash);
        Ok((label, compiled))
    }

    /// Checks a component's size and header, then compiles it (or finds its
    /// compiled code in the cache). Returns it with its hash.
    pub(crate) fn compile(&self, label: &str, bytes: &[u8]) -> Result<Compiled, LoadError> {
        let reject = |problem: String| LoadError::Rejected {
            plugin: label.to_string(),
            problems: vec![problem],
        };
        if bytes.len() > MAX_COMPONENT_BYTES {
            return Err(too_big(label, bytes.len()));
        }
        check_header(bytes).map_err(reject)?;
        let hash = component_hash(bytes);
        let (component, code_source) = self
            .cache
            .get(&self.engine, &hash, bytes)
            .map_err(|source| LoadError::Host {
                plugin: label.to_string(),
                source,
            })?
            .map_err(|e| reject(format!("not a valid component: {e:#}")))?;
        Ok(Compiled {
            component,
            code_source,
            hash,
        })
    }

    /// Whether `component` exports an interface instance whose name starts
    /// with `prefix` (a package and interface with a version prefix).
    pub(crate) fn exports_instance(&self, component: &Component, prefix: &str) -> bool {
        component
            .component_type()
            .exports(&self.engine)
            .any(|(name, item)| {
                name.starts_with(prefix) && matches!(item.ty, ComponentItem::ComponentInstance(_))
            })
    }

    async fn describe(
        &self,
        label: &str,
        pre: &SandboxMethodPre<PluginState>,
    ) -> Result<wit::PluginManifest, CallErrorKind> {
        let budget = Budget::from_limits(&self.limits);
        let env = PluginEnv::new(
            label,
            Grants::default(),
            PluginConfig::default(),
            self.services.clone(),
        );
        let mut store = self.new_store(env, None, budget);
        guarded(&mut store, budget, async |store| {
            let instance: SandboxMethod = pre.instantiate_async(&mut *store).await?;
            instance
                .sandwit_plugin_plugin()
                .call_describe(&mut *store)
                .await
        })
        .await
        .map_err(stopped_to_error)
    }

    /// A store for one plugin instance with the limits and budget applied.
    fn new_store(
        &self,
        env: Arc<PluginEnv>,
        ctx: Option<AgentCtx>,
        budget: Budget,
    ) -> Store<PluginState> {
        let state = PluginState::new(env, ctx, &self.limits, budget.deadline);
        let mut store = limited_store(&self.engine, state);
        apply_budget(&mut store, budget, self.metering);
        store
    }
}

fn too_big(label: &str, len: usize) -> LoadError {
    LoadError::Rejected {
        plugin: label.to_string(),
        problems: vec![format!(
            "is {len} bytes, more than the limit of {MAX_COMPONENT_BYTES} bytes"
        )],
    }
}

/// Tells a component from a core module or something that is not wasm, by the
/// binary's preamble: magic, then version and layer.
fn check_header(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err("is not a WebAssembly binary (no `\\0asm` header)".to_string());
    }
    match bytes[6..8] {
        [1, 0] => Ok(()),
        [0, 0] => Err(
            "is a core WebAssembly module, not a component: build it for wasm32-wasip2 (or wrap it with `wasm-tools component new`)"
                .to_string(),
        ),
        _ => Err(format!(
            "has an unknown WebAssembly layer {:?}",
            &bytes[4..8]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_urls_and_types() {
        for ok in [
            "https://x.org/a.png",
            "HTTP://x",
            "data:image/png;base64,AAAA",
        ] {
            assert!(is_image_url(ok), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "https://x.org/a b",
            "https://x\n",
        ] {
            assert!(!is_image_url(bad), "{bad}");
        }
        for ok in ["image/png", "image/svg+xml", "image/jpeg; q=1"] {
            assert!(check_image_mime_type(ok).is_ok(), "{ok}");
        }
        for bad in [
            "text/html",
            "image/",
            "image/png\n",
            "image/p g",
            "imagex/png",
        ] {
            assert!(check_image_mime_type(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn header_check() {
        assert!(
            check_header(b"hello world")
                .unwrap_err()
                .contains("not a WebAssembly")
        );
        assert!(
            check_header(b"\0asm\x01\0\0\0")
                .unwrap_err()
                .contains("core WebAssembly module")
        );
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
        assert!(
            check_header(b"\0asm\x0d\0\x02\0")
                .unwrap_err()
                .contains("unknown")
        );
    }
}
