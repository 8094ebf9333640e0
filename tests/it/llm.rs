//! Replies from OpenAI-compatible upstreams, against the fake upstream of `common::fake_llm`:
//! routing and the prompt, retries, 502 `UPSTREAM_ERROR` without secrets, timeouts, streaming
//! (server-sent events), a client that leaves mid-stream, the messengerA and experimental
//! operations, and start-up validation of the configuration.

use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::fake_llm::{FakeLlm, Script, FAKE_USAGE, UPSTREAM_SECRET};
use crate::common::sse::{check_shape, parse};
use crate::common::{assert_error, replica_body, user, DataDir, Org, Server, BIN, PATIENCE, ZORBLAX, ZORBLAX_QUESTION};

/// The catalog model routed to the fake.
const MODEL: &str = "llama-3.1-8b-instruct";
/// The fake upstream's API key (given to replicad by environment).
const KEY: &str = "sk-test-key-0123456789abcdef";
pub const SYSTEM: &str = "You are the chief engineer of Quenth.";

/// A server routing [`MODEL`] to `fake` as upstream `fake` (model `tiny`), with `extra` flags.
pub fn serve(fake: &FakeLlm, extra: &[&str]) -> Server {
    let dir = DataDir::new();
    let mut cmd = Command::new(BIN);
    cmd.arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--data-dir").arg(dir.path());
    cmd.env("REPLICAD_LLM_FAKE_API_KEY", KEY);
    let upstream = format!("fake={}", fake.base_url);
    let route = format!("{MODEL}=fake/tiny");
    let mut args = vec!["--llm-upstream", &upstream, "--model-route", &route, "--llm-backoff-ms", "10"];
    args.extend_from_slice(extra);
    Server::spawn(cmd, dir, &args)
}

/// A replica on [`MODEL`] with a system message and the Zorblax entry; returns (uuid, entry id).
pub async fn reactor(org: &Org) -> (String, u64) {
    let mut body = replica_body("reactor", &org.owner_email);
    body["llm"] = json!({"model": MODEL, "systemMessage": SYSTEM});
    body["purpose"] = json!("Explain the city's machines");
    let replica = org.create_replica_from(body).await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    (replica, kb)
}

fn completions(replica: &str) -> String {
    format!("/v1/replicas/{replica}/chat/completions")
}

/// Asks with `Accept: text/event-stream`; returns the response (status, headers, whole text).
async fn ask_streaming(org: &Org, replica: &str, content: &str) -> crate::common::Resp {
    let body = json!({"content": content});
    org.call(Method::POST, &completions(replica), Some(&body), &[("accept", "text/event-stream")]).await
}

#[tokio::test]
async fn a_routed_model_answers_through_the_upstream_with_a_prompt_built_from_the_replica() {
    let fake = FakeLlm::replying(vec!["It runs ", "at 451 kelvin [1]."]).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Upstream").await;
    let (replica, kb) = reactor(&org).await;
    let log = server.dir().log_tail();
    assert!(log.contains("model served by an upstream") && log.contains(MODEL), "start-up names the route: {log}");
    assert!(log.contains("models served by the embedded generator"), "{log}");
    assert!(!log.contains(KEY), "the key is never logged");

    let r = org.call(Method::POST, &completions(&replica), Some(&json!({"content": ZORBLAX_QUESTION})), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body, json!({"success": true, "content": "It runs at 451 kelvin [1]."}));
    assert_eq!(r.header("x-replica-backend"), Some("fake"));

    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let sent = &seen[0].body;
    assert_eq!(sent["model"], json!("tiny"));
    let messages = sent["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], json!("system"));
    let system = messages[0]["content"].as_str().expect("system text");
    assert!(system.starts_with(SYSTEM), "{system}");
    assert!(system.contains("Replica reactor") && system.contains("Explain the city's machines"), "{system}");
    let sources = messages[1]["content"].as_str().expect("the sources message");
    assert!(sources.contains("id=\"1\">\nName: Zorblax reactor") && sources.contains("451 kelvin"), "{sources}");
    assert_eq!(messages.last().expect("question")["content"], json!(ZORBLAX_QUESTION));

    let items = org.history(&replica, "").await;
    assert_eq!(items.len(), 2);
    assert_eq!(items[1]["content"], json!("It runs at 451 kelvin [1]."));
    assert_eq!(items[1]["sources"][0]["id"], json!(kb), "the sources given to the model are kept");
    assert!(items[1].get("interrupted").is_none(), "{}", items[1]);

    // The next question carries the earlier turns of this user.
    org.ask(&replica, "And its fuel?").await;
    let second = &fake.seen()[1].body["messages"];
    let roles: Vec<&str> = second.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "user"], "the sources just before the question");
    assert_eq!(second[1]["content"], json!(ZORBLAX_QUESTION));
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_before_answering() {
    let script =
        vec![Script::Fail { status: 429, retry_after: Some(0) }, Script::Fail { status: 503, retry_after: None }];
    let fake = FakeLlm::start(script, Script::Reply(vec!["Fine."])).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Retry").await;
    let (replica, _) = reactor(&org).await;
    assert_eq!(org.ask(&replica, ZORBLAX_QUESTION).await, "Fine.");
    assert_eq!(fake.seen().len(), 3, "two failures, then the answer");
    assert_eq!(org.history(&replica, "").await.len(), 2, "one exchange stored");
}

#[tokio::test]
async fn an_upstream_that_keeps_failing_gives_502_without_its_secrets() {
    let fake = FakeLlm::start(vec![], Script::Fail { status: 500, retry_after: None }).await;
    let server = serve(&fake, &["--llm-max-retries", "1"]);
    let org = server.new_org("Fail").await;
    let (replica, _) = reactor(&org).await;
    let r = org.call(Method::POST, &completions(&replica), Some(&json!({"content": ZORBLAX_QUESTION})), &[]).await;
    assert_error(&r, StatusCode::BAD_GATEWAY, Some("UPSTREAM_ERROR"));
    assert!(!r.text.contains(KEY) && !r.text.contains(UPSTREAM_SECRET), "{}", r.text);
    assert_eq!(fake.seen().len(), 2, "the first attempt and one retry");
    assert!(org.history(&replica, "").await.is_empty(), "nothing is stored for a failed completion");
    // A refused request (4xx other than 429) is not retried.
    let fake = FakeLlm::start(vec![], Script::Fail { status: 401, retry_after: None }).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Refused").await;
    let (replica, _) = reactor(&org).await;
    let r = org.call(Method::POST, &completions(&replica), Some(&json!({"content": "hi"})), &[]).await;
    assert_error(&r, StatusCode::BAD_GATEWAY, Some("UPSTREAM_ERROR"));
    assert!(!r.text.contains(KEY) && !r.text.contains(UPSTREAM_SECRET), "{}", r.text);
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn an_unreachable_upstream_gives_502() {
    let fake = FakeLlm::replying(vec!["unused"]).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let upstream = format!("gone=http://{addr}/v1");
    let route = "qwen3-32b=gone/x".to_string();
    let server = serve(&fake, &["--llm-upstream", &upstream, "--model-route", &route, "--llm-max-retries", "1"]);
    let org = server.new_org("Gone").await;
    let mut body = replica_body("gone", &org.owner_email);
    body["llm"] = json!({"model": "qwen3-32b"});
    let replica = org.create_replica_from(body).await;
    let r = org.call(Method::POST, &completions(&replica), Some(&json!({"content": "hello"})), &[]).await;
    assert_error(&r, StatusCode::BAD_GATEWAY, Some("UPSTREAM_ERROR"));
    assert!(r.body["error"].as_str().unwrap().contains("gone"), "the message names the upstream: {}", r.text);
}

#[tokio::test]
async fn an_upstream_that_never_answers_times_out_with_502() {
    let fake = FakeLlm::start(vec![], Script::Hang).await;
    let server = serve(&fake, &["--llm-first-byte-timeout-ms", "300"]);
    let org = server.new_org("Hang").await;
    let (replica, _) = reactor(&org).await;
    let r = org.call(Method::POST, &completions(&replica), Some(&json!({"content": "hello"})), &[]).await;
    assert_error(&r, StatusCode::BAD_GATEWAY, Some("UPSTREAM_ERROR"));
}

#[tokio::test]
async fn a_streamed_reply_has_deltas_then_the_message_with_its_sources_then_done() {
    let fake = FakeLlm::replying(vec!["It ", "runs ", "at 451 kelvin."]).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Stream").await;
    let (replica, kb) = reactor(&org).await;
    let r = ask_streaming(&org, &replica, ZORBLAX_QUESTION).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.header("content-type").is_some_and(|c| c.starts_with("text/event-stream")));
    assert_eq!(r.header("x-replica-backend"), Some("fake"));
    let events = parse(&r.text);
    let (text, error, message) = check_shape(&events);
    assert!(error.is_none(), "{}", r.text);
    assert_eq!(events.iter().filter(|e| e.event.as_deref() == Some("delta")).count(), 3, "one event per delta");
    assert_eq!(text, "It runs at 451 kelvin.");
    assert_eq!(message["content"], json!(text));
    assert_eq!(message["interrupted"], json!(false));
    assert_eq!(message["sources"][0]["id"], json!(kb));
    assert_eq!(fake.seen()[0].body["stream"], json!(true));
    let items = org.history(&replica, "").await;
    assert_eq!(items[1]["id"], message["id"]);
    assert_eq!(items[1]["content"], json!(text));
}

#[tokio::test]
async fn a_stream_that_stalls_ends_with_an_error_and_keeps_what_was_said_as_interrupted() {
    let fake = FakeLlm::start(vec![], Script::Stall(vec!["Partial ", "answer"])).await;
    let server = serve(&fake, &["--llm-idle-timeout-ms", "300"]);
    let org = server.new_org("Stall").await;
    let (replica, _) = reactor(&org).await;
    let r = ask_streaming(&org, &replica, ZORBLAX_QUESTION).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let (text, error, message) = check_shape(&parse(&r.text));
    assert_eq!(text, "Partial answer");
    let error = error.expect("an error event");
    assert_eq!(error["error_code"], json!("UPSTREAM_ERROR"));
    assert_eq!(message["interrupted"], json!(true));
    let items = org.history(&replica, "").await;
    assert_eq!(items[1]["content"], json!("Partial answer"));
    assert_eq!(items[1]["interrupted"], json!(true));
}

#[tokio::test]
async fn a_client_that_leaves_mid_stream_cancels_the_upstream_and_the_cut_reply_is_kept() {
    let fake = FakeLlm::start(vec![], Script::Endless(Duration::from_millis(20))).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Leave").await;
    let (replica, _) = reactor(&org).await;
    let mut res = org
        .req(Method::POST, &completions(&replica))
        .header("accept", "text/event-stream")
        .json(&json!({"content": ZORBLAX_QUESTION}))
        .send()
        .await
        .expect("request");
    assert_eq!(res.status(), StatusCode::OK);
    let first = res.chunk().await.expect("read").expect("a first chunk");
    assert!(String::from_utf8_lossy(&first).contains("event: delta"), "{first:?}");
    drop(res); // the client goes away
    fake.wait_closed().await;

    let deadline = Instant::now() + PATIENCE;
    let reply = loop {
        let items = org.history(&replica, "").await;
        if let Some(reply) = items.iter().find(|i| i["role"] == "assistant") {
            break reply.clone();
        }
        assert!(Instant::now() < deadline, "the cut reply was not stored");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(reply["interrupted"], json!(true), "{reply}");
    assert!(reply["content"].as_str().unwrap().starts_with("word "), "{reply}");
}

#[tokio::test]
async fn the_embedded_generator_streams_its_answer_too() {
    let server = Server::start();
    let org = server.new_org("Embedded").await;
    let replica = org.create_replica("embedded").await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let r = ask_streaming(&org, &replica, ZORBLAX_QUESTION).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.header("x-replica-backend"), Some("embedded"));
    let events = parse(&r.text);
    let (text, error, message) = check_shape(&events);
    assert!(error.is_none());
    assert!(events.len() > 4, "the answer comes in several deltas: {events:?}");
    assert!(text.contains("451 kelvin"), "{text}");
    assert_eq!(message["content"], json!(text));
    assert_eq!(message["sources"][0]["id"], json!(kb));
}

/// A copy of the shipped catalog where `llava` routes [`MODEL`]'s upstream with `vision`.
fn vision_catalog(dir: &std::path::Path) -> std::path::PathBuf {
    let shipped: Value = serde_json::from_str(include_str!("../../data/models.json")).unwrap();
    let mut catalog = shipped.clone();
    catalog["qwen2.5-7b-instruct"]["route"] = json!("fake/llava");
    catalog["qwen2.5-7b-instruct"]["vision"] = json!(true);
    let path = dir.join("models.json");
    std::fs::write(&path, catalog.to_string()).unwrap();
    path
}

#[tokio::test]
async fn messenger_a_completions_pass_the_image_to_vision_models_and_store_on_the_channel() {
    let fake = FakeLlm::replying(vec!["A cat."]).await;
    let tmp = tempfile::tempdir().unwrap();
    let catalog = vision_catalog(tmp.path());
    let server = serve(&fake, &["--models", catalog.to_str().unwrap()]);
    let org = server.new_org("Vision").await;
    let mut body = replica_body("eyes", &org.owner_email);
    body["llm"] = json!({"model": "qwen2.5-7b-instruct"});
    let replica = org.create_replica_from(body).await;

    let path = format!("/v1/replicas/{replica}/chat/completions/messengerA");
    let data = json!({"chat_type": "private", "chat_id": 42, "message_id": 7});
    let ask = json!({"content": "What is in the picture?", "messengerA_data": data, "imageURL": "https://example.org/cat.png"});
    let (s, v) = org.post(&path, ask.clone()).await;
    assert_eq!((s, &v), (StatusCode::OK, &json!({"success": true, "content": "A cat."})));
    let sent = &fake.seen()[0].body;
    assert_eq!(sent["model"], json!("llava"));
    let question = &sent["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(question[0], json!({"type": "text", "text": "What is in the picture?"}));
    assert_eq!(question[1]["image_url"]["url"], json!("https://example.org/cat.png"));
    let items = org.history(&replica, "/messengerA").await;
    assert_eq!(items.len(), 2);

    // The same message again stores nothing new; bad channel data is refused.
    org.post(&path, ask).await;
    assert_eq!(org.history(&replica, "/messengerA").await.len(), 2);
    let r = org.call(Method::POST, &path, Some(&json!({"content": "hi"})), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    let bad = json!({"content": "hi", "messengerA_data": {"chat_type": "group", "chat_id": 1, "message_id": 2, "message_thread_id": 3}});
    let r = org.call(Method::POST, &path, Some(&bad), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn the_experimental_operation_is_openai_shaped_with_usage() {
    let fake = FakeLlm::replying(vec!["451 kelvin."]).await;
    let server = serve(&fake, &[]);
    let org = server.new_org("Experimental").await;
    let (replica, _) = reactor(&org).await;
    let path = format!("/v1/experimental/replicas/{replica}/chat/completions");
    let messages = json!([
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there."},
        {"role": "user", "content": ZORBLAX_QUESTION},
    ]);
    let as_user = user("email", &org.owner_email);

    let (s, v) = org.post_as(&path, json!({"messages": messages}), &as_user).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["object"], json!("chat.completion"));
    assert_eq!(v["model"], json!(MODEL));
    assert!(v["id"].as_str().is_some_and(|i| i.starts_with("chatcmpl-")) && v["created"].is_i64(), "{v}");
    assert_eq!(v["choices"][0]["message"], json!({"role": "assistant", "content": "451 kelvin."}));
    assert_eq!(v["choices"][0]["finish_reason"], json!("stop"));
    let (p, c) = FAKE_USAGE;
    assert_eq!(v["usage"], json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}));
    let sent = &fake.seen()[0].body["messages"];
    assert_eq!(sent.as_array().unwrap().len(), 5, "system, the client's two turns, the sources, the question");
    assert_eq!(sent[2], json!({"role": "assistant", "content": "Hi there."}));
    assert_eq!(org.history_as(&replica, "", &as_user).await.len(), 2, "store defaults to true");

    let body = json!({"messages": [{"role": "user", "content": "Again?"}], "store": false});
    let (s, _) = org.post_as(&path, body, &as_user).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(org.history_as(&replica, "", &as_user).await.len(), 2, "store: false keeps nothing");

    let body = json!({"messages": [{"role": "assistant", "content": "I speak last"}]});
    let r = org.call(Method::POST, &path, Some(&body), &as_user).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
}

#[test]
fn a_route_to_an_undeclared_upstream_stops_the_server_at_start() {
    let dir = DataDir::new();
    let out = dir.cli(&["serve", "--listen", "127.0.0.1:0", "--model-route", "qwen3-32b=nowhere/some-model"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nowhere") && err.contains("--llm-upstream"), "{err}");
    let out = dir.cli(&["serve", "--listen", "127.0.0.1:0", "--model-route", "no-such-model=x/y"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-model"));
}

#[tokio::test]
async fn the_upstream_key_may_come_from_a_file() {
    let fake = FakeLlm::replying(vec!["Yes."]).await;
    let tmp = tempfile::tempdir().unwrap();
    let key_file = tmp.path().join("key");
    std::fs::write(&key_file, "sk-from-file\n").unwrap();
    let dir = DataDir::new();
    let mut cmd = Command::new(BIN);
    cmd.arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--data-dir").arg(dir.path());
    cmd.env("REPLICAD_LLM_MY_HOST_API_KEY_FILE", &key_file);
    let upstream = format!("my-host={}", fake.base_url);
    let server =
        Server::spawn(cmd, dir, &["--llm-upstream", &upstream, "--model-route", &format!("{MODEL}=my-host/m")]);
    let org = server.new_org("KeyFile").await;
    let (replica, _) = reactor(&org).await;
    assert_eq!(org.ask(&replica, "Is the key read?").await, "Yes.");
    assert_eq!(fake.seen()[0].authorization.as_deref(), Some("Bearer sk-from-file"));
}
