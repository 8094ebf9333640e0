//! Users of an organization (spec §4.2 `/v1/users*`; docs/decisions.md "Auth").

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_error, replica_body, send, user, Server};

#[tokio::test]
async fn a_created_user_reads_back_by_id() {
    let server = Server::start();
    let org = server.new_org("People").await;
    let (s, v) = org.post("/v1/users", json!({"name": "Bea", "email": "Bea@Example.org"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["success"], json!(true));
    let id = v["id"].as_str().expect("id");
    assert_eq!(v["email"], json!("bea@example.org"), "e-mails are stored lower-cased");

    let (s, got) = org.get(&format!("/v1/users/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{got}");
    assert_eq!(got["id"], json!(id));
    assert_eq!(got["name"], json!("Bea"));
}

#[tokio::test]
async fn a_user_without_email_can_be_created() {
    let server = Server::start();
    let org = server.new_org("People").await;
    let (s, v) = org.post("/v1/users", json!({"name": "Anonymous"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v.get("email").is_none(), "an absent e-mail is omitted, not null: {v}");
    assert_eq!(v["linkedAccounts"], json!([]));
}

#[tokio::test]
async fn a_second_user_with_the_same_email_is_409() {
    let server = Server::start();
    let org = server.new_org("People").await;
    org.create_user("Bea", "bea@example.org").await;
    let r = org.call(Method::POST, "/v1/users", Some(&json!({"name": "Bea 2", "email": "BEA@example.org"})), &[]).await;
    assert_error(&r, StatusCode::CONFLICT, Some("EMAIL_TAKEN"));
    let owner = org.call(Method::POST, "/v1/users", Some(&json!({"name": "X", "email": org.owner_email})), &[]).await;
    assert_error(&owner, StatusCode::CONFLICT, Some("EMAIL_TAKEN"));
}

#[tokio::test]
async fn the_same_email_may_exist_in_two_organizations() {
    let server = Server::start();
    let a = server.new_org("A").await;
    let b = server.new_org("B").await;
    a.create_user("Bea", "bea@example.org").await;
    b.create_user("Bea", "bea@example.org").await;
}

#[tokio::test]
async fn invalid_user_bodies_are_400() {
    let server = Server::start();
    let org = server.new_org("People").await;
    for (body, code) in [
        (json!({"name": "", "email": "a@example.org"}), "VALIDATION_ERROR"),
        (json!({"name": "A", "email": "not-an-email"}), "VALIDATION_ERROR"),
        (json!({"name": 5}), "INVALID_BODY"),
        (json!({"id": "has space"}), "VALIDATION_ERROR"),
        (json!({"id": ""}), "VALIDATION_ERROR"),
        (json!({"id": "x".repeat(101)}), "VALIDATION_ERROR"),
        (json!({"linkedAccounts": [{"accountID": "1", "accountType": "fax"}]}), "VALIDATION_ERROR"),
        (json!({"linkedAccounts": [{"accountType": "embed"}]}), "INVALID_BODY"),
    ] {
        let r = org.call(Method::POST, "/v1/users", Some(&body), &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some(code));
    }
}

#[tokio::test]
async fn a_missing_user_is_404_whatever_its_id_looks_like() {
    let server = Server::start();
    let org = server.new_org("People").await;
    for id in [uuid::Uuid::new_v4().to_string(), "not-a-user".to_string()] {
        let r = org.call(Method::GET, &format!("/v1/users/{id}"), None, &[]).await;
        assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    }
}

#[tokio::test]
async fn users_me_with_the_key_alone_is_the_owner_user_the_key_acts_as() {
    let server = Server::start();
    let org = server.new_org("Me").await;
    // As docs/api.md says: with the key alone, requests act as the organization's owner user.
    let (s, me) = org.get("/v1/users/me").await;
    assert_eq!(s, StatusCode::OK, "{me}");
    assert_eq!(me["email"], json!(org.owner_email));
    let (_, named) = org.get_as("/v1/users/me", &user("email", &org.owner_email)).await;
    assert_eq!(named, me, "the same user as named by its e-mail");
    let replica = org.create_replica("owned").await;
    let (_, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(read["ownerID"], me["id"], "a replica made with the key alone is the owner user's");
    let (s, v) = org.put("/v1/users/me", json!({"id": me["id"], "name": "Owner Renamed"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, again) = org.get_as("/v1/users/me", &user("id", me["id"].as_str().unwrap())).await;
    assert_eq!(again["name"], json!("Owner Renamed"));
    let (s, usage) = org.get("/v1/users/me/usage").await;
    assert_eq!(s, StatusCode::OK, "{usage}");
    // The owner user is never deleted (its replicas' heir): the key alone cannot delete it.
    let r = org.call(Method::DELETE, "/v1/users/me", None, &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    let r = send(server.req(Method::GET, "/v1/users/me")).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
}

#[tokio::test]
async fn a_user_updates_itself_with_put_me() {
    let server = Server::start();
    let org = server.new_org("Me").await;
    let id = org.create_user("Bea", "bea@example.org").await;
    let me = user("id", &id);
    let (s, v) = org.put_as("/v1/users/me", json!({"name": "Beatrice", "email": "beatrice@example.org"}), &me).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["name"], json!("Beatrice"));
    let (_, got) = org.get(&format!("/v1/users/{id}")).await;
    assert_eq!(got["email"], json!("beatrice@example.org"));
    // The new address names the user; the old one is free.
    let (s, _) = org.get_as("/v1/users/me", &user("email", "beatrice@example.org")).await;
    assert_eq!(s, StatusCode::OK);
    let r = org.call(Method::GET, "/v1/users/me", None, &user("email", "bea@example.org")).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("USER_NOT_FOUND"));
    org.create_user("New Bea", "bea@example.org").await;
}

#[tokio::test]
async fn put_me_to_an_email_of_another_user_is_409() {
    let server = Server::start();
    let org = server.new_org("Me").await;
    let id = org.create_user("Bea", "bea@example.org").await;
    let r = org
        .call(Method::PUT, "/v1/users/me", Some(&json!({"name": "Bea", "email": org.owner_email})), &user("id", &id))
        .await;
    assert_error(&r, StatusCode::CONFLICT, Some("EMAIL_TAKEN"));
}

#[tokio::test]
async fn a_deleted_user_no_longer_authenticates_and_its_replicas_pass_to_the_owner() {
    let server = Server::start();
    let org = server.new_org("Leavers").await;
    let owner = org.owner_id().await;
    let bea = org.create_user("Bea", "bea@example.org").await;
    let replica = org.create_replica_from(replica_body("beas", &bea)).await;
    let r = org.call(Method::DELETE, "/v1/users/me", None, &user("email", "bea@example.org")).await;
    assert_eq!(
        (r.status, r.text.as_str()),
        (StatusCode::NO_CONTENT, ""),
        "204, no body (docs/decisions.md \"Common\")"
    );
    assert!(r.header("content-type").is_none());

    let r = org.call(Method::GET, "/v1/users/me", None, &user("email", "bea@example.org")).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("USER_NOT_FOUND"));
    let (s, _) = org.get(&format!("/v1/users/{bea}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, r) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(r["ownerID"], json!(owner));
}

#[tokio::test]
async fn the_owner_user_cannot_delete_itself() {
    let server = Server::start();
    let org = server.new_org("Owners").await;
    let r = org.call(Method::DELETE, "/v1/users/me", None, &user("email", &org.owner_email)).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    let (s, _) = org.get_as("/v1/users/me", &user("email", &org.owner_email)).await;
    assert_eq!(s, StatusCode::OK, "the owner is still there");
}

#[tokio::test]
async fn a_linked_account_user_can_delete_itself_and_comes_back_new() {
    let server = Server::start();
    let org = server.new_org("Linked").await;
    let (_, first) = org.get_as("/v1/users/me", &user("embed", "visitor-1")).await;
    let (s, _) = org.delete_as("/v1/users/me", &user("embed", "visitor-1")).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, again) = org.get_as("/v1/users/me", &user("embed", "visitor-1")).await;
    assert_ne!(first["id"], again["id"]);
}

#[tokio::test]
async fn a_migrating_team_keeps_its_user_ids_and_linked_accounts() {
    let server = Server::start();
    let org = server.new_org("Movers").await;
    let linked = json!([{"accountID": "777", "accountType": "messengerA"}]);
    let body = json!({"id": "crm-0042", "email": "dana@example.org", "linkedAccounts": linked, "plan": "gold"});
    let (s, v) = org.post("/v1/users", body).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((&v["id"], &v["name"], &v["linkedAccounts"]), (&json!("crm-0042"), &json!(""), &linked), "{v}");

    // The id names the user everywhere: the path, X-USER-ID alone, and its linked account.
    let (s, v) = org.get("/v1/users/crm-0042").await;
    assert_eq!((s, v["email"].clone()), (StatusCode::OK, json!("dana@example.org")), "{v}");
    let (_, v) = org.get_as("/v1/users/me", &[("X-USER-ID", "crm-0042")]).await;
    assert_eq!(v["id"], json!("crm-0042"), "{v}");
    let (_, v) = org.get_as("/v1/users/me", &user("messengerA", "777")).await;
    assert_eq!(v["id"], json!("crm-0042"), "the linked account names the same user: {v}");
    let replica = org.create_replica_from(replica_body("danas", "crm-0042")).await;
    let (_, v) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!((&v["ownerID"], &v["owner_uuid"]), (&json!("crm-0042"), &json!("crm-0042")), "{v}");
    let (_, v) = org.get("/v1/replicas?ownerID=crm-0042").await;
    assert_eq!(v["items"].as_array().map(Vec::len), Some(1), "{v}");

    for (body, code) in [
        (json!({"id": "crm-0042"}), "USER_ID_TAKEN"),
        (json!({"linkedAccounts": [{"accountID": "777", "accountType": "messengerA"}]}), "LINKED_ACCOUNT_TAKEN"),
    ] {
        let r = org.call(Method::POST, "/v1/users", Some(&body), &[]).await;
        assert_error(&r, StatusCode::CONFLICT, Some(code));
    }

    // PUT sets what it is given and keeps the rest; `id` must be the caller's own.
    let me = [("X-USER-ID", "crm-0042")];
    let (s, v) = org.put_as("/v1/users/me", json!({"id": "crm-0042", "name": "Dana"}), &me).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((&v["name"], &v["email"], &v["linkedAccounts"]), (&json!("Dana"), &json!("dana@example.org"), &linked));
    let r = org.call(Method::PUT, "/v1/users/me", Some(&json!({"id": "crm-0043", "name": "X"})), &me).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    let (s, v) = org.put_as("/v1/users/me", json!({"id": "crm-0042", "linkedAccounts": []}), &me).await;
    assert_eq!((s, v["linkedAccounts"].clone()), (StatusCode::OK, json!([])), "{v}");
    let (_, v) = org.get_as("/v1/users/me", &user("messengerA", "777")).await;
    assert_ne!(v["id"], json!("crm-0042"), "a released account makes a new user on first contact: {v}");

    // A UUID chosen by the client is kept as it was given.
    let chosen = "0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B";
    let (s, v) = org.post("/v1/users", json!({"id": chosen, "name": "Eli"})).await;
    assert_eq!((s, v["id"].clone()), (StatusCode::OK, json!(chosen)), "{v}");
    let (s, v) = org.get_as("/v1/users/me", &[("X-USER-ID", &chosen.to_lowercase())]).await;
    assert_eq!((s, v["name"].clone()), (StatusCode::OK, json!("Eli")), "{v}");
}
