//! `sandwit plugin new` and `sandwit plugin build`: a plugin project from a
//! template, and its component built and validated.
//!
//! A Rust project is a cdylib on the `sandwit-sdk` crate, built with
//! `cargo build --target wasm32-wasip2 --release`. A Python project is a
//! `plugin.py` with a module-level `NekroPlugin` (the Python SDK,
//! sdk/python), built by the pinned componentize-py in the project's
//! `.venv` against the 0.2 world. This binary carries the SDK and the WIT it
//! builds with, so a build always matches the host that validates it.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use crate::host_args::HostArgs;

/// The componentize-py a Python project is built with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";
/// The pytest a Python project's tests run with.
const PYTEST_VERSION: &str = "9.2.0";
/// The world a Python plugin is built against: the SDK's, which is
/// `sandwit:plugin/sandbox-method@0.2.0` and `wasi:http/outgoing-handler`.
const PYTHON_WORLD: &str = "sandwit:python-sdk/plugin@0.2.0";

/// A file written as it is, by its path in the project.
type Embedded = (&'static str, &'static str);

/// The Python SDK, the package `sandwit_plugin`.
const PYTHON_SDK: &[Embedded] = &[
    (
        "__init__.py",
        include_str!("../../sdk/python/sandwit_plugin/__init__.py"),
    ),
    (
        "_aio.py",
        include_str!("../../sdk/python/sandwit_plugin/_aio.py"),
    ),
    (
        "_component.py",
        include_str!("../../sdk/python/sandwit_plugin/_component.py"),
    ),
    (
        "_ctx.py",
        include_str!("../../sdk/python/sandwit_plugin/_ctx.py"),
    ),
    (
        "_errors.py",
        include_str!("../../sdk/python/sandwit_plugin/_errors.py"),
    ),
    (
        "_host.py",
        include_str!("../../sdk/python/sandwit_plugin/_host.py"),
    ),
    (
        "_http.py",
        include_str!("../../sdk/python/sandwit_plugin/_http.py"),
    ),
    (
        "_plugin.py",
        include_str!("../../sdk/python/sandwit_plugin/_plugin.py"),
    ),
    (
        "_schema.py",
        include_str!("../../sdk/python/sandwit_plugin/_schema.py"),
    ),
    (
        "_values.py",
        include_str!("../../sdk/python/sandwit_plugin/_values.py"),
    ),
    (
        "app.py",
        include_str!("../../sdk/python/sandwit_plugin/app.py"),
    ),
    (
        "testing.py",
        include_str!("../../sdk/python/sandwit_plugin/testing.py"),
    ),
];

/// Nekro Agent's import paths and the part of pydantic its plugins' config
/// classes use (sdk/python/compat), beside the SDK: a Nekro plugin builds
/// unchanged.
const PYTHON_COMPAT: &[Embedded] = &[
    (
        "nekro_agent/__init__.py",
        include_str!("../../sdk/python/compat/nekro_agent/__init__.py"),
    ),
    (
        "nekro_agent/api/__init__.py",
        include_str!("../../sdk/python/compat/nekro_agent/api/__init__.py"),
    ),
    (
        "nekro_agent/api/core.py",
        include_str!("../../sdk/python/compat/nekro_agent/api/core.py"),
    ),
    (
        "nekro_agent/api/i18n.py",
        include_str!("../../sdk/python/compat/nekro_agent/api/i18n.py"),
    ),
    (
        "nekro_agent/api/message.py",
        include_str!("../../sdk/python/compat/nekro_agent/api/message.py"),
    ),
    (
        "nekro_agent/api/plugin.py",
        include_str!("../../sdk/python/compat/nekro_agent/api/plugin.py"),
    ),
    (
        "nekro_agent/api/schemas.py",
        include_str!("../../sdk/python/compat/nekro_agent/api/schemas.py"),
    ),
    (
        "pydantic/__init__.py",
        include_str!("../../sdk/python/compat/pydantic/__init__.py"),
    ),
];

/// The Python SDK's world (sdk/python/wit): the 0.2 plugin world and
/// `wasi:http/outgoing-handler`, laid out as sdk/python/wit is (its
/// `deps/sandwit-plugin-*` link to wit/plugin@0.2.0, whose files are read from there).
const WIT: &[Embedded] = &[
    ("world.wit", include_str!("../../sdk/python/wit/world.wit")),
    (
        "deps/sandwit-plugin-0.2.0/lifecycle.wit",
        include_str!("../../wit/plugin@0.2.0/lifecycle.wit"),
    ),
    (
        "deps/sandwit-plugin-0.1.0/world.wit",
        include_str!("../../wit/plugin@0.2.0/deps/plugin-0.1.0/world.wit"),
    ),
    (
        "deps/sandwit-plugin-0.1.0/types.wit",
        include_str!("../../wit/plugin@0.2.0/deps/plugin-0.1.0/types.wit"),
    ),
    (
        "deps/sandwit-plugin-0.1.0/services.wit",
        include_str!("../../wit/plugin@0.2.0/deps/plugin-0.1.0/services.wit"),
    ),
    (
        "deps/wasi-cli-0.2.12/cli.wit",
        include_str!("../../sdk/python/wit/deps/wasi-cli-0.2.12/cli.wit"),
    ),
    (
        "deps/wasi-clocks-0.2.12/clocks.wit",
        include_str!("../../sdk/python/wit/deps/wasi-clocks-0.2.12/clocks.wit"),
    ),
    (
        "deps/wasi-filesystem-0.2.12/filesystem.wit",
        include_str!("../../sdk/python/wit/deps/wasi-filesystem-0.2.12/filesystem.wit"),
    ),
    (
        "deps/wasi-http-0.2.12/http.wit",
        include_str!("../../sdk/python/wit/deps/wasi-http-0.2.12/http.wit"),
    ),
    (
        "deps/wasi-io-0.2.12/io.wit",
        include_str!("../../sdk/python/wit/deps/wasi-io-0.2.12/io.wit"),
    ),
    (
        "deps/wasi-random-0.2.12/random.wit",
        include_str!("../../sdk/python/wit/deps/wasi-random-0.2.12/random.wit"),
    ),
    (
        "deps/wasi-sockets-0.2.12/sockets.wit",
        include_str!("../../sdk/python/wit/deps/wasi-sockets-0.2.12/sockets.wit"),
    ),
];

const RUST_TEMPLATE: &[Embedded] = &[
    ("Cargo.toml", include_str!("../templates/rust/Cargo.toml")),
    ("src/lib.rs", include_str!("../templates/rust/src/lib.rs")),
    (".gitignore", include_str!("../templates/rust/.gitignore")),
];

const PYTHON_TEMPLATE: &[Embedded] = &[
    ("plugin.py", include_str!("../templates/python/plugin.py")),
    (
        "tests/test_plugin.py",
        include_str!("../templates/python/tests/test_plugin.py"),
    ),
    (
        "conftest.py",
        include_str!("../templates/python/conftest.py"),
    ),
    (".gitignore", include_str!("../templates/python/.gitignore")),
];

/// Where the Rust SDK is when this binary was built from a sandwit tree.
const SDK_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk/rust");

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Make a plugin project in a new directory NAME: one documented method
    /// and a test, ready for `sandwit plugin build`.
    ///
    /// Rust: a cdylib on sandwit-sdk (`cargo test` runs its test). Python: a
    /// `plugin.py` with Nekro Agent's plugin API (`.venv/bin/python -m
    /// pytest` runs its test after the first build).
    New(NewArgs),
    /// Build the plugin project in DIR to a component, then validate it as
    /// `sandwit validate` does; the exit status is validate's.
    ///
    /// Rust (a Cargo.toml): `cargo build --target wasm32-wasip2 --release`.
    /// Python (a plugin.py): componentize-py 0.25.1, installed with pytest
    /// into DIR/.venv when it is not there, builds target/<id>.wasm.
    Build(BuildArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Lang {
    Rust,
    Python,
}

#[derive(Args)]
pub struct NewArgs {
    /// The plugin's id and directory: lowercase letters, digits, `-` and
    /// `_`, starting with a letter.
    name: String,
    /// The language of the plugin.
    #[arg(long, value_enum)]
    lang: Lang,
    /// The Rust SDK (sandwit-sdk) as a path dependency [default: the
    /// sdk/rust/ of the tree this binary was built from, if it is there].
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

#[derive(Args)]
pub struct BuildArgs {
    /// The project.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The componentize-py to build a Python project with, instead of
    /// DIR/.venv's [default: $SANDWIT_COMPONENTIZE_PY].
    #[arg(long, value_name = "FILE")]
    componentize_py: Option<PathBuf>,
}

pub fn run(command: PluginCommand, host: &HostArgs) -> anyhow::Result<ExitCode> {
    match command {
        PluginCommand::New(args) => new(args),
        PluginCommand::Build(args) => build(args, host),
    }
}

fn valid_id(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name.len() <= 64
}

fn write_all(root: &Path, files: &[Embedded], fill: impl Fn(&str) -> String) -> anyhow::Result<()> {
    for (path, text) in files {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, fill(text)).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn new(args: NewArgs) -> anyhow::Result<ExitCode> {
    if !valid_id(&args.name) {
        bail!(
            "the name {:?} is not a plugin id: lowercase letters, digits, `-` and `_`, starting with a letter, at most 64",
            args.name
        );
    }
    let dir = PathBuf::from(&args.name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let id = args.name.as_str();
    match args.lang {
        Lang::Rust => {
            let sdk = match args.sdk {
                Some(sdk) => sdk,
                None if Path::new(SDK_SOURCE).join("Cargo.toml").exists() => {
                    PathBuf::from(SDK_SOURCE)
                }
                None => bail!(
                    "this binary was not built from a sandwit tree: give the Rust SDK with --sdk DIR (sandwit's sdk/rust/)"
                ),
            };
            let sdk = std::fs::canonicalize(&sdk)
                .with_context(|| format!("the SDK {}", sdk.display()))?;
            let dependency = format!("path = {:?}", sdk.display().to_string());
            write_all(&dir, RUST_TEMPLATE, |text| {
                text.replace("{{crate}}", &id.replace('-', "_"))
                    .replace("{{id}}", id)
                    .replace("{{sdk}}", &dependency)
            })?;
        }
        Lang::Python => {
            write_all(&dir, PYTHON_TEMPLATE, |text| text.replace("{{id}}", id))?;
        }
    }
    outln!(
        "made {}: build it with `sandwit plugin build {}`",
        dir.display(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn build(args: BuildArgs, host: &HostArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let component = if dir.join("Cargo.toml").exists() {
        build_rust(dir)?
    } else if dir.join("plugin.py").exists() {
        build_python(
            dir,
            args.componentize_py
                .or_else(|| sandwit::paths::env_path("SANDWIT_COMPONENTIZE_PY")),
        )?
    } else {
        bail!(
            "{} is not a plugin project: it has neither a Cargo.toml (Rust) nor a plugin.py (Python)",
            dir.display()
        );
    };
    eprintln!("sandwit: built {}", component.display());
    // The same check, and report, as `sandwit validate`, in its worker.
    let mut validate = Command::new(std::env::current_exe().context("finding this binary")?);
    validate.args(host.shared_args());
    let status = validate
        .arg("validate")
        .arg(&component)
        .status()
        .context("running sandwit validate")?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs `cmd`, failing with `what` and its exit status if it fails.
fn run_step(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

fn build_rust(dir: &Path) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut child = Command::new(cargo)
        .current_dir(dir)
        .args(["build", "--target", "wasm32-wasip2", "--release"])
        .args(["--message-format", "json-render-diagnostics"])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo")?;
    let mut built = None;
    for line in std::io::BufReader::new(child.stdout.take().expect("piped")).lines() {
        let message: serde_json::Value = serde_json::from_str(&line?).unwrap_or_default();
        if message["reason"] == "compiler-artifact" {
            let wasm = message["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(".wasm"));
            if let Some(wasm) = wasm {
                built = Some(PathBuf::from(wasm));
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("cargo build --target wasm32-wasip2 --release failed ({status})");
    }
    built.context("cargo built no .wasm: is the crate a cdylib (`crate-type = [\"cdylib\"]`)?")
}

fn build_python(dir: &Path, componentize_py: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let venv = dir.join(".venv");
    let componentize_py = match componentize_py {
        Some(given) => given,
        None => {
            let installed = venv.join("bin/componentize-py");
            if !installed.exists() {
                eprintln!(
                    "sandwit: installing componentize-py {COMPONENTIZE_PY_VERSION} and pytest into {}",
                    venv.display()
                );
                run_step(
                    Command::new("python3").arg("-m").arg("venv").arg(&venv),
                    "python3 -m venv",
                )?;
                run_step(
                    Command::new(venv.join("bin/pip")).args([
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                        &format!("componentize-py=={COMPONENTIZE_PY_VERSION}"),
                        &format!("pytest=={PYTEST_VERSION}"),
                    ]),
                    "pip install componentize-py",
                )?;
            }
            installed
        }
    };
    let version = Command::new(&componentize_py)
        .arg("--version")
        .output()
        .with_context(|| format!("running {}", componentize_py.display()))?;
    let version = String::from_utf8_lossy(&version.stdout);
    if version.trim() != format!("componentize-py {COMPONENTIZE_PY_VERSION}") {
        bail!(
            "{} is {:?}, not componentize-py {COMPONENTIZE_PY_VERSION}",
            componentize_py.display(),
            version.trim()
        );
    }
    // The SDK and the WIT this binary carries, and the project's own
    // modules without its tests and virtualenv: what the component holds.
    let work = dir.join("target/sandwit");
    let _ = std::fs::remove_dir_all(&work);
    write_all(&work.join("sdk/sandwit_plugin"), PYTHON_SDK, str::to_string)?;
    write_all(&work.join("sdk"), PYTHON_COMPAT, str::to_string)?;
    write_all(&work.join("wit"), WIT, str::to_string)?;
    stage_app(dir, &work.join("app"))?;
    // The project's tests import the SDK from the virtualenv.
    if venv.is_dir() {
        for lib in std::fs::read_dir(venv.join("lib"))?.flatten() {
            let site = lib.path().join("site-packages");
            if site.is_dir() {
                let sdk = std::fs::canonicalize(work.join("sdk"))?;
                std::fs::write(
                    site.join("sandwit_plugin.pth"),
                    format!("{}\n", sdk.display()),
                )?;
            }
        }
    }
    let out = dir
        .join("target")
        .join(format!("{}.wasm", project_name(dir)));
    run_step(
        Command::new(&componentize_py)
            .env_remove("VIRTUAL_ENV")
            // A plugin module that raises on import is reported by its
            // Python traceback; componentize-py's own Rust backtrace would
            // bury it.
            .env("RUST_BACKTRACE", "0")
            .env("RUST_LIB_BACKTRACE", "0")
            .arg("-q")
            .arg("-d")
            .arg(work.join("wit"))
            .args([
                "-w",
                PYTHON_WORLD,
                "--world-module",
                "_sandwit_wit",
                "componentize",
            ])
            .arg("sandwit_plugin.app")
            .arg("-p")
            .arg(work.join("app"))
            .arg("-p")
            .arg(work.join("sdk"))
            .arg("-o")
            .arg(&out),
        "componentize-py",
    )?;
    Ok(out)
}

/// The project's directory name, for the component's file name.
fn project_name(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "plugin".into())
}

/// Copies the project's modules (top-level `.py` files but `conftest.py`,
/// and packages) into `app`.
fn stage_app(dir: &Path, app: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(app)?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_file() && name.ends_with(".py") && name != "conftest.py" {
            std::fs::copy(&path, app.join(&name))?;
        } else if path.is_dir() && path.join("__init__.py").exists() && name != "tests" {
            copy_dir(&path, &app.join(&name))?;
        }
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if entry.file_name() != "__pycache__" {
                copy_dir(&path, &to.join(entry.file_name()))?;
            }
        } else {
            std::fs::copy(&path, to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module of the SDK is in the binary.
    #[test]
    fn the_embedded_sdk_is_the_whole_package() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python/sandwit_plugin");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".py"))
            .collect();
        files.sort();
        let embedded: Vec<&str> = PYTHON_SDK.iter().map(|(n, _)| *n).collect();
        assert_eq!(files, embedded);
    }

    /// Every module of the compatibility packages is in the binary.
    #[test]
    fn the_embedded_compat_is_every_module() {
        fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = format!("{rel}{name}");
                if entry.path().is_dir() {
                    if name != "__pycache__" {
                        walk(&entry.path(), &format!("{path}/"), out);
                    }
                } else if name.ends_with(".py") {
                    out.push(path);
                }
            }
        }
        let mut files = Vec::new();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python/compat");
        walk(&dir, "", &mut files);
        files.sort();
        let embedded: Vec<&str> = PYTHON_COMPAT.iter().map(|(n, _)| *n).collect();
        assert_eq!(files, embedded);
    }

    /// Every WIT file of sdk/python/wit is in the binary, as it is there
    /// (following its links to wit/plugin@0.2.0 but not that directory's own deps,
    /// which componentize-py does not read either).
    #[test]
    fn the_embedded_wit_is_the_sdk_world() {
        fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                let rel = format!("{rel}{name}");
                if path.is_dir() {
                    // `deps` and its package directories, not deeper.
                    if rel.matches('/').count() <= 1 {
                        walk(&path, &format!("{rel}/"), out);
                    }
                } else if name.ends_with(".wit") {
                    out.push((rel, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        let mut files = Vec::new();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python/wit");
        walk(&root, "", &mut files);
        files.sort();
        let mut embedded: Vec<(String, String)> = WIT
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        embedded.sort();
        assert_eq!(files, embedded);
    }

    #[test]
    fn plugin_ids() {
        assert!(valid_id("dice") && valid_id("my-plugin_2"));
        assert!(!valid_id("") && !valid_id("Dice") && !valid_id("2x") && !valid_id("../x"));
    }
}
