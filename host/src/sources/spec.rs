//! A source's OpenAPI document: read from a file, or fetched once from a
//! URL and kept by its digest, within `max_spec_bytes`, and checked against
//! the policy's pin before anything in it is read.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use sha2::Digest as _;

use sandwit_contract::policy::HttpLimits;
use sandwit_contract::tool_policy::ToolSourcePolicy;

use crate::capabilities::http::host_client::HostHttp;

/// The document at `location` (`source`'s), its bytes and their SHA-256
/// (hex), checked against the pin.
pub(crate) async fn read(
    source: &ToolSourcePolicy,
    location: &str,
    folder: Option<&Path>,
    cache_dir: Option<&Path>,
    limits: HttpLimits,
) -> Result<(Vec<u8>, String), String> {
    let max = source.max_spec_bytes();
    let pinned = source.sha256.as_ref().map(|d| d.as_str().to_string());
    let cached = match (&pinned, cache_dir) {
        (Some(digest), Some(dir)) if source.spec_is_url() => {
            Some(dir.join("tool-specs").join(format!("{digest}.json")))
        }
        _ => None,
    };
    // Fetched once: a pinned document kept from an earlier fetch is read
    // again (and checked again), not fetched.
    if let Some(file) = &cached
        && let Ok(bytes) = read_file(file, max)
        && Some(&hex(&bytes)) == pinned.as_ref()
    {
        let digest = hex(&bytes);
        return Ok((bytes, digest));
    }
    let bytes = if source.spec_is_url() {
        fetch(location, limits, max).await?
    } else {
        let path = match folder {
            Some(folder) => folder.join(location),
            None => PathBuf::from(location),
        };
        read_file(&path, max)?
    };
    let digest = hex(&bytes);
    if let Some(pinned) = &pinned
        && *pinned != digest
    {
        return Err(format!(
            "its document {} has the SHA-256 {digest}, not the {pinned} the policy pins",
            shown(location)
        ));
    }
    if let Some(file) = &cached {
        // Best effort: a cache that cannot be written means a fetch next time.
        let _ = keep(file, &bytes);
    }
    Ok((bytes, digest))
}

/// The document at `location` (a file or a URL) and its digest, with no pin:
/// what `sandwit tools inspect` shows.
pub(crate) async fn fetch_unpinned(
    location: &str,
    limits: HttpLimits,
    max: u64,
) -> Result<(Vec<u8>, String), String> {
    let bytes = if location.starts_with("http://") || location.starts_with("https://") {
        fetch(location, limits, max).await?
    } else {
        read_file(Path::new(location), max)?
    };
    let digest = hex(&bytes);
    Ok((bytes, digest))
}

/// The document as JSON. serde_json refuses nesting deeper than 128, so a
/// hostile document cannot exhaust the stack here.
pub(crate) fn parse(bytes: &[u8]) -> Result<Json, String> {
    serde_json::from_slice(bytes).map_err(|e| {
        format!("its document is not JSON ({e}); YAML documents are not read, convert them to JSON")
    })
}

/// A document's fetch may take this many of `[http] timeout_ms`, all told.
const FETCH_WAITS: u32 = 6;

async fn fetch(url: &str, limits: HttpLimits, max: u64) -> Result<Vec<u8>, String> {
    let limits = HttpLimits {
        max_response_bytes: usize::try_from(max).unwrap_or(usize::MAX),
        ..limits
    };
    let (http, _) = HostHttp::for_url(url, limits)?;
    let target = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| rest[at..].to_string()))
        .unwrap_or_else(|| "/".into());
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json"),
    );
    // `[http] timeout_ms` bounds each wait for bytes; this, the whole.
    let whole = limits.timeout() * FETCH_WAITS;
    let reply = tokio::time::timeout(whole, http.send(http::Method::GET, &target, headers, None))
        .await
        .map_err(|_| {
            format!(
                "fetching its document {}: it took more than {whole:?}",
                shown(url)
            )
        })?
        .map_err(|e| format!("fetching its document {}: {e}", shown(url)))?;
    if reply.status != 200 {
        return Err(format!(
            "fetching its document {}: the server answered {}",
            shown(url),
            reply.status
        ));
    }
    Ok(reply.body.to_vec())
}

/// The file's bytes, refused past `max` without reading on.
fn read_file(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot read its document {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read its document {}: {e}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "its document {} is more than the limit of {max} bytes (`max_spec_bytes`)",
            path.display()
        ));
    }
    Ok(bytes)
}

/// Writes `bytes` to `file` whole or not at all.
fn keep(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().expect("a cache file has a folder");
    std::fs::create_dir_all(dir)?;
    let partial = dir.join(format!(".{}.partial", std::process::id()));
    std::fs::write(&partial, bytes)?;
    std::fs::rename(partial, file)
}

fn hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A URL without its query (which may hold a key), for messages.
fn shown(location: &str) -> String {
    let plain = location.split(['?', '#']).next().unwrap_or("");
    sandwit_contract::text::cut(plain.to_string(), 200)
}
