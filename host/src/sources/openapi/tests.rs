//! The tests of reading OpenAPI documents.

use super::names::{identifier, param_name};
use super::*;
use sandwit_contract::manifest::MAX_NAME_LEN;
use serde_json::json;

fn source(operations: &[&str]) -> ToolSourcePolicy {
    let policy = sandwit_contract::Policy::from_toml(&format!(
        "[tools.shop]\nopenapi = \"spec.json\"\nbase_url = \"http://127.0.0.1:1\"\noperations = {operations:?}\nprefix = \"shop_\"\n"
    ))
    .unwrap();
    policy.tool("shop").unwrap().clone()
}

fn document() -> Json {
    json!({
        "openapi": "3.1.0",
        "paths": {
            "/items/{item_id}": {
                "parameters": [{"name": "item_id", "in": "path", "required": true,
                                "schema": {"type": "integer"}}],
                "get": {
                    "operationId": "get_item",
                    "summary": "Read an item",
                    "parameters": [
                        {"name": "q", "in": "query", "schema": {"type": "string"},
                         "description": "A filter"},
                        {"name": "X-Trace-Id", "in": "header", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"content": {"application/json": {"schema":
                        {"$ref": "#/components/schemas/Item"}}}}},
                },
            },
            "/items": {"post": {
                "operationId": "create_item",
                "requestBody": {"required": true, "content": {"application/json": {"schema":
                    {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "price": {"type": "number"}}}}}},
                "responses": {"201": {"content": {"application/json": {"schema":
                    {"$ref": "#/components/schemas/Item"}}}}},
            }},
            "/upload": {"post": {
                "operationId": "upload",
                "requestBody": {"content": {"multipart/form-data": {"schema": {}}}},
            }},
            "/session": {"get": {
                "operationId": "session",
                "parameters": [{"name": "sid", "in": "cookie"}],
            }},
        },
        "components": {"schemas": {"Item": {"type": "object", "properties": {
            "id": {"type": "integer"}, "name": {"type": "string"}}}}},
    })
}

#[test]
fn operations_become_methods_with_flat_parameters() {
    let (offered, skipped) = operations(&document(), Some(&source(&["*"]))).unwrap();
    // In the document's order.
    let names: Vec<&str> = offered.iter().map(|o| o.spec.name.as_str()).collect();
    assert_eq!(names, ["shop_get_item", "shop_create_item"]);
    let get = &offered[0];
    assert_eq!(
        get.spec.signature(),
        "shop_get_item(item_id, q=None, x_trace_id=None)"
    );
    assert_eq!(get.spec.description, "Read an item");
    assert!(
        get.spec.docstring.contains("q: A filter"),
        "{}",
        get.spec.docstring
    );
    assert_eq!(
        get.spec.returns.as_ref().unwrap()["properties"]["id"]["type"],
        "integer"
    );
    assert_eq!(get.plan.params[2].wire, "X-Trace-Id");
    let create = &offered[1];
    assert_eq!(
        create.spec.signature(),
        "shop_create_item(name, price=None)"
    );
    assert!(create.plan.body_required);
    assert_eq!(create.plan.params[0].location, Location::BodyMember);
    let why: Vec<String> = skipped
        .iter()
        .map(|s| format!("{}: {}", s.operation, s.why))
        .collect();
    assert_eq!(why.len(), 2, "{why:?}");
    assert!(
        why[0].starts_with("upload: its body is not JSON (multipart/form-data)"),
        "{why:?}"
    );
    assert!(
        why[1].starts_with("session: its parameter `sid` is in `cookie`"),
        "{why:?}"
    );
}

#[test]
fn only_the_named_operations_are_offered() {
    let (offered, skipped) = operations(&document(), Some(&source(&["get_*"]))).unwrap();
    assert_eq!(offered.len(), 1);
    assert!(skipped.is_empty());
}

#[test]
fn names_are_python_identifiers() {
    assert_eq!(
        identifier("read_item_items__item_id__get"),
        "read_item_items__item_id__get"
    );
    assert_eq!(identifier("my-tool.v2"), "my_tool_v2");
    assert_eq!(identifier("2fa"), "op_2fa");
    let long = identifier(&"x".repeat(100));
    assert_eq!(long.len(), MAX_NAME_LEN);
    assert_ne!(long, identifier(&"x".repeat(101)));
    assert_eq!(param_name("class", Location::Query), "class_");
}

#[test]
fn other_documents_are_refused() {
    let err = operations(&json!({"swagger": "2.0"}), None).err().unwrap();
    assert!(err.contains("Swagger 2 is not read"), "{err}");
}

#[test]
fn paths_and_headers_that_escape_are_skipped() {
    for path in [
        "/../admin/{x}",
        "/a/%2e%2E/b",
        "/x?debug=1",
        "/x#",
        "x/{y}",
        "/a\\b",
        // Percent-encoded dots, slashes, backslashes, escapes, controls.
        "/files/%2E%2e%2f/etc/{x}",
        "/a%2Fb",
        "/a/.%2e/b",
        "/a/%5c..",
        "/a/%252e%252e/b",
        "/a/%00",
    ] {
        assert!(path_problem(path).is_some(), "{path}");
    }
    for path in [
        "/items/{item_id}/v1.2",
        "/caf%C3%A9/{x}",
        "/a%20b",
        "/a/..b/c.",
    ] {
        assert!(path_problem(path).is_none(), "{path}");
    }
    let document = json!({"openapi": "3.1.0", "paths": {
        "/files/%2E%2e%2f{name}": {"get": {"operationId": "escape"}},
        "/files/{name}": {"get": {"operationId": "read"}},
    }});
    let (offered, skipped) = operations(&document, None).unwrap();
    assert_eq!(offered.len(), 1);
    assert_eq!(skipped[0].operation, "escape");
    assert!(
        skipped[0]
            .why
            .contains("its path holds `%2E`, a percent-encoded `.`"),
        "{}",
        skipped[0].why
    );
    let document = json!({"openapi": "3.1.0", "paths": {"/x": {"get": {
        "operationId": "x",
        "parameters": [
            {"name": "Content-Length", "in": "header", "schema": {"type": "string"}},
            {"name": "api_key", "in": "query", "schema": {"type": "string"}},
            {"name": "q", "in": "query", "schema": {"type": "string"}},
        ],
    }}}});
    let policy = sandwit_contract::Policy::from_toml(
        "[tools.s]\nopenapi = \"s.json\"\nbase_url = \"http://127.0.0.1:1\"\noperations = [\"*\"]\n\
         auth = { type = \"query\", name = \"api_key\", value = \"secret-123\" }\n",
    )
    .unwrap();
    let (offered, _) = operations(&document, policy.tool("s")).unwrap();
    // Neither the framing header nor the credential's own parameter is
    // the AI's to fill.
    assert_eq!(offered[0].spec.signature(), "x(q=None)");
}

#[test]
fn body_members_keep_the_documents_order() {
    // Parsed from text, as a document is. GitHub's
    // repos/create-or-update-file-contents: `message` before `content`.
    let document = crate::sources::spec::parse(
        br#"{"openapi": "3.1.0", "paths": {"/repos/{owner}/{repo}/contents/{path}": {"put": {
            "operationId": "repos/create-or-update-file-contents",
            "parameters": [
                {"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "path", "in": "path", "required": true, "schema": {"type": "string"}}
            ],
            "requestBody": {"required": true, "content": {"application/json": {"schema": {
                "type": "object", "required": ["message", "content"],
                "properties": {"message": {"type": "string"}, "content": {"type": "string"},
                               "sha": {"type": "string"}, "branch": {"type": "string"}}}}}}
        }}}}"#,
    )
    .unwrap();
    let (offered, _) = operations(&document, None).unwrap();
    assert_eq!(
        offered[0].spec.signature(),
        "repos_create_or_update_file_contents(owner, repo, path, message, content, \
         sha=None, branch=None)"
    );
    let wires: Vec<&str> = offered[0]
        .plan
        .params
        .iter()
        .map(|p| p.wire.as_str())
        .collect();
    assert_eq!(
        wires,
        [
            "owner", "repo", "path", "message", "content", "sha", "branch"
        ]
    );
}

#[test]
fn headers_that_override_the_target_or_method_are_not_offered() {
    let header = |name: &str| json!({"name": name, "in": "header", "schema": {"type": "string"}});
    let document = json!({"openapi": "3.1.0", "paths": {"/x": {"get": {
        "operationId": "x",
        "parameters": [
            header("X-Original-URL"),
            header("X-Rewrite-URL"),
            header("X-Forwarded-Host"),
            header("X-Forwarded-Prefix"),
            header("x-forwarded-for"),
            header("X-HTTP-Method-Override"),
            header("X-HTTP-Method"),
            header("X-Method-Override"),
            header("Forwarded"),
            header("X-Request-Id"),
        ],
    }}}});
    let (offered, _) = operations(&document, None).unwrap();
    assert_eq!(offered[0].spec.signature(), "x(x_request_id=None)");
}

#[test]
fn a_name_that_makes_no_method_name_is_skipped_saying_why() {
    let why = method_name("", "\u{ff44}\u{ff49}\u{ff56}\u{ff49}\u{ff44}\u{ff45}").unwrap_err();
    assert!(
        why.contains("is written in fullwidth characters, which Python reads as `divide`"),
        "{why}"
    );
    // Fullwidth among ASCII, and after a prefix: still a look-alike.
    let why = method_name("shop_", "get_\u{ff49}tem").unwrap_err();
    assert!(why.contains("reads as `get_item`"), "{why}");
    let why = method_name("", "\u{5929}\u{6c14}").unwrap_err();
    assert!(why.contains("has no ASCII letter or digit"), "{why}");
    let why = method_name("", "__init__").unwrap_err();
    assert!(why.contains("begins with `__`"), "{why}");
    let why = method_name("", "sandwit_run").unwrap_err();
    assert!(why.contains("begins with `sandwit_`"), "{why}");
    assert_eq!(
        method_name("shop_", "my-tool.v2").unwrap(),
        "shop_my_tool_v2"
    );
    assert_eq!(method_name("", "print").unwrap(), "print_");
}
