//! Knowledge-base schemas (spec §2.5; DECISIONS.md "Knowledge base").

use serde_json::{json, Value};

use super::{date_time, nullable, object, reference, string, success, uuid};
use crate::service::knowledge;

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

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
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
