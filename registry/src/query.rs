//! Reading the registry: search, a plugin's versions, one version, a blob.

use crate::blobs::Opened;
use crate::error::{Error, Result};
use crate::manage::{owners_of, plugin_exists};
use crate::meta::conn::Dialect;
use crate::meta::{self, Conn, Param, params};
use crate::{
    Blob, PER_PAGE, PluginInfo, PluginSummary, Registry, SearchPage, SearchQuery, VersionDetail,
    VersionInfo, names,
};

/// The longest search text.
const MAX_QUERY_BYTES: usize = 200;
/// The most words a search text may have.
const MAX_QUERY_WORDS: usize = 8;
/// The fewest characters a search word may have: the index holds every
/// run of three characters, so shorter words cannot be looked up in it.
const MIN_WORD_CHARS: usize = 3;
/// The highest page number.
const MAX_PAGE: u32 = 10_000;
/// The method kinds.
const KINDS: &[&str] = &["tool", "agent", "behavior", "multimodal-agent"];

impl Registry {
    /// The plugins matching `query`, by id, a page at a time: each as its
    /// latest version not yanked describes it (plugins with every version
    /// yanked are not listed).
    pub async fn search(&self, query: SearchQuery) -> Result<SearchPage> {
        let search = Search::of(query)?;
        self.read(move |conn| search.run(conn)).await
    }

    /// The plugin `id` with its owners and every version, newest first.
    pub async fn plugin(&self, id: &str) -> Result<PluginInfo> {
        names::plugin_id(id)?;
        let id = id.to_string();
        self.read(move |conn| {
            plugin_exists(conn, &id)?;
            let mut rows = conn
                .query(
                    "SELECT v.version, v.digest, v.size, v.signer, v.yanked, v.published_at,
                         v.name, v.description, k.revoked_at IS NOT NULL
                     FROM versions v LEFT JOIN keys k ON k.public_key = v.signer
                     WHERE v.plugin = ?1",
                    params![&id],
                )?
                .iter()
                .map(|r| {
                    Ok((
                        VersionInfo {
                            version: r.text(0)?,
                            digest: r.text(1)?,
                            size: r.int(2)? as u64,
                            signer: r.text(3)?,
                            signer_revoked: r.bool(8)?,
                            yanked: r.bool(4)?,
                            published_at: meta::rfc3339(r.int(5)?),
                        },
                        r.text(6)?,
                        r.text(7)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            rows.sort_by_cached_key(|(v, ..)| {
                std::cmp::Reverse(semver::Version::parse(&v.version).ok())
            });
            // Named as its latest version not yanked, else its newest.
            let (name, description) = rows
                .iter()
                .find(|(v, ..)| !v.yanked)
                .or(rows.first())
                .map(|(_, n, d)| (n.clone(), d.clone()))
                .unwrap_or_default();
            Ok(PluginInfo {
                owners: owners_of(conn, &id)?,
                id,
                name,
                description,
                versions: rows.into_iter().map(|(v, ..)| v).collect(),
            })
        })
        .await
    }

    /// One version of `id`, with its manifest.
    pub async fn version(&self, id: &str, version: &str) -> Result<VersionDetail> {
        names::plugin_id(id)?;
        names::version(version)?;
        let (id, version) = (id.to_string(), version.to_string());
        self.read(move |conn| {
            let row = conn.query_opt(
                "SELECT v.digest, v.size, v.signer, v.signature, v.yanked, v.published_at,
                     v.manifest, k.revoked_at IS NOT NULL
                 FROM versions v LEFT JOIN keys k ON k.public_key = v.signer
                 WHERE v.plugin = ?1 AND v.version = ?2",
                params![&id, &version],
            )?;
            let Some(row) = row else {
                plugin_exists(conn, &id)?;
                return Err(Error::NotFound(format!("{id} has no version {version}")));
            };
            let (digest, size, signer, signature, yanked, at, manifest, signer_revoked) = (
                row.text(0)?,
                row.int(1)?,
                row.text(2)?,
                row.text(3)?,
                row.bool(4)?,
                row.int(5)?,
                row.text(6)?,
                row.bool(7)?,
            );
            Ok(VersionDetail {
                id,
                version,
                digest,
                size: size as u64,
                signer,
                signer_revoked,
                signature,
                yanked,
                published_at: meta::rfc3339(at),
                manifest: serde_json::from_str(&manifest).map_err(anyhow::Error::from)?,
            })
        })
        .await
    }

    /// The component with `digest` (`sha256:<hex>`), if a published version
    /// (yanked or not) has it.
    pub async fn blob(&self, digest: &str) -> Result<Blob> {
        let hex = names::digest_hex(digest)?.to_string();
        let digest = digest.to_string();
        let not_found =
            || Error::NotFound(format!("no published component has the digest {digest}"));
        let listed = {
            let digest = digest.clone();
            self.read(move |conn| {
                Ok(conn
                    .query_opt(
                        "SELECT 1 FROM versions WHERE digest = ?1 LIMIT 1",
                        params![digest],
                    )?
                    .is_some())
            })
            .await?
        };
        if !listed {
            return Err(not_found());
        }
        let registry = self.clone();
        let opened = tokio::task::spawn_blocking(move || registry.inner.blobs.open_checked(&hex))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("the blob reader failed: {e}")))??;
        match opened {
            Opened::Verified(file, size) => Ok(Blob { file, size }),
            Opened::Missing => Err(Error::Internal(anyhow::anyhow!(
                "the blob of {digest} is listed but missing"
            ))),
            Opened::Tampered(actual) => Err(Error::BlobMismatch(format!(
                "the blob store holds other bytes under {digest} (their digest is \
                 sha256:{actual}): they were changed outside the registry, and are not served"
            ))),
        }
    }
}

/// A search, its query checked.
struct Search {
    /// The page, from 1.
    page: u32,
    /// The words the search text must hold, lowercased.
    words: Vec<String>,
    /// The kind of method a plugin must have.
    kind: Option<String>,
    /// The capability a plugin must ask for (`http`: any HTTP grant).
    capability: Option<String>,
}

impl Search {
    /// The search `query` asks for: refused if its page, text, kind or
    /// capability is not valid.
    fn of(query: SearchQuery) -> Result<Self> {
        let page = query.page.unwrap_or(1);
        if !(1..=MAX_PAGE).contains(&page) {
            return Err(Error::bad_request(
                "invalid-page",
                format!("page {page} is not 1 to {MAX_PAGE}"),
            ));
        }
        let words = match query.q.as_deref().filter(|q| !q.trim().is_empty()) {
            Some(q) => search_words(q)?,
            None => Vec::new(),
        };
        let kind = query.kind.filter(|k| !k.is_empty());
        if let Some(kind) = kind.as_deref()
            && !KINDS.contains(&kind)
        {
            return Err(Error::bad_request(
                "invalid-kind",
                format!(
                    "kind {} is not one of {}",
                    names::quote(kind),
                    KINDS.join(", ")
                ),
            ));
        }
        let capability = query.capability.filter(|c| !c.is_empty());
        if capability.as_ref().is_some_and(|c| c.len() > 300) {
            return Err(Error::bad_request(
                "invalid-capability",
                "the capability is longer than 300 bytes",
            ));
        }
        Ok(Search {
            page,
            words,
            kind,
            capability,
        })
    }

    /// The conditions a plugin `p` and its latest version `v` must meet;
    /// the parameters they need are pushed to `args`.
    fn filters(self, dialect: Dialect, args: &mut Vec<Param>) -> Vec<String> {
        let mut filters = vec!["p.latest IS NOT NULL".to_string()];
        if !self.words.is_empty() {
            filters.push(dialect.search_words(&self.words, args));
        }
        if let Some(kind) = self.kind {
            args.push(Param::Text(kind));
            filters.push(format!(
                "EXISTS (SELECT 1 FROM {} WHERE value = ?{})",
                dialect.json_strings("v.kinds"),
                args.len()
            ));
        }
        if let Some(cap) = self.capability {
            let capabilities = dialect.json_strings("v.capabilities");
            if cap == "http" {
                // Any HTTP grant: `http:<host>`.
                filters.push(format!(
                    "EXISTS (SELECT 1 FROM {capabilities} WHERE substr(value, 1, 5) = 'http:')"
                ));
            } else {
                args.push(Param::Text(cap));
                filters.push(format!(
                    "EXISTS (SELECT 1 FROM {capabilities} WHERE value = ?{})",
                    args.len()
                ));
            }
        }
        filters
    }

    /// Runs the search on `conn`: its page and how many plugins match.
    fn run(self, conn: &mut dyn Conn) -> Result<SearchPage> {
        let page = self.page;
        let offset = i64::from(page - 1) * i64::from(PER_PAGE);
        let dialect = conn.dialect();
        let mut args: Vec<Param> = Vec::new();
        let from = format!(
            "FROM plugins p JOIN versions v ON v.plugin = p.id AND v.version = p.latest \
             WHERE {}",
            self.filters(dialect, &mut args).join(" AND ")
        );
        let total = conn
            .query_one(&format!("SELECT count(*) {from}"), &args)?
            .int(0)?;
        let sql = format!(
            "SELECT p.id, v.name, v.description, v.version, v.kinds, v.capabilities {from}
             ORDER BY {} LIMIT {PER_PAGE} OFFSET {offset}",
            dialect.bytewise("p.id")
        );
        let plugins = conn
            .query(&sql, &args)?
            .iter()
            .map(|r| {
                Ok(PluginSummary {
                    id: r.text(0)?,
                    name: r.text(1)?,
                    description: r.text(2)?,
                    latest_version: r.text(3)?,
                    kinds: json_strings(&r.text(4)?),
                    capabilities: json_strings(&r.text(5)?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SearchPage {
            plugins,
            page,
            per_page: PER_PAGE,
            total: total as u64,
        })
    }
}

/// The words of the search text `q` (not blank), lowercased: refused if
/// the text is too long, has too many words, or a word too short to be
/// looked up.
fn search_words(q: &str) -> Result<Vec<String>> {
    if q.len() > MAX_QUERY_BYTES {
        return Err(Error::bad_request(
            "invalid-query",
            format!("the search text is longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    let words: Vec<String> = q.split_whitespace().map(str::to_lowercase).collect();
    if words.len() > MAX_QUERY_WORDS {
        return Err(Error::bad_request(
            "invalid-query",
            format!("the search text has more than {MAX_QUERY_WORDS} words"),
        ));
    }
    if let Some(short) = words.iter().find(|w| w.chars().count() < MIN_WORD_CHARS) {
        return Err(Error::bad_request(
            "invalid-query",
            format!(
                "the search word {} is shorter than {MIN_WORD_CHARS} characters \
                 (words match as substrings of at least {MIN_WORD_CHARS})",
                names::quote(short)
            ),
        ));
    }
    Ok(words)
}

fn json_strings(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}
