//! The organization-wide knowledge-base operations the hosted service's tools use
//! (docs/decisions.md "Knowledge base"): `GET /v1/knowledge-base` over every replica the
//! caller may see, `GET`/`PATCH`/`DELETE /v1/knowledge-base/{knowledgeBaseID}`, and the
//! retrieval check `POST …/chat/completions/test`.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, replica_body, user, Org, Server, ZORBLAX, ZORBLAX_QUESTION};

/// The ids of a list answer's items, after asserting each carries its `replicaUUID`.
fn ids(v: &Value) -> Vec<u64> {
    let items = v["items"].as_array().unwrap_or_else(|| panic!("items: {v}"));
    items
        .iter()
        .map(|i| {
            assert!(i["replicaUUID"].is_string(), "{i}");
            i["id"].as_u64().unwrap()
        })
        .collect()
}

async fn list(org: &Org, query: &str, headers: &[(&str, &str)]) -> Value {
    let (s, v) = org.get_as(&format!("/v1/knowledge-base{query}"), headers).await;
    assert_eq!(s, StatusCode::OK, "{query}: {v}");
    v
}

#[tokio::test]
async fn the_organization_wide_list_shows_every_visible_replicas_entries_with_filters_and_order() {
    let server = Server::start();
    let org = server.new_org("Tools").await;
    let bea = org.create_user("Bea", "bea@example.org").await;
    org.create_user("Cy", "cy@example.org").await;
    let public = org.create_replica("public").await;
    let mut body = replica_body("beas-private", &bea);
    body["private"] = json!(true);
    let private = org.create_replica_from(body).await;
    let a = org.add_ready_text(&public, "Zorblax manual", ZORBLAX).await;
    let b = org.add_ready_text(&private, "Private notes", "Bea keeps the spare keys in the blue drawer.").await;
    let (s, v) =
        org.post(&format!("/v1/replicas/{public}/knowledge-base"), json!({"url": "http://127.0.0.1:1/x"})).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let c = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    org.wait_settled(&public, c).await;

    let all = list(&org, "", &[]).await;
    assert_eq!((ids(&all), all["total"].clone()), (vec![c, b, a], json!(3)), "newest first: {all}");
    assert_eq!(ids(&list(&org, "?sortBy=createdAt&sortOrder=asc", &[]).await), vec![a, b, c]);
    assert_eq!(ids(&list(&org, "?status=READY&status=PROCESSED_TEXT", &[]).await), vec![b, a]);
    assert_eq!(ids(&list(&org, "?type=website", &[]).await), vec![c]);
    assert_eq!(ids(&list(&org, "?hasError=true", &[]).await), vec![c]);
    assert_eq!(ids(&list(&org, "?search=zorb", &[]).await), vec![a]);
    let counted = list(&org, "?pageSize=0", &[]).await;
    assert_eq!((ids(&counted).len(), counted["total"].clone()), (0, json!(3)));
    assert_eq!(ids(&list(&org, "?pageSize=1&page=2", &[]).await), vec![b]);

    // A private replica's entries: its owner sees them, another user does not.
    assert_eq!(ids(&list(&org, "", &[("X-USER-ID", bea.as_str())]).await), vec![c, b, a]);
    assert_eq!(ids(&list(&org, "", &user("email", "cy@example.org")).await), vec![c, a]);

    for bad in ["?search=zo", "?status=DONE", "?sortBy=size", "?sortOrder=up", "?pageSize=101"] {
        let r = org.call(Method::GET, &format!("/v1/knowledge-base{bad}"), None, &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
    }
    // The per-replica list takes the same parameters.
    let (_, v) = org.get(&format!("/v1/replicas/{public}/knowledge-base?status=READY&status=UNPROCESSABLE")).await;
    assert_eq!(ids(&v), vec![a, c], "one replica's list: createdAt ascending by default");
}

#[tokio::test]
async fn an_entry_is_read_patched_and_deleted_by_its_id_alone() {
    let server = Server::start();
    let org = server.new_org("Tools").await;
    let other = server.new_org("Other").await;
    let replica = org.create_replica("kb").await;
    let kb = org.add_ready_text(&replica, "Zorblax manual", ZORBLAX).await;
    let path = format!("/v1/knowledge-base/{kb}");

    let (s, by_id) = org.get(&path).await;
    assert_eq!(s, StatusCode::OK, "{by_id}");
    let (_, by_replica) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
    assert_eq!(by_id, by_replica, "one implementation, one answer");
    assert_eq!(by_id["rawText"], json!(ZORBLAX));

    let (s, v) = org.patch(&path, json!({"title": "Reactor manual"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(org.get(&path).await.1["title"], json!("Reactor manual"));

    let r = other.call(Method::GET, &path, None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let r = other.call(Method::DELETE, &path, None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));

    let (s, v) = org.delete(&path).await;
    assert_eq!((s, v["success"].clone()), (StatusCode::OK, json!(true)), "{v}");
    let r = org.call(Method::GET, &path, None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    assert!(!org.ask(&replica, ZORBLAX_QUESTION).await.contains("451 kelvin"), "the deleted entry is not cited");
}

#[tokio::test]
async fn the_retrieval_check_answers_the_query_and_scored_sources_and_stores_nothing() {
    let server = Server::start();
    let org = server.new_org("Tools").await;
    let replica = org.create_replica("kb").await;
    let kb = org.add_ready_text(&replica, "Zorblax manual", ZORBLAX).await;
    let (s, v) =
        org.post(&format!("/v1/replicas/{replica}/chat/completions/test"), json!({"content": ZORBLAX_QUESTION})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["content"].as_str().unwrap().contains("451 kelvin"), "{v}");
    assert_eq!(v["query"], json!(ZORBLAX_QUESTION));
    let sources = v["sources"].as_array().unwrap();
    assert!(!sources.is_empty() && sources.iter().all(|s| s["id"] == json!(kb) && s["score"].as_f64() > Some(0.0)));
    let scores: Vec<f64> = sources.iter().map(|s| s["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {scores:?}");
    assert!(org.history(&replica, "").await.is_empty(), "nothing stored in the history");
    let r =
        org.call(Method::POST, &format!("/v1/replicas/{replica}/chat/completions/test"), Some(&json!({})), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
}

/// The `content` of each source of `sources`.
fn contents(sources: &Value) -> Vec<&str> {
    sources.as_array().unwrap().iter().map(|s| s["content"].as_str().unwrap()).collect()
}

/// How many different texts `texts` holds.
fn distinct(texts: &[&str]) -> usize {
    texts.iter().collect::<std::collections::HashSet<_>>().len()
}

#[tokio::test]
async fn a_setup_run_twice_collapses_identical_passages_at_answer_time() {
    let server = Server::start();
    let org = server.new_org("Tools").await;
    let replica = org.create_replica("kb").await;
    // The same text uploaded three times (twice as text, once as a file), as a re-run setup does.
    let mut entries = vec![
        org.add_ready_text(&replica, "Zorblax manual", ZORBLAX).await,
        org.add_ready_text(&replica, "Zorblax manual", ZORBLAX).await,
    ];
    let file = org.upload(&replica, "zorblax.txt", ZORBLAX.as_bytes().to_vec()).await;
    org.wait_ready(&replica, file).await;
    entries.push(file);

    let (s, v) =
        org.post(&format!("/v1/replicas/{replica}/chat/completions/test"), json!({"content": ZORBLAX_QUESTION})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let passages = contents(&v["sources"]);
    assert_eq!(passages.len(), distinct(&passages), "a passage is handed to the model once: {passages:?}");

    let answer = org.ask(&replica, ZORBLAX_QUESTION).await;
    assert!(answer.contains("451 kelvin"), "{answer}");
    let body = answer.split("\n\n(From:").next().unwrap();
    let sentences: Vec<&str> = body.split(". ").map(str::trim).filter(|s| !s.is_empty()).collect();
    for (i, s) in sentences.iter().enumerate() {
        assert!(!sentences[i + 1..].contains(s), "sentence said twice: {s:?} in {answer:?}");
    }
    let items = org.history(&replica, "").await;
    let stored = contents(&items.last().unwrap()["sources"]);
    assert_eq!(stored.len(), distinct(&stored), "the answer's sources carry a passage once: {stored:?}");
    // The entries stay as the client made them.
    let (_, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base")).await;
    assert_eq!(v["total"], json!(3), "{v}");
}
