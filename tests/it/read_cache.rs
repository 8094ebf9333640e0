//! The hot reads' answers, read far more often than they change, kept until the next commit
//! (`http::read_cache`): a kept answer is sent again (counted in `/metrics`), never after a
//! write it does not show, and never to another organization or user.

use reqwest::StatusCode;
use serde_json::json;

use crate::common::{replica_body, user, Server};

const TOKEN: &str = "metrics-token-0123456789";

/// `replicad_read_cache_total{outcome}` now (the sample's other label is the node's name).
async fn count(server: &Server, outcome: &str) -> f64 {
    let text = server.client.get(server.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap();
    let text = text.text().await.unwrap();
    let label = format!("outcome=\"{outcome}\"");
    let sample = text.lines().find(|l| l.starts_with("replicad_read_cache_total{") && l.contains(&label));
    sample.and_then(|l| l.rsplit(' ').next()).map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn kept_answers_show_every_acknowledged_write_and_only_to_their_caller() {
    let server = Server::start_with(&["--metrics-token", TOKEN]);
    let org = server.new_org("Cache").await;
    let other = server.new_org("Other").await;
    let replica = org.create_replica("cached").await;
    let path = format!("/v1/replicas/{replica}");

    // The replica: the second read is the first one's kept answer.
    let hits = count(&server, "hit").await;
    assert_eq!(org.get(&path).await, org.get(&path).await);
    assert!(count(&server, "hit").await > hits, "the second read was not answered from the cache");
    assert_eq!(other.get(&path).await.0, StatusCode::NOT_FOUND, "another organization's read");
    let mut renamed = replica_body("cached", &org.owner_email);
    renamed["name"] = json!("Renamed");
    assert_eq!(org.put(&path, renamed).await.0, StatusCode::OK);
    assert_eq!(org.get(&path).await.1["name"], "Renamed");

    // The list, of this organization only, then with a replica created since.
    let names =
        |v: serde_json::Value| v["items"].as_array().unwrap().iter().map(|r| r["slug"].clone()).collect::<Vec<_>>();
    assert_eq!(names(org.get("/v1/replicas").await.1), [json!("cached")]);
    assert_eq!(names(org.get("/v1/replicas").await.1), [json!("cached")]);
    assert!(names(other.get("/v1/replicas").await.1).is_empty());
    org.create_replica("second").await;
    assert_eq!(names(org.get("/v1/replicas").await.1).len(), 2);

    // A history page: each user's own, and the item saved since.
    let history = format!("{path}/chat/history");
    let (ann, bob) = (user("messengerA", "1001"), user("messengerA", "1002"));
    let contents =
        |v: serde_json::Value| v["items"].as_array().unwrap().iter().map(|i| i["content"].clone()).collect::<Vec<_>>();
    assert_eq!(org.post_as(&history, json!({"content": "from ann"}), &ann).await.0, StatusCode::OK);
    assert_eq!(contents(org.get_as(&history, &ann).await.1), [json!("from ann")]);
    assert_eq!(contents(org.get_as(&history, &ann).await.1), [json!("from ann")]);
    assert!(contents(org.get_as(&history, &bob).await.1).is_empty(), "another user's page");
    assert_eq!(org.post_as(&history, json!({"content": "again"}), &ann).await.0, StatusCode::OK);
    assert_eq!(contents(org.get_as(&history, &ann).await.1), [json!("from ann"), json!("again")]);

    // A knowledge-base entry, under both of its paths, after a new title. Each pair of reads
    // comes after the entry settled: a commit of its background indexing between the two
    // reads would rightly leave the second one uncached.
    let kb = org.add_ready_text(&replica, "First title", "Zorblax lives in the north.").await;
    for entry in [format!("{path}/knowledge-base/{kb}"), format!("/v1/knowledge-base/{kb}")] {
        let before = org.get(&entry).await.1["title"].clone();
        assert_eq!(org.get(&entry).await.1["title"], before);
        let title = format!("Title for {entry}");
        assert_eq!(org.patch(&entry, json!({"title": title})).await.0, StatusCode::OK);
        assert_eq!(org.get(&entry).await.1["title"], json!(title));
        org.wait_ready(&replica, kb).await;
    }
    assert!(count(&server, "hit").await >= hits + 5.0, "reads were answered from the cache");
}

/// `--read-cache-bytes 0` keeps nothing: every read is answered by its handler.
#[tokio::test]
async fn a_zero_size_keeps_nothing() {
    let server = Server::start_with(&["--metrics-token", TOKEN, "--read-cache-bytes", "0"]);
    let org = server.new_org("Uncached").await;
    let replica = org.create_replica("plain").await;
    let path = format!("/v1/replicas/{replica}");
    assert_eq!(org.get(&path).await, org.get(&path).await);
    assert_eq!(count(&server, "hit").await + count(&server, "miss").await, 0.0);
}
