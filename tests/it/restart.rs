//! Durability across restarts, crashes and index rebuilds: the store is the source of truth
//! and the search index follows it.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{Org, Server, ZORBLAX, ZORBLAX_QUESTION};

/// What a test writes before a restart, and how to check it afterwards.
struct Written {
    replica: String,
    kb: u64,
    user: String,
}

async fn write_some(org: &Org) -> Written {
    let replica = org.create_replica("durable").await;
    let kb = org.add_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let user = org.create_user("Bea", "bea@example.org").await;
    let (s, v) = org.post(&format!("/v1/replicas/{replica}/chat/history"), json!({"content": "a saved note"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    Written { replica, kb, user }
}

async fn assert_present(org: &Org, w: &Written) {
    let (s, r) = org.get(&format!("/v1/replicas/{}", w.replica)).await;
    assert_eq!(s, StatusCode::OK, "replica after restart: {r}");
    assert_eq!(r["slug"], json!("durable"));
    let entry = org.wait_ready(&w.replica, w.kb).await;
    assert_eq!(entry["rawText"], json!(ZORBLAX));
    let (s, u) = org.get(&format!("/v1/users/{}", w.user)).await;
    assert_eq!(s, StatusCode::OK, "user after restart: {u}");
    let items = org.history(&w.replica, "").await;
    assert_eq!(items.first().map(|i| i["content"].clone()), Some(json!("a saved note")));
}

/// The answer to the Zorblax question and the sources stored with it.
async fn ask_with_sources(org: &Org, replica: &str) -> (String, Vec<Value>) {
    let answer = org.ask(replica, ZORBLAX_QUESTION).await;
    let items = org.history(replica, "").await;
    let last = items.last().expect("the answer is stored");
    assert_eq!(last["content"], json!(answer));
    (answer, last["sources"].as_array().expect("sources").clone())
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly() {
    let server = Server::start();
    let org = server.new_org("Stop").await;
    org.create_replica("x").await;
    let (status, rest, dir) = server.stop_with_output();
    assert!(status.success(), "exit status after SIGTERM: {status:?}");
    assert_eq!(rest, "", "the start-up line is the only line on stdout");
    assert!(!dir.log_tail().contains("panicked"), "{}", dir.log_tail());
}

#[tokio::test]
async fn everything_survives_a_graceful_restart() {
    let server = Server::start();
    let org = server.new_org("Restart").await;
    let w = write_some(&org).await;
    org.wait_ready(&w.replica, w.kb).await;
    let (before, before_sources) = ask_with_sources(&org, &w.replica).await;
    assert!(before.contains("451 kelvin"), "{before}");

    let (status, dir) = server.stop();
    assert!(status.success(), "{status:?}");
    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);

    assert_present(&org, &w).await;
    let (after, after_sources) = ask_with_sources(&org, &w.replica).await;
    assert_eq!(after, before);
    assert_eq!(after_sources.len(), before_sources.len());
    assert_eq!(after_sources[0]["id"], json!(w.kb));
    // The organization key still works.
    let (s, _) = org.get("/v1/replicas").await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    let server = Server::start();
    let org = server.new_org("Crash").await;
    let w = write_some(&org).await;
    // No waiting for the index: kill right after the writes were acknowledged.
    let dir = server.kill9();
    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);

    assert_present(&org, &w).await;
    let (answer, sources) = ask_with_sources(&org, &w.replica).await;
    assert!(answer.contains("451 kelvin"), "the entry was indexed after the restart: {answer}");
    assert_eq!(sources[0]["id"], json!(w.kb));
}

#[tokio::test]
async fn a_deletion_acknowledged_before_kill_9_stays_deleted() {
    let server = Server::start();
    let org = server.new_org("Crash").await;
    let replica = org.create_replica("forget").await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let (s, _) = org.delete(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
    assert_eq!(s, StatusCode::OK);
    let dir = server.kill9();
    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);
    let (s, _) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let answer = org.ask(&replica, ZORBLAX_QUESTION).await;
    assert!(answer.starts_with("I don't know"), "{answer}");
}

#[tokio::test]
async fn an_offline_reindex_gives_the_same_answers_and_sources() {
    let server = Server::start();
    let org = server.new_org("Reindex").await;
    let replica = org.create_replica("reindexed").await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    org.add_ready_text(&replica, "Gardening", "Tomatoes need six hours of sun a day.").await;
    let (before, before_sources) = ask_with_sources(&org, &replica).await;
    assert!(before.contains("451 kelvin"), "{before}");

    let (status, dir) = server.stop();
    assert!(status.success());
    let out = dir.cli(&["reindex"]);
    assert!(out.status.success(), "reindex: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reindexed 2 chunks"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);
    let (after, after_sources) = ask_with_sources(&org, &replica).await;
    assert_eq!(after, before);
    assert_eq!(after_sources.len(), before_sources.len());
    for (a, b) in after_sources.iter().zip(&before_sources) {
        assert_eq!(a["id"], json!(kb));
        assert_eq!((&a["id"], &a["name"], &a["content"]), (&b["id"], &b["name"], &b["content"]));
        let (sa, sb) = (a["score"].as_f64().unwrap(), b["score"].as_f64().unwrap());
        assert!((sa - sb).abs() <= 1e-4 * sb.abs().max(1.0), "score {sa} vs {sb}");
    }
}

#[tokio::test]
async fn a_reindex_while_the_server_runs_goes_through_it_and_search_still_works() {
    let server = Server::start();
    let org = server.new_org("Online").await;
    let replica = org.create_replica("online").await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let (before, _) = ask_with_sources(&org, &replica).await;

    let out = server.dir().cli(&["reindex"]);
    assert!(out.status.success(), "reindex: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reindexed 1 chunks"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (after, sources) = ask_with_sources(&org, &replica).await;
    assert_eq!(after, before);
    assert!(!sources.is_empty());
    // The index keeps following writes after the swap.
    let kb = org.add_ready_text(&replica, "Quenth", "The floating city of Quenth has nine bridges of glass.").await;
    let answer = org.ask(&replica, "How many bridges of glass does Quenth have?").await;
    assert!(answer.contains("nine bridges"), "{answer}");
    let (last, _) = ask_with_sources(&org, &replica).await;
    assert!(last.contains("451 kelvin"));
    let items = org.history(&replica, "").await;
    assert!(items.iter().any(|i| i["sources"].as_array().is_some_and(|s| s.iter().any(|s| s["id"] == json!(kb)))));
}

#[tokio::test]
async fn a_lost_search_index_is_rebuilt_at_start() {
    let server = Server::start();
    let org = server.new_org("Lost").await;
    let replica = org.create_replica("lost").await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let (status, dir) = server.stop();
    assert!(status.success());
    std::fs::remove_dir_all(dir.path().join("search")).expect("remove the index");

    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);
    // The rebuild runs in the background after start-up: poll until the answer is back.
    let deadline = std::time::Instant::now() + crate::common::PATIENCE;
    loop {
        let (s, v) = org
            .post(
                &format!("/v1/replicas/{replica}/chat/completions"),
                json!({"content": ZORBLAX_QUESTION, "skip_chat_history": true}),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        if v["content"].as_str().is_some_and(|c| c.contains("451 kelvin")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the index was not rebuilt: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
