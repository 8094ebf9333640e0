//! Rows of `replicad_rows` a node keeps between its read transactions on PostgreSQL, while
//! their table is unwritten ([`super::pg`]: a point read of a read transaction that has sent
//! nothing yet takes its row from here, without a round trip).
//!
//! Why: a completion's reads are point reads of tables that seldom change (the organization's
//! quota, the knowledge base's entries, chunks and vectors of the passages retrieved). Each was a
//! round trip, in read transactions of their own (`BEGIN` with the first read, `COMMIT`): most of
//! what a completion cost PostgreSQL.
//!
//! Why it stays correct: a row is kept with the stamp ([`super::stamps`]) taken before the
//! transaction that read it began, and taken only while its table is unwritten since. This
//! node's writer marks the tables of a commit before it sends the `COMMIT` and stamps them once
//! it returns, and the listener stamps the tables another node's commit names, so a read through
//! this node sees this node's acknowledged writes, and another node's once its notification has
//! arrived (the window of the record cache and the read cache, `store::notify`). A transaction
//! that took kept rows and then reads the database checks them again once its snapshot is taken
//! (`pg::Conn::opened`), and runs again without them if one is no longer fresh, so it never
//! sees a kept row beside a newer state of another table. Writes that must hold under
//! concurrency read in the writer's transaction, never here.

use std::sync::{Arc, Mutex, MutexGuard};

use foldhash::HashMap as Rows;

use super::stamps::Stamps;

/// A row of `replicad_rows`: its table's name (shared by the rows of the table) and its sort key.
pub type RowId = (Arc<str>, Vec<u8>);

/// Most rows and bytes (of sort keys and values) kept; past either the cache starts again empty.
const MAX_ROWS: usize = 16_384;
const MAX_BYTES: usize = 32 << 20;

/// Rows by [`RowId`], each its value (`None`: no such row) and a `T` beside it, bounded: past
/// `max_rows` rows or `max_bytes` bytes of sort keys and values it starts again empty. The
/// writer's rows kept between its transactions (`pg::Kept`) and [`RowCache`] are both one.
pub struct BoundedRows<T> {
    rows: Rows<RowId, (Option<Vec<u8>>, T)>,
    bytes: usize,
    max_rows: usize,
    max_bytes: usize,
}

impl<T> BoundedRows<T> {
    /// An empty map of at most `max_rows` rows and `max_bytes` bytes.
    pub fn new(max_rows: usize, max_bytes: usize) -> BoundedRows<T> {
        BoundedRows { rows: Rows::default(), bytes: 0, max_rows, max_bytes }
    }

    /// Row `id`'s value and what is beside it, when held.
    pub fn get(&self, id: &RowId) -> Option<&(Option<Vec<u8>>, T)> {
        self.rows.get(id)
    }

    /// Holds `value` and `beside` as row `id` (replacing what it held), starting again empty
    /// first when the row would pass a bound.
    pub fn insert(&mut self, id: RowId, value: Option<Vec<u8>>, beside: T) {
        let size = |sk: &[u8], value: &Option<Vec<u8>>| sk.len() + value.as_ref().map_or(0, Vec::len);
        let bytes = size(&id.1, &value);
        if self.rows.len() >= self.max_rows || self.bytes + bytes > self.max_bytes {
            self.clear();
        }
        self.bytes += bytes;
        let sk = id.1.clone();
        if let Some((old, _)) = self.rows.insert(id, (value, beside)) {
            self.bytes -= size(&sk, &old);
        }
    }

    /// Empties it.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.bytes = 0;
    }
}

/// The rows kept by table and sort key (see the module documentation).
pub struct RowCache {
    stamps: Arc<Stamps>,
    /// Each row kept, with the stamp it was read at.
    held: Mutex<BoundedRows<u64>>,
}

impl RowCache {
    /// An empty cache checked against `stamps`.
    pub fn new(stamps: Arc<Stamps>) -> RowCache {
        RowCache { stamps, held: Mutex::new(BoundedRows::new(MAX_ROWS, MAX_BYTES)) }
    }

    /// The value of row `id` (`None` inside: no such row) and the stamp it was read at, when
    /// kept and its table unwritten since.
    pub fn get(&self, id: &RowId) -> Option<(Option<Vec<u8>>, u64)> {
        let held = self.lock();
        let (value, read_at) = held.get(id)?;
        self.fresh(&id.0, *read_at).then(|| (value.clone(), *read_at))
    }

    /// Whether a row of `table` read at stamp `read_at` is still what the database holds, as far
    /// as this node knows ([`Stamps::fresh`]).
    pub fn fresh(&self, table: &str, read_at: u64) -> bool {
        self.stamps.fresh(table, read_at)
    }

    /// The stamp to take before a transaction that reads rows begins (`None`: keep nothing).
    pub fn now(&self) -> Option<u64> {
        self.stamps.now()
    }

    /// Keeps `value` as row `id`, read by a transaction that began after stamp `read_at`.
    pub fn keep(&self, id: RowId, value: Option<Vec<u8>>, read_at: u64) {
        self.lock().insert(id, value, read_at);
    }

    fn lock(&self) -> MutexGuard<'_, BoundedRows<u64>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_row_is_answered_until_its_table_is_written_or_committed() {
        let stamps = Arc::new(Stamps::default());
        stamps.listening(true);
        let cache = RowCache::new(stamps.clone());
        let (quota, absent): (RowId, RowId) = (("org_quota".into(), vec![1]), ("org_quota".into(), vec![2]));
        let at = cache.now().unwrap();
        cache.keep(quota.clone(), Some(vec![7]), at);
        cache.keep(absent.clone(), None, at);
        assert_eq!(cache.get(&quota), Some((Some(vec![7]), at)));
        assert_eq!(cache.get(&absent), Some((None, at)), "a row known to be absent");
        stamps.written(["kbid_entry"]);
        assert!(cache.get(&quota).is_some(), "another table was written");
        stamps.committing(["org_quota"]);
        assert!(cache.get(&quota).is_none(), "while this node commits the table");
        stamps.committed(["org_quota"]);
        assert!(cache.get(&quota).is_none(), "written since");
    }

    #[test]
    fn bounded_rows_start_again_empty_past_a_bound() {
        let id = |n: u8| -> RowId { ("t".into(), vec![n]) };
        let mut rows = BoundedRows::new(2, 10);
        rows.insert(id(1), Some(vec![0; 4]), ());
        rows.insert(id(1), Some(vec![0; 4]), ());
        rows.insert(id(2), None, ());
        assert!(rows.get(&id(1)).is_some() && rows.get(&id(2)).is_some(), "a replaced row counts once");
        rows.insert(id(3), None, ());
        assert!(rows.get(&id(1)).is_none() && rows.get(&id(3)).is_some(), "past the rows");
        rows.insert(id(4), Some(vec![0; 9]), ());
        assert!(rows.get(&id(3)).is_none() && rows.get(&id(4)).is_some(), "past the bytes");
    }
}
