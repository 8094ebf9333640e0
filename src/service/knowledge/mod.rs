//! Knowledge-base entries (spec §2.5, §4.2; DECISIONS.md "Knowledge base").
//!
//! A text entry is chunked at creation; a `url` entry becomes an ingestion job (fetched and
//! extracted by `ingest::pipeline`); a `filename` entry waits for its bytes on a signed upload
//! URL (see [`super::uploads`]). Whatever writes an entry's text writes, in the same
//! transaction, its chunks and an outbox row; the indexer (see `search`) applies the outbox to
//! tantivy and, once searches see the chunks, marks the entry `READY`. Deleting writes an outbox row
//! too, so index documents go with the entry.

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

mod create;
mod distilled;
mod list;

pub use create::{create, Content, Created, Limits, NewEntry, YOUTUBE_UNSUPPORTED};
pub use distilled::{distilled_in, Distilled};
pub use list::{get, list, replica_of, EntryView, ListQuery, Scope, Sort, SortKey, SORTS};

use super::check_len;
use crate::error::{Error, Result};
pub use crate::ingest::content::write_content;
pub use crate::store::kb::{add_job, enqueue, put_source, source_in};
use crate::store::records::{KbEntry, KbKind, KbStatus, KbText};
use crate::store::{self, k, now_ms, tables, Store};
use crate::text::chunk;

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

/// Entry statuses in processing order, then the failure status (wire names).
pub const STATUSES: &[&str] = &KbStatus::NAMES;
/// Entry types (wire names).
pub const TYPES: &[&str] = &KbKind::NAMES;
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
            let table = txn.open_table(tables::KBID_ENTRY)?;
            let mut e = store::get::<u64, KbEntry, _>(&table, id)?
                .filter(|e| e.replica == replica)
                .ok_or_else(|| Error::not_found("knowledge-base entry"))?;
            let old = store::get::<u64, KbText, _>(&txn.open_table(tables::KBID_TEXT)?, id)?.unwrap_or_default();
            let text_changed = patch.raw_text.as_ref().is_some_and(|t| t != &old.raw);
            let raw = patch.raw_text.clone().unwrap_or(old.raw);
            let title_changed = patch.title.is_some() && patch.title != e.title;
            let language_changed = patch.language.is_some() && patch.language != e.language;
            if text_changed && e.kind == KbKind::Text {
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
                txn.open_table(tables::KBID_JOB)?.remove(id)?;
            } else if patch.auto_refresh == Some(true) && e.kind == KbKind::Website && e.status == KbStatus::Ready {
                add_job(txn, id)?; // turning autoRefresh on re-fetches now, then every interval
            }
            if text_changed || ((title_changed || language_changed) && !raw.is_empty()) {
                write_content(txn, &mut e, &raw)?;
            }
            e.updated_at = now;
            store::kb_summary::put_entry(txn, &e)
        })
        .await
}

/// Removes entry `id` of `replica`, its texts, chunks, file and pending job; its index
/// documents go via the outbox.
pub async fn delete(store: &Store, replica: Uuid, id: u64) -> Result<()> {
    store
        .write_kb(move |txn| {
            let found = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KBID_ENTRY)?, id)?;
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
    store::kb_summary::remove_entry(txn, e)?;
    txn.open_table(tables::KBID_TEXT)?.remove(id)?;
    txn.open_table(tables::KBID_SOURCE)?.remove(id)?;
    txn.open_table(tables::KBID_FILE)?.remove(id)?;
    txn.open_table(tables::KBID_JOB)?.remove(id)?;
    txn.open_table(tables::REPLICA_KB)?.remove((k(e.replica), id))?;
    txn.open_table(tables::KBCHUNK_CHUNK)?.retain_in((id, 0)..=(id, u32::MAX), |_, _| false)?;
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
        let found = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KBID_ENTRY)?, id)?;
        if let Some(e) = found {
            remove_in(txn, &e)?;
        }
    }
    Ok(())
}
