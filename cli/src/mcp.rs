//! `sandwit mcp --stdio`: the runtime as an MCP server for a local agent
//! client, over stdin and stdout (the `sandwit-service` crate's MCP server).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use sandwit::Host;
use sandwit_service::{Service, Tokens};

use crate::serve::RunSlots;

#[derive(Args)]
pub struct McpArgs {
    /// Serve over stdin and stdout (the only transport here; `sandwit serve`
    /// serves MCP over HTTP at /mcp). Stdout carries only MCP messages;
    /// logs go to stderr.
    #[arg(long)]
    stdio: bool,
    /// The folder of `.wasm` plugins whose methods are offered as tools
    /// (all of them, in name order).
    #[arg(long = "plugins", value_name = "DIR")]
    plugin_dir: PathBuf,
    /// The chat key of a call whose `_meta` names none
    /// (`_meta["sandwit/chat_key"]`): plugins keep a chat's state under it.
    #[arg(long, default_value = "mcp", value_name = "KEY")]
    chat_key: String,
    #[command(flatten)]
    pub interpreters: crate::interpreter::InterpreterArgs,
    #[command(flatten)]
    pub slots: RunSlots,
}

pub async fn mcp(host: Host, args: McpArgs) -> anyhow::Result<ExitCode> {
    if !args.stdio {
        bail!(
            "`sandwit mcp` serves over stdio only: pass --stdio (MCP over HTTP is `sandwit serve`'s /mcp)"
        );
    }
    if args.chat_key.is_empty() {
        bail!("--chat-key is empty");
    }
    let interpreters = crate::interpreter::interpreters(&host, &args.interpreters).await?;
    // No HTTP is served: no token is accepted, no body read.
    let config = args
        .slots
        .config(args.plugin_dir.clone(), Tokens::default(), 0);
    let service = Service::new(host, interpreters, config).await?;
    eprintln!("sandwit: serving MCP on stdio");
    let cancelled = service.serve_mcp_stdio(&args.chat_key).await?;
    for (id, _) in cancelled {
        eprintln!("sandwit: cancelled run {id}: the client went away");
    }
    Ok(ExitCode::SUCCESS)
}
