//! Records a node keeps decoded between reads on PostgreSQL, while their table is unwritten
//! ([`super::Store::record`]).
//!
//! Why: most operations under `/v1/replicas/{replicaUUID}` begin by reading the path's replica
//! (`service::replicas::get`). On redb that read is microseconds (the shared snapshot keeps it
//! decoded); on PostgreSQL it was a read transaction of its own, two round trips, before every
//! history write. Replicas are read far more often than they change.
//!
//! Why it stays correct: a record is kept with the stamp ([`super::stamps`]) taken before it was
//! read, and used only while its table is unwritten since: this node's writer stamps a table
//! before it answers a write of it, and the listener when another node's commit names it. A
//! read through this node therefore always sees this node's acknowledged writes, and another
//! node's once its notification has arrived (the window the read cache has too, `store::notify`).
//! Writes that must hold under concurrency (unique names, quotas) read in the writer's
//! transaction, never here.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::stamps::Stamps;

/// Most records kept; past it the cache starts again empty.
const MAX_KEPT: usize = 4096;

/// A kept record: its table, the stamp it was read at, the decoded record.
struct Kept {
    table: Box<str>,
    read_at: u64,
    record: Arc<dyn Any + Send + Sync>,
}

/// The records kept by type and key (see the module documentation).
pub struct RecordCache {
    stamps: Arc<Stamps>,
    kept: Mutex<HashMap<(TypeId, u128), Kept>>,
}

impl RecordCache {
    /// An empty cache checked against `stamps`.
    pub fn new(stamps: Arc<Stamps>) -> RecordCache {
        RecordCache { stamps, kept: Mutex::default() }
    }

    /// The `R` record `key` of `table`, when kept and its table unwritten since.
    pub fn get<R: Send + Sync + 'static>(&self, table: &str, key: u128) -> Option<Arc<R>> {
        let kept = self.lock();
        let found = kept.get(&(TypeId::of::<R>(), key))?;
        if &*found.table != table || !self.stamps.fresh(table, found.read_at) {
            return None;
        }
        found.record.clone().downcast().ok()
    }

    /// The stamp to take before a record is read from the database (`None`: keep nothing).
    pub fn now(&self) -> Option<u64> {
        self.stamps.now()
    }

    /// Keeps `record`, the `R` record `key` of `table` as read after stamp `read_at`.
    pub fn keep<R: Send + Sync + 'static>(&self, table: &str, key: u128, read_at: u64, record: Arc<R>) {
        let mut kept = self.lock();
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert((TypeId::of::<R>(), key), Kept { table: table.into(), read_at, record });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(TypeId, u128), Kept>> {
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_record_is_answered_until_its_table_is_written() {
        let stamps = Arc::new(Stamps::default());
        stamps.listening(true);
        let cache = RecordCache::new(stamps.clone());
        let at = cache.now().unwrap();
        cache.keep("replicas", 7, at, Arc::new(String::from("seven")));
        assert_eq!(cache.get::<String>("replicas", 7).as_deref().map(String::as_str), Some("seven"));
        assert!(cache.get::<u64>("replicas", 7).is_none(), "another type");
        assert!(cache.get::<String>("users", 7).is_none(), "another table");
        stamps.written(["replicas"]);
        assert!(cache.get::<String>("replicas", 7).is_none(), "written since");
    }
}
