//! JavaScript and TypeScript plugin projects: a `package.json` beside a
//! `plugin.ts` or `plugin.js` that exports a `Plugin` (the JavaScript SDK,
//! sdk/js), built with the pinned tools of sdk/js/tools/package.json:
//!
//! 1. the SDK this binary carries is written to `.sandwit/sdk` (the
//!    project's `sandwit-plugin` dependency is `file:.sandwit/sdk`);
//! 2. for TypeScript, `tsc --noEmit` checks the types, and the JSON Schemas
//!    of the entry module's exported types are generated
//!    (sdk/js/tools/schemas.cjs, ts-json-schema-generator), for methods
//!    that name their parameters' type;
//! 3. esbuild bundles the entry, the SDK's component glue and the npm
//!    packages the plugin imports into one ES module, with a source map
//!    the SDK reads to name the author's lines in an error;
//! 4. componentize-js builds the component of the world
//!    `sandwit:js-sdk/plugin@0.2.0` (SpiderMonkey, pre-initialised with the
//!    module evaluated), without the `fetch-event` export.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use super::files::{Embedded, WIT_DEPS, project_name, run_step, write_all};

/// The pinned tools, as npm reads them (sdk/js/tools/package.json).
const TOOLS_MANIFEST: &str = include_str!("../../../sdk/js/tools/package.json");
/// Writes the JSON Schemas of a TypeScript module's exported types.
const SCHEMAS_SCRIPT: &str = include_str!("../../../sdk/js/tools/schemas.cjs");
/// The tools a JavaScript project needs; a TypeScript project needs all.
const JS_TOOLS: &[&str] = &[
    "@bytecodealliance/componentize-js",
    "@bytecodealliance/jco",
    "@bytecodealliance/preview2-shim",
    "esbuild",
];
/// The world a JavaScript plugin is built against.
const WORLD: &str = "sandwit:js-sdk/plugin@0.2.0";
/// The JavaScript SDK's world (sdk/js/wit/world.wit).
const WORLD_WIT: &str = include_str!("../../../sdk/js/wit/world.wit");
/// The oldest Node.js the tools run on.
const NODE_MAJOR: u32 = 20;
/// Node.js, as found on PATH.
const NODE: &str = "node";

/// The JavaScript SDK, the package `sandwit-plugin`.
const SDK: &[Embedded] = &[
    ("package.json", include_str!("../../../sdk/js/package.json")),
    ("README.md", include_str!("../../../sdk/js/README.md")),
    ("index.d.ts", include_str!("../../../sdk/js/index.d.ts")),
    ("testing.d.ts", include_str!("../../../sdk/js/testing.d.ts")),
    (
        "src/component.js",
        include_str!("../../../sdk/js/src/component.js"),
    ),
    (
        "src/errors.js",
        include_str!("../../../sdk/js/src/errors.js"),
    ),
    (
        "src/grants.js",
        include_str!("../../../sdk/js/src/grants.js"),
    ),
    ("src/host.js", include_str!("../../../sdk/js/src/host.js")),
    ("src/index.js", include_str!("../../../sdk/js/src/index.js")),
    (
        "src/testing.js",
        include_str!("../../../sdk/js/src/testing.js"),
    ),
    (
        "src/values.js",
        include_str!("../../../sdk/js/src/values.js"),
    ),
];

pub(super) const JS_TEMPLATE: &[Embedded] = &[
    ("plugin.js", include_str!("../../templates/js/plugin.js")),
    (
        "tests/plugin.test.js",
        include_str!("../../templates/js/tests/plugin.test.js"),
    ),
    (".gitignore", include_str!("../../templates/js/.gitignore")),
];

pub(super) const TS_TEMPLATE: &[Embedded] = &[
    ("plugin.ts", include_str!("../../templates/ts/plugin.ts")),
    (
        "tests/plugin.test.ts",
        include_str!("../../templates/ts/tests/plugin.test.ts"),
    ),
    (
        "tsconfig.json",
        include_str!("../../templates/ts/tsconfig.json"),
    ),
    (".gitignore", include_str!("../../templates/js/.gitignore")),
];

/// The pinned tools: name -> exact version.
fn pinned() -> Map<String, Value> {
    let manifest: Value = serde_json::from_str(TOOLS_MANIFEST).expect("sdk/js/tools/package.json");
    manifest["devDependencies"]
        .as_object()
        .expect("devDependencies")
        .clone()
}

/// The pinned tools a project needs, (name, exact version): a JavaScript
/// project's ([`JS_TOOLS`]), or all for TypeScript.
fn tools_for(typescript: bool) -> Vec<(String, String)> {
    pinned()
        .into_iter()
        .filter(|(name, _)| typescript || JS_TOOLS.contains(&name.as_str()))
        .map(|(name, v)| (name, v.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// Writes a new project's `package.json`: the SDK as a file dependency on
/// `.sandwit/sdk` (written there now, and again by each build), and the
/// pinned tools the language needs.
pub(super) fn new_project(dir: &Path, id: &str, typescript: bool) -> anyhow::Result<()> {
    let test = if typescript {
        "node --import tsx --test tests/*.test.ts"
    } else {
        "node --test tests/"
    };
    // Written in the order npm writes a package.json (serde_json's maps sort).
    let tools: Vec<String> = tools_for(typescript)
        .iter()
        .map(|(name, version)| format!("    {name:?}: {version:?}"))
        .collect();
    std::fs::write(
        dir.join("package.json"),
        format!(
            "{{\n  \"name\": {id:?},\n  \"version\": \"0.1.0\",\n  \"private\": true,\n  \"type\": \"module\",\n  \
             \"scripts\": {{\n    \"build\": \"sandwit plugin build .\",\n    \"test\": {test:?}\n  }},\n  \
             \"dependencies\": {{\n    \"sandwit-plugin\": \"file:.sandwit/sdk\"\n  }},\n  \
             \"devDependencies\": {{\n{}\n  }}\n}}\n",
            tools.join(",\n")
        ),
    )?;
    write_sdk(dir)
}

/// The SDK this binary carries, in `.sandwit/sdk`, replacing what is there.
fn write_sdk(dir: &Path) -> anyhow::Result<()> {
    let sdk = dir.join(".sandwit/sdk");
    if sdk.exists() {
        std::fs::remove_dir_all(&sdk).with_context(|| format!("removing {}", sdk.display()))?;
    }
    write_all(&sdk, SDK, str::to_string)
}

/// `node_modules/sandwit-plugin` as npm links the file dependency, for a
/// project built with shared tools (never installed): tsc, tsx and Node's
/// test runner then resolve the SDK as in an installed project.
fn link_sdk(dir: &Path) -> anyhow::Result<()> {
    let link = dir.join("node_modules/sandwit-plugin");
    if link.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir.join("node_modules"))?;
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("../.sandwit/sdk", &link)
        .with_context(|| format!("linking {} to .sandwit/sdk", link.display()))
}

/// Checks that [`NODE`] runs and is at least [`NODE_MAJOR`].
fn check_node() -> anyhow::Result<()> {
    let out = Command::new(NODE).arg("--version").output().map_err(|e| {
        anyhow::anyhow!(
            "building a JavaScript plugin needs Node.js {NODE_MAJOR} or newer as `node` on PATH ({e})"
        )
    })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < NODE_MAJOR {
        bail!(
            "node is {version:?}: building a JavaScript plugin needs Node.js {NODE_MAJOR} or newer"
        );
    }
    Ok(())
}

/// The installed version of the npm package `name` under `modules`.
fn installed(modules: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(modules.join(name).join("package.json")).ok()?;
    let manifest: Value = serde_json::from_str(&text).ok()?;
    manifest["version"].as_str().map(str::to_string)
}

/// The `node_modules` with the pinned tools: `tools`'s (a folder with a
/// `node_modules`, shared by projects) when given, else the project's,
/// installed with npm when a tool is missing. A tool at another version
/// than this binary pins is refused.
fn tools_dir(dir: &Path, tools: Option<PathBuf>, typescript: bool) -> anyhow::Result<PathBuf> {
    let needed = tools_for(typescript);
    let modules = match tools {
        Some(tools) => tools.join("node_modules"),
        None => {
            let modules = dir.join("node_modules");
            let missing = needed
                .iter()
                .any(|(n, v)| installed(&modules, n).as_ref() != Some(v));
            if missing || !modules.join("sandwit-plugin").exists() {
                eprintln!(
                    "sandwit: installing the pinned build tools into {} (npm install; once per project, a few hundred MB)",
                    modules.display()
                );
                run_step(
                    Command::new("npm").current_dir(dir).args([
                        "install",
                        "--no-audit",
                        "--no-fund",
                        "--loglevel=error",
                    ]),
                    "npm install",
                )?;
            }
            modules
        }
    };
    for (name, version) in &needed {
        match installed(&modules, name) {
            Some(v) if &v == version => {}
            found => bail!(
                "{} has {name} {}, and this sandwit builds with {version}: run `npm install` in the project (its package.json pins the versions)",
                modules.display(),
                found.map_or("missing".to_string(), |v| format!("at {v}")),
            ),
        }
    }
    Ok(modules)
}

/// Builds the project in `dir` to `target/<dir name>.wasm`.
pub(super) fn build(dir: &Path, tools: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let (entry, typescript) = if dir.join("plugin.ts").exists() {
        ("plugin.ts", true)
    } else if dir.join("plugin.js").exists() {
        ("plugin.js", false)
    } else {
        bail!(
            "{} has a package.json but no plugin.ts or plugin.js: the entry module that exports the plugin",
            dir.display()
        );
    };
    check_node()?;
    write_sdk(dir)?;
    let modules = std::fs::canonicalize(tools_dir(dir, tools, typescript)?)?;
    link_sdk(dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let work = dir.join("target/sandwit");
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    let wit = work.join("wit");
    write_all(&wit, WIT_DEPS, str::to_string)?;
    std::fs::write(wit.join("world.wit"), WORLD_WIT)?;

    let schemas = if typescript {
        typecheck(&dir, &modules)?;
        let script = work.join("schemas.cjs");
        std::fs::write(&script, SCHEMAS_SCRIPT)?;
        run_step(
            Command::new(NODE)
                .current_dir(&dir)
                .arg(&script)
                .arg(&modules)
                .arg(entry)
                .arg(work.join("schemas.json")),
            "generating the JSON Schemas of plugin.ts's exported types",
        )?;
        "import schemas from './schemas.json';\nglobalThis.__sandwitTypeSchemas = schemas.definitions;\n"
    } else {
        ""
    };
    // The entry module the component evaluates: the author's module, the
    // SDK's glue, and the world's two exports.
    std::fs::write(
        work.join("entry.js"),
        format!(
            "import * as app from '../../{entry}';\n\
             import {{ serve }} from '../../.sandwit/sdk/src/component.js';\n\
             {schemas}\
             const pick = (module) => module.plugin ?? module.default;\n\
             const exported = serve(pick(app));\n\
             export const plugin = exported.plugin;\n\
             export const lifecycle = exported.lifecycle;\n"
        ),
    )?;
    run_step(
        // A native executable, or a Node script with its shebang where npm
        // did not run esbuild's install script.
        Command::new(modules.join("esbuild/bin/esbuild"))
            .current_dir(&dir)
            .arg("./target/sandwit/entry.js")
            .args([
                "--bundle",
                "--format=esm",
                "--platform=neutral",
                "--target=es2022",
                "--main-fields=module,main",
                "--external:sandwit:*",
                "--external:wasi:*",
                "--sourcemap=external",
                "--sources-content=false",
                "--log-level=warning",
                "--outfile=target/sandwit/bundle.js",
            ])
            .arg(format!(
                "--alias:sandwit-plugin={}",
                dir.join(".sandwit/sdk/src/index.js").display()
            )),
        "esbuild (bundling the plugin)",
    )?;
    append_source_map(&work)?;

    let out = dir
        .join("target")
        .join(format!("{}.wasm", project_name(&dir)));
    eprintln!(
        "sandwit: componentize-js: building the component (SpiderMonkey, pre-initialised with the module; tens of seconds)"
    );
    run_step(
        Command::new(NODE)
            // The bundle's path inside the component is `component.js`.
            .current_dir(&work)
            .arg(modules.join("@bytecodealliance/componentize-js/src/cli.js"))
            .arg("component.js")
            .arg("--wit")
            .arg(&wit)
            .args(["--world-name", WORLD, "--disable", "fetch-event", "--out"])
            .arg(&out),
        "componentize-js",
    )?;
    Ok(out)
}

/// `tsc --noEmit` over the project (its tsconfig.json); the SDK's types
/// resolve through `node_modules/sandwit-plugin` ([`link_sdk`]).
fn typecheck(dir: &Path, modules: &Path) -> anyhow::Result<()> {
    if !dir.join("tsconfig.json").exists() {
        bail!(
            "{} has a plugin.ts but no tsconfig.json (`sandwit plugin new NAME --lang ts` writes one)",
            dir.display()
        );
    }
    run_step(
        Command::new(NODE)
            .current_dir(dir)
            .arg(modules.join("typescript/bin/tsc"))
            .args(["--noEmit", "-p", "."]),
        "tsc --noEmit (the plugin's type errors are above)",
    )
}

/// Appends the bundle's source map (its sources and mappings) to the bundle
/// as `globalThis.__sandwitSourceMap`, as `component.js`: the SDK maps an
/// exception's frames through it. Appending leaves every line of the bundle
/// where the map says it is.
fn append_source_map(work: &Path) -> anyhow::Result<()> {
    let bundle = std::fs::read_to_string(work.join("bundle.js"))?;
    let map: Value = serde_json::from_str(&std::fs::read_to_string(work.join("bundle.js.map"))?)?;
    let kept = json!({ "sources": map["sources"], "mappings": map["mappings"] });
    let body = bundle
        .lines()
        .filter(|line| !line.starts_with("//# sourceMappingURL="))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(
        work.join("component.js"),
        format!("{body}\nglobalThis.__sandwitSourceMap = {kept};\n"),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the SDK package is in the binary.
    #[test]
    fn the_embedded_sdk_is_the_whole_package() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/js");
        let mut files: Vec<String> = ["package.json", "README.md", "index.d.ts", "testing.d.ts"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for entry in std::fs::read_dir(root.join("src")).unwrap().flatten() {
            files.push(format!("src/{}", entry.file_name().to_string_lossy()));
        }
        files.sort();
        let mut embedded: Vec<String> = SDK.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(files, embedded);
        for (name, text) in SDK {
            assert_eq!(
                std::fs::read_to_string(root.join(name)).unwrap(),
                *text,
                "{name}"
            );
        }
    }

    /// The tools are pinned to exact versions, a JavaScript project's are
    /// among them, and the examples pin the same.
    #[test]
    fn the_tools_are_pinned_exactly() {
        let tools = pinned();
        for name in JS_TOOLS {
            assert!(tools.contains_key(*name), "{name}");
        }
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/js/examples");
        for example in std::fs::read_dir(examples).unwrap().flatten() {
            // Each example is a folder (beside them, a .gitignore).
            if !example.path().is_dir() {
                continue;
            }
            let text = std::fs::read_to_string(example.path().join("package.json")).unwrap();
            let manifest: Value = serde_json::from_str(&text).unwrap();
            for (name, version) in manifest["devDependencies"].as_object().unwrap() {
                assert_eq!(
                    Some(version),
                    tools.get(name),
                    "{:?} {name}",
                    example.path()
                );
            }
        }
        for (name, version) in &tools {
            let v = version.as_str().unwrap();
            assert!(
                v.split('.').count() == 3 && v.chars().all(|c| c.is_ascii_digit() || c == '.'),
                "{name} {v}"
            );
        }
    }
}
