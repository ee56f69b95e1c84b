//! A call of an OpenAPI operation: the checked arguments put where the plan
//! says (path segments percent-encoded so no value leaves the base URL's
//! path, query parameters form-encoded, headers refused if they hold line
//! breaks, the rest as a JSON body), the source's authentication added
//! last, and the answer as the method's result: its status says whose fault
//! a failure is (the caller's, a refusal, or the server's).

use std::fmt::Write as _;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Map, Value as Json};

use sandwit_contract::error::CallErrorKind;
use sandwit_contract::json::{BytesAs, value_from_json, value_to_json};
use sandwit_contract::types::{ContentPart, Media, MethodKind, MethodResult, Value};

use super::openapi::{Location, Plan};
use crate::capabilities::config::Redactor;
use crate::capabilities::http::host_client::{HostHttp, HttpFailure, Reply};

/// How a source's calls authenticate, its secret read.
#[derive(Clone)]
pub(crate) enum Credentials {
    None,
    Header(http::HeaderName, http::HeaderValue),
    Query(String, String),
}

/// What one source's calls share.
pub(crate) struct Endpoint {
    pub http: HostHttp,
    /// The base URL's path, without a trailing `/`.
    pub base_path: String,
    pub credentials: Credentials,
    /// Hides the source's secret in whatever a call gives back.
    pub redactor: Redactor,
}

/// The most of an error answer's body that a message quotes.
const QUOTED_BODY: usize = 1_000;

/// Calls `plan` with `args` (checked against its schemas) as a method of
/// `kind`.
pub(crate) async fn call(
    endpoint: &Endpoint,
    plan: &Plan,
    kind: MethodKind,
    args: Value,
) -> Result<MethodResult, CallErrorKind> {
    let request = request(endpoint, plan, args)?;
    let shown = format!("{} {}", plan.method, plan.path);
    let reply = endpoint
        .http
        .send(
            plan.method.clone(),
            &request.target,
            request.headers,
            request.body,
        )
        .await
        .map_err(|e| match e {
            HttpFailure::Internal { .. } => CallErrorKind::Denied {
                message: format!("{shown}: {e}"),
            },
            e => CallErrorKind::Failed {
                message: endpoint.redactor.redact(&format!("{shown}: {e}")),
            },
        })?;
    answer(endpoint, &shown, kind, reply)
}

struct Request {
    /// Path and query.
    target: String,
    headers: http::HeaderMap,
    body: Option<Bytes>,
}

fn request(endpoint: &Endpoint, plan: &Plan, args: Value) -> Result<Request, CallErrorKind> {
    let invalid = |message: String| CallErrorKind::InvalidArguments { message };
    let mut given: Map<String, Json> = match value_to_json(&args, BytesAs::Base64) {
        Json::Object(map) => map,
        _ => Map::new(),
    };
    let mut path = plan.path.clone();
    let mut query = String::new();
    let mut headers = http::HeaderMap::new();
    let mut body: Option<Json> = plan.body_required.then(|| Json::Object(Map::new()));
    for param in &plan.params {
        let Some(value) = given.remove(&param.name) else {
            continue;
        };
        if value.is_null() && param.location != Location::Body {
            continue;
        }
        match param.location {
            Location::Path => {
                let text = scalar(&value);
                // One segment, never none, never a step up or across:
                // routers and proxies may decode before they normalise.
                let decoded = text
                    .to_ascii_lowercase()
                    .replace("%2e", ".")
                    .replace("%2f", "/");
                if text.is_empty()
                    || decoded == "."
                    || decoded == ".."
                    || decoded.contains(['/', '\\'])
                {
                    return Err(invalid(format!(
                        "`{}` must be one path segment: not empty, not `.` or `..`, without `/` or `\\`",
                        param.name
                    )));
                }
                path = path.replace(&format!("{{{}}}", param.wire), &encode_component(&text));
            }
            Location::Query => {
                let values = match value {
                    Json::Array(items) => items,
                    other => vec![other],
                };
                for item in values {
                    push_query(&mut query, &param.wire, &scalar(&item));
                }
            }
            Location::Header => {
                let name = http::HeaderName::from_bytes(param.wire.as_bytes())
                    .map_err(|_| invalid(format!("`{}` is not a header name", param.wire)))?;
                let value = http::HeaderValue::from_str(&scalar(&value)).map_err(|_| {
                    invalid(format!(
                        "`{}` holds characters a header may not (line breaks, controls)",
                        param.name
                    ))
                })?;
                headers.insert(name, value);
            }
            Location::BodyMember => {
                if !matches!(body, Some(Json::Object(_))) {
                    body = Some(Json::Object(Map::new()));
                }
                if let Some(Json::Object(members)) = &mut body {
                    members.insert(param.wire.clone(), value);
                }
            }
            Location::Body => body = Some(value),
        }
    }
    if path.contains('{') {
        return Err(invalid(format!(
            "`{}` has a path parameter no argument filled",
            plan.path
        )));
    }
    match &endpoint.credentials {
        Credentials::None => {}
        Credentials::Header(name, value) => {
            headers.insert(name.clone(), value.clone());
        }
        Credentials::Query(name, value) => push_query(&mut query, name, value),
    }
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json, */*;q=0.5"),
    );
    let body = match body {
        Some(json) => {
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            Some(Bytes::from(json.to_string()))
        }
        None => None,
    };
    Ok(Request {
        target: format!("{}{path}{query}", endpoint.base_path),
        headers,
        body,
    })
}

/// A response as the method's result, or as whose fault its failure was.
fn answer(
    endpoint: &Endpoint,
    shown: &str,
    kind: MethodKind,
    reply: Reply,
) -> Result<MethodResult, CallErrorKind> {
    let status = reply.status;
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(&reply.body);
        let said = endpoint
            .redactor
            .redact_cut(text.trim().to_string(), QUOTED_BODY);
        let message = |what: &str| {
            if said.is_empty() {
                format!("{shown}: {what} ({status})")
            } else {
                format!("{shown}: {what} ({status}): {said}")
            }
        };
        return Err(match status {
            300..=399 => CallErrorKind::Failed {
                message: format!(
                    "{shown}: redirected ({status}) to {}; redirects are not followed: point \
                     `base_url` at the final address",
                    endpoint
                        .redactor
                        .redact_cut(reply.location.unwrap_or_default(), 200)
                ),
            },
            401 | 403 => CallErrorKind::Denied {
                message: message("the server refused the source's credentials"),
            },
            400 | 404 | 405 | 409 | 410 | 412 | 413 | 414 | 415 | 422 => {
                CallErrorKind::InvalidArguments {
                    message: message("the server refused the request"),
                }
            }
            _ => CallErrorKind::Failed {
                message: message("the server failed"),
            },
        });
    }
    let media = reply
        .content_type
        .as_deref()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let is_json = media == "application/json" || media.ends_with("+json");
    let mut value = if reply.body.is_empty() {
        Value::Null
    } else if is_json {
        let json: Json =
            serde_json::from_slice(&reply.body).map_err(|e| CallErrorKind::Failed {
                message: format!("{shown}: the server's JSON is malformed: {e}"),
            })?;
        value_from_json(json)
    } else if media.starts_with("text/") || media.is_empty() {
        Value::Text(String::from_utf8_lossy(&reply.body).into_owned())
    } else {
        Value::Bytes(reply.body.to_vec())
    };
    let mut result = match kind {
        MethodKind::Tool => MethodResult::Tool(value),
        MethodKind::Agent | MethodKind::Behavior => {
            let text = match value {
                Value::Text(text) => text,
                other => value_to_json(&other, BytesAs::Base64).to_string(),
            };
            if kind == MethodKind::Agent {
                MethodResult::Agent(text)
            } else {
                MethodResult::Behavior(text)
            }
        }
        MethodKind::MultimodalAgent => {
            let part = match value {
                Value::Bytes(data) if media.starts_with("image/") => ContentPart::Image(Media {
                    mime_type: media.clone(),
                    data,
                }),
                Value::Text(text) => ContentPart::Text(text),
                other => {
                    value = other;
                    ContentPart::Text(value_to_json(&value, BytesAs::Base64).to_string())
                }
            };
            MethodResult::MultimodalAgent(vec![part])
        }
    };
    endpoint.redactor.redact_result(&mut result);
    Ok(result)
}

/// Adds `name=value` to `query` (`?` first, then `&`), both encoded.
fn push_query(query: &mut String, name: &str, value: &str) {
    let sep = if query.is_empty() { '?' } else { '&' };
    let _ = write!(
        query,
        "{sep}{}={}",
        encode_component(name),
        encode_component(value)
    );
}

/// A scalar argument as text: a string as itself, anything else as JSON.
fn scalar(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` percent-encoded but for RFC 3986's unreserved characters.
pub(crate) fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `user:password` as a basic `Authorization` header's value.
pub(crate) fn basic(username: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    format!("Basic {token}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::openapi::WireParam;
    use sandwit_contract::policy::HttpLimits;

    fn endpoint(credentials: Credentials) -> Endpoint {
        let (http, base_path) =
            HostHttp::for_url("http://127.0.0.1:1/api/", HttpLimits::default()).unwrap();
        Endpoint {
            http,
            base_path,
            credentials,
            redactor: Redactor::of_secrets(["tok-secret-1".to_string()]),
        }
    }

    fn plan() -> Plan {
        let param = |name: &str, wire: &str, location| WireParam {
            name: name.into(),
            wire: wire.into(),
            location,
        };
        Plan {
            method: http::Method::GET,
            path: "/items/{item_id}".into(),
            params: vec![
                param("item_id", "item_id", Location::Path),
                param("terms", "terms", Location::Query),
                param("x_trace", "X-Trace", Location::Header),
            ],
            body_required: false,
        }
    }

    fn args(json: Json) -> Value {
        value_from_json(json)
    }

    #[test]
    fn arguments_go_where_the_plan_says() {
        let request = request(
            &endpoint(Credentials::Query("api_key".into(), "k&1".into())),
            &plan(),
            args(serde_json::json!({"item_id": "a b", "terms": ["x y", "z"], "x_trace": "t1"})),
        )
        .unwrap();
        assert_eq!(
            request.target,
            "/api/items/a%20b?terms=x%20y&terms=z&api_key=k%261"
        );
        assert_eq!(request.headers["x-trace"], "t1");
        assert!(request.body.is_none());
    }

    #[test]
    fn a_path_value_is_one_segment() {
        for value in ["", ".", "..", "%2e%2E", "a/b", "a%2Fb", "a\\b"] {
            let err = request(
                &endpoint(Credentials::None),
                &plan(),
                args(serde_json::json!({"item_id": value})),
            )
            .err()
            .unwrap();
            assert!(
                matches!(err, CallErrorKind::InvalidArguments { .. }),
                "{value:?}: {err}"
            );
        }
    }

    #[test]
    fn a_header_with_a_line_break_is_refused() {
        let err = request(
            &endpoint(Credentials::None),
            &plan(),
            args(serde_json::json!({"item_id": 1, "x_trace": "a\r\nInjected: 1"})),
        )
        .err()
        .unwrap();
        assert!(
            matches!(err, CallErrorKind::InvalidArguments { .. }),
            "{err}"
        );
    }

    #[test]
    fn statuses_say_whose_fault_a_failure_is_and_secrets_are_hidden() {
        let reply = |status: u16, body: &str| Reply {
            status,
            content_type: Some("application/json".into()),
            location: None,
            body: Bytes::from(body.to_string()),
        };
        let e = endpoint(Credentials::None);
        let kind = |status, body| answer(&e, "GET /x", MethodKind::Tool, reply(status, body));
        assert!(matches!(
            kind(422, "{}"),
            Err(CallErrorKind::InvalidArguments { .. })
        ));
        assert!(matches!(kind(401, ""), Err(CallErrorKind::Denied { .. })));
        match kind(500, "token tok-secret-1 leaked") {
            Err(CallErrorKind::Failed { message }) => {
                assert!(!message.contains("tok-secret-1"), "{message}");
                assert!(message.contains("(500)"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        match kind(200, r#"{"auth": "Bearer tok-secret-1"}"#) {
            Ok(MethodResult::Tool(value)) => {
                assert!(!format!("{value:?}").contains("tok-secret-1"), "{value:?}")
            }
            other => panic!("{other:?}"),
        }
    }
}
