//! Chat history (spec §2.1, §4.1, §5 rule 1).

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, user, Org, Server};

fn messenger_a(chat_id: i64, message_id: i64) -> Value {
    json!({"chat_type": "private", "chat_id": chat_id, "message_id": message_id, "user_id": 99, "username": "ann"})
}

async fn save(org: &Org, replica: &str, suffix: &str, body: Value) -> crate::common::Resp {
    org.call(Method::POST, &format!("/v1/replicas/{replica}/chat/history{suffix}"), Some(&body), &[]).await
}

#[tokio::test]
async fn a_saved_item_is_listed_with_every_field_of_the_interface() {
    let server = Server::start();
    let org = server.new_org("History").await;
    let replica = org.create_replica("h").await;
    let r = save(&org, &replica, "", json!({"content": "Remember the milk"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["success"], json!(true));

    let (s, v) = org.get(&format!("/v1/replicas/{replica}/chat/history")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["success"], json!(true));
    assert!(v["type"].is_string(), "{v}");
    let items = v["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    let item = items[0].as_object().expect("item");
    let mut keys: Vec<&str> = item.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "content",
            "created_at",
            "id",
            "is_private",
            "original_message_id",
            "role",
            "source",
            "sources",
            "user_uuid"
        ]
    );
    assert_eq!(item["content"], json!("Remember the milk"));
    assert!(item["created_at"].as_str().is_some_and(chrono_like), "{item:?}");
    assert!(item["id"].is_u64());
    assert_eq!(item["is_private"], json!(false));
    assert_eq!(item["role"], json!("user"));
    assert_eq!(item["source"], json!("web"));
    assert_eq!(item["sources"], json!([]));
    assert_eq!(item["user_uuid"], json!(org.owner_id().await), "the organization key acts as the owner user");
    assert_eq!(item["original_message_id"], Value::Null, "null on user items");
}

/// `YYYY-MM-DDTHH:MM:SS…Z`-shaped.
fn chrono_like(t: &str) -> bool {
    t.len() >= 20 && t.as_bytes()[4] == b'-' && t.as_bytes()[10] == b'T' && (t.ends_with('Z') || t.contains('+'))
}

#[tokio::test]
async fn assistant_items_carry_an_original_message_id() {
    let server = Server::start();
    let org = server.new_org("History").await;
    let replica = org.create_replica("h").await;
    org.ask(&replica, "Hello").await;
    let items = org.history(&replica, "").await;
    assert_eq!(items[1]["role"], json!("assistant"));
    assert!(items[1]["original_message_id"].is_string(), "{}", items[1]);
    assert!(items[0]["id"].as_u64() < items[1]["id"].as_u64(), "ids grow with time");
}

#[tokio::test]
async fn items_appear_only_in_their_channels_list() {
    let server = Server::start();
    let org = server.new_org("Channels").await;
    let replica = org.create_replica("c").await;
    for (suffix, body) in [
        ("", json!({"content": "on web"})),
        ("", json!({"content": "on embed", "source": "embed"})),
        ("", json!({"content": "on autopilot", "source": "messengerA_autopilot"})),
        (
            "",
            json!({"content": "on B", "messengerB_data": {
                "channel_id": "c1", "channel_name": "general", "author_id": "a1", "author_name": "Ann", "message_id": "m1"
            }}),
        ),
        ("/messengerA", json!({"content": "on A", "messengerA_data": messenger_a(10, 1)})),
    ] {
        let r = save(&org, &replica, suffix, body).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    let contents = |items: Vec<Value>| -> Vec<String> {
        items.iter().map(|i| i["content"].as_str().expect("content").to_string()).collect()
    };
    assert_eq!(contents(org.history(&replica, "/web").await), vec!["on web"]);
    assert_eq!(contents(org.history(&replica, "/embed").await), vec!["on embed"]);
    assert_eq!(contents(org.history(&replica, "/messengerB").await), vec!["on B"]);
    assert_eq!(contents(org.history(&replica, "/messengerA").await), vec!["on A"]);
    assert_eq!(
        contents(org.history(&replica, "").await),
        vec!["on web", "on embed", "on autopilot", "on B", "on A"],
        "the plain list has every channel, oldest first"
    );
    let (_, v) = org.get(&format!("/v1/replicas/{replica}/chat/history/embed")).await;
    assert_eq!(v["type"], json!("embed"));
    let b = org.history(&replica, "/messengerB").await;
    assert_eq!(b[0]["source"], json!("messengerB"), "messengerB_data implies the messengerB source");
}

#[tokio::test]
async fn limit_and_before_id_page_backwards_through_the_history() {
    let server = Server::start();
    let org = server.new_org("Paging").await;
    let replica = org.create_replica("p").await;
    for i in 0..7 {
        let r = save(&org, &replica, "", json!({"content": format!("m{i}")})).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    let path = format!("/v1/replicas/{replica}/chat/history");
    let (_, newest) = org.get(&format!("{path}?limit=3")).await;
    let page: Vec<&str> = newest["items"].as_array().unwrap().iter().map(|i| i["content"].as_str().unwrap()).collect();
    assert_eq!(page, vec!["m4", "m5", "m6"], "the newest items, oldest first");

    let oldest_id = newest["items"][0]["id"].as_u64().unwrap();
    let (_, before) = org.get(&format!("{path}?limit=3&beforeID={oldest_id}")).await;
    let page: Vec<&str> = before["items"].as_array().unwrap().iter().map(|i| i["content"].as_str().unwrap()).collect();
    assert_eq!(page, vec!["m1", "m2", "m3"]);

    let (_, all) = org.get(&path).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 7, "the default limit is above 7");

    for bad in ["limit=0", "limit=101", "limit=x", "beforeID=abc"] {
        let r = org.call(Method::GET, &format!("{path}?{bad}"), None, &[]).await;
        assert_error(&r, StatusCode::BAD_REQUEST, Some("INVALID_QUERY"));
    }
}

#[tokio::test]
async fn a_saved_item_body_is_validated() {
    let server = Server::start();
    let org = server.new_org("Validation").await;
    let replica = org.create_replica("v").await;
    let b_data =
        json!({"channel_id": "c", "channel_name": "n", "author_id": "a", "author_name": "A", "message_id": "m"});
    for (body, code) in [
        (json!({"content": ""}), "VALIDATION_ERROR"),
        (json!({}), "INVALID_BODY"),
        (json!({"content": "x", "mood": "happy"}), "INVALID_BODY"),
        (json!({"content": "x", "source": "fax"}), "VALIDATION_ERROR"),
        (json!({"content": "x", "source": "web", "messengerB_data": b_data}), "VALIDATION_ERROR"),
        (json!({"content": "x", "messengerB_data": {"channel_id": "c"}}), "INVALID_BODY"),
        (
            json!({"content": "x", "messengerB_data": {
                "channel_id": "c", "channel_name": "n", "author_id": "a", "author_name": "A", "message_id": "m", "extra": 1
            }}),
            "INVALID_BODY",
        ),
    ] {
        let r = save(&org, &replica, "", body.clone()).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
        assert_eq!(r.body["error_code"], json!(code), "{body}");
    }
    assert_eq!(org.history(&replica, "").await.len(), 0, "nothing was stored");
}

#[tokio::test]
async fn messenger_a_data_is_validated() {
    let server = Server::start();
    let org = server.new_org("MessengerA").await;
    let replica = org.create_replica("a").await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut d = messenger_a(1, 1);
        f(&mut d);
        json!({"content": "x", "messengerA_data": d})
    };
    let cases = vec![
        ("chat_type foo", with(&|d| d["chat_type"] = json!("foo"))),
        ("chat_id as string", with(&|d| d["chat_id"] = json!("1"))),
        ("message_id as string", with(&|d| d["message_id"] = json!("1"))),
        (
            "missing message_id",
            with(&|d| {
                d.as_object_mut().unwrap().remove("message_id");
            }),
        ),
        (
            "missing chat_type",
            with(&|d| {
                d.as_object_mut().unwrap().remove("chat_type");
            }),
        ),
        ("extra field in data", with(&|d| d["colour"] = json!("red"))),
        ("negative message_id", with(&|d| d["message_id"] = json!(-5))),
        ("message_id 0", with(&|d| d["message_id"] = json!(0))),
        (
            "thread id 0",
            with(&|d| {
                d["chat_type"] = json!("supergroup");
                d["message_thread_id"] = json!(0);
            }),
        ),
        (
            "thread id in a group",
            with(&|d| {
                d["chat_type"] = json!("group");
                d["message_thread_id"] = json!(5);
            }),
        ),
        ("extra top-level field", json!({"content": "x", "messengerA_data": messenger_a(1, 1), "source": "web"})),
        ("missing data", json!({"content": "x"})),
        ("empty content", json!({"content": "", "messengerA_data": messenger_a(1, 1)})),
    ];
    for (what, body) in cases {
        let r = save(&org, &replica, "/messengerA", body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{what}: {}", r.text);
        assert!(r.body["error_code"].is_string(), "{what}");
    }
    assert_eq!(org.history(&replica, "").await.len(), 0, "nothing was stored");

    let thread = with(&|d| {
        d["chat_type"] = json!("supergroup");
        d["message_thread_id"] = json!(5);
    });
    assert_eq!(save(&org, &replica, "/messengerA", thread).await.status, StatusCode::OK);
    for chat_type in ["group", "channel"] {
        let mut d = messenger_a(2, 7);
        d["chat_type"] = json!(chat_type);
        d.as_object_mut().unwrap().remove("user_id");
        d.as_object_mut().unwrap().remove("username");
        d["message_id"] = json!(if chat_type == "group" { 7 } else { 8 });
        let r = save(&org, &replica, "/messengerA", json!({"content": chat_type, "messengerA_data": d})).await;
        assert_eq!(r.status, StatusCode::OK, "{chat_type}: {}", r.text);
    }
    assert_eq!(org.history(&replica, "/messengerA").await.len(), 3);
}

#[tokio::test]
async fn a_repeated_messenger_a_message_is_stored_once() {
    let server = Server::start();
    let org = server.new_org("Dedup").await;
    let replica = org.create_replica("d").await;
    let body = json!({"content": "hello bot", "messengerA_data": messenger_a(100, 5)});
    let first = save(&org, &replica, "/messengerA", body.clone()).await;
    let second = save(&org, &replica, "/messengerA", body).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(org.history(&replica, "/messengerA").await.len(), 1);
    // Another message id, or the same message id in another chat, is a new message.
    save(&org, &replica, "/messengerA", json!({"content": "again", "messengerA_data": messenger_a(100, 6)})).await;
    save(&org, &replica, "/messengerA", json!({"content": "elsewhere", "messengerA_data": messenger_a(200, 5)})).await;
    assert_eq!(org.history(&replica, "/messengerA").await.len(), 3);
}

#[tokio::test]
async fn a_repeated_messenger_b_message_is_stored_once() {
    let server = Server::start();
    let org = server.new_org("Dedup").await;
    let replica = org.create_replica("d").await;
    let body = json!({"content": "hi", "messengerB_data": {
        "channel_id": "c1", "channel_name": "general", "author_id": "a1", "author_name": "Ann", "message_id": "m1",
        "server_id": "s1", "server_name": "Guild", "created_at": "2025-01-01T00:00:00Z"
    }});
    for _ in 0..2 {
        assert_eq!(save(&org, &replica, "", body.clone()).await.status, StatusCode::OK);
    }
    assert_eq!(org.history(&replica, "/messengerB").await.len(), 1);
}

#[tokio::test]
async fn each_user_sees_only_its_own_history() {
    let server = Server::start();
    let org = server.new_org("Users").await;
    let replica = org.create_replica("u").await;
    let ann = user("messengerA", "1001");
    let bob = user("messengerA", "1002");
    let path = format!("/v1/replicas/{replica}/chat/history/messengerA");
    let (s, v) = org.post_as(&path, json!({"content": "from ann", "messengerA_data": messenger_a(1, 1)}), &ann).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _) = org.post_as(&path, json!({"content": "from bob", "messengerA_data": messenger_a(2, 1)}), &bob).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = org.post(&format!("/v1/replicas/{replica}/chat/history"), json!({"content": "from the org"})).await;
    assert_eq!(s, StatusCode::OK);

    let ann_items = org.history_as(&replica, "/messengerA", &ann).await;
    assert_eq!(ann_items.len(), 1);
    assert_eq!(ann_items[0]["content"], json!("from ann"));
    let (_, ann_user) = org.get_as("/v1/users/me", &ann).await;
    assert_eq!(ann_items[0]["user_uuid"], ann_user["id"]);
    let bob_all = org.history_as(&replica, "", &bob).await;
    assert_eq!(bob_all.len(), 1);
    assert_eq!(bob_all[0]["content"], json!("from bob"));
    let org_all = org.history(&replica, "").await;
    assert_eq!(org_all.len(), 1);
    assert_eq!(org_all[0]["content"], json!("from the org"));
}

#[tokio::test]
async fn history_of_a_missing_replica_is_404() {
    let server = Server::start();
    let org = server.new_org("Missing").await;
    let id = uuid::Uuid::new_v4();
    for suffix in ["", "/web", "/embed", "/messengerA", "/messengerB"] {
        let r = org.call(Method::GET, &format!("/v1/replicas/{id}/chat/history{suffix}"), None, &[]).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{suffix}");
    }
    let r = save(&org, &id.to_string(), "", json!({"content": "x"})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r =
        save(&org, &id.to_string(), "/messengerA", json!({"content": "x", "messengerA_data": messenger_a(1, 1)})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_deleted_replicas_history_is_gone_with_it() {
    let server = Server::start();
    let org = server.new_org("Cascade").await;
    let replica = org.create_replica("gone").await;
    save(&org, &replica, "", json!({"content": "x"})).await;
    let (s, _) = org.delete(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = org.get(&format!("/v1/replicas/{replica}/chat/history")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
