//! `sandwit call`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use sandwit::json::value_from_json;
use sandwit::{AgentCtx, Budget, Host};

#[derive(Args)]
pub struct CallArgs {
    /// The plugin component (`.wasm`).
    plugin: PathBuf,
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
    /// Print one JSON object: {"ok", "result" or "error", "events", "fuel_used", "ms"}.
    #[arg(long)]
    json: bool,
}

pub async fn call(host: &Host, args: CallArgs) -> anyhow::Result<ExitCode> {
    let json: serde_json::Value =
        serde_json::from_str(&args.args).context("--args is not valid JSON")?;
    anyhow::ensure!(
        json.is_object(),
        "--args must be a JSON object of parameter names to values"
    );
    let plugin = crate::interpreter::load_plugin(host, &args.plugin).await?;
    let ctx = AgentCtx {
        user_id: args.user_id,
        ..AgentCtx::new(args.chat_key)
    };
    let budget = Budget::from_limits(host.limits());
    let report = plugin
        .call_within(&ctx, &args.method, value_from_json(json), budget)
        .await;
    let out_dir = args.out_dir.unwrap_or_else(crate::render::default_out_dir);
    let result = report
        .result
        .as_ref()
        .ok()
        .map(|r| crate::render::result_json(r, &out_dir))
        .transpose()?;
    if args.json {
        let out = sandwit_service::outcome::call_json(&report, result);
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for event in &report.events {
            eprintln!("{}", event.line(plugin.id()));
        }
        match (&report.result, result) {
            (Ok(_), Some(result)) => outln!("{}", serde_json::to_string_pretty(&result)?),
            (Err(e), _) => eprintln!("error: {e}"),
            (Ok(_), None) => unreachable!("a result renders"),
        }
    }
    Ok(if report.result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
