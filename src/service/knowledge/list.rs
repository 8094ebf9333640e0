//! Listing and reading knowledge-base entries: filters, sort order, and the entry with its
//! source record (docs/decisions.md "Knowledge base": entry fields, list filters).

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::kv::Reads;
use crate::store::records::{Chunk, KbEntry, KbKind, KbSource, KbStatus, KbText};
use std::collections::HashSet;

use crate::service::visibility;
use crate::store::kb::order as kb_order;
use crate::store::records::User;
use crate::store::{self, Store};

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

impl ListQuery {
    /// Whether any filter is set (else every entry of the replicas matches).
    fn filtered(&self) -> bool {
        !self.status.is_empty() || !self.kind.is_empty() || self.search.is_some() || self.has_error.is_some()
    }
}

/// Order of the entry list: `createdAt` (default), `updatedAt`, `title`, `status`; descending
/// when `descending`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

pub use crate::store::kb::order::SortKey;

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

/// The entry with its source record, read from the open `kbid_source` table.
fn view_of(txn: &impl Reads, entry: KbEntry) -> Result<EntryView> {
    let source = store::kb::source_in(txn, entry.id)?;
    Ok(EntryView { entry, source })
}

/// Whose entries a list shows.
#[derive(Debug, Clone)]
pub enum Scope {
    /// One replica's (`GET /v1/replicas/{replicaUUID}/knowledge-base`).
    Replica(Uuid),
    /// Every replica's of the organization that `user` may see (`GET /v1/knowledge-base`): the
    /// private replicas only for their owner and whitelisted users; all for the organization.
    Organization { org: Uuid, user: Option<User> },
}

/// A page of the entries of `scope` and the number that matched.
///
/// The order comes from `store::kb::order`, kept at write time. Without a filter a page reads its
/// own records only: `total` comes from the counts kept beside the orders (less the entries of
/// the private replicas the user may not see), and the order's keys are walked from its nearer
/// end. With a filter (`status`, `type`, `search`, `hasError`) the list walks the order once,
/// reading each entry to test it and count the matches: no sort and no copy, but a read of
/// every entry of the scope.
pub async fn list(store: &Store, scope: Scope, q: ListQuery) -> Result<(Vec<EntryView>, u64)> {
    store
        .read_scan(move |txn| {
            let (id, hidden) = match &scope {
                Scope::Replica(r) => (*r, HashSet::new()),
                Scope::Organization { org, user } => (*org, visibility::hidden_in(txn, *org, user.as_ref())?),
            };
            let reader = store::kb::entry_reader(txn)?;
            let read = |id: u64| -> Result<Option<EntryView>> {
                let view = |entry: KbEntry| Ok(EntryView { source: reader.source(entry.id)?, entry });
                reader.entry(id)?.map(view).transpose()
            };
            let ordered = |descending: bool| -> Result<_> {
                let all = kb_order::walk(txn, id, q.sort.key, descending)?;
                Ok(all
                    .filter(|l| l.as_ref().map_or(true, |(_, replica)| !hidden.contains(replica)))
                    .map(|l| l.map(|(id, _)| id)))
            };
            if !q.filtered() {
                let total = total_in(txn, &scope, &hidden)?;
                let ids = crate::service::page_from_nearer_end(q.page, q.page_size, total, |from_end| {
                    ordered(q.sort.descending != from_end)
                })?;
                let page = ids.into_iter().map(read).filter_map(Result::transpose).collect::<Result<_>>()?;
                return Ok((page, total));
            }
            let search = q.search.as_ref().map(|s| s.to_lowercase());
            let skip = q.page.saturating_sub(1).saturating_mul(q.page_size);
            let (mut page, mut total) = (Vec::new(), 0u64);
            for id in ordered(q.sort.descending)? {
                let Some(v) = read(id?)? else { continue };
                if v.matches(&q, search.as_deref()) {
                    if total >= skip && (page.len() as u64) < q.page_size {
                        page.push(v);
                    }
                    total += 1;
                }
            }
            Ok((page, total))
        })
        .await
}

/// The entries of `scope` from the counts kept at write time, less those of the `hidden`
/// replicas.
fn total_in(txn: &crate::store::kv::ReadTransaction, scope: &Scope, hidden: &HashSet<u128>) -> Result<u64> {
    let summaries = store::kb::summary::open(txn)?;
    let entries_of = |r: Uuid| -> Result<u64> { Ok(summaries.get(r)?.entries) };
    match scope {
        Scope::Replica(r) => entries_of(*r),
        Scope::Organization { org, .. } => {
            let all = crate::service::quotas::org_entries(txn, *org)?;
            let hidden = hidden
                .iter()
                .try_fold(0u64, |n, &r| Ok::<_, crate::error::Error>(n + entries_of(Uuid::from_u128(r))?))?;
            Ok(all.saturating_sub(hidden))
        }
    }
}

/// The replica of entry `id` when it is an entry of `org`; 404 otherwise (the organization-wide
/// entry operations find the replica this way, then act as the per-replica ones).
pub async fn replica_of(store: &Store, org: Uuid, id: u64) -> Result<Uuid> {
    store
        .read(move |txn| store::kb::entry(txn, id))
        .await?
        .filter(|e| e.org == org)
        .map(|e| e.replica)
        .ok_or_else(|| Error::not_found("knowledge-base entry"))
}

/// Entry `id` of `replica` with its source, texts and chunks; 404 when missing.
pub async fn get(store: &Store, replica: Uuid, id: u64) -> Result<(EntryView, KbText, Vec<Chunk>)> {
    store
        .read(move |txn| {
            let entry = store::kb::entry_of(txn, replica, id)?;
            let (chunks, text) = (store::kb::chunks(txn, id)?, store::kb::text(txn, id)?.unwrap_or_default());
            Ok((view_of(txn, entry)?, text, chunks))
        })
        .await
}
