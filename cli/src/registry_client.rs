//! The HTTP client of `sandwit publish` and `sandwit install`: requests to a
//! registry's `/v1` API (docs/REGISTRY.md), its JSON errors read into
//! sentences, bodies read within caps.
//!
//! ureq, blocking: one request at a time needs no runtime. TLS is rustls
//! with the webpki roots, certificates always checked; a token is never sent
//! over plain HTTP except to a loopback address, and never follows a
//! redirect.

use std::io::{IsTerminal, Read};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;

/// The most a JSON answer may take.
const MAX_JSON_BYTES: u64 = 16 << 20;
/// How long connecting, and each read or write, may take.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a whole request may take, its body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How long a POST's answer may take once its body is sent: the registry
/// checks an upload (compiling the component to read its manifest) before
/// it answers, and allows a request that long by default
/// (`sandwit registry serve --request-timeout`). A large plugin on a busy
/// registry takes longer than [`IO_TIMEOUT`].
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// A download shows its progress once it has taken this long.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// A registry, by its base URL.
pub struct Registry {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
    /// `http://` to a host that is not loopback.
    plain_remote: bool,
}

/// An answer that is not a success.
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The error code (`version-exists`), if the body had one.
    pub code: String,
    /// The registry's sentence, cleaned of control characters and cut.
    pub message: String,
    /// `Retry-After`, in seconds, if given.
    pub retry_after: Option<u64>,
    /// The whole JSON body, if it was JSON.
    pub body: serde_json::Value,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the registry answered {}", self.status)?;
        if !self.code.is_empty() {
            write!(f, " {}", self.code)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(s) = self.retry_after {
            write!(f, " (retry after {s} s)")?;
        }
        Ok(())
    }
}

/// A registry and the token that acts there: the flags of the commands
/// that act as an account (`publish`, `registry key revoke`).
#[derive(clap::Args)]
pub struct Login {
    /// The registry's URL (https://...; http:// only to a loopback address).
    #[arg(long, value_name = "URL")]
    pub registry: String,
    /// Your API token. Prefer $SANDWIT_REGISTRY_TOKEN: it stays out of shell
    /// history and `ps`.
    #[arg(
        long,
        env = "SANDWIT_REGISTRY_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: String,
}

impl Login {
    /// A client of the registry acting with the token.
    pub fn client(&self) -> anyhow::Result<Registry> {
        Registry::new(&self.registry, Some(self.token.clone()))
    }
}

/// What a request gave: the answer, or the registry's refusal.
pub type Answer<T> = Result<T, Refusal>;

impl Registry {
    /// A client of the registry at `url` (`https://...`, or `http://` to a
    /// loopback address for a token, any for reading).
    pub fn new(url: &str, token: Option<String>) -> anyhow::Result<Self> {
        let base = url.trim_end_matches('/').to_string();
        let Some((scheme, rest)) = base.split_once("://") else {
            bail!("--registry {url:?} is not a URL: give it as https://host[:port]");
        };
        let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
        // `http://localhost:80@elsewhere` connects to `elsewhere`: a URL
        // with user information is refused before the loopback check reads
        // the wrong part of it as the host.
        if host.contains('@') {
            bail!(
                "--registry {url}: give the registry as scheme://host[:port], without user information"
            );
        }
        match scheme {
            "https" => {}
            "http" if token.is_none() || is_loopback(host) => {}
            "http" => bail!(
                "--registry {url}: the token would be sent unencrypted; use https:// (plain \
                 http:// is allowed only to a loopback address)"
            ),
            _ => bail!("--registry {url}: the scheme must be https:// (or http://)"),
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .timeout_connect(Some(IO_TIMEOUT))
            .timeout_per_read(Some(IO_TIMEOUT))
            .timeout_per_write(Some(IO_TIMEOUT))
            .user_agent(concat!("sandwit/", env!("CARGO_PKG_VERSION")))
            // A registry answers from where it was asked: a redirect (to
            // plain http, or elsewhere) is an answer to refuse, not follow.
            .max_redirects(0)
            .build()
            .new_agent();
        let plain_remote = scheme == "http" && !is_loopback(host);
        Ok(Registry {
            base,
            agent,
            token,
            plain_remote,
        })
    }

    /// Whether the registry is reached over plain `http://` on a host that
    /// is not loopback: anyone on the way can read and change what it
    /// answers (an install still checks digests and signatures, but would
    /// learn a substituted listing or none).
    pub fn is_plain_http_remote(&self) -> bool {
        self.plain_remote
    }

    /// The registry's base URL, as given without a trailing `/`.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// GETs `path` (with the token, if the client has one) and reads its
    /// JSON.
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<Answer<T>> {
        let mut request = self.agent.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let response = request.call().with_context(|| self.failed("GET", path))?;
        self.json(path, response)
    }

    /// POSTs `body` to `path` with the token and `headers`, and reads the
    /// JSON answer.
    pub fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> anyhow::Result<Answer<T>> {
        let mut request = self
            .agent
            .post(format!("{}{path}", self.base))
            .config()
            .timeout_per_read(Some(ANSWER_TIMEOUT))
            .build()
            .content_type(content_type);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request
            .send(body)
            .with_context(|| self.failed("POST", path))?;
        self.json(path, response)
    }

    /// Downloads `path`, at most `max` bytes (more is an error), saying
    /// how far it got on stderr when it takes long; `what` names it there.
    pub fn download(&self, path: &str, max: u64, what: &str) -> anyhow::Result<Answer<Vec<u8>>> {
        let response = self
            .agent
            .get(format!("{}{path}", self.base))
            .call()
            .with_context(|| self.failed("GET", path))?;
        if !response.status().is_success() {
            return Ok(Err(self.refusal(response)));
        }
        let mut reader = response.into_body().into_reader().take(max + 1);
        let mut bytes = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        let progress = Progress::new(what, max);
        loop {
            let n = reader
                .read(&mut chunk)
                .with_context(|| format!("downloading {what} from {}{path}", self.base))?;
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..n]);
            if bytes.len() as u64 > max {
                bail!("downloading {what}: the registry sent more than the {max} bytes it listed");
            }
            progress.update(bytes.len() as u64);
        }
        progress.finish();
        Ok(Ok(bytes))
    }

    fn failed(&self, method: &str, path: &str) -> String {
        format!("{method} {}{path}: no answer from the registry", self.base)
    }

    fn json<T: DeserializeOwned>(
        &self,
        path: &str,
        response: ureq::http::Response<ureq::Body>,
    ) -> anyhow::Result<Answer<T>> {
        if !response.status().is_success() {
            return Ok(Err(self.refusal(response)));
        }
        let body = response
            .into_body()
            .with_config()
            .limit(MAX_JSON_BYTES)
            .read_to_vec()
            .with_context(|| format!("reading the answer of {}{path}", self.base))?;
        let value = serde_json::from_slice(&body).with_context(|| {
            format!(
                "the answer of {}{path} is not what the registry API gives",
                self.base
            )
        })?;
        Ok(Ok(value))
    }

    fn refusal(&self, response: ureq::http::Response<ureq::Body>) -> Refusal {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let body: serde_json::Value = response
            .into_body()
            .with_config()
            .limit(MAX_JSON_BYTES)
            .read_to_vec()
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let text = |key: &str| clean(body[key].as_str().unwrap_or_default(), 500);
        Refusal {
            status,
            code: text("error"),
            message: text("message"),
            retry_after,
            body,
        }
    }
}

/// Whether `host` (`name[:port]` or `[v6]:port`) is a loopback address.
fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `text` from a registry, safe to print: control characters (a terminal's
/// escapes) replaced, at most `max` characters.
pub fn clean(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// What a long download says on stderr: from [`PROGRESS_AFTER`] on, once a
/// second, on one line on a terminal.
struct Progress<'a> {
    what: &'a str,
    total: u64,
    start: Instant,
    last: std::cell::Cell<Option<Instant>>,
    terminal: bool,
}

impl<'a> Progress<'a> {
    fn new(what: &'a str, total: u64) -> Self {
        Progress {
            what,
            total,
            start: Instant::now(),
            last: std::cell::Cell::new(None),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn update(&self, done: u64) {
        let now = Instant::now();
        let due = match self.last.get() {
            None => now - self.start >= PROGRESS_AFTER,
            Some(last) => now - last >= Duration::from_secs(1),
        };
        if !due {
            return;
        }
        self.last.set(Some(now));
        let line = format!(
            "sandwit: downloading {}: {:.1} of {:.1} MiB",
            self.what,
            done as f64 / (1 << 20) as f64,
            self.total as f64 / (1 << 20) as f64
        );
        if self.terminal {
            eprint!("\r{line}");
        } else {
            eprintln!("{line}");
        }
    }

    fn finish(&self) {
        if self.terminal && self.last.get().is_some() {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_go_over_plain_http_only_to_loopback() {
        let token = || Some("swr_x".to_string());
        for url in [
            "http://127.0.0.1:8080",
            "http://[::1]:80/",
            "http://localhost",
        ] {
            assert!(Registry::new(url, token()).is_ok(), "{url}");
        }
        let e = Registry::new("http://registry.example", token())
            .err()
            .unwrap();
        assert!(e.to_string().contains("unencrypted"), "{e}");
        assert!(Registry::new("http://registry.example", None).is_ok());
        assert!(Registry::new("ftp://x", None).is_err());
        assert!(Registry::new("registry.example", None).is_err());
        // What looks like a loopback host before an `@` is user information.
        let e = Registry::new("http://localhost:80@registry.example", token())
            .err()
            .unwrap();
        assert!(e.to_string().contains("user information"), "{e}");
    }

    #[test]
    fn registry_text_is_cleaned() {
        assert_eq!(clean("a\x1b[2Jb\nc", 100), "a [2Jb c");
        assert_eq!(clean("abcdef", 3), "abc…");
    }
}
