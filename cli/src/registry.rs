//! `sandwit registry`: serve a plugin registry (`serve`) and make its
//! tokens (`token create`), its metadata in SQLite or PostgreSQL (`--db`)
//! and its blobs in a directory or an object store (`--blobs`). The service
//! is the `sandwit-registry` crate; this module gives it its validator, the
//! `validate` worker process.

use std::ffi::OsString;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use sandwit_registry::{
    BlobLocation, Config, Database, Options, RateLimit, Registry, Role, Validator, Verdict,
};
use serde_json::Value;

use crate::inspect;
use crate::worker::{self, ScratchDir};

#[derive(Args)]
pub struct RegistryArgs {
    #[command(subcommand)]
    command: RegistryCommand,
}

#[derive(Subcommand)]
enum RegistryCommand {
    /// Serve the registry over HTTP: the JSON API under /v1, its OpenAPI
    /// document at /openapi.json. Every upload is checked as `sandwit
    /// validate` checks, in a worker process under a memory and CPU budget.
    /// Requests are logged on stderr (SANDWIT_LOG sets the level, `info` by
    /// default); tokens never are. SIGTERM or ctrl-c stops accepting and
    /// lets requests in flight finish. See docs/REGISTRY.md.
    Serve(ServeArgs),
    /// Manage the registry's API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage your account's publisher keys on a running registry.
    #[command(subcommand)]
    Key(KeyCommand),
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Revoke a key of your account: the registry accepts no publish signed
    /// by it from now on, and never registers it again. Versions it signed
    /// stay, shown as signed by a revoked key; installs go on trusting the
    /// keys their own policy and --trust name.
    Revoke(RevokeArgs),
}

#[derive(Args)]
struct RevokeArgs {
    /// The public key (`ed25519:...`, as `sandwit keygen` prints it and
    /// FILE.pub holds).
    #[arg(value_name = "KEY")]
    key: sandwit::signing::PublicKey,
    #[command(flatten)]
    login: crate::registry_client::Login,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Make a token for an account (creating the account with the role if
    /// it is new) and print it: it is shown once and stored only as its
    /// SHA-256. Works on the data directory (or the --db the registry
    /// serves from); no server needs to run.
    Create(TokenArgs),
}

/// Where a registry's metadata and blobs are, when not in its directory.
#[derive(Args)]
struct StorageArgs {
    /// The metadata database: a PostgreSQL URL
    /// (postgres://user[:password]@host[:port]/database; `?sslmode=require`
    /// to insist on TLS, `&sslrootcert=FILE` for a private CA), which
    /// replicas of the registry share; the database must exist, its tables
    /// are made on first use. By default the SQLite file registry.db in
    /// --data.
    #[arg(long, value_name = "URL")]
    db: Option<Database>,
}

impl StorageArgs {
    fn database(&self) -> Database {
        self.db.clone().unwrap_or_default()
    }
}

#[derive(Args)]
struct TokenArgs {
    /// The registry's data directory.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    #[command(flatten)]
    storage: StorageArgs,
    /// The account's name: lowercase letters, digits, `-`, `_`, `.`.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// `publisher` publishes and manages its own plugins; `admin` may also
    /// yank and add owners to any plugin.
    #[arg(long, value_parser = ["admin", "publisher"])]
    role: String,
}

#[derive(Args)]
struct ServeArgs {
    /// The registry's data directory (created if need be): registry.db
    /// (SQLite) and blobs/sha256/<hex> unless --db and --blobs put them
    /// elsewhere, and this process's scratch files (uploads being checked).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    #[command(flatten)]
    storage: StorageArgs,
    /// Where the published components are kept: s3://BUCKET/PREFIX (AWS S3,
    /// or an S3-compatible server with --blobs-endpoint; credentials and
    /// region from the usual AWS_* environment variables), or file://DIR
    /// (a folder, e.g. one shared by replicas). Replicas on one --db must
    /// share one --blobs. By default blobs/ in --data.
    #[arg(long, value_name = "LOCATION")]
    blobs: Option<BlobLocation>,
    /// The URL of an S3-compatible server (MinIO, Ceph...) for
    /// --blobs s3://...; plain http:// is allowed.
    #[arg(long, value_name = "URL", requires = "blobs")]
    blobs_endpoint: Option<String>,
    /// The address to listen on; port 0 picks a free one. The address bound
    /// is printed on stdout as `listening on http://ADDR`.
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:8478")]
    addr: SocketAddr,
    /// How many uploads may be checked at once; more are refused with 503
    /// and Retry-After.
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    max_validations: u32,
    /// Writable memory of each check's worker process, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 2048,
          value_parser = clap::value_parser!(u64).range(16..=1 << 20))]
    max_check_mib: u64,
    /// CPU time of each check's worker, in seconds (twice this and 10 s
    /// more of wall-clock time).
    #[arg(long, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    max_check_seconds: u64,
    /// The most MiB of published versions each account may have (yanked
    /// ones count); an upload past it is refused (413 quota-exceeded)
    /// before it is checked.
    #[arg(long, value_name = "MIB", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(0..=1 << 30))]
    account_quota_mib: u64,
    /// Requests a minute per client address, per /64 for IPv6 (429 with
    /// Retry-After beyond).
    #[arg(long, value_name = "N", default_value_t = 600,
          value_parser = clap::value_parser!(u32).range(1..))]
    address_rate: u32,
    /// Requests at once per client address, after a pause.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    address_burst: u32,
    /// Requests a minute per token.
    #[arg(long, value_name = "N", default_value_t = 600,
          value_parser = clap::value_parser!(u32).range(1..))]
    token_rate: u32,
    /// Requests at once per token, after a pause.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    token_burst: u32,
    /// The longest a request may take, in seconds, upload and check
    /// included (408 beyond).
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..))]
    request_timeout: u64,
    /// How long a shutdown waits for requests in flight, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    shutdown_grace: u64,
    #[command(flatten)]
    connections: crate::connections::ConnArgs,
}

/// Runs `sandwit registry ...`.
pub fn main(args: RegistryArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        RegistryCommand::Token(TokenCommand::Create(args)) => {
            let role: Role = args.role.parse().map_err(anyhow::Error::msg)?;
            let registry = Registry::open_with_options(
                &args.data,
                Options {
                    database: args.storage.database(),
                    ..Options::default()
                },
            )?;
            let token = registry.create_token(&args.name, role)?;
            outln!("{token}");
            Ok(ExitCode::SUCCESS)
        }
        RegistryCommand::Serve(args) => serve(args),
        RegistryCommand::Key(KeyCommand::Revoke(args)) => revoke(args),
    }
}

/// `sandwit registry key revoke`: `POST /v1/keys/revoke`.
fn revoke(args: RevokeArgs) -> anyhow::Result<ExitCode> {
    #[derive(serde::Deserialize)]
    struct Revoked {
        revoked_at: String,
    }
    let registry = args.login.client()?;
    let body = serde_json::json!({ "public_key": args.key.to_string() }).to_string();
    let answer =
        registry.post::<Revoked>("/v1/keys/revoke", "application/json", &[], body.as_bytes())?;
    match answer {
        Ok(revoked) => {
            outln!(
                "revoked {} at {} on {}",
                args.key,
                crate::registry_client::clean(&revoked.revoked_at, 40),
                registry.url()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(refusal) => anyhow::bail!("revoking {} on {}: {refusal}", args.key, registry.url()),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let validator = Arc::new(WorkerValidator {
        scratch: args.data.join("tmp"),
        budget: worker::Budget {
            memory_mib: args.max_check_mib,
            cpu_seconds: args.max_check_seconds,
        },
    });
    let mut blobs = args.blobs.clone().unwrap_or_default();
    if let Some(endpoint) = &args.blobs_endpoint {
        let BlobLocation::S3(s3) = &mut blobs else {
            anyhow::bail!("--blobs-endpoint is for --blobs s3://...: a file:// folder has none");
        };
        s3.endpoint = Some(endpoint.clone());
    }
    let registry = Registry::open_with_options(
        &args.data,
        Options {
            database: args.storage.database(),
            blobs,
            validator: Some(validator as Arc<dyn Validator>),
            max_validations: args.max_validations as usize,
        },
    )?;
    registry.set_account_quota(Some(args.account_quota_mib << 20));
    let config = Config {
        per_address: RateLimit {
            per_minute: args.address_rate,
            burst: args.address_burst,
        },
        per_token: RateLimit {
            per_minute: args.token_rate,
            burst: args.token_burst,
        },
        request_timeout: Duration::from_secs(args.request_timeout),
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        connections: args.connections.limits(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| anyhow::anyhow!("listening on {}: {e}", args.addr))?;
        let bound = listener.local_addr()?;
        outln!("listening on http://{bound}");
        let _ = std::io::stdout().flush();
        tracing::info!(data = %args.data.display(), "registry listening on http://{bound}");
        let web = sandwit_registry::web::router(registry.clone());
        sandwit_registry::serve(registry, config, web, listener, stop_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM or ctrl-c.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            tracing::warn!("no SIGTERM handler ({e}); stopping on ctrl-c only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Checks an upload as `sandwit validate` does: the bytes go to a private
/// file, and a worker process (this binary) loads it under the budget, with
/// no cache but its own (in the check's directory), an empty store and a
/// policy that grants nothing.
struct WorkerValidator {
    /// Where each check gets a private directory (`DATA/tmp`).
    scratch: PathBuf,
    budget: worker::Budget,
}

impl Validator for WorkerValidator {
    fn validate(&self, component: &[u8], digest: &str) -> anyhow::Result<Verdict> {
        let hex = digest.trim_start_matches("sha256:");
        let dir = ScratchDir::new(
            &self.scratch,
            &format!("check-{}", &hex[..hex.len().min(16)]),
        )?;
        let file = dir.write("component.wasm", component)?;
        let policy = dir.write("policy.toml", b"")?;
        let args: Vec<OsString> = vec![
            "--no-cache".into(),
            "--policy".into(),
            policy.into(),
            "--store".into(),
            dir.path().join("store.db").into(),
            "validate".into(),
            "--json".into(),
            "--manifest".into(),
            file.clone().into(),
        ];
        let mut report = match worker::check(args, self.budget, &["SANDWIT_POLICY"], &dir)? {
            worker::Ended::Reported(report) => report,
            worker::Ended::Failed(why) => inspect::failed_report(&file, why),
        };
        if report["ok"] == true {
            return Ok(Verdict::Accepted {
                manifest: report["manifest"].take(),
            });
        }
        // The problems name the upload by its digest, not its scratch path.
        let path = file.display().to_string();
        if let Some(problems) = report["problems"].as_array_mut() {
            for problem in problems {
                if let Some(text) = problem.as_str() {
                    *problem = Value::from(text.replace(&path, digest));
                }
            }
        }
        Ok(Verdict::Rejected { report })
    }
}
