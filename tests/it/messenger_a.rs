//! The messengerA bot (`POST`/`DELETE …/integrations/messengerA`) against the Bot API stand-in
//! of `common::bot_api`: private chats, group rules, typing, long replies, 429, a restart in
//! the middle of a batch, a revoked token, the integration state and tokens at rest.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::bot_api::BotApi;
use crate::common::channels::{self, reactor};
use crate::common::fake_llm::FakeLlm;
use crate::common::{assert_error, replica_body, send, user, DataDir, Org, Server, ZORBLAX_QUESTION};

const TOKEN: &str = "4242:AAE-docs_bot_secret_token_0123456789";
const BOT_ID: i64 = 4242;
const ADA: i64 = 77;

fn private(chat: i64, message_id: i64, text: &str) -> Value {
    json!({
        "message_id": message_id, "date": 1_700_000_000,
        "chat": {"id": chat, "type": "private", "first_name": "Ada", "last_name": "L"},
        "from": {"id": ADA, "is_bot": false, "first_name": "Ada", "username": "ada"},
        "text": text,
    })
}

fn group(message_id: i64, text: &str, reply_to_bot: bool) -> Value {
    let mut m = json!({
        "message_id": message_id, "date": 1_700_000_000,
        "chat": {"id": -100_555, "type": "supergroup", "title": "Quenth engineers"},
        "from": {"id": ADA, "is_bot": false, "first_name": "Ada", "username": "ada"},
        "text": text,
    });
    if reply_to_bot {
        m["reply_to_message"] = json!({"message_id": 9, "from": {"id": BOT_ID, "is_bot": true, "first_name": "Docs"}});
    }
    m
}

fn start(api: &BotApi, extra: &[&str]) -> Server {
    start_in(api, DataDir::new(), extra)
}

fn start_in(api: &BotApi, dir: DataDir, extra: &[&str]) -> Server {
    channels::start_with(api.flags(), dir, extra)
}

async fn connect(org: &Org, replica: &str, token: &str) -> (StatusCode, Value) {
    let path = format!("/v1/replicas/{replica}/integrations/messengerA");
    org.post(&path, json!({"messengerA_token": token, "mention": "@docs_bot"})).await
}

async fn integration(org: &Org, replica: &str) -> Value {
    channels::integration(org, replica, "messengerA_integration").await
}

async fn wait_integration(org: &Org, replica: &str, check: impl Fn(&Value) -> bool) -> Value {
    channels::wait_integration(org, replica, "messengerA_integration", check).await
}

fn sent_to(api: &BotApi, chat: i64) -> Vec<Value> {
    api.sent().into_iter().filter(|m| m["chat_id"] == json!(chat)).collect()
}

#[tokio::test]
async fn a_private_chat_is_answered_with_typing_and_stored_as_messenger_a_history() {
    let api = BotApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    let server = start(&api, &[]);
    let org = server.new_org("Bots").await;
    let replica = reactor(&org, None).await;

    let (s, v) = connect(&org, &replica, TOKEN).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["id"], json!(BOT_ID.to_string()));
    let state = wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await;
    assert_eq!(state["token"], Value::Null, "{state}");
    assert_eq!(state["service_name"], "docs_bot");
    assert!(state.get("last_error").is_none(), "{state}");

    api.push_message(private(ADA, 1, ZORBLAX_QUESTION));
    api.wait_for("the reply", |a| !sent_to(a, ADA).is_empty()).await;
    let reply = &sent_to(&api, ADA)[0];
    assert!(reply["text"].as_str().unwrap().contains("451 kelvin"), "{reply}");
    assert!(reply.get("reply_parameters").is_none(), "private replies do not quote: {reply}");
    let typing = api.actions();
    assert!(typing.iter().any(|a| a["chat_id"] == json!(ADA) && a["action"] == "typing"), "{typing:?}");

    let items = org.history_as(&replica, "/messengerA", &user("messengerA", &ADA.to_string())).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!((items[0]["role"].as_str(), items[1]["role"].as_str()), (Some("user"), Some("assistant")));
    assert_eq!(items[0]["content"], ZORBLAX_QUESTION);
    assert_eq!(items[1]["content"], reply["text"]);
    assert!(items.iter().all(|i| i["source"] == "messengerA"));
    let data = &items[0]["messengerA_data"];
    assert_eq!(data["chat_type"], "private");
    assert_eq!(data["chat_id"], json!(ADA));
    assert_eq!(data["message_id"], json!(1));
    assert_eq!(data["user_id"], json!(ADA));
    assert_eq!(data["username"], "ada");
    assert_eq!(data["chat_name"], "Ada L");
    assert!(!items[1]["sources"].as_array().unwrap().is_empty(), "{items:?}");
}

#[tokio::test]
async fn in_a_group_only_mentions_and_replies_to_the_bot_are_answered_and_long_replies_are_split() {
    let long: &'static str = Box::leak("The reactor hums along. ".repeat(250).into_boxed_str()); // 6000 chars
    let fake = FakeLlm::replying(vec![long]).await;
    let api = BotApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    let upstream = format!("fake={}", fake.base_url);
    let model = "llama-3.1-8b-instruct";
    let route = format!("{model}=fake/tiny");
    let server = start(&api, &["--llm-upstream", &upstream, "--model-route", &route]);
    let org = server.new_org("Groups").await;
    let mut body = replica_body("reactor", &org.owner_email);
    body["llm"] = json!({"model": model});
    let replica = reactor(&org, Some(body)).await;
    assert_eq!(connect(&org, &replica, TOKEN).await.0, StatusCode::OK);

    api.rate_limit_sends(1);
    api.push_message(group(1, "lunch at noon, anyone?", false));
    let mentioned = api.push_message(group(2, "@Docs_Bot how hot is the reactor?", false));
    api.push_message(group(3, "and what is its fuel?", true));
    api.wait_for("two replies", |a| a.offsets().iter().any(|o| *o > mentioned + 1) && sent_to(a, -100_555).len() >= 4)
        .await;

    let sent = sent_to(&api, -100_555);
    assert_eq!(sent.len(), 4, "two answers of two parts each: {sent:?}");
    assert_eq!(api.throttled(), 1, "one 429 was met and waited out");
    assert_eq!(sent[0]["reply_parameters"]["message_id"], json!(2), "{:?}", sent[0]);
    assert!(sent[1].get("reply_parameters").is_none());
    assert_eq!(sent[2]["reply_parameters"]["message_id"], json!(3));
    for part in &sent {
        assert!(part["text"].as_str().unwrap().chars().count() <= 4096);
    }
    let whole: String = sent[..2].iter().map(|m| m["text"].as_str().unwrap()).collect::<Vec<_>>().join(" ");
    assert_eq!(whole, long.trim());
    let asked = fake.seen()[0].body["messages"].to_string();
    assert!(asked.contains("how hot is the reactor?") && !asked.contains("@Docs_Bot"), "{asked}");

    let items = org.history_as(&replica, "/messengerA", &user("messengerA", &ADA.to_string())).await;
    let contents: Vec<&str> = items.iter().map(|i| i["content"].as_str().unwrap()).collect();
    assert_eq!(items.len(), 5, "the unaddressed message is kept too: {contents:?}");
    assert_eq!(contents[0], "lunch at noon, anyone?");
    assert_eq!(items[1]["messengerA_data"]["chat_type"], "supergroup");
    assert_eq!(items[1]["messengerA_data"]["chat_name"], "Quenth engineers");
}

#[tokio::test]
async fn a_restart_in_the_middle_neither_loses_nor_repeats_a_message() {
    let api = BotApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    let server = start(&api, &[]);
    let org = server.new_org("Restart").await;
    let replica = reactor(&org, None).await;
    assert_eq!(connect(&org, &replica, TOKEN).await.0, StatusCode::OK);

    api.push_message(private(1001, 1, ZORBLAX_QUESTION));
    api.wait_for("the first reply", |a| sent_to(a, 1001).len() == 1).await;
    // The second reply is made and stored, but its delivery never completes: kill -9 then.
    api.hold_sends(true);
    let second = api.push_message(private(1002, 2, "What is the fuel of the Zorblax reactor?"));
    api.push_message(private(1003, 3, "Where is the Zorblax reactor?"));
    api.wait_for("a reply in flight", |a| a.held() >= 1).await;
    let dir = server.kill9();
    api.hold_sends(false);
    let polls_before = api.offsets().len();

    let server = start_in(&api, dir, &[]);
    let org = org.at(&server);
    api.wait_for("the other replies", |a| sent_to(a, 1002).len() == 1 && sent_to(a, 1003).len() == 1).await;
    let last_offset = *api.offsets().iter().max().unwrap();
    api.wait_for("a poll after the last update", |a| a.offsets().iter().filter(|o| **o == last_offset).count() >= 2)
        .await;
    let resumed = &api.offsets()[polls_before..];
    assert!(resumed.iter().all(|o| *o >= second), "the restarted bot resumed from the stored offset: {resumed:?}");
    for chat in [1001, 1002, 1003] {
        assert_eq!(sent_to(&api, chat).len(), 1, "chat {chat} answered once: {:?}", api.sent());
    }
    let items = org.history_as(&replica, "/messengerA", &user("messengerA", &ADA.to_string())).await;
    assert_eq!(items.len(), 6, "three questions, three replies: {items:?}");
    assert_eq!(sent_to(&api, 1002)[0]["text"], items[3]["content"], "the stored reply was the one delivered");
    assert!(wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await.is_object());
}

#[tokio::test]
async fn a_revoked_token_shows_in_the_state_and_tokens_stay_secret() {
    let api = BotApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    // Reads the redb file to show the token is not in it.
    let server = start_in(&api, DataDir::redb(), &[]);
    let org = server.new_org("Revoked").await;
    let replica = reactor(&org, None).await;

    let r = send(
        org.req(reqwest::Method::POST, &format!("/v1/replicas/{replica}/integrations/messengerA"))
            .json(&json!({"messengerA_token": "4242:wrong-token"})),
    )
    .await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_CHANNEL_TOKEN"));
    let r = send(
        org.req(reqwest::Method::POST, &format!("/v1/replicas/{replica}/integrations/messengerA"))
            .json(&json!({"messengerA_token": "../getMe?x=1"})),
    )
    .await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    assert_eq!(integration(&org, &replica).await, Value::Null);

    assert_eq!(connect(&org, &replica, TOKEN).await.0, StatusCode::OK);
    wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await;
    let (s, list) = org.get("/v1/replicas?integration=messengerA").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["total"], json!(1), "{list}");
    assert_eq!(list["items"][0]["messengerA_integration"]["service_name"], "docs_bot");

    api.revoke(TOKEN);
    let state = wait_integration(&org, &replica, |v| v["is_active"] == json!(false)).await;
    let error = state["last_error"].as_str().expect("last_error");
    assert!(error.contains("rejected"), "{error}");
    assert!(state["last_error_at"].is_string(), "{state}");

    let db = std::fs::read(server.dir().path().join("replicad.redb")).expect("store file");
    let secret = TOKEN.split_once(':').unwrap().1.as_bytes();
    assert!(!db.windows(secret.len()).any(|w| w == secret), "the token is not stored in the clear");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = std::fs::metadata(server.dir().path().join("secrets.key")).expect("generated key");
        assert_eq!(key.permissions().mode() & 0o777, 0o600);
    }

    let (s, _) = org.delete(&format!("/v1/replicas/{replica}/integrations/messengerA")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(integration(&org, &replica).await, Value::Null);
    let (_, list) = org.get("/v1/replicas?integration=messengerA").await;
    assert_eq!(list["total"], json!(0), "{list}");
    let r = send(org.req(reqwest::Method::DELETE, &format!("/v1/replicas/{replica}/integrations/messengerA"))).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
}

#[tokio::test]
async fn the_replica_list_a_hosted_bot_orchestrator_reads_names_the_bot_but_never_its_token() {
    let api = BotApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    let server = start(&api, &[]);
    let org = server.new_org("Migrating").await;
    let replica = reactor(&org, None).await;
    // docs/migrating.md ("Moving from a hosted replica service"), step 5: the bot is connected once with the
    // integration call, and replicad runs it; the list the hosted orchestrator polled for tokens
    // shows the bot with `token: null`, so there is nothing for that process to run.
    let (s, v) = connect(&org, &replica, TOKEN).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await;
    let (s, list) = org.get("/v1/replicas?integration=messengerA").await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let item = &list["items"][0];
    assert_eq!(item["uuid"], json!(replica));
    let bot = &item["messengerA_integration"];
    assert_eq!((bot["token"].clone(), bot["service_name"].clone()), (Value::Null, json!("docs_bot")), "{bot}");
    assert!(!list.to_string().contains(TOKEN), "the token is never returned");
}
