//! `/`: the plugins, with a search form (`q`, `kind`, `capability`, a GET
//! form, so results have a URL) and pages of results.

use std::fmt::Write as _;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};

use super::error::WebError;
use super::html::{Esc, Page, Url, plugin_path};
use crate::error::Error;
use crate::{Registry, SearchPage, SearchQuery};

/// The kinds a method may have, for the filter.
const KINDS: &[&str] = &["tool", "agent", "behavior", "multimodal-agent"];

/// Capabilities offered as suggestions in the filter (any other may be
/// typed; `http` matches every `http:<host>`).
const CAPABILITIES: &[&str] = &["store", "config", "chat", "http"];

pub(super) async fn listing(
    State(registry): State<Registry>,
    query: Result<Query<SearchQuery>, QueryRejection>,
) -> Result<Page, WebError> {
    let Query(query) =
        query.map_err(|rejection| Error::bad_request("invalid-query", rejection.body_text()))?;
    let form = search_form(&query);
    let results = match registry.search(query.clone()).await {
        Ok(results) => results,
        // A bad search shows its error above the form, to be corrected.
        Err(e @ Error::BadRequest { .. }) => return Ok(super::error::error_page(&e, form)),
        Err(e) => return Err(e.into()),
    };
    let mut main = String::from("<h1>Plugins</h1>\n");
    main.push_str(&form);
    main.push_str(&results_html(&query, &results));
    Ok(Page::ok("Plugins", main))
}

fn search_form(query: &SearchQuery) -> String {
    let q = query.q.as_deref().unwrap_or_default();
    let kind = query.kind.as_deref().unwrap_or_default();
    let capability = query.capability.as_deref().unwrap_or_default();
    let mut html = String::new();
    let _ = write!(
        html,
        "<form class=\"search\" method=\"get\" action=\"/\" role=\"search\">\n\
         <p><label for=\"q\">Search</label>\n\
         <input type=\"search\" id=\"q\" name=\"q\" value=\"{}\" maxlength=\"200\" \
         placeholder=\"words in names, descriptions, methods, docstrings\"></p>\n\
         <p><label for=\"kind\">Method kind</label>\n<select id=\"kind\" name=\"kind\">\n\
         <option value=\"\">any</option>\n",
        Esc(q)
    );
    for k in KINDS {
        let selected = if *k == kind { " selected" } else { "" };
        let _ = writeln!(html, "<option{selected}>{k}</option>");
    }
    let _ = write!(
        html,
        "</select></p>\n<p><label for=\"capability\">Capability</label>\n\
         <input id=\"capability\" name=\"capability\" value=\"{}\" list=\"capabilities\" \
         maxlength=\"300\" placeholder=\"any\">\n<datalist id=\"capabilities\">",
        Esc(capability)
    );
    for c in CAPABILITIES {
        let _ = write!(html, "<option value=\"{c}\">");
    }
    html.push_str("</datalist></p>\n<p><button type=\"submit\">Search</button></p>\n</form>\n");
    html
}

fn results_html(query: &SearchQuery, results: &SearchPage) -> String {
    let mut html = String::new();
    let filtered = [&query.q, &query.kind, &query.capability]
        .iter()
        .any(|f| f.as_deref().is_some_and(|f| !f.trim().is_empty()));
    let _ = writeln!(
        html,
        "<p class=\"count\" role=\"status\">{} plugin{} {}.</p>",
        results.total,
        if results.total == 1 { "" } else { "s" },
        if filtered { "match" } else { "published" }
    );
    if results.plugins.is_empty() {
        return html;
    }
    html.push_str(
        "<table class=\"plugins\">\n<caption>Plugins, by id</caption>\n<thead><tr>\
         <th scope=\"col\">Plugin</th><th scope=\"col\">Latest</th>\
         <th scope=\"col\">Description</th><th scope=\"col\">Kinds</th>\
         <th scope=\"col\">Capabilities</th></tr></thead>\n<tbody>\n",
    );
    for p in &results.plugins {
        let _ = writeln!(
            html,
            "<tr><th scope=\"row\"><a href=\"{}\">{}</a> <span class=\"id\">{}</span></th>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            Esc(&plugin_path(&p.id, None)),
            Esc(&p.name),
            Esc(&p.id),
            Esc(&p.latest_version),
            Esc(&p.description),
            Esc(&p.kinds.join(", ")),
            Esc(&if p.capabilities.is_empty() {
                "none".to_string()
            } else {
                p.capabilities.join(", ")
            }),
        );
    }
    html.push_str("</tbody>\n</table>\n");
    let pages = results.total.div_ceil(u64::from(results.per_page.max(1)));
    if pages > 1 {
        html.push_str("<nav class=\"pages\" aria-label=\"Result pages\">");
        if results.page > 1 {
            let _ = write!(
                html,
                "<a rel=\"prev\" href=\"{}\">Previous</a> ",
                Esc(&page_url(query, results.page - 1))
            );
        }
        let _ = write!(html, "<span>Page {} of {pages}</span>", results.page);
        if u64::from(results.page) < pages {
            let _ = write!(
                html,
                " <a rel=\"next\" href=\"{}\">Next</a>",
                Esc(&page_url(query, results.page + 1))
            );
        }
        html.push_str("</nav>\n");
    }
    html
}

/// The listing's URL for `page` of the same search.
fn page_url(query: &SearchQuery, page: u32) -> String {
    let mut url = String::from("/?");
    for (name, value) in [
        ("q", &query.q),
        ("kind", &query.kind),
        ("capability", &query.capability),
    ] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            let _ = write!(url, "{name}={}&", Url(value));
        }
    }
    let _ = write!(url, "page={page}");
    url
}
