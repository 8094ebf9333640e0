//! Knowledge-base entries (spec §2.5, §4.2; docs/decisions.md "Knowledge base").

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, Server, ZORBLAX};

#[tokio::test]
async fn a_text_entry_is_enqueued_with_207_and_becomes_ready() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let (s, v) = org
        .post(
            &format!("/v1/replicas/{replica}/knowledge-base"),
            json!({"text": ZORBLAX, "title": "Zorblax", "language": "en"}),
        )
        .await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    assert_eq!(v["success"], json!(true));
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["type"], json!("text"));
    assert_eq!(results[0]["enqueued"], json!(true));
    let id = results[0]["knowledgeBaseID"].as_u64().expect("numeric knowledgeBaseID");

    let entry = org.wait_ready(&replica, id).await;
    assert_eq!(entry["id"], json!(id));
    assert_eq!(entry["replicaUUID"], json!(replica));
    assert_eq!(entry["type"], json!("text"));
    assert_eq!(entry["title"], json!("Zorblax"));
    assert_eq!(entry["language"], json!("en"));
    assert_eq!(entry["rawText"], json!(ZORBLAX));
    assert!(entry["processedText"].as_str().is_some_and(|t| t.contains("451 kelvin")), "{entry}");
    let chunks = entry["rawTextChunks"].as_array().expect("rawTextChunks");
    assert!(!chunks.is_empty());
    assert!(chunks.iter().any(|c| c["content"].as_str().is_some_and(|t| t.contains("451 kelvin"))), "{entry}");
}

#[tokio::test]
async fn an_entry_body_needs_exactly_one_source() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    for body in [
        json!({"text": "Some text", "url": "https://example.org"}),
        json!({"title": "only a title"}),
        json!({"text": ""}),
        json!({"text": "   \n  "}),
    ] {
        let r = org.call(Method::POST, &path, Some(&body), &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    }
    assert_eq!(org.get(&path).await.1["total"], json!(0));
}

#[tokio::test]
async fn a_language_outside_iso_639_1_is_refused() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    for lang in ["xx", "EN", "eng"] {
        let r = org.call(Method::POST, &path, Some(&json!({"text": "Bonjour", "language": lang})), &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    }
    for lang in ["fr", "zu", "ab"] {
        let (s, v) = org.post(&path, json!({"text": "Bonjour", "language": lang})).await;
        assert_eq!(s, StatusCode::MULTI_STATUS, "{lang}: {v}");
    }
}

#[tokio::test]
async fn a_missing_entry_is_404_and_a_malformed_id_400() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let r = org.call(Method::GET, &format!("/v1/replicas/{replica}/knowledge-base/999"), None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    for bad in ["abc", "0", "-1"] {
        let r = org.call(Method::GET, &format!("/v1/replicas/{replica}/knowledge-base/{bad}"), None, &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_PATH_PARAMETER"));
    }
}

#[tokio::test]
async fn an_entry_of_another_replica_is_404_under_this_one() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let a = org.create_replica("a").await;
    let b = org.create_replica("b").await;
    let kb = org.add_text(&a, "A's notes", "Notes that belong to replica a.").await;
    for method in [Method::GET, Method::DELETE] {
        let r = org.call(method, &format!("/v1/replicas/{b}/knowledge-base/{kb}"), None, &[]).await;
        assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    }
    let (s, _) = org.get(&format!("/v1/replicas/{a}/knowledge-base/{kb}")).await;
    assert_eq!(s, StatusCode::OK, "still there under its own replica");
}

fn ids(v: &Value) -> Vec<u64> {
    v["items"].as_array().expect("items").iter().map(|e| e["id"].as_u64().expect("id")).collect()
}

#[tokio::test]
async fn the_entry_list_pages_and_filters_by_status_and_type() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(org.add_ready_text(&replica, &format!("Entry {i}"), &format!("Entry number {i} text.")).await);
    }
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let (s, all) = org.get(&path).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(all["success"], json!(true));
    assert_eq!(all["total"], json!(5));
    assert_eq!(ids(&all), created);
    let first = &all["items"][0];
    for field in ["id", "replicaUUID", "type", "status", "title", "createdAt", "updatedAt"] {
        assert!(first.get(field).is_some(), "{field} in {first}");
    }
    assert!(first.get("rawText").is_none(), "rawText is only on read-one");

    let (_, p2) = org.get(&format!("{path}?page=2&pageSize=2")).await;
    assert_eq!(ids(&p2), created[2..4].to_vec());
    assert_eq!(p2["total"], json!(5));

    let (_, ready) = org.get(&format!("{path}?status=READY&type=text")).await;
    assert_eq!(ids(&ready), created);
    let (_, none) = org.get(&format!("{path}?status=UNPROCESSABLE")).await;
    assert_eq!(ids(&none), Vec::<u64>::new());
    assert_eq!(none["total"], json!(0));
    let (_, websites) = org.get(&format!("{path}?type=website")).await;
    assert_eq!(websites["total"], json!(0));

    for bad in ["status=DONE", "type=pdf", "pageSize=101", "search=ab", "sortOrder=up"] {
        let r = org.call(Method::GET, &format!("{path}?{bad}"), None, &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
    }
}

#[tokio::test]
async fn patching_the_text_reindexes_the_entry() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let kb = org.add_ready_text(&replica, "Reactor", ZORBLAX).await;
    let question = "What is the fuel of the Zorblax reactor?";
    assert!(org.ask(&replica, question).await.contains("moonwater"));

    let new_text = "The Zorblax reactor was converted in 2040. \
        The fuel of the Zorblax reactor is now compressed starlight from the Vell nebula.";
    let (s, v) = org.patch(&format!("/v1/replicas/{replica}/knowledge-base/{kb}"), json!({"rawText": new_text})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["success"], json!(true));
    let entry = org.wait_ready(&replica, kb).await;
    assert_eq!(entry["rawText"], json!(new_text));

    let answer = org.ask(&replica, question).await;
    assert!(answer.contains("starlight"), "new content is found: {answer}");
    assert!(!answer.contains("moonwater"), "old content is gone: {answer}");
    let old = org.ask(&replica, "At what temperature in kelvin does the Zorblax reactor operate?").await;
    assert!(!old.contains("451"), "the old text is no longer indexed: {old}");
}

#[tokio::test]
async fn patching_only_the_title_keeps_the_text() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let kb = org.add_ready_text(&replica, "Old title", ZORBLAX).await;
    let path = format!("/v1/replicas/{replica}/knowledge-base/{kb}");
    let (s, v) = org.patch(&path, json!({"title": "New title"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let entry = org.wait_ready(&replica, kb).await;
    assert_eq!(entry["title"], json!("New title"));
    assert_eq!(entry["rawText"], json!(ZORBLAX));

    let r = org.call(Method::PATCH, &path, Some(&json!({"language": "xx"})), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    let r = org.call(Method::PATCH, &path, Some(&json!({"title": 7})), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    // Fields the PATCH does not change are ignored (a client may send the entry back whole).
    let (s, v) = org.patch(&path, json!({"title": "Again", "status": "READY", "colour": "red"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, entry) = org.get(&path).await;
    assert_eq!((&entry["title"], &entry["rawText"]), (&json!("Again"), &json!(ZORBLAX)), "{entry}");
}

#[tokio::test]
async fn a_deleted_entry_is_gone_and_no_longer_cited() {
    let server = Server::start();
    let org = server.new_org("Kb").await;
    let replica = org.create_replica("kb").await;
    let kb = org.add_ready_text(&replica, "Reactor", ZORBLAX).await;
    let question = crate::common::ZORBLAX_QUESTION;
    assert!(org.ask(&replica, question).await.contains("451 kelvin"));

    let path = format!("/v1/replicas/{replica}/knowledge-base/{kb}");
    let (s, v) = org.delete(&path).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["success"], json!(true));
    let (s, _) = org.get(&path).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(org.get(&format!("/v1/replicas/{replica}/knowledge-base")).await.1["total"], json!(0));

    let answer = org.ask(&replica, question).await;
    assert!(!answer.contains("451"), "{answer}");
    assert!(answer.starts_with("I don't know"), "{answer}");
    let items = org.history(&replica, "").await;
    let last = items.last().expect("the last answer is stored");
    assert_eq!(last["role"], json!("assistant"));
    assert_eq!(last["sources"], json!([]), "{last}");
}
