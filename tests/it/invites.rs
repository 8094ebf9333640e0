//! Redeeming invitation codes (spec §4.1, rule §7.2; docs/decisions.md "Auth").

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{assert_error, send, Server};

fn redeem_body() -> Value {
    json!({"organizationName": "Acme", "name": "Ann Contact", "email": "ann@acme.example"})
}

async fn redeem(server: &Server, code: &str, body: &Value) -> crate::common::Resp {
    send(server.req(reqwest::Method::POST, &format!("/v1/api-keys/invites/{code}/redeem")).json(body)).await
}

#[tokio::test]
async fn redeeming_an_invitation_creates_an_organization_with_a_working_key() {
    let server = Server::start();
    let code = server.invite();
    let r = redeem(&server, &code, &redeem_body()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let b = &r.body;
    assert_eq!(b["success"], json!(true));
    let key = b["apiKey"].as_str().expect("apiKey");
    assert!(key.starts_with("rpl_"), "{key}");
    assert!(key.len() >= 4 + 43, "a key of at least 32 random bytes: {key}");
    assert!(uuid::Uuid::parse_str(b["organizationID"].as_str().expect("organizationID")).is_ok(), "{b}");
    assert_eq!(b["validUntil"], Value::Null, "{b}");

    let listed = send(server.req(reqwest::Method::GET, "/v1/replicas").header("X-ORGANIZATION-SECRET", key)).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    assert_eq!(listed.body["total"], json!(0));
}

#[tokio::test]
async fn the_contact_becomes_the_owner_user_of_the_new_organization() {
    let server = Server::start();
    let org = server.new_org("Contacts").await;
    let (s, v) = org.get_as("/v1/users/me", &crate::common::user("email", &org.owner_email)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["email"], json!(org.owner_email));
    assert_eq!(v["name"], json!("Contacts Owner"));
}

#[tokio::test]
async fn an_unknown_code_is_404_without_error_code_or_fingerprint() {
    let server = Server::start();
    let r = redeem(&server, "inv_doesnotexist", &redeem_body()).await;
    assert_error(&r, StatusCode::NOT_FOUND, None);
}

#[tokio::test]
async fn a_code_can_be_redeemed_only_once() {
    let server = Server::start();
    let code = server.invite();
    assert_eq!(redeem(&server, &code, &redeem_body()).await.status, StatusCode::OK);
    let again = redeem(&server, &code, &redeem_body()).await;
    assert_error(&again, StatusCode::CONFLICT, Some("INVITE_ALREADY_REDEEMED"));
}

#[tokio::test]
async fn an_expired_code_is_refused() {
    let server = Server::start();
    let code = server.dir().invite_with(&["--expires-in", "1"]);
    // The code is valid for one second of wall-clock time: let that second pass.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let r = redeem(&server, &code, &redeem_body()).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVITE_EXPIRED"));
}

#[tokio::test]
async fn a_code_with_a_long_validity_can_be_redeemed() {
    let server = Server::start();
    let code = server.dir().invite_with(&["--expires-in", "7d"]);
    assert_eq!(redeem(&server, &code, &redeem_body()).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_redeem_body_with_an_extra_field_is_refused_and_leaves_the_code_usable() {
    let server = Server::start();
    let code = server.invite();
    let mut body = redeem_body();
    body["plan"] = json!("enterprise");
    let r = redeem(&server, &code, &body).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    assert_eq!(redeem(&server, &code, &redeem_body()).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_redeem_body_with_a_bad_email_is_refused() {
    let server = Server::start();
    let code = server.invite();
    let mut body = redeem_body();
    body["email"] = json!("not-an-email");
    assert_error(&redeem(&server, &code, &body).await, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn a_redeem_body_missing_a_field_is_refused() {
    let server = Server::start();
    let code = server.invite();
    let body = json!({"organizationName": "Acme", "email": "ann@acme.example"});
    assert_error(&redeem(&server, &code, &body).await, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
}

#[tokio::test]
async fn each_redeemed_code_yields_a_distinct_organization_and_key() {
    let server = Server::start();
    let a = server.new_org("First").await;
    let b = server.new_org("Second").await;
    assert_ne!(a.key, b.key);
    assert_ne!(a.id, b.id);
}
