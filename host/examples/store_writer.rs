//! Remembers notes through the `notes` plugin, one call after another, and
//! prints each note's number once the call returned (its write committed).
//! The store test kills this process with SIGKILL mid-stream and checks that
//! every printed note is still there.
//!
//! Usage: store_writer <store.db> <notes.wasm>

use std::io::Write;

use sandwit::{AgentCtx, Host, Policy, Value};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(store), Some(notes)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: store_writer <store.db> <notes.wasm>");
    };
    let mut policy = Policy::default();
    policy.grant("notes", ["store"])?;
    // The grant is for this component only: pin it by its SHA-256.
    policy.pin("notes", &sandwit::component_hash(&std::fs::read(&notes)?))?;
    let host = Host::builder().policy(policy).store_path(store).build()?;
    let notes = host.load_plugin_file(notes).await?;
    let ctx = AgentCtx {
        user_id: Some("writer".into()),
        ..AgentCtx::new("kill-test")
    };
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        let args = Value::Object(vec![("note".into(), Value::Text(format!("note {i}")))]);
        notes.call(&ctx, "remember", args).await?;
        writeln!(out, "{i}")?;
        out.flush()?;
    }
    Ok(())
}
