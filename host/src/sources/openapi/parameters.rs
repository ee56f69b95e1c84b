//! An operation's parameters: its path, query and header parameters, each
//! one this can send as the document says it is sent (in its default
//! style), gathered with its body's (body.rs) into one list, required ones
//! first.

use std::collections::BTreeSet;

use serde_json::{Map, Value as Json};

use sandwit_contract::manifest::{MAX_PARAMS, Param};

use super::document::{Problem, follow, skip};
use super::names::param_name;
use super::plan::{Location, WireParam};
use super::text::cut;
use crate::sources::schema::{Budget, standalone};

/// Header parameters a document may not have the AI fill in: those the
/// host writes, those that frame or route the request, and those a proxy or
/// framework in front of the server may take for the request's real
/// target, origin or method (`X-Original-URL` reaching a path the base URL
/// does not, `X-HTTP-Method-Override` making a `GET` a `DELETE`). Every
/// `X-Forwarded-*` header too ([`is_host_header`]).
const HOST_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "content-type",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "connection",
    "proxy-connection",
    "keep-alive",
    "upgrade",
    "expect",
    "accept",
    "host",
    "cookie",
    "forwarded",
    "via",
    "max-forwards",
    "x-original-url",
    "x-original-uri",
    "x-rewrite-url",
    "x-override-url",
    "x-original-host",
    "x-host",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "x-original-method",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Whether the header `name` (in lower case) is one the AI may not set
/// ([`HOST_HEADERS`], `X-Forwarded-*`).
fn is_host_header(name: &str) -> bool {
    HOST_HEADERS.contains(&name) || name.starts_with("x-forwarded-")
}

/// An operation's parameters as they are gathered, in the document's
/// order.
#[derive(Default)]
pub(super) struct Params {
    /// Where each goes in the request.
    pub wire: Vec<WireParam>,
    /// Each one's spec: its Python name, its schema, whether it is required.
    pub specs: Vec<Param>,
    /// The description of each that has one (by its Python name), for the
    /// docstring's `Args:`.
    pub docs: Vec<(String, String)>,
}

impl Params {
    /// Adds `param`, with its `schema`, whether it is `required` and its
    /// `description` if it has one.
    pub(super) fn push(
        &mut self,
        param: WireParam,
        schema: Json,
        required: bool,
        description: Option<&str>,
    ) {
        if let Some(text) = description {
            self.docs.push((param.name.clone(), cut(text, 1_000)));
        }
        self.specs.push(Param {
            name: param.name.clone(),
            schema,
            required,
        });
        self.wire.push(param);
    }

    /// The parameters, required ones first, as a Python signature needs
    /// (the order within each stays the document's; the docs keep it
    /// whole): refused if there are more than [`MAX_PARAMS`], or two with
    /// one Python name.
    pub(super) fn in_signature_order(self) -> Result<Params, Problem> {
        let Params { wire, specs, docs } = self;
        if specs.len() > MAX_PARAMS {
            return skip(format!(
                "it takes {} parameters, more than the limit of {MAX_PARAMS}",
                specs.len()
            ));
        }
        let names: BTreeSet<&str> = specs.iter().map(|p| p.name.as_str()).collect();
        if names.len() != specs.len() {
            return skip("two of its parameters have one Python name".into());
        }
        let mut order: Vec<usize> = (0..specs.len()).collect();
        order.sort_by_key(|&i| !specs[i].required);
        Ok(Params {
            specs: order.iter().map(|&i| specs[i].clone()).collect(),
            wire: order.iter().map(|&i| wire[i].clone()).collect(),
            docs,
        })
    }
}

/// The path, query and header parameters of the operation `op` of the path
/// item `item`, but those the host writes and the one the source's
/// credential takes (`credential`: where it goes, and its name).
pub(super) fn parameters(
    document: &Json,
    budget: &mut Budget,
    item: &Map<String, Json>,
    op: &Map<String, Json>,
    credential: Option<(Location, &str)>,
) -> Result<Params, Problem> {
    let mut params = Params::default();
    for p in declared(document, item, op)? {
        add_parameter(&mut params, document, budget, p, credential)?;
    }
    Ok(params)
}

/// The parameters declared for `op`: the path item's, overridden by the
/// operation's (by name and location), `$ref`s followed. More than can be
/// offered are not looked at one by one.
fn declared<'a>(
    document: &'a Json,
    item: &'a Map<String, Json>,
    op: &'a Map<String, Json>,
) -> Result<Vec<&'a Map<String, Json>>, Problem> {
    let lists = [item.get("parameters"), op.get("parameters")];
    let count: usize = lists
        .iter()
        .flatten()
        .map(|l| l.as_array().map_or(0, Vec::len))
        .sum();
    if count > 4 * MAX_PARAMS {
        return skip(format!(
            "it declares {count} parameters, more than the limit of {MAX_PARAMS}"
        ));
    }
    let mut raw: Vec<&Map<String, Json>> = Vec::new();
    for list in lists.into_iter().flatten() {
        for p in list.as_array().into_iter().flatten() {
            let p = follow(document, p)?;
            let Some(p) = p.as_object() else {
                return skip("a parameter is not an object".into());
            };
            let key = |p: &Map<String, Json>| (p.get("name").cloned(), p.get("in").cloned());
            raw.retain(|q| key(q) != key(p));
            raw.push(p);
        }
    }
    Ok(raw)
}

/// Adds the parameter `p` to `params`, unless it is a header the host
/// writes or the source's `credential`: refused if it is not sent as
/// written (see [`location_of`] and [`sent_as_written`]).
fn add_parameter(
    params: &mut Params,
    document: &Json,
    budget: &mut Budget,
    p: &Map<String, Json>,
    credential: Option<(Location, &str)>,
) -> Result<(), Problem> {
    let wire = p.get("name").and_then(Json::as_str).unwrap_or_default();
    let location = location_of(p, wire)?;
    let lower = wire.to_ascii_lowercase();
    if location == Location::Header && is_host_header(&lower) {
        // The host writes these itself, or they frame or route the
        // request.
        return Ok(());
    }
    if credential
        .is_some_and(|(at_loc, name)| at_loc == location && name.eq_ignore_ascii_case(wire))
    {
        // The source's credential goes there.
        return Ok(());
    }
    sent_as_written(p, wire, location)?;
    let schema = match p.get("schema") {
        Some(schema) => standalone(document, schema, budget)?,
        None => Json::Object(Map::new()),
    };
    let required =
        location == Location::Path || p.get("required").and_then(Json::as_bool) == Some(true);
    let param = WireParam {
        name: param_name(wire, location),
        wire: wire.to_string(),
        location,
    };
    params.push(
        param,
        schema,
        required,
        p.get("description").and_then(Json::as_str),
    );
    Ok(())
}

/// Where the parameter `p` (named `wire`) goes: the path, the query or a
/// header (a cookie, or no location, skips the operation).
fn location_of(p: &Map<String, Json>, wire: &str) -> Result<Location, Problem> {
    match p.get("in").and_then(Json::as_str) {
        Some("path") => Ok(Location::Path),
        Some("query") => Ok(Location::Query),
        Some("header") => Ok(Location::Header),
        Some(other) => skip(format!(
            "its parameter `{}` is in `{}`, which is not sent",
            cut(wire, 60),
            cut(other, 20)
        )),
        None => skip(format!("its parameter `{}` has no `in`", cut(wire, 60))),
    }
}

/// Refuses the parameter `p` (named `wire`, at `location`) if this cannot
/// send it as the document says: encoded by a media type, or in a style
/// other than its location's default (`form`, exploded, in the query;
/// `simple` elsewhere).
fn sent_as_written(p: &Map<String, Json>, wire: &str, location: Location) -> Result<(), Problem> {
    if p.contains_key("content") {
        return skip(format!(
            "its parameter `{}` is encoded by a media type, which is not supported",
            cut(wire, 60)
        ));
    }
    let default_style = if location == Location::Query {
        "form"
    } else {
        "simple"
    };
    let style_ok = p
        .get("style")
        .and_then(Json::as_str)
        .is_none_or(|s| s == default_style);
    let explode_ok = location != Location::Query || p.get("explode") != Some(&Json::Bool(false));
    if !style_ok || !explode_ok {
        return skip(format!(
            "its parameter `{}` uses a serialization style other than the default",
            cut(wire, 60)
        ));
    }
    Ok(())
}
