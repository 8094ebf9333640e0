//! A replica's knowledge-base summary ([`KbSummary`]: the entry count and the first titles),
//! kept in step at write time so that a replica read (`distilledKnowledge`, `knowledgeBase`)
//! costs one lookup instead of a scan of the replica's entries.
//!
//! Every write of an entry record goes through [`put_entry`] or [`remove_entry`], which also keep
//! the entry lists' orders in step ([`super::order`]). The invariant: `titles` holds the first
//! `min(MAX_TITLES, titled entries)` titled entries in id order, so a change outside a full
//! window needs no scan, and a title leaving a full window is replaced by scanning forward from
//! the window's last id.

use uuid::Uuid;

use crate::error::Result;
use crate::store::kv::{ReadableTable, Reads, WriteTransaction};
use crate::store::records::{KbEntry, KbSummary};
use crate::store::{get, k, put, tables};

/// Titles kept per replica.
pub const MAX_TITLES: usize = 100;

/// The title a summary shows for `e`: given, else generated.
fn title_of(e: &KbEntry) -> Option<&str> {
    e.title.as_deref().or(e.generated_title.as_deref())
}

/// The summaries table, open for reading the summaries of several replicas in one read.
pub struct Summaries<T>(T);

/// The summaries table of `txn` (a store snapshot's is shared by its reads). Errors: the
/// store's.
pub fn open<R: Reads>(txn: &R) -> Result<Summaries<R::Table<'_, u128, &'static [u8]>>> {
    Ok(Summaries(txn.read_table(tables::REPLICA_KBSUMMARY)?))
}

impl<T: ReadableTable<u128, &'static [u8]>> Summaries<T> {
    /// The summary of `replica` (empty when none). Errors: the store's.
    pub fn get(&self, replica: Uuid) -> Result<KbSummary> {
        Ok(get::<u128, KbSummary, _>(&self.0, k(replica))?.unwrap_or_default())
    }
}

/// Writes entry `e` and brings its replica's summary (a new entry, or a changed title) and the
/// list orders in step.
pub fn put_entry(txn: &WriteTransaction, e: &KbEntry) -> Result<()> {
    let mut entries = txn.open_table(tables::KBID_ENTRY)?;
    let before = get::<u64, KbEntry, _>(&entries, e.id)?;
    put(&mut entries, e.id, e)?;
    drop(entries);
    super::order::changed(txn, before.as_ref(), Some(e))?;
    let before = before.as_ref().map(title_of);
    if before == Some(title_of(e)) {
        return Ok(());
    }
    changed_in(txn, e.replica, e.id, before, Some(title_of(e)))
}

/// Removes entry `e`'s record and brings its replica's summary and the list orders in step.
pub fn remove_entry(txn: &WriteTransaction, e: &KbEntry) -> Result<()> {
    let stored = txn
        .open_table(tables::KBID_ENTRY)?
        .remove(e.id)?
        .map(|v| crate::store::codec::decode(v.value()))
        .transpose()?;
    super::order::changed(txn, Some(stored.as_ref().unwrap_or(e)), None)?;
    changed_in(txn, e.replica, e.id, Some(title_of(e)), None)
}

/// Applies one entry's change: `before` / `after` are its title before and after the write
/// (outer `None`: the entry did not exist / no longer exists).
fn changed_in(
    txn: &WriteTransaction,
    replica: Uuid,
    id: u64,
    before: Option<Option<&str>>,
    after: Option<Option<&str>>,
) -> Result<()> {
    let mut table = txn.open_table(tables::REPLICA_KBSUMMARY)?;
    let mut s = get::<u128, KbSummary, _>(&table, k(replica))?.unwrap_or_default();
    s.entries = (s.entries + u64::from(after.is_some())).saturating_sub(u64::from(before.is_some()));
    let was_full = s.titles.len() >= MAX_TITLES;
    match (s.titles.binary_search_by_key(&id, |(i, _)| *i), after.flatten()) {
        (Ok(at), Some(title)) => s.titles[at].1 = title.to_string(),
        (Ok(at), None) => {
            s.titles.remove(at);
            if was_full {
                refill(txn, replica, &mut s)?;
            }
        }
        (Err(at), Some(title)) if at < MAX_TITLES => {
            s.titles.insert(at, (id, title.to_string()));
            s.titles.truncate(MAX_TITLES);
        }
        (Err(_), _) => {}
    }
    put(&mut table, k(replica), &s)
}

/// Fills `s.titles` up to [`MAX_TITLES`] with the titled entries after its last one.
fn refill(txn: &WriteTransaction, replica: Uuid, s: &mut KbSummary) -> Result<()> {
    let from = s.titles.last().map_or(0, |(id, _)| id + 1);
    let entries = txn.open_table(tables::KBID_ENTRY)?;
    for row in txn.open_table(tables::REPLICA_KB)?.range((k(replica), from)..=(k(replica), u64::MAX))? {
        if s.titles.len() >= MAX_TITLES {
            break;
        }
        let id = row?.0.value().1;
        if let Some(title) = get::<u64, KbEntry, _>(&entries, id)?.as_ref().and_then(title_of) {
            s.titles.push((id, title.to_string()));
        }
    }
    Ok(())
}

/// Computes every replica's summary from its entries (the store migration that adds the table).
pub fn rebuild_all_in(txn: &WriteTransaction) -> Result<()> {
    let mut summaries: std::collections::BTreeMap<u128, KbSummary> = Default::default();
    for row in txn.open_table(tables::KBID_ENTRY)?.iter()? {
        let e: KbEntry = crate::store::codec::decode(row?.1.value())?;
        let s = summaries.entry(k(e.replica)).or_default();
        s.entries += 1;
        if let (Some(title), true) = (title_of(&e), s.titles.len() < MAX_TITLES) {
            s.titles.push((e.id, title.to_string()));
        }
    }
    let mut table = txn.open_table(tables::REPLICA_KBSUMMARY)?;
    for (replica, s) in summaries {
        put(&mut table, replica, &s)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use redb::Database;

    use super::*;
    use crate::store::records::{KbKind, KbStatus};

    /// A `READY` text entry of `replica` with one chunk (for the store's unit tests).
    pub fn entry(id: u64, replica: Uuid, title: Option<&str>) -> KbEntry {
        KbEntry {
            id,
            replica,
            org: Uuid::nil(),
            kind: KbKind::Text,
            status: KbStatus::Ready,
            title: title.map(str::to_string),
            generated_title: None,
            language: None,
            auto_refresh: false,
            summary: String::new(),
            chunk_count: 1,
            revision: 1,
            error: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    /// Writes `e` as a new entry of its replica (the row of `replica_kb` too).
    fn add(txn: &WriteTransaction, e: &KbEntry) {
        txn.open_table(tables::REPLICA_KB).unwrap().insert((k(e.replica), e.id), ()).unwrap();
        put_entry(txn, e).unwrap();
    }

    fn summary(db: &Database, replica: Uuid) -> KbSummary {
        open(&crate::store::kv::begin_read(db).unwrap()).unwrap().get(replica).unwrap()
    }

    #[test]
    fn the_summary_follows_adds_retitles_and_removals_and_agrees_with_a_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("s.redb")).unwrap();
        let (r, other) = (Uuid::now_v7(), Uuid::now_v7());
        let txn = crate::store::kv::begin_write(&db).unwrap();
        // 180 entries, every third untitled: 120 titled, so the window fills before the end.
        let titled = |id: u64| (id % 3 != 0).then(|| format!("T{id}"));
        for id in 1..=180 {
            add(&txn, &entry(id, r, titled(id).as_deref()));
        }
        add(&txn, &entry(181, other, Some("elsewhere")));
        txn.commit().unwrap();
        let s = summary(&db, r);
        assert_eq!(s.entries, 180);
        assert_eq!(s.titles.len(), MAX_TITLES);
        assert_eq!(s.titles[0], (1, "T1".into()));

        let txn = crate::store::kv::begin_write(&db).unwrap();
        let last = s.titles.last().unwrap().0;
        put_entry(&txn, &entry(3, r, Some("now titled"))).unwrap(); // enters the full window
        put_entry(&txn, &entry(1, r, None)).unwrap(); // leaves it: the next titled one comes in
        remove_entry(&txn, &entry(2, r, Some("T2"))).unwrap();
        txn.open_table(tables::REPLICA_KB).unwrap().remove((k(r), 2)).unwrap();
        put_entry(&txn, &entry(4, r, Some("renamed"))).unwrap();
        txn.commit().unwrap();
        let s = summary(&db, r);
        assert_eq!(s.entries, 179);
        assert_eq!(&s.titles[..3], &[(3, "now titled".into()), (4, "renamed".into()), (5, "T5".into())]);
        assert_eq!(s.titles.len(), MAX_TITLES);
        assert!(s.titles.last().unwrap().0 > last, "the window moved forward");

        let incremental = (summary(&db, r), summary(&db, other));
        let txn = crate::store::kv::begin_write(&db).unwrap();
        txn.delete_table(tables::REPLICA_KBSUMMARY).unwrap();
        rebuild_all_in(&txn).unwrap();
        txn.commit().unwrap();
        assert_eq!((summary(&db, r), summary(&db, other)), incremental, "kept in step = computed afresh");
    }
}
