//! `/plugins/{id}` and `/plugins/{id}/{version}`: a plugin, its owners and
//! versions (digest, size, signer, signature status, yanked), and one
//! version's methods (signature, kind, docstring, parameter schemas) and
//! the capabilities it requests. The plain path shows the latest version
//! not yanked (the newest if every one is).

use std::fmt::Write as _;

use axum::extract::{Path, State};
use serde_json::Value;

use super::error::WebError;
use super::html::{Esc, Page, plugin_path};
use crate::error::Error;
use crate::{PluginInfo, Registry, VersionDetail};

pub(super) async fn latest(
    State(registry): State<Registry>,
    Path(id): Path<String>,
) -> Result<Page, WebError> {
    let info = registry.plugin(&id).await?;
    let chosen = info
        .versions
        .iter()
        .find(|v| !v.yanked)
        .or(info.versions.first())
        .map(|v| v.version.clone())
        .ok_or_else(|| Error::NotFound(format!("plugin {id} has no version")))?;
    render(&registry, info, &chosen).await
}

pub(super) async fn version(
    State(registry): State<Registry>,
    Path((id, version)): Path<(String, String)>,
) -> Result<Page, WebError> {
    let info = registry.plugin(&id).await?;
    render(&registry, info, &version).await
}

async fn render(registry: &Registry, info: PluginInfo, version: &str) -> Result<Page, WebError> {
    let detail = registry.version(&info.id, version).await?;
    let mut main = String::new();
    let _ = write!(
        main,
        "<h1>{} <span class=\"id\">{}</span></h1>\n<p class=\"description\">{}</p>\n\
         <dl class=\"facts\">\n<dt>Owners</dt><dd>{}</dd>\n\
         <dt>Install</dt><dd><code>sandwit install {}@{}</code></dd>\n</dl>\n",
        Esc(&info.name),
        Esc(&info.id),
        Esc(&info.description),
        Esc(&info.owners.join(", ")),
        Esc(&info.id),
        Esc(&detail.version),
    );
    versions_html(&mut main, &info, &detail.version);
    version_html(&mut main, &detail);
    Ok(Page::ok(format!("{} {}", info.name, detail.version), main))
}

fn versions_html(html: &mut String, info: &PluginInfo, shown: &str) {
    html.push_str(
        "<section aria-labelledby=\"versions\">\n<h2 id=\"versions\">Versions</h2>\n\
         <table class=\"versions\">\n<thead><tr><th scope=\"col\">Version</th>\
         <th scope=\"col\">Published</th><th scope=\"col\">Digest</th>\
         <th scope=\"col\">Size</th><th scope=\"col\">Signature</th>\
         <th scope=\"col\">Status</th></tr></thead>\n<tbody>\n",
    );
    for v in &info.versions {
        let current = if v.version == shown {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = writeln!(
            html,
            "<tr><th scope=\"row\"><a href=\"{}\"{current}>{}</a></th><td>{}</td>\
             <td><code class=\"digest\">{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            Esc(&plugin_path(&info.id, Some(&v.version))),
            Esc(&v.version),
            Esc(&v.published_at),
            Esc(&v.digest),
            Esc(&size(v.size)),
            signature_status(&v.signer, v.signer_revoked),
            if v.yanked { "yanked" } else { "available" },
        );
    }
    html.push_str("</tbody>\n</table>\n</section>\n");
}

/// Every stored version's signature verified against a key of its
/// publisher when it was published (a publish is refused otherwise); a key
/// revoked since is said to be.
fn signature_status(signer: &str, revoked: bool) -> String {
    format!(
        "signed by <code class=\"key\">{}</code>, verified when published{}",
        Esc(signer),
        if revoked {
            "; <strong class=\"revoked\">its publisher has revoked this key since</strong>"
        } else {
            ""
        }
    )
}

fn version_html(html: &mut String, d: &VersionDetail) {
    let m = &d.manifest;
    let _ = write!(
        html,
        "<section aria-labelledby=\"version\">\n<h2 id=\"version\">Version {}{}</h2>\n\
         <dl class=\"facts\">\n<dt>Digest</dt><dd><code class=\"digest\">{}</code></dd>\n\
         <dt>Size</dt><dd>{}</dd>\n<dt>Signature</dt><dd>{}<br><code class=\"signature\">{}</code></dd>\n\
         <dt>Author</dt><dd>{}</dd>\n<dt>Capabilities requested</dt><dd>{}</dd>\n</dl>\n",
        Esc(&d.version),
        if d.yanked { " (yanked)" } else { "" },
        Esc(&d.digest),
        Esc(&size(d.size)),
        signature_status(&d.signer, d.signer_revoked),
        Esc(&d.signature),
        Esc(text(&m["author"])),
        Esc(&capabilities(&m["capabilities"])),
    );
    if !m["config_schema"].is_null() {
        let _ = writeln!(
            html,
            "<h3>Configuration schema</h3>\n<pre class=\"schema\">{}</pre>",
            Esc(&pretty(&m["config_schema"]))
        );
    }
    let methods = m["methods"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let _ = writeln!(
        html,
        "</section>\n<section aria-labelledby=\"methods\">\n<h2 id=\"methods\">Methods ({})</h2>",
        methods.len()
    );
    for method in methods {
        method_html(html, method);
    }
    html.push_str("</section>\n");
}

fn method_html(html: &mut String, method: &Value) {
    let name = text(&method["name"]);
    let params = method["params"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // As Python shows the function the AI calls: optional parameters
    // default to None.
    let signature = params
        .iter()
        .map(|p| {
            let name = text(&p["name"]);
            if p["required"] == true {
                name.to_string()
            } else {
                format!("{name}=None")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let _ = write!(
        html,
        "<article class=\"method\" id=\"method-{}\">\n<h3><code>{}({})</code> \
         <span class=\"kind\">{}</span></h3>\n<p>{}</p>\n<pre class=\"docstring\">{}</pre>\n",
        Esc(name),
        Esc(name),
        Esc(&signature),
        Esc(text(&method["kind"])),
        Esc(text(&method["description"])),
        Esc(text(&method["docstring"])),
    );
    if !params.is_empty() {
        let _ = write!(
            html,
            "<table class=\"params\">\n<caption>Parameters of {}</caption>\n<thead><tr>\
             <th scope=\"col\">Name</th><th scope=\"col\">Required</th>\
             <th scope=\"col\">JSON Schema</th></tr></thead>\n<tbody>\n",
            Esc(name)
        );
        for p in params {
            let _ = writeln!(
                html,
                "<tr><th scope=\"row\"><code>{}</code></th><td>{}</td>\
                 <td><pre class=\"schema\">{}</pre></td></tr>",
                Esc(text(&p["name"])),
                if p["required"] == true { "yes" } else { "no" },
                Esc(&pretty(&p["schema"])),
            );
        }
        html.push_str("</tbody>\n</table>\n");
    }
    if !method["returns"].is_null() {
        let _ = writeln!(
            html,
            "<p>Returns:</p>\n<pre class=\"schema\">{}</pre>",
            Esc(&pretty(&method["returns"]))
        );
    }
    html.push_str("</article>\n");
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn capabilities(value: &Value) -> String {
    let caps: Vec<&str> = value
        .as_array()
        .map(|cs| cs.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if caps.is_empty() {
        "none".to_string()
    } else {
        caps.join(", ")
    }
}

/// A byte count for people: `93,727 bytes (91.5 KiB)`.
fn size(bytes: u64) -> String {
    let digits = bytes.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if bytes < 1024 {
        format!("{grouped} bytes")
    } else if bytes < 1024 * 1024 {
        format!("{grouped} bytes ({:.1} KiB)", bytes as f64 / 1024.0)
    } else {
        format!(
            "{grouped} bytes ({:.1} MiB)",
            bytes as f64 / (1024.0 * 1024.0)
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::size(512), "512 bytes");
        assert_eq!(super::size(93_727), "93,727 bytes (91.5 KiB)");
        assert_eq!(super::size(3 * 1024 * 1024), "3,145,728 bytes (3.0 MiB)");
    }
}
