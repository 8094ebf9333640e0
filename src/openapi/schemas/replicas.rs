//! Replica schemas (spec §2.3; DECISIONS.md "Replicas").

use serde_json::{json, Value};

use super::{date_time, deprecated, nullable, object, reference, string, success, uuid};

fn llm(read: bool) -> Value {
    let mode = json!({ "type": "string", "enum": ["prompt-caching", "rag-search"], "default": "rag-search" });
    let props = json!({
        "model": { "type": "string", "description": "A key of the model catalog (GET /v1/replicas/models)." },
        "memoryMode": deprecated(mode, "Deprecated (spec §9); stored and returned, no effect."),
        "systemMessage": if read { nullable(string()) } else { json!({ "type": "string", "maxLength": 30000 }) },
        "embeddingModel": if read { nullable(string()) } else { string() },
    });
    if read {
        object(&["model", "memoryMode", "systemMessage", "embeddingModel"], props, false)
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

/// A replica as read; with `success` for the read-one answer.
fn replica_read(with_success: bool) -> Value {
    let strings = json!({ "type": "array", "items": string() });
    let integration = object(&["enabled"], json!({ "enabled": { "type": "boolean" } }), false);
    let distilled = object(
        &["entries", "titles"],
        json!({ "entries": { "type": "integer", "minimum": 0 }, "titles": strings }),
        false,
    );
    let legacy = |s: Value, current: &str| deprecated(s, &format!("Legacy copy of `{current}`."));
    let mut props = json!({
        "uuid": uuid(),
        "name": string(),
        "slug": string(),
        "tags": strings,
        "purpose": nullable(string()),
        "shortDescription": string(),
        "greeting": string(),
        "type": { "type": "string", "enum": ["individual", "character", "brand"] },
        "ownerID": uuid(),
        "private": { "type": "boolean" },
        "whitelistEmails": strings,
        "profileImage": nullable(string()),
        "suggestedQuestions": strings,
        "voicePreviewText": nullable(string()),
        "voice_enabled": { "type": "boolean" },
        "video_enabled": { "type": "boolean" },
        "llm": llm(true),
        "messengerA_integration": integration,
        "messengerB_integration": integration,
        "voiceVendorID": nullable(string()),
        "isAccessibleByCustomerSupport": legacy(json!({ "type": "boolean" }), "isEveryConversationAccessibleBySupport"),
        "isEveryConversationAccessibleBySupport": { "type": "boolean" },
        "isPrivateConversationsEnabled": { "type": "boolean" },
        "distilledKnowledge": {
            "description": "What the knowledge base holds: the entry count and titles (read-one only; null in lists).",
            "oneOf": [distilled, { "type": "null" }],
        },
        "createdAt": date_time(),
        "updatedAt": date_time(),
        "profile_image": legacy(nullable(string()), "profileImage"),
        "short_description": legacy(string(), "shortDescription"),
        "introduction": legacy(string(), "greeting"),
        "owner_uuid": legacy(uuid(), "ownerID"),
        "system_message": legacy(nullable(string()), "llm.systemMessage"),
    });
    if with_success {
        props["success"] = success();
    }
    let required: Vec<String> = props.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let required: Vec<&str> = required.iter().map(String::as_str).collect();
    object(&required, props, false)
}

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
    add("ReplicaWrite", replica_write());
    add("Replica", replica_read(false));
    add("ReplicaRead", replica_read(true));
    add("ReplicaCreated", object(&["success", "uuid"], json!({ "success": success(), "uuid": uuid() }), false));
    add(
        "ReplicaList",
        object(
            &["success", "items", "total"],
            json!({
                "success": success(),
                "items": { "type": "array", "items": reference("Replica") },
                "total": { "type": "integer", "minimum": 0 },
            }),
            false,
        ),
    );
}
