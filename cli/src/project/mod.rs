//! `sandwit plugin new` and `sandwit plugin build`: a plugin project from a
//! template, and its component built and validated, one module per
//! language (rust.rs, python.rs, js.rs for JavaScript and TypeScript). This
//! binary carries the SDKs and the WIT it builds with, so a build always
//! matches the host that validates it.

mod files;
mod js;
mod python;
mod rust;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use crate::host_args::HostArgs;
use files::write_all;

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Make a plugin project in a new directory NAME: one documented method
    /// and a test, ready for `sandwit plugin build`.
    ///
    /// Rust: a cdylib on sandwit-sdk (`cargo test` runs its test). Python: a
    /// `plugin.py` with Nekro Agent's plugin API (`.venv/bin/python -m
    /// pytest` runs its test after the first build). JavaScript and
    /// TypeScript: a `plugin.js` or `plugin.ts` on the SDK `sandwit-plugin`
    /// and a package.json pinning the build tools (`npm test` runs its test
    /// in Node after the first build).
    New(NewArgs),
    /// Build the plugin project in DIR to a component, then validate it as
    /// `sandwit validate` does; the exit status is validate's.
    ///
    /// Rust (a Cargo.toml): `cargo build --target wasm32-wasip2 --release`.
    /// Python (a plugin.py): componentize-py 0.25.1, installed with pytest
    /// into DIR/.venv when it is not there, builds target/<id>.wasm.
    /// JavaScript or TypeScript (a package.json beside plugin.js or
    /// plugin.ts; Node.js 20 or newer): the pinned componentize-js, jco and
    /// esbuild (and for TypeScript tsc and ts-json-schema-generator),
    /// installed into DIR/node_modules by npm when they are not there,
    /// build target/<dir>.wasm. The component's size and the time its first
    /// compile and check took are reported.
    Build(BuildArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    #[value(alias = "javascript")]
    Js,
    #[value(alias = "typescript")]
    Ts,
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
    /// A folder whose node_modules has the pinned JavaScript build tools
    /// (`npm ci` of sandwit's sdk/js/tools), to build a JavaScript or
    /// TypeScript project with instead of DIR/node_modules [default:
    /// $SANDWIT_JS_TOOLS].
    #[arg(long, value_name = "DIR")]
    js_tools: Option<PathBuf>,
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
                None if Path::new(rust::SDK_SOURCE).join("Cargo.toml").exists() => {
                    PathBuf::from(rust::SDK_SOURCE)
                }
                None => bail!(
                    "this binary was not built from a sandwit tree: give the Rust SDK with --sdk DIR (sandwit's sdk/rust/)"
                ),
            };
            let sdk = std::fs::canonicalize(&sdk)
                .with_context(|| format!("the SDK {}", sdk.display()))?;
            let dependency = format!("path = {:?}", sdk.display().to_string());
            write_all(&dir, rust::TEMPLATE, |text| {
                text.replace("{{crate}}", &id.replace('-', "_"))
                    .replace("{{id}}", id)
                    .replace("{{sdk}}", &dependency)
            })?;
        }
        Lang::Python => {
            write_all(&dir, python::TEMPLATE, |text| text.replace("{{id}}", id))?;
        }
        Lang::Js | Lang::Ts => {
            let typescript = matches!(args.lang, Lang::Ts);
            let template = if typescript {
                js::TS_TEMPLATE
            } else {
                js::JS_TEMPLATE
            };
            write_all(&dir, template, |text| text.replace("{{id}}", id))?;
            js::new_project(&dir, id, typescript)?;
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
        rust::build(dir)?
    } else if dir.join("plugin.py").exists() {
        python::build(
            dir,
            args.componentize_py
                .or_else(|| sandwit::paths::env_path("SANDWIT_COMPONENTIZE_PY")),
        )?
    } else if dir.join("package.json").exists() {
        js::build(
            dir,
            args.js_tools
                .or_else(|| sandwit::paths::env_path("SANDWIT_JS_TOOLS")),
        )?
    } else {
        bail!(
            "{} is not a plugin project: it has no Cargo.toml (Rust), plugin.py (Python) or package.json (JavaScript, TypeScript)",
            dir.display()
        );
    };
    let size = std::fs::metadata(&component)
        .with_context(|| format!("reading {}", component.display()))?
        .len();
    eprintln!(
        "sandwit: built {} ({:.1} MB); compiling and checking it",
        component.display(),
        size as f64 / 1e6
    );
    // The same check, and report, as `sandwit validate`, in its worker.
    let started = Instant::now();
    let mut validate = Command::new(std::env::current_exe().context("finding this binary")?);
    validate.args(host.shared_args());
    let status = validate
        .arg("validate")
        .arg(&component)
        .status()
        .context("running sandwit validate")?;
    eprintln!(
        "sandwit: compiling and checking took {:.1} s (the compiled code is cached by the component's hash: a host on this machine loads it again in milliseconds)",
        started.elapsed().as_secs_f64()
    );
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_ids() {
        assert!(valid_id("dice") && valid_id("my-plugin_2"));
        assert!(!valid_id("") && !valid_id("Dice") && !valid_id("2x") && !valid_id("../x"));
    }
}
