//! `sandwit inspect` and `sandwit validate`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sandwit::{Host, LoadError, Plugin};
use serde_json::json;

use crate::worker;

/// The worker's writable memory for a check unless told otherwise, in MiB.
pub const CHECK_MIB: u64 = 2048;
/// The worker's CPU time for a check unless told otherwise, in seconds.
pub const CHECK_SECONDS: u64 = 60;

#[derive(Args)]
pub struct InspectArgs {
    /// The plugin component (`.wasm`).
    plugin: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ValidateArgs {
    /// The plugin component (`.wasm`).
    plugin: PathBuf,
    /// Print one JSON object: {"file", "ok", "problems", "plugin"}.
    #[arg(long)]
    json: bool,
    /// With --json, an acceptable plugin's report also has `manifest`: its
    /// whole manifest, as `sandwit inspect --json` prints it.
    #[arg(long, requires = "json")]
    manifest: bool,
    /// Check in this process, without the worker's memory and CPU budget.
    #[arg(long)]
    pub in_process: bool,
    /// Writable memory the worker process checking the component may use,
    /// in MiB (its RLIMIT_DATA).
    #[arg(long, value_name = "MIB", default_value_t = CHECK_MIB,
          value_parser = clap::value_parser!(u64).range(16..=1 << 20))]
    max_check_mib: u64,
    /// CPU time the worker may use, in seconds (its RLIMIT_CPU); it gets
    /// twice this and 10 s more in wall-clock time.
    #[arg(long, value_name = "SECONDS", default_value_t = CHECK_SECONDS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    max_check_seconds: u64,
}

pub async fn inspect(host: &Host, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let plugin = crate::interpreter::load_plugin(host, &args.plugin).await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&describe_json(&plugin))?);
    } else {
        print_text(&plugin);
    }
    Ok(ExitCode::SUCCESS)
}

fn describe_json(plugin: &Plugin) -> serde_json::Value {
    json!({
        "manifest": plugin.manifest(),
        "granted": plugin.grants().iter().collect::<Vec<_>>(),
        "imports": plugin.imports(),
        "sha256": plugin.hash(),
        "code": plugin.code_source(),
    })
}

fn print_text(plugin: &Plugin) {
    let m = plugin.manifest();
    outln!("{} {} — {}", m.id, m.version, m.name);
    outln!("  by {}", m.author);
    outln!("  {}", m.description);
    outln!("  sha256: {}", plugin.hash());
    outln!(
        "  code: {}",
        crate::render::code_source(plugin.code_source())
    );
    outln!("  capabilities requested: {}", list(m.capabilities.iter()));
    outln!("  capabilities granted: {}", list(plugin.grants().iter()));
    if let Some(schema) = &m.config_schema {
        outln!("  config schema: {schema}");
    }
    outln!("  imports:");
    for import in plugin.imports() {
        outln!("    {import}");
    }
    outln!("  methods:");
    for method in &m.methods {
        outln!();
        outln!("  {}  [{}]", method.signature(), method.kind);
        for p in &method.params {
            let req = if p.required { "required" } else { "optional" };
            outln!("    {} ({req}): {}", p.name, p.schema);
        }
        if let Some(r) = &method.returns {
            outln!("    returns: {r}");
        }
        for line in method.docstring.lines() {
            outln!("    │ {line}");
        }
    }
}

fn list<'a>(caps: impl Iterator<Item = &'a sandwit::Capability>) -> String {
    let caps: Vec<String> = caps.map(|c| c.to_string()).collect();
    if caps.is_empty() {
        "none".to_string()
    } else {
        caps.join(", ")
    }
}

/// Checks the plugin in a worker process under the budget, and prints the
/// verdict. No host is built here: the worker builds its own.
pub fn validate_in_worker(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    // The worker gets this process's arguments as they are.
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let budget = worker::Budget {
        memory_mib: args.max_check_mib,
        cpu_seconds: args.max_check_seconds,
    };
    let scratch = worker::ScratchDir::new(&std::env::temp_dir(), "sandwit-validate")?;
    let report = match worker::check(argv, budget, &[], &scratch)? {
        worker::Ended::Reported(report) => report,
        worker::Ended::Failed(why) => failed_report(&args.plugin, why),
    };
    print_verdict(&report, args.json)
}

/// The verdict on `file` when its worker ran out of its budget or died:
/// `why` is the one problem.
pub fn failed_report(file: &std::path::Path, why: String) -> serde_json::Value {
    json!({
        "file": file.display().to_string(),
        "ok": false,
        "problems": [why],
        "plugin": null,
    })
}

/// Checks the plugin in this process and prints the verdict (as JSON in
/// the worker, for the process that started it).
pub async fn validate(host: &Host, args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let (mut ok, mut problems, plugin) = match host.load_plugin_file(&args.plugin).await {
        Ok(p) => (true, vec![], Some(p)),
        Err(LoadError::Rejected { problems, .. }) => (false, problems, None),
        Err(
            e @ (LoadError::Io { .. }
            | LoadError::Config { .. }
            | LoadError::Tampered { .. }
            | LoadError::Unsigned { .. }),
        ) => (false, vec![e.to_string()], None),
        Err(e) => return Err(e.into()),
    };
    if let Some(p) = plugin.as_ref().filter(|p| p.has_lifecycle()) {
        let failed = run_hooks(host, p, &args.plugin).await?;
        ok &= failed.is_empty();
        problems.extend(failed);
    }
    let summary = plugin.as_ref().map(|p| {
        json!({
            "id": p.id(),
            "version": p.manifest().version,
            "methods": p.manifest().methods.len(),
            "capabilities": p.manifest().capabilities,
        })
    });
    let file = args.plugin.display().to_string();
    let mut report = json!({"file": file, "ok": ok, "problems": problems, "plugin": summary});
    if let (true, Some(p)) = (args.manifest, &plugin) {
        report["manifest"] = serde_json::to_value(p.manifest())?;
    }
    print_verdict(&report, args.json || in_worker())
}

/// The chat [`run_hooks`] asks the hooks about.
const SAMPLE_CHAT: &str = "validate-sample-chat";

/// Runs `plugin`'s lifecycle hooks once on a sample chat, as a host would
/// before a run, with the capabilities it requests granted (but HTTP) over
/// an in-memory store and its config's defaults: what each failing hook
/// raised (for a Python plugin, the exception and its line), as problems.
async fn run_hooks(
    host: &Host,
    plugin: &Plugin,
    path: &std::path::Path,
) -> anyhow::Result<Vec<String>> {
    let grants: Vec<String> = (plugin.manifest().capabilities.iter())
        .filter(|c| !matches!(c, sandwit::Capability::Http(_)))
        .map(|c| format!("\"{c}\""))
        .collect();
    let digest = sandwit::component_hash(&std::fs::read(path)?);
    let policy = sandwit::Policy::from_toml(&format!(
        "[plugins.{:?}]\nsha256 = [\"{digest}\"]\ngrant = [{}]\n",
        plugin.id(),
        grants.join(", ")
    ))?;
    let mut builder = Host::builder().policy(policy).prepared_plugin_instances(0);
    if let Some(dir) = host.cache_dir() {
        builder = builder.cache_dir(dir);
    }
    let sample = builder.build()?;
    let granted = sample.load_plugin_file(path).await?;
    let ctx = sandwit::AgentCtx {
        user_id: Some("validate-sample-user".into()),
        channel_id: Some("validate-sample-channel".into()),
        channel_type: Some("group".into()),
        ..sandwit::AgentCtx::new(SAMPLE_CHAT)
    };
    Ok(match granted.in_context(&ctx).await {
        Err(e) => vec![format!(
            "its available-methods hook fails on a sample chat: {e}"
        )],
        Ok(seen) => (seen.prompt_error.into_iter())
            .map(|e| format!("its prompt-inject hook fails on a sample chat: {e}"))
            .collect(),
    })
}

/// Whether this process is the worker another `sandwit validate` started.
pub fn in_worker() -> bool {
    std::env::var_os(worker::WORKER_ENV).is_some()
}

/// Prints a verdict (`{"file", "ok", "problems", "plugin"}`) as JSON or
/// text; the exit status is 0 only for an acceptable plugin.
pub fn print_verdict(report: &serde_json::Value, as_json: bool) -> anyhow::Result<ExitCode> {
    let ok = report["ok"].as_bool() == Some(true);
    let file = report["file"].as_str().unwrap_or_default();
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p.as_str()).collect())
        .unwrap_or_default();
    if as_json {
        outln!("{}", serde_json::to_string_pretty(report)?);
    } else if ok {
        let p = &report["plugin"];
        let caps: Vec<&str> = p["capabilities"]
            .as_array()
            .map(|cs| cs.iter().filter_map(|c| c.as_str()).collect())
            .unwrap_or_default();
        outln!(
            "{file}: acceptable ({} {}, {} methods, capabilities requested: {})",
            p["id"].as_str().unwrap_or_default(),
            p["version"].as_str().unwrap_or_default(),
            p["methods"],
            if caps.is_empty() {
                "none".to_string()
            } else {
                caps.join(", ")
            }
        );
    } else {
        outln!("{file}: rejected, {} problem(s):", problems.len());
        for problem in &problems {
            outln!("  - {problem}");
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
