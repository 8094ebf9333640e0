//! Creating knowledge-base entries (docs/decisions.md "Knowledge base": create body, 409
//! `URL_ALREADY_EXISTS`, 429/400 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`).

use uuid::Uuid;

use super::{add_job, put_source, validate_meta, validate_text, write_content, Naming, PreparedText};
use crate::error::{Code, Error, Result};
use crate::ingest::formats::Format;
use crate::service::check_len;
use crate::store::kv::WriteTransaction;
use crate::store::records::{FileMeta, KbEntry, KbKind, KbSource, KbStatus, Upload};
use crate::store::{self, k, next_seq, now_ms, tables, Sequence, Store};

/// Where a new entry's content comes from (exactly one of the create body's `text`, `url`,
/// `filename`).
#[derive(Debug, Clone)]
pub enum Content {
    Text(String),
    Url(String),
    Filename(String),
}

impl Content {
    /// The content of a create body giving `text`, `url` and `filename`: exactly one of them,
    /// else 400 `VALIDATION_ERROR`.
    pub fn exactly_one(text: Option<String>, url: Option<String>, filename: Option<String>) -> Result<Content> {
        match (text, url, filename) {
            (Some(t), None, None) => Ok(Content::Text(t)),
            (None, Some(u), None) => Ok(Content::Url(u)),
            (None, None, Some(f)) => Ok(Content::Filename(f)),
            _ => Err(Error::invalid("body", "give exactly one of text, url, filename")),
        }
    }
}

/// A new entry.
#[derive(Debug, Clone)]
pub struct NewEntry {
    pub content: Content,
    pub title: Option<String>,
    pub language: Option<String>,
    pub auto_refresh: bool,
    /// `usageLimits.knowledgeBaseEntries` of the body: the caller's own cap on the
    /// organization's entries (400 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED` when reached).
    pub custom_limit: Option<u64>,
}

impl NewEntry {
    /// A text entry in `language`, with no title and no caller limits (demo data, imports).
    pub fn text(text: String, language: Option<&str>) -> NewEntry {
        let language = language.map(str::to_string);
        NewEntry { content: Content::Text(text), title: None, language, auto_refresh: false, custom_limit: None }
    }
}

/// Limits of entry creation set by the operator.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most entries per organization (429 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED` beyond).
    pub max_entries_per_org: u64,
    /// Largest uploaded file, in bytes.
    pub max_file_bytes: u64,
    /// Lifetime of a signed upload URL, in milliseconds.
    pub upload_ttl_ms: i64,
}

impl Limits {
    /// No quota (the server's own writes: demo data, benchmarks); no uploads.
    pub const UNLIMITED: Limits = Limits { max_entries_per_org: u64::MAX, max_file_bytes: 0, upload_ttl_ms: 0 };
}

/// What creating an entry made: its id and, for a `filename`, the upload token.
#[derive(Debug, Clone)]
pub struct Created {
    pub id: u64,
    pub kind: KbKind,
    /// For a `filename`: the upload token (the last segment of its signed URL) and when it
    /// expires (ms since the epoch).
    pub upload: Option<(String, i64)>,
}

/// The most characters of an entry's `url`.
pub const MAX_URL_CHARS: usize = 2048;
/// The most characters of an entry's `filename`.
pub const MAX_FILENAME_CHARS: usize = 255;

/// The URL as stored and compared: parsed, fragment dropped (so `…#a` and `…#b` are one page).
fn normalize_url(raw: &str) -> Result<url::Url> {
    check_len("url", raw, 1, MAX_URL_CHARS)?;
    let mut u = url::Url::parse(raw.trim()).map_err(|e| Error::invalid("url", format!("is not a valid URL: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.host().is_none() {
        return Err(Error::invalid("url", "must be an http or https URL with a host"));
    }
    u.set_fragment(None);
    Ok(u)
}

/// Whether `u` is a YouTube video page (its transcript is what would be indexed).
fn is_youtube(u: &url::Url) -> bool {
    let host = u.host_str().unwrap_or("").trim_start_matches("www.").trim_start_matches("m.");
    matches!(host, "youtube.com" | "youtu.be" | "youtube-nocookie.com" | "music.youtube.com")
}

/// Message of a `youtube` entry, which ends `UNPROCESSABLE`.
pub const YOUTUBE_UNSUPPORTED: &str = "YouTube transcripts cannot be fetched by this server (it has no access to \
     YouTube's caption service); add the transcript as a text entry or a file instead";

fn check_filename(name: &str) -> Result<String> {
    check_len("filename", name, 1, MAX_FILENAME_CHARS)?;
    // Only the last path component is kept: `../../etc/passwd` names a file `passwd`.
    let base = name.rsplit(['/', '\\']).next().unwrap_or("").trim();
    if base.is_empty() || base == "." || base == ".." || base.chars().any(char::is_control) {
        return Err(Error::invalid("filename", "must name a file (no control characters, not a directory)"));
    }
    Ok(base.to_string())
}

/// Creates an entry of `replica`: a text is chunked and queued for indexing at once; a URL is
/// queued for fetching (a YouTube URL ends `UNPROCESSABLE`); a filename gets an upload token
/// (its signed URL) and waits for the bytes. 400 for invalid values, 409 `URL_ALREADY_EXISTS`,
/// 429/400 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`.
pub async fn create(store: &Store, org: Uuid, replica: Uuid, mut new: NewEntry, limits: Limits) -> Result<Created> {
    validate_meta(new.title.as_ref(), new.language.as_ref())?;
    let now = now_ms();
    let expires_at = now + limits.upload_ttl_ms;
    let (kind, source, token) = match &new.content {
        Content::Text(t) => {
            validate_text(t)?;
            (KbKind::Text, KbSource::default(), None)
        }
        Content::Url(raw) => {
            let u = normalize_url(raw)?;
            let kind = if is_youtube(&u) { KbKind::Youtube } else { KbKind::Website };
            (kind, KbSource { url: Some(u.to_string()), ..Default::default() }, None)
        }
        Content::Filename(name) => {
            let name = check_filename(name)?;
            let mime = Format::detect(&name, None, b"").map(|f| f.info().mime_types[0]).unwrap_or("");
            let file = FileMeta { name, size: 0, mime_type: mime.to_string() };
            (KbKind::File, KbSource { file: Some(file), ..Default::default() }, Some(crate::service::random_hex(32)?))
        }
    };
    let generated_title = match &new.content {
        Content::Text(_) => None, // named after its text by `PreparedText`
        Content::Url(_) => source.url.clone(),
        Content::Filename(_) => source.file.as_ref().map(|f| f.name.clone()),
    }
    .filter(|t| !t.is_empty());
    let text = match &mut new.content {
        Content::Text(t) => {
            let naming = Naming { title: new.title.clone(), generated_title: None, generate: true };
            Some(PreparedText::prepare(naming, std::mem::take(t)).await?)
        }
        _ => None,
    };
    let upload_hash = token.as_deref().map(crate::service::hash_secret);
    let id = store
        .write_kb(move |txn| {
            crate::service::quotas::count_kb_entry_in(txn, org, limits.max_entries_per_org, new.custom_limit)?;
            let id = next_seq(txn, Sequence::KbEntry)?;
            if let Some(url) = &source.url {
                claim_url(txn, replica, url, id)?;
            }
            let mut entry = KbEntry {
                id,
                replica,
                org,
                kind,
                status: KbStatus::New,
                title: new.title.clone(),
                generated_title: generated_title.clone(),
                language: new.language.clone(),
                auto_refresh: new.auto_refresh,
                summary: String::new(),
                chunk_count: 0,
                revision: 0,
                error: None,
                created_at: now,
                updated_at: now,
            };
            put_source(txn, id, &source)?;
            match (&new.content, &text) {
                (_, Some(text)) => write_content(txn, &mut entry, text)?,
                _ if kind == KbKind::Youtube => {
                    entry.move_to(KbStatus::Unprocessable);
                    entry.error = Some(YOUTUBE_UNSUPPORTED.into());
                }
                (Content::Url(_), _) => add_job(txn, id)?,
                _ => {
                    let upload = Upload { entry: id, expires_at, max_bytes: limits.max_file_bytes, used: false };
                    let hash = upload_hash.ok_or_else(|| Error::internal("upload token missing"))?;
                    store::put(&mut txn.open_table(tables::TOKENHASH_UPLOAD)?, &hash, &upload)?;
                }
            }
            store::kb::summary::put_entry(txn, &entry)?;
            store::kb::add_to_replica(txn, replica, id)?;
            Ok(id)
        })
        .await?;
    Ok(Created { id, kind, upload: token.map(|t| (t, expires_at)) })
}

/// Files `url` as entry `id`'s in `replica` (one entry per URL in a replica). Errors: 409
/// `URL_ALREADY_EXISTS`, the store's.
pub fn claim_url(txn: &WriteTransaction, replica: Uuid, url: &str, id: u64) -> Result<()> {
    let mut urls = txn.open_table(tables::REPLICA_URL)?;
    if let Some(existing) = urls.get((k(replica), url))? {
        return Err(Error::new(
            Code::UrlAlreadyExists,
            format!("this URL is already in the replica's knowledge base (entry {})", existing.value()),
        ));
    }
    urls.insert((k(replica), url), id)?;
    Ok(())
}
