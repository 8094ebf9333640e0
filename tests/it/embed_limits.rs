//! The public embed operations' own limits, since anyone may call them (an embed key sits in a
//! site's HTML): rate limits per visitor and per replica, bounded visitor-user creation, the
//! visitors' own monthly conversation quota apart from the organization's, and the revocation
//! of an embed key.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::chats::advance_clock;
use crate::common::{assert_error, send, Org, Resp, Server, ZORBLAX_QUESTION};
use crate::embed::{allowed_site, embed_key, in_browser, reactor, widget_req};

const SITE: &str = "https://docs.example.com";

/// `GET /v1/embed/{replica}/history` as `visitor` with `key` from [`SITE`].
async fn history(server: &Server, replica: &str, key: &str, visitor: &str) -> Resp {
    send(widget_req(server, Method::GET, &format!("/v1/embed/{replica}/history"), key, SITE, visitor)).await
}

/// `POST /v1/embed/{replica}/chat` as `visitor` with `key` from [`SITE`].
async fn chat(server: &Server, replica: &str, key: &str, visitor: &str, content: &str) -> Resp {
    let path = format!("/v1/embed/{replica}/chat");
    send(widget_req(server, Method::POST, &path, key, SITE, visitor).json(&json!({ "content": content }))).await
}

/// Whether the organization has a user linked to the visitor `visitor`: creating one with that
/// linked account is refused (409) exactly then. Makes a user when there was none.
async fn visitor_is_a_user(org: &Org, visitor: &str) -> bool {
    let body = json!({"linkedAccounts": [{"accountID": visitor, "accountType": "embed"}]});
    let (status, v) = org.post("/v1/users", body).await;
    assert!(matches!(status, StatusCode::OK | StatusCode::CONFLICT), "{status} {v}");
    status == StatusCode::CONFLICT
}

fn assert_rate_limited(r: &Resp) {
    assert_error(r, StatusCode::TOO_MANY_REQUESTS, Some("RATE_LIMITED"));
    assert!(r.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)), "{:?}", r.headers);
    assert!(r.header("ratelimit").is_some(), "{:?}", r.headers);
    assert_eq!(r.header("access-control-allow-origin"), Some(SITE), "the widget can read the refusal");
}

#[tokio::test]
async fn visitors_are_rate_limited_per_visitor_and_per_replica_while_the_organization_is_not() {
    let flags = ["--embed-rate-limit-per-visitor", "2", "--embed-rate-limit-per-replica", "3"];
    let server = Server::start_with(&flags);
    let org = server.new_org("Limited").await;
    let replica = reactor(&org).await;
    let other = org.create_replica("other").await;
    let key = embed_key(&org, &replica, &[SITE]).await;
    let other_key = embed_key(&org, &other, &[SITE]).await;

    for _ in 0..2 {
        assert_eq!(history(&server, &replica, &key, "visitor-aaaa-0001").await.status, StatusCode::OK);
    }
    let r = chat(&server, &replica, &key, "visitor-aaaa-0001", ZORBLAX_QUESTION).await;
    assert_rate_limited(&r);
    assert!(r.text.contains("this visitor"), "{}", r.text);

    assert_eq!(history(&server, &replica, &key, "visitor-bbbb-0002").await.status, StatusCode::OK);
    let r = history(&server, &replica, &key, "visitor-cccc-0003").await;
    assert_rate_limited(&r);
    assert!(r.text.contains("this replica"), "the replica's three requests a minute are used: {}", r.text);

    let r = history(&server, &other, &other_key, "visitor-aaaa-0001").await;
    assert_eq!(r.status, StatusCode::OK, "another replica has buckets of its own: {}", r.text);
    let (status, v) = org.chat(&replica, ZORBLAX_QUESTION).await;
    assert_eq!(status, StatusCode::OK, "the organization's own API is not limited by its visitors: {v}");
}

#[tokio::test]
async fn a_visitor_becomes_a_user_only_by_asking_and_new_visitors_per_replica_are_bounded() {
    let server = Server::start_with(&["--embed-new-visitors-per-minute", "2"]);
    let org = server.new_org("Visitors").await;
    let replica = reactor(&org).await;
    let key = embed_key(&org, &replica, &[SITE]).await;

    let r = history(&server, &replica, &key, "reader-0000-only").await;
    assert_eq!((r.status, &r.body["items"]), (StatusCode::OK, &json!([])), "{}", r.text);
    assert!(!visitor_is_a_user(&org, "reader-0000-only").await, "reading made no user");

    for visitor in ["asker-0000-0001", "asker-0000-0002"] {
        let r = chat(&server, &replica, &key, visitor, ZORBLAX_QUESTION).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let r = chat(&server, &replica, &key, "asker-0000-0003", ZORBLAX_QUESTION).await;
    assert_rate_limited(&r);
    assert!(r.text.contains("new visitors"), "{}", r.text);
    assert!(!visitor_is_a_user(&org, "asker-0000-0003").await, "a refused visitor leaves no user");
    assert!(visitor_is_a_user(&org, "asker-0000-0001").await);

    let again = chat(&server, &replica, &key, "asker-0000-0001", "And its fuel?").await;
    assert_eq!(again.status, StatusCode::OK, "a known visitor is no new visitor: {}", again.text);
    let mine = history(&server, &replica, &key, "asker-0000-0001").await;
    assert_eq!(mine.body["items"].as_array().map(Vec::len), Some(4), "{}", mine.text);
}

#[tokio::test]
async fn visitors_have_their_own_monthly_quota_and_never_use_up_the_organizations() {
    let server = Server::start_with(&["--test-clock", "--embed-conversations-per-month", "2"]);
    let org = server.new_org("Quota").await;
    let set = server.dir().cli(&["orgs", "set-quota", &org.id, "--conversations-per-month", "1"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let replica = reactor(&org).await;
    let key = embed_key(&org, &replica, &[SITE]).await;

    for visitor in ["month-visitor-1", "month-visitor-2"] {
        let r = chat(&server, &replica, &key, visitor, ZORBLAX_QUESTION).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let (status, v) = org.chat(&replica, ZORBLAX_QUESTION).await;
    assert_eq!(status, StatusCode::OK, "the visitors used none of the organization's one conversation: {v}");
    let r = org
        .call(
            Method::POST,
            &format!("/v1/replicas/{replica}/chat/completions"),
            Some(&json!({"content": "a second conversation"})),
            &crate::common::user("embed", "api-user-2"),
        )
        .await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, Some("CONVERSATION_QUOTA_EXCEEDED"));

    let r = chat(&server, &replica, &key, "month-visitor-3", ZORBLAX_QUESTION).await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, Some("EMBED_CONVERSATION_QUOTA_EXCEEDED"));
    assert!(!visitor_is_a_user(&org, "month-visitor-3").await, "a visitor refused by the quota leaves no user");
    let r = chat(&server, &replica, &key, "month-visitor-1", "And its fuel?").await;
    assert_eq!(r.status, StatusCode::OK, "a conversation under way goes on: {}", r.text);

    // The operator raises this organization's visitors' quota above the server's default.
    let set = server.dir().cli(&["orgs", "set-quota", &org.id, "--embed-conversations-per-month", "3"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let r = chat(&server, &replica, &key, "month-visitor-3", ZORBLAX_QUESTION).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = chat(&server, &replica, &key, "month-visitor-4", ZORBLAX_QUESTION).await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, Some("EMBED_CONVERSATION_QUOTA_EXCEEDED"));

    let out = server.dir().cli(&["orgs", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("orgs list --json");
    let mine = listed.as_array().unwrap().iter().find(|o| o["id"] == json!(org.id)).expect("listed").clone();
    let counts = ["conversations_this_month", "conversations_per_month"].map(|f| mine[f].clone());
    assert_eq!(counts, [json!(1), json!(1)], "the organization's own conversations only: {mine}");
    let counts = ["embed_conversations_this_month", "embed_conversations_per_month"].map(|f| mine[f].clone());
    assert_eq!(counts, [json!(3), json!(3)], "{mine}");

    advance_clock(&server, 32 * 24 * 60);
    let r = chat(&server, &replica, &key, "month-visitor-4", ZORBLAX_QUESTION).await;
    assert_eq!(r.status, StatusCode::OK, "a new month, a new quota: {}", r.text);
}

#[tokio::test]
async fn a_revoked_embed_key_is_refused_while_the_replicas_other_keys_keep_working() {
    let server = Server::start();
    let org = server.new_org("Revoke").await;
    let replica = reactor(&org).await;
    let other = org.create_replica("other").await;
    let old = embed_key(&org, &replica, &[SITE]).await;
    let kept = embed_key(&org, &replica, &[SITE]).await;
    assert_eq!(chat(&server, &replica, &old, "revoke-visitor-1", "hi").await.status, StatusCode::OK);

    let revoke = |replica: &str, key: &str| format!("/v1/replicas/{replica}/embed-keys/{key}");
    let r = org.call(Method::DELETE, &revoke(&other, &old), None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let (status, v) = org.delete(&revoke(&replica, &old)).await;
    assert_eq!((status, v), (StatusCode::OK, json!({"success": true})));

    let r = chat(&server, &replica, &old, "revoke-visitor-1", "hi again").await;
    assert_error(&r, StatusCode::FORBIDDEN, Some("EMBED_KEY_REFUSED"));
    assert_error(
        &history(&server, &replica, &old, "revoke-visitor-1").await,
        StatusCode::FORBIDDEN,
        Some("EMBED_KEY_REFUSED"),
    );
    let r = chat(&server, &replica, &kept, "revoke-visitor-1", "hi again").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    for key in [old.as_str(), "not-a-key", "%00%FF"] {
        let r = org.call(Method::DELETE, &revoke(&replica, key), None, &[]).await;
        assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    }
    let stranger = server.new_org("Stranger").await;
    let r = stranger.call(Method::DELETE, &revoke(&replica, &kept), None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    assert_eq!(chat(&server, &replica, &kept, "revoke-visitor-1", "still here").await.status, StatusCode::OK);
}

#[tokio::test]
async fn in_chromium_a_visitor_at_its_limit_is_told_the_chat_is_busy() {
    let server = Server::start_with(&["--embed-rate-limit-per-visitor", "2"]);
    let org = server.new_org("Busy").await;
    let replica = reactor(&org).await;
    let site = allowed_site(&server, &org, &replica).await;
    // Opening loads the history (one request), the first question is the second: the second
    // question is refused.
    let seen = in_browser(json!({
        "steps": ["busy"],
        "replica": replica,
        "replicad": server.base_url,
        "allowed_url": format!("{site}/"),
        "question": ZORBLAX_QUESTION,
        "expect": "451 kelvin",
    }))
    .await;
    assert_eq!(seen["violations"], json!([]), "{seen}");
    assert!(
        seen["busy_status"].as_str().is_some_and(|s| s.contains("too many requests")),
        "the API's error text: {seen}"
    );
    let statuses: Vec<u64> =
        seen["chat_answers"].as_array().unwrap().iter().filter_map(|a| a["status"].as_u64()).collect();
    assert_eq!(statuses, [200, 429], "{seen}");
    let kept = seen["busy_messages"].as_array().unwrap();
    assert!(kept.iter().any(|m| m.as_str().is_some_and(|m| m.contains("451 kelvin"))), "{seen}");
}
