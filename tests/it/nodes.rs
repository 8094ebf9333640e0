//! Several nodes over one PostgreSQL database: `replicad serve --store postgres://…` processes,
//! each on a data directory of its own, serving the same organizations. A client spreads its
//! requests over them, concurrently.
//!
//! What is checked: a write on one node is read on the other; knowledge added through one node
//! is answered, with its source, by the other as soon as it is `READY`; two nodes racing for one slug
//! create it once (the other answers 409); an organization's replica quota holds across nodes
//! (no count read stale by one of them); entries added on both nodes are all counted. These run
//! on the server of `.ci/install-postgres` whatever the run's engine (`REPLICAD_TEST_STORE`).

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::pg::fresh_database;
use crate::common::{replica_body, DataDir, Org, Server};

/// `n` nodes on one fresh database, and an organization made on the first.
async fn nodes(n: usize) -> (Vec<Server>, Vec<Org>) {
    let url = fresh_database();
    let servers: Vec<Server> = (0..n).map(|_| Server::start_in(DataDir::on_store(&url), &[])).collect();
    let org = servers[0].new_org("Nodes").await;
    let orgs = servers.iter().map(|s| org.at(s)).collect();
    (servers, orgs)
}

#[tokio::test]
async fn a_write_on_one_node_is_read_on_the_other() {
    let (_servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("shared").await;
    let (s, v) = orgs[1].get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["slug"], "shared");
    let (s, v) = orgs[1].post(&format!("/v1/replicas/{replica}/chat/history"), json!({"content": "from node 2"})).await;
    assert!(s.is_success(), "{v}");
    let (s, v) = orgs[0].get(&format!("/v1/replicas/{replica}/chat/history")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["items"][0]["content"], "from node 2", "{v}");
}

#[tokio::test]
async fn two_nodes_racing_for_one_slug_create_it_once() {
    let (_servers, orgs) = nodes(2).await;
    for round in 0..3 {
        let slug = format!("contested-{round}");
        let body = replica_body(&slug, &orgs[0].owner_email);
        let tries = (0..8).map(|i| orgs[i % 2].post("/v1/replicas", body.clone()));
        let answers = join_all(tries).await;
        let created = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
        let taken =
            answers.iter().filter(|(s, v)| *s == StatusCode::CONFLICT && v["error_code"] == "SLUG_TAKEN").count();
        assert_eq!((created, taken), (1, 7), "round {round}: {answers:?}");
    }
    let (_, list) = orgs[1].get("/v1/replicas?pageSize=100").await;
    assert_eq!(list["total"], 3, "{list}");
}

#[tokio::test]
async fn an_organizations_replica_quota_holds_across_nodes() {
    let (servers, orgs) = nodes(2).await;
    let set = servers[0].dir().cli(&["orgs", "set-quota", &orgs[0].id, "--replicas", "3"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let tries = (0..10).map(|i| orgs[i % 2].post("/v1/replicas", replica_body(&format!("r{i}"), &orgs[0].owner_email)));
    let answers = join_all(tries).await;
    let created = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let refused = answers
        .iter()
        .filter(|(s, v)| *s == StatusCode::TOO_MANY_REQUESTS && v["error_code"] == "REPLICA_QUOTA_EXCEEDED");
    assert_eq!((created, refused.count()), (3, 7), "{answers:?}");
}

#[tokio::test]
async fn entries_added_on_both_nodes_are_all_counted() {
    let (_servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("counted").await;
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let adds = (0..30)
        .map(|i| orgs[i % 2].post(&path, json!({"text": format!("Fact number {i}."), "title": format!("F{i}")})));
    for (s, v) in join_all(adds).await {
        assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    }
    for org in &orgs {
        let (s, usage) = org.get("/v1/users/me/usage").await;
        assert_eq!(s, StatusCode::OK, "{usage}");
        assert_eq!(usage["knowledgeBaseEntries"]["total"], 30, "{usage}");
    }
}

/// Facts nobody else states, their questions and what their answers hold.
const FACTS: [(&str, &str, &str, &str); 3] = [
    (
        "Quorvex reactor",
        "The Quorvex reactor operates at a steady temperature of 451 kelvin.",
        "At what temperature does the Quorvex reactor operate?",
        "451 kelvin",
    ),
    (
        "Plimbat bridge",
        "The Plimbat bridge crosses the river Ull and is 612 metres long.",
        "How long is the Plimbat bridge?",
        "612 metres",
    ),
    (
        "Drossel tower",
        "The Drossel tower was built in 1871 by the guild of glassmakers.",
        "Who built the Drossel tower?",
        "guild of glassmakers",
    ),
];

#[tokio::test]
async fn knowledge_added_through_one_node_is_answered_by_the_other_once_ready() {
    let (_servers, orgs) = nodes(2).await;
    let replica = orgs[0].create_replica("facts").await;
    let path = format!("/v1/replicas/{replica}/chat/completions");
    for (round, (title, text, question, holds)) in FACTS.into_iter().enumerate() {
        orgs[round % 2].add_ready_text(&replica, title, text).await;
        let (s, v) = orgs[(round + 1) % 2].post(&path, json!({"content": question})).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let answer = v["content"].as_str().unwrap_or("");
        assert!(answer.contains(holds) && answer.contains(title), "round {round}: {v}");
    }
}
