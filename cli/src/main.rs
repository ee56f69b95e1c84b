//! `sandwit`: inspect, validate and call sandwit plugins from the shell.

#[macro_use]
mod stdout;

mod call;
mod connections;
mod host_args;
mod inspect;
mod install;
mod interpreter;
mod keygen;
mod mcp;
mod prepare;
mod project;
mod publish;
mod registry;
mod registry_client;
mod render;
mod run;
mod serve;
mod telemetry;
mod tools;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use host_args::HostArgs;
use sandwit::{HostBuilder, WorkspaceOptions};

/// A WebAssembly plugin host for AI agents.
///
/// Plugins are WebAssembly components of the WIT world
/// `sandwit:plugin/sandbox-method`. A direct call runs in a fresh instance
/// (a Python run keeps one instance per plugin for its calls), under
/// fuel, time and memory limits. Set SANDWIT_LOG (e.g. `info`) to see the
/// host's log on stderr.
///
/// `run` needs the CPython component: built into the binary when it was
/// built with SANDWIT_EMBED_PYTHON (`sandwit --version` says whether), else
/// given with --python or SANDWIT_PYTHON, or installed as
/// ~/.local/share/sandwit/python/sandbox.wasm. Its first use compiles it for
/// this machine (10-30 s, once: the code is cached).
#[derive(Parser)]
#[command(name = "sandwit", version = interpreter::VERSION)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    host: HostArgs,
    #[command(flatten)]
    otlp: telemetry::OtlpArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Show a plugin's manifest: its methods with kinds, parameter schemas and
    /// docstrings, its capabilities and the component's imports.
    Inspect(inspect::InspectArgs),
    /// Check a plugin as a marketplace would: exit status 0 only when it is
    /// acceptable; otherwise every problem is listed and the status is 1.
    /// The check runs in a worker process under a memory and CPU budget,
    /// and runs the plugin's lifecycle hooks once on a sample chat.
    Validate(inspect::ValidateArgs),
    /// Call one method of a plugin and print its typed result.
    Call(call::CallArgs),
    /// Run Python code in the sandbox with plugin methods as functions; print
    /// its stdout, then the outcome. Exit status 0 for ok and agent handoff,
    /// 3 for a run paused at a call the policy pauses (`[approval]
    /// pause_for`) or at a `--function`'s: it prints the token `sandwit
    /// resume` takes.
    Run(run::RunArgs),
    /// Resume a paused run with a person's answer: approve the call, deny
    /// it, give its result, or raise an exception in its place. The code runs again to the call without
    /// making any call twice, then goes on; the token resumes once, from any
    /// process over the same store and session key. Exit status as `run`.
    Resume(run::ResumeArgs),
    /// Compile everything a host will use (the interpreter for both of its
    /// engines, the scientific interpreter if given, the plugins) into the
    /// cache before it serves, and say where it is: a host or replica
    /// started on it is as fast from its first run as a warm one.
    Prepare(prepare::PrepareArgs),
    /// Print the method listing an LLM is given: signatures, kinds and
    /// docstrings, and the prompts plugins inject for the chat.
    Prompt(run::PromptArgs),
    /// Tool sources: OpenAPI documents and MCP servers whose operations and
    /// tools become methods (the policy's `[tools.<id>]`, see
    /// docs/TOOLS.md): inspect one, call one's method.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Make a key pair for signing plugins: the secret key to FILE (mode
    /// 0600), the public key to FILE.pub and stdout.
    Keygen(keygen::KeygenArgs),
    /// Print the signature of a plugin's digest by a key (for a registry's
    /// upload form).
    Sign(publish::SignArgs),
    /// Check a plugin here, sign it and upload it to a registry; print its
    /// id, version and digest. See docs/REGISTRY.md.
    Publish(publish::PublishArgs),
    /// Download a plugin from a registry into a folder: its digest and
    /// signature checked against the keys you trust, recorded in the
    /// folder's sandwit.lock. See docs/REGISTRY.md.
    Install(install::InstallArgs),
    /// Serve a plugin registry (publish, search, download over HTTP) and
    /// make its tokens.
    Registry(registry::RegistryArgs),
    /// Make and build plugin projects (Rust, Python, JavaScript or TypeScript).
    #[command(subcommand)]
    Plugin(project::PluginCommand),
    /// Serve the runtime over HTTP: runs (JSON or a stream of server-sent
    /// events), method calls, tool discovery, health and Prometheus metrics,
    /// plugins enabled and disabled at runtime. Bearer tokens from
    /// --token-file (or one generated admin token); loopback by default.
    /// See docs/SERVICE.md.
    Serve(serve::ServeArgs),
    /// Serve the runtime to a local agent client over MCP (the Model
    /// Context Protocol) on stdin and stdout: the enabled methods as tools,
    /// and `run_python` to run code that calls them. Hook it up as a
    /// client's stdio server, e.g. `sandwit mcp --stdio --plugins DIR`.
    /// Logs go to stderr. See docs/SERVICE.md.
    Mcp(mcp::McpArgs),
}

/// The host's pool in a command that makes one run or call: the
/// interpreter and an instance for each plugin the run calls, up to 63.
const ONE_SHOT_INSTANCES: u32 = 64;
/// The host's pool in `validate`, which instantiates one plugin.
const VALIDATE_INSTANCES: u32 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A server logs every request by default; a command only its warnings.
    let default_log = if matches!(
        cli.command,
        Command::Registry(_) | Command::Serve(_) | Command::Mcp(_)
    ) {
        "info"
    } else {
        "warn"
    };
    let telemetry = match telemetry::init(&cli.otlp, default_log) {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    // These need no host (nor a runtime).
    let without_host = match cli.command {
        Command::Registry(args) => registry::main(args),
        Command::Plugin(command) => project::run(command, &cli.host),
        Command::Validate(args) if !args.in_process && !inspect::in_worker() => {
            inspect::validate_in_worker(args)
        }
        Command::Keygen(args) => keygen::keygen(args),
        Command::Sign(args) => publish::sign(args),
        Command::Publish(args) => publish::publish(args, &cli.host),
        Command::Install(args) => install::install(args, &cli.host),
        command => Ok(run_with_host(Cli { command, ..cli })),
    };
    let code = without_host.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    });
    // The spans not exported yet go before the process ends: the command's
    // runtime, and every run in it, has ended.
    drop(telemetry);
    code
}

/// `builder` with the chats' workspaces, if asked for.
fn with_workspaces(builder: HostBuilder, workspaces: Option<WorkspaceOptions>) -> HostBuilder {
    match workspaces {
        Some(workspaces) => builder.workspaces(workspaces),
        None => builder,
    }
}

/// Runs a command that needs a host.
fn run_with_host(cli: Cli) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("starting the tokio runtime");
    let result = runtime.block_on(async {
        let command = match cli.command {
            // A server: the host's defaults for many runs (interpreters
            // prepared ahead, a pool sized for them).
            Command::Serve(args) => {
                let builder =
                    with_workspaces(cli.host.builder().await?, args.interpreters.workspaces());
                let builder = cli.host.with_session_key(builder)?;
                let builder = builder.run_slots(args.slots.host());
                return serve::serve(builder.build()?, args).await;
            }
            Command::Mcp(args) => {
                let builder =
                    with_workspaces(cli.host.builder().await?, args.interpreters.workspaces());
                let builder = cli.host.with_session_key(builder)?;
                let builder = builder.run_slots(args.slots.host());
                return mcp::mcp(builder.build()?, args).await;
            }
            // As a server would be built: interpreters prepared ahead, so
            // their own engine's code is compiled too.
            Command::Prepare(args) => {
                return prepare::prepare(cli.host.builder().await?.build()?, args).await;
            }
            command => command,
        };
        // One run per process: an interpreter prepared ahead of it would
        // only compete with it for the cores, and a pool sized for a server
        // would cost the start its guard pages.
        let workspaces = match &command {
            Command::Run(args) => args.workspace.clone().map(WorkspaceOptions::new),
            _ => None,
        };
        let validating = matches!(command, Command::Validate(_));
        let mut builder = with_workspaces(cli.host.builder().await?, workspaces);
        // A run in a session is stored, which takes an interpreter on the
        // sandbox's own engine: one prepared ahead brings it.
        let in_session = matches!(&command, Command::Run(args) if args.session.is_some());
        // A paused run's token is signed with the session key, so that
        // `resume` in another process takes it.
        let pauses = match &command {
            Command::Run(args) => !args.functions.is_empty() || cli.host.policy()?.pauses_any(),
            _ => false,
        };
        if in_session || pauses || matches!(&command, Command::Resume(_)) {
            builder = cli.host.with_session_key(builder)?;
        }
        // A check's worker without a cache uses the one in its scratch
        // directory, so that loading the plugin a second time (to run its
        // hooks) does not compile it again (`worker`'s docs).
        if validating
            && cli.host.cache_dir().is_none()
            && let Some(cache) = worker::scratch_cache()
        {
            builder = builder.cache_dir(cache);
        }
        let host = builder
            .prepared_interpreters(usize::from(in_session))
            .max_instances(if validating {
                // One plugin instance at a time: the worker's memory budget
                // is spent on the check, not on the pool.
                VALIDATE_INSTANCES
            } else {
                ONE_SHOT_INSTANCES
            })
            .build()?;
        match command {
            Command::Inspect(args) => inspect::inspect(&host, args).await,
            Command::Validate(args) => inspect::validate(&host, args).await,
            Command::Call(args) => call::call(&host, args).await,
            Command::Run(args) => run::run(&host, args).await,
            Command::Resume(args) => run::resume(&host, args).await,
            Command::Prompt(args) => run::prompt(&host, args).await,
            Command::Tools(command) => tools::tools(&host, command).await,
            Command::Keygen(_)
            | Command::Sign(_)
            | Command::Publish(_)
            | Command::Install(_)
            | Command::Registry(_)
            | Command::Plugin(_) => unreachable!("run without a host"),
            Command::Serve(_) | Command::Mcp(_) | Command::Prepare(_) => {
                unreachable!("served above")
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
