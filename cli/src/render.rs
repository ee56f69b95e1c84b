//! Shared text and JSON renderings of results.

use std::path::Path;

use anyhow::Context;
use sandwit::{CodeSource, Media, MethodResult, RunOutcome};
use sandwit_service::outcome::result_json as result_json_with;
use serde_json::json;

pub fn code_source(source: CodeSource) -> &'static str {
    match source {
        CodeSource::Compiled => "compiled now",
        CodeSource::DiskCache => "loaded from the compiled-code cache (not compiled)",
        CodeSource::MemoryCache => "already loaded",
    }
}

/// The result as JSON (`sandwit_service::outcome`); images are written
/// into `out_dir` and shown by path, MIME type and size.
pub fn result_json(result: &MethodResult, out_dir: &Path) -> anyhow::Result<serde_json::Value> {
    result_json_with(result, &mut |i, media| image_file(out_dir, i, media))
}

/// A run's outcome as JSON, images written into `out_dir`.
pub fn outcome_json(outcome: &RunOutcome, out_dir: &Path) -> anyhow::Result<serde_json::Value> {
    sandwit_service::outcome::outcome_json(outcome, &mut |i, media| image_file(out_dir, i, media))
}

/// An image written into `out_dir`: `{"type": "image", "mime_type",
/// "bytes", "path"}`.
fn image_file(out_dir: &Path, index: usize, media: &Media) -> anyhow::Result<serde_json::Value> {
    let path = write_media(out_dir, index, &media.mime_type, &media.data)?;
    Ok(json!({"type": "image", "mime_type": media.mime_type,
              "bytes": media.data.len(), "path": path}))
}

/// Where images go unless `--out-dir` says otherwise: a folder of the user's
/// own in the temp folder (a shared name there could be anyone's, or a link).
pub fn default_out_dir() -> std::path::PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("sandwit-out-{uid}"))
}

/// Makes `dir` (mode `0700`) if missing, and refuses it unless it is a real
/// directory (not a link) of this user's that nobody else may write.
fn private_out_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    anyhow::ensure!(
        meta.is_dir() && meta.uid() == me && meta.mode() & 0o022 == 0,
        "{} is not a directory of this user's that only this user can write: choose another \
         with --out-dir",
        dir.display()
    );
    Ok(())
}

fn write_media(dir: &Path, index: usize, mime: &str, data: &[u8]) -> anyhow::Result<String> {
    let ext = match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        _ => "bin",
    };
    use std::io::Write;
    if dir == default_out_dir() {
        private_out_dir(dir)?;
    } else {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = dir.join(format!("part-{stamp}-{}-{index}.{ext}", std::process::id()));
    // Created new: never through a file or link already there.
    let mut file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(data)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path.display().to_string())
}
