//! `sandwit keygen`, `sign`, `publish` and `install` against a registry on
//! loopback, and `sandwit run --plugins DIR` on what they installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sandwit::lock::LockFile;
use sandwit::signing::{PublicKey, Signature, digest_of};

use crate::common::{artifacts, assert_succeeded, cache_dir, tempdir};
use crate::registry_fake::{self, Registry};

/// `sandwit ARGS` with the shared cache, no policy unless given, no proxy.
fn sandwit(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandwit"));
    cmd.arg("--cache-dir").arg(cache_dir()).args(args);
    for var in [
        "SANDWIT_POLICY",
        "SANDWIT_REGISTRY_TOKEN",
        "ALL_PROXY",
        "all_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A new key pair in `dir`: the key file's path and the public key.
fn keygen(dir: &Path, name: &str) -> (String, String) {
    let key = dir.join(name);
    let out = sandwit(&["keygen", "--out", key.to_str().unwrap()], &[]);
    assert_succeeded(&out);
    let public = text(&out.stdout).trim().to_string();
    PublicKey::parse(&public).unwrap();
    (key.to_str().unwrap().to_string(), public)
}

/// Publishes `plugin` signed with `key`, the token in the environment.
fn publish(registry: &Registry, plugin: &str, key: &str, extra: &[&str]) -> Output {
    let mut args = vec!["publish", plugin, "--registry", &registry.url, "--key", key];
    args.extend(extra);
    sandwit(&args, &[("SANDWIT_REGISTRY_TOKEN", &registry.token)])
}

fn install(registry: &Registry, plugin: &str, dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "install",
        plugin,
        "--registry",
        &registry.url,
        "--dir",
        dir.to_str().unwrap(),
    ];
    args.extend(extra);
    sandwit(&args, &[])
}

/// A registry with calc 0.1.0 published, signed by a new key: the registry,
/// the key file and the public key.
fn with_calc(test: &str) -> (Registry, PathBuf, String, String) {
    let dir = tempdir("registry-client", test);
    let registry = registry_fake::start();
    let (key, public) = keygen(&dir, "publisher.key");
    let out = publish(&registry, artifacts::CALC, &key, &[]);
    assert_succeeded(&out);
    (registry, dir, key, public)
}

#[test]
fn keygen_writes_a_private_key_and_never_replaces_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir("registry-client", "keygen");
    let (key, public) = keygen(&dir, "k");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let pub_file = std::fs::read_to_string(format!("{key}.pub")).unwrap();
    assert_eq!(pub_file.trim(), public);
    // A second keygen to the same file is refused; the key is kept.
    let before = std::fs::read(&key).unwrap();
    let out = sandwit(&["keygen", "--out", &key], &[]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("File exists"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&key).unwrap(), before);
    // `sandwit sign` prints a signature of the plugin's digest by the key.
    let out = sandwit(&["sign", artifacts::CALC, "--key", &key], &[]);
    assert_succeeded(&out);
    let signature = Signature::parse(&text(&out.stdout)).unwrap();
    let digest = digest_of(&std::fs::read(artifacts::CALC).unwrap());
    PublicKey::parse(&public)
        .unwrap()
        .verify_digest(&digest, &signature)
        .unwrap();
}

#[test]
fn publish_prints_the_id_version_and_digest_and_refuses_a_second_upload() {
    let dir = tempdir("registry-client", "publish");
    let registry = registry_fake::start();
    let (key, public) = keygen(&dir, "k");
    let out = publish(&registry, artifacts::CALC, &key, &[]);
    assert_succeeded(&out);
    let stdout = text(&out.stdout);
    let digest = digest_of(&std::fs::read(artifacts::CALC).unwrap());
    assert!(stdout.contains("published calc 0.1.0"), "{stdout}");
    assert!(stdout.contains(&format!("digest: {digest}")), "{stdout}");
    assert!(stdout.contains(&format!("signer: {public}")), "{stdout}");
    // The token is never echoed.
    assert!(!text(&out.stderr).contains(&registry.token));
    assert!(!stdout.contains(&registry.token));

    // Versions are immutable.
    let out = publish(&registry, artifacts::CALC, &key, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("publishing calc 0.1.0") && stderr.contains("already published"),
        "{stderr}"
    );
    assert!(stderr.contains("(409)"), "{stderr}");
}

#[test]
fn publish_refuses_a_bad_token_and_a_plugin_that_fails_the_check() {
    let dir = tempdir("registry-client", "publish-refused");
    let registry = registry_fake::start();
    let (key, _) = keygen(&dir, "k");
    let out = sandwit(
        &[
            "publish",
            artifacts::CALC,
            "--registry",
            &registry.url,
            "--key",
            &key,
            "--token",
            "swr_wrong",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("did not accept the token (401)"),
        "{stderr}"
    );
    assert!(!stderr.contains("swr_wrong"), "{stderr}");

    // Checked here first: nothing is uploaded, the problems are listed as
    // `sandwit validate` lists them.
    let out = publish(&registry, artifacts::BAD_MANIFEST, &key, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("rejected, 7 problem(s)"), "{stdout}");
    assert!(text(&out.stderr).contains("was not published"));
    assert_eq!(registry.published(), 0);

    // Unchecked here, the registry's check refuses it with its report,
    // printed the same way.
    let out = publish(
        &registry,
        artifacts::BAD_MANIFEST,
        &key,
        &["--no-local-check"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("rejected"), "{stdout}");
    assert!(stdout.contains("rejected, 7 problem(s)"), "{stdout}");
    assert!(stdout.contains("reserved for the host"), "{stdout}");
    assert!(stdout.contains(artifacts::BAD_MANIFEST), "{stdout}");
    assert_eq!(registry.published(), 0);
}

#[test]
fn install_checks_the_signature_and_records_the_plugin_in_the_lock() {
    let (registry, dir, _, public) = with_calc("install");
    let plugins = dir.join("plugins");
    let out = install(&registry, "calc", &plugins, &["--trust", &public]);
    assert_succeeded(&out);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("installed calc 0.1.0"), "{stdout}");
    assert!(
        stdout.contains(&format!("signed by {public} (trusted)")),
        "{stdout}"
    );
    let bytes = std::fs::read(artifacts::CALC).unwrap();
    assert_eq!(std::fs::read(plugins.join("calc.wasm")).unwrap(), bytes);
    let lock = LockFile::read(&plugins).unwrap().unwrap();
    let entry = lock.by_file("calc.wasm").unwrap();
    assert_eq!(
        (entry.id.as_str(), entry.version.as_str()),
        ("calc", "0.1.0")
    );
    assert_eq!(entry.digest, digest_of(&bytes));
    assert_eq!(entry.registry, registry.url);
    assert_eq!(entry.signer.to_string(), public);
    entry
        .check_signature(&[PublicKey::parse(&public).unwrap()])
        .unwrap();

    // Trusted through the policy instead; without any trusted key it
    // installs, saying the signature was not checked.
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[registry]\ntrusted_keys = [\"{public}\"]\n"),
    )
    .unwrap();
    let out = install(
        &registry,
        "calc@0.1.0",
        &dir.join("by-policy"),
        &["--policy", policy.to_str().unwrap()],
    );
    assert_succeeded(&out);
    assert!(text(&out.stdout).contains("(trusted)"));
    // Closed by default: with no trusted key nothing is installed...
    let out = install(&registry, "calc", &dir.join("untrusted"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no key is trusted to sign it"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("untrusted").join("calc.wasm").exists());
    // ...unless asked for, and then the command says what it did not check.
    let out = install(&registry, "calc", &dir.join("unchecked"), &["--no-verify"]);
    assert_succeeded(&out);
    assert!(
        text(&out.stderr).contains("signature of calc 0.1.0 was NOT checked"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn install_refuses_tampered_bytes_a_bad_signature_and_an_untrusted_signer() {
    let (registry, dir, _, public) = with_calc("install-refused");
    let plugins = dir.join("plugins");
    let nothing_written = |plugins: &Path| {
        assert!(!plugins.join("calc.wasm").exists());
        assert!(!LockFile::path(plugins).exists());
    };

    // Another key's signature.
    let (_, stranger) = keygen(&dir, "stranger.key");
    let out = install(&registry, "calc", &plugins, &["--trust", &stranger]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("signed by {public}, which is not a trusted key")),
        "{stderr}"
    );
    nothing_written(&plugins);

    // The blob's bytes changed under the digest the registry lists.
    let echo = std::fs::read(artifacts::ECHO).unwrap();
    registry.tamper_blob("calc", "0.1.0", &echo);
    let out = install(&registry, "calc", &plugins, &["--trust", &public]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "the bytes downloaded have the digest {}",
            digest_of(&echo)
        )),
        "{stderr}"
    );
    nothing_written(&plugins);

    // The listing substituted, digest and all: the publisher's signature
    // does not cover it.
    registry.substitute("calc", "0.1.0", &echo);
    let out = install(&registry, "calc", &plugins, &["--trust", &public]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("does not verify with the key"), "{stderr}");
    nothing_written(&plugins);
}

/// A registry that lists another component its publisher signed (a
/// trusted key's signature, a matching digest) under a plugin's id and
/// version: the install is refused, naming the plugin and the id and
/// version asked for and found, and the working plugin installed before is
/// left byte for byte, its lock entry too, with no file left behind.
#[test]
fn install_refuses_another_signed_component_and_keeps_the_working_one() {
    let (registry, dir, key, public) = with_calc("install-other");
    assert_succeeded(&publish(&registry, artifacts::ECHO, &key, &[]));
    let plugins = dir.join("plugins");
    assert_succeeded(&install(&registry, "calc", &plugins, &["--trust", &public]));
    let calc = std::fs::read(plugins.join("calc.wasm")).unwrap();
    let lock = std::fs::read(LockFile::path(&plugins)).unwrap();
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&plugins)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = files();

    registry.relist("calc", "0.1.0", "echo");
    let out = install(&registry, "calc", &plugins, &["--trust", &public]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let echo = sandwit(&["inspect", "--json", artifacts::ECHO], &[]);
    let echo: serde_json::Value = serde_json::from_slice(&echo.stdout).unwrap();
    let echo_version = echo["manifest"]["version"].as_str().unwrap();
    assert!(
        stderr.contains("calc 0.1.0")
            && stderr.contains(&format!("the component it served is echo {echo_version}")),
        "{stderr}"
    );
    assert_eq!(std::fs::read(plugins.join("calc.wasm")).unwrap(), calc);
    assert_eq!(std::fs::read(LockFile::path(&plugins)).unwrap(), lock);
    assert_eq!(files(), before);
}

#[test]
fn install_skips_yanked_versions_unless_asked_for() {
    let (registry, dir, _, public) = with_calc("yanked");
    registry.yank("calc", "0.1.0");
    let plugins = dir.join("plugins");
    let out = install(&registry, "calc", &plugins, &["--trust", &public]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no version that is not yanked"));
    let out = install(&registry, "calc@0.1.0", &plugins, &["--trust", &public]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("calc 0.1.0 is yanked"));
    let out = install(
        &registry,
        "calc@0.1.0",
        &plugins,
        &["--trust", &public, "--allow-yanked"],
    );
    assert_succeeded(&out);
    assert!(plugins.join("calc.wasm").exists());
    // Bad names are refused before any request.
    let out = install(&registry, "Calc", &plugins, &[]);
    assert!(text(&out.stderr).contains("is not a plugin id"));
}

#[test]
fn run_refuses_a_changed_installed_file_and_unsigned_plugins_when_required() {
    let (registry, dir, _, public) = with_calc("run");
    let plugins = dir.join("plugins");
    assert_succeeded(&install(&registry, "calc", &plugins, &["--trust", &public]));
    let dir_arg = plugins.to_str().unwrap();
    let python = ["--python", artifacts::PYTHON];
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--plugins", dir_arg];
        args.extend(python);
        args.extend(extra);
        args.extend(["-c", "print(calculate_sum(1, 2))"]);
        sandwit(&args, &[])
    };
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[registry]\ntrusted_keys = [\"{public}\"]\nrequire_signature = true\n"),
    )
    .unwrap();
    let policy = ["--policy", policy.to_str().unwrap()];

    // As installed, it runs, with signatures required too.
    let out = run(&policy);
    assert_succeeded(&out);
    assert!(
        text(&out.stdout).starts_with("3\n"),
        "{}",
        text(&out.stdout)
    );

    // An unsigned plugin in the folder is refused when signatures are
    // required, and loads when they are not.
    std::fs::copy(artifacts::ECHO, plugins.join("echo.wasm")).unwrap();
    let out = run(&policy);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("echo.wasm: the policy requires a signature from a trusted key")
            && stderr.contains("it is not listed in"),
        "{stderr}"
    );
    assert_succeeded(&run(&[]));
    std::fs::remove_file(plugins.join("echo.wasm")).unwrap();

    // The installed file changed: refused, policy or not, naming both
    // digests.
    let calc = digest_of(&std::fs::read(artifacts::CALC).unwrap());
    let echo = std::fs::read(artifacts::ECHO).unwrap();
    std::fs::write(plugins.join("calc.wasm"), &echo).unwrap();
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("plugin `calc`")
            && stderr.contains(&format!(
                "its bytes have the digest {}, not the {calc} recorded in",
                digest_of(&echo)
            )),
        "{stderr}"
    );
}

#[test]
fn the_registry_commands_have_help() {
    for sub in ["keygen", "sign", "publish", "install"] {
        let out = sandwit(&[sub, "--help"], &[]);
        assert!(out.status.success(), "{sub} --help");
        assert!(text(&out.stdout).contains("Usage: sandwit"), "{sub}");
    }
}

/// Plain http:// to a host that is not loopback is closed by default: the
/// install is refused before any request, and `--allow-http` opens it.
/// (`0.0.0.0` is not a loopback address, yet connecting to it reaches this
/// machine, so the test stays on loopback.)
#[test]
fn install_refuses_plain_http_to_a_host_not_loopback_unless_allowed() {
    let (registry, dir, _, public) = with_calc("plain-http");
    let port = registry.url.rsplit(':').next().unwrap();
    let remote = format!("http://0.0.0.0:{port}");
    let plugins = dir.join("plugins");
    let install_from = |extra: &[&str]| {
        let mut args = vec![
            "install",
            "calc",
            "--registry",
            &remote,
            "--dir",
            plugins.to_str().unwrap(),
            "--trust",
            &public,
        ];
        args.extend(extra);
        sandwit(&args, &[])
    };
    let out = install_from(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("plain http:// on a host that is not loopback")
            && stderr.contains("--allow-http"),
        "{stderr}"
    );
    assert!(!plugins.join("calc.wasm").exists());
    let out = install_from(&["--allow-http"]);
    assert_succeeded(&out);
    assert!(plugins.join("calc.wasm").exists());
    // Loopback needs no flag.
    let out = install(&registry, "calc", &dir.join("local"), &["--trust", &public]);
    assert_succeeded(&out);
}
