//! Concurrent clients: writes that race are decided once, and each request's writes stay whole
//! (the store applies concurrent writes in group commits).

use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::task::JoinSet;

use crate::common::{replica_body, send, Server, ZORBLAX};

const N: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_of_one_slug_make_exactly_one_replica() {
    let server = Server::start();
    let org = server.new_org("Race").await;
    let mut set = JoinSet::new();
    for i in 0..N {
        let org = org.clone();
        set.spawn(async move {
            let mut body = replica_body("contested", &org.owner_email);
            body["name"] = json!(format!("Contender {i}"));
            org.call(Method::POST, "/v1/replicas", Some(&body), &[]).await
        });
    }
    let mut created = 0;
    while let Some(r) = set.join_next().await {
        let r = r.expect("task");
        match r.status {
            StatusCode::CREATED => created += 1,
            StatusCode::CONFLICT => assert_eq!(r.body["error_code"], json!("SLUG_TAKEN")),
            other => panic!("unexpected {other}: {}", r.text),
        }
    }
    assert_eq!(created, 1);
    let (_, listed) = org.get("/v1/replicas").await;
    assert_eq!(listed["total"], json!(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_redeems_of_one_code_make_exactly_one_organization() {
    let server = Server::start();
    let code = server.invite();
    let mut set = JoinSet::new();
    for i in 0..N {
        let rb = server.req(Method::POST, &format!("/v1/api-keys/invites/{code}/redeem")).json(&json!({
            "organizationName": format!("Org {i}"), "name": "N", "email": format!("n{i}@example.org")
        }));
        set.spawn(send(rb));
    }
    let mut ok = 0;
    while let Some(r) = set.join_next().await {
        let r = r.expect("task");
        match r.status {
            StatusCode::OK => ok += 1,
            StatusCode::CONFLICT => assert_eq!(r.body["error_code"], json!("INVITE_ALREADY_REDEEMED")),
            other => panic!("unexpected {other}: {}", r.text),
        }
    }
    assert_eq!(ok, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_of_different_things_all_succeed() {
    let server = Server::start();
    let org = server.new_org("Parallel").await;
    let mut set = JoinSet::new();
    for i in 0..N {
        let org = org.clone();
        set.spawn(async move {
            let uuid = org.create_replica(&format!("p{i}")).await;
            org.add_text(&uuid, &format!("Entry {i}"), &format!("Replica {i} keeps fact number {i}.")).await;
            org.create_user(&format!("User {i}"), &format!("u{i}@example.org")).await;
            uuid
        });
    }
    let mut uuids = Vec::new();
    while let Some(r) = set.join_next().await {
        uuids.push(r.expect("task"));
    }
    let (_, listed) = org.get("/v1/replicas?page_size=100").await;
    assert_eq!(listed["total"], json!(N));
    for uuid in &uuids {
        let (_, kb) = org.get(&format!("/v1/replicas/{uuid}/knowledge-base")).await;
        assert_eq!(kb["total"], json!(1), "{uuid}");
        let id = kb["items"][0]["id"].as_u64().expect("id");
        org.wait_ready(uuid, id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_completions_keep_each_question_next_to_its_answer() {
    let server = Server::start();
    let org = server.new_org("Pairs").await;
    let replica = org.create_replica("pairs").await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let mut set = JoinSet::new();
    for i in 0..N {
        let (org, replica) = (org.clone(), replica.clone());
        set.spawn(async move {
            let q = if i % 2 == 0 {
                format!("Hello {i}")
            } else {
                format!("Question {i}: what fuels the Zorblax reactor?")
            };
            let (s, v) = org.chat(&replica, &q).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            (q, v["content"].as_str().expect("content").to_string())
        });
    }
    let mut exchanges = Vec::new();
    while let Some(r) = set.join_next().await {
        exchanges.push(r.expect("task"));
    }
    let items = org.history(&replica, "?limit=100").await;
    assert_eq!(items.len(), 2 * N);
    for pair in items.chunks(2) {
        assert_eq!(pair[0]["role"], json!("user"), "{pair:?}");
        assert_eq!(pair[1]["role"], json!("assistant"), "{pair:?}");
        let q = pair[0]["content"].as_str().unwrap();
        let (_, answer) = exchanges.iter().find(|(eq, _)| eq == q).expect("a question that was asked");
        assert_eq!(pair[1]["content"].as_str(), Some(answer.as_str()), "the answer follows its own question");
    }
    let mut ids: Vec<u64> = items.iter().map(|i| i["id"].as_u64().unwrap()).collect();
    let sorted = {
        let mut s = ids.clone();
        s.sort();
        s.dedup();
        s
    };
    assert_eq!(ids.len(), sorted.len(), "ids are unique");
    ids.dedup();
    assert_eq!(ids, sorted, "items are listed in id order");
}
