//! Builds every guest component (example plugins and test fixtures) with a
//! nested `cargo build --target wasm32-wasip2`, into its own target directory
//! so it does not wait on the outer build's lock, builds the CPython sandbox
//! with `interpreter/build` and the example Python plugins with
//! `sdk/python/build-examples`, and writes their paths as constants.

use std::path::{Path, PathBuf};
use std::process::Command;

/// (constant, package, file stem): cdylibs are named after the crate with `_`.
const COMPONENTS: &[(&str, &str, &str)] = &[
    ("CALC", "calc", "calc"),
    ("KNOWLEDGE", "knowledge", "knowledge"),
    ("MESSENGER", "messenger", "messenger"),
    ("IMAGEGEN", "imagegen", "imagegen"),
    ("NOTES", "notes", "notes"),
    ("WEATHER", "weather", "weather"),
    ("ECHO", "echo", "echo"),
    ("SERVICES", "services", "services"),
    ("HOSTILE", "hostile", "hostile"),
    ("IMPOSTOR", "impostor", "impostor"),
    ("BAD_MANIFEST", "bad-manifest", "bad_manifest"),
    ("OTHER_WORLD", "other-world", "other-world"),
    ("SPIN_DESCRIBE", "spin-describe", "spin_describe"),
    ("LIFECYCLE", "lifecycle", "lifecycle"),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().parent().unwrap();
    for dir in [
        "wit",
        "value",
        "sdk/rust",
        "plugins",
        "tests/fixtures",
        "interpreter/app.py",
        "interpreter/crossing.py",
        "interpreter/methods.c",
        "interpreter/build",
        "tools/embed-wit",
        "scripts/scientific",
        "sdk/python/sandwit_plugin",
        "sdk/python/wit",
        "sdk/python/examples",
        "sdk/python/build-examples",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let target_dir = root.join("target").join("guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "guest"])
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    for (_, package, _) in COMPONENTS {
        cmd.args(["-p", package]);
    }
    let status = cmd
        .status()
        .expect("running cargo for the guest components");
    assert!(
        status.success(),
        "building the guest components failed; is the target installed? \
         (rustup target add wasm32-wasip2)"
    );
    let out = target_dir.join("wasm32-wasip2").join("guest");
    let mut code = String::new();
    for (name, package, stem) in COMPONENTS {
        let path = out.join(format!("{stem}.wasm"));
        assert!(path.exists(), "{} was not built", path.display());
        code.push_str(&format!(
            "/// The `{package}` component.\npub const {name}: &str = {:?};\n",
            path.display().to_string()
        ));
    }
    let status = Command::new("bash")
        .arg(root.join("interpreter/build"))
        .status()
        .expect("running interpreter/build");
    assert!(status.success(), "building the Python sandbox failed");
    let python = root.join("target/python/sandbox.wasm");
    code.push_str(&format!(
        "/// The CPython sandbox component.\npub const PYTHON: &str = {:?};\n",
        python.display().to_string()
    ));
    // The scientific interpreter: downloaded once per machine, unpacked
    // into target/scientific.
    let output = Command::new("bash")
        .arg(root.join("scripts/scientific"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("running scripts/scientific");
    assert!(
        output.status.success(),
        "installing the scientific interpreter failed"
    );
    let dir = root.join(String::from_utf8(output.stdout).unwrap().trim());
    code.push_str(&format!(
        "/// The scientific interpreter's directory (scripts/scientific).\npub const SCIENTIFIC: &str = {:?};\n",
        dir.display().to_string()
    ));
    let status = Command::new("bash")
        .arg(root.join("sdk/python/build-examples"))
        .status()
        .expect("running sdk/python/build-examples");
    assert!(
        status.success(),
        "building the example Python plugins failed"
    );
    for (name, stem) in [("DICE", "dice"), ("MEMO", "memo"), ("FORECAST", "forecast")] {
        let path = root
            .join("target/python-plugins")
            .join(format!("{stem}.wasm"));
        code.push_str(&format!(
            "/// The `{stem}` example Python plugin.\npub const {name}: &str = {:?};\n",
            path.display().to_string()
        ));
    }
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("artifacts.rs");
    std::fs::write(dest, code).unwrap();
}
