//! The OpenAPI 3.1 document of the interface (`GET /v1/openapi.json`).
//!
//! Built from each operation's row (`api::document_rows()`, an [`operations::Op`] kept beside its
//! handler and served from the same row as its route: method, path, access, prose, query
//! parameters, statuses and the body and answer types), the error table (`error::Code`:
//! statuses and `error_code`s), the API versions of `http::version`, the schemas derived from those
//! types ([`derived`]) and the few written ones of [`schemas`]. What each operation
//! can answer is derived, not listed by hand: every operation can answer 400 (e.g. a bad
//! `X-API-Version`) and 500; one with credentials 401; one with path parameters 404; one with a
//! body 408 (a stalled body), 413 and 415; one that writes (any method but `GET`, and a `GET` taking user headers,
//! which makes a linked-account user on first contact) 507 when the server's disk is full;
//! plus the success status and the row's extra statuses (409, 429).
//!
//! Drift checks: the integration tests validate every JSON response they receive against the
//! document. To add an operation: a row in its `api` file's `operations`, naming its body and
//! answer types (`body_of`, `ok_of`, …), served with its access and handler (`api::Serve`).

pub mod derived;
pub mod operations;
pub mod schemas;

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::error::Code;
use crate::http::auth::Access;
use crate::http::version;
use crate::models::Models;
use operations::Op;
use schemas::{object, reference};

/// The decisions that concern clients (see docs/decisions.md) and notes for them: the document's
/// `info.description`.
const DESCRIPTION: &str = include_str!("description.md");

/// The whole document for the operations' rows `ops` (`api::document_rows()`): the schemas of
/// the bodies and answers the rows name by type are derived ([`derived::Derived`]), beside the
/// written ones of [`schemas`] (no name is both: a unit test says so).
pub fn document(ops: &[Op], models: &Models) -> Value {
    let mut paths = Map::new();
    for op in ops {
        let mut o = operation(op);
        if let Some(links) = links(op, ops) {
            o["responses"][op.ok.0.to_string()]["links"] = links;
        }
        let entry = paths.entry(op.path.to_string()).or_insert_with(|| json!({}));
        entry[op.method.to_ascii_lowercase()] = o;
    }
    let mut components = schemas::listed(models);
    components.extend(derived_schemas(ops));
    for (status, schema) in error_schemas() {
        components.insert(format!("Error{status}"), schema);
    }
    components.insert("InviteNotFound".into(), invite_not_found());
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Conversational Replica Service Interface (replicad)",
            "version": version::CURRENT,
            "description": DESCRIPTION,
            "license": { "name": "Apache-2.0", "identifier": "Apache-2.0" },
        },
        "servers": [{ "url": "/" }],
        "tags": tags(ops),
        "paths": paths,
        "components": { "schemas": components, "securitySchemes": security_schemes() },
    })
}

/// The schemas `ops` derive from the types they name, by name.
pub fn derived_schemas(ops: &[Op]) -> Map<String, Value> {
    let mut derived = derived::Derived::default();
    for (derive, name) in ops.iter().flat_map(|op| &op.schemas) {
        derive(&mut derived, name);
    }
    derived.into_schemas()
}

/// `links` from an operation that creates a resource to every operation whose path names it:
/// the new id from the answer, the other path parameters from the request (OpenAPI 3.1 §4.8.20).
fn links(op: &Op, ops: &[Op]) -> Option<Value> {
    let (param, pointer) = op.creates?;
    let marker = format!("{{{param}}}");
    let mut links = Map::new();
    for target in ops.iter().filter(|t| t.path.contains(&marker)) {
        let mut parameters = Map::new();
        for name in path_param_names(target.path) {
            let value = if name == param {
                format!("$response.body#{pointer}")
            } else if path_param_names(op.path).any(|n| n == name) {
                format!("$request.path.{name}")
            } else {
                continue;
            };
            parameters.insert(name.to_string(), json!(value));
        }
        links.insert(target.id.to_string(), json!({ "operationId": target.id, "parameters": parameters }));
    }
    Some(Value::Object(links))
}

fn path_param_names(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
}

fn tags(ops: &[Op]) -> Vec<Value> {
    let mut seen = Vec::new();
    for op in ops {
        if !seen.contains(&op.tag) {
            seen.push(op.tag);
        }
    }
    seen.into_iter().map(|t| json!({ "name": t })).collect()
}

/// Every status the operation of `op` can answer (see the module documentation).
pub fn statuses(op: &Op) -> BTreeSet<u16> {
    let mut s: BTreeSet<u16> = [op.ok.0, 400, 500].into();
    if op.access != Access::Public {
        s.extend([401, 429]);
    }
    if op.path.contains('{') {
        s.insert(404);
    }
    if op.body.is_some() {
        s.extend([408, 413, 415]);
    }
    // A write, or a read whose user headers name a linked account seen for the first time
    // (the user is made then, `service::users::linked`).
    if op.method != "GET" || matches!(op.access, Access::User | Access::Either) {
        s.insert(507);
    }
    s.extend(op.extra);
    s.extend(op.also.iter().map(|(status, _)| *status));
    s
}

fn operation(op: &Op) -> Value {
    let mut parameters: Vec<Value> = path_params(op.path);
    parameters.extend(op.query.map(|derive| derive()).unwrap_or_default());
    parameters.extend(op.headers.iter().cloned());
    parameters.push(version_header());
    if op.body.is_some() {
        parameters.push(content_encoding_header());
    }
    let mut responses = Map::new();
    for status in statuses(op) {
        responses.insert(status.to_string(), response(op, status));
    }
    let mut o = json!({
        "operationId": op.id,
        "tags": [op.tag],
        "summary": op.summary,
        "description": format!("{}\n\nAccess: {}.", op.description, access_text(op.access)),
        "parameters": parameters,
        "responses": responses,
        "security": security(op.access),
    });
    if op.deprecated {
        o["deprecated"] = json!(true);
    }
    if let Some(body) = op.body {
        o["requestBody"] = json!({
            "required": !op.body_optional,
            "content": { op.body_media: { "schema": reference(body) } },
        });
    }
    o
}

fn response(op: &Op, status: u16) -> Value {
    if status == op.ok.0 && status == 204 {
        return json!({ "description": "Success; no body.", "headers": served_version_header() });
    }
    let also = op.also.iter().find(|(s, _)| *s == status);
    let (schema, description) = if status == op.ok.0 {
        (reference(op.ok.1), "Success.".to_string())
    } else if let Some((_, name)) = also {
        (reference(name), "Not ready: the same body, naming what failed.".to_string())
    } else if status == 404 && op.plain_404 {
        (reference("InviteNotFound"), "Not found.".to_string())
    } else {
        (reference(&format!("Error{status}")), error_description(status))
    };
    let media = if status == op.ok.0 { op.ok_media } else { "application/json" };
    let mut content = json!({ media: { "schema": schema } });
    if status == op.ok.0 {
        for media in op.ok_also {
            content[*media] = json!({ "schema": { "type": "string" } });
        }
    }
    json!({ "description": description, "headers": served_version_header(), "content": content })
}

fn error_description(status: u16) -> String {
    let codes: Vec<&str> = Code::ALL.iter().filter(|c| c.status() == status).filter_map(|c| c.as_str()).collect();
    let what = match status {
        400 => "Bad request (body, query, path parameter, user headers, X-API-Version)",
        401 => "Missing or invalid credentials",
        404 => "Not found, or not accessible to the caller (never 403)",
        409 => "Conflict",
        408 => "Nothing of the body arrived for the server's `--body-timeout` (default 30 s)",
        413 => "Body larger than the limit (measured after gzip decompression)",
        415 => "Content-Type not JSON or Content-Encoding not gzip",
        429 => {
            "Quota or rate limit exceeded (RATE_LIMITED: see `Retry-After`; with `--rate-limit-per-key` every \
            answer to a key carries `RateLimit-Policy: N;w=60` and `RateLimit: limit=N, remaining=R, reset=S`)"
        }
        500 => "Internal error (details are logged under the request id)",
        507 => {
            "The server's disk is full (or below its `--min-free-space` reserve): nothing of the write was \
            stored. Reads keep working; the same request succeeds once space is freed (retry later)"
        }
        _ => "Error",
    };
    format!("{what}. error_code: {}.", codes.join(", "))
}

fn path_params(path: &str) -> Vec<Value> {
    path_param_names(path)
        .map(|name| {
            let schema = match name {
                "userID" => json!({ "type": "string", "minLength": 1, "maxLength": 100 }),
                "replicaUUID" | "chatUUID" | "conversationUUID" => {
                    json!({ "type": "string", "format": "uuid" })
                }
                "knowledgeBaseID" => derived::sparse_id(),
                _ => json!({ "type": "string" }),
            };
            json!({ "name": name, "in": "path", "required": true, "schema": schema })
        })
        .collect()
}

fn version_header() -> Value {
    let list: Vec<String> = version::SUPPORTED.iter().map(|v| format!("`{}`: {}", v.date, v.note)).collect();
    json!({
        "name": "X-API-Version",
        "in": "header",
        "required": false,
        "schema": { "type": "string", "format": "date", "default": version::CURRENT },
        "description": format!(
            "Dated API version (spec §9): any date `YYYY-MM-DD` selects the newest version released on \
            or before it (a date before the oldest selects the oldest); a value that is not a date → \
            400 UNSUPPORTED_API_VERSION. The answer names the version served in its X-API-Version \
            header. Versions: {}",
            list.join("; ")
        ),
    })
}

/// The `X-API-Version` response header: on every answer once the request's version is accepted.
fn served_version_header() -> Value {
    json!({
        "X-API-Version": {
            "required": false,
            "description": "The version the answer was served with (absent when the request's X-API-Version was refused).",
            "schema": { "type": "string", "enum": version::SUPPORTED.iter().map(|v| v.date).collect::<Vec<_>>() },
        }
    })
}

fn content_encoding_header() -> Value {
    json!({
        "name": "Content-Encoding",
        "in": "header",
        "required": false,
        "schema": { "type": "string", "enum": ["gzip"] },
        "description": "The body is gzipped; the size limit applies after decompression. Other encodings → 415.",
    })
}

fn security_schemes() -> Value {
    let key = |name: &str, d: &str| json!({ "type": "apiKey", "in": "header", "name": name, "description": d });
    json!({
        "organizationSecret": key(
            "X-ORGANIZATION-SECRET",
            "The organization's API key (shown once at redemption, stored hashed).",
        ),
        "userId": key(
            "X-USER-ID",
            "Acts as this user of the organization. Without X-USER-ID-TYPE the type is `id` (the user's own \
            id), as existing clients send it after creating their user.",
        ),
        "userIdType": key(
            "X-USER-ID-TYPE",
            &format!(
                "`id` (alias `user_uuid`), `email` (unknown user → 401 USER_NOT_FOUND) or the linked-account \
                types `{}` (a user is created on first contact); another type → 400 INVALID_USER_HEADERS.",
                crate::service::channel::linked_account_types().join("`, `")
            ),
        ),
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "`Authorization: Bearer <API key>`: the same key as X-ORGANIZATION-SECRET.",
        },
    })
}

/// The security alternatives of spec §5 for `access` (docs/decisions.md "Auth").
fn security(access: Access) -> Value {
    let org = [json!({ "organizationSecret": [] }), json!({ "bearer": [] })];
    // A user is named by X-USER-ID with its type, or by X-USER-ID alone (type `id`).
    let with_user = |typed: bool| {
        org.iter().cloned().map(move |mut v| {
            v["userId"] = json!([]);
            if typed {
                v["userIdType"] = json!([]);
            }
            v
        })
    };
    let users: Vec<Value> = with_user(true).chain(with_user(false)).collect();
    match access {
        Access::Public => json!([]),
        Access::Org => json!(org),
        // The key alone acts as the organization's owner user (`http::auth`).
        Access::User | Access::Either => json!(users.into_iter().chain(org).collect::<Vec<_>>()),
    }
}

fn access_text(access: Access) -> &'static str {
    match access {
        Access::Public => "public (no credentials)",
        Access::Org => "the organization key (user headers are ignored)",
        Access::User => {
            "the organization key and a user (X-USER-ID, with X-USER-ID-TYPE or alone for type `id`); the key \
            alone acts as the organization's owner user"
        }
        Access::Either => "the organization key, alone (acting as the organization's owner user) or with a user",
    }
}

/// `Error{status}` schemas: the spec §7 body with the `error_code`s of that status.
fn error_schemas() -> Vec<(u16, Value)> {
    let statuses: BTreeSet<u16> = Code::ALL.iter().map(|c| c.status()).collect();
    statuses
        .into_iter()
        .map(|status| {
            let codes: Vec<&str> =
                Code::ALL.iter().filter(|c| c.status() == status).filter_map(|c| c.as_str()).collect();
            let mut props = json!({
                "success": { "const": false },
                "error": { "type": "string" },
                "error_code": { "type": "string", "enum": codes },
                "fingerprint": { "type": "string", "description": "Identifier of the error kind, for reporting." },
                "request_id": { "type": "string", "description": "Equals the X-Request-Id response header." },
            });
            if status == 500 {
                props["inner_exception"] = object(
                    &["name", "message"],
                    json!({
                        "name": { "type": "string" },
                        "message": { "type": "string" },
                        "cause": { "type": "string" },
                        "stack": { "type": "string" },
                    }),
                    false,
                );
            }
            (status, object(&["success", "error", "request_id"], props, false))
        })
        .collect()
}

fn invite_not_found() -> Value {
    object(
        &["success", "error", "request_id"],
        json!({ "success": { "const": false }, "error": { "type": "string" }, "request_id": { "type": "string" } }),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api;

    fn doc() -> Value {
        document(&api::document_rows(), &Models::parse(crate::models::SHIPPED).unwrap())
    }

    fn operations_of(doc: &Value) -> BTreeSet<(String, String)> {
        let mut set = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                set.insert((method.to_ascii_uppercase(), path.clone()));
            }
        }
        set
    }

    #[test]
    fn the_document_has_exactly_the_operations_of_the_route_table() {
        let routes: BTreeSet<(String, String)> =
            api::routes().iter().map(|r| (r.method.as_str().to_string(), r.path.to_string())).collect();
        assert_eq!(operations_of(&doc()), routes);
        assert_eq!(api::routes().len(), routes.len(), "one row per (method, path)");
    }

    #[test]
    fn every_reference_resolves_and_operation_ids_are_unique() {
        let d = doc();
        let text = d.to_string();
        let mut ids = BTreeSet::new();
        for op in api::document_rows() {
            assert!(ids.insert(op.id), "duplicate operationId {}", op.id);
        }
        for part in text.split("\"#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(d["components"]["schemas"].get(name).is_some(), "unresolved $ref {name}");
        }
    }

    /// A derived schema never takes the place of a written one, nor of an error body's.
    #[test]
    fn derived_and_written_schemas_have_names_of_their_own() {
        let written = schemas::listed(&Models::parse(crate::models::SHIPPED).unwrap());
        let errors: Vec<String> = error_schemas().into_iter().map(|(status, _)| format!("Error{status}")).collect();
        for name in derived_schemas(&api::document_rows()).keys() {
            assert!(!written.contains_key(name) && !errors.contains(name), "{name} is derived and written");
            assert_ne!(name, "InviteNotFound");
        }
    }

    #[test]
    fn credentialed_operations_document_401_and_alternatives() {
        let d = doc();
        for route in api::routes() {
            let op = &d["paths"][route.path][route.method.as_str().to_ascii_lowercase()];
            let has_401 = op["responses"].get("401").is_some();
            assert_eq!(has_401, route.access != Access::Public, "{} {}", route.method, route.path);
            assert_eq!(op["security"].as_array().unwrap().is_empty(), route.access == Access::Public);
        }
    }
}
