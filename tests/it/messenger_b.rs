//! The messengerB bot (`POST`/`DELETE …/integrations/messengerB`) against the gateway and REST
//! stand-in of `common::messenger_b_api`: direct messages, server mentions, typing, long
//! replies, 429, a gateway RECONNECT, a bad and a revoked token, the integration state and
//! filter, tokens at rest.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::channels::{self, reactor};
use crate::common::fake_llm::FakeLlm;
use crate::common::messenger_b_api::MessengerBApi;
use crate::common::{assert_error, replica_body, send, user, DataDir, Org, Server, ZORBLAX_QUESTION};

const TOKEN: &str = "MTA0MjQyNDI0Mg.Gdocs1.bot_secret_token_0123456789abcdefghijklmnopq";
const BOT_ID: u64 = 4242;
const ADA: &str = "77";
const DM: &str = "3001";
const TALK: &str = "3002";
const SERVER: &str = "200";

fn message(id: &str, channel: &str, guild: Option<&str>, content: &str, mentions_bot: bool) -> Value {
    let mut m = json!({
        "id": id, "channel_id": channel, "type": 0, "content": content,
        "author": {"id": ADA, "username": "ada", "global_name": "Ada L", "discriminator": "0", "avatar": null},
        "timestamp": "2026-11-23T00:10:00.000000+00:00", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mention_roles": [], "attachments": [], "embeds": [], "pinned": false,
        "flags": 0, "components": [],
        "mentions": [],
    });
    if let Some(g) = guild {
        m["guild_id"] = json!(g);
    }
    if mentions_bot {
        m["mentions"] = json!([{"id": BOT_ID.to_string(), "username": "docs_bot", "discriminator": "0",
                                "avatar": null, "bot": true, "public_flags": 0}]);
    }
    m
}

fn start(api: &MessengerBApi, extra: &[&str]) -> Server {
    channels::start_with(api.flags(), DataDir::new(), extra)
}

async fn connect(org: &Org, replica: &str, token: &str) -> (StatusCode, Value) {
    org.post(&format!("/v1/replicas/{replica}/integrations/messengerB"), json!({"messengerBToken": token})).await
}

async fn integration(org: &Org, replica: &str) -> Value {
    channels::integration(org, replica, "messengerB_integration").await
}

async fn wait_integration(org: &Org, replica: &str, check: impl Fn(&Value) -> bool) -> Value {
    channels::wait_integration(org, replica, "messengerB_integration", check).await
}

#[tokio::test]
async fn a_direct_message_is_answered_with_typing_and_stored_as_messenger_b_history() {
    let api = MessengerBApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    let server = start(&api, &[]);
    let org = server.new_org("BotsB").await;
    let replica = reactor(&org, None).await;

    let (s, v) = connect(&org, &replica, TOKEN).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["id"], json!(BOT_ID.to_string()));
    let state = wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await;
    assert_eq!(state["token"], Value::Null, "{state}");
    assert_eq!(state["service_name"], "docs_bot");
    assert!(state.get("last_error").is_none(), "{state}");
    assert!(integration(&org, &replica).await.get("mention").is_none());
    api.wait_for("a heartbeat", |a| a.counts().3 >= 1).await;

    api.push_message(message("901", DM, None, ZORBLAX_QUESTION, false));
    api.wait_for("the reply", |a| !a.sent_to(DM).is_empty()).await;
    let reply = &api.sent_to(DM)[0];
    assert!(reply["content"].as_str().unwrap().contains("451 kelvin"), "{reply}");
    assert!(reply.get("message_reference").is_none(), "direct replies do not quote: {reply}");
    assert_eq!(reply["allowed_mentions"]["parse"], json!([]), "replies ping nobody: {reply}");
    assert!(api.typing().iter().any(|c| c == DM), "typing shown: {:?}", api.typing());

    let items = org.history_as(&replica, "/messengerB", &user("messengerB", ADA)).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!((items[0]["role"].as_str(), items[1]["role"].as_str()), (Some("user"), Some("assistant")));
    assert_eq!(items[0]["content"], ZORBLAX_QUESTION);
    assert_eq!(items[1]["content"], reply["content"]);
    assert!(items.iter().all(|i| i["source"] == "messengerB"), "{items:?}");
    let data = &items[0]["messengerB_data"];
    assert_eq!(data["channel_id"], DM);
    assert_eq!(data["channel_name"], "Ada L");
    assert_eq!(data["author_id"], ADA);
    assert_eq!(data["author_name"], "Ada L");
    assert_eq!(data["message_id"], "901");
    assert!(data["created_at"].as_str().unwrap().starts_with("2026-11-23T00:10:00"), "{data}");
    assert!(data.get("server_id").is_none(), "{data}");
}

#[tokio::test]
async fn in_a_server_only_mentions_are_answered_and_long_replies_are_split_after_a_429() {
    let long: &'static str = Box::leak("The reactor hums along. ".repeat(190).into_boxed_str()); // 4560 chars
    let fake = FakeLlm::replying(vec![long]).await;
    let api = MessengerBApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    api.add_channel(TALK, "reactor-talk");
    let (model, upstream) = ("llama-3.1-8b-instruct", format!("fake={}", fake.base_url));
    let route = format!("{model}=fake/tiny");
    let server = start(&api, &["--llm-upstream", &upstream, "--model-route", &route]);
    let org = server.new_org("Servers").await;
    let mut body = replica_body("reactor", &org.owner_email);
    body["llm"] = json!({"model": model});
    let replica = reactor(&org, Some(body)).await;
    assert_eq!(connect(&org, &replica, TOKEN).await.0, StatusCode::OK);
    wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await;

    api.rate_limit_sends(1);
    api.push_message(message("900", TALK, Some(SERVER), "lunch at noon, anyone?", false));
    api.push_message(message("901", TALK, Some(SERVER), "<@4242> how hot is the reactor?", true));
    api.wait_for("a three-part reply", |a| a.sent_to(TALK).len() >= 3).await;

    let sent = api.sent_to(TALK);
    assert_eq!(sent.len(), 3, "one answer in three parts: {sent:?}");
    assert_eq!(api.counts().4, 1, "one 429 was met and waited out");
    assert_eq!(sent[0]["message_reference"]["message_id"], "901", "{:?}", sent[0]);
    assert!(sent[1].get("message_reference").is_none());
    for part in &sent {
        assert!(part["content"].as_str().unwrap().chars().count() <= 2000);
    }
    let whole: Vec<&str> = sent.iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(whole.join(" "), long.trim());
    assert_eq!(fake.seen().len(), 1, "only the mention was asked");
    let asked = fake.seen()[0].body["messages"].to_string();
    assert!(asked.contains("how hot is the reactor?") && !asked.contains("<@4242>"), "{asked}");

    let items = org.history_as(&replica, "/messengerB", &user("messengerB", ADA)).await;
    assert_eq!(items.len(), 2, "the message without mention is not stored: {items:?}");
    let data = &items[0]["messengerB_data"];
    assert_eq!(data["server_id"], SERVER);
    assert_eq!(data["channel_id"], TALK);
    assert_eq!(data["channel_name"], "reactor-talk", "{data}");
    assert_eq!(items[1]["content"].as_str().map(str::trim), Some(long.trim()));
}

#[tokio::test]
async fn the_bot_resumes_after_a_gateway_reconnect() {
    let api = MessengerBApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    let server = start(&api, &[]);
    let org = server.new_org("Reconnect").await;
    let replica = reactor(&org, None).await;
    assert_eq!(connect(&org, &replica, TOKEN).await.0, StatusCode::OK);
    wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await;
    api.push_message(message("901", DM, None, ZORBLAX_QUESTION, false));
    api.wait_for("the first reply", |a| a.sent_to(DM).len() == 1).await;

    api.reconnect();
    api.wait_for("a resumed session", |a| a.counts().2 == 1 && a.live()).await;
    api.push_message(message("902", DM, None, "What is the fuel of the Zorblax reactor?", false));
    api.wait_for("the second reply", |a| a.sent_to(DM).len() == 2).await;
    let (connections, identifies, resumes, _, _) = api.counts();
    assert_eq!((connections, identifies, resumes), (2, 1, 1), "one identify, then a resume on a new connection");
    let items = org.history_as(&replica, "/messengerB", &user("messengerB", ADA)).await;
    assert_eq!(items.len(), 4, "{items:?}");
    assert_eq!(integration(&org, &replica).await["is_active"], json!(true));
}

#[tokio::test]
async fn bad_and_revoked_tokens_show_and_the_integration_filter_works() {
    let api = MessengerBApi::start().await;
    api.add_bot(TOKEN, BOT_ID, "docs_bot");
    // Reads the redb file to show the token is not in it.
    let server = channels::start_with(api.flags(), DataDir::redb(), &[]);
    let org = server.new_org("RevokedB").await;
    let replica = reactor(&org, None).await;
    let path = format!("/v1/replicas/{replica}/integrations/messengerB");

    let unknown = TOKEN.replace("secret", "wrong0");
    let r = send(org.req(reqwest::Method::POST, &path).json(&json!({"messengerBToken": unknown}))).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_CHANNEL_TOKEN"));
    let r = send(org.req(reqwest::Method::POST, &path).json(&json!({"messengerBToken": "short/../x"}))).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    assert_eq!(integration(&org, &replica).await, Value::Null);

    assert_eq!(connect(&org, &replica, TOKEN).await.0, StatusCode::OK);
    wait_integration(&org, &replica, |v| v["is_active"] == json!(true)).await;
    let (_, list) = org.get("/v1/replicas?integration=messengerB").await;
    assert_eq!(list["total"], json!(1), "{list}");
    assert_eq!(list["items"][0]["messengerB_integration"]["service_name"], "docs_bot");
    assert_eq!(list["items"][0]["messengerA_integration"], Value::Null);
    let (_, list) = org.get("/v1/replicas?integration=messengerA").await;
    assert_eq!(list["total"], json!(0), "{list}");
    let other = reactor(&org, Some(replica_body("other", &org.owner_email))).await;
    let r = send(
        org.req(reqwest::Method::POST, &format!("/v1/replicas/{other}/integrations/messengerB"))
            .json(&json!({"messengerBToken": TOKEN})),
    )
    .await;
    assert_error(&r, StatusCode::CONFLICT, Some("INTEGRATION_CONFLICT"));

    api.revoke(TOKEN);
    let state = wait_integration(&org, &replica, |v| v["is_active"] == json!(false)).await;
    let error = state["last_error"].as_str().expect("last_error");
    assert!(error.contains("rejected"), "{error}");
    assert!(state["last_error_at"].is_string(), "{state}");

    let db = std::fs::read(server.dir().path().join("replicad.redb")).expect("store file");
    let secret = b"bot_secret_token_0123456789";
    assert!(!db.windows(secret.len()).any(|w| w == secret), "the token is not stored in the clear");

    let (s, _) = org.delete(&path).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(integration(&org, &replica).await, Value::Null);
    let (_, list) = org.get("/v1/replicas?integration=messengerB").await;
    assert_eq!(list["total"], json!(0), "{list}");
    let r = send(org.req(reqwest::Method::DELETE, &path)).await;
    assert_error(&r, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
}

#[tokio::test]
async fn an_unreachable_platform_answers_502() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let server = Server::start_in(DataDir::new(), &["--messenger-b-api-base", &base]);
    let org = server.new_org("Offline").await;
    let replica = org.create_replica_from(replica_body("offline", &org.owner_email)).await;
    let r = send(
        org.req(reqwest::Method::POST, &format!("/v1/replicas/{replica}/integrations/messengerB"))
            .json(&json!({"messengerBToken": TOKEN})),
    )
    .await;
    assert_error(&r, StatusCode::BAD_GATEWAY, Some("UPSTREAM_ERROR"));
}
