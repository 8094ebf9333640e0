//! Chat completions answered by the embedded generator from the knowledge base (spec §4.2;
//! docs/decisions.md "Chat").

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_error, replica_body, user, Server, ZORBLAX, ZORBLAX_QUESTION};

#[tokio::test]
async fn a_question_is_answered_from_the_knowledge_base_with_its_source() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("reactor").await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let (_, entry) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;

    let r = org
        .call(
            Method::POST,
            &format!("/v1/replicas/{replica}/chat/completions"),
            Some(&json!({"content": ZORBLAX_QUESTION})),
            &[],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["success"], json!(true));
    assert_eq!(r.header("x-replica-backend"), Some("embedded"));
    let answer = r.body["content"].as_str().expect("content");
    assert!(answer.contains("451 kelvin"), "{answer}");

    let items = org.history(&replica, "").await;
    assert_eq!(items.len(), 2, "the question and the answer are stored");
    assert_eq!(items[0]["role"], json!("user"));
    assert_eq!(items[0]["content"], json!(ZORBLAX_QUESTION));
    assert_eq!(items[0]["sources"], json!([]));
    let reply = &items[1];
    assert_eq!(reply["role"], json!("assistant"));
    assert_eq!(reply["content"], json!(answer));
    assert_eq!(reply["source"], json!("web"), "the default source");
    let sources = reply["sources"].as_array().expect("sources");
    assert!(!sources.is_empty(), "{reply}");
    let s = &sources[0];
    assert_eq!(s["id"], json!(kb));
    assert!(s["score"].as_f64().is_some_and(|x| x > 0.0), "{s}");
    assert!(s["status"] == "scored" || s["status"] == "unscored", "{s}");
    assert!(s["created_at"].as_str().is_some_and(|t| t.contains('T')), "{s}");
    assert_eq!(s["created_at"], entry["createdAt"], "the source's creation time is the entry's");
    assert!(s["name"].as_str().is_some_and(|n| n.contains("Zorblax reactor")), "{s}");
    assert!(s["content"].as_str().is_some_and(|c| c.contains("451 kelvin")), "{s}");
}

#[tokio::test]
async fn a_source_cited_by_many_replies_keeps_its_text_in_each_after_its_entry_is_deleted() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("reactor").await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    for _ in 0..3 {
        assert!(org.ask(&replica, ZORBLAX_QUESTION).await.contains("451 kelvin"));
    }
    let r = org.call(Method::DELETE, &format!("/v1/replicas/{replica}/knowledge-base/{kb}"), None, &[]).await;
    assert!(r.status.is_success(), "{}", r.text);
    let items = org.history(&replica, "").await;
    let replies: Vec<&serde_json::Value> = items.iter().filter(|i| i["role"] == "assistant").collect();
    assert_eq!(replies.len(), 3, "{items:?}");
    for reply in &replies {
        let sources = reply["sources"].as_array().expect("sources");
        assert!(!sources.is_empty(), "{reply}");
        assert_eq!(reply["sources"], replies[0]["sources"], "each reply shows the same cited text");
        assert!(sources[0]["content"].as_str().is_some_and(|c| c.contains("451 kelvin")), "{reply}");
    }
}

#[tokio::test]
async fn the_answer_comes_from_the_entry_that_holds_the_fact() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("many").await;
    org.add_ready_text(&replica, "Gardening", "Tomatoes need six hours of sun a day. Water them at the roots.").await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    org.add_ready_text(&replica, "Baking", "Bread rises when yeast ferments the sugars in the dough.").await;
    assert!(org.ask(&replica, ZORBLAX_QUESTION).await.contains("451 kelvin"));
    let items = org.history(&replica, "").await;
    let sources = items[1]["sources"].as_array().expect("sources");
    assert!(sources.iter().all(|s| s["id"] == json!(kb)), "only the reactor entry is cited: {sources:?}");
}

#[tokio::test]
async fn a_replica_only_answers_from_its_own_knowledge_base() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let knows = org.create_replica("knows").await;
    let ignorant = org.create_replica("ignorant").await;
    org.add_ready_text(&knows, "Zorblax reactor", ZORBLAX).await;
    let answer = org.ask(&ignorant, ZORBLAX_QUESTION).await;
    assert!(answer.starts_with("I don't know"), "{answer}");
    assert!(!answer.contains("451"), "{answer}");
}

#[tokio::test]
async fn a_greeting_is_answered_with_the_replicas_greeting() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let mut body = replica_body("greeter", &org.owner_email);
    body["greeting"] = json!("Welcome to the reactor museum!");
    let replica = org.create_replica_from(body).await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    assert_eq!(org.ask(&replica, "Hello").await, "Welcome to the reactor museum!");
}

#[tokio::test]
async fn an_unrelated_question_is_answered_with_i_dont_know() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("honest").await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let answer = org.ask(&replica, "What is the capital of Peru?").await;
    assert!(answer.starts_with("I don't know"), "{answer}");
    let items = org.history(&replica, "").await;
    assert_eq!(items[1]["sources"], json!([]), "nothing was cited");
}

#[tokio::test]
async fn skip_chat_history_stores_nothing() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("quiet").await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let (s, v) = org
        .post(
            &format!("/v1/replicas/{replica}/chat/completions"),
            json!({"content": ZORBLAX_QUESTION, "skip_chat_history": true}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["content"].as_str().is_some_and(|c| c.contains("451 kelvin")), "{v}");
    assert_eq!(org.history(&replica, "").await.len(), 0);
    // Without the flag the exchange is stored, so the check above can fail.
    org.ask(&replica, ZORBLAX_QUESTION).await;
    assert_eq!(org.history(&replica, "").await.len(), 2);
}

#[tokio::test]
async fn content_must_have_1_to_100000_characters() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("limits").await;
    let path = format!("/v1/replicas/{replica}/chat/completions");
    for content in [String::new(), "a".repeat(100_001)] {
        let r = org.call(Method::POST, &path, Some(&json!({"content": content})), &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
    }
    let r = org.call(Method::POST, &path, Some(&json!({})), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_BODY"));
    assert_eq!(org.history(&replica, "").await.len(), 0, "refused questions are not stored");
    let (s, v) = org.post(&path, json!({"content": "a".repeat(100_000)})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

#[tokio::test]
async fn a_completion_on_another_channel_is_stored_on_that_channel() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("channels").await;
    let (s, v) = org
        .post(&format!("/v1/replicas/{replica}/chat/completions"), json!({"content": "Hello", "source": "embed"}))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(org.history(&replica, "/embed").await.len(), 2);
    assert_eq!(org.history(&replica, "/web").await.len(), 0);
    let r = org
        .call(
            Method::POST,
            &format!("/v1/replicas/{replica}/chat/completions"),
            Some(&json!({"content": "Hello", "source": "carrier-pigeon"})),
            &[],
        )
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn a_user_chats_in_its_own_history() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("personal").await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let bot_user = user("messengerB", "discord-1");
    let (s, v) = org
        .post_as(&format!("/v1/replicas/{replica}/chat/completions"), json!({"content": ZORBLAX_QUESTION}), &bot_user)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, me) = org.get_as("/v1/users/me", &bot_user).await;
    let mine = org.history_as(&replica, "", &bot_user).await;
    assert_eq!(mine.len(), 2);
    assert!(mine.iter().all(|i| i["user_uuid"] == me["id"]), "{mine:?}");
    assert_eq!(org.history(&replica, "").await.len(), 0, "the organization's own history is separate");
}

#[tokio::test]
async fn a_retried_channel_message_stores_one_question_and_one_answer() {
    let server = Server::start();
    let org = server.new_org("Chat").await;
    let replica = org.create_replica("retries").await;
    org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    let body = json!({"content": ZORBLAX_QUESTION, "messengerB_data": {
        "channel_id": "c1", "channel_name": "general", "author_id": "a1", "author_name": "Ann", "message_id": "m1"
    }});
    let path = format!("/v1/replicas/{replica}/chat/completions");
    for attempt in 0..2 {
        let (s, v) = org.post(&path, body.clone()).await;
        assert_eq!(s, StatusCode::OK, "attempt {attempt}: {v}");
        assert!(v["content"].as_str().is_some_and(|c| c.contains("451 kelvin")), "attempt {attempt}: {v}");
    }
    let items = org.history(&replica, "/messengerB").await;
    let roles: Vec<&str> = items.iter().map(|i| i["role"].as_str().unwrap()).collect();
    assert_eq!(roles, vec!["user", "assistant"], "a retry of message m1 stores nothing new: {items:?}");
    // A new message id in the same channel is a new exchange.
    let mut next = body.clone();
    next["messengerB_data"]["message_id"] = json!("m2");
    let (s, _) = org.post(&path, next).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(org.history(&replica, "/messengerB").await.len(), 4);
}

#[tokio::test]
async fn a_text_entry_without_a_title_is_cited_by_its_first_words_cut_at_a_word_boundary() {
    let server = Server::start();
    let org = server.new_org("Names").await;
    let replica = org.create_replica("names").await;
    // As a hackathon app adds a note: the text alone, one long line, no title.
    let text = "Remember this for the quiz tomorrow morning, it matters a lot. The secret phrase is: \
        RAINBOW-42. The Zorblax reactor operates at a steady temperature of 451 kelvin.";
    let path = format!("/v1/replicas/{replica}/knowledge-base");
    let (s, v) = org.post(&path, json!({"text": text})).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let untitled = v["results"][0]["knowledgeBaseID"].as_u64().expect("knowledgeBaseID");
    let entry = org.wait_ready(&replica, untitled).await;
    let name = "Remember this for the quiz tomorrow morning, it matters a lot. The secret…";
    assert_eq!(entry["generatedTitle"], json!(name));
    org.ask(&replica, ZORBLAX_QUESTION).await;
    let items = org.history(&replica, "").await;
    let cited = items[1]["sources"].as_array().expect("sources").clone();
    let source = cited.iter().find(|s| s["id"] == json!(untitled)).unwrap_or_else(|| panic!("{cited:?}"));
    assert_eq!(source["name"], json!(name), "not cut inside a word: {source}");
    // With a title, the title is the name.
    let titled = org.add_ready_text(&replica, "Reactor facts", &text.replace("Zorblax", "Quenth")).await;
    org.ask(&replica, "At what temperature does the Quenth reactor operate?").await;
    let items = org.history(&replica, "").await;
    let cited = items[3]["sources"].as_array().expect("sources").clone();
    let source = cited.iter().find(|s| s["id"] == json!(titled)).unwrap_or_else(|| panic!("{cited:?}"));
    assert_eq!(source["name"], json!("Reactor facts"));
}
