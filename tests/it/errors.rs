//! Request decoding and the error body (spec §4 `Content-Encoding`, §7; error codes of
//! src/error.rs).

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_error, gzip, replica_body, send, Server};

#[tokio::test]
async fn a_gzip_body_is_accepted() {
    let server = Server::start();
    let org = server.new_org("Gzip").await;
    let body = serde_json::to_vec(&replica_body("zipped", &org.owner_email)).unwrap();
    let r = send(
        org.req(Method::POST, "/v1/replicas")
            .header("Content-Type", "application/json")
            .header("Content-Encoding", "gzip")
            .body(gzip(&body)),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let uuid = r.body["uuid"].as_str().expect("uuid");
    let (s, v) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["slug"], json!("zipped"));
}

#[tokio::test]
async fn a_content_encoding_other_than_gzip_is_415() {
    let server = Server::start();
    let org = server.new_org("Brotli").await;
    let body = serde_json::to_vec(&replica_body("br", &org.owner_email)).unwrap();
    let r = send(
        org.req(Method::POST, "/v1/replicas")
            .header("Content-Type", "application/json")
            .header("Content-Encoding", "br")
            .body(body),
    )
    .await;
    assert_error(&r, StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("UNSUPPORTED_MEDIA_TYPE"));
    assert_eq!(org.get("/v1/replicas").await.1["total"], json!(0), "nothing was created");
}

#[tokio::test]
async fn a_body_that_is_not_json_by_content_type_is_415() {
    let server = Server::start();
    let org = server.new_org("Plain").await;
    let body = serde_json::to_string(&replica_body("plain", &org.owner_email)).unwrap();
    let r = send(org.req(Method::POST, "/v1/replicas").header("Content-Type", "text/plain").body(body)).await;
    assert_error(&r, StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("UNSUPPORTED_MEDIA_TYPE"));
}

#[tokio::test]
async fn a_gzip_bomb_is_cut_at_the_decompressed_size_limit_with_413() {
    let server = Server::start_with(&["--max-body-bytes", "2048"]);
    let org = server.new_org("Bomb").await;
    let bomb = gzip(&vec![b'0'; 1 << 20]);
    assert!(bomb.len() < 2048, "the compressed bomb itself is under the limit ({} bytes)", bomb.len());
    let r = send(
        org.req(Method::POST, "/v1/replicas")
            .header("Content-Type", "application/json")
            .header("Content-Encoding", "gzip")
            .body(bomb),
    )
    .await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"));
}

#[tokio::test]
async fn a_plain_body_over_the_size_limit_is_413() {
    let server = Server::start_with(&["--max-body-bytes", "2048"]);
    let org = server.new_org("Big").await;
    let mut body = replica_body("big", &org.owner_email);
    body["purpose"] = json!("p".repeat(3000));
    let r = org.call(Method::POST, "/v1/replicas", Some(&body), &[]).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"));
}

#[tokio::test]
async fn a_body_near_but_under_the_size_limit_is_accepted() {
    let server = Server::start_with(&["--max-body-bytes", "2048"]);
    let org = server.new_org("Fits").await;
    let mut body = replica_body("fits", &org.owner_email);
    body["purpose"] = json!("p".repeat(1000));
    body["greeting"] = json!("g".repeat(600));
    let len = serde_json::to_vec(&body).unwrap().len();
    assert!((1700..=2048).contains(&len), "{len}");
    let (s, v) = org.post("/v1/replicas", body).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

#[tokio::test]
async fn a_broken_gzip_body_is_400() {
    let server = Server::start();
    let org = server.new_org("Broken").await;
    let mut zipped = gzip(br#"{"name": "x"}"#);
    zipped.truncate(zipped.len() / 2);
    for body in [b"definitely not gzip".to_vec(), zipped] {
        let r = send(
            org.req(Method::POST, "/v1/replicas")
                .header("Content-Type", "application/json")
                .header("Content-Encoding", "gzip")
                .body(body),
        )
        .await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    }
}

#[tokio::test]
async fn invalid_json_is_400_invalid_body() {
    let server = Server::start();
    let org = server.new_org("Json").await;
    let r = send(org.req(Method::POST, "/v1/replicas").header("Content-Type", "application/json").body("{\"name\": "))
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
}

#[tokio::test]
async fn a_missing_body_is_400_invalid_body() {
    let server = Server::start();
    let org = server.new_org("Empty").await;
    let r = org.call(Method::POST, "/v1/replicas", None, &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
}

#[tokio::test]
async fn an_unknown_route_is_404_route_not_found() {
    let server = Server::start();
    let org = server.new_org("Routes").await;
    let r = org.call(Method::GET, "/v1/nothing-here", None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("ROUTE_NOT_FOUND"));
    let anonymous = send(server.req(Method::GET, "/v2/replicas")).await;
    assert_error(&anonymous, StatusCode::NOT_FOUND, Some("ROUTE_NOT_FOUND"));
}

#[tokio::test]
async fn a_known_path_with_another_method_is_405_with_allow() {
    let server = Server::start();
    let org = server.new_org("Methods").await;
    let r = org.call(Method::PATCH, "/v1/replicas", None, &[]).await;
    assert_error(&r, StatusCode::METHOD_NOT_ALLOWED, Some("METHOD_NOT_ALLOWED"));
    let allow = r.header("allow").expect("Allow header");
    let mut methods: Vec<&str> = allow.split(',').map(str::trim).collect();
    methods.sort();
    assert_eq!(methods, vec!["GET", "POST"], "Allow: {allow}");

    let one = org.call(Method::POST, &format!("/v1/replicas/{}", uuid::Uuid::new_v4()), None, &[]).await;
    assert_eq!(one.status, StatusCode::METHOD_NOT_ALLOWED);
    let mut methods: Vec<&str> = one.header("allow").expect("Allow").split(',').map(str::trim).collect();
    methods.sort();
    assert_eq!(methods, vec!["DELETE", "GET", "PUT"]);
}

#[tokio::test]
async fn a_replica_uuid_that_is_not_a_uuid_is_400() {
    let server = Server::start();
    let org = server.new_org("Paths").await;
    for path in ["/v1/replicas/not-a-uuid", "/v1/replicas/123/knowledge-base", "/v1/replicas/xyz/chat/history"] {
        let r = org.call(Method::GET, path, None, &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_PATH_PARAMETER"));
    }
}

#[tokio::test]
async fn a_missing_replica_is_404_not_found() {
    let server = Server::start();
    let org = server.new_org("Missing").await;
    let id = uuid::Uuid::new_v4();
    for path in [format!("/v1/replicas/{id}"), format!("/v1/replicas/{id}/knowledge-base")] {
        let r = org.call(Method::GET, &path, None, &[]).await;
        assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    }
}

#[tokio::test]
async fn every_response_carries_a_request_id_and_each_is_new() {
    let server = Server::start();
    let org = server.new_org("Ids").await;
    let a = org.call(Method::GET, "/v1/replicas", None, &[]).await;
    let b = org.call(Method::GET, "/v1/replicas", None, &[]).await;
    let (ida, idb) = (a.header("x-request-id").expect("id"), b.header("x-request-id").expect("id"));
    assert!(!ida.is_empty());
    assert_ne!(ida, idb);
}

#[tokio::test]
async fn the_same_error_has_the_same_fingerprint_and_a_new_request_id() {
    let server = Server::start();
    let org = server.new_org("Prints").await;
    let a = org.call(Method::GET, "/v1/replicas/nope", None, &[]).await;
    let b = org.call(Method::GET, "/v1/replicas/nope", None, &[]).await;
    assert_error(&a, StatusCode::BAD_REQUEST, Some("INVALID_PATH_PARAMETER"));
    assert_eq!(a.body["fingerprint"], b.body["fingerprint"]);
    assert_ne!(a.body["request_id"], b.body["request_id"]);
    let other = org.call(Method::GET, "/v1/nope", None, &[]).await;
    assert_ne!(a.body["fingerprint"], other.body["fingerprint"]);
}

#[tokio::test]
async fn a_success_body_carries_success_true() {
    let server = Server::start();
    let org = server.new_org("Success").await;
    let r = org.call(Method::GET, "/v1/knowledge-base/file-types", None, &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["success"], json!(true));
    assert!(r.header("content-type").is_some_and(|c| c.starts_with("application/json")));
    assert!(r.body["mediaGroups"].as_array().is_some_and(|g| !g.is_empty()), "{}", r.text);
}

#[tokio::test]
async fn a_nul_character_in_a_title_a_name_or_a_message_is_400_naming_the_field() {
    let server = Server::start();
    let org = server.new_org("Nul").await;
    let replica = org.create_replica("nul").await;
    let kb = org.add_text(&replica, "Clean title", "Clean text about lighthouses.").await;
    let mut named = replica_body("nul2", &org.owner_email);
    named["name"] = json!("Bad\u{0}name");
    let cases = [
        (Method::POST, "/v1/replicas".to_string(), named, "name"),
        (
            Method::POST,
            format!("/v1/replicas/{replica}/knowledge-base"),
            json!({"text": "some text", "title": "a\u{0}b"}),
            "title",
        ),
        (Method::POST, format!("/v1/replicas/{replica}/knowledge-base"), json!({"text": "te\u{0}xt"}), "text"),
        (Method::PATCH, format!("/v1/replicas/{replica}/knowledge-base/{kb}"), json!({"title": "x\u{0}"}), "title"),
        (Method::POST, format!("/v1/replicas/{replica}/chat/history"), json!({"content": "hi\u{0}"}), "content"),
        (Method::POST, format!("/v1/replicas/{replica}/chat/completions"), json!({"content": "\u{0}why?"}), "content"),
    ];
    for (method, path, body, field) in cases {
        let r = org.call(method.clone(), &path, Some(&body), &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
        let message = r.body["error"].as_str().unwrap();
        assert!(message.starts_with(field) && message.contains("NUL"), "{method} {path}: {message}");
    }
    assert_eq!(org.history(&replica, "").await.len(), 0, "no message was stored");
}
