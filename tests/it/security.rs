//! Hostile and careless clients: every operation of the route table without or with a wrong
//! credential, another organization's ids, private replicas, malformed and oversized bodies,
//! deep JSON, invalid UTF-8, path traversal, header injection, and secrets in the log.
//!
//! The operation lists come from the operations' rows (`replicad::api::routes()` and
//! `replicad::api::document_rows()`), so a new operation is covered without editing these tests (a body or a path parameter
//! these tests do not know yet fails them, naming what to add).

use std::collections::HashMap;
use std::io::{Read, Write};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use replicad::api::{routes, BodyKind, Route};
use replicad::http::auth::Access;

use crate::common::{assert_error, replica_body, send, user, Org, Resp, Server, ZORBLAX};

fn method(route: &Route) -> Method {
    Method::from_bytes(route.method.as_str().as_bytes()).unwrap()
}

/// `route.path` with its parameters taken from `values`; panics naming a parameter it lacks.
fn fill(route: &Route, values: &HashMap<&str, String>) -> String {
    let mut path = route.path.to_string();
    while let Some(start) = path.find('{') {
        let end = path[start..].find('}').unwrap() + start;
        let name = &path[start + 1..end];
        let value = values.get(name).unwrap_or_else(|| panic!("security tests: add a value for {{{name}}}")).clone();
        path.replace_range(start..=end, &value);
    }
    path
}

/// A valid body for the operation (by the schema name of its document row), if it takes one.
fn sample_body(route: &Route, owner: &str) -> Option<Value> {
    let ops = replicad::api::document_rows();
    let op = ops.iter().find(|o| o.method == route.method.as_str() && o.path == route.path)?;
    let body = match op.body? {
        "RedeemRequest" => json!({"organizationName": "X", "name": "X", "email": "x@example.org"}),
        "ReplicaWrite" => replica_body("stolen", owner),
        "KnowledgeBaseCreate" => json!({"text": "injected"}),
        "KnowledgeBasePatch" => json!({"rawText": "overwritten"}),
        "CompletionRequest" => json!({"content": "What is the Zorblax reactor?"}),
        "HistorySave" => json!({"content": "x"}),
        "HistorySaveMessengerA" => {
            json!({"content": "x", "messengerA_data": {"chat_type": "private", "chat_id": 1, "message_id": 1}})
        }
        "UserWrite" => json!({"name": "Mallory"}),
        "UploadBody" => json!("the bytes of a file"),
        "ReplicaBundle" => json!("the bytes of a replica bundle"),
        "CompletionMessengerARequest" => json!({
            "content": "What is the Zorblax reactor?",
            "messengerA_data": {"chat_type": "private", "chat_id": 7, "message_id": 9}
        }),
        "ExperimentalCompletionRequest" => json!({"messages": [{"role": "user", "content": "Zorblax?"}]}),
        "ConversationPatch" => json!({"summary": "rewritten"}),
        "MessengerAConnect" => json!({"messengerA_token": "1:not-a-real-token"}),
        "MessengerBConnect" => json!({"messengerBToken": "not-a-real-token-".repeat(3)}),
        "EmbedKeyCreate" => json!({"allowedOrigins": ["https://mallory.example"]}),
        "EmbedIdentitySecretCreate" => json!({}),
        "EmbedChatRequest" => json!({"content": "What is the Zorblax reactor?"}),
        other => panic!("security tests: add a sample body for {other}"),
    };
    Some(body)
}

async fn call(server: &Server, route: &Route, path: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> Resp {
    let mut rb = server.req(method(route), path);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    if let Some(b) = body {
        rb = rb.json(b);
    }
    send(rb).await
}

/// A 404 whose body is only the error (nothing of the resource).
fn assert_hidden(r: &Resp, what: &str, secrets: &[&str]) {
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{what}: {}", r.text);
    let mut keys: Vec<&str> = r.body.as_object().expect("error body").keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["error", "error_code", "fingerprint", "request_id", "success"], "{what}");
    for s in secrets {
        assert!(!r.text.contains(s), "{what} leaks {s:?}: {}", r.text);
    }
}

/// Organization A with a replica holding a READY entry, a user, and one chat exchange.
struct Victim {
    org: Org,
    ids: HashMap<&'static str, String>,
}

async fn victim(server: &Server) -> Victim {
    let org = server.new_org("Victim").await;
    let replica = org.create_replica("victim").await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    org.ask(&replica, "What is the Zorblax reactor?").await;
    let user_id = org.create_user("Vera", "vera@victim.example").await;
    let mut ids = HashMap::from([("replicaUUID", replica), ("knowledgeBaseID", kb.to_string()), ("userID", user_id)]);
    chat_ids(&org, &mut ids, &[]).await;
    embed_key_id(&org, &mut ids).await;
    Victim { org, ids }
}

/// Adds `chatUUID` and `conversationUUID` of the replica's first conversation (as seen with
/// `headers`) to `ids`.
async fn chat_ids(org: &Org, ids: &mut HashMap<&'static str, String>, headers: &[(&str, &str)]) {
    let (_, v) = org.get_as(&format!("/v1/replicas/{}/conversations", ids["replicaUUID"]), headers).await;
    let conv = &v["items"][0];
    ids.insert("chatUUID", conv["chatUUID"].as_str().expect("a conversation").to_string());
    ids.insert("conversationUUID", conv["uuid"].as_str().expect("a conversation").to_string());
}

/// Adds `embedKey`, a new embed key of the replica, to `ids`.
async fn embed_key_id(org: &Org, ids: &mut HashMap<&'static str, String>) {
    let path = format!("/v1/replicas/{}/embed-keys", ids["replicaUUID"]);
    let (_, v) = org.post(&path, json!({"allowedOrigins": ["https://victim.example"]})).await;
    ids.insert("embedKey", v["key"].as_str().expect("an embed key").to_string());
}

/// Operations only the replica's owner (or the key alone) may use: 404 to other users, even
/// whitelisted ones of a private replica.
const OWNER_ONLY: &[&str] = &[
    "/v1/replicas/{replicaUUID}/analytics/conversations/historical",
    "/v1/replicas/{replicaUUID}/analytics/conversations/sources",
];

#[tokio::test]
async fn every_operation_answers_401_to_a_missing_or_invalid_credential() {
    let server = Server::start();
    let Victim { org, ids } = victim(&server).await;
    let key = org.key.clone();
    let (longer, shorter) = (format!("{key}x"), key[..key.len() - 1].to_string());
    let (bearer_wrong, basic) = (format!("Bearer {shorter}"), format!("Basic {key}"));
    let variants: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("no credential", vec![]),
        ("empty secret", vec![("X-ORGANIZATION-SECRET", "")]),
        ("longer secret", vec![("X-ORGANIZATION-SECRET", &longer)]),
        ("shorter secret", vec![("X-ORGANIZATION-SECRET", &shorter)]),
        ("wrong bearer", vec![("Authorization", &bearer_wrong)]),
        ("empty bearer", vec![("Authorization", "Bearer ")]),
        ("the key under another scheme", vec![("Authorization", &basic)]),
        ("a user without a key", vec![("X-USER-ID", "vera@victim.example"), ("X-USER-ID-TYPE", "email")]),
    ];
    let mut tested = 0;
    for route in routes().iter().filter(|r| r.access != Access::Public) {
        let path = fill(route, &ids);
        let body = sample_body(route, &org.owner_email);
        for (what, headers) in &variants {
            let r = call(&server, route, &path, body.as_ref(), headers).await;
            assert_error(&r, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
            assert!(!r.text.contains(&key[4..]), "{what}: the key is echoed");
        }
        tested += 1;
    }
    assert!(tested >= 20, "only {tested} operations");
    // Nothing was changed by any of them.
    let (s, _) = org.get(&format!("/v1/replicas/{}", ids["replicaUUID"])).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn another_organization_gets_404_and_nothing_else_on_every_operation_with_a_path_resource() {
    let server = Server::start();
    let Victim { org: a, ids } = victim(&server).await;
    let b = server.new_org("Mallory").await;
    let mut tested = 0;
    for route in routes().iter().filter(|r| r.access != Access::Public && r.path.contains('{')) {
        let path = fill(route, &ids);
        // User-only operations are tried as organization B's owner user.
        let as_user = user("email", &b.owner_email);
        let headers: &[(&str, &str)] = if route.access == Access::User { &as_user } else { &[] };
        let r = b.call(method(route), &path, sample_body(route, &b.owner_email).as_ref(), headers).await;
        assert_hidden(&r, &format!("{} {path}", route.method), &["Zorblax", "kelvin", "Vera", "victim"]);
        tested += 1;
    }
    assert!(tested >= 15, "only {tested} operations");
    // A's data is intact.
    let replica = &ids["replicaUUID"];
    let (s, r) = a.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!((s, r["slug"].clone()), (StatusCode::OK, json!("victim")));
    let entry = a.wait_ready(replica, ids["knowledgeBaseID"].parse().unwrap()).await;
    assert_eq!(entry["rawText"], json!(ZORBLAX));
    assert_eq!(a.history(replica, "").await.len(), 2);
    let (s, _) = a.get(&format!("/v1/users/{}", ids["userID"])).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn a_private_replica_is_404_on_every_operation_to_users_off_its_whitelist_only() {
    let server = Server::start();
    let org = server.new_org("Private").await;
    for (name, email) in [("Olga", "olga@example.org"), ("Wendy", "wendy@example.org"), ("Nina", "nina@example.org")] {
        org.create_user(name, email).await;
    }
    let mut body = replica_body("hidden", "olga@example.org");
    body["private"] = json!(true);
    body["whitelistEmails"] = json!(["wendy@example.org"]);
    let replica = org.create_replica_from(body).await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let mut ids = HashMap::from([("replicaUUID", replica.clone()), ("knowledgeBaseID", kb.to_string())]);
    let (s, _) = org
        .post_as(
            &format!("/v1/replicas/{replica}/chat/completions"),
            json!({"content": "Zorblax?"}),
            &user("email", "wendy@example.org"),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    chat_ids(&org, &mut ids, &user("email", "olga@example.org")).await;
    embed_key_id(&org, &mut ids).await;
    let user_routes: Vec<Route> =
        routes().into_iter().filter(|r| r.access == Access::Either && r.path.contains("{replicaUUID}")).collect();
    assert!(user_routes.len() >= 10);
    for route in &user_routes {
        let path = fill(route, &ids);
        let body = sample_body(route, &org.owner_email);
        let nina = org.call(method(route), &path, body.as_ref(), &user("email", "nina@example.org")).await;
        assert_hidden(&nina, &format!("{} {path} as Nina", route.method), &["Zorblax", "hidden"]);
        if route.method != Method::DELETE {
            for email in ["olga@example.org", "wendy@example.org"] {
                let r = org.call(method(route), &path, body.as_ref(), &user("email", email)).await;
                let owner_only = OWNER_ONLY.contains(&route.path)
                    || route.method == Method::PATCH && route.path.contains("{conversationUUID}")
                    || route.path.ends_with("/{conversationUUID}/insights");
                if owner_only && email == "wendy@example.org" {
                    assert_hidden(&r, &format!("{} {path} as Wendy (owner only)", route.method), &["Zorblax"]);
                } else {
                    assert_ne!(r.status, StatusCode::NOT_FOUND, "{} {path} as {email}: {}", route.method, r.text);
                }
            }
        }
    }
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test]
async fn deeply_nested_json_is_400_and_the_server_keeps_serving() {
    let server = Server::start();
    let org = server.new_org("Deep").await;
    let replica = org.create_replica("deep").await;
    let deep_field = |field: &str| format!("{{\"text\": \"x\", \"content\": \"x\", \"{field}\": {}}}", nested(200_000));
    let cases = [
        (Method::POST, "/v1/replicas".to_string(), nested(500_000), None),
        (Method::POST, format!("/v1/replicas/{replica}/knowledge-base"), deep_field("usageLimits"), None),
        (Method::POST, format!("/v1/replicas/{replica}/chat/completions"), deep_field("usageLimits"), None),
        (
            Method::POST,
            format!("/v1/replicas/{replica}/chat/history/messengerA"),
            deep_field("messengerA_data"),
            Some("2024-09-01"),
        ),
    ];
    for (m, path, body, version) in cases {
        let mut rb = org.req(m, &path).header("content-type", "application/json").body(body);
        if let Some(v) = version {
            rb = rb.header("X-API-Version", v);
        }
        let r = send(rb).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    }
    let (s, _) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn invalid_utf8_in_bodies_headers_queries_and_paths_is_refused_cleanly() {
    let server = Server::start();
    let org = server.new_org("Bytes").await;
    let replica = org.create_replica("bytes").await;
    let body = b"{\"content\": \"\xff\xfe broken\"}".to_vec();
    let r = send(
        org.req(Method::POST, &format!("/v1/replicas/{replica}/chat/history"))
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    let bad = reqwest::header::HeaderValue::from_bytes(b"\xff\xfekey").unwrap();
    let r = send(server.req(Method::GET, "/v1/replicas").header("X-ORGANIZATION-SECRET", bad.clone())).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
    let r = send(org.req(Method::GET, "/v1/replicas").header("X-USER-ID", bad).header("X-USER-ID-TYPE", "email")).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
    let (s, v) = org.get("/v1/replicas?slug=%FF%FE&tags=%C0").await;
    assert_eq!((s, v["total"].clone()), (StatusCode::OK, json!(0)));
    let r = org.call(Method::GET, "/v1/replicas/%FF%FE", None, &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_PATH_PARAMETER"));
}

/// Sends raw bytes on a fresh connection and reads the whole answer (the request asks to close).
fn raw_http(server: &Server, request: &[u8]) -> String {
    let addr = server.base_url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
    stream.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test]
async fn path_traversal_reaches_no_file() {
    let server = Server::start();
    let org = server.new_org("Traversal").await;
    let replica = org.create_replica("traversal").await;
    // A file name is a name, never a path: only its last component is kept, and nothing is read.
    let kb = format!("/v1/replicas/{replica}/knowledge-base");
    for (name, kept) in [
        ("../../../../etc/passwd", "passwd"),
        ("..\\..\\Cargo.toml", "Cargo.toml"),
        ("/etc/passwd", "passwd"),
        ("a/../../b.txt", "b.txt"),
    ] {
        let (s, v) = org.post(&kb, json!({"filename": name})).await;
        assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
        let id = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
        let (_, entry) = org.get(&format!("{kb}/{id}")).await;
        assert_eq!(entry["file"]["name"], json!(kept), "{entry}");
        assert_eq!(entry["rawText"], json!(""), "{entry}");
    }
    for name in ["..", "a/..", "dir/"] {
        let (s, v) = org.post(&kb, json!({"filename": name})).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{name}: {v}");
    }
    for path in
        ["/docs/../../Cargo.toml", "/docs/..%2F..%2FCargo.toml", "/docs/%2e%2e/%2e%2e/etc/passwd", "/v1/../Cargo.toml"]
    {
        let answer =
            raw_http(&server, format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        assert!(answer.starts_with("HTTP/1.1 404") || answer.starts_with("HTTP/1.1 400"), "{path}: {answer:.200}");
        assert!(!answer.contains("[package]") && !answer.contains("root:"), "{path} leaks a file");
    }
}

#[tokio::test]
async fn request_headers_are_never_echoed_into_response_headers() {
    let server = Server::start();
    let org = server.new_org("Headers").await;
    // A client's X-Request-Id is not taken over: the server makes its own.
    let r = org.call(Method::GET, "/v1/replicas", None, &[("X-Request-Id", "client-chosen")]).await;
    let id = r.header("x-request-id").unwrap();
    assert!(id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    // CR/LF smuggled into header values: hyper refuses the request; nothing is injected.
    for smuggled in ["X-Request-Id: a\rSet-Cookie: evil=1", "X-API-Version: 2025-03-25\r Set-Cookie: evil=1"] {
        let req = format!("GET /v1/replicas HTTP/1.1\r\nHost: x\r\n{smuggled}\r\nConnection: close\r\n\r\n");
        let answer = raw_http(&server, req.as_bytes());
        let head = answer.split("\r\n\r\n").next().unwrap_or("").to_ascii_lowercase();
        assert!(!head.contains("set-cookie"), "{answer}");
        assert!(head.starts_with("http/1.1 4"), "{answer}");
    }
    // A hostile value in an echoed message stays inside the JSON body, escaped.
    let r = org.call(Method::GET, "/v1/replicas", None, &[("X-USER-ID", "x"), ("X-USER-ID-TYPE", "a\"b\tc")]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
    assert!(r.headers.get("set-cookie").is_none());
    // The server still serves after all of it.
    assert_eq!(org.get("/v1/replicas").await.0, StatusCode::OK);
}

#[tokio::test]
async fn api_keys_and_invitation_codes_never_reach_the_log() {
    let server = Server::start_with(&["--log", "debug"]);
    let code = server.invite();
    let body = json!({"organizationName": "Logged", "name": "L", "email": "l@example.org"});
    let r = send(server.req(Method::POST, &format!("/v1/api-keys/invites/{code}/redeem")).json(&body)).await;
    assert_eq!(r.status, StatusCode::OK);
    let key = r.body["apiKey"].as_str().unwrap().to_string();
    let again = send(server.req(Method::POST, &format!("/v1/api-keys/invites/{code}/redeem")).json(&body)).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    let wrong = format!("{key}-wrong");
    send(server.req(Method::GET, "/v1/replicas").header("X-ORGANIZATION-SECRET", &key)).await;
    send(server.req(Method::GET, "/v1/replicas").bearer_auth(&key)).await;
    send(server.req(Method::GET, "/v1/replicas").header("X-ORGANIZATION-SECRET", &wrong)).await;
    send(
        server
            .req(Method::GET, "/v1/replicas")
            .header("X-ORGANIZATION-SECRET", &key)
            .header("X-USER-ID", "nobody@example.org")
            .header("X-USER-ID-TYPE", "email"),
    )
    .await;
    let (_, dir) = server.stop();
    let log = dir.log();
    assert!(log.contains("/v1/api-keys/invites/{code}/redeem"), "requests are logged by route:\n{log:.3000}");
    for secret in [code.as_str(), key.as_str(), &key[4..], wrong.as_str()] {
        assert!(!log.contains(secret), "the log holds a secret ({secret})");
    }
}

/// A body the server must refuse, and the status it must answer.
struct Bad {
    what: &'static str,
    body: Vec<u8>,
    content_type: &'static str,
    encoding: Option<&'static str>,
    status: u16,
}

#[tokio::test]
async fn every_operation_with_a_body_refuses_bombs_broken_encodings_and_malformed_json() {
    let server = Server::start();
    let Victim { org, ids } = victim(&server).await;
    let mut ids = ids;
    ids.insert("code", "not-a-code".to_string());
    // A live signed URL: the token is checked before the body (a bogus one is 404 unread).
    let (_, v) =
        org.post(&format!("/v1/replicas/{}/knowledge-base", ids["replicaUUID"]), json!({"filename": "a.txt"})).await;
    let url = v["results"][0]["signedURL"].as_str().expect("signedURL");
    ids.insert("token", url.rsplit('/').next().unwrap_or_default().to_string());
    // 64 MiB of zeros: ~64 KiB gzipped, far over the 4 MiB limit once inflated.
    let bomb = crate::common::gzip(&vec![0u8; 64 << 20]);
    let owner = user("email", &org.owner_email);
    let json = "application/json";
    let cases = [
        Bad { what: "gzip bomb", body: bomb, content_type: json, encoding: Some("gzip"), status: 413 },
        Bad {
            what: "broken gzip",
            body: b"\x1f\x8b\x08garbage".to_vec(),
            content_type: json,
            encoding: Some("gzip"),
            status: 400,
        },
        Bad { what: "deflate", body: b"{}".to_vec(), content_type: json, encoding: Some("deflate"), status: 415 },
        Bad {
            what: "form",
            body: b"a=1".to_vec(),
            content_type: "application/x-www-form-urlencoded",
            encoding: None,
            status: 415,
        },
        Bad {
            what: "truncated JSON",
            body: b"{\"content\": \"x".to_vec(),
            content_type: json,
            encoding: None,
            status: 400,
        },
        Bad { what: "JSON of another type", body: b"[1, 2]".to_vec(), content_type: json, encoding: None, status: 400 },
        Bad { what: "NUL bytes", body: b"\0\0\0\0".to_vec(), content_type: json, encoding: None, status: 400 },
    ];
    let mut tested = 0;
    for route in routes().iter().filter(|r| sample_body(r, &org.owner_email).is_some()) {
        let path = fill(route, &ids);
        // A raw-bytes body (file upload, replica bundle) takes any content type: only the
        // encoding cases apply.
        let raw = matches!(route.body, BodyKind::Raw | BodyKind::Archive);
        for bad in cases.iter().filter(|c| !raw || c.encoding.is_some()) {
            let mut rb = org.req(method(route), &path).header("content-type", bad.content_type).body(bad.body.clone());
            for (k, v) in &owner {
                rb = rb.header(*k, *v);
            }
            if let Some(e) = bad.encoding {
                rb = rb.header("content-encoding", e);
            }
            let r = send(rb).await;
            let code = match bad.status {
                413 => "PAYLOAD_TOO_LARGE",
                415 => "UNSUPPORTED_MEDIA_TYPE",
                _ => "INVALID_BODY",
            };
            assert_eq!(r.status.as_u16(), bad.status, "{} to {} {path}: {}", bad.what, route.method, r.text);
            assert_eq!(r.body["error_code"], json!(code), "{} to {} {path}", bad.what, route.method);
        }
        tested += 1;
    }
    assert!(tested >= 9, "only {tested} operations with a body");
    assert_eq!(org.get("/v1/replicas").await.0, StatusCode::OK);
}

#[tokio::test]
async fn an_anonymous_request_is_refused_before_its_body_is_read_or_inflated() {
    let server = Server::start();
    let broken_gzip = b"\x1f\x8b\x08\x00 not really gzip".to_vec();
    let r = send(
        server
            .req(Method::POST, "/v1/replicas")
            .header("content-type", "application/json")
            .header("content-encoding", "gzip")
            .body(broken_gzip),
    )
    .await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
}

/// The directives of a Content-Security-Policy, name → sources.
fn csp_directives(csp: &str) -> HashMap<String, Vec<String>> {
    csp.split(';')
        .filter_map(|d| {
            let mut words = d.split_whitespace().map(str::to_string);
            Some((words.next()?, words.collect()))
        })
        .collect()
}

#[tokio::test]
async fn the_chat_page_and_the_docs_page_load_only_their_own_resources_and_are_never_framed() {
    let server = Server::start();
    let org = server.new_org("Pages").await;
    let mut body = replica_body("pages", &org.owner_email);
    body["profileImage"] = json!("https://images.example.com/face.png");
    org.create_replica_from(body).await;
    let chat = send(server.req(Method::GET, &format!("/r/{}/pages", org.id))).await;
    let docs = send(server.req(Method::GET, "/docs")).await;
    for (page, r) in [("chat page", &chat), ("docs page", &docs)] {
        assert_eq!(r.status, StatusCode::OK, "{page}");
        let csp = csp_directives(r.header("content-security-policy").unwrap_or_else(|| panic!("{page}: no CSP")));
        assert_eq!(csp["default-src"], ["'none'"], "{page}");
        assert_eq!(csp["script-src"], ["'self'"], "{page}: only its own scripts, no inline script");
        assert_eq!(csp["connect-src"], ["'self'"], "{page}");
        assert_eq!(csp["frame-ancestors"], ["'none'"], "{page}");
        // Images of its own, and on the chat page the replica's profileImage from its host only.
        let images =
            if page == "chat page" { &["'self'", "https://images.example.com"][..] } else { &["'self'", "data:"] };
        assert_eq!(csp["img-src"], images, "{page}: images from elsewhere: {csp:?}");
        // Nothing the page loads is outside the policy: scripts and stylesheets of its own.
        let elsewhere = r.text.replace("https://images.example.com/face.png", "");
        assert!(!r.text.contains("<script>") && !elsewhere.contains("https://"), "{page}: {}", r.text);
    }
    assert_eq!(docs.header("x-frame-options"), Some("DENY"));
    assert!(docs.text.contains("src=\"/docs/init.js\""), "{}", docs.text);
    let init = send(server.req(Method::GET, "/docs/init.js")).await;
    assert_eq!(init.status, StatusCode::OK);
    assert!(init.text.contains("/v1/openapi.json") && init.text.contains("validatorUrl: null"), "{}", init.text);
}
