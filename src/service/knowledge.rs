//! Knowledge-base entries (spec §2.5, §4.2; DECISIONS.md "Knowledge base"), text entries.
//!
//! Creating or changing an entry writes, in one transaction, the entry, its chunks and an
//! outbox row; the indexer (see `search`) applies the outbox to tantivy and then marks the
//! entry `READY`. Deleting writes an outbox row too, so index documents go with the entry.

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::check_len;
use crate::error::{Error, Result};
use crate::ingest::chunk;
use crate::store::records::{Chunk, KbEntry, KbText};
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

/// A new text entry.
#[derive(Debug, Clone)]
pub struct NewText {
    pub text: String,
    pub title: Option<String>,
    pub language: Option<String>,
    pub auto_refresh: bool,
}

fn validate_text(text: &str, title: Option<&String>, language: Option<&String>) -> Result<()> {
    check_len("text", text, 1, MAX_TEXT_CHARS)?;
    if text.trim().is_empty() {
        return Err(Error::invalid("text", "must contain more than white space"));
    }
    if let Some(t) = title {
        check_len("title", t, 1, 200)?;
    }
    language.map(|l| check_language(l)).transpose()?;
    Ok(())
}

/// Characters of the processed text kept as the entry's `summary`.
const SUMMARY_CHARS: usize = 200;

/// Stores `raw` as the entry's text, its chunks (replacing old ones), and queues the entry for
/// indexing.
fn write_content(txn: &WriteTransaction, entry: &mut KbEntry, raw: &str) -> Result<()> {
    let title = entry.title.clone().or_else(|| entry.generated_title.clone()).unwrap_or_default();
    let pieces = chunk::chunk(&title, raw);
    let mut chunks = txn.open_table(tables::KB_CHUNKS)?;
    chunks.retain_in((entry.id, 0)..=(entry.id, u32::MAX), |_, _| false)?;
    for (i, p) in pieces.iter().enumerate() {
        store::put(&mut chunks, (entry.id, i as u32), &Chunk { title: p.title.clone(), text: p.text.clone() })?;
    }
    let processed = pieces.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n\n");
    entry.summary = processed.chars().take(SUMMARY_CHARS).collect();
    let text = KbText { raw: raw.to_string(), processed };
    store::put(&mut txn.open_table(tables::KB_TEXTS)?, entry.id, &text)?;
    entry.chunk_count = pieces.len() as u32;
    entry.revision += 1;
    entry.status = "PROCESSED_TEXT".into();
    entry.error = None;
    enqueue(txn, entry.id, entry.revision)
}

/// Appends an outbox row for `entry` at `revision` (0 for a deletion).
fn enqueue(txn: &WriteTransaction, entry: u64, revision: u64) -> Result<()> {
    let seq = next_seq(txn, "outbox")?;
    txn.open_table(tables::KB_OUTBOX)?.insert(seq, (entry, revision))?;
    Ok(())
}

/// Creates a text entry of `replica` and queues it for indexing; returns its id.
pub async fn create_text(store: &Store, org: Uuid, replica: Uuid, new: NewText) -> Result<u64> {
    validate_text(&new.text, new.title.as_ref(), new.language.as_ref())?;
    let now = now_ms();
    let generated_title = Some(chunk::generated_title(&new.text)).filter(|t| !t.is_empty());
    store
        .write_outbox(move |txn| {
            let id = next_seq(txn, "kb_entry")?;
            let mut entry = KbEntry {
                id,
                replica,
                org,
                kind: "text".into(),
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
            write_content(txn, &mut entry, &new.text)?;
            store::put(&mut txn.open_table(tables::KB_ENTRIES)?, id, &entry)?;
            txn.open_table(tables::REPLICA_KB)?.insert((k(replica), id), ())?;
            Ok(id)
        })
        .await
}

/// Filters of the entry list.
#[derive(Debug, Default, Clone)]
pub struct ListQuery {
    pub status: Option<String>,
    pub kind: Option<String>,
    pub search: Option<String>,
    pub page: u64,
    pub page_size: u64,
}

/// A page of `replica`'s entries (oldest first) and the number that matched.
pub async fn list(store: &Store, replica: Uuid, q: ListQuery) -> Result<(Vec<KbEntry>, u64)> {
    store
        .read(move |txn| {
            let ids = txn.open_table(tables::REPLICA_KB)?;
            let entries = txn.open_table(tables::KB_ENTRIES)?;
            let search = q.search.as_ref().map(|s| s.to_lowercase());
            let mut found = Vec::new();
            for row in ids.range((k(replica), 0)..=(k(replica), u64::MAX))? {
                let id = row?.0.value().1;
                let Some(e) = store::get::<u64, KbEntry, _>(&entries, id)? else { continue };
                let title = e.title.as_ref().or(e.generated_title.as_ref()).map(|t| t.to_lowercase());
                if q.status.as_ref().is_some_and(|s| s != &e.status)
                    || q.kind.as_ref().is_some_and(|t| t != &e.kind)
                    || search.as_ref().is_some_and(|s| !title.as_ref().is_some_and(|t| t.contains(s.as_str())))
                {
                    continue;
                }
                found.push(e);
            }
            Ok(super::page_of(found, q.page, q.page_size))
        })
        .await
}

/// Entry `id` of `replica` with its texts and chunks; 404 when missing.
pub async fn get(store: &Store, replica: Uuid, id: u64) -> Result<(KbEntry, KbText, Vec<Chunk>)> {
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
            Ok((entry, text, chunks))
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
/// re-indexed. 404 when missing, 400 for invalid values.
pub async fn patch(store: &Store, replica: Uuid, id: u64, patch: Patch) -> Result<()> {
    if let Some(t) = &patch.raw_text {
        validate_text(t, None, None)?;
    }
    validate_text("x", patch.title.as_ref(), patch.language.as_ref())?;
    let now = now_ms();
    store
        .write_outbox(move |txn| {
            let mut table = txn.open_table(tables::KB_ENTRIES)?;
            let mut e = store::get::<u64, KbEntry, _>(&table, id)?
                .filter(|e| e.replica == replica)
                .ok_or_else(|| Error::not_found("knowledge-base entry"))?;
            let old = store::get::<u64, KbText, _>(&txn.open_table(tables::KB_TEXTS)?, id)?.unwrap_or_default();
            let text_changed = patch.raw_text.as_ref().is_some_and(|t| t != &old.raw);
            let raw = patch.raw_text.clone().unwrap_or(old.raw);
            let title_changed = patch.title.is_some() && patch.title != e.title;
            if let Some(t) = &patch.raw_text {
                e.generated_title = Some(chunk::generated_title(t)).filter(|t| !t.is_empty());
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
            if text_changed || title_changed {
                drop(table);
                write_content(txn, &mut e, &raw)?;
                table = txn.open_table(tables::KB_ENTRIES)?;
            }
            e.updated_at = now;
            store::put(&mut table, id, &e)
        })
        .await
}

/// Removes entry `id` of `replica` and its chunks; its index documents go via the outbox.
pub async fn delete(store: &Store, replica: Uuid, id: u64) -> Result<()> {
    store
        .write_outbox(move |txn| {
            let found = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KB_ENTRIES)?, id)?;
            if found.filter(|e| e.replica == replica).is_none() {
                return Err(Error::not_found("knowledge-base entry"));
            }
            remove_in(txn, replica, id)
        })
        .await
}

fn remove_in(txn: &WriteTransaction, replica: Uuid, id: u64) -> Result<()> {
    txn.open_table(tables::KB_ENTRIES)?.remove(id)?;
    txn.open_table(tables::KB_TEXTS)?.remove(id)?;
    txn.open_table(tables::REPLICA_KB)?.remove((k(replica), id))?;
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
    ids.into_iter().try_for_each(|id| remove_in(txn, replica, id))
}

/// Marks entries `READY` whose current revision is the one indexed (`(entry, revision)` pairs).
pub fn mark_ready_in(txn: &WriteTransaction, indexed: &[(u64, u64)]) -> Result<()> {
    let mut table = txn.open_table(tables::KB_ENTRIES)?;
    for &(id, revision) in indexed {
        let Some(mut e) = store::get::<u64, KbEntry, _>(&table, id)? else { continue };
        if e.revision == revision && e.status != "READY" {
            e.status = "READY".into();
            store::put(&mut table, id, &e)?;
        }
    }
    Ok(())
}
