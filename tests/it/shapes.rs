//! The shapes a typed client generated from the hosted service's document reads, as existing
//! clients parse answers with such generated models (docs/decisions.md "Common", "Users",
//! "Replicas", "Knowledge base"): required fields present and typed, no `null` where none is
//! allowed. (`.ci/typed-client` parses one answer of every operation with a client generated
//! from our own document.)

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{user, Server};

/// The paths of every `null` in `v`, except at keys in `allowed`.
fn nulls(v: &Value, at: &str, allowed: &[&str], out: &mut Vec<String>) {
    match v {
        Value::Null => out.push(at.to_string()),
        Value::Array(items) => items.iter().enumerate().for_each(|(i, x)| nulls(x, &format!("{at}/{i}"), allowed, out)),
        Value::Object(m) => m
            .iter()
            .filter(|(k, _)| !allowed.contains(&k.as_str()))
            .for_each(|(k, x)| nulls(x, &format!("{at}/{k}"), allowed, out)),
        _ => {}
    }
}

fn assert_no_null(v: &Value, allowed: &[&str]) {
    let mut found = Vec::new();
    nulls(v, "", allowed, &mut found);
    assert!(found.is_empty(), "null at {found:?} in {v}");
}

fn assert_flat_user(v: &Value, id: &str, name: &str) {
    assert_eq!(v["success"], json!(true), "{v}");
    assert!(v.get("user").is_none(), "not wrapped: {v}");
    assert_eq!(v["id"], json!(id), "{v}");
    assert_eq!(v["name"], json!(name), "{v}");
    assert!(v["linkedAccounts"].is_array(), "{v}");
    assert_no_null(v, &[]);
}

#[tokio::test]
async fn users_answer_flat_on_create_read_and_update() {
    let server = Server::start();
    let org = server.new_org("Flat").await;
    let (_, created) = org.post("/v1/users", json!({"name": "Ann", "email": "ann@example.org"})).await;
    let id = created["id"].as_str().expect("id at the top level").to_string();
    assert_flat_user(&created, &id, "Ann");
    assert_eq!(created["email"], json!("ann@example.org"));
    assert_eq!(created["linkedAccounts"], json!([]));

    let (s, read) = org.get(&format!("/v1/users/{id}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_flat_user(&read, &id, "Ann");
    let (_, me) = org.get_as("/v1/users/me", &user("id", &id)).await;
    assert_flat_user(&me, &id, "Ann");
    let (s, put) = org.put_as("/v1/users/me", json!({"name": "Annie"}), &user("id", &id)).await;
    assert_eq!(s, StatusCode::OK, "{put}");
    assert_flat_user(&put, &id, "Annie");
    assert_eq!(put["email"], json!("ann@example.org"), "a field not given keeps its value: {put}");

    let (_, bot) = org.get_as("/v1/users/me", &user("messengerB", "42")).await;
    let bot_id = bot["id"].as_str().expect("id").to_string();
    assert_flat_user(&bot, &bot_id, bot["name"].as_str().expect("name"));
    assert_eq!(bot["linkedAccounts"], json!([{"accountID": "42", "accountType": "messengerB"}]));
    assert!(bot.get("email").is_none(), "a user without an e-mail omits it: {bot}");
}

const LEGACY_BLOCK: &[(&str, &str)] = &[
    ("created_at", "string"),
    ("owner_uuid", "string"),
    ("short_description", "string"),
    ("introduction", "string"),
    ("voice_enabled", "boolean"),
    ("video_enabled", "boolean"),
    ("chat_history_count", "number"),
];

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn assert_replica_shape(r: &Value) {
    for (field, ty) in LEGACY_BLOCK {
        assert_eq!(type_of(&r[*field]), *ty, "{field} in {r}");
    }
    assert_eq!(r["type"], json!("character"), "{r}");
    assert_eq!(r["introduction"], r["greeting"]);
    assert_eq!(r["owner_uuid"], r["ownerID"]);
    assert_eq!(r["created_at"], r["createdAt"]);
    assert_eq!(r["messengerA_integration"], json!(null), "not connected: null: {r}");
    assert_eq!(r["messengerB_integration"], json!(null), "{r}");
    assert!(r["distilledKnowledge"].is_string(), "{r}");
    assert_eq!(r["profile_image"], json!(null), "required and nullable in list items: {r}");
    assert_eq!(r["system_message"], json!(""), "required, a string: {r}");
    assert_no_null(r, &["messengerA_integration", "messengerB_integration", "profile_image"]);
}

#[tokio::test]
async fn replicas_read_and_list_carry_type_the_snake_case_block_and_no_null() {
    let server = Server::start();
    let org = server.new_org("Shapes").await;
    let uuid = org.create_replica("plain").await;
    let (_, read) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_replica_shape(&read);
    for absent in ["purpose", "profileImage", "voicePreviewText", "voiceVendorID"] {
        assert!(read.get(absent).is_none(), "{absent} is omitted when absent: {read}");
    }
    assert!(read["llm"].get("systemMessage").is_none() && read["llm"].get("embeddingModel").is_none(), "{read}");
    assert_eq!(read["distilledKnowledge"], json!(""), "an empty knowledge base: an empty string");

    let (_, list) = org.get("/v1/replicas").await;
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    assert_replica_shape(&items[0]);
    assert_eq!(items[0]["uuid"], json!(uuid));
}

#[tokio::test]
async fn distilled_knowledge_is_a_text_naming_what_the_knowledge_base_covers() {
    let server = Server::start();
    let org = server.new_org("Distilled").await;
    let uuid = org.create_replica("kb").await;
    org.add_text(&uuid, "Opening hours", "The shop opens at nine and closes at six.").await;
    org.add_text(&uuid, "Returns", "Returns are accepted within thirty days.").await;
    org.chat(&uuid, "When do you open?").await;

    let (_, read) = org.get(&format!("/v1/replicas/{uuid}")).await;
    assert_eq!(read["distilledKnowledge"], json!("2 knowledge-base entries: Opening hours; Returns."), "{read}");
    assert_eq!(read["knowledgeBase"], json!({"entries": 2, "titles": ["Opening hours", "Returns"]}));
    let (_, list) = org.get("/v1/replicas").await;
    assert_eq!(list["items"][0]["distilledKnowledge"], read["distilledKnowledge"], "{list}");
    assert_eq!(list["items"][0]["chat_history_count"], json!(2), "the question and the answer: {list}");
}

#[tokio::test]
async fn knowledge_base_entries_omit_absent_values_and_carry_an_iso_language_and_an_integer_id() {
    let server = Server::start();
    let org = server.new_org("Entries").await;
    let uuid = org.create_replica("entries").await;
    let path = format!("/v1/replicas/{uuid}/knowledge-base");
    let (_, v) = org.post(&path, json!({"text": "Le magasin ouvre à neuf heures.", "language": "fr"})).await;
    let id = v["results"][0]["knowledgeBaseID"].as_u64().expect("an integer id");
    let entry = org.wait_settled(&uuid, id).await;

    let (_, list) = org.get(&path).await;
    let item = &list["items"][0];
    assert!(item["id"].is_u64(), "{item}");
    assert_eq!(item["language"], json!("fr"));
    for absent in ["file", "website", "error", "url", "title"] {
        assert!(item.get(absent).is_none(), "{absent} omitted: {item}");
    }
    assert_no_null(&list, &[]);
    assert_no_null(&entry, &[]);
    let detected = entry["detectedLanguage"].as_str().unwrap_or("fr");
    assert_eq!(detected.len(), 2, "ISO 639-1: {entry}");
}

#[tokio::test]
async fn file_types_name_a_media_type_of_the_documented_set() {
    let server = Server::start();
    let org = server.new_org("Types").await;
    let (_, v) = org.get("/v1/knowledge-base/file-types").await;
    let groups = v["mediaGroups"].as_array().expect("groups");
    let allowed = ["document", "data", "image", "audio", "video", "ebook"];
    for g in groups {
        assert!(allowed.contains(&g["mediaType"].as_str().unwrap_or("")), "{g}");
    }
    let of = |ext: &str| {
        groups
            .iter()
            .find(|g| {
                g["fileTypes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["extensions"].as_array().unwrap().contains(&json!(ext)))
            })
            .map(|g| g["mediaType"].clone())
    };
    assert_eq!(of("pdf"), Some(json!("document")));
    assert_eq!(of("epub"), Some(json!("ebook")));
    assert_eq!(of("csv"), Some(json!("data")));
}

#[tokio::test]
async fn older_api_versions_keep_their_catalog_shape_and_read_the_new_shapes() {
    let server = Server::start();
    let org = server.new_org("Versions").await;
    let old = [("X-API-Version", "2024-03-01")];
    let r = org.call(Method::GET, "/v1/replicas/models", None, &old).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.body["models"].is_array(), "2024-03-01 keeps the catalog as an array: {}", r.text);
    let uuid = org.create_replica("old").await;
    let r = org.call(Method::GET, &format!("/v1/replicas/{uuid}"), None, &old).await;
    assert_replica_shape(&r.body);
    let bot = [old[0], ("X-USER-ID-TYPE", "messengerA"), ("X-USER-ID", "7")];
    let r = org.call(Method::GET, "/v1/users/me", None, &bot).await;
    assert_flat_user(&r.body, r.body["id"].as_str().expect("id"), r.body["name"].as_str().expect("name"));
}
