//! The operator's quotas per organization (`replicad orgs set-quota`, `replicad orgs list`)
//! and the caller's own `usageLimits`, with the server's clock moved to the next month.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::chats::{advance_clock, ask_as};
use crate::common::{assert_error, replica_body, user, Org, Server};

async fn ask(org: &Org, replica: &str, who: &str, body: Value) -> crate::common::Resp {
    org.call(Method::POST, &format!("/v1/replicas/{replica}/chat/completions"), Some(&body), &user("embed", who)).await
}

fn orgs_json(server: &Server) -> Vec<Value> {
    let out = server.dir().cli(&["orgs", "list", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("orgs list --json prints JSON")
}

#[tokio::test]
async fn quotas_set_by_the_operator_refuse_conversations_replicas_and_entries() {
    let server = Server::start_with(&["--test-clock"]);
    let org = server.new_org("Quota").await;
    let set = server.dir().cli(&[
        "orgs",
        "set-quota",
        &org.id,
        "--conversations-per-month",
        "2",
        "--replicas",
        "1",
        "--knowledge-base-entries",
        "1",
    ]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));

    let replica = org.create_replica("limited").await;
    let second = org.call(Method::POST, "/v1/replicas", Some(&replica_body("second", &org.owner_email)), &[]).await;
    assert_error(&second, StatusCode::TOO_MANY_REQUESTS, Some("REPLICA_QUOTA_EXCEEDED"));
    org.add_text(&replica, "One", "The only entry.").await;
    let entry = json!({"text": "Too many."});
    let r = org.call(Method::POST, &format!("/v1/replicas/{replica}/knowledge-base"), Some(&entry), &[]).await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, Some("KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED"));

    let capped = json!({"content": "hello", "usageLimits": {"conversationsPerMonth": 1}});
    ask_as(&org, &replica, "ann", "web", "first conversation").await;
    assert_error(
        &ask(&org, &replica, "ann", capped).await,
        StatusCode::TOO_MANY_REQUESTS,
        Some("CONVERSATION_QUOTA_EXCEEDED"),
    );
    ask_as(&org, &replica, "bob", "web", "second conversation").await;
    let third = ask(&org, &replica, "cyd", json!({"content": "a third?"})).await;
    assert_error(&third, StatusCode::TOO_MANY_REQUESTS, Some("CONVERSATION_QUOTA_EXCEEDED"));
    let saved = org
        .call(
            Method::POST,
            &format!("/v1/replicas/{replica}/chat/history"),
            Some(&json!({"content": "hi"})),
            &user("embed", "dee"),
        )
        .await;
    assert_error(&saved, StatusCode::TOO_MANY_REQUESTS, Some("CONVERSATION_QUOTA_EXCEEDED"));
    ask_as(&org, &replica, "ann", "web", "a conversation under way goes on").await;
    let (_, history) = org.get_as(&format!("/v1/replicas/{replica}/chat/history"), &user("embed", "cyd")).await;
    assert_eq!(history["items"], json!([]), "a refused exchange stores nothing");

    let listed = orgs_json(&server);
    let mine = listed.iter().find(|o| o["id"] == json!(org.id)).expect("the organization is listed");
    assert_eq!(
        (mine["conversations_this_month"].clone(), mine["conversations_per_month"].clone()),
        (json!(2), json!(2)),
        "{mine}"
    );
    assert_eq!((mine["replicas"].clone(), mine["max_replicas"].clone()), (json!(1), json!(1)));
    assert_eq!(
        (mine["knowledge_base_entries"].clone(), mine["max_knowledge_base_entries"].clone()),
        (json!(1), json!(1))
    );
    let table = server.dir().cli(&["orgs", "list"]);
    let text = String::from_utf8_lossy(&table.stdout);
    let row = text.lines().find(|l| l.starts_with(&org.id)).unwrap_or_else(|| panic!("no row for the org:\n{text}"));
    assert!(row.contains("Quota") && row.contains("2/2") && row.contains("1/1"), "{row}");

    advance_clock(&server, 32 * 24 * 60);
    ask_as(&org, &replica, "cyd", "web", "a new month, a new quota").await;
}

#[tokio::test]
async fn set_quota_names_an_existing_organization() {
    let server = Server::start();
    let out = server.dir().cli(&["orgs", "set-quota", "01a2051d-2946-7270-bf37-fdde8a524b9c", "--replicas", "3"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("organization not found"), "{out:?}");
    let (_, dir) = server.stop();
    let offline = dir.cli(&["orgs", "list", "--json"]);
    assert!(offline.status.success(), "works on the store itself: {offline:?}");
    assert_eq!(String::from_utf8_lossy(&offline.stdout).trim(), "[]");
}
