//! A whole session of the hosted service's own tools, played as they do it: only the
//! organization key plus `X-USER-ID` after the user exists, an operator catalog (`--models`)
//! carrying the model ids the tools send, training through a file's signed URL, polling until
//! searchable, asking, listing the training data organization-wide, cleaning it up, deleting the
//! user.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, send, Org, Server, PATIENCE, ZORBLAX, ZORBLAX_QUESTION};

/// The hosted service's id for the model the tools ask for; the operator's catalog carries it.
const HOSTED_MODEL: &str = "hosted-model-07";

/// The shipped catalog with one id renamed to [`HOSTED_MODEL`] (served by the embedded
/// generator: no route), written into `dir`.
fn operator_catalog(dir: &std::path::Path) -> std::path::PathBuf {
    let shipped: Value = serde_json::from_str(include_str!("../../data/models.json")).unwrap();
    let mut catalog = serde_json::Map::new();
    for (id, entry) in shipped.as_object().unwrap() {
        let id = if id == "llama-3.3-70b-instruct" { HOSTED_MODEL } else { id.as_str() };
        catalog.insert(id.to_string(), entry.clone());
    }
    let path = dir.join("hosted-models.json");
    std::fs::write(&path, Value::Object(catalog).to_string()).unwrap();
    path
}

/// A request as the tools send it: the organization key and the user's id alone.
async fn call(org: &Org, me: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    org.call(method, path, body.as_ref(), &[("X-USER-ID", me)]).await.parts()
}

#[tokio::test]
async fn a_tool_session_runs_unchanged_with_the_key_and_x_user_id() {
    let tmp = tempfile::tempdir().unwrap();
    let catalog = operator_catalog(tmp.path());
    let server = Server::start_with(&["--models", catalog.to_str().unwrap()]);
    let org = server.new_org("Migrated").await;

    let (s, v) = org.post("/v1/users", json!({"id": "tool-user-1", "email": "ops@example.org"})).await;
    assert_eq!((s, v["id"].clone()), (StatusCode::OK, json!("tool-user-1")), "{v}");
    let me = "tool-user-1";

    let mut body = crate::common::replica_body("support", me);
    body["llm"] = json!({"model": HOSTED_MODEL});
    let (s, v) = call(&org, me, Method::POST, "/v1/replicas", Some(body.clone())).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let replica = v["uuid"].as_str().unwrap().to_string();
    body["slug"] = json!("other");
    body["llm"] = json!({"model": "model-the-server-does-not-know"});
    let r = org.call(Method::POST, "/v1/replicas", Some(&body), &[("X-USER-ID", me)]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    assert!(r.text.contains("model catalog") && r.text.contains("--models"), "{}", r.text);

    // Train: a file through its signed URL, then poll until searchable and ask at once.
    let kb_path = format!("/v1/replicas/{replica}/knowledge-base");
    let (s, v) = call(&org, me, Method::POST, &kb_path, Some(json!({"filename": "zorblax.txt"}))).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    let signed = v["results"][0]["signedURL"].as_str().unwrap().to_string();
    let up = send(org.client.put(signed).body(ZORBLAX)).await;
    assert_eq!(up.status, StatusCode::OK, "{}", up.text);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, v) = call(&org, me, Method::GET, &format!("/v1/knowledge-base/{kb}"), None).await;
        if matches!(v["status"].as_str(), Some("VECTOR_CREATED" | "READY")) {
            break;
        }
        assert!(Instant::now() < deadline, "never searchable: {v}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ask = json!({"content": ZORBLAX_QUESTION});
    let (s, v) = call(&org, me, Method::POST, &format!("/v1/replicas/{replica}/chat/completions"), Some(ask)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["content"].as_str().unwrap().contains("451 kelvin"), "{v}");

    // List the training data organization-wide, clean it up, delete the user.
    let (s, v) = call(&org, me, Method::GET, "/v1/knowledge-base?status=READY&status=VECTOR_CREATED", None).await;
    assert_eq!((s, v["total"].clone()), (StatusCode::OK, json!(1)), "{v}");
    assert_eq!(v["items"][0]["replicaUUID"], json!(replica));
    let (s, _) = call(&org, me, Method::DELETE, &format!("/v1/knowledge-base/{kb}"), None).await;
    assert_eq!(s, StatusCode::OK);
    let (_, v) = call(&org, me, Method::GET, "/v1/knowledge-base", None).await;
    assert_eq!(v["total"], json!(0), "{v}");
    let r = org.call(Method::DELETE, "/v1/users/me", None, &[("X-USER-ID", me)]).await;
    assert_eq!((r.status, r.text.as_str()), (StatusCode::NO_CONTENT, ""));
    let r = org.call(Method::GET, "/v1/users/me", None, &[("X-USER-ID", me)]).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, Some("USER_NOT_FOUND"));
}
