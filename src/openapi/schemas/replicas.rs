//! Replica schemas (spec §2.3; docs/decisions.md "Replicas").

use serde_json::{json, Value};

use crate::service::channel::Bot;

use super::{date_time, deprecated, described, nullable, object, reference, string, success, uuid};

fn llm(read: bool) -> Value {
    let mode = json!({ "type": "string", "enum": ["prompt-caching", "rag-search"], "default": "rag-search" });
    let props = json!({
        "model": { "type": "string", "description": "A key of the model catalog (GET /v1/replicas/models)." },
        "memoryMode": deprecated(mode, "Deprecated (spec §9); stored and returned, no effect."),
        "systemMessage": if read { string() } else { json!({ "type": "string", "maxLength": 30000 }) },
        "embeddingModel": described(
            string(),
            "The embedding model the replica's knowledge base is searched with (hybrid retrieval: BM25 and \
             vectors). Ours: an id of the operator's embedding-model catalog (`replicad serve --embedding-models`); \
             absent on create → the catalog's default, stored; an id not in the catalog → 400 naming its ids. A \
             catalog entry may declare aliases (a hosted catalog's ids, such as `multilingual-e5-large`) that it \
             serves: a replica created with an alias is embedded by that entry and reads back the alias it was \
             given. As \
             the hosted service, it cannot be changed once set: a replacement naming another → 409 \
             EMBEDDING_MODEL_FIXED (absent → kept). With no catalog configured, retrieval is BM25 alone and the \
             value is stored as given.",
        ),
    });
    if read {
        object(&["model", "memoryMode"], props, false)
    } else {
        object(&[], props, true)
    }
}

fn replica_write() -> Value {
    let text = |max: u32| json!({ "type": "string", "maxLength": max });
    let strings = json!({ "type": "array", "items": string() });
    let legacy = |s: Value, current: &str| deprecated(s, &format!("Legacy name of `{current}`."));
    object(
        &["name", "shortDescription", "greeting", "ownerID", "slug", "llm"],
        json!({
            "name": { "type": "string", "minLength": 1, "maxLength": 50 },
            "shortDescription": text(50),
            "greeting": text(600),
            "ownerID": {
                "type": "string",
                "description": "The owner: a user id or the e-mail address of a user of the organization.",
            },
            "slug": {
                "type": "string",
                "minLength": 1,
                "maxLength": 50,
                "description": "Unique per organization (409 SLUG_TAKEN).",
            },
            "llm": llm(false),
            "purpose": text(1000),
            "type": { "type": "string", "enum": ["individual", "character", "brand"], "default": "character" },
            "private": {
                "type": "boolean",
                "default": false,
                "description": "A private replica is visible only to its owner and to users whose e-mail is in \
                    whitelistEmails; to others it does not exist (404).",
            },
            "tags": strings,
            "suggestedQuestions": strings,
            "whitelistEmails": { "type": "array", "items": { "type": "string", "format": "email" }, "default": [] },
            "profileImage": { "type": "string", "format": "uri" },
            "voicePreviewText": text(400),
            "voice_enabled": { "type": "boolean", "description": "Beta." },
            "video_enabled": { "type": "boolean", "description": "Beta." },
            "isEveryConversationAccessibleBySupport": { "type": "boolean" },
            "isPrivateConversationsEnabled": { "type": "boolean", "default": true },
            "voiceVendorID": string(),
            "isAccessibleByCustomerSupport":
                legacy(json!({ "type": "boolean" }), "isEveryConversationAccessibleBySupport"),
            "short_description": legacy(text(50), "shortDescription"),
            "introduction": legacy(text(600), "greeting"),
            "owner_uuid": legacy(string(), "ownerID"),
            "profile_image": legacy(string(), "profileImage"),
            "system_message": legacy(text(30000), "llm.systemMessage"),
        }),
        true,
    )
}

/// The fields of a replica as read and listed, and whether each is always present.
fn replica_fields() -> Vec<(&'static str, Value, bool)> {
    let strings = json!({ "type": "array", "items": string() });
    let legacy = |s: Value, current: &str| deprecated(s, &format!("Legacy copy of `{current}`."));
    let count = json!({ "type": "integer", "minimum": 0 });
    let kb = object(&["entries", "titles"], json!({ "entries": count, "titles": strings }), false);
    let mut fields = vec![
        ("uuid", uuid(), true),
        ("name", string(), true),
        ("slug", string(), true),
        ("tags", strings.clone(), true),
        ("purpose", string(), false),
        ("shortDescription", string(), true),
        ("greeting", string(), true),
        ("type", json!({ "type": "string", "enum": ["individual", "character", "brand"] }), true),
        ("ownerID", described(string(), "The owner's user id (see `User.id`)."), true),
        ("private", json!({ "type": "boolean" }), true),
        ("whitelistEmails", strings.clone(), true),
        ("profileImage", string(), false),
        ("suggestedQuestions", strings, true),
        ("voicePreviewText", string(), false),
        ("voice_enabled", json!({ "type": "boolean" }), true),
        ("video_enabled", json!({ "type": "boolean" }), true),
        ("llm", llm(true), true),
        ("voiceVendorID", string(), false),
        (
            "isAccessibleByCustomerSupport",
            legacy(json!({ "type": "boolean" }), "isEveryConversationAccessibleBySupport"),
            true,
        ),
        ("isEveryConversationAccessibleBySupport", json!({ "type": "boolean" }), true),
        ("isPrivateConversationsEnabled", json!({ "type": "boolean" }), true),
        (
            "distilledKnowledge",
            json!({
                "type": "string",
                "description": "What the knowledge base covers: its entry count and first titles, e.g. \
                    `3 knowledge-base entries: Pricing; Opening hours; Returns.`; empty when it has none.",
            }),
            true,
        ),
        (
            "knowledgeBase",
            described(
                kb,
                "Ours: the counts behind distilledKnowledge (entries of every status; the titles of the first \
                    100 that have one, in creation order).",
            ),
            true,
        ),
        ("createdAt", date_time(), true),
        ("updatedAt", date_time(), true),
        ("created_at", legacy(date_time(), "createdAt"), true),
        (
            "profile_image",
            described(nullable(legacy(string(), "profileImage")), "`null` when the replica has no profile image."),
            true,
        ),
        ("short_description", legacy(string(), "shortDescription"), true),
        ("introduction", legacy(string(), "greeting"), true),
        ("owner_uuid", legacy(string(), "ownerID"), true),
        ("chat_history_count", json!({ "type": "integer", "minimum": 0, "description": "Chat history items." }), true),
        (
            "system_message",
            described(legacy(string(), "llm.systemMessage"), "`\"\"` when the replica has no system message."),
            true,
        ),
    ];
    let at = fields.iter().position(|f| f.0 == "llm").map_or(fields.len(), |i| i + 1);
    let bots = Bot::ALL.map(|b| (b.integration_field(), super::super::integrations::integration_object(), true));
    fields.splice(at..at, bots);
    fields
}

/// A replica as read; with `success` for the read-one answer.
fn replica_read(with_success: bool) -> Value {
    let mut fields = replica_fields();
    if with_success {
        fields.push(("success", success(), true));
    }
    let required: Vec<&str> = fields.iter().filter(|f| f.2).map(|f| f.0).collect();
    let props: serde_json::Map<String, Value> = fields.iter().map(|(n, s, _)| (n.to_string(), s.clone())).collect();
    object(&required, Value::Object(props), false)
}

/// `{success, type, items, total}`: the hosted document requires `type` in this answer.
fn replica_list() -> Value {
    object(
        &["success", "type", "items", "total"],
        json!({
            "success": success(),
            "type": { "type": "string", "const": "replicas", "description": "What the items are (always `replicas`)." },
            "items": { "type": "array", "items": reference("Replica") },
            "total": { "type": "integer", "minimum": 0 },
        }),
        false,
    )
}

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
    add("ReplicaWrite", replica_write());
    add("Replica", replica_read(false));
    add("ReplicaRead", replica_read(true));
    add("ReplicaCreated", object(&["success", "uuid"], json!({ "success": success(), "uuid": uuid() }), false));
    add("ReplicaList", replica_list());
}
