//! "A registry" for the client's tests: [`start`] is the one place they get
//! one. Until the registry server is in this tree, it is a small HTTP/1.1
//! server on loopback, in this process, answering the contract's endpoints
//! (docs/REGISTRY.md) from memory, with the server's checks: the token, the
//! signature against the account's keys, `sandwit validate --json` for the
//! 422 report, immutable versions. Its other methods act as a compromised
//! registry would, which no API allows.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandwit::signing::{PublicKey, Signature, digest_of};
use serde_json::{Value, json};

/// A running registry with one publisher account.
pub struct Registry {
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// The publisher account's token.
    pub token: String,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    keys: Vec<PublicKey>,
    versions: Vec<Version>,
    blobs: HashMap<String, Vec<u8>>,
}

#[derive(Clone)]
struct Version {
    id: String,
    version: String,
    digest: String,
    size: usize,
    signer: String,
    signature: String,
    yanked: bool,
}

/// The publisher account's name.
const ACCOUNT: &str = "publisher";

/// The registry's id, which key registrations name.
const REGISTRY_ID: &str = "swreg_fake";

/// The largest upload: the host's component size cap.
const MAX_BODY: usize = sandwit::MAX_COMPONENT_BYTES;

/// Starts a registry on a free loopback port.
pub fn start() -> Registry {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let token = format!("swr_{}", "t".repeat(43));
    let state = Arc::new(Mutex::new(State::default()));
    let (shared, expected) = (state.clone(), token.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (state, token) = (shared.clone(), expected.clone());
            std::thread::spawn(move || serve(stream, &state, &token));
        }
    });
    Registry { url, token, state }
}

impl Registry {
    /// Yanks `id` `version`, as its owner's `DELETE .../yank` does.
    pub fn yank(&self, id: &str, version: &str) {
        let mut state = self.state.lock().unwrap();
        let v = state
            .versions
            .iter_mut()
            .find(|v| v.id == id && v.version == version)
            .unwrap();
        v.yanked = true;
    }

    /// Serves `bytes` as the blob of `id` `version`, under its digest: a
    /// store or mirror that changed the bytes.
    pub fn tamper_blob(&self, id: &str, version: &str, bytes: &[u8]) {
        let mut state = self.state.lock().unwrap();
        let digest = state.find(id, version).digest.clone();
        state.blobs.insert(digest, bytes.to_vec());
    }

    /// Lists `bytes` and their digest for `id` `version`, with the
    /// signature it had: a registry that substituted a plugin, and cannot
    /// sign for its publisher.
    pub fn substitute(&self, id: &str, version: &str, bytes: &[u8]) {
        let mut state = self.state.lock().unwrap();
        let digest = digest_of(bytes);
        state.blobs.insert(digest.clone(), bytes.to_vec());
        let v = state
            .versions
            .iter_mut()
            .find(|v| v.id == id && v.version == version)
            .unwrap();
        v.digest = digest;
        v.size = bytes.len();
    }

    /// Lists the record of `from`'s first version (digest, size, signer and
    /// signature) as `id` `version`: a registry that serves another
    /// component its publisher signed, which the signature cannot tell.
    pub fn relist(&self, id: &str, version: &str, from: &str) {
        let mut state = self.state.lock().unwrap();
        let source = state
            .versions
            .iter()
            .find(|v| v.id == from)
            .unwrap()
            .clone();
        let v = state
            .versions
            .iter_mut()
            .find(|v| v.id == id && v.version == version)
            .unwrap();
        v.digest = source.digest;
        v.size = source.size;
        v.signer = source.signer;
        v.signature = source.signature;
    }

    /// How many versions have been published.
    pub fn published(&self) -> usize {
        self.state.lock().unwrap().versions.len()
    }
}

impl State {
    fn find(&self, id: &str, version: &str) -> &Version {
        self.versions
            .iter()
            .find(|v| v.id == id && v.version == version)
            .unwrap()
    }
}

/// A request as read off the wire.
struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

fn serve(stream: TcpStream, state: &Mutex<State>, token: &str) {
    let timeout = Some(Duration::from_secs(10));
    stream.set_read_timeout(timeout).unwrap();
    stream.set_write_timeout(timeout).unwrap();
    let Some(request) = read_request(&stream) else {
        return;
    };
    let (status, content_type, body) = match answer(&request, state, token) {
        Answer::Json(status, value) => (status, "application/json", value.to_string().into_bytes()),
        Answer::Bytes(bytes) => (200, "application/wasm", bytes),
    };
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.take(MAX_BODY as u64 + (64 << 10)));
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = HashMap::new();
    for _ in 0..100 {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let len: usize = headers
        .get("content-length")
        .map_or(Some(0), |l| l.parse().ok())?;
    let mut body = vec![0; len.min(MAX_BODY + 1)];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

enum Answer {
    Json(u16, Value),
    Bytes(Vec<u8>),
}

fn error(status: u16, code: &str, message: &str) -> Answer {
    Answer::Json(status, json!({"error": code, "message": message}))
}

fn answer(request: &Request, state: &Mutex<State>, token: &str) -> Answer {
    let authorized = request.headers.get("authorization") == Some(&format!("Bearer {token}"));
    let segments: Vec<&str> = request.path.trim_start_matches('/').split('/').collect();
    let mut state = state.lock().unwrap();
    match (request.method.as_str(), segments.as_slice()) {
        ("POST", ["v1", "keys"]) => {
            if !authorized {
                return error(401, "unauthorized", "the token is not valid");
            }
            let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
            let Ok(key) = PublicKey::parse(body["public_key"].as_str().unwrap_or_default()) else {
                return error(400, "bad-key", "public_key is not an ed25519 key");
            };
            let proven =
                Signature::parse(body["proof"].as_str().unwrap_or_default()).is_ok_and(|proof| {
                    key.verify_registration(REGISTRY_ID, ACCOUNT, &proof)
                        .is_ok()
                });
            if !proven {
                return error(
                    400,
                    "invalid-proof",
                    "no proof that the account holds the key",
                );
            }
            let status = if state.keys.contains(&key) { 200 } else { 201 };
            if status == 201 {
                state.keys.push(key);
            }
            Answer::Json(status, json!({"public_key": key.to_string()}))
        }
        ("GET", ["v1", "account"]) => {
            if !authorized {
                return error(401, "unauthorized", "the token is not valid");
            }
            Answer::Json(
                200,
                json!({"name": ACCOUNT, "role": "publisher", "registry": REGISTRY_ID}),
            )
        }
        ("POST", ["v1", "plugins"]) => publish(request, &mut state, authorized),
        ("GET", ["v1", "plugins", id]) => {
            let versions: Vec<Value> = state
                .versions
                .iter()
                .rev()
                .filter(|v| v.id == *id)
                .map(|v| {
                    json!({"version": v.version, "digest": v.digest, "size": v.size,
                           "signer": v.signer, "yanked": v.yanked,
                           "published_at": "2025-01-01T00:00:00Z"})
                })
                .collect();
            if versions.is_empty() {
                return error(404, "not-found", "no such plugin");
            }
            Answer::Json(
                200,
                json!({"id": id, "name": id, "description": "", "owners": ["publisher"],
                       "versions": versions}),
            )
        }
        ("GET", ["v1", "plugins", id, version]) => {
            match state
                .versions
                .iter()
                .find(|v| v.id == *id && v.version == *version)
            {
                Some(v) => Answer::Json(
                    200,
                    json!({"id": v.id, "version": v.version, "digest": v.digest,
                           "size": v.size, "signer": v.signer, "signature": v.signature,
                           "yanked": v.yanked, "published_at": "2025-01-01T00:00:00Z",
                           "manifest": {}}),
                ),
                None => error(404, "not-found", "no such version"),
            }
        }
        ("GET", ["v1", "blobs", digest]) => match state.blobs.get(*digest) {
            Some(bytes) => Answer::Bytes(bytes.clone()),
            None => error(404, "not-found", "no such blob"),
        },
        _ => error(404, "not-found", "no such endpoint"),
    }
}

fn publish(request: &Request, state: &mut State, authorized: bool) -> Answer {
    if !authorized {
        return error(401, "unauthorized", "the token is not valid");
    }
    let bytes = &request.body;
    if bytes.len() > MAX_BODY {
        return error(413, "too-large", "the component is over the size cap");
    }
    let Some(signature) = request.headers.get("sandwit-signature") else {
        return error(400, "missing-signature", "no Sandwit-Signature header");
    };
    let digest = digest_of(bytes);
    let signer = Signature::parse(signature).ok().and_then(|signature| {
        state
            .keys
            .iter()
            .find(|k| k.verify_digest(&digest, &signature).is_ok())
    });
    let Some(signer) = signer.copied() else {
        return error(
            400,
            "bad-signature",
            "the signature does not verify with a key of the account",
        );
    };
    let report = validate(bytes);
    if report["ok"] != true {
        return Answer::Json(
            422,
            json!({"error": "invalid-plugin", "message": "the plugin is not acceptable",
                   "report": report}),
        );
    }
    let id = report["plugin"]["id"].as_str().unwrap().to_string();
    let version = report["plugin"]["version"].as_str().unwrap().to_string();
    if state
        .versions
        .iter()
        .any(|v| v.id == id && v.version == version)
    {
        return error(
            409,
            "version-exists",
            &format!("{id} {version} is already published"),
        );
    }
    let published = Version {
        id,
        version,
        digest: digest.clone(),
        size: bytes.len(),
        signer: signer.to_string(),
        signature: signature.clone(),
        yanked: false,
    };
    state.blobs.insert(digest.clone(), bytes.clone());
    state.versions.push(published.clone());
    Answer::Json(
        201,
        json!({"id": published.id, "version": published.version, "digest": digest,
               "size": bytes.len(), "signer": published.signer, "manifest": {}}),
    )
}

/// `sandwit validate --json` of the bytes: the report a 422 carries.
fn validate(bytes: &[u8]) -> Value {
    let dir = crate::common::tempdir("registry-uploads", &digest_of(bytes)[7..]);
    let file = dir.join("upload.wasm");
    std::fs::write(&file, bytes).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("validate")
        .arg("--json")
        .arg("--cache-dir")
        .arg(crate::common::cache_dir())
        .arg(&file)
        .env_remove("SANDWIT_POLICY")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}
