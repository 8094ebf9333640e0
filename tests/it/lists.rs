//! Lists read from the indexes kept at write time (`store::replica_index`, `store::kb::order`),
//! so that a page reads its own records, not the whole organization's: every page, walked from
//! either end of the order, is the slice of the order the test computes itself from the items'
//! own fields, after creates, renames, status changes and deletes.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{replica_body, user, Org, Server};

/// The life-cycle rank of an entry status (the `status` order).
fn status_rank(s: &str) -> usize {
    let order = ["NEW", "FILE_UPLOADED", "RAW_TEXT", "PROCESSED_TEXT", "VECTOR_CREATED", "READY", "UNPROCESSABLE"];
    order.iter().position(|o| *o == s).unwrap_or_else(|| panic!("unknown status {s}"))
}

/// An entry's key in order `sort`, as the test computes it (ties fall to the id).
fn entry_key(e: &Value, sort: &str) -> (String, u64) {
    let field = match sort {
        "title" => e.get("title").or(e.get("generatedTitle")).and_then(Value::as_str).unwrap_or("").to_lowercase(),
        "status" => format!("{:02}", status_rank(e["status"].as_str().unwrap())),
        other => e[other].as_str().unwrap().to_string(),
    };
    (field, e["id"].as_u64().unwrap())
}

async fn items(org: &Org, path: &str, headers: &[(&str, &str)]) -> (Vec<Value>, u64) {
    let (s, v) = org.get_as(path, headers).await;
    assert_eq!(s, StatusCode::OK, "{path}: {v}");
    (v["items"].as_array().unwrap().clone(), v["total"].as_u64().unwrap())
}

type KeyFn<'a> = &'a dyn Fn(&Value, &str) -> (String, u64);

/// Asserts that the list at `base` (ending in `?` or `&`) in every order of `sorts`, both
/// directions, in pages of `size` from the first to one past the last, is the order computed
/// from its items by `key`.
async fn assert_pages_follow_the_order(org: &Org, base: &str, sorts: &[&str], size: usize, key: KeyFn<'_>) {
    for sort in sorts {
        for descending in [false, true] {
            let param = if descending { format!("-{sort}") } else { sort.to_string() };
            let (mut expected, total) = items(org, &format!("{base}sort={param}&pageSize=100"), &[]).await;
            assert_eq!(expected.len() as u64, total, "{base} {param}: one page holds all");
            expected.sort_by_key(|v| key(v, sort));
            if descending {
                expected.reverse();
            }
            let paged = pages(org, &format!("{base}sort={param}&"), size, total, &[]).await;
            let ids = |v: &[Value]| v.iter().map(|i| i["id"].clone()).collect::<Vec<_>>();
            assert_eq!(ids(&paged), ids(&expected), "{base} sort={param}: pages of {size} in order");
        }
    }
}

/// Every page of `size` of the list at `base` (ending in `?` or `&`), from the first to one
/// past the last, concatenated; each answer's `total` is `total`.
async fn pages(org: &Org, base: &str, size: usize, total: u64, headers: &[(&str, &str)]) -> Vec<Value> {
    let mut paged = Vec::new();
    for page in 1..=(total as usize / size + 2) {
        let path = format!("{base}pageSize={size}&page={page}");
        let (got, t) = items(org, &path, headers).await;
        assert_eq!(t, total, "{path}: total");
        assert!(got.len() <= size, "{path}");
        paged.extend(got);
    }
    paged
}

#[tokio::test]
async fn every_page_of_the_entry_lists_follows_the_order_from_either_end() {
    let server = Server::start();
    let org = server.new_org("Pages").await;
    let (a, b) = (org.create_replica("pages-a").await, org.create_replica("pages-b").await);
    let titles = ["beta", "Alpha", "alpha", "Gamma", "delta", "Beta", "epsilon", "zeta", "Eta", "theta", "iota"];
    let mut made = Vec::new();
    for (i, title) in titles.iter().enumerate() {
        let replica = if i % 3 == 0 { &b } else { &a };
        let id = org.add_text(replica, title, &format!("Entry {i} says {title} is item number {i}.")).await;
        made.push((replica.clone(), id));
    }
    for (replica, id) in &made {
        org.wait_settled(replica, *id).await;
    }
    // Renames move entries in the title and updatedAt orders; deletes take them out of all.
    for (replica, id) in made.iter().step_by(4) {
        let (s, v) =
            org.patch(&format!("/v1/replicas/{replica}/knowledge-base/{id}"), json!({"title": "Renamed"})).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    for (replica, id) in made.iter().skip(1).step_by(5) {
        let (s, v) = org.delete(&format!("/v1/replicas/{replica}/knowledge-base/{id}")).await;
        assert!(s.is_success(), "{v}");
    }
    // A file entry waiting for its bytes (NEW) and an unreachable website (UNPROCESSABLE).
    let (s, v) = org.post(&format!("/v1/replicas/{a}/knowledge-base"), json!({"filename": "later.pdf"})).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let (s, v) = org.post(&format!("/v1/replicas/{a}/knowledge-base"), json!({"url": "http://127.0.0.1:1/x"})).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    org.wait_settled(&a, v["results"][0]["knowledgeBaseID"].as_u64().unwrap()).await;
    for (replica, id) in made.iter().step_by(4) {
        org.wait_settled(replica, *id).await;
    }

    let sorts = ["createdAt", "updatedAt", "title", "status"];
    assert_pages_follow_the_order(&org, &format!("/v1/replicas/{a}/knowledge-base?"), &sorts, 3, &entry_key).await;
    assert_pages_follow_the_order(&org, "/v1/knowledge-base?", &sorts, 4, &entry_key).await;
    let (all, total) = items(&org, "/v1/knowledge-base?pageSize=100", &[]).await;
    assert_eq!((all.len(), total), (11, 11), "11 made, 2 deleted, 2 added");
    let (_, a_total) = items(&org, &format!("/v1/replicas/{a}/knowledge-base?pageSize=1"), &[]).await;
    assert_eq!(a_total as usize, all.iter().filter(|e| e["replicaUUID"] == json!(a)).count());
    // A filtered list walks the same order.
    let (ready, n) = items(&org, "/v1/knowledge-base?status=READY&sort=-title&pageSize=100", &[]).await;
    let mut expected: Vec<Value> = all.iter().filter(|e| e["status"] == "READY").cloned().collect();
    expected.sort_by_key(|e| std::cmp::Reverse(entry_key(e, "title")));
    assert_eq!((ready, n), (expected.clone(), expected.len() as u64));
}

#[tokio::test]
async fn every_page_of_the_replica_list_follows_its_order_and_hides_private_replicas() {
    let server = Server::start();
    let org = server.new_org("Replica pages").await;
    org.create_user("Bea", "bea@example.org").await;
    let names = ["charlie", "Alpha", "bravo", "alpha", "Echo", "delta", "foxtrot", "golf", "Hotel", "india"];
    let mut created = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut body = replica_body(&format!("page-{i}"), &org.owner_email);
        body["name"] = json!(name);
        body["private"] = json!(i % 4 == 1);
        created.push(org.create_replica_from(body).await);
    }
    // A rename moves a replica in the name order; a delete takes it out.
    let mut body = replica_body("page-0", &org.owner_email);
    body["name"] = json!("Zulu");
    let (s, v) = org.put(&format!("/v1/replicas/{}", created[0]), body).await;
    assert!(s.is_success(), "{v}");
    let (s, v) = org.delete(&format!("/v1/replicas/{}", created[2])).await;
    assert!(s.is_success(), "{v}");

    let private = names.iter().enumerate().filter(|(i, _)| i % 4 == 1).count() as u64;
    let bea = user("email", "bea@example.org");
    for (headers, visible) in [(&[][..], 9), (&bea[..], 9 - private)] {
        let (by_creation, total) = items(&org, "/v1/replicas?page_size=100", headers).await;
        assert_eq!(total, visible, "the owner's private replicas are hidden from Bea");
        // Ties by lower-cased name (alpha/Alpha) fall to creation order.
        let mut by_name = by_creation.clone();
        by_name.sort_by_key(|r| r["name"].as_str().unwrap().to_lowercase());
        for size in [2, 3] {
            let paged = pages(&org, "/v1/replicas?", size, total, headers).await;
            assert_eq!(names_of(&paged), names_of(&by_creation), "pages of {size} in creation order");
            let paged = pages(&org, "/v1/replicas?sort=name&", size, total, headers).await;
            assert_eq!(names_of(&paged), names_of(&by_name), "pages of {size} by name");
        }
    }
}

fn names_of(v: &[Value]) -> Vec<String> {
    v.iter().map(|r| r["name"].as_str().unwrap().to_string()).collect()
}
