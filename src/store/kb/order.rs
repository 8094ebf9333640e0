//! The knowledge-base list's orders, kept in step at write time so that a page of the entry
//! lists (`GET /v1/replicas/{replicaUUID}/knowledge-base`, `GET /v1/knowledge-base`) reads the
//! page's records, not the replica's or the organization's.
//!
//! `scope_kborder` holds each entry once per order the lists offer (`createdAt`, `updatedAt`,
//! `title`, `status`: [`SortKey`]) and per scope (its replica, and its organization), under the
//! key bytes of [`key_of`], ties falling to the entry id as the lists sorted before; the value is
//! the entry's replica, so the organization-wide list leaves out the entries of the private
//! replicas a user may not see without reading them. Every write of an entry record goes
//! through `summary::put_entry` / `summary::remove_entry`, which call [`changed`]. A list's
//! `total` without a filter comes from the counts kept beside (`KbSummary` per replica,
//! `org_kbcount` per organization).

use uuid::Uuid;

use crate::error::Result;
use crate::store::kv::{ReadTransaction, ReadableTable, WriteTransaction};
use crate::store::records::KbEntry;
use crate::store::{k, tables};

/// The orders of the entry lists; the number is the order's `sort` in `replica_kborder`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    #[default]
    CreatedAt = 0,
    UpdatedAt = 1,
    Title = 2,
    Status = 3,
}

/// Every order, each entry has one row per order.
const ORDERS: [SortKey; 4] = [SortKey::CreatedAt, SortKey::UpdatedAt, SortKey::Title, SortKey::Status];

/// An entry in an order: its id and its replica.
pub type Listed = (u64, u128);

/// An instant (ms since the epoch) as bytes that sort as the numbers do.
fn instant_key(ms: i64) -> Vec<u8> {
    ((ms as u64) ^ (1 << 63)).to_be_bytes().to_vec()
}

/// The key bytes of `e` in order `sort`: instants big-endian with the sign bit flipped; the
/// shown title (given, else generated) lower-cased, empty when none; the status's rank in the
/// entry life cycle.
pub fn key_of(e: &KbEntry, sort: SortKey) -> Vec<u8> {
    match sort {
        SortKey::CreatedAt => instant_key(e.created_at),
        SortKey::UpdatedAt => instant_key(e.updated_at),
        SortKey::Title => {
            e.title.as_ref().or(e.generated_title.as_ref()).map(|t| t.to_lowercase()).unwrap_or_default().into_bytes()
        }
        SortKey::Status => vec![e.status as u8],
    }
}

/// Brings the orders in step with one entry's write: `before` / `after` are the entry before
/// and after it (`None`: it did not exist / no longer exists). Rows that did not move are not
/// rewritten.
pub fn changed(txn: &WriteTransaction, before: Option<&KbEntry>, after: Option<&KbEntry>) -> Result<()> {
    let mut table = txn.open_table(tables::SCOPE_KBORDER)?;
    for sort in ORDERS {
        let row = |e: &KbEntry| (e.replica, e.org, key_of(e, sort), e.id);
        let (old, new) = (before.map(row), after.map(row));
        if old == new {
            continue;
        }
        if let Some((replica, org, key, id)) = old {
            for scope in [replica, org] {
                table.remove((k(scope), sort as u8, key.as_slice(), id))?;
            }
        }
        if let Some((replica, org, key, id)) = new {
            for scope in [replica, org] {
                table.insert((k(scope), sort as u8, key.as_slice(), id), k(replica))?;
            }
        }
    }
    Ok(())
}

/// The entries of `scope` (a replica, or an organization) in order `sort`, from the end when
/// `reverse`.
pub fn walk(
    txn: &ReadTransaction,
    scope: Uuid,
    sort: SortKey,
    reverse: bool,
) -> Result<Box<dyn Iterator<Item = Result<Listed>>>> {
    let (s, o) = (k(scope), sort as u8);
    let none: &[u8] = &[];
    let rows = txn.open_table(tables::SCOPE_KBORDER)?.range((s, o, none, 0)..(s, o + 1, none, 0))?;
    let listed = rows.map(|row| {
        let (key, replica) = row?;
        Ok((key.value().3, replica.value()))
    });
    Ok(if reverse { Box::new(listed.rev()) } else { Box::new(listed) })
}

/// Computes the orders afresh from every entry (the store migration that adds them).
pub fn rebuild_all_in(txn: &WriteTransaction) -> Result<()> {
    txn.open_table(tables::SCOPE_KBORDER)?.retain(|_, _| false)?;
    let entries: Vec<KbEntry> = txn
        .open_table(tables::KBID_ENTRY)?
        .iter()?
        .map(|row| row.and_then(|(_, v)| crate::store::codec::decode(v.value())))
        .collect::<Result<_>>()?;
    entries.iter().try_for_each(|e| changed(txn, None, Some(e)))
}

#[cfg(test)]
mod tests {
    use redb::Database;

    use super::*;

    fn entry(id: u64, replica: Uuid, title: &str, updated_at: i64) -> KbEntry {
        let e = crate::store::kb::summary::tests::entry(id, replica, Some(title));
        KbEntry { created_at: -5, updated_at, ..e }
    }

    #[test]
    fn walks_follow_each_order_in_both_scopes_and_writes_move_entries() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("order.redb")).unwrap();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let entries =
            [entry(1, a, "pear", 30), entry(2, b, "Apple", -10), entry(3, a, "apple", 20), entry(4, b, "fig", 10)];
        let txn = crate::store::kv::begin_write(&db).unwrap();
        entries.iter().try_for_each(|e| changed(&txn, None, Some(e))).unwrap();
        let renamed = KbEntry { title: Some("Zucchini".into()), updated_at: 40, ..entries[2].clone() };
        changed(&txn, Some(&entries[2]), Some(&renamed)).unwrap();
        changed(&txn, Some(&entries[3]), None).unwrap();
        txn.commit().unwrap();

        let read = crate::store::kv::begin_read(&db).unwrap();
        let ids = |scope, sort, reverse| -> Vec<Listed> {
            walk(&read, scope, sort, reverse).unwrap().collect::<Result<_>>().unwrap()
        };
        let org = Uuid::nil();
        let (ra, rb) = (a.as_u128(), b.as_u128());
        assert_eq!(
            ids(org, SortKey::CreatedAt, false),
            vec![(1, ra), (2, rb), (3, ra)],
            "equal instants fall to the id"
        );
        assert_eq!(ids(org, SortKey::UpdatedAt, false), vec![(2, rb), (1, ra), (3, ra)], "a negative instant first");
        assert_eq!(ids(org, SortKey::UpdatedAt, true), vec![(3, ra), (1, ra), (2, rb)]);
        assert_eq!(ids(org, SortKey::Title, false), vec![(2, rb), (1, ra), (3, ra)], "case-insensitive titles");
        assert_eq!(ids(a, SortKey::Title, true), vec![(3, ra), (1, ra)], "one replica's scope");
        assert_eq!(ids(b, SortKey::Status, false), vec![(2, rb)]);
    }
}
