//! Knowledge-base operations (spec §2.5, §4.2; DECISIONS.md "Knowledge base").

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::path_replica;
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::knowledge::{self, NewText, Patch, STATUSES, TYPES};
use crate::service::rfc3339;
use crate::store::records::{Chunk, KbEntry, KbText};

/// Create body: exactly one of `text`, `url`, `filename`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateBody {
    pub text: Option<String>,
    pub url: Option<String>,
    pub filename: Option<String>,
    pub title: Option<String>,
    pub language: Option<String>,
    #[serde(default)]
    pub auto_refresh: bool,
    /// Accepted (spec §8); per-request limits are not applied yet.
    pub usage_limits: Option<Value>,
}

/// PATCH body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PatchBody {
    pub title: Option<String>,
    pub raw_text: Option<String>,
    pub language: Option<String>,
    pub auto_refresh: Option<bool>,
}

/// An entry on the wire (list form).
pub fn view(e: &KbEntry) -> Value {
    json!({
        "id": e.id,
        "replicaUUID": e.replica,
        "type": e.kind,
        "status": e.status,
        "title": e.title,
        "generatedTitle": e.generated_title,
        "summary": e.summary,
        "language": e.language,
        "autoRefresh": e.auto_refresh,
        "url": null,
        "file": null,
        "website": null,
        "error": e.error.as_ref().map(|m| json!({ "message": m, "fingerprint": format!("kb-{}", e.id) })),
        "createdAt": rfc3339(e.created_at),
        "updatedAt": rfc3339(e.updated_at),
    })
}

fn full_view(e: &KbEntry, text: &KbText, chunks: &[Chunk]) -> Value {
    let mut v = view(e);
    v["rawText"] = json!(text.raw);
    v["processedText"] = json!(text.processed);
    v["rawTextChunks"] = json!(chunks
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"index": i, "title": c.title, "content": c.text}))
        .collect::<Vec<_>>());
    v
}

/// # `POST /v1/replicas/{replicaUUID}/knowledge-base`
/// 207 `{success, results: [{type, enqueued, knowledgeBaseID}]}`. `url` and `filename` answer
/// 400 `UNSUPPORTED_KNOWLEDGE_SOURCE` for now (text only).
pub async fn create(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: CreateBody = req.json()?;
    let given = [body.text.is_some(), body.url.is_some(), body.filename.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(Error::invalid("body", "give exactly one of text, url, filename"));
    }
    let Some(text) = body.text else {
        return Err(Error::new(
            Code::UnsupportedKnowledgeSource,
            "only text entries are accepted by this server version; url and filename are not yet supported",
        ));
    };
    let new = NewText { text, title: body.title, language: body.language, auto_refresh: body.auto_refresh };
    let id = knowledge::create_text(&app.store, replica.org, replica.id, new).await?;
    let results = json!([{ "type": "text", "enqueued": true, "knowledgeBaseID": id }]);
    Ok(Reply::success(207, &json!({ "results": results })))
}

/// # `GET /v1/replicas/{replicaUUID}/knowledge-base`
/// `{success, items, total}`; `page`, `pageSize`, filters `status`, `type`, `search` (title).
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let (page, page_size) = super::paging(&req, &["page"], &["pageSize"])?;
    let status = req.query("status").map(str::to_string);
    if status.as_deref().is_some_and(|s| !STATUSES.contains(&s)) {
        return Err(Error::new(Code::InvalidQuery, format!("status must be one of {}", STATUSES.join(", "))));
    }
    let kind = req.query("type").map(str::to_string);
    if kind.as_deref().is_some_and(|t| !TYPES.contains(&t)) {
        return Err(Error::new(Code::InvalidQuery, format!("type must be one of {}", TYPES.join(", "))));
    }
    let search = req.query("search").map(str::to_string).filter(|s| !s.is_empty());
    let q = knowledge::ListQuery { status, kind, search, page, page_size };
    let (items, total) = knowledge::list(&app.store, replica.id, q).await?;
    let items: Vec<Value> = items.iter().map(view).collect();
    Ok(Reply::ok(&json!({ "items": items, "total": total })))
}

/// # `GET /v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}`
/// The entry with `rawText`, `processedText`, `rawTextChunks`; 404 when missing.
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let id = req.id_param("knowledgeBaseID")?;
    let (entry, text, chunks) = knowledge::get(&app.store, replica.id, id).await?;
    Ok(Reply::ok(&full_view(&entry, &text, &chunks)))
}

/// # `PATCH /v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}`
/// `title`, `rawText`, `language`, `autoRefresh`; a new text is re-processed. 200 `{success}`.
pub async fn patch(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let id = req.id_param("knowledgeBaseID")?;
    let b: PatchBody = req.json()?;
    let p = Patch { title: b.title, raw_text: b.raw_text, language: b.language, auto_refresh: b.auto_refresh };
    knowledge::patch(&app.store, replica.id, id, p).await?;
    Ok(Reply::done())
}

/// # `DELETE /v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}`
/// Removes the entry and its index documents; 200 `{success}`; 404 when missing.
pub async fn delete(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let id = req.id_param("knowledgeBaseID")?;
    knowledge::delete(&app.store, replica.id, id).await?;
    Ok(Reply::done())
}

/// # `GET /v1/knowledge-base/file-types`
/// What the server can extract: text only in this version (files are a later issue).
pub async fn file_types(_app: Arc<App>, _req: Req) -> Result<Reply> {
    Ok(Reply::ok(&json!({ "mediaGroups": [{
        "label": "Text",
        "mediaType": "text",
        "limitation": format!("sent inline as `text`, at most {} characters", knowledge::MAX_TEXT_CHARS),
        "fileTypes": [{ "mimeTypes": ["text/plain"], "extensions": [], "supportLevel": "production" }],
    }]})))
}
