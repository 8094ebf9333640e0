//! Knowledge-base entries (spec §2.5, §4.2; DECISIONS.md "Knowledge base").
//!
//! A text entry is chunked at creation; a `url` entry becomes an ingestion job (fetched and
//! extracted by `ingest::pipeline`); a `filename` entry waits for its bytes on a signed upload
//! URL (see [`super::uploads`]). Whatever writes an entry's text writes, in the same
//! transaction, its chunks and an outbox row; the indexer (see `search`) applies the outbox to
//! tantivy and then marks the entry `VECTOR_CREATED` and `READY`. Deleting writes an outbox row
//! too, so index documents go with the entry.

use redb::{ReadTransaction, ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::{check_len, orgs};
use crate::error::{Code, Error, Result};
use crate::ingest::{chunk, extract, language};
use crate::store::records::{Chunk, FileMeta, KbEntry, KbSource, KbText, Upload};
use crate::store::{self, k, next_seq, now_ms, tables, Store};

/// ISO 639-1 codes accepted in `language` (spec §2.5).
pub const LANGUAGES: &[&str] = &[
    "ab", "aa", "af", "ak", "sq", "am", "ar", "an", "hy", "as", "av", "ae", "ay", "az", "ba", "bm", "eu", "be", "bn",
    "bh", "bi", "bs", "br", "bg", "my", "ca", "ch", "ce", "ny", "zh", "cu", "cv", "kw", "co", "cr", "hr", "cs", "da",
    "dv", "nl", "dz", "en", "eo", "et", "ee", "fo", "fj", "fi", "fr", "ff", "gl", "ka", "de", "el", "kl", "gn", "gu",
    "ht", "ha", "he", "hz", "hi", "ho", "hu", "is", "io", "ig", "id", "ia", "ie", "iu", "ik", "ga", "it", "ja", "jv",
    "kn", "kr", "ks", "kk", "km", "ki", "rw", "ky", "kv", "kg", "ko", "ku", "kj", "la", "lb", "lg", "li", "ln", "lo",
    "lt", "lu", "lv", "gv", "mk", "mg", "ms", "ml", "mt", "mi", "mr", "mh", "mn", "na", "nv", "nd", "ne", "ng", "nb",
    "nn", "no", "ii", "nr", "oc", "oj", "om", "or", "os", "pa", "pi", "fa", "pl", "ps", "pt", "qu", "rm", "rn", "ro",
    "ru", "sa", "sc", "sd", "se", "sm", "sg", "sr", "gd", "sn", "si", "sk", "sl", "so", "st", "es", "su", "sw", "ss",
    "sv", "ta", "te", "tg", "th", "ti", "bo", "tk", "tl", "tn", "to", "tr", "ts", "tt", "tw", "ty", "ug", "uk", "ur",
    "uz", "ve", "vi", "vo", "wa", "cy", "wo", "xh", "yi", "yo", "za", "zu",
];

/// Entry statuses in processing order, then the failure status.
pub const STATUSES: &[&str] =
    &["NEW", "FILE_UPLOADED", "RAW_TEXT", "PROCESSED_TEXT", "VECTOR_CREATED", "READY", "UNPROCESSABLE"];
/// Entry types.
pub const TYPES: &[&str] = &["text", "file", "website", "youtube"];
/// Longest text entry, in characters.
pub const MAX_TEXT_CHARS: usize = 2_000_000;

/// Checks a `language` value against the spec's list.
pub fn check_language(lang: &str) -> Result<()> {
    if LANGUAGES.contains(&lang) {
        Ok(())
    } else {
        Err(Error::invalid("language", format!("{lang:?} is not an ISO 639-1 code of the accepted list")))
    }
}

/// Where a new entry's content comes from (exactly one of the create body's `text`, `url`,
/// `filename`).
#[derive(Debug, Clone)]
pub enum Content {
    Text(String),
    Url(String),
    Filename(String),
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

/// What creating an entry made: its id and, for a `filename`, the upload token.
#[derive(Debug, Clone)]
pub struct Created {
    pub id: u64,
    pub kind: &'static str,
    pub upload_token: Option<String>,
}

/// Longest `url`, in characters.
const MAX_URL_CHARS: usize = 2048;

fn validate_meta(title: Option<&String>, language: Option<&String>) -> Result<()> {
    if let Some(t) = title {
        check_len("title", t, 1, 200)?;
    }
    language.map(|l| check_language(l)).transpose()?;
    Ok(())
}

fn validate_text(text: &str) -> Result<()> {
    check_len("text", text, 1, MAX_TEXT_CHARS)?;
    if text.trim().is_empty() {
        return Err(Error::invalid("text", "must contain more than white space"));
    }
    Ok(())
}

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
    check_len("filename", name, 1, 255)?;
    // Only the last path component is kept: `../../etc/passwd` names a file `passwd`.
    let base = name.rsplit(['/', '\\']).next().unwrap_or("").trim();
    if base.is_empty() || base == "." || base == ".." || base.chars().any(char::is_control) {
        return Err(Error::invalid("filename", "must name a file (no control characters, not a directory)"));
    }
    Ok(base.to_string())
}

/// Characters of the processed text kept as the entry's `summary`.
const SUMMARY_CHARS: usize = 200;

/// Stores `raw` as the entry's text, its chunks (replacing old ones), detects its language when
/// none is set, and queues the entry for indexing (status `PROCESSED_TEXT`).
pub fn write_content(txn: &WriteTransaction, entry: &mut KbEntry, raw: &str) -> Result<()> {
    let title = entry.title.clone().or_else(|| entry.generated_title.clone()).unwrap_or_default();
    let pieces = chunk::chunk(&title, raw);
    let mut chunks = txn.open_table(tables::KB_CHUNKS)?;
    chunks.retain_in((entry.id, 0)..=(entry.id, u32::MAX), |_, _| false)?;
    for (i, p) in pieces.iter().enumerate() {
        store::put(&mut chunks, (entry.id, i as u32), &Chunk { title: p.title.clone(), text: p.text.clone() })?;
    }
    let processed = pieces.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n\n");
    entry.summary = processed.chars().take(SUMMARY_CHARS).collect();
    let mut source = source_in(txn, entry.id)?;
    source.detected_language = language::detect(&processed).map(str::to_string);
    put_source(txn, entry.id, &source)?;
    let text = KbText { raw: raw.to_string(), processed };
    store::put(&mut txn.open_table(tables::KB_TEXTS)?, entry.id, &text)?;
    entry.chunk_count = pieces.len() as u32;
    entry.revision += 1;
    entry.status = "PROCESSED_TEXT".into();
    entry.error = None;
    enqueue(txn, entry.id, entry.revision)
}

/// The source record of entry `id` (empty when none was written).
pub fn source_in(txn: &WriteTransaction, id: u64) -> Result<KbSource> {
    Ok(store::get::<u64, KbSource, _>(&txn.open_table(tables::KB_SOURCES)?, id)?.unwrap_or_default())
}

/// Writes the source record of entry `id`.
pub fn put_source(txn: &WriteTransaction, id: u64, source: &KbSource) -> Result<()> {
    store::put(&mut txn.open_table(tables::KB_SOURCES)?, id, source)
}

/// Appends an outbox row for `entry` at `revision` (0 for a deletion).
pub fn enqueue(txn: &WriteTransaction, entry: u64, revision: u64) -> Result<()> {
    let seq = next_seq(txn, "outbox")?;
    txn.open_table(tables::KB_OUTBOX)?.insert(seq, (entry, revision))?;
    Ok(())
}

/// Adds an ingestion job for `entry` (see `ingest::pipeline`), runnable now.
pub fn add_job(txn: &WriteTransaction, entry: u64) -> Result<()> {
    txn.open_table(tables::KB_JOBS)?.insert(entry, (0u32, 0i64))?;
    Ok(())
}

/// Counts one more entry of `org`, refusing past the operator's quota (429) or the caller's
/// `usageLimits` (400).
fn count_entry(txn: &WriteTransaction, org: Uuid, limits: Limits, custom: Option<u64>) -> Result<()> {
    let mut counts = txn.open_table(tables::ORG_KBCOUNT)?;
    let n = counts.get(k(org))?.map(|v| v.value()).unwrap_or(0);
    if let Some(max) = custom.filter(|max| n >= *max) {
        return Err(Error::new(
            Code::KnowledgeBaseCustomQuotaExceeded,
            format!("the organization has {n} knowledge-base entries; usageLimits.knowledgeBaseEntries is {max}"),
        ));
    }
    if n >= limits.max_entries_per_org {
        return Err(Error::new(
            Code::KnowledgeBaseQuotaExceeded,
            format!("the organization has reached its quota of {} knowledge-base entries", limits.max_entries_per_org),
        ));
    }
    counts.insert(k(org), n + 1)?;
    Ok(())
}

/// Creates an entry of `replica`: a text is chunked and queued for indexing at once; a URL is
/// queued for fetching (a YouTube URL ends `UNPROCESSABLE`); a filename gets an upload token
/// (its signed URL) and waits for the bytes. 400 for invalid values, 409 `URL_ALREADY_EXISTS`,
/// 429/400 `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED`.
pub async fn create(store: &Store, org: Uuid, replica: Uuid, new: NewEntry, limits: Limits) -> Result<Created> {
    validate_meta(new.title.as_ref(), new.language.as_ref())?;
    let now = now_ms();
    let (kind, source, token) = match &new.content {
        Content::Text(t) => {
            validate_text(t)?;
            ("text", KbSource::default(), None)
        }
        Content::Url(raw) => {
            let u = normalize_url(raw)?;
            let kind = if is_youtube(&u) { "youtube" } else { "website" };
            (kind, KbSource { url: Some(u.to_string()), ..Default::default() }, None)
        }
        Content::Filename(name) => {
            let name = check_filename(name)?;
            let mime = extract::Format::detect(&name, None, b"").map(|f| f.info().mime_types[0]).unwrap_or("");
            let file = FileMeta { name, size: 0, mime_type: mime.to_string() };
            ("file", KbSource { file: Some(file), ..Default::default() }, Some(super::random_hex(32)?))
        }
    };
    let generated_title = match &new.content {
        Content::Text(t) => Some(chunk::generated_title(t)),
        Content::Url(_) => source.url.clone(),
        Content::Filename(_) => source.file.as_ref().map(|f| f.name.clone()),
    }
    .filter(|t| !t.is_empty());
    let upload_hash = token.as_deref().map(orgs::hash);
    let id = store
        .write_kb(move |txn| {
            count_entry(txn, org, limits, new.custom_limit)?;
            let id = next_seq(txn, "kb_entry")?;
            if let Some(url) = &source.url {
                claim_url(txn, replica, url, id)?;
            }
            let mut entry = KbEntry {
                id,
                replica,
                org,
                kind: kind.into(),
                status: "NEW".into(),
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
            match (&new.content, kind) {
                (Content::Text(t), _) => write_content(txn, &mut entry, t)?,
                (_, "youtube") => {
                    entry.status = "UNPROCESSABLE".into();
                    entry.error = Some(YOUTUBE_UNSUPPORTED.into());
                }
                (Content::Url(_), _) => add_job(txn, id)?,
                _ => {
                    let upload = Upload {
                        entry: id,
                        expires_at: now + limits.upload_ttl_ms,
                        max_bytes: limits.max_file_bytes,
                        used: false,
                    };
                    let hash = upload_hash.ok_or_else(|| Error::internal("upload token missing"))?;
                    store::put(&mut txn.open_table(tables::TOKENHASH_UPLOAD)?, &hash, &upload)?;
                }
            }
            store::put(&mut txn.open_table(tables::KB_ENTRIES)?, id, &entry)?;
            txn.open_table(tables::REPLICA_KB)?.insert((k(replica), id), ())?;
            Ok(id)
        })
        .await?;
    Ok(Created { id, kind, upload_token: token })
}

fn claim_url(txn: &WriteTransaction, replica: Uuid, url: &str, id: u64) -> Result<()> {
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

/// Filters and order of the entry list.
#[derive(Debug, Default, Clone)]
pub struct ListQuery {
    pub status: Option<String>,
    pub kind: Option<String>,
    /// Case-insensitive text found in the title, generated title, URL or file name.
    pub search: Option<String>,
    /// `true`: only entries that failed (`UNPROCESSABLE`); `false`: only the others.
    pub has_error: Option<bool>,
    pub sort: Sort,
    pub page: u64,
    pub page_size: u64,
}

/// Order of the entry list: `createdAt` (default), `updatedAt`, `title`, `status`; descending
/// when `descending`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

/// A sort key of [`Sort`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    #[default]
    CreatedAt,
    UpdatedAt,
    Title,
    Status,
}

/// `sort` values accepted by the list (a leading `-` sorts descending).
pub const SORTS: &[(&str, SortKey)] = &[
    ("createdAt", SortKey::CreatedAt),
    ("updatedAt", SortKey::UpdatedAt),
    ("title", SortKey::Title),
    ("status", SortKey::Status),
];

/// An entry with its source record, as lists and reads show it.
#[derive(Debug, Clone)]
pub struct EntryView {
    pub entry: KbEntry,
    pub source: KbSource,
}

impl EntryView {
    /// The title shown: the given one, else the generated one.
    pub fn display_title(&self) -> Option<&String> {
        self.entry.title.as_ref().or(self.entry.generated_title.as_ref())
    }

    fn matches(&self, q: &ListQuery, search: Option<&str>) -> bool {
        let e = &self.entry;
        let failed = e.status == "UNPROCESSABLE";
        let haystack =
            [self.display_title().cloned(), self.source.url.clone(), self.source.file.as_ref().map(|f| f.name.clone())];
        q.status.as_ref().is_none_or(|s| s == &e.status)
            && q.kind.as_ref().is_none_or(|t| t == &e.kind)
            && q.has_error.is_none_or(|h| h == failed)
            && search.is_none_or(|s| haystack.iter().flatten().any(|h| h.to_lowercase().contains(s)))
    }
}

fn sort_views(views: &mut [EntryView], sort: Sort) {
    let title = |v: &EntryView| v.display_title().map(|t| t.to_lowercase()).unwrap_or_default();
    match sort.key {
        SortKey::CreatedAt => views.sort_by_key(|v| (v.entry.created_at, v.entry.id)),
        SortKey::UpdatedAt => views.sort_by_key(|v| (v.entry.updated_at, v.entry.id)),
        SortKey::Title => views.sort_by_key(|v| (title(v), v.entry.id)),
        SortKey::Status => {
            let rank = |v: &EntryView| STATUSES.iter().position(|s| *s == v.entry.status).unwrap_or(usize::MAX);
            views.sort_by_key(|v| (rank(v), v.entry.id))
        }
    }
    if sort.descending {
        views.reverse();
    }
}

fn view_in(txn: &ReadTransaction, entry: KbEntry) -> Result<EntryView> {
    let source = store::get::<u64, KbSource, _>(&txn.open_table(tables::KB_SOURCES)?, entry.id)?.unwrap_or_default();
    Ok(EntryView { entry, source })
}

/// A page of `replica`'s entries and the number that matched.
pub async fn list(store: &Store, replica: Uuid, q: ListQuery) -> Result<(Vec<EntryView>, u64)> {
    store
        .read(move |txn| {
            let ids = txn.open_table(tables::REPLICA_KB)?;
            let entries = txn.open_table(tables::KB_ENTRIES)?;
            let search = q.search.as_ref().map(|s| s.to_lowercase());
            let mut found = Vec::new();
            for row in ids.range((k(replica), 0)..=(k(replica), u64::MAX))? {
                let id = row?.0.value().1;
                let Some(e) = store::get::<u64, KbEntry, _>(&entries, id)? else { continue };
                let v = view_in(txn, e)?;
                if v.matches(&q, search.as_deref()) {
                    found.push(v);
                }
            }
            sort_views(&mut found, q.sort);
            Ok(super::page_of(found, q.page, q.page_size))
        })
        .await
}

/// Entry `id` of `replica` with its source, texts and chunks; 404 when missing.
pub async fn get(store: &Store, replica: Uuid, id: u64) -> Result<(EntryView, KbText, Vec<Chunk>)> {
    store
        .read(move |txn| {
            let entry = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KB_ENTRIES)?, id)?
                .filter(|e| e.replica == replica)
                .ok_or_else(|| Error::not_found("knowledge-base entry"))?;
            let chunks = txn
                .open_table(tables::KB_CHUNKS)?
                .range((id, 0)..=(id, u32::MAX))?
                .map(|r| r.map_err(Error::from).and_then(|(_, v)| store::codec::decode(v.value())))
                .collect::<Result<Vec<Chunk>>>()?;
            let text = store::get::<u64, KbText, _>(&txn.open_table(tables::KB_TEXTS)?, id)?.unwrap_or_default();
            Ok((view_in(txn, entry)?, text, chunks))
        })
        .await
}

/// Changes of `PATCH …/knowledge-base/{id}`; `None` leaves a field as it is.
#[derive(Debug, Default, Clone)]
pub struct Patch {
    pub title: Option<String>,
    pub raw_text: Option<String>,
    pub language: Option<String>,
    pub auto_refresh: Option<bool>,
}

/// Applies `patch`; a changed text (or title, which names chunks) is re-chunked and
/// re-indexed, and a new `language` re-indexes with its analyzer. A `rawText` given to an entry
/// still being fetched or extracted replaces what that would have produced. 404 when missing,
/// 400 for invalid values.
pub async fn patch(store: &Store, replica: Uuid, id: u64, patch: Patch) -> Result<()> {
    if let Some(t) = &patch.raw_text {
        validate_text(t)?;
    }
    validate_meta(patch.title.as_ref(), patch.language.as_ref())?;
    let now = now_ms();
    store
        .write_kb(move |txn| {
            let mut table = txn.open_table(tables::KB_ENTRIES)?;
            let mut e = store::get::<u64, KbEntry, _>(&table, id)?
                .filter(|e| e.replica == replica)
                .ok_or_else(|| Error::not_found("knowledge-base entry"))?;
            let old = store::get::<u64, KbText, _>(&txn.open_table(tables::KB_TEXTS)?, id)?.unwrap_or_default();
            let text_changed = patch.raw_text.as_ref().is_some_and(|t| t != &old.raw);
            let raw = patch.raw_text.clone().unwrap_or(old.raw);
            let title_changed = patch.title.is_some() && patch.title != e.title;
            let language_changed = patch.language.is_some() && patch.language != e.language;
            if text_changed && e.kind == "text" {
                e.generated_title = Some(chunk::generated_title(&raw)).filter(|t| !t.is_empty());
            }
            if patch.title.is_some() {
                e.title = patch.title.clone();
            }
            if patch.language.is_some() {
                e.language = patch.language.clone();
            }
            if let Some(a) = patch.auto_refresh {
                e.auto_refresh = a;
            }
            drop(table);
            if text_changed {
                txn.open_table(tables::KB_JOBS)?.remove(id)?;
            }
            if text_changed || ((title_changed || language_changed) && !raw.is_empty()) {
                write_content(txn, &mut e, &raw)?;
            }
            e.updated_at = now;
            table = txn.open_table(tables::KB_ENTRIES)?;
            store::put(&mut table, id, &e)
        })
        .await
}

/// Removes entry `id` of `replica`, its texts, chunks, file and pending job; its index
/// documents go via the outbox.
pub async fn delete(store: &Store, replica: Uuid, id: u64) -> Result<()> {
    store
        .write_kb(move |txn| {
            let found = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KB_ENTRIES)?, id)?;
            match found.filter(|e| e.replica == replica) {
                Some(e) => remove_in(txn, &e),
                None => Err(Error::not_found("knowledge-base entry")),
            }
        })
        .await
}

fn remove_in(txn: &WriteTransaction, e: &KbEntry) -> Result<()> {
    let id = e.id;
    let source = source_in(txn, id)?;
    if let Some(url) = &source.url {
        txn.open_table(tables::REPLICA_URL)?.remove((k(e.replica), url.as_str()))?;
    }
    let mut counts = txn.open_table(tables::ORG_KBCOUNT)?;
    let n = counts.get(k(e.org))?.map(|v| v.value()).unwrap_or(0);
    counts.insert(k(e.org), n.saturating_sub(1))?;
    txn.open_table(tables::KB_ENTRIES)?.remove(id)?;
    txn.open_table(tables::KB_TEXTS)?.remove(id)?;
    txn.open_table(tables::KB_SOURCES)?.remove(id)?;
    txn.open_table(tables::KB_FILES)?.remove(id)?;
    txn.open_table(tables::KB_JOBS)?.remove(id)?;
    txn.open_table(tables::REPLICA_KB)?.remove((k(e.replica), id))?;
    txn.open_table(tables::KB_CHUNKS)?.retain_in((id, 0)..=(id, u32::MAX), |_, _| false)?;
    enqueue(txn, id, 0)
}

/// Removes every entry of `replica` (replica deletion).
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    let ids: Vec<u64> = txn
        .open_table(tables::REPLICA_KB)?
        .range((k(replica), 0)..=(k(replica), u64::MAX))?
        .map(|r| r.map(|(key, _)| key.value().1))
        .collect::<Result<_, _>>()?;
    for id in ids {
        let found = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KB_ENTRIES)?, id)?;
        if let Some(e) = found {
            remove_in(txn, &e)?;
        }
    }
    Ok(())
}

/// Moves entries whose current revision is the one indexed (`(entry, revision)` pairs) to
/// `status` (`VECTOR_CREATED` once the index commit holds them, `READY` once searchers see them).
pub fn mark_indexed_in(txn: &WriteTransaction, indexed: &[(u64, u64)], status: &str) -> Result<()> {
    let mut table = txn.open_table(tables::KB_ENTRIES)?;
    for &(id, revision) in indexed {
        let Some(mut e) = store::get::<u64, KbEntry, _>(&table, id)? else { continue };
        if e.revision == revision && e.status != status && e.status != "UNPROCESSABLE" {
            e.status = status.into();
            store::put(&mut table, id, &e)?;
        }
    }
    Ok(())
}
