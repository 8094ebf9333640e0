//! The read snapshot that reads share until the next commit (the read path).
//!
//! Why share: a read of a replica took six table opens and a read transaction of its own, and
//! beginning, opening and dropping them cost more than its lookups (each open walks redb's
//! table tree and decodes the table's definition). A redb read transaction is a snapshot of
//! the last commit; every read that begins before the next commit sees exactly what a fresh
//! transaction would, so they may all use one, and the tables it opened.
//!
//! Why it stays correct: the writer thread is the only committer. After each commit, before it
//! answers any write of the batch, it moves the generation on and drops the shared snapshot
//! ([`Shared::committed`]). A snapshot is tagged with the generation read *before* it began, so
//! it holds every commit up to then; a read uses it only while the generation is unchanged, so a
//! read that begins after a write was acknowledged never sees a snapshot without that write.
//! A snapshot that lost a race (tagged with an older generation) is simply not used again. Nothing
//! keeps an old snapshot alive past the next commit except the reads still using it, so redb
//! can reuse the pages later commits free.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use redb::{Database, ReadableDatabase, TableDefinition, TableHandle, Value};

use super::kv::{ReadOnlyTable, ReadTransaction, StoreKey};

use super::codec::Record;
use crate::error::Result;

/// A read transaction shared by the reads that begin before the next commit, and the tables
/// opened in it. Dereferences to the [`ReadTransaction`], so `open_table` works as on any.
pub struct Snapshot {
    txn: ReadTransaction,
    /// The generation when it began (see the module documentation).
    generation: u64,
    /// Tables opened through [`Snapshot::table`], by name.
    tables: Memo<String>,
    /// Records decoded through [`Snapshot::record`], by type and key (at most [`MEMO_MAX`]).
    records: Memo<(TypeId, u128)>,
}

/// Values kept for the life of one snapshot, by key, of any type.
type Memo<K> = Mutex<HashMap<K, Arc<dyn Any + Send + Sync>>>;

/// Most records one snapshot keeps decoded (a snapshot lives until the next commit; past this
/// its reads decode as without it).
pub const MEMO_MAX: usize = 4096;

impl std::ops::Deref for Snapshot {
    type Target = ReadTransaction;
    fn deref(&self) -> &ReadTransaction {
        &self.txn
    }
}

/// A snapshot's reads share its tables: each is opened once per snapshot ([`Snapshot::table`]).
impl super::kv::Reads for Snapshot {
    type Table<'t, K: StoreKey + Send + Sync, V: Value + Send + Sync + 'static> = Arc<ReadOnlyTable<K, V>>;

    fn read_table<K, V>(&self, def: TableDefinition<K, V>) -> Result<Arc<ReadOnlyTable<K, V>>>
    where
        K: StoreKey + Send + Sync,
        V: Value + Send + Sync + 'static,
    {
        self.table(def)
    }
}

impl Snapshot {
    /// A snapshot of its own over `txn` (a PostgreSQL read: shared by nothing, so its
    /// generation is never compared).
    pub fn of(txn: ReadTransaction) -> Snapshot {
        Snapshot { txn, generation: 0, tables: Memo::default(), records: Memo::default() }
    }

    fn begin(db: &Database, generation: u64) -> Result<Snapshot> {
        Ok(Snapshot {
            txn: ReadTransaction::Redb(db.begin_read()?),
            generation,
            tables: Memo::default(),
            records: Memo::default(),
        })
    }

    /// Table `def`, opened once per snapshot and then shared by its reads. Errors as
    /// [`ReadTransaction::open_table`] (a missing table, a type mismatch, a storage error).
    pub fn table<K, V>(&self, def: TableDefinition<K, V>) -> Result<Arc<ReadOnlyTable<K, V>>>
    where
        K: StoreKey + Send + Sync,
        V: Value + Send + Sync + 'static,
        ReadOnlyTable<K, V>: Send + Sync,
    {
        let opened = memoized(&self.tables, def.name(), usize::MAX, || Ok(Some(self.txn.open_table(def)?)))?;
        opened.ok_or_else(|| crate::error::Error::internal("a table open gave no table"))
    }

    /// Record `key` of table `def` (a `u128`-keyed table of `R` records), decoded once per
    /// snapshot and then shared by its reads: the replica of a request's path is read by most
    /// operations under `/v1/replicas/{replicaUUID}`, and decoding it was the largest part of
    /// a history read. `None` when there is no such record (not kept).
    /// Errors as [`crate::store::get`].
    pub fn record<R>(&self, def: TableDefinition<u128, &'static [u8]>, key: u128) -> Result<Option<Arc<R>>>
    where
        R: Record + Send + Sync + 'static,
    {
        memoized(&self.records, &(TypeId::of::<R>(), key), MEMO_MAX, || {
            super::get::<u128, R, _>(&*self.table(def)?, key)
        })
    }
}

/// The value of `key` in `memo`, else `load`'s (kept while `memo` holds fewer than `max`).
/// `None` from `load` is returned and not kept. A kept value of another type (the same table
/// name opened with other types) is loaded again, and `load`'s error is returned as is. The
/// key is copied only when a value is kept, so a hit allocates nothing.
fn memoized<K, Q, T>(
    memo: &Memo<K>,
    key: &Q,
    max: usize,
    load: impl FnOnce() -> Result<Option<T>>,
) -> Result<Option<Arc<T>>>
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: ToOwned<Owned = K> + std::hash::Hash + Eq + ?Sized,
    T: Send + Sync + 'static,
{
    let lock = || memo.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(Ok(found)) = lock().get(key).cloned().map(|v| v.downcast::<T>()) {
        return Ok(Some(found));
    }
    let Some(value) = load()?.map(Arc::new) else { return Ok(None) };
    let mut kept = lock();
    if kept.len() < max {
        kept.insert(key.to_owned(), value.clone());
    }
    Ok(Some(value))
}

/// The shared [`Snapshot`] of one open database, and its generation: a number that changes at
/// every commit, unique in the process (a store reopened after a full disk starts a new one, so
/// a number is never seen twice; [`Shared::generation`]).
pub struct Shared {
    current: ArcSwapOption<Snapshot>,
    generation: AtomicU64,
}

/// The last generation handed out in this process ([`Shared`]).
static GENERATIONS: AtomicU64 = AtomicU64::new(0);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed) + 1
}

impl Default for Shared {
    fn default() -> Shared {
        Shared { current: ArcSwapOption::empty(), generation: AtomicU64::new(next_generation()) }
    }
}

impl Shared {
    /// The generation now: equal for two reads only if no commit came between them. A read
    /// that begins after a write was acknowledged sees a newer generation than any read that
    /// ended before the write's commit (the writer moves it on before answering).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The shared snapshot when no commit came since it began; else a new one, shared from now.
    pub fn get(&self, db: &Database) -> Result<Arc<Snapshot>> {
        let generation = self.generation();
        if let Some(s) = self.current.load_full().filter(|s| s.generation == generation) {
            return Ok(s);
        }
        let s = Arc::new(Snapshot::begin(db, generation)?);
        self.current.store(Some(s.clone()));
        Ok(s)
    }

    /// Called by the writer after every commit (made or failed), before it answers the writes:
    /// later reads begin a new snapshot, and the old one goes when its last read ends.
    pub fn committed(&self) {
        self.generation.store(next_generation(), Ordering::Release);
        self.current.store(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kv::ReadableTable;

    const T: TableDefinition<u64, u64> = TableDefinition::new("t");

    /// A new database in a temporary directory (kept alive by the first value), and its
    /// shared snapshot.
    fn fresh() -> (tempfile::TempDir, Database, Shared) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("db.redb")).unwrap();
        (dir, db, Shared::default())
    }

    fn put(db: &Database, shared: &Shared, k: u64) {
        let txn = crate::store::kv::begin_write(db).unwrap();
        txn.open_table(T).unwrap().insert(k, k).unwrap();
        txn.commit().unwrap();
        shared.committed();
    }

    /// Reads share one snapshot and its tables until a commit; the first read after a commit
    /// sees it.
    #[test]
    fn a_read_after_a_commit_sees_it() {
        let (_dir, db, shared) = fresh();
        put(&db, &shared, 1);
        let a = shared.get(&db).unwrap();
        let b = shared.get(&db).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one snapshot until the next commit");
        assert!(Arc::ptr_eq(&a.table(T).unwrap(), &b.table(T).unwrap()), "its tables opened once");
        put(&db, &shared, 2);
        let c = shared.get(&db).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.table(T).unwrap().len().unwrap(), 2);
        assert!(c.table(T).unwrap().get(2).unwrap().is_some());
        assert_eq!(a.table(T).unwrap().len().unwrap(), 1, "an older snapshot keeps its view");
    }

    /// A snapshot begun before a commit but stored after it is not used again.
    #[test]
    fn a_snapshot_older_than_the_last_commit_is_not_shared() {
        let (_dir, db, shared) = fresh();
        put(&db, &shared, 1);
        let stale = Arc::new(Snapshot::begin(&db, shared.generation()).unwrap());
        put(&db, &shared, 2);
        shared.current.store(Some(stale.clone()));
        let fresh = shared.get(&db).unwrap();
        assert!(!Arc::ptr_eq(&stale, &fresh));
        assert_eq!(fresh.table(T).unwrap().len().unwrap(), 2);
    }

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Note(String);
    impl Record for Note {
        const VERSION: u8 = 1;
    }
    const NOTES: TableDefinition<u128, &'static [u8]> = TableDefinition::new("notes");

    /// A record is decoded once per snapshot; after a commit the next snapshot has the new one.
    #[test]
    fn records_are_decoded_once_per_snapshot() {
        let (_dir, db, shared) = fresh();
        let write = |text: &str| {
            let txn = crate::store::kv::begin_write(&db).unwrap();
            crate::store::put(&mut txn.open_table(NOTES).unwrap(), 7u128, &Note(text.into())).unwrap();
            txn.commit().unwrap();
            shared.committed();
        };
        write("first");
        let s = shared.get(&db).unwrap();
        let a = s.record::<Note>(NOTES, 7).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &s.record::<Note>(NOTES, 7).unwrap().unwrap()));
        assert!(s.record::<Note>(NOTES, 8).unwrap().is_none());
        write("second");
        let b = shared.get(&db).unwrap().record::<Note>(NOTES, 7).unwrap().unwrap();
        assert_eq!(*b, Note("second".into()));
        assert_eq!(*a, Note("first".into()), "the older snapshot keeps its record");
    }
}
