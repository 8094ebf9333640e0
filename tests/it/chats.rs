//! Chats, conversations, their messages and mentions (docs/decisions.md "Chat"), driven across
//! conversation boundaries by moving the server's clock (`serve --test-clock`), never by sleeping.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, user, Org, Server};

/// Moves the clock of `server` (started with `--test-clock`) forward by `minutes`.
pub fn advance_clock(server: &Server, minutes: i64) -> i64 {
    advance_clock_ms(server, minutes * 60_000)
}

/// Moves the clock of `server` forward by `ms` milliseconds; returns its new reading.
pub fn advance_clock_ms(server: &Server, ms: i64) -> i64 {
    let mut s = UnixStream::connect(server.dir().path().join("admin.sock")).expect("admin socket");
    writeln!(s, "{}", json!({"op": "advance-clock", "ms": ms})).expect("write admin request");
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).expect("admin answer");
    let v: Value = serde_json::from_str(&line).expect("admin answer is JSON");
    v["clock"]["now_ms"].as_i64().unwrap_or_else(|| panic!("advance-clock: {v}"))
}

/// Asks `replica` as the user `who` (an `embed` linked account) on `source`.
pub async fn ask_as(org: &Org, replica: &str, who: &str, source: &str, content: &str) {
    let body = json!({"content": content, "source": source});
    let (s, v) = org.post_as(&format!("/v1/replicas/{replica}/chat/completions"), body, &user("embed", who)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// A messengerA group message from `username` in group `chat_id`.
async fn group_message(org: &Org, replica: &str, chat_id: i64, message_id: i64, username: &str, content: &str) {
    let data = json!({"chat_type": "group", "chat_id": chat_id, "chat_name": "Reactor fans", "message_id": message_id,
        "user_id": message_id + 1000, "username": username});
    let body = json!({"content": content, "messengerA_data": data});
    let headers = user("messengerA", username);
    let (s, v) = org.post_as(&format!("/v1/replicas/{replica}/chat/history/messengerA"), body, &headers).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

fn items(v: &Value) -> &Vec<Value> {
    v["items"].as_array().unwrap_or_else(|| panic!("items: {v}"))
}

#[tokio::test]
async fn a_chat_splits_into_conversations_after_thirty_minutes_of_silence() {
    let server = Server::start_with(&["--test-clock"]);
    let org = server.new_org("Chats").await;
    let replica = org.create_replica("talker").await;
    ask_as(&org, &replica, "ann", "web", "What is a reactor?").await;
    advance_clock(&server, 29);
    ask_as(&org, &replica, "ann", "web", "And how hot does it get?").await;
    advance_clock(&server, 31);
    ask_as(&org, &replica, "ann", "web", "Back again: what about cooling?").await;
    ask_as(&org, &replica, "ann", "embed", "Hello from the widget").await;
    ask_as(&org, &replica, "bob", "web", "Hi").await;

    let (s, v) = org.get(&format!("/v1/replicas/{replica}/chats")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["total"], json!(3), "ann on web, ann on embed, bob on web: {v}");
    let first = &items(&v)[0];
    assert_eq!(first["messageCount"], json!(6), "sorted by replicaReplies, most first: {v}");
    assert_eq!(first["replicaReplyCount"], json!(3));
    assert_eq!((first["source"].as_str(), first["chatType"].as_str()), (Some("web"), Some("individual")));
    assert_eq!(first["chatName"], json!("embed user ann"), "the user's name: {first}");
    assert!(first["lastReplicaReplyAt"].is_string() && first["firstMessageAt"].is_string());
    let chat = first["uuid"].as_str().unwrap().to_string();

    let (s, v) = org.get(&format!("/v1/replicas/{replica}/chats/{chat}/conversations")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["total"], json!(2), "{v}");
    let (newest, oldest) = (&items(&v)[0], &items(&v)[1]);
    assert_eq!((newest["messageCount"].clone(), oldest["messageCount"].clone()), (json!(2), json!(4)), "{v}");
    assert_eq!(oldest["chatUUID"], json!(chat));
    assert_eq!(
        (oldest["commonQuestions"].clone(), oldest["conversationType"].clone()),
        (json!([]), json!("individual"))
    );

    let (_, asc) = org.get(&format!("/v1/replicas/{replica}/chats/{chat}/conversations?sortOrder=asc")).await;
    assert_eq!(items(&asc)[0]["uuid"], oldest["uuid"], "ascending by lastReplicaReplyAt");
    let (_, page2) =
        org.get(&format!("/v1/replicas/{replica}/chats?pageSize=1&page=2&sortBy=firstMessageAt&sortOrder=asc")).await;
    assert_eq!((items(&page2).len(), page2["total"].clone()), (1, json!(3)), "{page2}");
    assert_eq!(items(&page2)[0]["source"], json!("embed"), "the second chat to start: {page2}");
}

#[tokio::test]
async fn messages_page_with_uuid_cursors_and_carry_their_senders() {
    let server = Server::start();
    let org = server.new_org("Messages").await;
    let replica = org.create_replica("pager").await;
    for i in 0..3 {
        ask_as(&org, &replica, "cara", "web", &format!("question {i}")).await;
    }
    let (_, chats) = org.get(&format!("/v1/replicas/{replica}/chats")).await;
    let chat = items(&chats)[0]["uuid"].as_str().unwrap().to_string();
    let path = format!("/v1/replicas/{replica}/chats/{chat}/messages");
    let (s, all) = org.get(&path).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    let all = items(&all).clone();
    assert_eq!(all.len(), 6);
    assert_eq!((all[0]["role"].as_str(), all[0]["content"].as_str()), (Some("user"), Some("question 0")));
    assert_eq!(all[0]["senderName"], json!("embed user cara"), "the name of the user the channel made");
    assert_eq!(all[1]["senderName"], json!("Replica pager"), "assistant messages carry the replica's name");
    assert_eq!(all[1]["replicaUUID"], json!(replica));

    let (_, newest) = org.get(&format!("{path}?limit=2")).await;
    assert_eq!(items(&newest).as_slice(), &all[4..6], "the newest two, oldest first");
    let (_, before) = org.get(&format!("{path}?limit=2&beforeUUID={}", all[4]["uuid"].as_str().unwrap())).await;
    assert_eq!(items(&before).as_slice(), &all[2..4]);
    let (_, after) = org.get(&format!("{path}?limit=2&afterUUID={}", all[1]["uuid"].as_str().unwrap())).await;
    assert_eq!(items(&after).as_slice(), &all[2..4]);

    let (_, convs) = org.get(&format!("/v1/replicas/{replica}/conversations")).await;
    let conv = items(&convs)[0]["uuid"].as_str().unwrap().to_string();
    let (_, c) = org.get(&format!("/v1/replicas/{replica}/conversations/{conv}/messages?limit=100")).await;
    assert_eq!(items(&c), &all, "one conversation holds the whole chat");

    let bad = org.call(Method::GET, &format!("{path}?beforeUUID={chat}"), None, &[]).await;
    assert_error(&bad, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
    let missing = org.call(Method::GET, &format!("/v1/replicas/{replica}/chats/{conv}"), None, &[]).await;
    assert_error(&missing, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
}

#[tokio::test]
async fn a_group_chat_gathers_its_members_and_lists_mentions_of_the_replica() {
    let server = Server::start();
    let org = server.new_org("Groups").await;
    let replica = org.create_replica("helper").await;
    let lines = [
        "morning all",
        "anyone seen the docs?",
        "@helper where are the docs?",
        "thanks",
        "ok",
        "bye",
        "later",
        "@HELPER one more question",
    ];
    for (i, line) in lines.iter().enumerate() {
        group_message(&org, &replica, -100, i as i64 + 1, if i % 2 == 0 { "dora" } else { "eli" }, line).await;
    }
    let (_, chats) = org.get(&format!("/v1/replicas/{replica}/chats")).await;
    assert_eq!(chats["total"], json!(1), "one chat per group: {chats}");
    let chat = &items(&chats)[0];
    assert_eq!((chat["chatType"].as_str(), chat["chatName"].as_str()), (Some("group"), Some("Reactor fans")));
    assert_eq!(chat["messageCount"], json!(8));
    assert!(chat.get("lastReplicaReplyAt").is_none(), "no reply yet: {chat}");

    let (_, convs) = org.get(&format!("/v1/replicas/{replica}/conversations")).await;
    let conv = items(&convs)[0]["uuid"].as_str().unwrap().to_string();
    let mentions = format!("/v1/replicas/{replica}/conversations/{conv}/mentions");
    let (s, v) = org.get(&format!("{mentions}?contextMessages=1&minimumMessagesInPlaceholder=2")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["hasMore"], json!(false));
    let kinds: Vec<Value> = items(&v).iter().map(|i| i["type"].clone()).collect();
    assert_eq!(kinds, vec![json!("mention"), json!("placeholder"), json!("mention")], "{v}");
    let contents = |i: usize| -> Vec<Value> {
        items(&v)[i]["messages"].as_array().unwrap().iter().map(|m| m["content"].clone()).collect()
    };
    assert_eq!(
        contents(0),
        lines[..4].iter().map(|l| json!(l)).collect::<Vec<_>>(),
        "a run of 1 is shown, not left out"
    );
    assert_eq!(items(&v)[1]["count"], json!(2), "'ok', 'bye' are left out");
    assert_eq!(contents(2), vec![json!(lines[6]), json!(lines[7])]);
    assert_eq!(items(&v)[0]["messages"][1]["senderName"], json!("eli"), "the channel's user name");
    let (_, wide) = org.get(&format!("{mentions}?contextMessages=0&minimumMessagesInPlaceholder=1")).await;
    let kinds: Vec<Value> = items(&wide).iter().map(|i| i["type"].clone()).collect();
    assert_eq!(kinds, [json!("placeholder"), json!("mention"), json!("placeholder"), json!("mention")], "{wide}");
    assert_eq!((items(&wide)[0]["count"].clone(), items(&wide)[2]["count"].clone()), (json!(2), json!(4)));

    let (_, newest) = org.get(&format!("{mentions}?limit=1&contextMessages=0")).await;
    assert_eq!(newest["hasMore"], json!(true), "{newest}");
    let first = items(&newest)[0]["messages"][0]["uuid"].as_str().unwrap().to_string();
    let (_, older) = org.get(&format!("{mentions}?limit=1&contextMessages=0&beforeUUID={first}")).await;
    assert_eq!(older["hasMore"], json!(false), "{older}");
    assert_eq!(items(&older)[0]["messages"][2]["content"], json!(lines[2]), "{older}");
    assert_eq!(items(&older)[1], json!({"type": "placeholder", "count": 4}), "up to the cursor: {older}");
}

#[tokio::test]
async fn the_owner_corrects_a_conversation_and_other_users_see_only_their_chats() {
    let server = Server::start();
    let org = server.new_org("Owners").await;
    let replica = org.create_replica("owned").await;
    ask_as(&org, &replica, "fay", "web", "How do I reset it?").await;
    ask_as(&org, &replica, "gus", "web", "Where is the manual?").await;
    let (_, convs) = org.get(&format!("/v1/replicas/{replica}/conversations")).await;
    assert_eq!(convs["total"], json!(2));

    let fay = user("embed", "fay");
    let (_, mine) = org.get_as(&format!("/v1/replicas/{replica}/chats"), &fay).await;
    assert_eq!(mine["total"], json!(1), "{mine}");
    let (_, mine) = org.get_as(&format!("/v1/replicas/{replica}/conversations"), &fay).await;
    assert_eq!(mine["total"], json!(1), "{mine}");
    let fays = items(&mine)[0]["uuid"].as_str().unwrap().to_string();
    let chat = items(&mine)[0]["chatUUID"].as_str().unwrap().to_string();
    let gus = items(&convs).iter().find(|c| c["uuid"] != json!(fays)).unwrap()["uuid"].as_str().unwrap().to_string();
    let hidden = org.call(Method::GET, &format!("/v1/replicas/{replica}/conversations/{gus}"), None, &fay).await;
    assert_error(&hidden, StatusCode::NOT_FOUND, Some("NOT_FOUND"));

    let fix = json!({"summary": "Fay asks how to reset.", "commonQuestions": ["How do I reset it?"], "commonTopics": ["reset"]});
    let path = format!("/v1/replicas/{replica}/conversations/{fays}");
    let not_owner = org.call(Method::PATCH, &path, Some(&fix), &fay).await;
    assert_error(&not_owner, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let (s, v) = org.patch(&path, fix.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, c) = org.get(&format!("/v1/replicas/{replica}/chats/{chat}/conversations/{fays}")).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["success"], json!(true));
    assert_eq!(
        (c["summary"].clone(), c["commonQuestions"].clone(), c["commonTopics"].clone()),
        (fix["summary"].clone(), fix["commonQuestions"].clone(), fix["commonTopics"].clone())
    );
    let (_, old) = org.get(&path).await;
    assert_eq!(old, c, "the deprecated read answers the same");
    let wrong_chat =
        org.call(Method::GET, &format!("/v1/replicas/{replica}/chats/{chat}/conversations/{gus}"), None, &[]).await;
    assert_error(&wrong_chat, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
    let too_many = json!({"commonTopics": vec!["t"; 51]});
    let r = org.call(Method::PATCH, &path, Some(&too_many), &[]).await;
    assert_error(&r, StatusCode::BAD_REQUEST, Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn chats_survive_a_restart_and_leave_with_their_replica() {
    let server = Server::start();
    let org = server.new_org("Durable").await;
    let replica = org.create_replica("durable").await;
    ask_as(&org, &replica, "hal", "embed", "Still there?").await;
    let dir = server.kill9();
    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);
    let (_, v) = org.get(&format!("/v1/replicas/{replica}/chats")).await;
    assert_eq!((v["total"].clone(), items(&v)[0]["messageCount"].clone()), (json!(1), json!(2)), "{v}");
    let (s, _) = org.delete(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, StatusCode::OK);
    let again = org.create_replica("durable").await;
    let (_, v) = org.get(&format!("/v1/replicas/{again}/chats")).await;
    assert_eq!(v["total"], json!(0), "{v}");
}

#[tokio::test]
async fn a_closed_conversation_gets_questions_topics_and_a_summary_even_across_a_restart() {
    let server = Server::start_with(&["--test-clock"]);
    let org = server.new_org("Insights").await;
    let replica = org.create_replica("insight").await;
    ask_as(&org, &replica, "ann", "web", "How hot does the Zorblax reactor get?").await;
    ask_as(&org, &replica, "ann", "web", "how hot does the zorblax reactor get").await;
    ask_as(&org, &replica, "ann", "web", "Thanks. Where is the reactor cooling pump?").await;
    ask_as(&org, &replica, "bob", "web", "Hello there").await;
    let list = format!("/v1/replicas/{replica}/conversations");
    let (_, v) = org.get(&list).await;
    let find = |v: &Value, n: u64| items(v).iter().find(|c| c["messageCount"] == json!(n)).unwrap()["uuid"].clone();
    let (ann, bob) = (find(&v, 6).as_str().unwrap().to_string(), find(&v, 2).as_str().unwrap().to_string());
    let (_, open) = org.get(&format!("{list}/{ann}")).await;
    assert!(open.get("summary").is_none() && open["commonQuestions"] == json!([]), "still open: {open}");
    let (s, _) = org.patch(&format!("{list}/{bob}"), json!({"summary": "Owner's words"})).await;
    assert_eq!(s, StatusCode::OK);

    let server = Server::start_in(server.kill9(), &["--test-clock"]);
    let org = org.at(&server);
    advance_clock(&server, 31);
    let deadline = std::time::Instant::now() + crate::common::PATIENCE;
    let done = loop {
        let (_, c) = org.get(&format!("{list}/{ann}")).await;
        if c.get("summary").is_some() {
            break c;
        }
        assert!(std::time::Instant::now() < deadline, "no insights within {:?}: {c}", crate::common::PATIENCE);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        done["commonQuestions"],
        json!(["How hot does the Zorblax reactor get?", "Thanks. Where is the reactor cooling pump?"]),
        "near-duplicates merged: {done}"
    );
    let topics: Vec<&str> = done["commonTopics"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(topics.contains(&"reactor") && topics.contains(&"zorblax"), "{topics:?}");
    assert!(done["summary"].as_str().unwrap().contains("How hot does the Zorblax reactor get?"), "{done}");
    let deadline = std::time::Instant::now() + crate::common::PATIENCE;
    loop {
        let (_, b) = org.get(&format!("{list}/{bob}")).await;
        if b["commonTopics"] != json!([]) || std::time::Instant::now() > deadline {
            assert_eq!(b["summary"], json!("Owner's words"), "the owner's correction is kept: {b}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn paging_numbers_sent_as_a_generated_client_writes_them_are_accepted() {
    let server = Server::start();
    let org = server.new_org("Number pages").await;
    let replica = org.create_replica("numbers").await;
    for who in ["ann", "bob", "cyd"] {
        ask_as(&org, &replica, who, "web", "Hello").await;
    }
    let chats = format!("/v1/replicas/{replica}/chats");
    // A client generated from a document typing `page` as `number` sends `1.0`.
    let (s, first) = org.get(&format!("{chats}?page=1.0&pageSize=2.0")).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    assert_eq!((items(&first).len(), first["total"].clone()), (2, json!(3)));
    let (_, second) = org.get(&format!("{chats}?page=2.00&pageSize=2")).await;
    assert_eq!(items(&second).len(), 1);
    let chat = items(&first)[0]["uuid"].as_str().unwrap().to_string();
    let (s, convs) = org.get(&format!("{chats}/{chat}/conversations?page=1.0&pageSize=24.0")).await;
    assert_eq!(s, StatusCode::OK, "{convs}");
    assert_eq!(items(&convs).len(), 1);
    let (s, replicas) = org.get("/v1/replicas?page=1.0&page_size=24.0").await;
    assert_eq!((s, replicas["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(1)));
    for bad in ["page=1.5", "page=1.", "pageSize=2.50", "page=one"] {
        let r = org.call(Method::GET, &format!("{chats}?{bad}"), None, &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
    }
}
