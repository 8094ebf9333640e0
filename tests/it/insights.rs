//! Conversation insights from the replica's upstream model (against the fake upstream of
//! `common::fake_llm`): a closed conversation is summarized by the model, an upstream failure
//! keeps it queued until a later success, an owner's recomputation replaces a `PATCH`, and a
//! question beyond the monthly conversation quota is refused before anything is generated.
//! Time moves with the admin request `advance-clock`, never by sleeping.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::chats::advance_clock;
use crate::common::fake_llm::{FakeLlm, Script};
use crate::common::{assert_error, user, Org, Server, PATIENCE, ZORBLAX_QUESTION};
use crate::llm::{reactor, serve};

/// The fake model's insights, wrapped as chatty models do (prose and a code fence around it).
const ANSWER: &str = "Here is the analysis:\n```json\n{\"summary\": \"The user asked how hot the Zorblax reactor \
    runs and learned it runs at 451 kelvin.\", \"commonQuestions\": [\"  How hot is the reactor?  \"], \
    \"commonTopics\": [\"reactor temperature\", \"Zorblax\"], \"mood\": \"curious\"}\n```";
const SUMMARY: &str = "The user asked how hot the Zorblax reactor runs and learned it runs at 451 kelvin.";
const REPLY: &str = "The Zorblax reactor runs at a steady temperature of 451 kelvin, which keeps the floating \
    city of Quenth warm through the long and dark winter nights.";

fn completions(replica: &str) -> String {
    format!("/v1/replicas/{replica}/chat/completions")
}

/// The only conversation of `replica`: (its path below its chat, its path of the deprecated
/// operations, its chat's uuid).
async fn the_conversation(org: &Org, replica: &str) -> (String, String, String) {
    let (_, v) = org.get(&format!("/v1/replicas/{replica}/conversations")).await;
    assert_eq!(v["total"], json!(1), "{v}");
    let c = &v["items"][0];
    let (id, chat) = (c["uuid"].as_str().unwrap(), c["chatUUID"].as_str().unwrap());
    (
        format!("/v1/replicas/{replica}/chats/{chat}/conversations/{id}"),
        format!("/v1/replicas/{replica}/conversations/{id}"),
        chat.to_string(),
    )
}

/// Polls conversation `path` until its `summary` is `want`, moving the server's clock two
/// minutes on each round (past any retry backoff); returns the conversation.
async fn wait_summary(server: &Server, org: &Org, path: &str, want: &str) -> Value {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let (_, c) = org.get(path).await;
        if c["summary"] == json!(want) {
            return c;
        }
        assert!(std::time::Instant::now() < deadline, "summary not {want:?} within {PATIENCE:?}: {c}");
        advance_clock(server, 2);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_upstream_routed_replica_gets_insights_from_its_model_after_a_failure_and_on_request() {
    let fail = Script::Fail { status: 503, retry_after: None };
    let script = vec![Script::Reply(vec![REPLY]), fail.clone(), fail.clone(), fail];
    let fake = FakeLlm::start(script, Script::Reply(vec![ANSWER])).await;
    let server = serve(&fake, &["--test-clock"]);
    let org = server.new_org("Insightful").await;
    let (replica, _) = reactor(&org).await;
    let (s, v) = org.post(&completions(&replica), json!({"content": ZORBLAX_QUESTION})).await;
    assert_eq!((s, v["content"].clone()), (StatusCode::OK, json!(REPLY)), "{v}");
    let (path, old_path, chat) = the_conversation(&org, &replica).await;

    advance_clock(&server, 31);
    let deadline = std::time::Instant::now() + PATIENCE;
    while fake.seen().len() < 4 {
        assert!(std::time::Instant::now() < deadline, "the job did not ask the upstream: {:?}", fake.seen().len());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_, c) = org.get(&path).await;
    assert!(c.get("summary").is_none() && c["commonTopics"] == json!([]), "the failure stored nothing: {c}");

    let done = wait_summary(&server, &org, &path, SUMMARY).await;
    assert_eq!(done["commonQuestions"], json!(["How hot is the reactor?"]), "{done}");
    assert_eq!(done["commonTopics"], json!(["reactor temperature", "Zorblax"]), "{done}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 5, "three failed attempts (one call with its two retries), then one success");
    let asked = &seen[4].body;
    assert_eq!((asked["model"].clone(), asked["stream"].clone()), (json!("tiny"), json!(false)), "{asked}");
    let system = asked["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("one JSON object") && system.contains("commonTopics"), "{system}");
    assert!(system.contains("Write every value in English"), "the conversation's language: {system}");
    let transcript = asked["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(transcript.contains(&format!("User: {ZORBLAX_QUESTION}")), "{transcript}");
    assert!(transcript.contains(REPLY), "the replica's replies are part of the transcript: {transcript}");

    let fix = json!({"summary": "Owner's words", "commonTopics": ["mine"]});
    let (s, _) = org.patch(&old_path, fix).await;
    assert_eq!(s, StatusCode::OK);
    advance_clock(&server, 60);
    let (_, kept) = org.get(&path).await;
    assert_eq!((kept["summary"].clone(), kept["commonTopics"].clone()), (json!("Owner's words"), json!(["mine"])));

    let recompute = format!("{path}/insights");
    let stranger = org.call(Method::POST, &recompute, None, &user("embed", "mallory")).await;
    assert_error(&stranger, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let other_chat = recompute.replace(&chat, "0190a1b2-0000-7000-8000-000000000000");
    let r = org.call(Method::POST, &other_chat, None, &[]).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let r = org.call(Method::POST, &recompute, None, &[]).await;
    assert_eq!((r.status, r.body.clone()), (StatusCode::ACCEPTED, json!({"success": true})), "{}", r.text);
    let again = wait_summary(&server, &org, &path, SUMMARY).await;
    assert_eq!(again["commonTopics"], json!(["reactor temperature", "Zorblax"]), "the PATCH was replaced: {again}");
    assert_eq!(fake.seen().len(), 6, "the recomputation asked the model once more");
}

#[tokio::test]
async fn a_question_beyond_the_monthly_quota_is_refused_before_the_model_is_asked() {
    let fake = FakeLlm::replying(vec![REPLY]).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Capped").await;
    let (replica, _) = reactor(&org).await;
    let set = server.dir().cli(&["orgs", "set-quota", &org.id, "--conversations-per-month", "1"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let ask = |who: &'static str, accept: &'static str| {
        let (org, path) = (&org, completions(&replica));
        async move {
            let body = json!({"content": ZORBLAX_QUESTION});
            let headers = [user("embed", who).as_slice(), &[("accept", accept)]].concat();
            org.call(Method::POST, &path, Some(&body), &headers).await
        }
    };
    let first = ask("ann", "application/json").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(fake.seen().len(), 1);

    for accept in ["application/json", "text/event-stream"] {
        let refused = ask("bob", accept).await;
        assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, Some("CONVERSATION_QUOTA_EXCEEDED"));
    }
    assert_eq!(fake.seen().len(), 1, "no reply was generated for a conversation that could not be stored");
    let (_, convs) = org.get(&format!("/v1/replicas/{replica}/conversations")).await;
    assert_eq!(convs["total"], json!(1), "{convs}");

    let continued = ask("ann", "application/json").await;
    assert_eq!(continued.status, StatusCode::OK, "a conversation under way goes on: {}", continued.text);
    assert_eq!(fake.seen().len(), 2);
}
