//! The published contract: the document, the docs page, and the dated API versions.

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::contract::contract;
use crate::common::{assert_error, send, Server};

#[tokio::test]
async fn the_served_document_is_openapi_3_1_and_is_the_one_responses_are_checked_against() {
    let server = Server::start();
    let r = send(server.req(Method::GET, "/v1/openapi.json")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body["openapi"], "3.1.0");
    assert_eq!(r.body, contract().doc);
    let schemes = r.body["components"]["securitySchemes"].as_object().unwrap();
    for name in ["organizationSecret", "userId", "userIdType", "bearer"] {
        assert!(schemes.contains_key(name), "{name}");
    }
}

#[test]
fn the_contract_check_rejects_a_body_or_a_status_the_document_does_not_allow() {
    let c = contract();
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    let check = |status: u16, body: &Value| {
        let headers = headers.clone();
        let body = body.to_string();
        std::panic::catch_unwind(move || {
            contract().check(&Method::GET, "/v1/replicas", StatusCode::from_u16(status).unwrap(), &headers, &body)
        })
        .is_ok()
    };
    assert!(check(200, &json!({"success": true, "type": "replicas", "items": [], "total": 0})));
    assert!(!check(200, &json!({"success": true, "type": "replicas", "items": []})), "a missing field passes");
    let extra = json!({"success": true, "type": "replicas", "items": [], "total": 0, "extra": 1});
    assert!(!check(200, &extra), "an extra field passes");
    assert!(!check(409, &json!({"success": false, "error": "x", "request_id": "r"})), "an undocumented status passes");
    assert!(c.doc["paths"]["/v1/replicas"]["get"]["responses"].get("401").is_some());
}

#[tokio::test]
async fn the_docs_page_renders_the_document_with_the_embedded_viewer() {
    let server = Server::start();
    let page = send(server.req(Method::GET, "/docs")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(page.text.contains("/docs/init.js") && page.text.contains("/docs/swagger-ui-bundle.js"));
    let init = send(server.req(Method::GET, "/docs/init.js")).await;
    assert!(init.text.contains("/v1/openapi.json"), "{}", init.text);
    // Raw bytes without decompression: the client asks for gzip itself.
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let js = raw.get(server.url("/docs/swagger-ui-bundle.js")).header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(js.status(), StatusCode::OK);
    assert_eq!(js.headers()["content-encoding"], "gzip");
    assert_eq!(js.headers()["content-type"], "text/javascript; charset=utf-8");
    let gz = js.bytes().await.unwrap();
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).unwrap();
    assert!(plain.len() > 1_000_000 && gz.len() < plain.len() / 2);
    let css = send(server.req(Method::GET, "/docs/swagger-ui.css")).await;
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    let missing = send(server.req(Method::GET, "/docs/..%2Fsecret")).await;
    assert_error(&missing, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
}

#[tokio::test]
async fn version_2024_09_01_accepts_messenger_a_ids_as_strings() {
    let server = Server::start();
    let org = server.new_org("Old Bots").await;
    let replica = org.create_replica("old-bot").await;
    let path = format!("/v1/replicas/{replica}/chat/history/messengerA");
    let data = json!({
        "chat_type": "supergroup", "chat_id": "-1001", "message_id": "5", "user_id": "", "message_thread_id": "3",
    });
    let body = json!({"content": "hi", "messengerA_data": data});
    let old = org.call(Method::POST, &path, Some(&body), &[("X-API-Version", "2024-09-01")]).await;
    assert_eq!(old.status, StatusCode::OK, "{}", old.text);
    let current = org.call(Method::POST, &path, Some(&body), &[]).await;
    assert_error(&current, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    let items = org.history(&replica, "/messengerA").await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["content"], "hi");
}

#[tokio::test]
async fn version_2024_03_01_lists_models_as_an_array() {
    let server = Server::start();
    let org = server.new_org("Old Catalog").await;
    let (_, current) = org.get("/v1/replicas/models").await;
    let old = org.call(Method::GET, "/v1/replicas/models", None, &[("X-API-Version", "2024-03-01")]).await;
    assert_eq!(old.status, StatusCode::OK);
    let list = old.body["models"].as_array().expect("an array of models");
    assert_eq!(list.len(), 19);
    let first = &list[0];
    let id = first["id"].as_str().unwrap();
    assert_eq!(current["models"][id]["name"], first["name"]);
    assert_eq!(current["models"][id]["deprecated"], first["deprecated"]);
    let not_a_date = org.call(Method::GET, "/v1/replicas/models", None, &[("X-API-Version", "2023-01")]).await;
    assert_error(&not_a_date, StatusCode::BAD_REQUEST, Some("UNSUPPORTED_API_VERSION"));
}

#[tokio::test]
async fn in_chromium_the_docs_page_renders_every_operation_under_its_policy() {
    let server = Server::start();
    let docs_url = server.url("/docs");
    let seen = crate::embed::in_browser(json!({"steps": ["docs_page"], "docs_url": docs_url})).await;
    assert_eq!(seen["violations"], json!([]), "no Content-Security-Policy violation: {seen}");
    assert!(seen["docs_operations"].as_u64().unwrap() >= 40, "{seen}");
    assert_eq!(seen["docs_opened"], json!(1), "{seen}");
    assert!(seen["docs_title"].as_str().unwrap().contains("replicad"), "{seen}");
}
