//! Replicas and the model catalog (spec §2.3, §2.4, §4.2; docs/decisions.md "Replicas",
//! "Model catalog").

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, query, replica_body, user, Org, Server};

async fn list(org: &Org, pairs: &[(&str, &str)]) -> (StatusCode, Value) {
    org.get(&format!("/v1/replicas?{}", query(pairs))).await
}

fn slugs(v: &Value) -> Vec<String> {
    v["items"].as_array().expect("items").iter().map(|r| r["slug"].as_str().expect("slug").to_string()).collect()
}

#[tokio::test]
async fn a_created_replica_reads_back_with_its_fields() {
    let server = Server::start();
    let org = server.new_org("Crud").await;
    let owner = org.owner_id().await;
    let mut body = replica_body("ada", &org.owner_email);
    body["tags"] = json!(["math", "history"]);
    body["purpose"] = json!("Teach the history of computing");
    let (s, v) = org.post("/v1/replicas", body).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["success"], json!(true));
    let uuid = v["uuid"].as_str().expect("uuid").to_string();
    assert!(uuid::Uuid::parse_str(&uuid).is_ok());

    let (s, r) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["success"], json!(true));
    assert_eq!(r["uuid"], json!(uuid));
    assert_eq!(r["name"], json!("Replica ada"));
    assert_eq!(r["slug"], json!("ada"));
    assert_eq!(r["shortDescription"], json!("A test replica"));
    assert_eq!(r["greeting"], json!("Hi, I am ada. Ask me anything."));
    assert_eq!(r["purpose"], json!("Teach the history of computing"));
    assert_eq!(r["tags"], json!(["math", "history"]));
    assert_eq!(r["llm"]["model"], json!("replicad-extractive"));
    assert_eq!(r["ownerID"], json!(owner), "an e-mail ownerID is stored as the user's id");
    assert_eq!(r["private"], json!(false));
    assert_eq!(r["type"], json!("character"), "the default type");
    assert!(r.get("distilledKnowledge").is_some(), "present on read: {r}");
}

#[tokio::test]
async fn a_replica_can_be_owned_by_a_user_given_by_id() {
    let server = Server::start();
    let org = server.new_org("Owners").await;
    let bea = org.create_user("Bea", "bea@example.org").await;
    let uuid = org.create_replica_from(replica_body("by-id", &bea)).await;
    let (_, r) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(r["ownerID"], json!(bea));
}

#[tokio::test]
async fn an_owner_who_is_not_a_user_of_the_organization_is_refused() {
    let server = Server::start();
    let org = server.new_org("Owners").await;
    let other = server.new_org("Others").await;
    for owner in ["stranger@example.org".to_string(), other.owner_id().await, other.owner_email.clone()] {
        let r = org.call(Method::POST, "/v1/replicas", Some(&replica_body("x", &owner)), &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    }
}

#[tokio::test]
async fn an_empty_llm_object_selects_the_default_model() {
    let server = Server::start();
    let org = server.new_org("Llm").await;
    let mut body = replica_body("plain-llm", &org.owner_email);
    body["llm"] = json!({});
    let uuid = org.create_replica_from(body).await;
    let (_, r) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(r["llm"]["model"], json!("replicad-extractive"));
}

#[tokio::test]
async fn a_model_outside_the_catalog_is_refused() {
    let server = Server::start();
    let org = server.new_org("Llm").await;
    let mut body = replica_body("bad-model", &org.owner_email);
    body["llm"] = json!({"model": "gpt-17-ultra"});
    let r = org.call(Method::POST, "/v1/replicas", Some(&body), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn a_catalog_model_can_be_chosen() {
    let server = Server::start();
    let org = server.new_org("Llm").await;
    let mut body = replica_body("qwen", &org.owner_email);
    body["llm"] = json!({"model": "qwen3-32b"});
    let uuid = org.create_replica_from(body).await;
    let (_, r) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(r["llm"]["model"], json!("qwen3-32b"));
}

#[tokio::test]
async fn required_fields_and_their_limits_are_enforced() {
    let server = Server::start();
    let org = server.new_org("Limits").await;
    let base = replica_body("limits", &org.owner_email);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("name", json!("n".repeat(51)), "VALIDATION_ERROR"),
        ("name", json!("   "), "VALIDATION_ERROR"),
        ("shortDescription", json!("s".repeat(51)), "VALIDATION_ERROR"),
        ("greeting", json!("g".repeat(601)), "VALIDATION_ERROR"),
        ("slug", json!("s".repeat(51)), "VALIDATION_ERROR"),
        ("slug", json!("Upper-Case"), "VALIDATION_ERROR"),
        ("slug", json!("with space"), "VALIDATION_ERROR"),
        ("slug", json!(""), "VALIDATION_ERROR"),
        ("type", json!("robot"), "VALIDATION_ERROR"),
        ("llm", json!("replicad-extractive"), "INVALID_BODY"),
    ];
    for (field, value, code) in cases {
        let mut body = base.clone();
        body[field] = value.clone();
        let r = org.call(Method::POST, "/v1/replicas", Some(&body), &[]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{field} = {value}: {}", r.text);
        assert_eq!(r.body["error_code"], json!(code), "{field} = {value}");
    }
    for missing in ["name", "shortDescription", "greeting", "ownerID", "slug", "llm"] {
        let mut body = base.clone();
        body.as_object_mut().unwrap().remove(missing);
        let r = org.call(Method::POST, "/v1/replicas", Some(&body), &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    }
    let (_, listed) = org.get("/v1/replicas").await;
    assert_eq!(listed["total"], json!(0), "no invalid body created anything");
    // The limits themselves are allowed.
    let mut at_limits = base.clone();
    at_limits["name"] = json!("n".repeat(50));
    at_limits["shortDescription"] = json!("s".repeat(50));
    at_limits["greeting"] = json!("g".repeat(600));
    at_limits["slug"] = json!(format!("{}-_9", "a".repeat(46)));
    let (s, v) = org.post("/v1/replicas", at_limits).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

#[tokio::test]
async fn a_slug_is_unique_within_an_organization_only() {
    let server = Server::start();
    let org = server.new_org("Slugs").await;
    org.create_replica("taken").await;
    let r = org.call(Method::POST, "/v1/replicas", Some(&replica_body("taken", &org.owner_email)), &[]).await;
    assert_error(&r, StatusCode::CONFLICT, Some("SLUG_TAKEN"));

    let other = server.new_org("Elsewhere").await;
    other.create_replica("taken").await;
}

#[tokio::test]
async fn a_replica_is_updated_with_put() {
    let server = Server::start();
    let org = server.new_org("Updates").await;
    let uuid = org.create_replica("before").await;
    let mut body = replica_body("after", &org.owner_email);
    body["name"] = json!("Renamed");
    body["tags"] = json!(["new"]);
    let (s, v) = org.put(&format!("/v1/replicas/{uuid}"), body).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["success"], json!(true));
    let (_, r) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(r["name"], json!("Renamed"));
    assert_eq!(r["slug"], json!("after"));
    assert_eq!(r["tags"], json!(["new"]));
    // The old slug is free again.
    org.create_replica("before").await;
}

#[tokio::test]
async fn an_update_to_another_replicas_slug_is_409() {
    let server = Server::start();
    let org = server.new_org("Updates").await;
    org.create_replica("first").await;
    let second = org.create_replica("second").await;
    let r = org
        .call(Method::PUT, &format!("/v1/replicas/{second}"), Some(&replica_body("first", &org.owner_email)), &[])
        .await;
    assert_error(&r, StatusCode::CONFLICT, Some("SLUG_TAKEN"));
    let (_, v) = org.get(&format!("/v1/replicas/{second}")).await;
    assert_eq!(v["slug"], json!("second"));
    // Re-sending a replica's own slug is no conflict.
    let (s, _) = org.put(&format!("/v1/replicas/{second}"), replica_body("second", &org.owner_email)).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn a_deleted_replica_is_gone() {
    let server = Server::start();
    let org = server.new_org("Deletes").await;
    let uuid = org.create_replica("doomed").await;
    let kb = org.add_text(&uuid, "Notes", "Some notes about nothing in particular.").await;
    let (s, v) = org.delete(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["success"], json!(true));
    let r = org.call(Method::GET, &format!("/v1/replicas/{uuid}"), None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let (s, _) = org.get(&format!("/v1/replicas/{uuid}/knowledge-base/{kb}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = org.delete(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a second delete finds nothing");
    assert_eq!(org.get("/v1/replicas").await.1["total"], json!(0));
    // Its slug can be used again.
    org.create_replica("doomed").await;
}

#[tokio::test]
async fn the_list_pages_with_page_and_page_size_and_their_aliases() {
    let server = Server::start();
    let org = server.new_org("Pages").await;
    for i in 0..5 {
        org.create_replica(&format!("r{i}")).await;
    }
    let (s, all) = list(&org, &[]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(all["success"], json!(true));
    assert_eq!(all["total"], json!(5));
    let every = slugs(&all);
    assert_eq!(every.len(), 5);

    for (p, ps) in [("page", "page_size"), ("pageIndex", "pageSize"), ("page_index", "page_size")] {
        let mut seen = Vec::new();
        for page in ["1", "2", "3"] {
            let (s, v) = list(&org, &[(p, page), (ps, "2")]).await;
            assert_eq!(s, StatusCode::OK, "{p}/{ps}: {v}");
            assert_eq!(v["total"], json!(5), "total counts every match, not the page");
            seen.extend(slugs(&v));
        }
        assert_eq!(seen, every, "{p}/{ps}: pages cover the list once, in order");
    }
    let (_, beyond) = list(&org, &[("page", "4"), ("page_size", "2")]).await;
    assert_eq!(slugs(&beyond), Vec::<String>::new());
    assert_eq!(beyond["total"], json!(5));
}

#[tokio::test]
async fn a_page_size_outside_1_to_100_is_400() {
    let server = Server::start();
    let org = server.new_org("Pages").await;
    for (name, value) in
        [("page_size", "0"), ("page_size", "101"), ("pageSize", "0"), ("page", "0"), ("page_size", "ten")]
    {
        let r = org.call(Method::GET, &format!("/v1/replicas?{name}={value}"), None, &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
    }
    let (s, _) = list(&org, &[("page_size", "100")]).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn the_list_filters_by_slug_tags_search_and_owner() {
    let server = Server::start();
    let org = server.new_org("Filters").await;
    let bea = org.create_user("Bea", "bea@example.org").await;
    let mut a = replica_body("alpha", &org.owner_email);
    a["tags"] = json!(["science", "kids"]);
    a["name"] = json!("Marie the Chemist");
    let mut b = replica_body("beta", &bea);
    b["tags"] = json!(["science"]);
    b["shortDescription"] = json!("Explains astronomy");
    let mut c = replica_body("gamma", &org.owner_email);
    c["tags"] = json!(["kids"]);
    for body in [a, b, c] {
        org.create_replica_from(body).await;
    }
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (vec![("slug", "beta")], vec!["beta"]),
        (vec![("slug", "nope")], vec![]),
        (vec![("tags", "science")], vec!["alpha", "beta"]),
        (vec![("tags", "science"), ("tags", "kids")], vec!["alpha"]),
        (vec![("tags", "science,kids")], vec!["alpha"]),
        (vec![("tags", "music")], vec![]),
        (vec![("search", "chemist")], vec!["alpha"]),
        (vec![("search", "ASTRONOMY")], vec!["beta"]),
        (vec![("ownerID", bea.as_str())], vec!["beta"]),
        (vec![("ownerID", "bea@example.org")], vec!["beta"]),
        (vec![("ownerID", org.owner_email.as_str())], vec!["alpha", "gamma"]),
        (vec![("ownerID", "nobody@example.org")], vec![]),
        (vec![("tags", "kids"), ("ownerID", org.owner_email.as_str()), ("search", "gamma")], vec!["gamma"]),
    ];
    for (q, expected) in cases {
        let (s, v) = list(&org, &q).await;
        assert_eq!(s, StatusCode::OK, "{q:?}: {v}");
        let mut got = slugs(&v);
        got.sort();
        assert_eq!(got, expected, "{q:?}");
        assert_eq!(v["total"], json!(expected.len()), "{q:?}");
    }
}

#[tokio::test]
async fn the_list_sorts_by_name_and_by_popularity() {
    let server = Server::start();
    let org = server.new_org("Sorts").await;
    let mut ids = Vec::new();
    for (slug, name) in [("s1", "charlie"), ("s2", "Alpha"), ("s3", "bravo")] {
        let mut body = replica_body(slug, &org.owner_email);
        body["name"] = json!(name);
        ids.push(org.create_replica_from(body).await);
    }
    let (_, by_name) = list(&org, &[("sort", "name")]).await;
    assert_eq!(slugs(&by_name), vec!["s2", "s3", "s1"]);

    // s3 gets three history items, s1 one, s2 none.
    for (id, n) in [(&ids[2], 3), (&ids[0], 1)] {
        for i in 0..n {
            let (s, v) =
                org.post(&format!("/v1/replicas/{id}/chat/history"), json!({"content": format!("m{i}")})).await;
            assert_eq!(s, StatusCode::OK, "{v}");
        }
    }
    let (_, popular) = list(&org, &[("sort", "popularity")]).await;
    assert_eq!(slugs(&popular), vec!["s3", "s1", "s2"]);

    let r = org.call(Method::GET, "/v1/replicas?sort=age", None, &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
}

#[tokio::test]
async fn the_model_catalog_has_19_models_and_one_deprecated() {
    let server = Server::start();
    let org = server.new_org("Models").await;
    let (s, v) = org.get("/v1/replicas/models").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["success"], json!(true));
    let models = v["models"].as_object().expect("models is an object keyed by model id");
    assert_eq!(models.len(), 19);
    let mut deprecated = Vec::new();
    for (id, m) in models {
        let fields = m.as_object().unwrap_or_else(|| panic!("{id}: {m}"));
        let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, vec!["deprecated", "description", "name"], "{id}");
        assert!(m["name"].as_str().is_some_and(|n| !n.is_empty()), "{id}");
        assert!(m["description"].as_str().is_some_and(|d| !d.is_empty()), "{id}");
        if m["deprecated"].as_bool().unwrap_or_else(|| panic!("{id}: deprecated is a boolean")) {
            deprecated.push(id.as_str());
        }
    }
    assert_eq!(deprecated, vec!["gpt-oss-120b"]);
    assert!(models.contains_key("replicad-extractive"));
}

#[tokio::test]
async fn every_catalog_model_is_accepted_for_a_replica() {
    let server = Server::start();
    let org = server.new_org("AllModels").await;
    let (_, v) = org.get("/v1/replicas/models").await;
    for (i, id) in v["models"].as_object().expect("models").keys().enumerate() {
        let mut body = replica_body(&format!("m{i}"), &org.owner_email);
        body["llm"] = json!({"model": id});
        let (s, r) = org.post("/v1/replicas", body).await;
        assert_eq!(s, StatusCode::CREATED, "{id}: {r}");
    }
}

#[tokio::test]
async fn the_replica_list_is_readable_as_a_user() {
    let server = Server::start();
    let org = server.new_org("AsUser").await;
    org.create_replica("visible").await;
    let (s, v) = org.get_as("/v1/replicas", &user("messengerA", "555")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(slugs(&v), vec!["visible"]);
}

#[tokio::test]
async fn the_replica_list_answers_type_as_the_hosted_document_requires() {
    let server = Server::start();
    let org = server.new_org("Strict list").await;
    let replica = org.create_replica("strict").await;
    // A client generated from the hosted document requires `type` beside `items` and `total`,
    // and each item's own `type`.
    let (s, v) = list(&org, &[("page", "1"), ("page_size", "24")]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["type"], json!("replicas"), "{v}");
    assert_eq!((v["total"].clone(), v["items"][0]["uuid"].clone()), (json!(1), json!(replica)));
    assert_eq!(v["items"][0]["type"], json!("character"));
    let (_, empty) = list(&org, &[("slug", "no-such-slug")]).await;
    assert_eq!((empty["type"].clone(), empty["items"].clone()), (json!("replicas"), json!([])));
}
