//! Listing and reading knowledge-base entries: filters, sort order, and the entry with its
//! source record (DECISIONS.md "Knowledge base": entry fields, list filters).

use redb::ReadOnlyTable;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::records::{Chunk, KbEntry, KbKind, KbSource, KbStatus, KbText};
use crate::store::{self, k, tables, Store};

/// Filters and order of the entry lists (per replica and organization-wide).
#[derive(Debug, Default, Clone)]
pub struct ListQuery {
    /// Only entries in one of these statuses (empty: any).
    pub status: Vec<KbStatus>,
    /// Only entries of one of these types (empty: any).
    pub kind: Vec<KbKind>,
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
        let failed = e.status == KbStatus::Unprocessable;
        let haystack =
            [self.display_title().cloned(), self.source.url.clone(), self.source.file.as_ref().map(|f| f.name.clone())];
        (q.status.is_empty() || q.status.contains(&e.status))
            && (q.kind.is_empty() || q.kind.contains(&e.kind))
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
        SortKey::Status => views.sort_by_key(|v| (v.entry.status as usize, v.entry.id)),
    }
    if sort.descending {
        views.reverse();
    }
}

/// The entry with its source record, read from the open `kbid_source` table.
fn view_of(sources: &ReadOnlyTable<u64, &'static [u8]>, entry: KbEntry) -> Result<EntryView> {
    let source = store::get::<u64, KbSource, _>(sources, entry.id)?.unwrap_or_default();
    Ok(EntryView { entry, source })
}

/// A page of the entries of `replicas` (one replica's list, or every replica a caller may see
/// for the organization-wide list) and the number that matched.
pub async fn list(store: &Store, replicas: Vec<Uuid>, q: ListQuery) -> Result<(Vec<EntryView>, u64)> {
    store
        .read_scan(move |txn| {
            let ids = txn.open_table(tables::REPLICA_KB)?;
            let entries = txn.open_table(tables::KBID_ENTRY)?;
            let sources = txn.open_table(tables::KBID_SOURCE)?;
            let search = q.search.as_ref().map(|s| s.to_lowercase());
            let mut found = Vec::new();
            for replica in replicas {
                for row in ids.range((k(replica), 0)..=(k(replica), u64::MAX))? {
                    let id = row?.0.value().1;
                    let Some(e) = store::get::<u64, KbEntry, _>(&entries, id)? else { continue };
                    let v = view_of(&sources, e)?;
                    if v.matches(&q, search.as_deref()) {
                        found.push(v);
                    }
                }
            }
            sort_views(&mut found, q.sort);
            Ok(crate::service::page_of(found, q.page, q.page_size))
        })
        .await
}

/// The replica of entry `id` when it is an entry of `org`; 404 otherwise (the organization-wide
/// entry operations find the replica this way, then act as the per-replica ones).
pub async fn replica_of(store: &Store, org: Uuid, id: u64) -> Result<Uuid> {
    store
        .read(move |txn| store::get::<u64, KbEntry, _>(&txn.open_table(tables::KBID_ENTRY)?, id))
        .await?
        .filter(|e| e.org == org)
        .map(|e| e.replica)
        .ok_or_else(|| Error::not_found("knowledge-base entry"))
}

/// Entry `id` of `replica` with its source, texts and chunks; 404 when missing.
pub async fn get(store: &Store, replica: Uuid, id: u64) -> Result<(EntryView, KbText, Vec<Chunk>)> {
    store
        .read(move |txn| {
            let entry = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KBID_ENTRY)?, id)?
                .filter(|e| e.replica == replica)
                .ok_or_else(|| Error::not_found("knowledge-base entry"))?;
            let chunks = store::kb::chunks_of(&txn.open_table(tables::KBCHUNK_CHUNK)?, id)?;
            let text = store::get::<u64, KbText, _>(&txn.open_table(tables::KBID_TEXT)?, id)?.unwrap_or_default();
            Ok((view_of(&txn.open_table(tables::KBID_SOURCE)?, entry)?, text, chunks))
        })
        .await
}
