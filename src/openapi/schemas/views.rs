//! The typed views of `src/api` against their schemas: one value of each, every optional field
//! present, serialized as the server writes it and validated against the document. The
//! integration tests check every answer they receive, but only with the fields their cases
//! happen to produce; this checks the fields a happy path may never send (a chat's image, an
//! entry's `website` and `error`, a signed upload URL, …), and that the sample is complete: every
//! property a schema lists is in the value (so a view that renames or drops a field fails here).

#![cfg(test)]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::api::{self, analytics, chats, conversations, embed, health, history, knowledge_base, models, usage, users};
use crate::generate::Usage;
use crate::http::response::{Body, Reply};
use crate::ops::health::{Check, Report};
use crate::service::chats::conversations::Mention;
use crate::service::chats::{Item, Labeled};
use crate::service::knowledge::uploads::Uploaded;
use crate::service::knowledge::{Created, EntryView};
use crate::service::usage::MyUsage;
use crate::store::records::{
    Chat, Chunk, Conversation, Counts, FileMeta, KbEntry, KbSource, KbText, Message, SourceRef, User, WebsiteMeta,
};
use crate::store::states::{KbKind, KbStatus};

/// Schemas a sample is not checked to be complete against: views of other modules whose
/// optional fields exclude each other (`messengerA_data` / `messengerB_data`).
const NOT_SAMPLED: &[&str] = &["ChatHistoryItem"];

fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let models = crate::models::Models::parse(crate::models::SHIPPED).expect("shipped models");
        crate::openapi::document(&crate::api::document_rows(), &models)
    })
}

/// The schema `components.schemas.name`.
fn schema(name: &str) -> &'static Value {
    let s = &document()["components"]["schemas"][name];
    assert!(s.is_object(), "no schema {name}");
    s
}

/// `schema_value` (a part of the document), or the schema its `$ref` names; `None` for a
/// schema not sampled.
fn resolved(schema_value: &'static Value) -> Option<&'static Value> {
    let Some(r) = schema_value.get("$ref").and_then(Value::as_str) else { return Some(schema_value) };
    let name = r.trim_start_matches("#/components/schemas/");
    (!NOT_SAMPLED.contains(&name)).then(|| schema(name))
}

/// Panics unless every property `schema_value` lists is in `value`, at every depth (arrays:
/// each item; maps: each value; `oneOf`: not descended into, the validation covers it).
fn assert_complete(schema_value: &'static Value, value: &Value, at: &str) {
    let Some(s) = resolved(schema_value) else { return };
    if let (Some(props), Some(obj)) = (s.get("properties").and_then(Value::as_object), value.as_object()) {
        for (key, sub) in props {
            let v = obj.get(key).unwrap_or_else(|| panic!("{at}: the sample has no `{key}`"));
            assert_complete(sub, v, &format!("{at}.{key}"));
        }
    }
    if let (Some(sub @ Value::Object(_)), Some(obj)) = (s.get("additionalProperties"), value.as_object()) {
        obj.iter().for_each(|(k, v)| assert_complete(sub, v, &format!("{at}.{k}")));
    }
    if let (Some(sub), Some(items)) = (s.get("items"), value.as_array()) {
        items.iter().enumerate().for_each(|(i, v)| assert_complete(sub, v, &format!("{at}[{i}]")));
    }
}

/// Panics unless `value` is valid against the schema `name` and carries all its properties.
fn check(name: &str, value: Value) {
    let root = serde_json::json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": document()["components"],
    });
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema {name} does not compile: {e}"));
    let errors: Vec<String> = validator.iter_errors(&value).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{name}: the view breaks its schema:\n  {}\nvalue: {value:#}", errors.join("\n  "));
    assert_complete(schema(name), &value, name);
}

/// The JSON of `view` as a field of an answer.
fn json(view: impl Serialize) -> Value {
    serde_json::to_value(view).expect("a view serializes")
}

/// The JSON body of `reply`, as sent.
fn body(reply: Reply) -> Value {
    match reply.body {
        Body::Full(bytes) => serde_json::from_slice(&bytes).expect("a JSON body"),
        Body::Stream(_) => panic!("a streamed body"),
    }
}

const T: i64 = 1_700_000_000_000;

fn uuid(n: u128) -> Uuid {
    Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0000 | n)
}

fn counts() -> Counts {
    Counts {
        message_count: 3,
        replica_reply_count: 1,
        first_message_at: T,
        last_message_at: T + 1,
        last_replica_reply_at: Some(T + 1),
    }
}

fn chat() -> Labeled<Chat> {
    let item = Chat {
        id: uuid(1),
        replica: uuid(2),
        source: "messengerA".into(),
        group: false,
        user: Some(uuid(3)),
        name: None,
        counts: counts(),
        conversation: uuid(4),
    };
    Labeled { item, name: Some("Ada".into()), image: Some("https://example.com/ada.png".into()) }
}

fn conversation() -> Labeled<Conversation> {
    let item = Conversation {
        id: uuid(4),
        chat: uuid(1),
        replica: uuid(2),
        source: "web".into(),
        group: true,
        counts: counts(),
        summary: Some("About tea.".into()),
        common_questions: vec!["Which tea?".into()],
        common_topics: vec!["tea".into()],
    };
    Labeled { item, name: Some("Tea club".into()), image: Some("https://example.com/club.png".into()) }
}

fn source_ref() -> SourceRef {
    SourceRef {
        id: 42 << 10,
        score: 0.5,
        created_at: T,
        name: "Tea".into(),
        content: "Green tea.".into(),
        url: Some("https://example.com/tea#:~:text=Green%20tea.".into()),
        page: Some(3),
    }
}

fn message() -> Message {
    Message {
        id: 7 << 10,
        replica: uuid(2),
        user: uuid(3),
        role: "assistant".into(),
        content: "Green.".into(),
        source: "web".into(),
        sources: vec![source_ref()],
        is_private: false,
        channel_data: None,
        created_at: T,
        interrupted: true,
        passages: Vec::new(),
    }
}

fn item() -> Item {
    Item {
        message: message(),
        sender_name: Some("Replica".into()),
        sender_image: Some("https://example.com/r.png".into()),
    }
}

fn entry() -> EntryView {
    let entry = KbEntry {
        id: 42 << 10,
        replica: uuid(2),
        org: uuid(5),
        kind: KbKind::Website,
        status: KbStatus::Unprocessable,
        title: Some("Tea".into()),
        generated_title: Some("All about tea".into()),
        language: Some("en".into()),
        auto_refresh: true,
        summary: "Green tea.".into(),
        chunk_count: 1,
        revision: 2,
        error: Some("the page is gone".into()),
        created_at: T,
        updated_at: T + 1,
    };
    let website = WebsiteMeta {
        final_url: "https://example.com/tea".into(),
        status: 200,
        content_type: "text/html".into(),
        page_title: Some("Tea".into()),
        fetched_at: T,
    };
    let source = KbSource {
        url: Some("https://example.com/tea".into()),
        file: Some(FileMeta { name: "tea.pdf".into(), size: 10, mime_type: "application/pdf".into() }),
        website: Some(website),
        detected_language: Some("en".into()),
        format: Some("html".into()),
    };
    EntryView { entry, source }
}

fn user() -> User {
    User {
        id: uuid(3),
        client_id: Some("ada-1".into()),
        org: uuid(5),
        name: "Ada".into(),
        email: Some("ada@example.com".into()),
        profile_image: Some("https://example.com/ada.png".into()),
        linked: vec![("messengerA".into(), "12345".into())],
        created_at: T,
        updated_at: T + 1,
    }
}

fn my_usage() -> MyUsage {
    let tokens = Usage { prompt_tokens: 10, completion_tokens: 5 };
    MyUsage {
        conversations_by_replica: BTreeMap::from([(uuid(2), 3)]),
        kb_entries_by_replica: BTreeMap::from([(uuid(2), 1)]),
        tokens_by_replica: BTreeMap::from([(uuid(2), tokens)]),
        month: 202611,
    }
}

fn report() -> Report {
    let check = |ok, message: &str| Check { ok, message: message.into() };
    Report {
        checks: vec![
            ("store", check(true, "writable")),
            ("search", check(false, "behind by 40 s")),
            ("ingestion", check(true, "running")),
        ],
    }
}

#[test]
fn the_chat_and_conversation_views_match_their_schemas() {
    let (chat, conv, item) = (chat(), conversation(), item());
    check("Chat", json(chats::view(&chat)));
    check("ChatRead", body(Reply::ok(&chats::ChatRead { chat: chats::view(&chat) })));
    check("ChatList", body(Reply::ok(&api::Page { items: vec![chats::view(&chat)], total: 1 })));
    check("Message", json(chats::message_view(&item)));
    check("MessageList", body(chats::messages_reply(std::slice::from_ref(&item))));
    check("Conversation", json(conversations::view(&conv)));
    check("ConversationRead", body(Reply::ok(&conversations::view(&conv))));
    check("ConversationList", body(Reply::ok(&api::Page { items: vec![conversations::view(&conv)], total: 1 })));
    let found = [Mention::Messages(vec![item.clone()]), Mention::Placeholder(3)];
    let items = found.iter().map(conversations::MentionView::from).collect();
    check("MentionList", body(Reply::ok(&conversations::MentionList { items, has_more: true })));
}

#[test]
fn the_knowledge_base_views_match_their_schemas() {
    let e = entry();
    check("KnowledgeBaseEntry", json(knowledge_base::view(&e)));
    check("KnowledgeBaseList", body(Reply::ok(&api::Page { items: vec![knowledge_base::view(&e)], total: 1 })));
    let text = KbText { raw: "Green tea.".into(), processed: "Green tea.".into() };
    let chunks = [Chunk { title: "Tea".into(), text: "Green tea.".into(), page: None }];
    check("KnowledgeBaseEntryFull", body(Reply::ok(&knowledge_base::full_view(&e, &text, &chunks))));
    let created = Created { id: 43 << 10, kind: KbKind::File, upload: Some(("tok".into(), T)) };
    let result = knowledge_base::created_view(&created, Some("http://localhost/v1/knowledge-base/uploads/tok".into()));
    check("KnowledgeBaseCreated", body(Reply::success(207, &knowledge_base::Results { results: vec![result] })));
    let up = Uploaded { entry: 43 << 10, size: 10, mime_type: "application/pdf".into() };
    check("UploadDone", body(Reply::ok(&knowledge_base::UploadedView::from(&up))));
    check("FileTypes", body(Reply::ok(&knowledge_base::file_types_view("at most 10 bytes per file"))));
}

#[test]
fn the_user_usage_and_analytics_views_match_their_schemas() {
    check("UserResponse", body(Reply::ok(&users::view(&user()))));
    check("UserUsage", body(Reply::ok(&usage::view(&my_usage()))));
    let days = [("2026-11-26".to_string(), 3)];
    let items = days.iter().map(analytics::DayView::from).collect();
    check("ConversationHistory", body(Reply::ok(&api::Items::<analytics::DayView> { items })));
    let items = [("web", 3)].iter().map(analytics::SourceCountView::from).collect();
    check("ConversationSources", body(Reply::ok(&api::Items::<analytics::SourceCountView> { items })));
}

#[test]
fn the_health_embed_and_model_views_match_their_schemas() {
    let report = report();
    check("Readiness", json(health::readiness(&report, "node-1".into())));
    check("HealthCheck", json(health::health_check(&report, crate::api::Timestamp::of(1_764_158_400_000))));
    let key = embed::EmbedKeyView {
        key: "rpl_embed_x".into(),
        replica_uuid: uuid(2),
        allowed_origins: vec!["https://example.com".into()],
    };
    check("EmbedKeyCreated", body(Reply::ok(&key)));
    let secret =
        embed::IdentitySecretView { replica_uuid: uuid(2), identity_secret: format!("rpl_idsec_{}", "a".repeat(64)) };
    check("EmbedIdentitySecretCreated", body(Reply::ok(&secret)));
    let s = source_ref();
    let reply = embed::EmbedReplyView { content: "Green.", sources: vec![history::source_view(&s)], id: Some(7 << 10) };
    check("EmbedChatReply", body(Reply::ok(&reply)));
    let m = message();
    check("EmbedHistory", body(Reply::ok(&api::Items { items: vec![history::view(&m)] })));
    let catalog = crate::models::Models::parse(crate::models::SHIPPED).expect("shipped models");
    check("ModelCatalog", body(Reply::ok(&models::CatalogView { models: &catalog.entries })));
}
