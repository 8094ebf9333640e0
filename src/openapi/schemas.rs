//! `components.schemas` of the OpenAPI document: every request and response body, written from
//! the wire DTOs of `src/api` (the integration tests validate every JSON response they receive
//! against these, so a field added to a view without its schema fails a test).
//!
//! Response objects are closed (`additionalProperties: false`): the document lists every field
//! the server sends. Request objects are closed where the server rejects unknown fields (spec
//! "no extra fields"), open where it ignores them (DECISIONS.md "Common").

use serde_json::{json, Map, Value};

use crate::models::Models;
use crate::service::{history::SOURCES, knowledge};

/// An object schema with `required` fields, closed unless `open`.
pub fn object(required: &[&str], properties: Value, open: bool) -> Value {
    json!({
        "type": "object",
        "required": required,
        "properties": properties,
        "additionalProperties": open,
    })
}

/// `schema` or `null`.
pub fn nullable(schema: Value) -> Value {
    json!({ "oneOf": [schema, { "type": "null" }] })
}

/// A reference to `components.schemas.name`.
pub fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn string() -> Value {
    json!({ "type": "string" })
}

fn date_time() -> Value {
    json!({ "type": "string", "format": "date-time" })
}

fn uuid() -> Value {
    json!({ "type": "string", "format": "uuid" })
}

fn deprecated(mut schema: Value, note: &str) -> Value {
    schema["deprecated"] = json!(true);
    schema["description"] = json!(note);
    schema
}

fn success() -> Value {
    json!({ "type": "boolean", "const": true })
}

/// Every schema, by name.
pub fn all(models: &Models) -> Map<String, Value> {
    let mut s = Map::new();
    let mut add = |name: &str, schema: Value| {
        s.insert(name.to_string(), schema);
    };
    add("Done", object(&["success"], json!({ "success": success() }), false));
    add("OpenApiDocument", json!({ "type": "object", "description": "This document." }));
    invites(&mut add);
    add("ModelCatalog", model_catalog(models));
    add("ModelCatalogArray", model_catalog_array());
    add(
        "ModelCatalogResponse",
        json!({
            "description": "ModelCatalog; ModelCatalogArray with X-API-Version 2024-03-01.",
            "oneOf": [reference("ModelCatalog"), reference("ModelCatalogArray")],
        }),
    );
    replicas(&mut add);
    knowledge_base(&mut add);
    chat(&mut add);
    users(&mut add);
    super::integrations::schemas(&mut add);
    s
}

fn invites(add: &mut impl FnMut(&str, Value)) {
    let text = json!({ "type": "string", "minLength": 1, "maxLength": 100 });
    add(
        "RedeemRequest",
        object(
            &["organizationName", "name", "email"],
            json!({
                "organizationName": text,
                "name": { "type": "string", "minLength": 1, "maxLength": 100, "description": "Contact name." },
                "email": {
                    "type": "string",
                    "format": "email",
                    "description": "Contact address; becomes the organization's owner user.",
                },
            }),
            false,
        ),
    );
    add(
        "Redeemed",
        object(
            &["success", "apiKey", "organizationID", "validUntil"],
            json!({
                "success": success(),
                "apiKey": {
                    "type": "string",
                    "description": "The organization's API key; shown only here (stored hashed).",
                },
                "organizationID": uuid(),
                "validUntil": nullable(date_time()),
            }),
            false,
        ),
    );
}

fn model_catalog(models: &Models) -> Value {
    let model = object(
        &["name", "description", "deprecated"],
        json!({ "name": string(), "description": string(), "deprecated": { "type": "boolean", "default": false } }),
        false,
    );
    let ids: Vec<&String> = models.entries.keys().collect();
    let properties: Map<String, Value> = ids.iter().map(|id| (id.to_string(), model.clone())).collect();
    let catalog = json!({
        "type": "object",
        "description": "Exactly 19 entries (spec §2.4), keyed by model id; loaded from data/models.json.",
        "required": ids,
        "properties": properties,
        "additionalProperties": false,
    });
    object(&["success", "models"], json!({ "success": success(), "models": catalog }), false)
}

fn model_catalog_array() -> Value {
    let model = object(
        &["id", "name", "description", "deprecated"],
        json!({ "id": string(), "name": string(), "description": string(), "deprecated": { "type": "boolean" } }),
        false,
    );
    let list = json!({ "type": "array", "minItems": 19, "maxItems": 19, "items": model });
    object(&["success", "models"], json!({ "success": success(), "models": list }), false)
}

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
    let integration = super::integrations::integration_object();
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

fn replicas(add: &mut impl FnMut(&str, Value)) {
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

fn kb_entry(full: bool) -> Value {
    let error = object(&["message", "fingerprint"], json!({ "message": string(), "fingerprint": string() }), false);
    let mut props = json!({
        "id": { "type": "integer", "minimum": 1 },
        "replicaUUID": uuid(),
        "type": { "type": "string", "enum": knowledge::TYPES },
        "status": { "type": "string", "enum": knowledge::STATUSES },
        "title": nullable(string()),
        "generatedTitle": nullable(string()),
        "summary": string(),
        "language": nullable(json!({ "type": "string", "enum": knowledge::LANGUAGES })),
        "detectedLanguage": nullable(json!({
            "type": "string",
            "description": "ISO 639-1 code detected from the text (picks the analyzer when `language` is null).",
        })),
        "autoRefresh": { "type": "boolean" },
        "url": nullable(string()),
        "file": nullable(object(
            &["name", "size", "mimeType"],
            json!({
                "name": string(),
                "size": { "type": "integer", "minimum": 0, "description": "Bytes; 0 until uploaded." },
                "mimeType": string(),
            }),
            false,
        )),
        "website": nullable(object(
            &["finalURL", "httpStatus", "contentType", "pageTitle", "fetchedAt"],
            json!({
                "finalURL": { "type": "string", "description": "The URL after redirects." },
                "httpStatus": { "type": "integer" },
                "contentType": string(),
                "pageTitle": nullable(string()),
                "fetchedAt": date_time(),
            }),
            false,
        )),
        "format": nullable(json!({
            "type": "string",
            "description": "Extraction format of a file or page (`pdf`, `docx`, `epub`, `html`, `markdown`, `text`, \
                `csv`, `json`).",
        })),
        "chunkCount": { "type": "integer", "minimum": 0 },
        "error": nullable(error),
        "createdAt": date_time(),
        "updatedAt": date_time(),
    });
    if full {
        let chunk = object(
            &["index", "title", "content"],
            json!({ "index": { "type": "integer", "minimum": 0 }, "title": string(), "content": string() }),
            false,
        );
        props["success"] = success();
        props["rawText"] = string();
        props["processedText"] = string();
        props["rawTextChunks"] = json!({ "type": "array", "items": chunk });
    }
    let required: Vec<String> = props.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let required: Vec<&str> = required.iter().map(String::as_str).collect();
    object(&required, props, false)
}

fn knowledge_base(add: &mut impl FnMut(&str, Value)) {
    let language = json!({ "type": "string", "enum": knowledge::LANGUAGES, "description": "ISO 639-1 (spec §2.5)." });
    add(
        "KnowledgeBaseCreate",
        object(
            &[],
            json!({
                "text": { "type": "string", "minLength": 1, "maxLength": knowledge::MAX_TEXT_CHARS },
                "url": {
                    "type": "string",
                    "maxLength": 2048,
                    "description": "An http(s) page, fetched in the background (`type` `website`; a YouTube URL is \
                        type `youtube` and ends `UNPROCESSABLE`: transcripts cannot be had). Unique per replica \
                        (409 `URL_ALREADY_EXISTS`; the fragment is ignored).",
                },
                "filename": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 255,
                    "description": "A file to upload (`type` `file`): the answer carries `signedURL`; PUT the bytes \
                        there. Only the last path component is kept.",
                },
                "title": { "type": "string", "minLength": 1, "maxLength": 200 },
                "language": language,
                "autoRefresh": {
                    "type": "boolean",
                    "default": false,
                    "description": "For a `url`: fetch the page again every `--kb-refresh-interval` (24 h by default) \
                        and re-process it when its text changed.",
                },
                "usageLimits": object(
                    &[],
                    json!({ "knowledgeBaseEntries": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "The caller's own cap on the organization's entries: creating beyond it \
                            answers 400 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`.",
                    }}),
                    true,
                ),
            }),
            true,
        ),
    );
    let enqueued = object(
        &["type", "enqueued", "knowledgeBaseID"],
        json!({
            "type": { "type": "string", "enum": knowledge::TYPES },
            "enqueued": { "const": true },
            "knowledgeBaseID": { "type": "integer", "minimum": 1 },
            "signedURL": {
                "type": "string",
                "description": "For `filename`: PUT the file's bytes here (single use, one hour).",
            },
            "signedURLExpiresAt": date_time(),
        }),
        false,
    );
    add("UploadBody", json!({ "type": "string", "format": "binary", "description": "The file's bytes." }));
    add(
        "UploadDone",
        object(
            &["success", "knowledgeBaseID", "size", "mimeType", "status"],
            json!({
                "success": success(),
                "knowledgeBaseID": { "type": "integer", "minimum": 1 },
                "size": { "type": "integer", "minimum": 1 },
                "mimeType": string(),
                "status": { "const": "FILE_UPLOADED" },
            }),
            false,
        ),
    );
    let refused = object(
        &["type", "enqueued", "error"],
        json!({ "type": string(), "enqueued": { "const": false }, "error": string() }),
        false,
    );
    add(
        "KnowledgeBaseCreated",
        object(
            &["success", "results"],
            json!({ "success": success(), "results": { "type": "array", "items": { "oneOf": [enqueued, refused] } } }),
            false,
        ),
    );
    add(
        "KnowledgeBasePatch",
        object(
            &[],
            json!({
                "title": string(),
                "rawText": { "type": "string", "minLength": 1 },
                "language": language,
                "autoRefresh": { "type": "boolean" },
            }),
            false,
        ),
    );
    add("KnowledgeBaseEntry", kb_entry(false));
    add("KnowledgeBaseEntryFull", kb_entry(true));
    add(
        "KnowledgeBaseList",
        object(
            &["success", "items", "total"],
            json!({
                "success": success(),
                "items": { "type": "array", "items": reference("KnowledgeBaseEntry") },
                "total": { "type": "integer", "minimum": 0 },
            }),
            false,
        ),
    );
    let file_type = object(
        &["mimeTypes", "extensions", "supportLevel"],
        json!({
            "mimeTypes": { "type": "array", "items": string() },
            "extensions": { "type": "array", "items": string() },
            "supportLevel": { "type": "string", "enum": ["production", "preview", "disabled"] },
        }),
        false,
    );
    let group = object(
        &["label", "mediaType", "limitation", "fileTypes"],
        json!({
            "label": string(),
            "mediaType": string(),
            "limitation": string(),
            "fileTypes": { "type": "array", "items": file_type },
        }),
        false,
    );
    add(
        "FileTypes",
        object(
            &["success", "mediaGroups"],
            json!({ "success": success(), "mediaGroups": { "type": "array", "items": group } }),
            false,
        ),
    );
}

fn chat(add: &mut impl FnMut(&str, Value)) {
    let source = json!({ "type": "string", "enum": SOURCES });
    let content = json!({ "type": "string", "minLength": 1, "maxLength": 100000 });
    let opt = string();
    add(
        "MessengerBData",
        object(
            &["channel_id", "channel_name", "author_id", "author_name", "message_id"],
            json!({
                "channel_id": { "type": "string", "minLength": 1, "maxLength": 100 }, "channel_name": string(),
                "author_id": { "type": "string", "minLength": 1, "maxLength": 100 }, "author_name": string(),
                "message_id": { "type": "string", "minLength": 1, "maxLength": 100 },
                "created_at": opt, "server_id": opt, "server_name": opt,
            }),
            false,
        ),
    );
    add(
        "MessengerAData",
        object(
            &["chat_type", "chat_id", "message_id"],
            json!({
                "chat_type": { "type": "string", "enum": ["private", "group", "supergroup", "channel"] },
                "chat_id": { "type": "integer" },
                "chat_name": string(),
                "user_id": { "type": "integer", "description": "May be absent for channel messages." },
                "username": string(),
                "message_id": {
                    "type": "integer",
                    "description": "Unique within the chat; a repeated (chat_id, message_id) stores nothing new.",
                },
                "message_thread_id": { "type": "integer", "minimum": 1, "description": "Supergroups only." },
            }),
            false,
        ),
    );
    add(
        "CompletionRequest",
        object(
            &["content"],
            json!({
                "content": content,
                "skip_chat_history": { "type": "boolean", "default": false },
                "source": { "type": "string", "enum": SOURCES, "default": "web" },
                "messengerB_data": reference("MessengerBData"),
                "usageLimits": { "type": "object", "description": "Accepted (spec §8); not applied yet." },
            }),
            true,
        ),
    );
    add("Completion", object(&["success", "content"], json!({ "success": success(), "content": string() }), false));
    add(
        "CompletionMessengerARequest",
        object(
            &["content", "messengerA_data"],
            json!({
                "content": content,
                "messengerA_data": reference("MessengerAData"),
                "imageURL": {
                    "type": "string",
                    "description": "An image with the message; given to models whose catalog entry has `vision`.",
                },
                "skip_chat_history": { "type": "boolean", "default": false },
                "usageLimits": { "type": "object", "description": "Accepted (spec §8); not applied yet." },
            }),
            true,
        ),
    );
    let message = object(
        &["role", "content"],
        json!({ "role": { "type": "string", "enum": ["system", "user", "assistant"] }, "content": string() }),
        true,
    );
    add(
        "ExperimentalCompletionRequest",
        object(
            &["messages"],
            json!({
                "messages": { "type": "array", "minItems": 1, "items": message, "description": "The last one, of \
                    role `user`, is the question; earlier ones are the conversation given to the model." },
                "store": { "type": "boolean", "default": true, "description": "Store the question and the reply." },
                "source": { "type": "string", "enum": SOURCES, "default": "web" },
                "messengerB_data": reference("MessengerBData"),
                "max_tokens": { "type": "integer", "minimum": 1 },
            }),
            true,
        ),
    );
    let tokens = json!({ "type": "integer", "minimum": 0 });
    let choice = object(
        &["index", "message", "finish_reason"],
        json!({
            "index": { "type": "integer", "minimum": 0 },
            "message": object(
                &["role", "content"],
                json!({ "role": { "const": "assistant" }, "content": string() }),
                false,
            ),
            "finish_reason": string(),
        }),
        false,
    );
    add(
        "ExperimentalCompletion",
        object(
            &["id", "created", "object", "model", "choices", "usage"],
            json!({
                "id": string(),
                "created": { "type": "integer", "description": "Unix time, seconds." },
                "object": { "const": "chat.completion" },
                "model": string(),
                "choices": { "type": "array", "items": choice },
                "usage": object(
                    &["prompt_tokens", "completion_tokens", "total_tokens"],
                    json!({ "prompt_tokens": tokens, "completion_tokens": tokens, "total_tokens": tokens }),
                    false,
                ),
            }),
            false,
        ),
    );
    add(
        "HistorySave",
        object(
            &["content"],
            json!({ "content": content, "source": source, "messengerB_data": reference("MessengerBData") }),
            false,
        ),
    );
    add(
        "HistorySaveMessengerA",
        object(
            &["content", "messengerA_data"],
            json!({ "content": content, "messengerA_data": reference("MessengerAData") }),
            false,
        ),
    );
    add(
        "HistorySaved",
        object(
            &["success", "id"],
            json!({ "success": success(), "id": nullable(json!({ "type": "integer", "minimum": 1 })) }),
            false,
        ),
    );
    history_items(add, source);
}

fn history_items(add: &mut impl FnMut(&str, Value), source: Value) {
    add(
        "Source",
        object(
            &["id", "score", "status", "created_at", "name", "content"],
            json!({
                "id": { "type": "integer" }, "score": { "type": "number" },
                "status": { "type": "string", "enum": ["scored", "unscored"] },
                "created_at": date_time(), "name": string(), "content": string(),
            }),
            false,
        ),
    );
    add(
        "ChatHistoryItem",
        object(
            &[
                "content",
                "created_at",
                "id",
                "is_private",
                "role",
                "source",
                "sources",
                "user_uuid",
                "original_message_id",
            ],
            json!({
                "content": string(), "created_at": date_time(),
                "id": { "type": "integer", "minimum": 1, "description": "Increasing in time." },
                "is_private": { "type": "boolean" },
                "role": { "type": "string", "enum": ["user", "assistant"] },
                "source": source,
                "sources": { "type": "array", "items": reference("Source") },
                "user_uuid": uuid(),
                "original_message_id":
                    deprecated(nullable(string()), "Deprecated (spec §2.1); set on assistant items."),
                "interrupted": {
                    "const": true,
                    "description": "Present (true) on a streamed reply whose client disconnected: the item keeps \
                        what was said before the cut.",
                },
                "messengerA_data": reference("MessengerAData"),
                "messengerB_data": reference("MessengerBData"),
            }),
            false,
        ),
    );
    add(
        "ChatHistory",
        object(
            &["success", "type", "items"],
            json!({
                "success": success(),
                "type": { "type": "string", "enum": ["all", "web", "embed", "messengerA", "messengerB"] },
                "items": { "type": "array", "items": reference("ChatHistoryItem") },
            }),
            false,
        ),
    );
}

fn users(add: &mut impl FnMut(&str, Value)) {
    add(
        "UserWrite",
        object(
            &["name"],
            json!({
                "name": { "type": "string", "minLength": 1 },
                "email": {
                    "type": "string",
                    "format": "email",
                    "description": "Unique per organization (409 EMAIL_TAKEN).",
                },
                "profileImage": string(),
            }),
            false,
        ),
    );
    let linked = object(&["type", "id"], json!({ "type": string(), "id": string() }), false);
    let user = object(
        &["id", "name", "email", "profileImage", "linkedAccount", "createdAt", "updatedAt"],
        json!({
            "id": uuid(), "name": string(), "email": nullable(string()), "profileImage": nullable(string()),
            "linkedAccount": nullable(linked), "createdAt": date_time(), "updatedAt": date_time(),
        }),
        false,
    );
    add("User", user);
    add(
        "UserResponse",
        object(&["success", "user"], json!({ "success": success(), "user": reference("User") }), false),
    );
}
