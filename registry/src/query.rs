//! Reading the registry: search, a plugin's versions, one version, a blob.

use rusqlite::{OptionalExtension, params, params_from_iter};

use crate::error::{Error, Result};
use crate::manage::{owners_of, plugin_exists};
use crate::{
    Blob, PER_PAGE, PluginInfo, PluginSummary, Registry, SearchPage, SearchQuery, VersionDetail,
    VersionInfo, db, names,
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
        let page = query.page.unwrap_or(1);
        if !(1..=MAX_PAGE).contains(&page) {
            return Err(Error::bad_request(
                "invalid-page",
                format!("page {page} is not 1 to {MAX_PAGE}"),
            ));
        }
        let mut filters = vec!["p.latest IS NOT NULL".to_string()];
        let mut args: Vec<String> = Vec::new();
        if let Some(q) = query.q.as_deref().filter(|q| !q.trim().is_empty()) {
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
            if !words.is_empty() {
                // Every word, as an FTS5 string (quotes doubled): a
                // substring of the text, through the trigram index.
                let matched = words
                    .iter()
                    .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
                    .collect::<Vec<_>>()
                    .join(" AND ");
                filters.push(format!(
                    "v.rowid IN (SELECT rowid FROM versions_search WHERE versions_search \
                     MATCH ?{})",
                    args.len() + 1
                ));
                args.push(matched);
            }
        }
        if let Some(kind) = query.kind.as_deref().filter(|k| !k.is_empty()) {
            if !KINDS.contains(&kind) {
                return Err(Error::bad_request(
                    "invalid-kind",
                    format!(
                        "kind {} is not one of {}",
                        names::quote(kind),
                        KINDS.join(", ")
                    ),
                ));
            }
            filters.push(format!(
                "EXISTS (SELECT 1 FROM json_each(v.kinds) WHERE value = ?{})",
                args.len() + 1
            ));
            args.push(kind.to_string());
        }
        if let Some(cap) = query.capability.as_deref().filter(|c| !c.is_empty()) {
            if cap.len() > 300 {
                return Err(Error::bad_request(
                    "invalid-capability",
                    "the capability is longer than 300 bytes",
                ));
            }
            let n = args.len() + 1;
            if cap == "http" {
                filters.push(format!(
                    "EXISTS (SELECT 1 FROM json_each(v.capabilities) \
                     WHERE substr(value, 1, length(?{n})) = ?{n})"
                ));
                args.push("http:".to_string());
            } else {
                filters.push(format!(
                    "EXISTS (SELECT 1 FROM json_each(v.capabilities) WHERE value = ?{n})"
                ));
                args.push(cap.to_string());
            }
        }
        let from = format!(
            "FROM plugins p JOIN versions v ON v.plugin = p.id AND v.version = p.latest WHERE {}",
            filters.join(" AND ")
        );
        let offset = i64::from(page - 1) * i64::from(PER_PAGE);
        self.db(move |conn| {
            let total: i64 = conn.query_row(
                &format!("SELECT count(*) {from}"),
                params_from_iter(&args),
                |r| r.get(0),
            )?;
            let sql = format!(
                "SELECT p.id, v.name, v.description, v.version, v.kinds, v.capabilities {from}
                 ORDER BY p.id LIMIT {PER_PAGE} OFFSET {offset}"
            );
            let mut stmt = conn.prepare(&sql)?;
            let plugins = stmt
                .query_map(params_from_iter(&args), |r| {
                    Ok(PluginSummary {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        description: r.get(2)?,
                        latest_version: r.get(3)?,
                        kinds: json_strings(&r.get::<_, String>(4)?),
                        capabilities: json_strings(&r.get::<_, String>(5)?),
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(SearchPage {
                plugins,
                page,
                per_page: PER_PAGE,
                total: total as u64,
            })
        })
        .await
    }

    /// The plugin `id` with its owners and every version, newest first.
    pub async fn plugin(&self, id: &str) -> Result<PluginInfo> {
        names::plugin_id(id)?;
        let id = id.to_string();
        self.db(move |conn| {
            plugin_exists(conn, &id)?;
            let mut stmt = conn.prepare(
                "SELECT v.version, v.digest, v.size, v.signer, v.yanked, v.published_at, v.name,
                     v.description, k.revoked_at IS NOT NULL
                 FROM versions v LEFT JOIN keys k ON k.public_key = v.signer
                 WHERE v.plugin = ?1",
            )?;
            let mut rows = stmt
                .query_map([&id], |r| {
                    Ok((
                        VersionInfo {
                            version: r.get(0)?,
                            digest: r.get(1)?,
                            size: r.get::<_, i64>(2)? as u64,
                            signer: r.get(3)?,
                            signer_revoked: r.get(8)?,
                            yanked: r.get(4)?,
                            published_at: db::rfc3339(r.get(5)?),
                        },
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
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
        self.db(move |conn| {
            let row = conn
                .query_row(
                    "SELECT v.digest, v.size, v.signer, v.signature, v.yanked, v.published_at,
                         v.manifest, k.revoked_at IS NOT NULL
                     FROM versions v LEFT JOIN keys k ON k.public_key = v.signer
                     WHERE v.plugin = ?1 AND v.version = ?2",
                    params![id, version],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, bool>(4)?,
                            r.get::<_, i64>(5)?,
                            r.get::<_, String>(6)?,
                            r.get::<_, bool>(7)?,
                        ))
                    },
                )
                .optional()?;
            let Some((digest, size, signer, signature, yanked, at, manifest, signer_revoked)) = row
            else {
                plugin_exists(conn, &id)?;
                return Err(Error::NotFound(format!("{id} has no version {version}")));
            };
            Ok(VersionDetail {
                id,
                version,
                digest,
                size: size as u64,
                signer,
                signer_revoked,
                signature,
                yanked,
                published_at: db::rfc3339(at),
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
            self.db(move |conn| {
                Ok(conn
                    .query_row(
                        "SELECT 1 FROM versions WHERE digest = ?1 LIMIT 1",
                        [digest],
                        |r| r.get::<_, i64>(0),
                    )
                    .optional()?
                    .is_some())
            })
            .await?
        };
        if !listed {
            return Err(not_found());
        }
        let registry = self.clone();
        let opened = tokio::task::spawn_blocking(move || registry.inner.blobs.open_blob(&hex))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("the blob reader failed: {e}")))??;
        let (file, size) = opened.ok_or_else(|| {
            Error::Internal(anyhow::anyhow!(
                "the blob of {digest} is listed but missing"
            ))
        })?;
        Ok(Blob { file, size })
    }
}

fn json_strings(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}
