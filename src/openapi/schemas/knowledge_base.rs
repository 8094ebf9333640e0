//! Knowledge-base schemas (spec §2.5; docs/decisions.md "Knowledge base"). Absent optional
//! values of an entry are omitted, never `null`.

use serde_json::{json, Value};

use super::{date_time, described, object, page_of, sparse_id, string, success, uuid};
use crate::ingest::formats::MEDIA_TYPES;
use crate::service::knowledge;

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
    add("KnowledgeBaseCreate", create());
    add("KnowledgeBaseCreated", created());
    add("UploadBody", json!({ "type": "string", "format": "binary", "description": "The file's bytes." }));
    add("UploadDone", upload_done());
    add("KnowledgeBasePatch", patch());
    add("KnowledgeBaseEntry", kb_entry(false));
    add("KnowledgeBaseEntryFull", kb_entry(true));
    add("KnowledgeBaseList", page_of("KnowledgeBaseEntry"));
    add("FileTypes", file_types());
}

fn language() -> Value {
    json!({ "type": "string", "enum": knowledge::LANGUAGES, "description": "ISO 639-1 (spec §2.5)." })
}

fn entry_error() -> Value {
    object(&["message", "fingerprint"], json!({ "message": string(), "fingerprint": string() }), false)
}

fn entry_file() -> Value {
    object(
        &["name", "size", "mimeType"],
        json!({
            "name": string(),
            "size": { "type": "integer", "minimum": 0, "description": "Bytes; 0 until uploaded." },
            "mimeType": string(),
        }),
        false,
    )
}

fn entry_website() -> Value {
    object(
        &["finalURL", "httpStatus", "contentType", "fetchedAt"],
        json!({
            "finalURL": { "type": "string", "description": "The URL after redirects." },
            "httpStatus": { "type": "integer" },
            "contentType": string(),
            "pageTitle": { "type": "string", "description": "Omitted when the page has none." },
            "fetchedAt": date_time(),
        }),
        false,
    )
}

/// An entry as listed; `full` adds `success` and the texts of the read-one answer.
fn kb_entry(full: bool) -> Value {
    let mut required =
        vec!["id", "replicaUUID", "type", "status", "summary", "autoRefresh", "chunkCount", "createdAt", "updatedAt"];
    let mut props = json!({
        "id": sparse_id(""),
        "replicaUUID": uuid(),
        "type": { "type": "string", "enum": knowledge::TYPES },
        "status": {
            "type": "string",
            "enum": knowledge::STATUSES,
            "description": "Processing status, in order `NEW`, `FILE_UPLOADED`, `RAW_TEXT`, `PROCESSED_TEXT`, \
                `VECTOR_CREATED`, `READY`; `UNPROCESSABLE` on failure (see `error`). `VECTOR_CREATED` and `READY` \
                both mean searchable: from the moment an entry reports either, every completion and retrieval sees \
                its chunks. This server writes `READY` only after the index commit holding them is visible to \
                searches (`VECTOR_CREATED` is only seen on entries stored by older versions); earlier statuses \
                mean not yet searchable."
        },
        "title": { "type": "string", "description": "Omitted when not given." },
        "generatedTitle": { "type": "string", "description": "Omitted until one is derived from the text." },
        "summary": string(),
        "language": described(language(), "ISO 639-1; omitted when not given."),
        "detectedLanguage": {
            "type": "string",
            "description": "Ours: ISO 639-1 code detected from the text (picks the analyzer when `language` is \
                absent); omitted until detected.",
        },
        "autoRefresh": { "type": "boolean" },
        "url": { "type": "string", "description": "For `website` and `youtube` entries." },
        "file": described(entry_file(), "For `file` entries."),
        "website": described(entry_website(), "For `website` entries, once fetched."),
        "format": {
            "type": "string",
            "description": "Ours: extraction format of a file or page (`pdf`, `docx`, `epub`, `html`, `markdown`, \
                `text`, `csv`, `json`); omitted until known.",
        },
        "chunkCount": { "type": "integer", "minimum": 0 },
        "error": described(entry_error(), "For `UNPROCESSABLE` entries."),
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
        required.extend(["success", "rawText", "processedText", "rawTextChunks"]);
    }
    object(&required, props, false)
}

fn create() -> Value {
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
            "language": language(),
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
    )
}

fn created() -> Value {
    let enqueued = object(
        &["type", "enqueued", "knowledgeBaseID"],
        json!({
            "type": { "type": "string", "enum": knowledge::TYPES },
            "enqueued": { "const": true },
            "knowledgeBaseID": sparse_id(""),
            "signedURL": {
                "type": "string",
                "description": "For `filename`: PUT the file's bytes here (single use, one hour).",
            },
            "signedURLExpiresAt": date_time(),
        }),
        false,
    );
    let refused = object(
        &["type", "enqueued", "error"],
        json!({ "type": string(), "enqueued": { "const": false }, "error": string() }),
        false,
    );
    object(
        &["success", "results"],
        json!({ "success": success(), "results": { "type": "array", "items": { "oneOf": [enqueued, refused] } } }),
        false,
    )
}

fn upload_done() -> Value {
    object(
        &["success", "knowledgeBaseID", "size", "mimeType", "status"],
        json!({
            "success": success(),
            "knowledgeBaseID": sparse_id(""),
            "size": { "type": "integer", "minimum": 1 },
            "mimeType": string(),
            "status": { "const": "FILE_UPLOADED" },
        }),
        false,
    )
}

fn patch() -> Value {
    object(
        &[],
        json!({
            "title": string(),
            "rawText": { "type": "string", "minLength": 1 },
            "language": language(),
            "autoRefresh": { "type": "boolean" },
        }),
        true,
    )
}

fn file_types() -> Value {
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
            "mediaType": { "type": "string", "enum": MEDIA_TYPES },
            "limitation": string(),
            "fileTypes": { "type": "array", "items": file_type },
        }),
        false,
    );
    object(
        &["success", "mediaGroups"],
        json!({ "success": success(), "mediaGroups": { "type": "array", "items": group } }),
        false,
    )
}
