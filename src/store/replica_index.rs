//! The replica list's indexes, kept in step at write time so that a page of `GET /v1/replicas`
//! reads the page's records, not the organization's:
//!
//! - `org_replicaorder`: each replica under its name (lower-cased) and its popularity (chat
//!   history items, most first); creation order is `org_replica` itself (UUID v7 ids);
//! - `org_privatereplica`: the private replicas, so that a user's view (which hides private
//!   replicas they may not see) costs a read of the private ones only;
//! - `org_replicacount`: `(replicas, private replicas)` per organization, for the quota check and
//!   the list's `total` without a scan.
//!
//! The module owns these tables, the replica records (`replicaid_replica`, `org_replica`) and
//! the chat history counts (`replica_messagecount`): other modules read and write them through
//! its functions. Every write that adds, removes, renames a replica or changes its `private`
//! flag goes through [`put_replica`] / [`remove_replica`]; every change of a replica's chat
//! history count goes through [`Popularity::add_messages`]. Ties in an order fall to the replica id (creation order), as
//! the list sorted before.

use uuid::Uuid;

use super::records::Replica;
use super::tables::{self, REPLICA_SORT_NAME, REPLICA_SORT_POPULARITY};
use super::{get, k};
use crate::error::Result;
use std::sync::Arc;

use super::{Snapshot, Store};
use crate::store::kv::{ReadTransaction, ReadableTable, Reads, Table, WriteTransaction};

/// Replica `id`, if stored (of any organization: the caller checks). Errors: the store's.
pub fn get_in(txn: &impl Reads, id: Uuid) -> Result<Option<Replica>> {
    get::<u128, Replica, _>(&txn.read_table(tables::REPLICAID_REPLICA)?, k(id))
}

/// The ids of `org`'s replicas, in creation order. Errors: the store's.
pub fn ids_of_org(txn: &impl Reads, org: Uuid) -> Result<Vec<Uuid>> {
    let table = txn.read_table(tables::ORG_REPLICA)?;
    let ids = table.range((k(org), 0)..=(k(org), u128::MAX))?.map(|r| Ok(Uuid::from_u128(r?.0.value().1))).collect();
    ids
}

/// Gives `org`'s replicas owned by user `from` to user `to` (`from` is being deleted).
pub fn reassign_owner_in(txn: &WriteTransaction, org: Uuid, from: Uuid, to: Uuid) -> Result<()> {
    let ids = ids_of_org(txn, org)?;
    let mut replicas = txn.open_table(tables::REPLICAID_REPLICA)?;
    for id in ids {
        if let Some(mut r) = get::<u128, Replica, _>(&replicas, k(id))? {
            if r.owner == from {
                r.owner = to;
                super::put(&mut replicas, k(id), &r)?;
            }
        }
    }
    Ok(())
}

/// The key bytes of `r` in the name order.
pub fn name_key(r: &Replica) -> Vec<u8> {
    r.name.to_lowercase().into_bytes()
}

/// The key bytes of a replica with `messages` chat history items in the popularity order.
pub fn popularity_key(messages: u64) -> [u8; 8] {
    (u64::MAX - messages).to_be_bytes()
}

/// `(replicas, private replicas)` of `org`. Errors: the store's.
pub fn count(txn: &impl Reads, org: Uuid) -> Result<(u64, u64)> {
    let found = txn.read_table(tables::ORG_REPLICACOUNT)?.get(k(org))?.map(|v| v.value());
    Ok(found.unwrap_or((0, 0)))
}

fn add_count(txn: &WriteTransaction, org: Uuid, replicas: i64, private: i64) -> Result<()> {
    let (n, p) = count(txn, org)?;
    let mut table = txn.open_table(tables::ORG_REPLICACOUNT)?;
    let n = n.saturating_add_signed(replicas);
    let p = p.saturating_add_signed(private);
    if n == 0 && p == 0 {
        table.remove(k(org))?;
    } else {
        table.insert(k(org), (n, p))?;
    }
    Ok(())
}

/// The chat history items of `replica` (its popularity).
fn messages_in(txn: &WriteTransaction, replica: u128) -> Result<u64> {
    Ok(txn.open_table(tables::REPLICA_MESSAGECOUNT)?.get(replica)?.map(|v| v.value()).unwrap_or(0))
}

/// Writes replica `r` (new, or replacing `before`) with the rows of `org_replica` and the
/// indexes.
pub fn put_replica(txn: &WriteTransaction, before: Option<&Replica>, r: &Replica) -> Result<()> {
    let (org, id) = (k(r.org), k(r.id));
    super::put(&mut txn.open_table(tables::REPLICAID_REPLICA)?, id, r)?;
    let mut order = txn.open_table(tables::ORG_REPLICAORDER)?;
    match before {
        None => {
            txn.open_table(tables::ORG_REPLICA)?.insert((org, id), ())?;
            let messages = messages_in(txn, id)?;
            order.insert((org, REPLICA_SORT_POPULARITY, popularity_key(messages).as_slice(), id), ())?;
            add_count(txn, r.org, 1, i64::from(r.private))?;
        }
        Some(b) => {
            order.remove((org, REPLICA_SORT_NAME, name_key(b).as_slice(), id))?;
            add_count(txn, r.org, 0, i64::from(r.private) - i64::from(b.private))?;
        }
    }
    order.insert((org, REPLICA_SORT_NAME, name_key(r).as_slice(), id), ())?;
    let mut private = txn.open_table(tables::ORG_PRIVATEREPLICA)?;
    if r.private {
        private.insert((org, id), ())?;
    } else {
        private.remove((org, id))?;
    }
    Ok(())
}

/// Removes replica `r`'s record, its row of `org_replica`, its index rows and its message
/// count.
pub fn remove_replica(txn: &WriteTransaction, r: &Replica) -> Result<()> {
    let (org, id) = (k(r.org), k(r.id));
    txn.open_table(tables::REPLICAID_REPLICA)?.remove(id)?;
    txn.open_table(tables::ORG_REPLICA)?.remove((org, id))?;
    let messages = messages_in(txn, id)?;
    txn.open_table(tables::REPLICA_MESSAGECOUNT)?.remove(id)?;
    let mut order = txn.open_table(tables::ORG_REPLICAORDER)?;
    order.remove((org, REPLICA_SORT_NAME, name_key(r).as_slice(), id))?;
    order.remove((org, REPLICA_SORT_POPULARITY, popularity_key(messages).as_slice(), id))?;
    txn.open_table(tables::ORG_PRIVATEREPLICA)?.remove((org, id))?;
    add_count(txn, r.org, -1, -i64::from(r.private))
}

/// The replica order's table (`org_replicaorder`), open in a write transaction.
type Order<'t> = Table<'t, (u128, u8, &'static [u8], u128), ()>;

/// The chat history counts and the popularity order, open in a write transaction for a run of
/// history writes (`service::history`).
pub struct Popularity<'t> {
    txn: &'t WriteTransaction,
    counts: Table<'t, u128, u64>,
    order: Order<'t>,
}

impl<'t> Popularity<'t> {
    /// Opens the tables in `txn`. Errors: the store's.
    pub fn open(txn: &'t WriteTransaction) -> Result<Popularity<'t>> {
        let counts = txn.open_table(tables::REPLICA_MESSAGECOUNT)?;
        Ok(Popularity { txn, counts, order: txn.open_table(tables::ORG_REPLICAORDER)? })
    }

    /// Adds `n` chat history items to `replica`'s count and moves it in its organization's
    /// popularity order (no move when the replica is gone). Errors: the store's.
    pub fn add_messages(&mut self, replica: Uuid, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let before = self.counts.get(k(replica))?.map(|v| v.value()).unwrap_or(0);
        self.counts.put(k(replica), before + n)?;
        match org_of(self.txn, replica)? {
            Some(org) => popularity_changed(&mut self.order, org, replica, before, before + n),
            None => Ok(()),
        }
    }
}

/// The chat history counts, open for reading several replicas' in one read (a page of
/// replica views).
pub struct MessageCounts<T>(T);

/// The chat history counts of `txn` (a store snapshot's are shared by its reads). Errors: the
/// store's.
pub fn message_counts<R: Reads>(txn: &R) -> Result<MessageCounts<R::Table<'_, u128, u64>>> {
    Ok(MessageCounts(txn.read_table(tables::REPLICA_MESSAGECOUNT)?))
}

impl<T: ReadableTable<u128, u64>> MessageCounts<T> {
    /// The chat history items of `replica`.
    pub fn get(&self, replica: Uuid) -> Result<u64> {
        Ok(self.0.get(k(replica))?.map(|v| v.value()).unwrap_or(0))
    }
}

/// Replica `id` through the store's record cache ([`Store::record`]). Errors: the store's.
pub async fn cached(store: &Store, id: Uuid) -> Result<Option<Arc<Replica>>> {
    store.record::<Replica>(tables::REPLICAID_REPLICA, k(id)).await
}

/// Replica `id` as of store snapshot `txn`, read once per snapshot ([`Snapshot::record`]).
/// Errors: the store's.
pub fn record_in(txn: &Snapshot, id: Uuid) -> Result<Option<Arc<Replica>>> {
    txn.record::<Replica>(tables::REPLICAID_REPLICA, k(id))
}

/// Replica ids as [`ordered_ids`] reads them.
pub type Ids<'a> = Box<dyn Iterator<Item = Result<u128>> + 'a>;

/// The ids of `org`'s replicas in the order `by` (`tables::REPLICA_SORT_NAME` or
/// `REPLICA_SORT_POPULARITY`; `None`: creation order), reversed when `reverse`, as the rows
/// are read. Errors: the store's.
pub fn ordered_ids(txn: &ReadTransaction, org: Uuid, by: Option<u8>, reverse: bool) -> Result<Ids<'static>> {
    let o = k(org);
    let Some(by) = by else {
        let rows = txn.open_table(tables::ORG_REPLICA)?.range((o, 0)..=(o, u128::MAX))?;
        let ids = rows.map(|r| r.map(|(key, _)| key.value().1));
        return Ok(if reverse { Box::new(ids.rev()) } else { Box::new(ids) });
    };
    let (from, to): (&[u8], &[u8]) = (&[], &[0xff; 9]);
    let rows = txn.open_table(tables::ORG_REPLICAORDER)?.range((o, by, from, 0)..=(o, by, to, u128::MAX))?;
    let ids = rows.map(|r| r.map(|(key, _)| key.value().3));
    Ok(if reverse { Box::new(ids.rev()) } else { Box::new(ids) })
}

/// Ids of `org`'s private replicas. Errors: the store's.
pub fn private_ids(txn: &impl Reads, org: Uuid) -> Result<Vec<u128>> {
    let table = txn.read_table(tables::ORG_PRIVATEREPLICA)?;
    let ids = table.range((k(org), 0)..=(k(org), u128::MAX))?.map(|row| Ok(row?.0.value().1)).collect();
    ids
}

/// Moves `replica` of `org` in the popularity order (the open `order` table) after its chat
/// history count went from `from` to `to`.
fn popularity_changed(order: &mut Order, org: Uuid, replica: Uuid, from: u64, to: u64) -> Result<()> {
    order.delete((k(org), REPLICA_SORT_POPULARITY, popularity_key(from).as_slice(), k(replica)))?;
    order.put((k(org), REPLICA_SORT_POPULARITY, popularity_key(to).as_slice(), k(replica)), ())?;
    Ok(())
}

/// The organization of `replica`, read from its record; `None` when the replica is gone.
pub fn org_of(txn: &WriteTransaction, replica: Uuid) -> Result<Option<Uuid>> {
    Ok(get::<u128, Replica, _>(&txn.open_table(tables::REPLICAID_REPLICA)?, k(replica))?.map(|r| r.org))
}

/// Computes every index of this module afresh from the replicas and their message counts (the
/// store migration that adds them).
pub fn rebuild_all_in(txn: &WriteTransaction) -> Result<()> {
    txn.open_table(tables::ORG_REPLICACOUNT)?.retain(|_, _| false)?;
    txn.open_table(tables::ORG_REPLICAORDER)?.retain(|_, _| false)?;
    txn.open_table(tables::ORG_PRIVATEREPLICA)?.retain(|_, _| false)?;
    let all: Vec<Replica> = txn
        .open_table(tables::REPLICAID_REPLICA)?
        .iter()?
        .map(|row| row.and_then(|(_, v)| super::codec::decode(v.value())))
        .collect::<Result<_>>()?;
    let mut order = txn.open_table(tables::ORG_REPLICAORDER)?;
    let mut private = txn.open_table(tables::ORG_PRIVATEREPLICA)?;
    for r in &all {
        let (org, id) = (k(r.org), k(r.id));
        let messages = messages_in(txn, id)?;
        order.insert((org, REPLICA_SORT_NAME, name_key(r).as_slice(), id), ())?;
        order.insert((org, REPLICA_SORT_POPULARITY, popularity_key(messages).as_slice(), id), ())?;
        if r.private {
            private.insert((org, id), ())?;
        }
        add_count(txn, r.org, 1, i64::from(r.private))?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use redb::Database;

    use super::*;

    fn replica(org: Uuid, name: &str, private: bool) -> Replica {
        Replica { id: Uuid::now_v7(), org, name: name.into(), private, ..Replica::default() }
    }

    /// The rows of the three index tables, for comparison.
    pub(crate) type Rows = (Vec<(u128, u8, Vec<u8>, u128)>, Vec<(u128, u128)>, Vec<(u128, (u64, u64))>);

    pub(crate) fn rows(db: &Database) -> Rows {
        let read = crate::store::kv::begin_read(db).unwrap();
        let order = read.open_table(tables::ORG_REPLICAORDER).unwrap();
        let order = order.iter().unwrap().map(|r| {
            let guard = r.unwrap().0;
            let (o, s, key, id) = guard.value();
            (o, s, key.to_vec(), id)
        });
        let private = read.open_table(tables::ORG_PRIVATEREPLICA).unwrap();
        let counts = read.open_table(tables::ORG_REPLICACOUNT).unwrap();
        (
            order.collect(),
            private.iter().unwrap().map(|r| r.unwrap().0.value()).collect(),
            counts.iter().unwrap().map(|r| r.map(|(key, v)| (key.value(), v.value())).unwrap()).collect(),
        )
    }

    fn count_messages(txn: &WriteTransaction, r: &Replica, n: u64) {
        txn.open_table(tables::REPLICA_MESSAGECOUNT).unwrap().insert(k(r.id), n).unwrap();
        let mut order = txn.open_table(tables::ORG_REPLICAORDER).unwrap();
        popularity_changed(&mut order, r.org, r.id, n - 1, n).unwrap();
    }

    #[test]
    fn the_indexes_follow_adds_renames_privacy_popularity_and_removals_and_agree_with_a_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("r.redb")).unwrap();
        let (org, other) = (Uuid::now_v7(), Uuid::now_v7());
        let txn = crate::store::kv::begin_write(&db).unwrap();
        let mut all: Vec<Replica> = (0..20).map(|i| replica(org, &format!("R{}", 20 - i), i % 4 == 0)).collect();
        all.push(replica(other, "elsewhere", true));
        all.iter().for_each(|r| put_replica(&txn, None, r).unwrap());
        for n in 1..=3 {
            count_messages(&txn, &all[7], n);
        }
        count_messages(&txn, &all[2], 1);
        txn.commit().unwrap();
        let (order, private, counts) = rows(&db);
        let mut expected = vec![(k(org), (20, 5)), (k(other), (1, 1))];
        expected.sort();
        assert_eq!(counts, expected);
        assert_eq!(private.len(), 6);
        let popular: Vec<u128> =
            order.iter().filter(|(o, s, ..)| *o == k(org) && *s == REPLICA_SORT_POPULARITY).map(|r| r.3).collect();
        assert_eq!(&popular[..3], &[k(all[7].id), k(all[2].id), k(all[0].id)], "most messages first, then by id");

        let txn = crate::store::kv::begin_write(&db).unwrap();
        let before = all[3].clone();
        all[3].name = "aardvark".into();
        all[3].private = true;
        put_replica(&txn, Some(&before), &all[3]).unwrap();
        let before = all[0].clone();
        all[0].private = false;
        put_replica(&txn, Some(&before), &all[0]).unwrap();
        remove_replica(&txn, &all[7]).unwrap();
        remove_replica(&txn, &all[20]).unwrap();
        txn.commit().unwrap();
        let incremental = rows(&db);
        let names: Vec<u128> =
            incremental.0.iter().filter(|(o, s, ..)| *o == k(org) && *s == REPLICA_SORT_NAME).map(|r| r.3).collect();
        assert_eq!(names.len(), 19);
        assert_eq!(names[0], k(all[3].id), "renamed to the front");
        assert_eq!(incremental.2, vec![(k(org), (19, 5))]);

        let txn = crate::store::kv::begin_write(&db).unwrap();
        rebuild_all_in(&txn).unwrap();
        txn.commit().unwrap();
        assert_eq!(rows(&db), incremental, "kept in step = computed afresh");
    }
}
