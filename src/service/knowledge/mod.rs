//! Knowledge-base entries (spec §2.5, §4.2; docs/decisions.md "Knowledge base").
//!
//! A text entry is chunked at creation; a `url` entry becomes an ingestion job (fetched and
//! extracted by `ingest::pipeline`); a `filename` entry waits for its bytes on a signed upload
//! URL (see [`uploads`]). Whatever writes an entry's text writes, in the same
//! transaction, its chunks and an outbox row; the indexer (see `search`) applies the outbox to
//! tantivy and, once searches see the chunks, marks the entry `READY`. Deleting writes an outbox row
//! too, so index documents go with the entry.

use uuid::Uuid;

use crate::store::kv::WriteTransaction;

mod create;
mod distilled;
mod list;
pub mod uploads;

pub use create::{
    claim_url, create, Content, Created, Limits, NewEntry, MAX_FILENAME_CHARS, MAX_URL_CHARS, YOUTUBE_UNSUPPORTED,
};
pub use distilled::{distilled_in, Distilled};
pub use list::{get, list, replica_of, EntryView, ListQuery, Scope, Sort, SortKey, SORTS};

use super::check_len;
use crate::error::{Error, Result};
pub use crate::ingest::content::{write_content, Naming, PreparedText};
pub use crate::ingest::pipeline::add_job;
pub use crate::store::kb::{enqueue, put_source, source_in};
use crate::store::records::{KbEntry, KbKind, KbStatus};
use crate::store::{self, k, now_ms, tables, Store};

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
/// Longest text entry, in characters (the same limit caps the text extracted from a file).
pub use crate::ingest::extract::MAX_TEXT_CHARS;

/// The most characters of an entry's `title`.
pub const MAX_TITLE_CHARS: usize = 200;

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
        check_len("title", t, 1, MAX_TITLE_CHARS)?;
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
///
/// The new text is prepared (chunked, analysed: `PreparedText`) before the write, from the
/// entry as read; the write applies it only if the entry is still at the revision and status it
/// was read at (its text is the one read) and still names its chunks the same, else it writes
/// nothing and the patch is read and prepared again (each lost race is another write of this
/// entry that succeeded).
pub async fn patch(store: &Store, replica: Uuid, id: u64, patch: Patch) -> Result<()> {
    if let Some(t) = &patch.raw_text {
        validate_text(t)?;
    }
    validate_meta(patch.title.as_ref(), patch.language.as_ref())?;
    let patch = std::sync::Arc::new(patch);
    for _ in 0..MAX_PATCH_RACES {
        let plan = plan_patch(store, replica, id, patch.clone()).await?;
        let patch = patch.clone();
        let now = now_ms();
        let applied = store.write_kb(move |txn| apply_patch(txn, replica, id, &patch, &plan, now)).await?;
        if applied {
            return Ok(());
        }
    }
    Err(Error::internal(format!("entry {id} changed {MAX_PATCH_RACES} times while a PATCH prepared its text")))
}

/// Times a PATCH reads and prepares again after losing a race with another write of the entry.
const MAX_PATCH_RACES: usize = 16;

/// A PATCH as prepared from the entry read before the write.
struct PatchPlan {
    /// The entry's revision and status when read. An entry at the same revision and status has
    /// the same text: its text changes only with a new revision (`write_content`) or with a
    /// move to `RAW_TEXT` (the pipeline's extracted text), which no entry makes from `RAW_TEXT`
    /// and after which it leaves `RAW_TEXT` only for a new revision or `UNPROCESSABLE`
    /// (`KbStatus::may_become`).
    read_at: (u64, KbStatus),
    /// Whether `rawText` differs from the stored text.
    text_changed: bool,
    /// The entry's text re-chunked, when the patch changes it or what names or analyses it.
    text: Option<PreparedText>,
}

/// Reads entry `id` and prepares what `patch` makes of its text.
async fn plan_patch(store: &Store, replica: Uuid, id: u64, patch: std::sync::Arc<Patch>) -> Result<PatchPlan> {
    let (mut e, old) = store
        .read_scan(move |txn| {
            let e = store::kb::entry_of(txn, replica, id)?;
            let old = store::kb::text(txn, id)?.unwrap_or_default();
            Ok((e, old.raw))
        })
        .await?;
    let read_at = (e.revision, e.status);
    let text_changed = patch.raw_text.as_ref().is_some_and(|t| t != &old);
    let title_changed = patch.title.is_some() && patch.title != e.title;
    let language_changed = patch.language.is_some() && patch.language != e.language;
    let raw = if text_changed { patch.raw_text.clone().unwrap_or_default() } else { old };
    let rewrite = text_changed || ((title_changed || language_changed) && !raw.is_empty());
    set_fields(&mut e, &patch);
    let naming = Naming { generate: text_changed && e.kind == KbKind::Text, ..Naming::of(&e) };
    let text = if rewrite { Some(PreparedText::prepare(naming, raw).await?) } else { None };
    Ok(PatchPlan { read_at, text_changed, text })
}

/// The fields `patch` sets as they are (not the text).
fn set_fields(e: &mut KbEntry, patch: &Patch) {
    if patch.title.is_some() {
        e.title = patch.title.clone();
    }
    if patch.language.is_some() {
        e.language = patch.language.clone();
    }
    if let Some(a) = patch.auto_refresh {
        e.auto_refresh = a;
    }
}

/// Applies a planned PATCH; `false` (nothing written) when the entry changed since the plan
/// was read.
fn apply_patch(
    txn: &WriteTransaction,
    replica: Uuid,
    id: u64,
    patch: &Patch,
    plan: &PatchPlan,
    now: i64,
) -> Result<bool> {
    let mut e = store::kb::entry_of(txn, replica, id)?;
    if (e.revision, e.status) != plan.read_at {
        return Ok(false);
    }
    set_fields(&mut e, patch);
    if plan.text.as_ref().is_some_and(|t| !t.fits(&e)) {
        return Ok(false);
    }
    if plan.text_changed {
        crate::ingest::pipeline::drop_job(txn, id)?;
    } else if patch.auto_refresh == Some(true) && e.kind == KbKind::Website && e.status == KbStatus::Ready {
        add_job(txn, id)?; // turning autoRefresh on re-fetches now, then every interval
    }
    if let Some(text) = &plan.text {
        write_content(txn, &mut e, text)?;
    }
    e.updated_at = now;
    store::kb::summary::put_entry(txn, &e)?;
    Ok(true)
}

/// Removes entry `id` of `replica`, its texts, chunks, pending job and uploaded file (the file
/// after the commit); its index documents go via the outbox.
pub async fn delete(store: &Store, replica: Uuid, id: u64) -> Result<()> {
    store
        .write_kb(move |txn| {
            let e = store::kb::entry_of(txn, replica, id)?;
            remove_in(txn, &e)
        })
        .await?;
    store.sweep_files().await;
    Ok(())
}

fn remove_in(txn: &WriteTransaction, e: &KbEntry) -> Result<()> {
    let id = e.id;
    let source = source_in(txn, id)?;
    if let Some(url) = &source.url {
        txn.open_table(tables::REPLICA_URL)?.remove((k(e.replica), url.as_str()))?;
    }
    crate::service::quotas::uncount_kb_entry_in(txn, e.org)?;
    store::kb::summary::remove_entry(txn, e)?;
    store::kb::remove_rows(txn, e)?;
    crate::ingest::pipeline::drop_job(txn, id)?;
    enqueue(txn, id, 0)
}

/// Removes every entry of `replica` (replica deletion).
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    for id in store::kb::ids_of_replica(txn, replica)? {
        if let Some(e) = store::kb::entry(txn, id)? {
            remove_in(txn, &e)?;
        }
    }
    Ok(())
}
