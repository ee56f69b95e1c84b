//! `sandwit tools`: tool sources (the policy's `[tools.<id>]`, OpenAPI
//! documents whose operations become methods): what a document would
//! offer, and a call of one method as the sandbox would make it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use sandwit::json::value_from_json;
use sandwit::sources::{ToolSources, inspect};
use sandwit::{AgentCtx, Host, PluginSet};

#[derive(Subcommand)]
pub enum ToolsCommand {
    /// Print the methods an OpenAPI 3 document (a JSON file, or an http(s)
    /// URL fetched under the policy's [http] limits) would give, every
    /// operation selected: signatures, kinds, docstrings, the operations it
    /// cannot offer and why, and its SHA-256 to pin in the policy. Exit
    /// status 1 for a document that is refused.
    Inspect(InspectArgs),
    /// Call one method of a tool source of the policy, under its execution
    /// controls, and print its result.
    Call(CallArgs),
}

#[derive(Args)]
pub struct InspectArgs {
    /// The document: a file or an http(s) URL.
    location: String,
    /// The largest document read, in bytes.
    #[arg(long, default_value_t = sandwit::tool_policy::DEFAULT_MAX_SPEC_BYTES)]
    max_bytes: u64,
    /// Print one JSON object: {"digest", "title", "version", "servers",
    /// "methods", "skipped"}.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CallArgs {
    /// The tool source's id (`[tools.<id>]` in --policy).
    source: String,
    /// The method to call.
    method: String,
    /// The arguments, as a JSON object of parameter names to values.
    #[arg(long, default_value = "{}", value_name = "JSON")]
    args: String,
    /// The chat key of the agent context.
    #[arg(long, default_value = "cli")]
    chat_key: String,
    /// The user id of the agent context.
    #[arg(long)]
    user_id: Option<String>,
    /// Where images of a multimodal result are written
    /// [default: <temp dir>/sandwit-out-<uid>, private to the user].
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Print one JSON object: {"ok", "result" or "error" (its message)}.
    #[arg(long)]
    json: bool,
}

pub async fn tools(host: &Host, command: ToolsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ToolsCommand::Inspect(args) => inspect_document(host, args).await,
        ToolsCommand::Call(args) => call(host, args).await,
    }
}

async fn inspect_document(host: &Host, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let inspection = match inspect(&args.location, host.policy().http, args.max_bytes).await {
        Ok(inspection) => inspection,
        Err(problem) => {
            eprintln!("error: {}: {problem}", args.location);
            return Ok(ExitCode::FAILURE);
        }
    };
    if args.json {
        let methods: Vec<serde_json::Value> = inspection
            .methods
            .iter()
            .map(|m| {
                serde_json::json!({
                    "name": m.name,
                    "signature": m.signature(),
                    "kind": m.kind.as_str(),
                    "description": m.description,
                    "docstring": m.docstring,
                    "params": m.params.iter().map(|p| serde_json::json!({
                        "name": p.name, "required": p.required, "schema": p.schema,
                    })).collect::<Vec<_>>(),
                    "returns": m.returns,
                })
            })
            .collect();
        let skipped: Vec<serde_json::Value> = inspection
            .skipped
            .iter()
            .map(|(operation, why)| serde_json::json!({"operation": operation, "why": why}))
            .collect();
        let out = serde_json::json!({
            "digest": inspection.digest,
            "title": inspection.title,
            "version": inspection.version,
            "servers": inspection.servers,
            "methods": methods,
            "skipped": skipped,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} {}", inspection.title, inspection.version);
    outln!("sha256 = \"{}\"", inspection.digest);
    if !inspection.servers.is_empty() {
        outln!(
            "servers (not used; give base_url): {}",
            inspection.servers.join(", ")
        );
    }
    outln!();
    for method in &inspection.methods {
        outln!("{}  -> {}", method.signature(), method.kind.as_str());
        for line in method.docstring.lines() {
            outln!("    {line}");
        }
        outln!();
    }
    for (operation, why) in &inspection.skipped {
        outln!("skipped {operation}: {why}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn call(host: &Host, args: CallArgs) -> anyhow::Result<ExitCode> {
    let json: serde_json::Value =
        serde_json::from_str(&args.args).context("--args is not valid JSON")?;
    anyhow::ensure!(
        json.is_object(),
        "--args must be a JSON object of parameter names to values"
    );
    let sources = ToolSources::load_one(host.policy(), &args.source, host.cache_dir()).await?;
    let set = PluginSet::with_host_methods(&[], sources.methods())?;
    let offered = &sources.reports()[0].methods;
    if !offered.contains(&args.method) {
        let names: Vec<&str> = offered.iter().map(String::as_str).collect();
        anyhow::bail!(
            "tool source `{}` has no method `{}`; it offers: {}",
            args.source,
            args.method,
            names.join(", ")
        );
    }
    let ctx = AgentCtx {
        user_id: args.user_id,
        ..AgentCtx::new(args.chat_key)
    };
    let result = host
        .call(&set, &ctx, &args.method, value_from_json(json))
        .await;
    let out_dir = args.out_dir.unwrap_or_else(crate::render::default_out_dir);
    match result {
        Ok(result) => {
            let rendered = crate::render::result_json(&result, &out_dir)?;
            if args.json {
                let out = serde_json::json!({"ok": true, "result": rendered});
                outln!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                outln!("{}", serde_json::to_string_pretty(&rendered)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if args.json {
                let out = serde_json::json!({"ok": false, "error": e.to_string()});
                outln!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                eprintln!("error: {e}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}
