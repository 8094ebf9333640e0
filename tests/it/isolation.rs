//! Organizations see nothing of each other; private replicas are visible only to their owner
//! and whitelisted users (docs/decisions.md "Auth").

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{replica_body, user, Org, Resp, Server, ZORBLAX, ZORBLAX_QUESTION};

/// A 404 that leaks nothing of the resource.
fn assert_hidden(r: &Resp, what: &str) {
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{what}: {}", r.text);
    assert_eq!(r.body["success"], json!(false), "{what}");
    let mut keys: Vec<&str> = r.body.as_object().expect("error body").keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, vec!["error", "error_code", "fingerprint", "request_id", "success"], "{what}: only an error body");
    for secret in ["Zorblax", "kelvin", "secret", "Ann"] {
        assert!(!r.text.contains(secret), "{what} leaks {secret:?}: {}", r.text);
    }
}

#[tokio::test]
async fn another_organization_cannot_reach_a_replica_or_anything_under_it() {
    let server = Server::start();
    let a = server.new_org("Alpha").await;
    let b = server.new_org("Beta").await;
    let replica = a.create_replica("secret").await;
    let kb = a.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    a.ask(&replica, ZORBLAX_QUESTION).await;
    let a_user = a.create_user("Ann", "ann@alpha.example").await;

    let base = format!("/v1/replicas/{replica}");
    let msg_a = json!({"content": "x", "messengerA_data": {"chat_type": "private", "chat_id": 1, "message_id": 1}});
    let calls: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, base.clone(), None),
        (Method::PUT, base.clone(), Some(replica_body("stolen", &b.owner_email))),
        (Method::DELETE, base.clone(), None),
        (Method::GET, format!("{base}/knowledge-base"), None),
        (Method::POST, format!("{base}/knowledge-base"), Some(json!({"text": "injected"}))),
        (Method::GET, format!("{base}/knowledge-base/{kb}"), None),
        (Method::PATCH, format!("{base}/knowledge-base/{kb}"), Some(json!({"rawText": "overwritten"}))),
        (Method::DELETE, format!("{base}/knowledge-base/{kb}"), None),
        (Method::POST, format!("{base}/chat/completions"), Some(json!({"content": ZORBLAX_QUESTION}))),
        (Method::GET, format!("{base}/chat/history"), None),
        (Method::GET, format!("{base}/chat/history/web"), None),
        (Method::GET, format!("{base}/chat/history/messengerA"), None),
        (Method::POST, format!("{base}/chat/history"), Some(json!({"content": "x"}))),
        (Method::POST, format!("{base}/chat/history/messengerA"), Some(msg_a)),
        (Method::GET, format!("/v1/users/{a_user}"), None),
    ];
    for (method, path, body) in calls {
        let r = b.call(method.clone(), &path, body.as_ref(), &[]).await;
        assert_hidden(&r, &format!("{method} {path}"));
    }
    // B's list does not show it, even filtered by its slug.
    let (_, listed) = b.get("/v1/replicas?slug=secret").await;
    assert_eq!(listed["total"], json!(0));
    // B cannot act as A's users either.
    let r = b.call(Method::GET, "/v1/replicas", None, &user("email", &a.owner_email)).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);

    // Nothing of A changed.
    let (s, r) = a.get(&base).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["slug"], json!("secret"));
    let entry = a.wait_ready(&replica, kb).await;
    assert_eq!(entry["rawText"], json!(ZORBLAX));
    assert_eq!(a.get(&format!("{base}/knowledge-base")).await.1["total"], json!(1));
    assert_eq!(a.history(&replica, "").await.len(), 2);
}

#[tokio::test]
async fn another_organizations_replica_is_not_searched() {
    let server = Server::start();
    let a = server.new_org("Alpha").await;
    let b = server.new_org("Beta").await;
    let ra = a.create_replica("same-slug").await;
    let rb = b.create_replica("same-slug").await;
    a.add_ready_text(&ra, "Zorblax reactor", ZORBLAX).await;
    let answer = b.ask(&rb, ZORBLAX_QUESTION).await;
    assert!(answer.starts_with("I don't know"), "{answer}");
}

struct Private {
    org: Org,
    replica: String,
}

/// An organization with a private replica owned by Olga, whitelisting Wendy; Nina is a third
/// user of the organization.
async fn private_setup(server: &Server) -> Private {
    let org = server.new_org("Private").await;
    org.create_user("Olga", "olga@example.org").await;
    org.create_user("Wendy", "wendy@example.org").await;
    org.create_user("Nina", "nina@example.org").await;
    let mut body = replica_body("hidden", "olga@example.org");
    body["private"] = json!(true);
    body["whitelistEmails"] = json!(["Wendy@example.org"]);
    let replica = org.create_replica_from(body).await;
    org.create_replica("public").await;
    Private { org, replica }
}

async fn slugs_seen_by(org: &Org, email: &str) -> Vec<String> {
    let (s, v) = org.get_as("/v1/replicas", &user("email", email)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let mut slugs: Vec<String> =
        v["items"].as_array().unwrap().iter().map(|r| r["slug"].as_str().unwrap().to_string()).collect();
    slugs.sort();
    slugs
}

#[tokio::test]
async fn a_private_replica_does_not_exist_for_a_user_not_on_its_whitelist() {
    let server = Server::start();
    let Private { org, replica } = private_setup(&server).await;
    let nina = user("email", "nina@example.org");
    assert_eq!(slugs_seen_by(&org, "nina@example.org").await, vec!["public"]);
    let base = format!("/v1/replicas/{replica}");
    for (method, path, body) in [
        (Method::GET, format!("{base}/knowledge-base"), None),
        (Method::POST, format!("{base}/knowledge-base"), Some(json!({"text": "x"}))),
        (Method::POST, format!("{base}/chat/completions"), Some(json!({"content": "Hello"}))),
        (Method::GET, format!("{base}/chat/history"), None),
        (Method::POST, format!("{base}/chat/history"), Some(json!({"content": "x"}))),
    ] {
        let r = org.call(method.clone(), &path, body.as_ref(), &nina).await;
        assert_hidden(&r, &format!("{method} {path}"));
    }
    // A linked-account user (a bot's end user) does not see it either.
    let r = org.call(Method::GET, &format!("{base}/chat/history"), None, &user("messengerA", "7")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_private_replica_is_visible_to_its_owner_and_whitelisted_users() {
    let server = Server::start();
    let Private { org, replica } = private_setup(&server).await;
    for email in ["olga@example.org", "wendy@example.org"] {
        assert_eq!(slugs_seen_by(&org, email).await, vec!["hidden", "public"], "{email}");
        let who = user("email", email);
        let (s, v) =
            org.post_as(&format!("/v1/replicas/{replica}/chat/completions"), json!({"content": "Hello"}), &who).await;
        assert_eq!(s, StatusCode::OK, "{email}: {v}");
        let items = org.history_as(&replica, "", &who).await;
        assert_eq!(items.len(), 2, "{email}");
        assert!(items.iter().all(|i| i["is_private"] == json!(true)), "{items:?}");
    }
    // The organization key alone sees every replica.
    let (_, all) = org.get("/v1/replicas").await;
    assert_eq!(all["total"], json!(2));
    let (s, r) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["private"], json!(true));
    assert_eq!(r["whitelistEmails"], json!(["wendy@example.org"]));
}

#[tokio::test]
async fn making_a_replica_public_shows_it_to_everyone() {
    let server = Server::start();
    let Private { org, replica } = private_setup(&server).await;
    assert_eq!(slugs_seen_by(&org, "nina@example.org").await, vec!["public"]);
    let (s, v) = org.put(&format!("/v1/replicas/{replica}"), replica_body("hidden", "olga@example.org")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(slugs_seen_by(&org, "nina@example.org").await, vec!["hidden", "public"]);
}

/// The `sources[].score` of `question` asked of `replica` through `…/chat/completions/test`,
/// with each source's entry id (nothing is stored in the history).
async fn scores(org: &Org, replica: &str, question: &str) -> Vec<(u64, f64)> {
    let (s, v) = org.post(&format!("/v1/replicas/{replica}/chat/completions/test"), json!({"content": question})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let sources = v["sources"].as_array().expect("sources");
    sources.iter().map(|s| (s["id"].as_u64().expect("id"), s["score"].as_f64().expect("score"))).collect()
}

/// BM25 statistics are the asking replica's own, so another organization's documents — here
/// 40 entries full of the question's terms, in the same index — change neither the scores nor
/// the ranking of a replica's sources.
#[tokio::test]
async fn another_organizations_entries_do_not_change_a_replicas_scores() {
    let server = Server::start();
    let a = server.new_org("Alpha").await;
    let b = server.new_org("Beta").await;
    let ra = a.create_replica("reactors").await;
    let rb = b.create_replica("reactors").await;
    a.add_ready_text(&ra, "Zorblax reactor", ZORBLAX).await;
    let other = "The Vantor reactor of Quenth was shut down long ago; its temperature was never measured.";
    a.add_ready_text(&ra, "Vantor reactor", other).await;
    a.add_ready_text(&ra, "Moonwater", "Moonwater is harvested every spring from the lakes of Quenth.").await;
    let before = scores(&a, &ra, ZORBLAX_QUESTION).await;
    assert!(before.len() >= 2, "the question finds several of A's entries: {before:?}");

    let texts: Vec<String> = (0..40)
        .map(|i| {
            format!("Zorblax reactor log {i}: the reactor's temperature was checked; the Zorblax reactor operates.")
        })
        .collect();
    let titles: Vec<String> = (0..40).map(|i| format!("Log {i}")).collect();
    let adds = titles.iter().zip(&texts).map(|(title, t)| b.add_text(&rb, title, t));
    let ids = futures_util::future::join_all(adds).await;
    for kb in ids {
        b.wait_ready(&rb, kb).await;
    }
    let top = replicad::service::chat::EMBEDDED_TOP_K; // the test replicas use the embedded generator
    assert_eq!(scores(&b, &rb, ZORBLAX_QUESTION).await.len(), top, "B's entries are searchable");

    let after = scores(&a, &ra, ZORBLAX_QUESTION).await;
    assert_eq!(after, before, "A's scores and ranking do not depend on B's entries");
}

/// Checks that `later` follows `earlier` as a sparse id does: increasing, in 2^40..2^53, and
/// further apart than the `others` ids another organization took in between (plus one).
fn assert_sparse_after(earlier: u64, later: u64, others: u64, what: &str) {
    for id in [earlier, later] {
        assert!((1 << 40..1 << 53).contains(&id), "{what} {id} is time-ordered and exact in JavaScript");
    }
    assert!(later > earlier, "{what}: {later} follows {earlier}");
    assert!(
        later - earlier > others + 1,
        "{what}: {earlier} → {later} counts the other organization's {others} writes"
    );
}

#[tokio::test]
async fn ids_do_not_reveal_how_much_another_organization_wrote() {
    let server = Server::start();
    let a = server.new_org("Alpha").await;
    let b = server.new_org("Beta").await;
    let ra = a.create_replica("alpha").await;
    let rb = b.create_replica("beta").await;
    let save = |org: &Org, replica: &str| {
        let (org, path) = (org.clone(), format!("/v1/replicas/{replica}/chat/history"));
        async move {
            let (s, v) = org.post(&path, json!({"content": "a note"})).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            v["id"].as_u64().expect("id")
        }
    };
    const OTHERS: u64 = 5;

    let first_entry = a.add_text(&ra, "first", "One.").await;
    let first_message = save(&a, &ra).await;
    for i in 0..OTHERS {
        b.add_text(&rb, &format!("other {i}"), "Other.").await;
        save(&b, &rb).await;
    }
    let second_entry = a.add_text(&ra, "second", "Two.").await;
    let second_message = save(&a, &ra).await;

    assert_sparse_after(first_entry, second_entry, OTHERS, "knowledgeBaseID");
    assert_sparse_after(first_message, second_message, OTHERS, "history id");
    // The entries list in the order of their ids, and each id reads back.
    let (_, list) = a.get(&format!("/v1/replicas/{ra}/knowledge-base")).await;
    let mut ids: Vec<u64> = list["items"].as_array().unwrap().iter().map(|e| e["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![first_entry, second_entry], "{list}");
    let (s, entry) = a.get(&format!("/v1/replicas/{ra}/knowledge-base/{second_entry}")).await;
    assert_eq!((s, entry["id"].as_u64()), (StatusCode::OK, Some(second_entry)), "{entry}");
}
