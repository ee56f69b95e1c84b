//! Python plugin projects: a `plugin.py` with a module-level `NekroPlugin`
//! (the Python SDK, sdk/python), built by the pinned componentize-py in the
//! project's `.venv` against the 0.2 world.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::files::{Embedded, WIT_DEPS, project_name, run_step, write_all};

/// The componentize-py a Python project is built with.
const COMPONENTIZE_PY_VERSION: &str = "0.25.1";
/// The pytest a Python project's tests run with.
const PYTEST_VERSION: &str = "9.2.0";
/// The world a Python plugin is built against: the SDK's, which is
/// `sandwit:plugin/sandbox-method@0.2.0` and `wasi:http/outgoing-handler`.
const PYTHON_WORLD: &str = "sandwit:python-sdk/plugin@0.2.0";

/// The Python SDK, the package `sandwit_plugin`.
const PYTHON_SDK: &[Embedded] = &[
    (
        "__init__.py",
        include_str!("../../../sdk/python/sandwit_plugin/__init__.py"),
    ),
    (
        "_aio.py",
        include_str!("../../../sdk/python/sandwit_plugin/_aio.py"),
    ),
    (
        "_component.py",
        include_str!("../../../sdk/python/sandwit_plugin/_component.py"),
    ),
    (
        "_ctx.py",
        include_str!("../../../sdk/python/sandwit_plugin/_ctx.py"),
    ),
    (
        "_errors.py",
        include_str!("../../../sdk/python/sandwit_plugin/_errors.py"),
    ),
    (
        "_host.py",
        include_str!("../../../sdk/python/sandwit_plugin/_host.py"),
    ),
    (
        "_http.py",
        include_str!("../../../sdk/python/sandwit_plugin/_http.py"),
    ),
    (
        "_plugin.py",
        include_str!("../../../sdk/python/sandwit_plugin/_plugin.py"),
    ),
    (
        "_schema.py",
        include_str!("../../../sdk/python/sandwit_plugin/_schema.py"),
    ),
    (
        "_values.py",
        include_str!("../../../sdk/python/sandwit_plugin/_values.py"),
    ),
    (
        "app.py",
        include_str!("../../../sdk/python/sandwit_plugin/app.py"),
    ),
    (
        "testing.py",
        include_str!("../../../sdk/python/sandwit_plugin/testing.py"),
    ),
];

/// Nekro Agent's import paths and the part of pydantic its plugins' config
/// classes use (sdk/python/compat), beside the SDK: a Nekro plugin builds
/// unchanged.
const PYTHON_COMPAT: &[Embedded] = &[
    (
        "nekro_agent/__init__.py",
        include_str!("../../../sdk/python/compat/nekro_agent/__init__.py"),
    ),
    (
        "nekro_agent/api/__init__.py",
        include_str!("../../../sdk/python/compat/nekro_agent/api/__init__.py"),
    ),
    (
        "nekro_agent/api/core.py",
        include_str!("../../../sdk/python/compat/nekro_agent/api/core.py"),
    ),
    (
        "nekro_agent/api/i18n.py",
        include_str!("../../../sdk/python/compat/nekro_agent/api/i18n.py"),
    ),
    (
        "nekro_agent/api/message.py",
        include_str!("../../../sdk/python/compat/nekro_agent/api/message.py"),
    ),
    (
        "nekro_agent/api/plugin.py",
        include_str!("../../../sdk/python/compat/nekro_agent/api/plugin.py"),
    ),
    (
        "nekro_agent/api/schemas.py",
        include_str!("../../../sdk/python/compat/nekro_agent/api/schemas.py"),
    ),
    (
        "pydantic/__init__.py",
        include_str!("../../../sdk/python/compat/pydantic/__init__.py"),
    ),
];

/// The Python SDK's world (sdk/python/wit/world.wit): the 0.2 plugin world
/// and `wasi:http/outgoing-handler`.
const WORLD_WIT: &str = include_str!("../../../sdk/python/wit/world.wit");

pub(super) const TEMPLATE: &[Embedded] = &[
    (
        "plugin.py",
        include_str!("../../templates/python/plugin.py"),
    ),
    (
        "tests/test_plugin.py",
        include_str!("../../templates/python/tests/test_plugin.py"),
    ),
    (
        "conftest.py",
        include_str!("../../templates/python/conftest.py"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/python/.gitignore"),
    ),
];

pub(super) fn build(dir: &Path, componentize_py: Option<PathBuf>) -> anyhow::Result<PathBuf> {
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
    write_all(&work.join("wit"), WIT_DEPS, str::to_string)?;
    std::fs::write(work.join("wit/world.wit"), WORLD_WIT)?;
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
        let mut embedded: Vec<(String, String)> = WIT_DEPS
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .chain([("world.wit".to_string(), WORLD_WIT.to_string())])
            .collect();
        embedded.sort();
        assert_eq!(files, embedded);
    }
}
