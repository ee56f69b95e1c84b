//! `sandwit registry`: a real server on loopback (`registry serve --addr
//! 127.0.0.1:0`), tokens from `registry token create`, and HTTP. The
//! behaviour tests run on both metadata backends: SQLite in the data
//! directory, and a PostgreSQL database of their own (`--db`, made by
//! `scripts/postgres createdb`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Value, json};

use crate::common::{artifacts, assert_succeeded, sandwit_with_token, tempdir};

/// The metadata backend a server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// Runs a test's `fn(Backend)` once on each backend: a module named after
/// the test with one test per backend.
macro_rules! on_both_backends {
    ($name:ident) => {
        mod $name {
            use super::Backend;

            #[test]
            fn sqlite() {
                super::$name(Backend::Sqlite)
            }

            #[test]
            fn postgres() {
                super::$name(Backend::Postgres)
            }
        }
    };
}

/// A PostgreSQL database of its own on the test cluster
/// (`scripts/postgres createdb`), dropped with it.
pub(crate) struct Database {
    pub(crate) url: String,
}

fn postgres_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres")
}

impl Database {
    pub(crate) fn create() -> Database {
        Database::create_on(&[])
    }

    /// One on the cluster that takes TLS connections only: its URL requires
    /// TLS and names the cluster's CA (`scripts/postgres start-tls`).
    pub(crate) fn create_tls() -> Database {
        Database::create_on(&["--tls"])
    }

    fn create_on(args: &[&str]) -> Database {
        // One at a time: the first starts the cluster.
        static STARTING: Mutex<()> = Mutex::new(());
        let _one = STARTING.lock().unwrap_or_else(|e| e.into_inner());
        let out = Command::new(postgres_script())
            .arg("createdb")
            .args(args)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert_succeeded(&out);
        Database {
            url: String::from_utf8(out.stdout).unwrap().trim().to_string(),
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // Best effort, never a panic (this may run while a test unwinds).
        let _ = Command::new(postgres_script())
            .args(["dropdb", &self.url])
            .status();
    }
}

/// A `sandwit registry serve` process; killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    data: PathBuf,
    /// The PostgreSQL database it keeps its metadata in (`--db`), if any.
    db: Option<Arc<Database>>,
    log: Arc<Mutex<String>>,
    log_lines: Mutex<Receiver<String>>,
    agent: ureq::Agent,
}

impl Server {
    fn start(name: &str, args: &[&str]) -> Server {
        Server::launch(name, args, None)
    }

    /// A server on `backend` (on PostgreSQL, a database of its own).
    fn start_on(backend: Backend, name: &str, args: &[&str]) -> Server {
        match backend {
            Backend::Sqlite => Server::launch(name, args, None),
            Backend::Postgres => Server::launch(
                &format!("{name}-postgres"),
                args,
                Some(Arc::new(Database::create())),
            ),
        }
    }

    /// A server with its metadata in `db` (SQLite in its data directory
    /// when `None`).
    pub(crate) fn launch(name: &str, args: &[&str], db: Option<Arc<Database>>) -> Server {
        let data = tempdir("registry", name);
        let mut child = Command::new(env!("CARGO_BIN_EXE_sandwit"))
            .args(["registry", "serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(&data)
            .args(db_args(db.as_deref()))
            .args(args)
            .env("SANDWIT_LOG", "info")
            .env_remove("SANDWIT_POLICY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let base = crate::common::listening_base(&mut child);
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, log_lines) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let line = without_colors(&line);
                kept.lock().unwrap().push_str(&line);
                kept.lock().unwrap().push('\n');
                let _ = tx.send(line);
            }
        });
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(180)))
            .build()
            .into();
        Server {
            child,
            base,
            data,
            db,
            log,
            log_lines: Mutex::new(log_lines),
            agent,
        }
    }

    pub(crate) fn token(&self, name: &str, role: &str) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
            .args(["registry", "token", "create", "--data"])
            .arg(&self.data)
            .args(db_args(self.db.as_deref()))
            .args(["--name", name, "--role", role])
            .output()
            .unwrap();
        assert_succeeded(&out);
        let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(token.starts_with("swr_") && token.len() == 47, "{token}");
        token
    }

    /// A request: status, headers and body (JSON when it is JSON).
    fn call(&self, method: &str, path: &str, token: Option<&str>, body: Body) -> Reply {
        let url = format!("{}{path}", self.base);
        let mut request = ureq::http::Request::builder().method(method).uri(&url);
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let request = match body {
            Body::None => request.body(Vec::new()),
            Body::Json(value) => request
                .header("Content-Type", "application/json")
                .body(serde_json::to_vec(&value).unwrap()),
            Body::Wasm(bytes, signature) => {
                let request = request.header("Content-Type", "application/wasm");
                match signature {
                    Some(sig) => request.header("Sandwit-Signature", sig),
                    None => request,
                }
                .body(bytes)
            }
            Body::Headers(headers) => {
                for (k, v) in headers {
                    request = request.header(k, v);
                }
                request.body(Vec::new())
            }
        }
        .unwrap();
        let mut response = self.agent.run(request).unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(128 << 20)
            .read_to_vec()
            .unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            bytes,
            json,
        }
    }

    fn get(&self, path: &str) -> Reply {
        self.call("GET", path, None, Body::None)
    }

    /// Publishes `bytes` signed with `key`.
    fn publish(&self, token: &str, key: &SigningKey, bytes: &[u8]) -> Reply {
        let signature = sign(key, bytes);
        self.call(
            "POST",
            "/v1/plugins",
            Some(token),
            Body::Wasm(bytes.to_vec(), Some(signature)),
        )
    }

    /// Registers `key` for the token's account, with the proof that it
    /// holds the key (for the account `GET /v1/account` names).
    fn register(&self, token: &str, key: &SigningKey) -> Reply {
        let account = self.call("GET", "/v1/account", Some(token), Body::None);
        account.expect(200, None);
        let name = account.json["name"].as_str().unwrap().to_string();
        let registry = account.json["registry"].as_str().unwrap().to_string();
        self.call(
            "POST",
            "/v1/keys",
            Some(token),
            Body::Json(key_request(key, &registry, &name)),
        )
    }

    /// The registry's id (`GET /v1/registry`).
    fn id(&self) -> String {
        let info = self.get("/v1/registry");
        info.expect(200, None);
        info.json["id"].as_str().unwrap().to_string()
    }

    /// Waits (at most two minutes) for a log line containing `needle`.
    fn wait_for_log(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log_lines.lock().unwrap().recv_timeout(left) {
                Ok(line) if line.contains(needle) => return,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("no log line with {needle:?}:\n{}", self.log())
                }
            }
        }
    }

    /// Waits for `n` more log lines containing `needle`, at most two
    /// minutes for each line (so up to `n` times that in all).
    fn wait_for_logs(&self, needle: &str, n: usize) {
        for _ in 0..n {
            self.wait_for_log(needle);
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The `host:port` the server listens on.
    fn authority(&self) -> &str {
        self.base.trim_start_matches("http://")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the server's log:\n{}", self.log());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `--db` arguments for `db`.
fn db_args(db: Option<&Database>) -> Vec<String> {
    db.map(|db| vec!["--db".to_string(), db.url.clone()])
        .unwrap_or_default()
}

/// `line` without its terminal color codes (`ESC [ ... m`).
fn without_colors(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('\x1b') {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        rest = rest.find('m').map_or("", |end| &rest[end + 1..]);
    }
    out.push_str(rest);
    out
}

enum Body {
    None,
    Json(Value),
    Wasm(Vec<u8>, Option<String>),
    Headers(Vec<(&'static str, String)>),
}

struct Reply {
    status: u16,
    headers: ureq::http::HeaderMap,
    bytes: Vec<u8>,
    json: Value,
}

impl Reply {
    /// Asserts the status and, for an error, its code.
    fn expect(&self, status: u16, code: Option<&str>) -> &Self {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.bytes)
        );
        if let Some(code) = code {
            assert_eq!(self.json["error"], code, "{}", self.json);
            assert!(self.json["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
        self
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap())
            .unwrap_or_default()
    }
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn public_key(key: &SigningKey) -> String {
    format!(
        "ed25519:{}",
        STANDARD.encode(key.verifying_key().as_bytes())
    )
}

/// The body of `POST /v1/keys` registering `key` for `account` of the
/// registry `registry` (its id).
fn key_request(key: &SigningKey, registry: &str, account: &str) -> Value {
    let statement = format!(
        "sandwit-key-registration-v2:{registry}:{account}:{}",
        public_key(key)
    );
    json!({
        "public_key": public_key(key),
        "proof": STANDARD.encode(key.sign(statement.as_bytes()).to_bytes()),
    })
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sandwit::component_hash(bytes))
}

/// The contract's detached signature of `bytes`.
fn sign(key: &SigningKey, bytes: &[u8]) -> String {
    let message = format!("sandwit-plugin-signature-v1:{}", digest(bytes));
    STANDARD.encode(key.sign(message.as_bytes()).to_bytes())
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

on_both_backends!(publish_then_read_search_and_download);
fn publish_then_read_search_and_download(backend: Backend) {
    let server = Server::start_on(backend, "publish", &[]);
    let alice = server.token("alice", "publisher");
    let key = key(1);
    server.register(&alice, &key).expect(201, None);
    // Registering it again changes nothing.
    let again = server.register(&alice, &key);
    again.expect(200, None);
    assert_eq!(again.json["public_key"], public_key(&key));

    let calc = read(artifacts::CALC);
    let published = server.publish(&alice, &key, &calc);
    published.expect(201, None);
    let p = &published.json;
    assert_eq!(
        (p["id"].as_str(), p["version"].as_str()),
        (Some("calc"), Some("0.1.0"))
    );
    assert_eq!(p["digest"], digest(&calc));
    assert_eq!(p["size"], calc.len());
    assert_eq!(p["signer"], public_key(&key));
    assert_eq!(p["manifest"]["methods"][0]["name"], "calculate_sum");

    // Versions are immutable.
    server
        .publish(&alice, &key, &calc)
        .expect(409, Some("version-exists"));

    let plugin = server.get("/v1/plugins/calc");
    plugin.expect(200, None);
    assert_eq!(plugin.json["owners"], json!(["alice"]));
    assert_eq!(plugin.json["name"], "Calculator");
    let v = &plugin.json["versions"][0];
    assert_eq!(v["version"], "0.1.0");
    assert_eq!(v["digest"], digest(&calc));
    assert_eq!(v["yanked"], false);
    assert!(v["published_at"].as_str().unwrap().ends_with('Z'), "{v}");

    let version = server.get("/v1/plugins/calc/0.1.0");
    version.expect(200, None);
    assert_eq!(version.json["signature"], sign(&key, &calc));
    let methods = version.json["manifest"]["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 2);
    assert_eq!(methods[0]["kind"], "tool");
    assert!(
        methods[0]["docstring"]
            .as_str()
            .unwrap()
            .contains("Add two integers")
    );
    assert!(methods[0]["params"][0]["schema"].is_object());

    // Search: over method names and docstrings too, with filters.
    let echo = read(artifacts::ECHO);
    server.publish(&alice, &key, &echo).expect(201, None);
    let ids = |path: &str| -> Vec<String> {
        let reply = server.get(path);
        reply.expect(200, None);
        assert_eq!(reply.json["per_page"], 20);
        reply.json["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("/v1/plugins"), ["calc", "echo"]);
    assert_eq!(ids("/v1/plugins?q=calculate_sum"), ["calc"]);
    assert_eq!(ids("/v1/plugins?q=ADD%20integers"), ["calc"]);
    assert_eq!(ids("/v1/plugins?q=no-such-word"), Vec::<String>::new());
    assert_eq!(ids("/v1/plugins?kind=tool&q=calc"), ["calc"]);
    assert_eq!(
        ids("/v1/plugins?kind=multimodal-agent&q=calc"),
        Vec::<String>::new()
    );
    assert_eq!(ids("/v1/plugins?capability=store"), Vec::<String>::new());
    assert_eq!(ids("/v1/plugins?page=2"), Vec::<String>::new());
    let listed = server.get("/v1/plugins?q=calc");
    assert_eq!(listed.json["total"], 1);
    assert_eq!(listed.json["plugins"][0]["latest_version"], "0.1.0");
    assert_eq!(listed.json["plugins"][0]["kinds"], json!(["tool"]));
    server
        .get("/v1/plugins?kind=gadget")
        .expect(400, Some("invalid-kind"));
    server
        .get("/v1/plugins?page=0")
        .expect(400, Some("invalid-page"));

    // The blob: the bytes, their digest as ETag, immutable.
    let path = format!("/v1/blobs/{}", digest(&calc));
    let blob = server.get(&path);
    blob.expect(200, None);
    assert_eq!(blob.bytes, calc);
    assert_eq!(blob.header("content-type"), "application/wasm");
    assert_eq!(blob.header("etag"), format!("\"{}\"", digest(&calc)));
    assert!(blob.header("cache-control").contains("immutable"));
    let cached = server.call(
        "GET",
        &path,
        None,
        Body::Headers(vec![("If-None-Match", format!("\"{}\"", digest(&calc)))]),
    );
    cached.expect(304, None);
    assert!(cached.bytes.is_empty());
    // On disk: content-addressed.
    let hex = &digest(&calc)["sha256:".len()..];
    assert_eq!(
        std::fs::read(server.data.join("blobs/sha256").join(hex)).unwrap(),
        calc
    );
    server
        .get(&format!("/v1/blobs/sha256:{}", "0".repeat(64)))
        .expect(404, Some("not-found"));

    // The log: every request with its outcome and account, never a token.
    let log = server.log();
    assert!(
        log.contains("path=\"/v1/plugins\" status=201") && log.contains("account=\"alice\""),
        "{log}"
    );
    assert!(!log.contains(&alice), "the token was logged:\n{log}");
    assert!(
        !log.contains(&alice["swr_".len()..]),
        "the token was logged"
    );
}

#[test]
fn names_in_urls_are_checked_first() {
    let server = Server::start("names", &[]);
    server
        .get("/v1/plugins/Not%20An%20Id")
        .expect(400, Some("invalid-id"));
    server
        .get("/v1/plugins/..%2F..%2Fetc")
        .expect(400, Some("invalid-id"));
    server
        .get("/v1/plugins/calc/latest")
        .expect(400, Some("invalid-version"));
    server
        .get("/v1/plugins/calc/0.1.0")
        .expect(404, Some("not-found"));
    server
        .get("/v1/blobs/sha256:..%2F..%2Fregistry.db")
        .expect(400, Some("invalid-digest"));
    server
        .get(&format!("/v1/blobs/sha256:{}", "A".repeat(64)))
        .expect(400, Some("invalid-digest"));
    server
        .get("/v1/nothing-here")
        .expect(404, Some("not-found"));
    server.get("/healthz").expect(200, None);
    let openapi = server.get("/openapi.json");
    openapi.expect(200, None);
    assert_eq!(openapi.json["openapi"], "3.1.0");
    for path in [
        "/v1/plugins",
        "/v1/plugins/{id}/{version}",
        "/v1/blobs/{digest}",
        "/v1/keys",
    ] {
        assert!(openapi.json["paths"][path].is_object(), "{path} missing");
    }
}

on_both_backends!(ownership_yank_and_owners);
fn ownership_yank_and_owners(backend: Backend) {
    let server = Server::start_on(backend, "owners", &[]);
    let (alice, bob, root) = (
        server.token("alice", "publisher"),
        server.token("bob", "publisher"),
        server.token("root", "admin"),
    );
    let (alice_key, bob_key) = (key(2), key(3));
    server.register(&alice, &alice_key).expect(201, None);
    server.register(&bob, &bob_key).expect(201, None);
    // A key belongs to one account.
    server
        .register(&bob, &alice_key)
        .expect(409, Some("key-taken"));

    let calc = read(artifacts::CALC);
    server.publish(&alice, &alice_key, &calc).expect(201, None);
    // The first publisher owns the id.
    server
        .publish(&bob, &bob_key, &calc)
        .expect(403, Some("not-an-owner"));
    server
        .call(
            "DELETE",
            "/v1/plugins/calc/0.1.0/yank",
            Some(&bob),
            Body::None,
        )
        .expect(403, Some("not-an-owner"));
    server
        .call("DELETE", "/v1/plugins/calc/0.1.0/yank", None, Body::None)
        .expect(401, Some("unauthorized"));

    // Yanked: hidden from search, marked, still downloadable.
    server
        .call(
            "DELETE",
            "/v1/plugins/calc/0.1.0/yank",
            Some(&alice),
            Body::None,
        )
        .expect(200, None);
    assert_eq!(server.get("/v1/plugins").json["total"], 0);
    assert_eq!(
        server.get("/v1/plugins/calc").json["versions"][0]["yanked"],
        true
    );
    assert_eq!(server.get("/v1/plugins/calc/0.1.0").json["yanked"], true);
    server
        .get(&format!("/v1/blobs/{}", digest(&calc)))
        .expect(200, None);
    server
        .call(
            "PUT",
            "/v1/plugins/calc/0.1.0/unyank",
            Some(&alice),
            Body::None,
        )
        .expect(200, None);
    assert_eq!(server.get("/v1/plugins").json["total"], 1);
    server
        .call(
            "DELETE",
            "/v1/plugins/calc/9.9.9/yank",
            Some(&alice),
            Body::None,
        )
        .expect(404, Some("not-found"));

    // Owners invite owners; an invited account owns nothing until it
    // accepts, and then may yank.
    let add = |token: &str, users: Value| {
        server.call(
            "PUT",
            "/v1/plugins/calc/owners",
            Some(token),
            Body::Json(json!({"users": users})),
        )
    };
    add(&bob, json!(["bob"])).expect(403, Some("not-an-owner"));
    add(&alice, json!(["nobody"])).expect(404, Some("not-found"));
    add(&alice, json!("bob")).expect(400, Some("invalid-body"));
    let owners = add(&alice, json!(["bob"]));
    owners.expect(200, None);
    assert_eq!(owners.json["users"], json!(["alice"]));
    assert_eq!(owners.json["invited"], json!(["bob"]));
    let yank_as = |token: &str| {
        server.call(
            "DELETE",
            "/v1/plugins/calc/0.1.0/yank",
            Some(token),
            Body::None,
        )
    };
    yank_as(&bob).expect(403, Some("not-an-owner"));
    let accept = |token: &str| {
        server.call(
            "POST",
            "/v1/plugins/calc/ownership",
            Some(token),
            Body::None,
        )
    };
    // Only the invited account can accept, once.
    accept(&root).expect(404, Some("not-found"));
    let accepted = accept(&bob);
    accepted.expect(200, None);
    assert_eq!(accepted.json["users"], json!(["alice", "bob"]));
    assert_eq!(accepted.json["invited"], json!([]));
    accept(&bob).expect(404, Some("not-found"));
    assert_eq!(
        server.get("/v1/plugins/calc/owners").json["users"],
        json!(["alice", "bob"])
    );
    server
        .call(
            "DELETE",
            "/v1/plugins/calc/0.1.0/yank",
            Some(&bob),
            Body::None,
        )
        .expect(200, None);
    // An admin may manage any plugin.
    server
        .call(
            "PUT",
            "/v1/plugins/calc/0.1.0/unyank",
            Some(&root),
            Body::None,
        )
        .expect(200, None);
    assert_eq!(
        server.get("/v1/plugins/calc").json["versions"][0]["yanked"],
        false
    );

    // Owners can be removed (an owner may leave), never the last one.
    let remove = |token: &str, user: &str| {
        server.call(
            "DELETE",
            &format!("/v1/plugins/calc/owners/{user}"),
            Some(token),
            Body::None,
        )
    };
    remove(&alice, "nobody").expect(404, Some("not-found"));
    remove(&alice, "root").expect(404, Some("not-found"));
    let removed = remove(&alice, "bob");
    removed.expect(200, None);
    assert_eq!(removed.json["users"], json!(["alice"]));
    yank_as(&bob).expect(403, Some("not-an-owner"));
    remove(&bob, "alice").expect(403, Some("not-an-owner"));
    remove(&alice, "alice").expect(409, Some("last-owner"));
    // Not even an admin removes the last owner.
    remove(&root, "alice").expect(409, Some("last-owner"));
    // An invitation can be withdrawn before it is accepted.
    add(&alice, json!(["bob"])).expect(200, None);
    let withdrawn = remove(&alice, "bob");
    withdrawn.expect(200, None);
    assert_eq!(withdrawn.json["invited"], json!([]));
    accept(&bob).expect(404, Some("not-found"));
    // An owner may leave while another remains.
    add(&root, json!(["bob"])).expect(200, None);
    accept(&bob).expect(200, None);
    let left = remove(&alice, "alice");
    left.expect(200, None);
    assert_eq!(left.json["users"], json!(["bob"]));
    yank_as(&alice).expect(403, Some("not-an-owner"));

    // An owner's invitations go when it is removed: carol, invited by
    // alice while alice owned calc, cannot accept once alice is removed.
    let carol = server.token("carol", "publisher");
    add(&root, json!(["alice"])).expect(200, None);
    accept(&alice).expect(200, None);
    add(&alice, json!(["carol"])).expect(200, None);
    let removed = remove(&bob, "alice");
    removed.expect(200, None);
    assert_eq!(removed.json["users"], json!(["bob"]));
    assert_eq!(removed.json["invited"], json!([]));
    accept(&carol).expect(404, Some("not-found"));
    assert_eq!(
        server.get("/v1/plugins/calc/owners").json["users"],
        json!(["bob"])
    );
    // ...and so when an owner leaves by itself.
    add(&bob, json!(["alice"])).expect(200, None);
    accept(&alice).expect(200, None);
    add(&alice, json!(["carol"])).expect(200, None);
    remove(&alice, "alice").expect(200, None);
    accept(&carol).expect(404, Some("not-found"));
    // An admin's invitation holds, though the admin owns nothing.
    add(&root, json!(["carol"])).expect(200, None);
    accept(&carol).expect(200, None);
}

on_both_backends!(publish_explains_a_quota_and_a_taken_key_by_their_code);
/// `sandwit publish` names the cause of a refusal by its error code, not
/// its status: a 413 past the account's quota is not "too large", a 409
/// for a key another account registered is not "already published".
fn publish_explains_a_quota_and_a_taken_key_by_their_code(backend: Backend) {
    let server = Server::start_on(backend, "publish-refusals", &["--account-quota-mib", "1"]);
    let (alice, bob) = (
        server.token("alice", "publisher"),
        server.token("bob", "publisher"),
    );
    let dir = tempdir("registry", "publish-refusals-client");
    let sandwit = |token: &str, args: &[&str]| {
        let (code, _, err) = sandwit_with_token(token, args);
        (code, err)
    };
    let key = dir.join("publisher.key");
    let (code, err) = sandwit(&alice, &["keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    // Past the quota (1 MiB), well under the size cap.
    let big = dir.join("big.wasm");
    std::fs::write(&big, vec![0u8; 2 << 20]).unwrap();
    let publish = |token: &str| {
        sandwit(
            token,
            &[
                "publish",
                big.to_str().unwrap(),
                "--no-local-check",
                "--registry",
                &server.base,
                "--key",
                key.to_str().unwrap(),
            ],
        )
    };
    let (code, err) = publish(&alice);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("storage quota") && err.contains("(413)"),
        "{err}"
    );
    assert!(!err.contains("larger than the registry accepts"), "{err}");
    // The key is alice's now: bob cannot register it.
    let (code, err) = publish(&bob);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("registered to another account") && err.contains("(409)"),
        "{err}"
    );
    assert!(!err.contains("already published"), "{err}");
}

on_both_backends!(a_key_is_registered_only_with_proof_of_possession);
/// A key is registered only with its proof of possession: its signature
/// of `sandwit-key-registration-v2:<registry>:<account>:<key>`. Nobody can claim a key
/// they do not hold (squatting it, so its owner cannot register it), nor
/// replay another account's proof, nor pass a plugin signature off as one.
fn a_key_is_registered_only_with_proof_of_possession(backend: Backend) {
    let server = Server::start_on(backend, "keys", &[]);
    let (bob, mallory) = (
        server.token("bob", "publisher"),
        server.token("mallory", "publisher"),
    );
    let bob_key = key(12);
    let claim =
        |token: &str, body: Value| server.call("POST", "/v1/keys", Some(token), Body::Json(body));
    // Mallory knows bob's public key, not its secret half.
    claim(&mallory, json!({"public_key": public_key(&bob_key)})).expect(400, Some("invalid-body"));
    claim(
        &mallory,
        json!({"public_key": public_key(&bob_key), "proof": "not base64!"}),
    )
    .expect(400, Some("invalid-proof"));
    // A proof made with another key.
    let id = server.id();
    let mut forged = key_request(&key(13), &id, "mallory");
    forged["public_key"] = public_key(&bob_key).into();
    claim(&mallory, forged).expect(400, Some("invalid-proof"));
    // Bob's own proof, for bob's account, replayed for mallory's.
    claim(&mallory, key_request(&bob_key, &id, "bob")).expect(400, Some("invalid-proof"));
    // A signature bob made of a plugin (another domain) is no proof.
    let plugin_signature = sign(&bob_key, &read(artifacts::CALC));
    claim(
        &mallory,
        json!({"public_key": public_key(&bob_key), "proof": plugin_signature}),
    )
    .expect(400, Some("invalid-proof"));
    // The key is still bob's to register.
    let account = server.call("GET", "/v1/account", Some(&bob), Body::None);
    account.expect(200, None);
    assert_eq!(
        account.json,
        json!({"name": "bob", "role": "publisher", "registry": id})
    );
    claim(&bob, key_request(&bob_key, &id, "bob")).expect(201, None);
    server
        .call("GET", "/v1/account", None, Body::None)
        .expect(401, Some("unauthorized"));
}

on_both_backends!(uploads_past_the_account_quota_are_refused);
/// Each account may publish up to its storage quota: past it an upload is
/// refused (413 quota-exceeded, naming the quota, the size and what is
/// used) before it is checked.
fn uploads_past_the_account_quota_are_refused(backend: Backend) {
    let server = Server::start_on(backend, "quota", &["--account-quota-mib", "1"]);
    let alice = server.token("alice", "publisher");
    let key = key(14);
    server.register(&alice, &key).expect(201, None);
    let calc = read(artifacts::CALC);
    let published = server.publish(&alice, &key, &calc);
    published.expect(201, None);
    // What calc's version stores: its bytes, its manifest and its search
    // text (at least the manifest's description, twice).
    let probe = server.publish(&alice, &key, &vec![0u8; 1 << 20]);
    probe.expect(413, Some("quota-exceeded"));
    let message = probe.json["message"].as_str().unwrap();
    let used: usize = message
        .rsplit_once('(')
        .and_then(|(_, rest)| rest.split_once(" bytes used"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no bytes used in {message}"));
    let description = published.json["manifest"]["description"].as_str().unwrap();
    assert!(
        used >= calc.len() + 2 * description.len(),
        "{used} bytes used for {} bytes of calc",
        calc.len()
    );
    // What is left, plus one byte: refused, and never checked.
    let big = vec![0u8; (1 << 20) - used + 1];
    let refused = server.publish(&alice, &key, &big);
    refused.expect(413, Some("quota-exceeded"));
    let message = refused.json["message"].as_str().unwrap();
    for part in [
        format!("upload of {} bytes", big.len()),
        "quota of 1048576 bytes".to_string(),
        format!("({used} bytes used;"),
        "account alice".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message}");
    }
    // Exactly what is left is not past it, and goes on to the check.
    let fits = vec![0u8; (1 << 20) - used];
    server
        .publish(&alice, &key, &fits)
        .expect(422, Some("invalid-plugin"));
    // The log is in order: the refused upload, before, was never checked.
    server.wait_for_log(&format!("digest={}", digest(&fits)));
    assert!(
        !server.log().contains(&format!("digest={}", digest(&big))),
        "{}",
        server.log()
    );
}

on_both_backends!(signatures_and_tokens_are_checked);
fn signatures_and_tokens_are_checked(backend: Backend) {
    let server = Server::start_on(backend, "signatures", &[]);
    let alice = server.token("alice", "publisher");
    let calc = read(artifacts::CALC);
    let registered = key(4);
    // No key registered yet.
    server
        .publish(&alice, &registered, &calc)
        .expect(400, Some("bad-signature"));
    server.register(&alice, &registered).expect(201, None);
    // Signed by a key that is not the account's.
    server
        .publish(&alice, &key(5), &calc)
        .expect(400, Some("bad-signature"));
    // The account's key, over other bytes.
    let wrong = sign(&registered, b"other bytes");
    server
        .call(
            "POST",
            "/v1/plugins",
            Some(&alice),
            Body::Wasm(calc.clone(), Some(wrong)),
        )
        .expect(400, Some("bad-signature"));
    server
        .call(
            "POST",
            "/v1/plugins",
            Some(&alice),
            Body::Wasm(calc.clone(), Some("!!".into())),
        )
        .expect(400, Some("bad-signature"));
    server
        .call(
            "POST",
            "/v1/plugins",
            Some(&alice),
            Body::Wasm(calc.clone(), None),
        )
        .expect(400, Some("missing-signature"));
    // Without a token, or with one the registry did not issue.
    let signature = sign(&registered, &calc);
    server
        .call(
            "POST",
            "/v1/plugins",
            None,
            Body::Wasm(calc.clone(), Some(signature.clone())),
        )
        .expect(401, Some("unauthorized"));
    let forged = format!("swr_{}", "A".repeat(43));
    server
        .call(
            "POST",
            "/v1/plugins",
            Some(&forged),
            Body::Wasm(calc.clone(), Some(signature)),
        )
        .expect(401, Some("unauthorized"));
    server.register(&alice, &key(6)).expect(201, None);
    server
        .call(
            "POST",
            "/v1/keys",
            Some(&alice),
            Body::Json(json!({"public_key": "ed25519:AAAA", "proof": "AAAA"})),
        )
        .expect(400, Some("invalid-public-key"));
    // Nothing was published.
    server
        .get("/v1/plugins/calc")
        .expect(404, Some("not-found"));

    // Tokens: a role is one of two, and an account keeps its role.
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .args(["registry", "token", "create", "--data"])
        .arg(&server.data)
        .args(db_args(server.db.as_deref()))
        .args(["--name", "alice", "--role", "admin"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("account alice exists with the role publisher"),
        "{err}"
    );
}

#[test]
fn hostile_uploads_get_their_report_and_the_service_keeps_serving() {
    let server = Server::start("hostile", &[]);
    let alice = server.token("alice", "publisher");
    let key = key(7);
    server.register(&alice, &key).expect(201, None);
    let problems = |reply: &Reply| -> Vec<String> {
        reply.expect(422, Some("invalid-plugin"));
        let report = &reply.json["report"];
        assert_eq!(report["ok"], false);
        assert_eq!(report["plugin"], Value::Null);
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect()
    };

    let junk = server.publish(&alice, &key, b"this is not wasm at all");
    assert!(
        problems(&junk)[0].contains("not a WebAssembly binary"),
        "{}",
        junk.json
    );
    assert_eq!(
        junk.json["report"]["file"],
        digest(b"this is not wasm at all")
    );
    let core = server.publish(&alice, &key, b"\0asm\x01\0\0\0");
    assert!(problems(&core)[0].contains("core WebAssembly module, not a component"));

    // The same report `sandwit validate --json` gives, but for the file name.
    let bad = read(artifacts::BAD_MANIFEST);
    let reply = server.publish(&alice, &key, &bad);
    let listed = problems(&reply);
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .args(["--no-cache", "validate", "--json", artifacts::BAD_MANIFEST])
        .output()
        .unwrap();
    let mut local: Value = serde_json::from_slice(&out.stdout).unwrap();
    local["file"] = digest(&bad).into();
    assert_eq!(reply.json["report"], local);
    assert_eq!(listed.len(), 7, "{listed:?}");

    // A plugin whose describe() never returns: stopped at the host's limits.
    let spin = server.publish(&alice, &key, &read(artifacts::SPIN_DESCRIBE));
    let p = problems(&spin);
    assert!(p.iter().any(|p| p.contains("describe")), "{p:?}");

    // A body past the host's component size cap: 413, unread.
    let mut stream = TcpStream::connect(server.authority()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /v1/plugins HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\n\
         Sandwit-Signature: {}\r\nContent-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        sign(&key, b""),
        sandwit::MAX_COMPONENT_BYTES + 1
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    drop(stream);
    // The same without a length: the server stops reading at the cap.
    let chunked = TcpStream::connect(server.authority()).unwrap();
    let mut writer = chunked.try_clone().unwrap();
    chunked
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let sig = sign(&key, b"");
    let sender = std::thread::spawn(move || {
        let _ = write!(
            writer,
            "POST /v1/plugins HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\n\
             Sandwit-Signature: {sig}\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..(sandwit::MAX_COMPONENT_BYTES >> 20) + 2 {
            if write!(writer, "{:x}\r\n", chunk.len()).is_err()
                || writer.write_all(&chunk).is_err()
                || writer.write_all(b"\r\n").is_err()
            {
                break;
            }
        }
        let _ = writer.write_all(b"0\r\n\r\n");
    });
    let mut head = Vec::new();
    let _ = BufReader::new(&chunked).read_until(b'\n', &mut head);
    assert!(
        head.starts_with(b"HTTP/1.1 413"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    drop(chunked);
    let _ = sender.join();

    server.get("/healthz").expect(200, None);
    assert_eq!(server.get("/v1/plugins").json["total"], 0);
}

#[test]
fn a_check_past_the_workers_budget_is_a_rejection_naming_it() {
    // Compiling the CPython component takes seconds of CPU and far more
    // memory than its size: with a budget of one CPU second the worker is
    // stopped, and the upload gets its report.
    let server = Server::start("budget", &["--max-check-seconds", "1"]);
    let alice = server.token("alice", "publisher");
    let key = key(8);
    server.register(&alice, &key).expect(201, None);
    let reply = server.publish(&alice, &key, &read(artifacts::PYTHON));
    reply.expect(422, Some("invalid-plugin"));
    let problem = reply.json["report"]["problems"][0].as_str().unwrap();
    assert!(problem.contains("more than 1 s of CPU time"), "{problem}");
    server.get("/healthz").expect(200, None);
}

#[test]
fn checks_at_once_are_bounded_503_beyond() {
    let server = Arc::new(Server::start("busy", &["--max-validations", "1"]));
    let alice = server.token("alice", "publisher");
    let key = key(9);
    server.register(&alice, &key).expect(201, None);
    let spinning = {
        let (server, alice, key) = (server.clone(), alice.clone(), key.clone());
        std::thread::spawn(move || {
            server
                .publish(&alice, &key, &read(artifacts::SPIN_DESCRIBE))
                .status
        })
    };
    server.wait_for_log("validating");
    let busy = server.publish(&alice, &key, &read(artifacts::CALC));
    busy.expect(503, Some("busy"));
    assert!(busy.header("retry-after").parse::<u64>().unwrap() >= 1);
    assert_eq!(spinning.join().unwrap(), 422);
    // Free again.
    server
        .publish(&alice, &key, &read(artifacts::CALC))
        .expect(201, None);
}

#[test]
fn rate_limits_answer_429_with_retry_after() {
    let server = Server::start(
        "rate",
        &[
            "--address-burst",
            "5",
            "--address-rate",
            "1",
            "--token-burst",
            "2",
            "--token-rate",
            "1",
        ],
    );
    let alice = server.token("alice", "publisher");
    let id = server.id();
    // Per token: two at once, then refused...
    server.get("/v1/plugins").expect(200, None);
    for status in [201, 200] {
        server
            .call(
                "POST",
                "/v1/keys",
                Some(&alice),
                Body::Json(key_request(&key(10), &id, "alice")),
            )
            .expect(status, None);
    }
    let limited = server.call("GET", "/v1/plugins", Some(&alice), Body::None);
    limited.expect(429, Some("rate-limited"));
    assert!(limited.header("retry-after").parse::<u64>().unwrap() >= 1);
    // ...and per address: five in all, the refused one included.
    let limited = server.get("/healthz");
    limited.expect(429, Some("rate-limited"));
    assert!(
        limited.json["message"]
            .as_str()
            .unwrap()
            .contains("address")
    );
    assert!(limited.header("retry-after").parse::<u64>().unwrap() >= 1);
}

#[test]
fn shutdown_finishes_uploads_in_flight() {
    let server = Arc::new(Server::start("shutdown", &[]));
    let alice = server.token("alice", "publisher");
    let key = key(11);
    server.register(&alice, &key).expect(201, None);
    let upload = {
        let (server, alice, key) = (server.clone(), alice.clone(), key.clone());
        std::thread::spawn(move || server.publish(&alice, &key, &read(artifacts::CALC)).status)
    };
    server.wait_for_log("validating");
    // SAFETY: kill(2) on the server's pid, which this test started.
    assert_eq!(
        unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) },
        0
    );
    assert_eq!(upload.join().unwrap(), 201);
    server.wait_for_log("shutting down");
    let server = Arc::into_inner(server).unwrap();
    let mut server = server;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

/// The whole path a marketplace exists for, with the real server and the
/// real client commands: a publisher makes a key and publishes calc; an
/// operator installs it trusting that key and runs it with signatures
/// required; a yanked version is not what a new install picks; bytes
/// changed on the registry's disk are refused by the installing host.
#[test]
fn publish_install_and_run_end_to_end() {
    let server = Server::start("end-to-end", &[]);
    let token = server.token("ada", "publisher");
    let dir = tempdir("registry", "end-to-end-client");
    let sandwit = |args: &[&str]| sandwit_with_token(&token, args);
    let (public, plugins) = publish_and_install(&server, &token, &dir, artifacts::CALC, "calc");
    let digest = digest(&read(artifacts::CALC));
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[registry]\ntrusted_keys = [\"{public}\"]\nrequire_signature = true\n"),
    )
    .unwrap();
    let run = || {
        sandwit(&[
            "--policy",
            policy.to_str().unwrap(),
            "run",
            "--plugins",
            plugins.to_str().unwrap(),
            "--python",
            artifacts::PYTHON,
            "-c",
            "print(calculate_sum(20, 22))",
        ])
    };
    let (code, out, err) = run();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("42\n"), "{out}");

    // Yanked, the only version is no longer what a new install resolves to.
    server
        .call(
            "DELETE",
            "/v1/plugins/calc/0.1.0/yank",
            Some(&token),
            Body::None,
        )
        .expect(200, None);
    let (code, _, err) = sandwit(&[
        "install",
        "calc",
        "--registry",
        &server.base,
        "--dir",
        dir.join("other").to_str().unwrap(),
        "--trust",
        &public,
    ]);
    assert_ne!(code, Some(0));
    assert!(err.contains("yanked"), "{err}");

    // The blob on the registry's disk changed behind its back: the install
    // refuses the bytes and leaves nothing behind.
    let hex = digest.strip_prefix("sha256:").unwrap();
    let blob = server.data.join("blobs/sha256").join(hex);
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&blob, &bytes).unwrap();
    let fresh = dir.join("tampered");
    let (code, _, err) = sandwit(&[
        "install",
        "calc@0.1.0",
        "--allow-yanked",
        "--registry",
        &server.base,
        "--dir",
        fresh.to_str().unwrap(),
        "--trust",
        &public,
    ]);
    assert_ne!(code, Some(0));
    assert!(err.contains("digest"), "{err}");
    assert!(!fresh.join("calc.wasm").exists());

    // The installed copy changed on the host: the run refuses it.
    let installed = plugins.join("calc.wasm");
    let mut bytes = std::fs::read(&installed).unwrap();
    bytes[last] ^= 1;
    std::fs::write(&installed, &bytes).unwrap();
    let (code, _, err) = run();
    assert_eq!(code, Some(1));
    assert!(err.contains("calc.wasm") && err.contains(hex), "{err}");
}

/// A key pair made by `sandwit keygen` in `dir`, `component` published
/// to `server` with it by the account of `token` and listed as signed by
/// it, then installed as `id` into `dir/plugins` trusting that key: the
/// public key and the plugins folder.
fn publish_and_install(
    server: &Server,
    token: &str,
    dir: &std::path::Path,
    component: &str,
    id: &str,
) -> (String, PathBuf) {
    let sandwit = |args: &[&str]| sandwit_with_token(token, args);
    let key = dir.join("publisher.key");
    let (code, public, err) = sandwit(&["keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let public = public.trim().to_string();
    let (code, out, err) = sandwit(&[
        "publish",
        component,
        "--registry",
        &server.base,
        "--key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let digest = digest(&read(component));
    assert!(out.contains(&digest), "{out}");
    let listed = server
        .get(&format!("/v1/plugins/{id}"))
        .expect(200, None)
        .json
        .clone();
    assert_eq!(listed["versions"][0]["digest"], digest.as_str());
    assert_eq!(listed["versions"][0]["signer"], public.as_str());
    let plugins = dir.join("plugins");
    let (code, _, err) = sandwit(&[
        "install",
        id,
        "--registry",
        &server.base,
        "--dir",
        plugins.to_str().unwrap(),
        "--trust",
        &public,
    ]);
    assert_eq!(code, Some(0), "{err}");
    (public, plugins)
}

/// A JavaScript plugin (the `jotter` example, built by `sandwit plugin
/// build`) goes through the registry as any other: the registry's check
/// accepts it, and the installed copy answers AI code with its grant.
#[test]
fn a_javascript_plugin_is_published_installed_and_called() {
    let jotter = crate::js_plugins::built("sdk/js/examples/jotter");
    let jotter = jotter.to_str().unwrap();
    let server = Server::start("javascript", &[]);
    let token = server.token("ada", "publisher");
    let dir = tempdir("registry", "javascript-client");
    let sandwit = |args: &[&str]| sandwit_with_token(&token, args);
    let (public, plugins) = publish_and_install(&server, &token, &dir, jotter, "jotter");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[registry]\ntrusted_keys = [\"{public}\"]\nrequire_signature = true\n\
             [plugins.jotter]\n{}grant = [\"store\"]\n",
            crate::common::pin_line(jotter)
        ),
    )
    .unwrap();
    let (code, out, err) = sandwit(&[
        "--policy",
        policy.to_str().unwrap(),
        "--store",
        dir.join("store.db").to_str().unwrap(),
        "run",
        "--plugins",
        plugins.to_str().unwrap(),
        "--python",
        artifacts::PYTHON,
        "--user-id",
        "ada",
        "-c",
        "jot('from the registry')\nprint(jottings())",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("['from the registry']\n"), "{out}");
}

/// A zip bomb sent as a component: a gzip stream of 256 MiB of zeros
/// (about 256 KiB on the wire), declared `Content-Encoding: gzip`. The
/// registry inflates nothing: it checks the bytes it was sent, which are
/// not a component, and keeps serving.
#[test]
fn a_compressed_bomb_is_checked_as_the_bytes_it_is() {
    let server = Server::start("zip-bomb", &[]);
    let alice = server.token("alice", "publisher");
    let key = key(9);
    server.register(&alice, &key).expect(201, None);
    let bomb = Command::new("python3")
        .args([
            "-c",
            "import gzip, sys; sys.stdout.buffer.write(gzip.compress(bytes(256 << 20), 9))",
        ])
        .output()
        .unwrap();
    assert_succeeded(&bomb);
    let bomb = bomb.stdout;
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let url = format!("{}/v1/plugins", server.base);
    let request = ureq::http::Request::builder()
        .method("POST")
        .uri(&url)
        .header("Authorization", format!("Bearer {alice}"))
        .header("Content-Type", "application/wasm")
        .header("Content-Encoding", "gzip")
        .header("Sandwit-Signature", sign(&key, &bomb))
        .body(bomb.clone())
        .unwrap();
    let mut response = server.agent.run(request).unwrap();
    assert_eq!(response.status().as_u16(), 422);
    let body: Value = response.body_mut().read_json().unwrap();
    let problem = body["report"]["problems"][0].as_str().unwrap_or_default();
    assert!(problem.contains("not a WebAssembly binary"), "{body}");
    assert_eq!(body["report"]["file"], digest(&bomb));
    server.get("/healthz").expect(200, None);
}

/// An upload by `token` signed with `key` that declares 1 MB and sends
/// four bytes of it: it holds an upload place for as long as it is open.
fn slow_upload(server: &Server, token: &str, key: &SigningKey) -> TcpStream {
    let mut stream = TcpStream::connect(server.authority()).unwrap();
    write!(
        stream,
        "POST /v1/plugins HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Sandwit-Signature: {}\r\nContent-Type: application/wasm\r\n\
         Content-Length: 1000000\r\n\r\n\0asm",
        sign(key, b""),
    )
    .unwrap();
    stream
}

/// Uploads whose bodies are still arriving hold their place: with one check
/// at once the registry reads at most four uploads (two per account), and a
/// fifth is told to come back (503) before its body is read, so slow
/// senders cannot make it hold any number of 64 MiB bodies.
///
/// The test waits for the server's own signal that each slow upload holds
/// its place (the log line `reading an upload`) before it sends the fifth.
/// An earlier version polled with fifth uploads instead, and on a loaded
/// machine a poll that held a place while a slow upload's headers arrived
/// got that upload refused (503, never retried): three slow uploads held
/// places, every later poll found the fourth free, and no 503 came.
#[test]
fn uploads_in_flight_are_bounded_503_beyond() {
    let server = Server::start("uploads", &["--max-validations", "1"]);
    let alice = server.token("alice", "publisher");
    let bob = server.token("bob", "publisher");
    let key = key(11);
    let bob_key = self::key(25);
    server.register(&alice, &key).expect(201, None);
    server.register(&bob, &bob_key).expect(201, None);
    let slow: Vec<TcpStream> = [
        (&alice, &key),
        (&alice, &key),
        (&bob, &bob_key),
        (&bob, &bob_key),
    ]
    .into_iter()
    .map(|(token, key)| slow_upload(&server, token, key))
    .collect();
    server.wait_for_logs("reading an upload", 4);
    // A third account, with places of its own left, finds the registry's
    // taken.
    let carol = server.token("carol", "publisher");
    let busy = server.publish(&carol, &key, b"not a component");
    busy.expect(503, Some("busy"));
    assert!(busy.header("retry-after").parse::<u64>().unwrap() >= 1);
    // The slow senders hang up: each upload ends (its body cut short), and
    // its place is free again.
    drop(slow);
    server.wait_for_logs("path=\"/v1/plugins\" status=400", 4);
    server
        .publish(&alice, &key, &read(artifacts::CALC))
        .expect(201, None);
    server.get("/healthz").expect(200, None);
}

/// The resident memory of the server process, in bytes (`VmRSS`).
fn resident_bytes(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// A multipart form body with `boundary`: each part's name, file name (for
/// a file) and bytes, in order.
fn form_body(boundary: &str, parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, file, bytes) in parts {
        write!(
            body,
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\""
        )
        .unwrap();
        if let Some(file) = file {
            write!(
                body,
                "; filename=\"{file}\"\r\nContent-Type: application/wasm"
            )
            .unwrap();
        }
        body.extend_from_slice(b"\r\n\r\n");
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    write!(body, "--{boundary}--\r\n").unwrap();
    body
}

/// Posts `body` to `/upload` as a form with `boundary` on a connection of
/// its own, sending all of it before reading the answer (small bodies: the
/// server's socket takes them whole): the answer's status line and body.
fn post_form(server: &Server, boundary: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(server.authority()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /upload HTTP/1.1\r\nHost: {}\r\nContent-Type: multipart/form-data; \
         boundary={boundary}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.authority(),
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The upload form reads at most a few KiB of a stranger's post: bodies of
/// many MiB with no boundary, a huge preamble or huge part headers, from a
/// client without a token, many at once, are refused (413) after the
/// form's head, and the server's resident memory grows by a few MiB, not
/// by the bodies (before the allowance it buffered each, up to 64 MiB, and
/// rescanned it on every read). Part headers past the cap are refused after
/// the token too, and a real upload through the form still publishes.
#[test]
fn the_upload_form_reads_no_more_than_its_head_for_a_stranger() {
    let server = Server::start(
        "form-head",
        &[
            "--max-connections-per-address",
            "64",
            "--request-timeout",
            "60",
        ],
    );
    let alice = server.token("alice", "publisher");
    let key = key(21);
    server.register(&alice, &key).expect(201, None);

    // One of each, small enough to be sent whole: the refusal names why.
    let no_boundary = vec![b'a'; 16 << 10];
    let answer = post_form(&server, "B", &no_boundary);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("before its API token field"), "{answer}");
    let mut huge_header =
        b"--B\r\nContent-Disposition: form-data; name=\"token\"\r\nX-Pad: ".to_vec();
    huge_header.extend(vec![b'a'; 16 << 10]);
    let answer = post_form(&server, "B", &huge_header);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // After the token, a part's headers are capped all the same.
    let mut after_token = form_body("B", &[("token", None, alice.as_bytes())]);
    after_token.truncate(after_token.len() - "--B--\r\n".len());
    after_token
        .extend_from_slice(b"--B\r\nContent-Disposition: form-data; name=\"component\"\r\nX-Pad: ");
    after_token.extend(vec![b'a'; 16 << 10]);
    let answer = post_form(&server, "B", &after_token);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("a part&#39;s headers") || answer.contains("a part's headers"),
        "{answer}"
    );

    // Many at once, of many MiB each.
    let before = resident_bytes(&server);
    const EACH: usize = 16 << 20;
    let senders: Vec<_> = (0..24)
        .map(|i| {
            let authority = server.authority().to_string();
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(&authority).unwrap();
                stream
                    .set_write_timeout(Some(Duration::from_secs(60)))
                    .unwrap();
                let head = match i % 3 {
                    0 => Vec::new(),
                    1 => b"preamble line\r\n".repeat(64),
                    _ => {
                        b"--B\r\nContent-Disposition: form-data; name=\"token\"\r\nX-Pad: ".to_vec()
                    }
                };
                let _ = write!(
                    stream,
                    "POST /upload HTTP/1.1\r\nHost: {authority}\r\nContent-Type: \
                     multipart/form-data; boundary=B\r\nContent-Length: {EACH}\r\n\r\n"
                );
                let _ = stream.write_all(&head);
                let chunk = vec![b'x'; 64 << 10];
                let mut sent = head.len();
                // Until the server hangs up (or stops reading: the timeout).
                while sent < EACH
                    && stream
                        .write_all(&chunk[..chunk.len().min(EACH - sent)])
                        .is_ok()
                {
                    sent += chunk.len();
                }
            })
        })
        .collect();
    server.wait_for_logs("path=\"/upload\" status=413", 24);
    for sender in senders {
        sender.join().unwrap();
    }
    let after = resident_bytes(&server);
    // Each connection's read buffer and an 8 KiB head, far below the
    // 384 MiB the bodies add up to (the figure is generous for the
    // allocator's own keeping).
    assert!(
        after.saturating_sub(before) < 32 << 20,
        "the server grew from {before} to {after} bytes"
    );

    // A real upload through the form.
    let calc = read(artifacts::CALC);
    let signature = sign(&key, &calc);
    let body = form_body(
        "B",
        &[
            ("token", None, alice.as_bytes()),
            ("component", Some("calc.wasm"), &calc),
            ("signature", None, signature.as_bytes()),
        ],
    );
    let url = format!("{}/upload", server.base);
    let mut response = server
        .agent
        .post(&url)
        .header("Content-Type", "multipart/form-data; boundary=B")
        .send(&body[..])
        .unwrap();
    let page = response.body_mut().read_to_string().unwrap();
    assert_eq!(response.status().as_u16(), 201, "{page}");
    assert!(page.contains("calc 0.1.0</a> is published"), "{page}");
}

/// Upload places are bounded per account too: one publisher holding its
/// places with slow bodies is told to wait (429 too-many-uploads) for a
/// third, and another publisher's upload still goes through; the places
/// of the whole registry still end in 503.
#[test]
fn one_publisher_cannot_hold_every_upload_place() {
    let server = Server::start("uploads-per-account", &["--max-validations", "1"]);
    let (alice, bob, carol) = (
        server.token("alice", "publisher"),
        server.token("bob", "publisher"),
        server.token("carol", "publisher"),
    );
    let key_of = |token: &str, seed: u8| {
        let key = key(seed);
        server.register(token, &key).expect(201, None);
        key
    };
    let (alice_key, bob_key, carol_key) =
        (key_of(&alice, 22), key_of(&bob, 23), key_of(&carol, 24));
    let slow = |token: &str, key: &SigningKey| slow_upload(&server, token, key);
    let mut held = vec![slow(&alice, &alice_key), slow(&alice, &alice_key)];
    server.wait_for_logs("reading an upload", 2);
    let refused = server.publish(&alice, &alice_key, b"not a component");
    refused.expect(429, Some("too-many-uploads"));
    assert!(
        refused.json["message"]
            .as_str()
            .unwrap()
            .contains("account alice")
    );
    assert!(refused.header("retry-after").parse::<u64>().unwrap() >= 1);
    // Alice's slow bodies do not stop bob.
    server
        .publish(&bob, &bob_key, &read(artifacts::CALC))
        .expect(201, None);
    // With bob's two slow ones too, the registry's four places are taken
    // (bob's publish above logged its own line: three more in all).
    held.extend([slow(&bob, &bob_key), slow(&bob, &bob_key)]);
    server.wait_for_logs("reading an upload", 3);
    server
        .publish(&carol, &carol_key, b"not a component")
        .expect(503, Some("busy"));
    drop(held);
    server.get("/healthz").expect(200, None);
}

on_both_backends!(proofs_name_their_registry_and_keys_can_be_revoked);
/// A key registration's proof names the registry: a proof bob made for one
/// registry is refused by another (as is one naming no registry), and an
/// owner revokes a key (`sandwit registry key revoke`): it verifies no
/// publish from then on, is never registered again, and the versions it
/// signed are shown as signed by a revoked key.
fn proofs_name_their_registry_and_keys_can_be_revoked(backend: Backend) {
    let (first, second) = (
        Server::start_on(backend, "proof-first", &[]),
        Server::start_on(backend, "proof-second", &[]),
    );
    let (bob_first, bob_second) = (
        first.token("bob", "publisher"),
        second.token("bob", "publisher"),
    );
    assert_ne!(first.id(), second.id());
    let bob_key = key(26);
    let claim = |server: &Server, token: &str, body: Value| {
        server.call("POST", "/v1/keys", Some(token), Body::Json(body))
    };
    // Made for the first registry, replayed to the second.
    let replayed = claim(
        &second,
        &bob_second,
        key_request(&bob_key, &first.id(), "bob"),
    );
    replayed.expect(400, Some("invalid-proof"));
    let message = replayed.json["message"].as_str().unwrap();
    assert!(
        message.contains("another registry") && message.contains(&second.id()),
        "{message}"
    );
    // Made the old way (`-v1:`), naming no registry.
    let statement = format!("sandwit-key-registration-v1:bob:{}", public_key(&bob_key));
    let old = json!({
        "public_key": public_key(&bob_key),
        "proof": STANDARD.encode(bob_key.sign(statement.as_bytes()).to_bytes()),
    });
    let refused = claim(&second, &bob_second, old);
    refused.expect(400, Some("invalid-proof"));
    let message = refused.json["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "sandwit-key-registration-v2:{}:bob:{}",
            second.id(),
            public_key(&bob_key)
        )),
        "{message}"
    );
    claim(
        &first,
        &bob_first,
        key_request(&bob_key, &first.id(), "bob"),
    )
    .expect(201, None);

    // Revoked: no publish verifies with it, versions it signed say so.
    let calc = read(artifacts::CALC);
    first.publish(&bob_first, &bob_key, &calc).expect(201, None);
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .args(["registry", "key", "revoke", &public_key(&bob_key)])
        .args(["--registry", &first.base])
        .env("SANDWIT_REGISTRY_TOKEN", &bob_first)
        .output()
        .unwrap();
    assert_succeeded(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("revoked {}", public_key(&bob_key))),
        "{stdout}"
    );
    let refused = first.publish(&bob_first, &bob_key, &read(artifacts::ECHO));
    refused.expect(400, Some("bad-signature"));
    assert!(
        refused.json["message"]
            .as_str()
            .unwrap()
            .contains("account bob has revoked"),
        "{}",
        refused.json
    );
    let version = first.get("/v1/plugins/calc/0.1.0");
    version.expect(200, None);
    assert_eq!(version.json["signer_revoked"], true);
    assert_eq!(
        first.get("/v1/plugins/calc").json["versions"][0]["signer_revoked"],
        true
    );
    let page = String::from_utf8(first.get("/plugins/calc").bytes).unwrap();
    assert!(page.contains("revoked this key since"), "{page}");
    claim(
        &first,
        &bob_first,
        key_request(&bob_key, &first.id(), "bob"),
    )
    .expect(409, Some("key-revoked"));
    // A key the account does not have.
    first
        .call(
            "POST",
            "/v1/keys/revoke",
            Some(&bob_first),
            Body::Json(json!({"public_key": public_key(&key(27))})),
        )
        .expect(404, Some("not-found"));
}

/// Two `registry serve` processes on one PostgreSQL database (`--db`, over
/// TLS: the server refuses plain text) and one blob folder (`--blobs
/// file://DIR`), as replicas: a token made with
/// `--db` works on both, a key registered on one verifies publishes on the
/// other, what one publishes the other describes and serves, the same
/// version published again through the other is the same conflict, a yank
/// through one shows on the other, and bytes changed in the folder are
/// refused (500 blob-mismatch), never served.
#[test]
fn replicas_share_one_database_and_blob_folder() {
    let db = Arc::new(Database::create_tls());
    let blobs = tempdir("registry", "replicas-blobs");
    let location = format!("file://{}", blobs.display());
    let args = ["--blobs", location.as_str()];
    let a = Server::launch("replica-a", &args, Some(db.clone()));
    let b = Server::launch("replica-b", &args, Some(db));
    assert_eq!(a.id(), b.id(), "one registry");
    let alice = a.token("alice", "publisher");
    let key = key(40);
    b.register(&alice, &key).expect(201, None);
    let calc = read(artifacts::CALC);
    a.publish(&alice, &key, &calc).expect(201, None);
    b.publish(&alice, &key, &calc)
        .expect(409, Some("version-exists"));
    let plugin = b.get("/v1/plugins/calc");
    plugin.expect(200, None);
    assert_eq!(plugin.json["versions"][0]["digest"], digest(&calc));
    let path = format!("/v1/blobs/{}", digest(&calc));
    let blob = b.get(&path);
    blob.expect(200, None);
    assert_eq!(blob.bytes, calc);
    b.call(
        "DELETE",
        "/v1/plugins/calc/0.1.0/yank",
        Some(&alice),
        Body::None,
    )
    .expect(200, None);
    assert_eq!(
        a.get("/v1/plugins/calc").json["versions"][0]["yanked"],
        true
    );
    assert_eq!(a.get("/v1/plugins").json["total"], 0);

    let hex = &digest(&calc)["sha256:".len()..];
    std::fs::write(blobs.join("sha256").join(hex), b"not calc").unwrap();
    for replica in [&a, &b] {
        replica.get(&path).expect(500, Some("blob-mismatch"));
    }
}
