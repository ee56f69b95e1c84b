//! `sandwit keygen`: a new key pair for signing plugins.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sandwit::signing::SigningKey;

#[derive(Args)]
pub struct KeygenArgs {
    /// Where the secret key goes (PKCS#8 PEM, mode 0600); the public key
    /// goes to FILE.pub. A file already there is never replaced.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Writes a new key pair and prints its public key.
pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let key = SigningKey::generate()?;
    let public = key.write_new(&args.out)?;
    eprintln!(
        "sandwit: wrote the secret key to {} (mode 0600: keep it secret) and the public key to {}",
        args.out.display(),
        public.display()
    );
    outln!("{}", key.public_key());
    Ok(ExitCode::SUCCESS)
}
