//! Capabilities: what a plugin requests in its manifest, what the operator
//! grants in the policy, and what the plugin gets (requested ∩ granted).
//!
//! | capability | what it allows |
//! | --- | --- |
//! | `store` | the plugin's key-value store (`sandwit:plugin/store`) |
//! | `config` | reading its configuration (`sandwit:plugin/config`) |
//! | `chat` | sending messages to the current chat (`sandwit:plugin/chat`) |
//! | `http:<host>` | `wasi:http` requests to `<host>` on ports 80 and 443 |
//! | `http:<host>:<port>` | `wasi:http` requests to `<host>` on `<port>` |
//! | `http:<host>:*` | `wasi:http` requests to `<host>` on any port |
//!
//! `<host>` is a DNS name, an IPv4 address, a bracketed IPv6 address, or
//! `*.<domain>` for every subdomain of `<domain>` (not `<domain>` itself).

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// One capability.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// The plugin store.
    Store,
    /// The plugin's configuration.
    Config,
    /// Messages to the current chat.
    Chat,
    /// Outbound HTTP to matching hosts and ports.
    Http(HttpTarget),
}

/// The hosts and ports of an `http:` capability.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HttpTarget {
    /// An exact host, or a domain whose subdomains match.
    host: HostPattern,
    /// The ports.
    port: Port,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Port {
    /// 80 and 443.
    Default,
    One(u16),
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum HostPattern {
    Exact(String),
    Subdomains(String),
}

/// A capability that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown capability `{text}`: {reason}")]
pub struct CapabilityError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

const EXPECTED: &str = "expected `store`, `config`, `chat`, `http:<host>` or `http:<host>:<port>`";

impl FromStr for Capability {
    type Err = CapabilityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| CapabilityError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        match text {
            "store" => return Ok(Capability::Store),
            "config" => return Ok(Capability::Config),
            "chat" => return Ok(Capability::Chat),
            _ => {}
        }
        let Some(target) = text.strip_prefix("http:") else {
            return Err(err(EXPECTED));
        };
        let (host, port) = split_host_port(target).map_err(|r| err(&r))?;
        let host = if let Some(domain) = host.strip_prefix("*.") {
            check_dns_name(domain).map_err(|r| err(&r))?;
            HostPattern::Subdomains(domain.to_string())
        } else {
            check_host(host).map_err(|r| err(&r))?;
            HostPattern::Exact(host.to_string())
        };
        Ok(Capability::Http(HttpTarget { host, port }))
    }
}

/// Splits `host[:port]`, where an IPv6 host is bracketed.
fn split_host_port(target: &str) -> Result<(&str, Port), String> {
    let (host, port) = if let Some(rest) = target.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address is not closed with `]`")?;
        v6.parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("`{v6}` is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("junk after the IPv6 address")?),
        };
        (&target[..v6.len() + 2], port)
    } else {
        match target.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (target, None),
        }
    };
    let port = match port {
        None => Port::Default,
        Some("*") => Port::Any,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => {
                return Err(format!("port `{p}` is not `*` or a number from 1 to 65535"));
            }
            Ok(p) => Port::One(p),
        },
    };
    Ok((host, port))
}

fn check_host(host: &str) -> Result<(), String> {
    if host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(());
    }
    check_dns_name(host)
}

fn check_dns_name(name: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(format!(
            "`{name}` is not a lowercase host name (letters, digits, `-` and `.`)"
        ));
    }
    // No top-level domain is numeric; such a name or pattern could match an
    // IP address written out (`*.0.0.1` matches `127.0.0.1`).
    if name
        .rsplit('.')
        .next()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!(
            "`{name}` ends in a numeric label: grant an IP address as `http:1.2.3.4`"
        ));
    }
    Ok(())
}

impl Port {
    fn matches(self, port: u16) -> bool {
        match self {
            Port::Default => port == 80 || port == 443,
            Port::One(p) => p == port,
            Port::Any => true,
        }
    }

    /// The ports both allow, if any.
    fn intersect(self, other: Port) -> Option<Port> {
        match (self, other) {
            (Port::Any, p) | (p, Port::Any) => Some(p),
            (Port::Default, Port::Default) => Some(Port::Default),
            (Port::One(a), Port::One(b)) => (a == b).then_some(Port::One(a)),
            (Port::Default, Port::One(p)) | (Port::One(p), Port::Default) => {
                Port::Default.matches(p).then_some(Port::One(p))
            }
        }
    }
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(h) => h == host,
            HostPattern::Subdomains(d) => is_subdomain(host, d),
        }
    }

    /// The hosts both allow, if any.
    fn intersect(&self, other: &HostPattern) -> Option<HostPattern> {
        use HostPattern::*;
        match (self, other) {
            (Exact(a), b) | (b, Exact(a)) => b.matches(a).then(|| Exact(a.clone())),
            (Subdomains(a), Subdomains(b)) => {
                if a == b || is_subdomain(a, b) {
                    Some(Subdomains(a.clone()))
                } else if is_subdomain(b, a) {
                    Some(Subdomains(b.clone()))
                } else {
                    None
                }
            }
        }
    }
}

/// Whether `host` is a subdomain of `domain` (not `domain` itself).
fn is_subdomain(host: &str, domain: &str) -> bool {
    host.strip_suffix(domain)
        .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.'))
}

impl HttpTarget {
    /// Whether a request to `host` (lowercase, IPv6 bracketed) on `port`
    /// matches.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        self.port.matches(port) && self.host.matches(host)
    }

    /// The requests both allow, if any.
    fn intersect(&self, other: &HttpTarget) -> Option<HttpTarget> {
        Some(HttpTarget {
            host: self.host.intersect(&other.host)?,
            port: self.port.intersect(other.port)?,
        })
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capability::Store => f.write_str("store"),
            Capability::Config => f.write_str("config"),
            Capability::Chat => f.write_str("chat"),
            Capability::Http(t) => write!(f, "http:{t}"),
        }
    }
}

impl fmt::Display for HttpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(h) => f.write_str(h)?,
            HostPattern::Subdomains(d) => write!(f, "*.{d}")?,
        }
        match self.port {
            Port::Default => Ok(()),
            Port::One(p) => write!(f, ":{p}"),
            Port::Any => f.write_str(":*"),
        }
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Capability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What one plugin may use: the capabilities it requested that the operator
/// granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    caps: Vec<Capability>,
}

impl Grants {
    /// Requested ∩ granted. For `http:` capabilities that is the requests
    /// both allow: `http:127.0.0.1:*` requested and `http:127.0.0.1:8080`
    /// granted give `http:127.0.0.1:8080`.
    pub fn effective(requested: &[Capability], granted: &[Capability]) -> Self {
        let mut caps: Vec<Capability> = Vec::new();
        for r in requested {
            for g in granted {
                let both = match (r, g) {
                    (Capability::Http(r), Capability::Http(g)) => {
                        r.intersect(g).map(Capability::Http)
                    }
                    (r, g) => (r == g).then(|| r.clone()),
                };
                if let Some(cap) = both.filter(|c| !caps.contains(c)) {
                    caps.push(cap);
                }
            }
        }
        Grants { caps }
    }

    /// Whether `cap` (not an `http:` one) was granted.
    pub fn has(&self, cap: &Capability) -> bool {
        self.caps.contains(cap)
    }

    /// Whether a request to `host` on `port` is allowed.
    pub fn allows_http(&self, host: &str, port: u16) -> bool {
        self.caps.iter().any(|c| match c {
            Capability::Http(t) => t.matches(host, port),
            _ => false,
        })
    }

    /// The capabilities, in the order requested.
    pub fn iter(&self) -> impl Iterator<Item = &Capability> {
        self.caps.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(s: &str) -> Capability {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_prints_every_form() {
        for text in [
            "store",
            "config",
            "chat",
            "http:api.example.com",
            "http:*.example.org:8443",
            "http:127.0.0.1:8080",
            "http:[::1]:8080",
            "http:[::1]",
            "http:127.0.0.1:*",
        ] {
            assert_eq!(cap(text).to_string(), text);
        }
    }

    #[test]
    fn rejects_unknown_and_malformed() {
        for (text, needle) in [
            ("root", "expected `store`"),
            ("http:", "not a lowercase host name"),
            ("http:Example.com", "not a lowercase host name"),
            ("http:a.com:0", "port `0`"),
            ("http:a.com:x", "port `x` is not `*`"),
            ("http:a.com:99999", "port `99999`"),
            ("http:*", "not a lowercase host name"),
            ("http:[::1", "not closed"),
            ("http:a_b.com", "not a lowercase host name"),
            ("http:*.0.0.1", "numeric label"),
            ("http:1.2.3", "numeric label"),
            ("http:127.1", "numeric label"),
        ] {
            let e = text.parse::<Capability>().unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
            assert!(e.to_string().contains(text), "{e}");
        }
    }

    #[test]
    fn http_matching() {
        let Capability::Http(t) = cap("http:*.example.org:8443") else {
            panic!()
        };
        assert!(t.matches("api.example.org", 8443));
        assert!(!t.matches("example.org", 8443));
        assert!(!t.matches("evilexample.org", 8443));
        assert!(!t.matches("api.example.org", 443));
        let Capability::Http(t) = cap("http:api.example.com") else {
            panic!()
        };
        assert!(t.matches("api.example.com", 443) && t.matches("api.example.com", 80));
        assert!(!t.matches("api.example.com", 8080));
    }

    #[test]
    fn effective_is_requested_and_granted() {
        let requested = [
            cap("store"),
            cap("chat"),
            cap("http:api.example.org"),
            cap("http:other.com"),
        ];
        let granted = [cap("store"), cap("config"), cap("http:*.example.org")];
        let g = Grants::effective(&requested, &granted);
        assert!(g.has(&Capability::Store));
        assert!(!g.has(&Capability::Chat), "requested, not granted");
        assert!(!g.has(&Capability::Config), "granted, not requested");
        assert!(g.allows_http("api.example.org", 443));
        assert!(!g.allows_http("www.example.org", 443), "not requested");
        assert!(!g.allows_http("other.com", 443), "not granted");
        assert_eq!(
            g.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["store", "http:api.example.org"]
        );
    }

    #[test]
    fn http_intersections() {
        let both = |r: &str, g: &str| {
            Grants::effective(&[cap(r)], &[cap(g)])
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            both("http:127.0.0.1:*", "http:127.0.0.1:8080"),
            "http:127.0.0.1:8080"
        );
        assert_eq!(
            both("http:127.0.0.1:8080", "http:127.0.0.1:*"),
            "http:127.0.0.1:8080"
        );
        assert_eq!(both("http:a.com", "http:a.com:443"), "http:a.com:443");
        assert_eq!(both("http:a.com:8080", "http:a.com"), "");
        assert_eq!(both("http:*.a.com", "http:*.b.a.com"), "http:*.b.a.com");
        assert_eq!(both("http:*.a.com", "http:x.a.com:*"), "http:x.a.com");
        assert_eq!(both("http:a.com", "http:*.a.com"), "");
        assert_eq!(both("http:[::1]:*", "http:[::1]:9"), "http:[::1]:9");
    }
}
