//! `sandwit inspect` and `sandwit validate`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sandwit::{Host, LoadError, Plugin};
use serde_json::json;

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
}

pub async fn inspect(host: &Host, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let plugin = host.load_plugin_file(&args.plugin).await?;
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
        outln!("  {}  [{}]", crate::render::signature(method), method.kind);
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

pub async fn validate(host: &Host, args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let file = args.plugin.display().to_string();
    let (ok, problems, plugin) = match host.load_plugin_file(&args.plugin).await {
        Ok(p) => (true, vec![], Some(p)),
        Err(LoadError::Rejected { problems, .. }) => (false, problems, None),
        Err(e @ (LoadError::Io { .. } | LoadError::Config { .. })) => {
            (false, vec![e.to_string()], None)
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        let plugin = plugin.as_ref().map(|p| {
            json!({
                "id": p.id(),
                "version": p.manifest().version,
                "methods": p.manifest().methods.len(),
                "capabilities": p.manifest().capabilities,
            })
        });
        let out = json!({"file": file, "ok": ok, "problems": problems, "plugin": plugin});
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else if let Some(p) = plugin {
        let m = p.manifest();
        outln!(
            "{file}: acceptable ({} {}, {} methods, capabilities requested: {})",
            m.id,
            m.version,
            m.methods.len(),
            list(m.capabilities.iter())
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
