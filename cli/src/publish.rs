//! `sandwit sign` and `sandwit publish`: a plugin signed with the
//! publisher's key, and uploaded to a registry.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use sandwit::MAX_COMPONENT_BYTES;
use sandwit::signing::{SigningKey, digest_of};
use serde::Deserialize;
use serde_json::json;

use crate::host_args::HostArgs;
use crate::registry_client::{Refusal, clean};
use crate::{inspect, worker};

#[derive(Args)]
pub struct SignArgs {
    /// The plugin component (`.wasm`).
    plugin: PathBuf,
    /// The secret key file (`sandwit keygen`).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
}

#[derive(Args)]
pub struct PublishArgs {
    /// The plugin component (`.wasm`).
    plugin: PathBuf,
    #[command(flatten)]
    login: crate::registry_client::Login,
    /// The secret key file that signs it (`sandwit keygen`). Its public key
    /// is registered for your account if it is not yet.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Upload without checking the plugin here first (the registry runs the
    /// same check).
    #[arg(long)]
    no_local_check: bool,
}

/// Prints the signature of the plugin's digest, for the registry's upload
/// form.
pub fn sign(args: SignArgs) -> anyhow::Result<ExitCode> {
    let bytes = read_component(&args.plugin)?;
    let key = SigningKey::read(&args.key)?;
    outln!("{}", key.sign_digest(&digest_of(&bytes))?);
    Ok(ExitCode::SUCCESS)
}

/// The account a token belongs to (`GET /v1/account`).
#[derive(Deserialize)]
struct Account {
    name: String,
    /// The registry's id, which the key registration's proof names.
    registry: String,
}

/// The registry's answer to a publication.
#[derive(Deserialize)]
struct Published {
    id: String,
    version: String,
    digest: String,
    signer: String,
}

/// Checks the plugin here, signs it and uploads it.
pub fn publish(args: PublishArgs, host: &HostArgs) -> anyhow::Result<ExitCode> {
    let bytes = read_component(&args.plugin)?;
    let key = SigningKey::read(&args.key)?;
    let file = args.plugin.display().to_string();
    let mut what = file.clone();
    if !args.no_local_check {
        let report = local_check(&args.plugin, host)?;
        if report["ok"].as_bool() != Some(true) {
            eprintln!("sandwit: {file} was not published: it does not pass the check");
            return inspect::print_verdict(&report, false);
        }
        let p = &report["plugin"];
        what = format!(
            "{} {} ({file})",
            p["id"].as_str().unwrap_or_default(),
            p["version"].as_str().unwrap_or_default()
        );
    }
    let digest = digest_of(&bytes);
    let signature = key.sign_digest(&digest)?.to_string();
    let registry = args.login.client()?;

    // The key is registered with the proof that this account holds it: its
    // signature of `sandwit-key-registration-v2:<registry>:<account>:<key>`,
    // for the registry's id and the token's account, which the registry
    // names (a proof for one registry is refused by any other).
    let account = registry
        .get_json::<Account>("/v1/account")
        .with_context(|| format!("publishing {what}"))?;
    let account = match account {
        Ok(account) => account,
        Err(refusal) => bail!(
            "publishing {what}: asking the registry for the token's account: {}",
            refusal_sentence(&refusal, &what)
        ),
    };
    let public = key.public_key().to_string();
    if account.registry.is_empty() || account.registry.contains(':') {
        bail!(
            "publishing {what}: the registry's id {:?} is not one a key registration can name \
             (empty, or with a `:`)",
            clean(&account.registry, 80)
        );
    }
    let proof = key
        .sign_registration(&account.registry, &account.name)
        .to_string();
    let body = json!({ "public_key": public, "proof": proof }).to_string();
    let registered = registry
        .post::<serde_json::Value>("/v1/keys", "application/json", &[], body.as_bytes())
        .with_context(|| format!("publishing {what}"))?;
    if let Err(refusal) = registered {
        bail!(
            "publishing {what}: registering the key {public}: {}",
            refusal_sentence(&refusal, &what)
        );
    }

    let answer = registry
        .post::<Published>(
            "/v1/plugins",
            "application/wasm",
            &[("Sandwit-Signature", &signature)],
            &bytes,
        )
        .with_context(|| format!("publishing {what}"))?;
    let published = match answer {
        Ok(published) => published,
        Err(refusal) if refusal.status == 422 => {
            outln!("the registry {} rejected {what}:", registry.url());
            let mut report = refusal.body["report"].clone();
            if report.is_object() {
                report["file"] = json!(file);
                // The registry's words reach this terminal: no escapes.
                if let Some(problems) = report["problems"].as_array_mut() {
                    for problem in problems {
                        let text = clean(problem.as_str().unwrap_or_default(), 2000);
                        *problem = json!(text);
                    }
                }
            } else {
                report = json!({"file": file, "ok": false, "problems": [refusal.message]});
            }
            inspect::print_verdict(&report, false)?;
            return Ok(ExitCode::FAILURE);
        }
        Err(refusal) => bail!("publishing {what}: {}", refusal_sentence(&refusal, &what)),
    };
    if published.digest != digest {
        bail!(
            "publishing {what}: the registry recorded the digest {}, but the file's is {digest}: \
             the upload was altered on the way",
            clean(&published.digest, 80)
        );
    }
    outln!(
        "published {} {} to {}",
        clean(&published.id, 80),
        clean(&published.version, 80),
        registry.url()
    );
    outln!("  digest: {}", published.digest);
    outln!("  signer: {}", clean(&published.signer, 80));
    Ok(ExitCode::SUCCESS)
}

/// A refusal of the registry's as a sentence about publishing `what`,
/// chosen by its error code (one status has several causes: a 413 is a
/// component too large or an account past its quota, a 409 a version
/// already published or a key another account has), by the status only
/// when the code is unknown.
fn refusal_sentence(refusal: &Refusal, what: &str) -> String {
    let retry = refusal
        .retry_after
        .map_or(String::new(), |s| format!("; retry in {s} s"));
    match (refusal.code.as_str(), refusal.status) {
        ("unauthorized", _) | ("", 401) => format!(
            "the registry did not accept the token (401): check --token or \
             $SANDWIT_REGISTRY_TOKEN ({refusal})"
        ),
        ("not-an-owner", _) => format!(
            "the id belongs to other accounts, and your token's is not an owner (403): {refusal}"
        ),
        ("version-exists", _) => format!(
            "{what} is already published, and a published version never changes (even yanked): \
             raise the version in the plugin's manifest (409)"
        ),
        ("key-taken", _) => format!(
            "the signing key is registered to another account (409): sign with a key of \
             your own (sandwit keygen) ({refusal})"
        ),
        ("too-large", _) => {
            format!("the component is larger than the registry accepts (413): {refusal}")
        }
        ("quota-exceeded", _) => format!(
            "your account has used its storage quota on the registry, yanked versions \
             included (413): ask the registry's operator for a larger one ({refusal})"
        ),
        ("rate-limited", _) | ("", 429) => format!("too many requests for now (429){retry}"),
        ("busy", _) | ("", 503) => {
            format!("the registry is busy checking other plugins (503){retry}")
        }
        _ => refusal.to_string(),
    }
}

/// Reads a component file, refusing one over the host's size cap before
/// reading it.
pub fn read_component(path: &Path) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if len > MAX_COMPONENT_BYTES as u64 {
        bail!(
            "{} is {len} bytes, more than the limit of {MAX_COMPONENT_BYTES} bytes",
            path.display()
        );
    }
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// `sandwit validate --json` of the plugin in a worker under validate's
/// default budget, with no policy: the check the registry makes.
pub(crate) fn local_check(plugin: &Path, host: &HostArgs) -> anyhow::Result<serde_json::Value> {
    let mut argv: Vec<OsString> = vec!["validate".into(), "--json".into()];
    argv.extend(host.shared_args());
    argv.push("--".into());
    argv.push(plugin.into());
    let budget = worker::Budget {
        memory_mib: inspect::CHECK_MIB,
        cpu_seconds: inspect::CHECK_SECONDS,
    };
    let scratch = worker::ScratchDir::new(&std::env::temp_dir(), "sandwit-validate")?;
    Ok(
        match worker::check(argv, budget, &["SANDWIT_POLICY"], &scratch)? {
            worker::Ended::Reported(report) => report,
            worker::Ended::Failed(why) => json!({
                "file": plugin.display().to_string(),
                "ok": false,
                "problems": [why],
                "plugin": null,
            }),
        },
    )
}
