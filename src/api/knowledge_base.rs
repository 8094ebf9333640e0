//! Knowledge-base operations (spec §2.5, §4.2; DECISIONS.md "Knowledge base").

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{path_replica, set_some};
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::ingest::formats::FORMATS;
use crate::service::knowledge::{self, Content, EntryView, Limits, NewEntry, Patch, Sort, SORTS, STATUSES, TYPES};
use crate::service::{rfc3339, uploads};
use crate::store::records::{Chunk, KbKind, KbStatus, KbText};
use hyper::header::{CONTENT_TYPE, HOST};

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
    pub usage_limits: Option<UsageLimits>,
}

/// `usageLimits` of the create body: the caller's own caps (spec §8).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageLimits {
    /// Most knowledge-base entries the organization may have; creating beyond it answers 400
    /// `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`.
    pub knowledge_base_entries: Option<u64>,
}

/// PATCH body. Fields it does not change (a client may send the whole entry back) are ignored
/// (DECISIONS.md "Common": bodies are closed only where the interface says so).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchBody {
    pub title: Option<String>,
    pub raw_text: Option<String>,
    pub language: Option<String>,
    pub auto_refresh: Option<bool>,
}

/// An entry on the wire (list form); absent optional values are omitted, never `null`
/// (DECISIONS.md "Knowledge base").
pub fn view(v: &EntryView) -> Value {
    let (e, s) = (&v.entry, &v.source);
    let mut out = json!({
        "id": e.id,
        "replicaUUID": e.replica,
        "type": e.kind,
        "status": e.status,
        "summary": e.summary,
        "autoRefresh": e.auto_refresh,
        "chunkCount": e.chunk_count,
        "createdAt": rfc3339(e.created_at),
        "updatedAt": rfc3339(e.updated_at),
    });
    set_some(&mut out, "title", e.title.as_ref());
    set_some(&mut out, "generatedTitle", e.generated_title.as_ref());
    set_some(&mut out, "language", e.language.as_ref());
    set_some(&mut out, "detectedLanguage", s.detected_language.as_ref());
    set_some(&mut out, "url", s.url.as_ref());
    set_some(&mut out, "format", s.format.as_ref());
    set_some(
        &mut out,
        "file",
        s.file.as_ref().map(|f| json!({ "name": f.name, "size": f.size, "mimeType": f.mime_type })),
    );
    set_some(
        &mut out,
        "website",
        s.website.as_ref().map(|w| {
            let mut site = json!({
                "finalURL": w.final_url,
                "httpStatus": w.status,
                "contentType": w.content_type,
                "fetchedAt": rfc3339(w.fetched_at),
            });
            set_some(&mut site, "pageTitle", w.page_title.as_ref());
            site
        }),
    );
    let fingerprint = format!("kb-{}-{}", e.id, e.revision);
    set_some(&mut out, "error", e.error.as_ref().map(|m| json!({ "message": m, "fingerprint": fingerprint })));
    out
}

fn full_view(v: &EntryView, text: &KbText, chunks: &[Chunk]) -> Value {
    let mut out = view(v);
    out["rawText"] = json!(text.raw);
    out["processedText"] = json!(text.processed);
    out["rawTextChunks"] = json!(chunks
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"index": i, "title": c.title, "content": c.text}))
        .collect::<Vec<_>>());
    out
}

fn content_of(body: &CreateBody) -> Result<Content> {
    match (&body.text, &body.url, &body.filename) {
        (Some(t), None, None) => Ok(Content::Text(t.clone())),
        (None, Some(u), None) => Ok(Content::Url(u.clone())),
        (None, None, Some(f)) => Ok(Content::Filename(f.clone())),
        _ => Err(Error::invalid("body", "give exactly one of text, url, filename")),
    }
}

/// The absolute signed URL of upload `token`: `--public-url`, else `http://` + `Host`.
fn signed_url(app: &App, req: &Req, token: &str) -> String {
    let base = app.config.public_url.clone().unwrap_or_else(|| {
        let host = req.headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
        format!("http://{host}")
    });
    format!("{}{}{token}", base.trim_end_matches('/'), uploads::PATH_PREFIX)
}

/// # `POST /v1/replicas/{replicaUUID}/knowledge-base`
/// 207 `{success, results: [{type, enqueued: true, knowledgeBaseID, signedURL?}]}`; the
/// entry's status then moves as the pipeline works (see `ingest::pipeline`). 400 for an invalid
/// body, 409 `URL_ALREADY_EXISTS`, 429 / 400 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`.
pub async fn create(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: CreateBody = req.json()?;
    let new = NewEntry {
        content: content_of(&body)?,
        title: body.title,
        language: body.language,
        auto_refresh: body.auto_refresh,
        custom_limit: body.usage_limits.and_then(|u| u.knowledge_base_entries),
    };
    let c = &app.config;
    let limits = Limits {
        max_entries_per_org: c.max_kb_entries_per_org,
        max_file_bytes: c.max_upload_bytes as u64,
        upload_ttl_ms: UPLOAD_TTL_MS,
    };
    let created = knowledge::create(&app.store, replica.org, replica.id, new, limits).await?;
    let mut result = json!({ "type": created.kind, "enqueued": true, "knowledgeBaseID": created.id });
    if let Some((token, expires_at)) = &created.upload {
        result["signedURL"] = json!(signed_url(&app, &req, token));
        result["signedURLExpiresAt"] = json!(rfc3339(*expires_at));
    }
    Ok(Reply::success(207, &json!({ "results": [result] })))
}

/// Lifetime of a signed upload URL: one hour, in milliseconds.
const UPLOAD_TTL_MS: i64 = 60 * 60 * 1000;

/// # `PUT /v1/knowledge-base/uploads/{token}`
/// The bytes of a `file` entry, sent to the `signedURL` its create answered (the token is the
/// credential; single use; expires after an hour; at most `--max-upload-bytes`). 200
/// `{success, knowledgeBaseID, size, mimeType, status: "FILE_UPLOADED"}`; 404 unknown token,
/// 409 `UPLOAD_ALREADY_USED`, 400 `UPLOAD_EXPIRED`, 413 too large.
pub async fn upload(app: Arc<App>, req: Req) -> Result<Reply> {
    let token = req.param("token").to_string();
    let ct = req.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let up = uploads::upload(&app.store, &token, req.body.clone(), ct).await?;
    Ok(Reply::ok(&json!({
        "knowledgeBaseID": up.entry,
        "size": up.size,
        "mimeType": up.mime_type,
        "status": KbStatus::FileUploaded,
    })))
}

fn parse_sort(raw: Option<&str>) -> Result<Sort> {
    let Some(raw) = raw else { return Ok(Sort::default()) };
    let (descending, name) = match raw.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    let key = SORTS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k).ok_or_else(|| {
        let names: Vec<&str> = SORTS.iter().map(|(n, _)| *n).collect();
        Error::new(Code::InvalidQuery, format!("sort must be one of {} (prefix - for descending)", names.join(", ")))
    })?;
    Ok(Sort { key, descending })
}

fn one_of(req: &Req, name: &str, allowed: &[&str]) -> Result<Option<String>> {
    match req.query(name) {
        Some(v) if !allowed.contains(&v) => {
            Err(Error::new(Code::InvalidQuery, format!("{name} must be one of {}", allowed.join(", "))))
        }
        v => Ok(v.map(str::to_string)),
    }
}

/// # `GET /v1/replicas/{replicaUUID}/knowledge-base`
/// `{success, items, total}`; `page`, `pageSize`; filters `status`, `type`, `search` (title,
/// URL or file name), `hasError` (`true|false`); `sort` (`createdAt` default, `updatedAt`,
/// `title`, `status`; `-` prefix for descending).
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let (page, page_size) = super::paging(&req, &["page"], &["pageSize"])?;
    let status = one_of(&req, "status", STATUSES)?.and_then(|s| KbStatus::parse(&s));
    let kind = one_of(&req, "type", TYPES)?.and_then(|t| KbKind::parse(&t));
    let has_error = one_of(&req, "hasError", &["true", "false"])?.map(|v| v == "true");
    let search = req.query("search").map(str::to_string).filter(|s| !s.is_empty());
    let sort = parse_sort(req.query("sort"))?;
    let q = knowledge::ListQuery { status, kind, search, has_error, sort, page, page_size };
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
/// Exactly the formats `ingest::extract` reads, grouped by `mediaGroups[].label`.
pub async fn file_types(app: Arc<App>, _req: Req) -> Result<Reply> {
    let limit = format!("at most {} bytes per file", app.config.max_upload_bytes);
    let mut groups: Vec<Value> = Vec::new();
    for f in FORMATS {
        let row = json!({ "mimeTypes": f.mime_types, "extensions": f.extensions, "supportLevel": f.support });
        match groups.iter_mut().find(|g| g["label"] == f.group) {
            Some(g) => g["fileTypes"].as_array_mut().into_iter().for_each(|a| a.push(row.clone())),
            None => groups.push(json!({
                "label": f.group,
                "mediaType": f.media_type,
                "limitation": limit,
                "fileTypes": [row],
            })),
        }
    }
    Ok(Reply::ok(&json!({ "mediaGroups": groups })))
}
