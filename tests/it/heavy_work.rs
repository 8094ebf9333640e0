//! Nothing heavy before authentication (an anonymous client must not make the server work) or
//! inside the writer's transaction (every other write would wait behind it): a body is neither
//! read nor inflated for a caller without credentials, a gzip bomb is cut at the size limit, a
//! large text entry is prepared outside the single writer (small writes issued meanwhile
//! succeed), and a title changed while an entry is processed names its chunks.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, gzip, send, Org, Server};

/// A gzip stream that is not one: inflating it fails at once (400 if the server tried).
const CORRUPT_GZIP: &[u8] = b"\x1f\x8b\x08\x00 this is not deflate data at all";

/// 60 MiB of zeros, gzipped (about 60 KB).
fn bomb() -> Vec<u8> {
    gzip(&vec![0u8; 60 << 20])
}

#[tokio::test]
async fn an_anonymous_body_is_refused_before_it_is_read_or_inflated() {
    let server = Server::start();
    let org = server.new_org("Anon").await;
    let replica = org.create_replica("anon").await;
    let post = |path: String, body: Vec<u8>| {
        server
            .req(Method::POST, &path)
            .header("content-type", "application/json")
            .header("content-encoding", "gzip")
            .body(body)
    };
    // Inflated, these would answer 413 and 400: unread, they are refused for the credential.
    for path in ["/v1/replicas".to_string(), format!("/v1/replicas/{replica}/chat/history")] {
        for body in [bomb(), CORRUPT_GZIP.to_vec()] {
            let r = send(post(path.clone(), body)).await;
            assert_error(&r, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
        }
    }
    let wrong_key = post("/v1/replicas".into(), CORRUPT_GZIP.to_vec()).header("X-ORGANIZATION-SECRET", "rk_wrong");
    assert_error(&send(wrong_key).await, StatusCode::UNAUTHORIZED, Some("UNAUTHORIZED"));
    // The upload URL's token is its credential: an unknown one is 404 before the body is read.
    for body in [bomb(), CORRUPT_GZIP.to_vec()] {
        let put = server.req(Method::PUT, "/v1/knowledge-base/uploads/no-such-token");
        let r = send(put.header("content-encoding", "gzip").body(body)).await;
        assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    }
}

#[tokio::test]
async fn an_authenticated_gzip_bomb_is_413_and_the_upload_url_stays_usable() {
    let server = Server::start();
    let org = server.new_org("Bomb").await;
    let replica = org.create_replica("bomb").await;
    let r = send(
        org.req(Method::POST, "/v1/replicas")
            .header("content-type", "application/json")
            .header("content-encoding", "gzip")
            .body(bomb()),
    )
    .await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"));
    // An upload (at most 50 MiB by default) of a 60 MiB bomb: 413, and the URL was not used.
    let (_, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({"filename": "notes.txt"})).await;
    let url = v["results"][0]["signedURL"].as_str().expect("signedURL").to_string();
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().expect("id");
    let r = send(org.client.put(&url).header("content-encoding", "gzip").body(bomb())).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"));
    let notes = b"The quillmoth archive is kept in vault 7319.";
    let r = send(org.client.put(&url).header("content-encoding", "gzip").body(gzip(notes))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["size"], json!(notes.len()), "the inflated size is stored: {}", r.text);
    let entry = org.wait_ready(&replica, kb).await;
    let (_, full) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
    assert_eq!(full["rawText"], json!(String::from_utf8_lossy(notes)), "{entry}");
}

/// About `chars` characters of prose in sections, with `fact` in the middle.
fn big_text(chars: usize, fact: &str) -> String {
    let sentence = "Green tea is steamed or pan-fired soon after picking, which keeps it from oxidising. ";
    let mut text = String::with_capacity(chars + 200);
    let mut section = 0;
    while text.len() < chars {
        if text.len() >= chars / 2 && !text.contains(fact) {
            text.push_str(fact);
            text.push_str("\n\n");
        }
        section += 1;
        text.push_str(&format!("## Section {section}\n\n"));
        for _ in 0..20 {
            text.push_str(sentence);
        }
        text.push_str("\n\n");
    }
    text
}

#[tokio::test]
async fn a_big_text_entry_becomes_searchable_while_small_writes_go_on() {
    let server = Server::start();
    let org = server.new_org("Big").await;
    let replica = org.create_replica("big").await;
    let text = big_text(1_500_000, "The quillmoth archive is kept in vault 7319.");
    assert!(text.chars().count() >= 1_500_000);
    let kb_path = format!("/v1/replicas/{replica}/knowledge-base");
    let create = org.post(&kb_path, json!({"text": text, "title": "Tea compendium", "language": "en"}));
    let history = format!("/v1/replicas/{replica}/chat/history");
    let small_writes = async {
        for i in 0..40 {
            let (s, v) = org.post(&history, json!({"content": format!("small write {i}")})).await;
            assert_eq!(s, StatusCode::OK, "{v}");
        }
    };
    let ((s, v), ()) = tokio::join!(create, small_writes);
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().expect("id");
    let items = org.history(&replica, "?limit=100").await;
    assert_eq!(items.len(), 40, "every small write is stored");
    let entry = org.wait_ready(&replica, kb).await;
    assert!(entry["chunkCount"].as_u64().unwrap_or(0) > 100, "{entry}");
    let answer = org.ask(&replica, "Where is the quillmoth archive kept?").await;
    assert!(answer.contains("7319"), "the fact in the middle of the text is found: {answer}");
}

/// The titles of entry `kb`'s chunks.
async fn chunk_titles(org: &Org, replica: &str, kb: u64) -> Vec<String> {
    let (s, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let chunks = v["rawTextChunks"].as_array().cloned().unwrap_or_default();
    chunks.iter().map(|c: &Value| c["title"].as_str().unwrap_or("").to_string()).collect()
}

#[tokio::test]
async fn a_title_patched_while_an_entry_is_processed_names_its_chunks() {
    let server = Server::start();
    let org = server.new_org("Rename").await;
    let replica = org.create_replica("rename").await;
    let file = big_text(400_000, "The quillmoth archive is kept in vault 7319.");
    let kb = org.upload(&replica, "tea.txt", file.into_bytes()).await;
    let path = format!("/v1/replicas/{replica}/knowledge-base/{kb}");
    // Titles patched one after another while the upload is extracted, chunked and indexed.
    let mut last = String::new();
    for i in 0..6 {
        last = format!("Title {i}");
        let (s, v) = org.patch(&path, json!({ "title": last })).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    let entry = org.wait_ready(&replica, kb).await;
    assert_eq!(entry["title"], json!(last));
    let titles = chunk_titles(&org, &replica, kb).await;
    assert!(titles.len() > 10, "{titles:?}");
    let stale: Vec<&String> = titles.iter().filter(|t| !t.starts_with(&last)).collect();
    assert!(stale.is_empty(), "chunks named after an old title (final {last:?}): {:?}", &stale[..stale.len().min(5)]);
}
