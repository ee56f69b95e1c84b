//! `sandwit call`, and the options and printing every direct call shares
//! (`sandwit tools call` too).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use sandwit::json::value_from_json;
use sandwit::{AgentCtx, Budget, CallReport, Host, Value};

#[derive(Args)]
pub struct CallArgs {
    /// The plugin component (`.wasm`).
    plugin: PathBuf,
    /// The method to call.
    method: String,
    #[command(flatten)]
    options: CallOptions,
}

/// How a direct call is made and shown.
#[derive(Args)]
pub struct CallOptions {
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

impl CallOptions {
    /// The arguments, checked to be a JSON object.
    pub fn args(&self) -> anyhow::Result<Value> {
        let json: serde_json::Value =
            serde_json::from_str(&self.args).context("--args is not valid JSON")?;
        anyhow::ensure!(
            json.is_object(),
            "--args must be a JSON object of parameter names to values"
        );
        Ok(value_from_json(json))
    }

    /// The agent context.
    pub fn ctx(&self) -> AgentCtx {
        AgentCtx {
            user_id: self.user_id.clone(),
            ..AgentCtx::new(self.chat_key.clone())
        }
    }

    /// Prints `report` of a call of `provider`'s method; success or failure
    /// as the exit status.
    pub fn print(&self, report: &CallReport, provider: &str) -> anyhow::Result<ExitCode> {
        let out_dir = self
            .out_dir
            .clone()
            .unwrap_or_else(crate::render::default_out_dir);
        let result = report
            .result
            .as_ref()
            .ok()
            .map(|r| crate::render::result_json(r, &out_dir))
            .transpose()?;
        if self.json {
            let out = sandwit_service::outcome::call_json(report, result);
            outln!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            for event in &report.events {
                eprintln!("{}", event.line(provider));
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
}

pub async fn call(host: &Host, args: CallArgs) -> anyhow::Result<ExitCode> {
    let call_args = args.options.args()?;
    let plugin = crate::interpreter::load_plugin(host, &args.plugin).await?;
    let budget = Budget::from_limits(host.limits());
    let report = plugin
        .call_within(&args.options.ctx(), &args.method, call_args, budget)
        .await;
    args.options.print(&report, plugin.id())
}
