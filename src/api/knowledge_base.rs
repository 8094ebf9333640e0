//! Knowledge-base operations (spec §2.5, §4.2; docs/decisions.md "Knowledge base").

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::path_replica;
use super::query::{self, Int, Named, OneOf, SortOrder, Text};
use super::Page;
use super::Timestamp;
use super::{Operation, Serve};
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::ingest::formats::{FORMATS, MEDIA_TYPES};
use crate::openapi::derived::SparseId;
use crate::openapi::operations::op;
use crate::service::knowledge::uploads;
use crate::service::knowledge::{
    self, Content, Created, EntryView, Limits, NewEntry, Patch, Sort, SortKey, LANGUAGES, MAX_FILENAME_CHARS,
    MAX_TEXT_CHARS, MAX_TITLE_CHARS, MAX_URL_CHARS, SORTS, STATUSES, TYPES,
};
use crate::service::replicas;
use crate::store::records::{Chunk, KbKind, KbStatus, KbText, Replica};
use hyper::header::{CONTENT_TYPE, HOST};

/// `language`'s description in the document.
const LANGUAGE_DOC: &str = "ISO 639-1 (spec §2.5).";

/// Create body: exactly one of `text`, `url`, `filename`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "KnowledgeBaseCreate")]
pub struct CreateBody {
    #[schemars(length(min = 1, max = MAX_TEXT_CHARS))]
    pub text: Option<String>,
    /// An http(s) page, fetched in the background (`type` `website`; a YouTube URL is type
    /// `youtube` and ends `UNPROCESSABLE`: transcripts cannot be had). Unique per replica (409
    /// `URL_ALREADY_EXISTS`; the fragment is ignored).
    #[schemars(length(max = MAX_URL_CHARS))]
    pub url: Option<String>,
    /// A file to upload (`type` `file`): the answer carries `signedURL`; PUT the bytes there.
    /// Only the last path component is kept.
    #[schemars(length(min = 1, max = MAX_FILENAME_CHARS))]
    pub filename: Option<String>,
    #[schemars(length(min = 1, max = MAX_TITLE_CHARS))]
    pub title: Option<String>,
    #[schemars(description = LANGUAGE_DOC, extend("enum" = LANGUAGES))]
    pub language: Option<String>,
    /// For a `url`: fetch the page again every `--kb-refresh-interval` (24 h by default) and
    /// re-process it when its text changed.
    #[serde(default)]
    pub auto_refresh: bool,
    #[schemars(description = "")]
    pub usage_limits: Option<UsageLimits>,
}

/// `usageLimits` of the create body: the caller's own caps (spec §8).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct UsageLimits {
    /// The caller's own cap on the organization's entries: creating beyond it answers 400
    /// `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`.
    pub knowledge_base_entries: Option<u64>,
}

/// PATCH body. Fields it does not change (a client may send the whole entry back) are ignored
/// (docs/decisions.md "Common": bodies are closed only where the interface says so).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "KnowledgeBasePatch")]
pub struct PatchBody {
    pub title: Option<String>,
    #[schemars(length(min = 1))]
    pub raw_text: Option<String>,
    #[schemars(description = LANGUAGE_DOC, extend("enum" = LANGUAGES))]
    pub language: Option<String>,
    pub auto_refresh: Option<bool>,
}

/// An entry on the wire (list form; the `KnowledgeBaseEntry` schema); absent optional values
/// are omitted, never `null` (docs/decisions.md "Knowledge base").
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "KnowledgeBaseEntry")]
pub struct KbEntryView<'a> {
    #[schemars(with = "SparseId")]
    id: u64,
    #[serde(rename = "replicaUUID")]
    replica_uuid: Uuid,
    #[serde(rename = "type")]
    #[schemars(with = "String", extend("enum" = TYPES))]
    kind: KbKind,
    /// Processing status, in order `NEW`, `FILE_UPLOADED`, `RAW_TEXT`, `PROCESSED_TEXT`,
    /// `VECTOR_CREATED`, `READY`; `UNPROCESSABLE` on failure (see `error`). `VECTOR_CREATED`
    /// and `READY` both mean searchable: from the moment an entry reports either, every
    /// completion and retrieval sees its chunks. This server writes `READY` only after the
    /// index commit holding them is visible to searches (`VECTOR_CREATED` is only seen on
    /// entries stored by older versions); earlier statuses mean not yet searchable.
    #[schemars(with = "String", extend("enum" = STATUSES))]
    status: KbStatus,
    /// Omitted when not given.
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    /// Omitted until one is derived from the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    generated_title: Option<&'a str>,
    summary: &'a str,
    /// ISO 639-1; omitted when not given.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = LANGUAGES))]
    language: Option<&'a str>,
    /// Ours: ISO 639-1 code detected from the text (picks the analyzer when `language` is
    /// absent); omitted until detected.
    #[serde(skip_serializing_if = "Option::is_none")]
    detected_language: Option<&'a str>,
    auto_refresh: bool,
    /// For `website` and `youtube` entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    /// For `file` entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<FileView<'a>>,
    /// For `website` entries, once fetched.
    #[serde(skip_serializing_if = "Option::is_none")]
    website: Option<WebsiteView<'a>>,
    /// Ours: extraction format of a file or page (`pdf`, `docx`, `epub`, `html`, `markdown`,
    /// `text`, `csv`, `json`); omitted until known.
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<&'a str>,
    chunk_count: u32,
    /// For `UNPROCESSABLE` entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorView<'a>>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

/// `file` of an entry: `{name, size, mimeType}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct FileView<'a> {
    name: &'a str,
    /// Bytes; 0 until uploaded.
    size: u64,
    mime_type: &'a str,
}

/// `website` of a fetched entry: `{finalURL, httpStatus, contentType, fetchedAt, pageTitle?}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct WebsiteView<'a> {
    /// The URL after redirects.
    #[serde(rename = "finalURL")]
    final_url: &'a str,
    http_status: u16,
    content_type: &'a str,
    /// Omitted when the page has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    page_title: Option<&'a str>,
    fetched_at: Timestamp,
}

/// `error` of an `UNPROCESSABLE` entry: `{message, fingerprint}` (`kb-<id>-<revision>`).
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
pub struct ErrorView<'a> {
    message: &'a str,
    fingerprint: String,
}

/// The wire view of entry `v` (list form).
pub fn view(v: &EntryView) -> KbEntryView<'_> {
    let (e, s) = (&v.entry, &v.source);
    KbEntryView {
        id: e.id,
        replica_uuid: e.replica,
        kind: e.kind,
        status: e.status,
        title: e.title.as_deref(),
        generated_title: e.generated_title.as_deref(),
        summary: &e.summary,
        language: e.language.as_deref(),
        detected_language: s.detected_language.as_deref(),
        auto_refresh: e.auto_refresh,
        url: s.url.as_deref(),
        file: s.file.as_ref().map(|f| FileView { name: &f.name, size: f.size, mime_type: &f.mime_type }),
        website: s.website.as_ref().map(|w| WebsiteView {
            final_url: &w.final_url,
            http_status: w.status,
            content_type: &w.content_type,
            page_title: w.page_title.as_deref(),
            fetched_at: Timestamp::of(w.fetched_at),
        }),
        format: s.format.as_deref(),
        chunk_count: e.chunk_count,
        error: e
            .error
            .as_deref()
            .map(|message| ErrorView { message, fingerprint: format!("kb-{}-{}", e.id, e.revision) }),
        created_at: Timestamp::of(e.created_at),
        updated_at: Timestamp::of(e.updated_at),
    }
}

/// An entry on the wire with its texts and chunks (`GET …/knowledge-base/{knowledgeBaseID}`;
/// the `KnowledgeBaseEntryFull` schema): the list form, then `rawText`, `processedText`,
/// `rawTextChunks`. The texts are serialized from the stored records as they are, without a
/// copy: they are the bulk of the answer, and a copy would allocate each of them again on every
/// read.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "KnowledgeBaseEntryFull")]
pub struct FullView<'a> {
    #[serde(flatten)]
    entry: KbEntryView<'a>,
    #[serde(rename = "rawText")]
    raw_text: &'a str,
    #[serde(rename = "processedText")]
    processed_text: &'a str,
    #[serde(rename = "rawTextChunks")]
    chunks: Vec<ChunkView<'a>>,
}

/// A chunk of [`FullView`]: `{index, title, content}`.
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
pub struct ChunkView<'a> {
    index: usize,
    title: &'a str,
    content: &'a str,
}

/// The wire view of entry `v` with its text and chunks.
pub fn full_view<'a>(v: &'a EntryView, text: &'a KbText, chunks: &'a [Chunk]) -> FullView<'a> {
    let chunks = chunks.iter().enumerate().map(|(index, c)| ChunkView { index, title: &c.title, content: &c.text });
    FullView { entry: view(v), raw_text: &text.raw, processed_text: &text.processed, chunks: chunks.collect() }
}

/// An entry the create queued (an item of `results` of the `KnowledgeBaseCreated` schema):
/// `{type, enqueued: true, knowledgeBaseID}`, with `signedURL` and `signedURLExpiresAt` for a
/// `filename`.
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
pub struct CreatedView {
    #[serde(rename = "type")]
    #[schemars(with = "String", extend("enum" = TYPES))]
    kind: KbKind,
    #[schemars(extend("const" = true))]
    enqueued: bool,
    #[serde(rename = "knowledgeBaseID")]
    #[schemars(with = "SparseId")]
    id: u64,
    /// For `filename`: PUT the file's bytes here (single use, one hour).
    #[serde(rename = "signedURL", skip_serializing_if = "Option::is_none")]
    signed_url: Option<String>,
    #[serde(rename = "signedURLExpiresAt", skip_serializing_if = "Option::is_none")]
    signed_url_expires_at: Option<Timestamp>,
}

/// The wire view of entry `created`, with the absolute `signed_url` of its upload (for a
/// `filename`).
pub fn created_view(created: &Created, signed_url: Option<String>) -> CreatedView {
    CreatedView {
        kind: created.kind,
        enqueued: true,
        id: created.id,
        signed_url,
        signed_url_expires_at: created.upload.as_ref().map(|(_, expires_at)| Timestamp::of(*expires_at)),
    }
}

/// `{results}` of the create (207; the `KnowledgeBaseCreated` schema).
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "KnowledgeBaseCreated")]
pub struct Results<T> {
    pub results: Vec<T>,
}

/// `{knowledgeBaseID, size, mimeType, status: "FILE_UPLOADED"}` of an upload (the `UploadDone`
/// schema).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "UploadDone")]
pub struct UploadedView<'a> {
    #[serde(rename = "knowledgeBaseID")]
    #[schemars(with = "SparseId")]
    id: u64,
    #[schemars(range(min = 1))]
    size: u64,
    mime_type: &'a str,
    #[schemars(with = "String", extend("const" = "FILE_UPLOADED"))]
    status: KbStatus,
}

impl<'a> From<&'a uploads::Uploaded> for UploadedView<'a> {
    fn from(up: &'a uploads::Uploaded) -> Self {
        UploadedView { id: up.entry, size: up.size, mime_type: &up.mime_type, status: KbStatus::FileUploaded }
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
        content: Content::exactly_one(body.text, body.url, body.filename)?,
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
    let url = created.upload.as_ref().map(|(token, _)| signed_url(&app, &req, token));
    Ok(Reply::success(207, &Results { results: vec![created_view(&created, url)] }))
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
    Ok(Reply::ok(&UploadedView::from(&up)))
}

/// The query of both entry lists.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(default, rename_all = "camelCase")]
struct ListParams {
    /// Page number.
    page: Int<1, 1_000_000, 1>,
    /// Items per page.
    page_size: Int<0, 100, 24>,
    /// Only entries in one of these statuses (repeat the parameter for several).
    status: Vec<OneOf<KbStatus>>,
    /// Only entries of one of these types (repeat the parameter for several).
    #[serde(rename = "type")]
    kind: Vec<OneOf<KbKind>>,
    /// Text searched in titles, URLs and file names.
    search: Option<Text<3>>,
    /// Only failed (or only other) entries.
    has_error: Option<bool>,
    /// Order by this field (with `sortOrder`).
    sort_by: Option<OneOf<SortKey>>,
    /// Order of `sortBy`: `desc` unless told.
    sort_order: Option<OneOf<SortOrder>>,
    /// Ours, instead of `sortBy`/`sortOrder`: `createdAt`, `updatedAt`, `title`, `status`; a `-` prefix sorts
    /// descending. Without either, `createdAt`: ascending for one replica's list, descending organization-wide.
    sort: Option<OneOf<Sort>>,
}

/// The list query of an entry list; without an order, `createdAt`, descending when
/// `default_desc`.
fn list_query(req: &Req, default_desc: bool) -> Result<knowledge::ListQuery> {
    let q: ListParams = query::read(req)?;
    let descending = |default| q.sort_order.map_or(default, |o| o.0.descending());
    let sort = match (q.sort, q.sort_by) {
        (Some(sort), _) => sort.0,
        (None, Some(key)) => Sort { key: key.0, descending: descending(true) },
        (None, None) => Sort { key: SortKey::CreatedAt, descending: descending(default_desc) },
    };
    Ok(knowledge::ListQuery {
        status: q.status.into_iter().map(|s| s.0).collect(),
        kind: q.kind.into_iter().map(|k| k.0).collect(),
        search: q.search.map(|s| s.0),
        has_error: q.has_error,
        sort,
        page: q.page.0,
        page_size: q.page_size.0,
    })
}

impl Named for KbStatus {
    fn table() -> Vec<(String, Self)> {
        query::table_of(STATUSES, KbStatus::parse)
    }
}

impl Named for KbKind {
    fn table() -> Vec<(String, Self)> {
        query::table_of(TYPES, KbKind::parse)
    }
}

impl Named for SortKey {
    fn table() -> Vec<(String, Self)> {
        SORTS.iter().map(|(name, key)| (name.to_string(), *key)).collect()
    }
}

/// Our `sort`: a [`SortKey`]'s name, ascending, or with a `-` prefix, descending.
impl Named for Sort {
    fn table() -> Vec<(String, Self)> {
        let both = |(name, key): (String, SortKey)| {
            let descending = format!("-{name}");
            [(name, Sort { key, descending: false }), (descending, Sort { key, descending: true })]
        };
        SortKey::table().into_iter().flat_map(both).collect()
    }
}

/// The replica whose entries an operation acts on: the path's `replicaUUID` (the per-replica
/// operations), else the replica of the path's entry (`/v1/knowledge-base/{knowledgeBaseID}`);
/// either way 404 unless the caller may see it. One implementation serves both routes.
async fn entry_replica(app: &App, req: &Req) -> Result<std::sync::Arc<Replica>> {
    if !req.param("replicaUUID").is_empty() {
        return path_replica(app, req).await;
    }
    let caller = req.caller()?;
    let replica = knowledge::replica_of(&app.store, caller.org.id, req.id_param("knowledgeBaseID")?).await?;
    replicas::get(&app.store, caller.org.id, replica, caller.user.as_ref()).await.map_err(|e| {
        if e.code == Code::NotFound {
            Error::not_found("knowledge-base entry")
        } else {
            e
        }
    })
}

/// # `GET /v1/replicas/{replicaUUID}/knowledge-base` and `GET /v1/knowledge-base`
/// `{success, items, total}` (see [`list_query`]): one replica's entries (default order
/// `createdAt` ascending), or every entry of the replicas the caller may see (private replicas
/// only for their owner and whitelisted users; default order `createdAt` descending).
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let per_replica = !req.param("replicaUUID").is_empty();
    let q = list_query(&req, !per_replica)?;
    let scope = if per_replica {
        knowledge::Scope::Replica(path_replica(&app, &req).await?.id)
    } else {
        let caller = req.caller()?;
        knowledge::Scope::Organization { org: caller.org.id, user: caller.user.clone() }
    };
    let (items, total) = knowledge::list(&app.store, scope, q).await?;
    Ok(Reply::ok(&Page { items: items.iter().map(view).collect(), total }))
}

/// # `GET …/knowledge-base/{knowledgeBaseID}` (per replica and organization-wide)
/// The entry with `rawText`, `processedText`, `rawTextChunks`; 404 when missing.
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = entry_replica(&app, &req).await?;
    let id = req.id_param("knowledgeBaseID")?;
    let (entry, text, chunks) = knowledge::get(&app.store, replica.id, id).await?;
    Ok(Reply::ok(&full_view(&entry, &text, &chunks)))
}

/// # `PATCH …/knowledge-base/{knowledgeBaseID}` (per replica and organization-wide)
/// `title`, `rawText`, `language`, `autoRefresh`; a new text is re-processed. 200 `{success}`.
pub async fn patch(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = entry_replica(&app, &req).await?;
    let id = req.id_param("knowledgeBaseID")?;
    let b: PatchBody = req.json()?;
    let p = Patch { title: b.title, raw_text: b.raw_text, language: b.language, auto_refresh: b.auto_refresh };
    knowledge::patch(&app.store, replica.id, id, p).await?;
    Ok(Reply::done())
}

/// # `DELETE …/knowledge-base/{knowledgeBaseID}` (per replica and organization-wide)
/// Removes the entry and its index documents; 200 `{success}`; 404 when missing.
pub async fn delete(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = entry_replica(&app, &req).await?;
    let id = req.id_param("knowledgeBaseID")?;
    knowledge::delete(&app.store, replica.id, id).await?;
    Ok(Reply::done())
}

/// A file type of [`MediaGroupView`]: `{mimeTypes, extensions, supportLevel}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct FileTypeView {
    mime_types: &'static [&'static str],
    extensions: &'static [&'static str],
    #[schemars(extend("enum" = ["production", "preview", "disabled"]))]
    support_level: &'static str,
}

/// A group of file types (an item of `mediaGroups` of the `FileTypes` schema): `{label,
/// mediaType, limitation, fileTypes}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct MediaGroupView<'a> {
    label: &'static str,
    #[schemars(extend("enum" = MEDIA_TYPES))]
    media_type: &'static str,
    limitation: &'a str,
    file_types: Vec<FileTypeView>,
}

/// `{mediaGroups}` of `GET /v1/knowledge-base/file-types` (the `FileTypes` schema).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "FileTypes")]
pub struct FileTypesView<'a> {
    media_groups: Vec<MediaGroupView<'a>>,
}

/// [`FORMATS`] grouped by their group label, in order of first appearance; each group says
/// `limitation`.
pub fn file_types_view(limitation: &str) -> FileTypesView<'_> {
    let mut groups: Vec<MediaGroupView> = Vec::new();
    for f in FORMATS {
        let row = FileTypeView { mime_types: f.mime_types, extensions: f.extensions, support_level: f.support };
        match groups.iter_mut().find(|g| g.label == f.group) {
            Some(g) => g.file_types.push(row),
            None => groups.push(MediaGroupView {
                label: f.group,
                media_type: f.media_type,
                limitation,
                file_types: vec![row],
            }),
        }
    }
    FileTypesView { media_groups: groups }
}

/// # `GET /v1/knowledge-base/file-types`
/// Exactly the formats `ingest::extract` reads, grouped by `mediaGroups[].label`.
pub async fn file_types(app: Arc<App>, _req: Req) -> Result<Reply> {
    let limit = format!("at most {} bytes per file", app.config.max_upload_bytes);
    Ok(Reply::ok(&file_types_view(&limit)))
}

/// Knowledge base (spec §2.5), uploads included.
pub fn operations() -> Vec<Operation> {
    let entry = "/v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}";
    let org_entry = "/v1/knowledge-base/{knowledgeBaseID}";
    let kb = "Knowledge base";
    vec![
        op("GET", "/v1/replicas/{replicaUUID}/knowledge-base", "listKnowledgeBase", kb, "List entries")
            .query_of::<ListParams>()
            .ok_as::<Page<KbEntryView>>(200, "KnowledgeBaseList")
            .serve(Access::Either, handler!(list)),
        op("POST", "/v1/replicas/{replicaUUID}/knowledge-base", "createKnowledgeBaseEntry", kb, "Create an entry")
            .body_of::<CreateBody>()
            .ok_of::<Results<CreatedView>>(207)
            .creates("knowledgeBaseID", "/results/0/knowledgeBaseID")
            .extra(&[409, 429])
            .describe(
                "Exactly one of `text`, `url`, `filename`; 207 `{success, results}`. Statuses move \
                `NEW → FILE_UPLOADED → RAW_TEXT → PROCESSED_TEXT → READY` (see `status`; or `UNPROCESSABLE` with \
                `error.message`) as a background job queue kept in the store works: a `url` is fetched (timeouts, \
                size cap, at most 5 redirects, no private or loopback addresses unless the operator allows them), \
                a `filename` waits for its bytes on `signedURL`. 409 `URL_ALREADY_EXISTS`; 429 \
                `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED` at the operator's per-organization quota, 400 with the same \
                code at the body's `usageLimits.knowledgeBaseEntries`. `language` absent: detected from the text.",
            )
            .serve(Access::Either, handler!(create)),
        op("GET", entry, "getKnowledgeBaseEntry", kb, "Read an entry")
            .ok_of::<FullView>(200)
            .serve(Access::Either, handler!(read))
            .cached(),
        op("PATCH", entry, "updateKnowledgeBaseEntry", kb, "Update an entry")
            .body_of::<PatchBody>()
            .describe("A new `rawText` is re-processed (the entry goes back to `PROCESSED_TEXT`, then `READY`).")
            .serve(Access::Either, handler!(patch)),
        op("DELETE", entry, "deleteKnowledgeBaseEntry", kb, "Delete an entry")
            .describe("Removes the entry and its index documents.")
            .serve(Access::Either, handler!(delete)),
        op("GET", "/v1/knowledge-base", "listKnowledgeBaseOfOrganization", kb, "List entries of every replica")
            .query_of::<ListParams>()
            .ok_as::<Page<KbEntryView>>(200, "KnowledgeBaseList")
            .describe(
                "The entries of every replica the caller may see (private replicas only for their owner and \
                whitelisted users), each with its `replicaUUID`; filters, paging and order as the per-replica list, \
                default order `createdAt` descending.",
            )
            .serve(Access::Either, handler!(list)),
        op("GET", org_entry, "getKnowledgeBaseEntryOfOrganization", kb, "Read an entry by id")
            .ok_of::<FullView>(200)
            .describe("As the per-replica read; 404 when the entry's replica is not visible to the caller.")
            .serve(Access::Either, handler!(read))
            .cached(),
        op("PATCH", org_entry, "updateKnowledgeBaseEntryOfOrganization", kb, "Update an entry by id")
            .body_of::<PatchBody>()
            .describe("As the per-replica PATCH (one implementation).")
            .serve(Access::Either, handler!(patch)),
        op("DELETE", org_entry, "deleteKnowledgeBaseEntryOfOrganization", kb, "Delete an entry by id")
            .describe("As the per-replica DELETE (one implementation): the entry and its index documents go.")
            .serve(Access::Either, handler!(delete)),
        op("GET", "/v1/knowledge-base/file-types", "listFileTypes", kb, "Supported file types")
            .ok_of::<FileTypesView>(200)
            .describe("Exactly what this server can extract: PDF, DOCX, EPUB, plain text, Markdown, CSV, JSON, HTML.")
            .serve(Access::Either, handler!(file_types)),
        op("PUT", "/v1/knowledge-base/uploads/{token}", "uploadKnowledgeBaseFile", kb, "Upload a file")
            .raw_body("UploadBody")
            .ok_of::<UploadedView>(200)
            .extra(&[409])
            .describe(
                "The `signedURL` of a `filename` entry: the token in the path is the credential (no API key). Any \
                content type; `Content-Encoding: gzip` allowed. Single use (409 `UPLOAD_ALREADY_USED`), expires after \
                one hour (400 `UPLOAD_EXPIRED`), at most `--max-upload-bytes` (413, also while a gzip body inflates). \
                The token is checked before the body is read: an unknown, used or expired URL answers without \
                reading it. The entry moves to `FILE_UPLOADED` and is extracted in the background.",
            )
            .serve(Access::Public, handler!(upload)),
    ]
}
