//! An operation's JSON request body as parameters: each member of its
//! object schema one of its own, or the whole body one.

use std::collections::BTreeSet;

use serde_json::{Map, Value as Json};

use sandwit_contract::manifest::MAX_PARAMS;

use super::document::{Problem, follow, is_json, skip};
use super::names::param_name;
use super::parameters::Params;
use super::plan::{Location, WireParam};
use super::text::cut;
use crate::sources::schema::{Budget, required, standalone};

/// Adds the JSON body of `op`, if it has one, to `params`: each member of
/// its schema's `properties` as a parameter of its own when they can all
/// stand as one (no `additionalProperties`, within [`MAX_PARAMS`] with the
/// others, no Python name already taken), else the whole body as one,
/// `body` (`request_body` when a parameter takes that name). Whether the
/// body is required; a body that is not JSON skips the operation.
pub(super) fn add_body(
    params: &mut Params,
    document: &Json,
    budget: &mut Budget,
    op: &Map<String, Json>,
) -> Result<bool, Problem> {
    let Some(body) = op.get("requestBody") else {
        return Ok(false);
    };
    let body = follow(document, body)?;
    let body_required = body.get("required").and_then(Json::as_bool) == Some(true);
    let schema = json_schema(document, budget, body)?;
    let members = schema.get("properties").and_then(Json::as_object);
    let taken: BTreeSet<&str> = params.wire.iter().map(|p| p.name.as_str()).collect();
    let flat = members.filter(|members| {
        schema.get("additionalProperties").is_none()
            && members.len() + params.wire.len() <= MAX_PARAMS
            && members
                .keys()
                .all(|m| !taken.contains(param_name(m, Location::BodyMember).as_str()))
    });
    match flat {
        Some(members) => {
            let required = required(&schema);
            for (member, member_schema) in members {
                let param = WireParam {
                    name: param_name(member, Location::BodyMember),
                    wire: member.clone(),
                    location: Location::BodyMember,
                };
                params.push(
                    param,
                    member_schema.clone(),
                    body_required && required.contains(member.as_str()),
                    member_schema.get("description").and_then(Json::as_str),
                );
            }
        }
        None => {
            let name = if taken.contains("body") {
                "request_body"
            } else {
                "body"
            };
            let param = WireParam {
                name: name.into(),
                wire: String::new(),
                location: Location::Body,
            };
            params.push(param, schema, body_required, None);
        }
    }
    Ok(body_required)
}

/// The schema of the JSON media type of `body` (none written: any JSON):
/// a body with no JSON media type skips the operation.
fn json_schema(document: &Json, budget: &mut Budget, body: &Json) -> Result<Json, Problem> {
    let content = body.get("content").and_then(Json::as_object);
    let json = content.and_then(|c| {
        c.iter()
            .find(|(media, _)| is_json(media))
            .map(|(_, value)| value)
    });
    let Some(json) = json else {
        let types: Vec<&str> = content
            .map(|c| c.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return skip(format!(
            "its body is not JSON ({}), which is not sent",
            cut(&types.join(", "), 120)
        ));
    };
    Ok(match json.get("schema") {
        Some(schema) => standalone(document, schema, budget)?,
        None => Json::Object(Map::new()),
    })
}
