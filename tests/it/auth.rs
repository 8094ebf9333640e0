//! Credentials (spec §5; docs/decisions.md "Auth").

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_error, send, user, Server};

#[tokio::test]
async fn a_request_without_a_key_is_401_unauthorized() {
    let server = Server::start();
    let r = send(server.req(Method::GET, "/v1/replicas")).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
}

#[tokio::test]
async fn a_wrong_key_is_401_unauthorized() {
    let server = Server::start();
    let _org = server.new_org("Keys").await;
    let r = send(server.req(Method::GET, "/v1/replicas").header("X-ORGANIZATION-SECRET", "rpl_not-a-key")).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
}

#[tokio::test]
async fn the_key_is_accepted_as_a_bearer_token() {
    let server = Server::start();
    let org = server.new_org("Bearer").await;
    let replica = org.create_replica("bearer").await;
    let r = send(server.req(Method::GET, "/v1/replicas").bearer_auth(&org.key)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["items"][0]["uuid"], json!(replica));

    let wrong = send(server.req(Method::GET, "/v1/replicas").bearer_auth("rpl_wrong")).await;
    assert_error(&wrong, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
}

#[tokio::test]
async fn x_user_id_without_its_type_names_the_user_by_id() {
    let server = Server::start();
    let org = server.new_org("Headers").await;
    let id = org.create_user("Tool User", "tool@example.org").await;
    let alone = [("X-USER-ID", id.as_str())];
    let r = org.call(Method::GET, "/v1/users/me", None, &alone).await;
    assert_eq!((r.status, r.body["id"].clone()), (StatusCode::OK, json!(id)), "{}", r.text);
    let r = org.call(Method::GET, "/v1/replicas", None, &alone).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = org.call(Method::GET, "/v1/users/me", None, &[("X-USER-ID", "no-such-user")]).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("USER_NOT_FOUND"));
    let r = org.call(Method::DELETE, "/v1/users/me", None, &alone).await;
    assert_eq!((r.status, r.text.as_str()), (StatusCode::NO_CONTENT, ""));
    let r = org.call(Method::GET, "/v1/users/me", None, &alone).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("USER_NOT_FOUND"));
}

#[tokio::test]
async fn x_user_id_type_without_the_id_is_400() {
    let server = Server::start();
    let org = server.new_org("Headers").await;
    let r = org.call(Method::GET, "/v1/replicas", None, &[("X-USER-ID-TYPE", "email")]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
}

#[tokio::test]
async fn an_unknown_user_id_type_is_400() {
    let server = Server::start();
    let org = server.new_org("Headers").await;
    let r = org.call(Method::GET, "/v1/replicas", None, &user("carrier-pigeon", "42")).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
}

#[tokio::test]
async fn an_unknown_email_user_is_401_user_not_found() {
    let server = Server::start();
    let org = server.new_org("Headers").await;
    let r = org.call(Method::GET, "/v1/replicas", None, &user("email", "nobody@example.org")).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("USER_NOT_FOUND"));
}

#[tokio::test]
async fn an_unknown_id_user_is_401_user_not_found() {
    let server = Server::start();
    let org = server.new_org("Headers").await;
    let r = org.call(Method::GET, "/v1/replicas", None, &user("id", &uuid::Uuid::new_v4().to_string())).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("USER_NOT_FOUND"));
}

#[tokio::test]
async fn a_user_can_be_named_by_id_or_email() {
    let server = Server::start();
    let org = server.new_org("Names").await;
    let id = org.create_user("Bea", "bea@example.org").await;
    for headers in [user("id", &id), user("email", "BEA@example.org")] {
        let (s, v) = org.get_as("/v1/users/me", &headers).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["id"], json!(id));
    }
}

#[tokio::test]
async fn the_user_uuid_type_means_id_and_other_unknown_types_stay_400() {
    let server = Server::start();
    let org = server.new_org("Uuid Type").await;
    let id = org.create_user("Cai", "cai@example.org").await;
    let replica = org.create_replica("uuid-type").await;
    // As clients of the hosted service send it: the user's id with the type `user_uuid`.
    let (s, me) = org.get_as("/v1/users/me", &user("user_uuid", &id)).await;
    assert_eq!(s, StatusCode::OK, "{me}");
    assert_eq!(me["id"], json!(id));
    let path = format!("/v1/replicas/{replica}/chat/history");
    let (s, v) = org.post_as(&path, json!({"content": "hello"}), &user("user_uuid", &id)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let items = org.history_as(&replica, "", &user("id", &id)).await;
    assert_eq!(items.len(), 1, "the message is the user's own");
    let (s, _) = org.get_as("/v1/users/me", &user("user_uuid", "no-such-user")).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let r = org.call(Method::GET, "/v1/users/me", None, &user("uuid", &id)).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
}

#[tokio::test]
async fn linked_account_users_are_created_on_first_contact_and_reused() {
    let server = Server::start();
    let org = server.new_org("Bots").await;
    for kind in ["messengerA", "messengerB", "embed"] {
        let (s, first) = org.get_as("/v1/users/me", &user(kind, "ext-77")).await;
        assert_eq!(s, StatusCode::OK, "{kind}: {first}");
        assert_eq!(first["linkedAccounts"], json!([{"accountID": "ext-77", "accountType": kind}]));
        assert!(first.get("email").is_none(), "no e-mail: omitted, not null: {first}");
        let (_, again) = org.get_as("/v1/users/me", &user(kind, "ext-77")).await;
        assert_eq!(again["id"], first["id"], "{kind}: the same user on the second contact");
    }
    let (_, a) = org.get_as("/v1/users/me", &user("messengerA", "ext-77")).await;
    let (_, b) = org.get_as("/v1/users/me", &user("messengerB", "ext-77")).await;
    assert_ne!(a["id"], b["id"], "the same external id on two channels is two users");
}

#[tokio::test]
async fn any_date_selects_the_newest_version_on_or_before_it_and_the_answer_names_it() {
    let server = Server::start();
    let org = server.new_org("Versions").await;
    // The hosted service's own bot sends 2025-04-01; others the date they were written against,
    // or today's; old scripts a date before every version.
    for (sent, served) in [
        ("2025-04-01", "2025-03-25"),
        ("2025-05-31", "2025-03-25"),
        ("2031-12-31", "2025-03-25"),
        ("2025-03-25", "2025-03-25"),
        ("2024-12-01", "2024-09-01"),
        ("2024-01-01", "2024-03-01"),
    ] {
        let r = org.call(Method::GET, "/v1/replicas", None, &[("X-API-Version", sent)]).await;
        assert_eq!(r.status, StatusCode::OK, "{sent}: {}", r.text);
        assert_eq!(r.header("x-api-version"), Some(served), "{sent}");
    }
    let none = org.call(Method::GET, "/v1/replicas", None, &[]).await;
    assert_eq!(none.header("x-api-version"), Some("2025-03-25"));
    // The version served is the one whose shape the answer has.
    let early = org.call(Method::GET, "/v1/replicas/models", None, &[("X-API-Version", "2023-06-30")]).await;
    assert!(early.body["models"].is_array(), "{}", early.text);
    let late = org.call(Method::GET, "/v1/replicas/models", None, &[("X-API-Version", "2025-05-01")]).await;
    assert!(late.body["models"].is_object(), "{}", late.text);
    // A later error names the version too; only a value that is not a date is refused.
    let missing = org.call(Method::GET, "/v1/users/nobody", None, &[("X-API-Version", "2025-05-01")]).await;
    assert_eq!(missing.header("x-api-version"), Some("2025-03-25"));
    for bad in ["latest", "2025-02-30", "2025-4-1", "v1"] {
        let r = org.call(Method::GET, "/v1/replicas", None, &[("X-API-Version", bad)]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("UNSUPPORTED_API_VERSION"));
        assert_eq!(r.header("x-api-version"), None, "{bad}");
    }
}

#[tokio::test]
async fn the_api_version_is_checked_on_redeem_too() {
    let server = Server::start();
    let code = server.invite();
    let body = json!({"organizationName": "V", "name": "V", "email": "v@example.org"});
    let path = format!("/v1/api-keys/invites/{code}/redeem");
    let bad = send(server.req(Method::POST, &path).header("X-API-Version", "1999-13-01").json(&body)).await;
    assert_error(&bad, StatusCode::BAD_REQUEST, Some("UNSUPPORTED_API_VERSION"));
    let ok = send(server.req(Method::POST, &path).header("X-API-Version", "2025-03-25").json(&body)).await;
    assert_eq!(ok.status, StatusCode::OK, "the refused attempt did not use the code: {}", ok.text);
}

#[tokio::test]
async fn a_non_ascii_user_id_is_400_and_never_acts_as_the_owner() {
    let server = Server::start();
    let org = server.new_org("Bytes").await;
    let replica = org.create_replica("bytes").await;
    let accented = reqwest::header::HeaderValue::from_bytes("Zoë".as_bytes()).unwrap();
    let chats = format!("/v1/replicas/{replica}/chats");
    for path in ["/v1/replicas", chats.as_str(), "/v1/users/me"] {
        let r = send(org.req(Method::GET, path).header("X-USER-ID", accented.clone())).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
        assert!(r.body["error"].as_str().unwrap().contains("X-USER-ID"), "{}", r.text);
    }
    let r = send(org.req(Method::GET, &chats).header("X-USER-ID", "x").header("X-USER-ID-TYPE", accented)).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
}

#[tokio::test]
async fn a_repeated_credential_or_user_header_is_400() {
    let server = Server::start();
    let org = server.new_org("Twice").await;
    let id = org.create_user("Twice", "twice@example.org").await;
    let twice_key = send(
        server
            .req(Method::GET, "/v1/replicas")
            .header("X-ORGANIZATION-SECRET", &org.key)
            .header("X-ORGANIZATION-SECRET", &org.key),
    )
    .await;
    assert_error(&twice_key, StatusCode::BAD_REQUEST, Some("INVALID_AUTH_HEADERS"));
    let twice_bearer = send(server.req(Method::GET, "/v1/replicas").bearer_auth(&org.key).bearer_auth(&org.key)).await;
    assert_error(&twice_bearer, StatusCode::BAD_REQUEST, Some("INVALID_AUTH_HEADERS"));
    for (name, value) in [("X-USER-ID", id.as_str()), ("X-USER-ID-TYPE", "id")] {
        let rb = org.req(Method::GET, "/v1/users/me").header("X-USER-ID", &id).header("X-USER-ID-TYPE", "id");
        let r = send(rb.header(name, value)).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_USER_HEADERS"));
        assert!(r.body["error"].as_str().unwrap().contains("more than once"), "{}", r.text);
    }
    let (s, v) = org.get_as("/v1/users/me", &user("id", &id)).await;
    assert_eq!((s, v["id"].clone()), (StatusCode::OK, json!(id)));
}
