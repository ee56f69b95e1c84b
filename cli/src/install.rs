//! `sandwit install`: a plugin from a registry into a folder, its digest
//! and signature checked, recorded in the folder's lock file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use sandwit::MAX_COMPONENT_BYTES;
use sandwit::lock::{LockEntry, LockFile};
use sandwit::manifest::is_plugin_id;
use sandwit::signing::{PublicKey, Signature, digest_of};
use serde::Deserialize;

use crate::host_args::HostArgs;
use crate::registry_client::{Registry, clean};

#[derive(Args)]
pub struct InstallArgs {
    /// The plugin: ID for its highest version that is not yanked, or
    /// ID@VERSION.
    #[arg(value_name = "ID[@VERSION]")]
    plugin: String,
    /// The registry's URL (https://...; plain http:// only to a loopback
    /// address, unless --allow-http).
    #[arg(long, value_name = "URL")]
    registry: String,
    /// Read from a plain http:// registry on a host that is not loopback
    /// (anyone on the way can read and change its answers; digests and,
    /// with a trusted key, signatures are still checked).
    #[arg(long)]
    allow_http: bool,
    /// The folder to install into (created if missing); the plugin goes to
    /// DIR/<id>.wasm and is recorded in DIR/sandwit.lock.
    #[arg(long, value_name = "DIR", default_value = "plugins")]
    dir: PathBuf,
    /// A public key (`ed25519:...`) whose signatures you trust (repeatable),
    /// besides the policy's `[registry] trusted_keys`. With none, the
    /// install is refused unless --no-verify is given.
    #[arg(long = "trust", value_name = "KEY")]
    trust: Vec<PublicKey>,
    /// Install without checking the signature when no key is trusted (the
    /// digest is still checked; the command says the signature was not).
    #[arg(long)]
    no_verify: bool,
    /// Install ID@VERSION even if that version is yanked.
    #[arg(long)]
    allow_yanked: bool,
}

/// A plugin's versions, as the registry lists them.
#[derive(Deserialize)]
struct Listing {
    versions: Vec<Listed>,
}

#[derive(Deserialize)]
struct Listed {
    version: String,
    yanked: bool,
}

/// One version, as the registry describes it.
#[derive(Deserialize)]
struct Described {
    digest: String,
    size: u64,
    signer: String,
    signature: String,
}

/// Resolves, downloads, checks and installs the plugin.
pub fn install(args: InstallArgs, host: &HostArgs) -> anyhow::Result<ExitCode> {
    let (id, wanted) = match args.plugin.split_once('@') {
        Some((id, version)) => (id, Some(version)),
        None => (args.plugin.as_str(), None),
    };
    if !is_plugin_id(id) {
        bail!(
            "{:?} is not a plugin id (lowercase letters, digits, `-` and `_`, starting with a \
             letter), optionally followed by @VERSION",
            clean(id, 80)
        );
    }
    if let Some(v) = wanted {
        semver::Version::parse(v)
            .with_context(|| format!("{:?} is not a version (x.y.z)", clean(v, 80)))?;
    }
    let policy = host.policy()?;
    let mut trusted = args.trust.clone();
    trusted.extend(policy.registry.trusted_keys.iter().copied());

    let registry = Registry::new(&args.registry, None)?;
    let at = registry.url();
    if registry.is_plain_http_remote() && !args.allow_http {
        bail!(
            "{} was not installed: the registry {at} is plain http:// on a host that is not \
             loopback, so anyone on the way could read or change its answers. Use https://, \
             or give --allow-http to read from it anyway",
            clean(&args.plugin, 80)
        );
    }
    let listing: Listing = match registry.get_json(&format!("/v1/plugins/{id}"))? {
        Ok(listing) => listing,
        Err(r) if r.status == 404 => bail!("the registry {at} has no plugin `{id}`"),
        Err(r) => bail!("looking up `{id}` in {at}: {r}"),
    };
    let version = resolve(id, wanted, &listing, args.allow_yanked)?;
    let what = format!("{id} {version}");
    let described: Described = match registry.get_json(&format!("/v1/plugins/{id}/{version}"))? {
        Ok(d) => d,
        Err(r) => bail!("looking up {what} in {at}: {r}"),
    };
    sandwit::signing::check_digest(&described.digest)
        .with_context(|| format!("the registry's record of {what}"))?;
    let signer = PublicKey::parse(&described.signer)
        .with_context(|| format!("the registry's record of {what}"))?;
    let signature = Signature::parse(&described.signature)
        .with_context(|| format!("the registry's record of {what}"))?;

    // The signature is over the digest: checked before the download, which
    // must then have that digest.
    let checked = !trusted.is_empty();
    if !checked && !args.no_verify {
        bail!(
            "{what} was not installed: no key is trusted to sign it. Give --trust KEY (the \
             publisher's public key, `ed25519:...`), list keys in the policy's [registry] \
             trusted_keys, or install without checking the signature with --no-verify"
        );
    }
    if checked {
        if !trusted.contains(&signer) {
            bail!(
                "{what} from {at} was not installed: it is signed by {signer}, which is not a \
                 trusted key (trust it with --trust {signer}, or in the policy's [registry] \
                 trusted_keys, if you trust its publisher)"
            );
        }
        signer
            .verify_digest(&described.digest, &signature)
            .map_err(|e| anyhow::anyhow!("{what} from {at} was not installed: {e}"))?;
    }

    if described.size > MAX_COMPONENT_BYTES as u64 {
        bail!(
            "{what} is {} bytes, more than the host's limit of {MAX_COMPONENT_BYTES} bytes",
            described.size
        );
    }
    let bytes = match registry.download(
        &format!("/v1/blobs/{}", described.digest),
        described.size,
        &what,
    )? {
        Ok(bytes) => bytes,
        Err(r) => bail!("downloading {what} from {at}: {r}"),
    };
    let digest = digest_of(&bytes);
    if digest != described.digest {
        bail!(
            "{what} from {at} was not installed: the bytes downloaded have the digest {digest}, \
             not the {} the registry lists for it",
            described.digest
        );
    }

    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let file = format!("{id}.wasm");
    let path = args.dir.join(&file);
    // The bytes go to a file of their own, are checked as the loader will
    // check them, and replace DIR/<id>.wasm only if they pass: a registry
    // that lists another signed component under this id and version
    // breaks nothing that works.
    let staged = Staged::write(&args.dir, &file, &bytes)?;
    check_identity(&staged.path, id, &version, &what, at, host)?;
    let _held = hold_folder(&args.dir)?;
    let mut lock = LockFile::read(&args.dir)?.unwrap_or_default();
    staged.replace(&path)?;
    lock.insert(LockEntry {
        id: id.to_string(),
        version: version.clone(),
        file,
        digest: digest.clone(),
        registry: at.to_string(),
        signer,
        signature,
    });
    lock.write(&args.dir)?;

    outln!("installed {what} to {}", path.display());
    outln!("  digest: {digest}");
    if checked {
        outln!("  signed by {signer} (trusted)");
    } else {
        outln!("  signer: {signer}");
        eprintln!(
            "sandwit: warning: the signature of {what} was NOT checked: no trusted keys (give \
             --trust KEY, or list keys in the policy's [registry] trusted_keys)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Downloaded bytes in a file of their own beside their destination (a
/// name `--plugins DIR` does not load), removed unless they replace it.
struct Staged {
    path: PathBuf,
    placed: bool,
}

impl Staged {
    /// Writes `bytes` to a new file in `dir` named after `file`, synced.
    fn write(dir: &std::path::Path, file: &str, bytes: &[u8]) -> anyhow::Result<Staged> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(".{file}.{}.{stamp}.download", std::process::id()));
        let staged = Staged {
            path,
            placed: false,
        };
        std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&staged.path)
            .and_then(|mut f| {
                f.write_all(bytes)?;
                f.sync_all()
            })
            .with_context(|| format!("writing {}", staged.path.display()))?;
        Ok(staged)
    }

    /// Renames the file over `path` (atomically) and syncs the folder.
    fn replace(mut self, path: &std::path::Path) -> anyhow::Result<()> {
        std::fs::rename(&self.path, path).with_context(|| format!("writing {}", path.display()))?;
        self.placed = true;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", dir.display()))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Refuses the component at `staged` unless it loads (checked as `sandwit
/// validate` checks, in a worker) and its manifest names `id` and
/// `version`: the check the loader makes against the lock file, made before
/// anything is replaced. The signature covers only the digest, so a
/// registry can list any component its publisher signed under any id and
/// version.
fn check_identity(
    staged: &std::path::Path,
    id: &str,
    version: &str,
    what: &str,
    at: &str,
    host: &HostArgs,
) -> anyhow::Result<()> {
    let report = crate::publish::local_check(staged, host)?;
    if report["ok"] != true {
        let problems: Vec<&str> = report["problems"]
            .as_array()
            .map(|ps| ps.iter().filter_map(|p| p.as_str()).collect())
            .unwrap_or_default();
        bail!(
            "{what} from {at} was not installed: the component the registry served does not \
             load: {}",
            problems.join("; ")
        );
    }
    let found_id = report["plugin"]["id"].as_str().unwrap_or_default();
    let found_version = report["plugin"]["version"].as_str().unwrap_or_default();
    let same_version = match (
        semver::Version::parse(found_version),
        semver::Version::parse(version),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => found_version == version,
    };
    if found_id != id || !same_version {
        bail!(
            "{what} from {at} was not installed: the registry lists it as {id} {version}, but the \
             component it served is {} {} (its manifest's id and version); nothing was replaced",
            clean(found_id, 80),
            clean(found_version, 80)
        );
    }
    Ok(())
}

/// An exclusive lock on the folder `dir` (its directory's `flock`), held
/// while the returned file is open: two installs into one folder take turns
/// at reading and rewriting its lock file, so neither loses the other's
/// entry.
fn hold_folder(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let folder = std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    // SAFETY: flock takes an open descriptor and no memory.
    if unsafe { libc::flock(folder.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", dir.display()));
    }
    Ok(folder)
}

/// The version to install: `wanted`, refused if yanked unless
/// `allow_yanked`; else the highest version that is not yanked.
fn resolve(
    id: &str,
    wanted: Option<&str>,
    listing: &Listing,
    allow_yanked: bool,
) -> anyhow::Result<String> {
    if let Some(wanted) = wanted {
        let wanted = semver::Version::parse(wanted)?;
        let Some(listed) = listing
            .versions
            .iter()
            .find(|v| semver::Version::parse(&v.version).is_ok_and(|v| v == wanted))
        else {
            bail!("`{id}` has no version {wanted} in the registry");
        };
        if listed.yanked && !allow_yanked {
            bail!(
                "{id} {wanted} is yanked (its publisher withdrew it); install it anyway with \
                 --allow-yanked, or leave out the version for the highest one that is not"
            );
        }
        return Ok(listed.version.clone());
    }
    listing
        .versions
        .iter()
        .filter(|v| !v.yanked)
        .filter_map(|v| Some((semver::Version::parse(&v.version).ok()?, &v.version)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, v)| v.clone())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`{id}` has no version that is not yanked; install a yanked one as \
                 {id}@VERSION with --allow-yanked"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(versions: &[(&str, bool)]) -> Listing {
        Listing {
            versions: versions
                .iter()
                .map(|(v, yanked)| Listed {
                    version: v.to_string(),
                    yanked: *yanked,
                })
                .collect(),
        }
    }

    #[test]
    fn resolves_the_highest_version_not_yanked() {
        let l = listing(&[("1.10.0", true), ("1.9.0", false), ("1.2.0", false)]);
        assert_eq!(resolve("p", None, &l, false).unwrap(), "1.9.0");
        assert_eq!(resolve("p", Some("1.2.0"), &l, false).unwrap(), "1.2.0");
        let e = resolve("p", Some("1.10.0"), &l, false).unwrap_err();
        assert!(e.to_string().contains("--allow-yanked"), "{e}");
        assert_eq!(resolve("p", Some("1.10.0"), &l, true).unwrap(), "1.10.0");
        assert!(resolve("p", Some("2.0.0"), &l, true).is_err());
        let e = resolve("p", None, &listing(&[("1.0.0", true)]), true).unwrap_err();
        assert!(
            e.to_string().contains("no version that is not yanked"),
            "{e}"
        );
    }
}
