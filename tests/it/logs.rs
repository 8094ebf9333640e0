//! `--log-format json`: one JSON object per line, a line per request with its route template,
//! status, latency and organization, and never a credential or message content.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{send, user, Server};

#[tokio::test]
async fn json_logs_have_a_line_per_request_and_no_secrets_or_contents() {
    let server = Server::start_with(&["--log-format", "json"]);
    let code = server.invite();
    let body = json!({"organizationName": "Logs", "name": "Lou", "email": "lou@example.org"});
    let redeem = send(server.req(Method::POST, &format!("/v1/api-keys/invites/{code}/redeem")).json(&body)).await;
    assert_eq!(redeem.status, StatusCode::OK, "{}", redeem.text);
    let org = crate::common::Org {
        key: redeem.body["apiKey"].as_str().unwrap().to_string(),
        id: redeem.body["organizationID"].as_str().unwrap().to_string(),
        owner_email: "lou@example.org".into(),
        base: server.base_url.clone(),
        client: server.client.clone(),
    };
    let created = org
        .call(Method::POST, "/v1/replicas", Some(&crate::common::replica_body("logged", &org.owner_email)), &[])
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let replica = created.body["uuid"].as_str().unwrap().to_string();
    let knowledge = "The quartz lighthouse of Vellmar burns whale oil.";
    org.add_ready_text(&replica, "Lighthouse", knowledge).await;
    let question = "What does the quartz lighthouse of Vellmar burn?";
    let path = format!("/v1/replicas/{replica}/chat/completions");
    let asked =
        org.call(Method::POST, &path, Some(&json!({"content": question})), &user("messengerA", "tg-4242")).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.text);
    let (s, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({"filename": "a.txt"})).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let signed = v["results"][0]["signedURL"].as_str().unwrap().to_string();
    let token = signed.rsplit('/').next().unwrap().to_string();
    let put = org.client.put(&signed).body("uploaded words").send().await.expect("PUT");
    assert_eq!(put.status(), StatusCode::OK);

    let log = server.dir().log();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {l}")))
        .collect();
    for secret in [org.key.as_str(), code.as_str(), token.as_str(), knowledge, question, "uploaded words"] {
        assert!(!log.contains(secret), "the log holds {secret:?}:\n{log}");
    }
    let requests: Vec<&Value> = lines.iter().filter(|l| l["message"] == "request").collect();
    let line = requests
        .iter()
        .find(|l| l["request_id"] == json!(created.header("x-request-id").unwrap()))
        .expect("a line for the replica create");
    assert_eq!(line["route"], "/v1/replicas");
    assert_eq!(line["method"], "POST");
    assert_eq!(line["status"], 201);
    assert_eq!(line["org"], json!(org.id));
    assert_eq!(line["level"], "INFO");
    assert!(line["micros"].as_u64().is_some(), "{line}");
    chrono::DateTime::parse_from_rfc3339(line["timestamp"].as_str().expect("timestamp")).expect("RFC 3339");
    let chat = requests.iter().find(|l| l["request_id"] == json!(asked.header("x-request-id").unwrap())).unwrap();
    assert_eq!(chat["route"], "/v1/replicas/{replicaUUID}/chat/completions");
    assert_eq!(chat["org"], json!(org.id));
    let redeemed = requests.iter().find(|l| l["request_id"] == json!(redeem.header("x-request-id").unwrap())).unwrap();
    assert_eq!(redeemed["path"], "/v1/api-keys/invites/{code}/redeem", "the code is logged as its template");
    assert!(redeemed.get("org").is_none(), "a public operation has no organization: {redeemed}");
}
