//! `sandwit tools`: tool sources (the policy's `[tools.<id>]`: OpenAPI
//! documents and MCP servers whose operations and tools become methods):
//! what a document or source would offer, and a call of one method as the
//! sandbox would make it.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use sandwit::sources::{ToolSources, inspect};
use sandwit::{Host, Toolbox};

use crate::call::CallOptions;

#[derive(Subcommand)]
pub enum ToolsCommand {
    /// Print the methods an OpenAPI 3 document (a JSON file, or an http(s)
    /// URL fetched under the policy's [http] limits) would give, every
    /// operation selected: signatures, kinds, docstrings, the operations it
    /// cannot offer and why, and its SHA-256 to pin in the policy. Or, with
    /// --source ID, the methods a tool source of the policy gives (an MCP
    /// server's, listed now). Exit status 1 for a document or source that
    /// is refused.
    Inspect(InspectArgs),
    /// Call one method of a tool source of the policy, under its execution
    /// controls, and print its result.
    Call(CallArgs),
}

#[derive(Args)]
pub struct InspectArgs {
    /// The document: a file or an http(s) URL.
    #[arg(required_unless_present = "source", conflicts_with = "source")]
    location: Option<String>,
    /// A tool source of --policy (`[tools.<id>]`), by id.
    #[arg(long, value_name = "ID")]
    source: Option<String>,
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
    #[command(flatten)]
    options: CallOptions,
}

pub async fn tools(host: &Host, command: ToolsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ToolsCommand::Inspect(args) => inspect_document(host, args).await,
        ToolsCommand::Call(args) => call(host, args).await,
    }
}

async fn inspect_document(host: &Host, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let inspection = match (&args.location, &args.source) {
        (Some(location), _) => match inspect(location, host.policy().http, args.max_bytes).await {
            Ok(inspection) => inspection,
            Err(problem) => {
                eprintln!("error: {location}: {problem}");
                return Ok(ExitCode::FAILURE);
            }
        },
        (None, Some(id)) => {
            match ToolSources::load_one(host.policy(), id, host.cache_dir()).await {
                Ok(sources) => {
                    let (methods, mut reports) = sources.snapshot();
                    let report = reports.remove(0);
                    sandwit::sources::Inspection {
                        digest: report.digest,
                        title: format!("tool source `{id}`"),
                        version: String::new(),
                        servers: Vec::new(),
                        methods: methods.iter().map(|m| m.spec().clone()).collect(),
                        skipped: report.skipped,
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        (None, None) => unreachable!("clap requires one"),
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
    if !inspection.digest.is_empty() {
        outln!("sha256 = \"{}\"", inspection.digest);
    }
    if !inspection.servers.is_empty() {
        outln!(
            "servers (not used; give base_url): {}",
            inspection.servers.join(", ")
        );
    }
    outln!();
    for method in &inspection.methods {
        outln!("{}  -> {}", method.signature(), method.kind.as_str());
        // As the listing shows it: bidi and invisible characters as escapes.
        for line in sandwit::visible_text(&method.docstring).lines() {
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
    let call_args = args.options.args()?;
    let sources = ToolSources::load_one(host.policy(), &args.source, host.cache_dir()).await?;
    let (methods, reports) = sources.snapshot();
    let set = Toolbox::with_host_methods(&[], &methods)?;
    let offered = &reports[0].methods;
    if !offered.contains(&args.method) {
        let names: Vec<&str> = offered.iter().map(String::as_str).collect();
        anyhow::bail!(
            "tool source `{}` has no method `{}`; it offers: {}",
            args.source,
            args.method,
            names.join(", ")
        );
    }
    let report = host
        .call_report(&set, &args.options.ctx(), &args.method, call_args)
        .await;
    args.options.print(&report, &args.source)
}
