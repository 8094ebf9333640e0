//! A consistent copy of the store into a fresh redb file: the snapshot of an online backup
//! (`crate::backup`).
//!
//! Why a copy and not the file: redb rewrites its header and reuses freed pages while writes go
//! on, so the bytes of `replicad.redb` read while the server commits are no database at all
//! (the redb author says so in cberner/redb#634). One read transaction, in contrast, sees the
//! store exactly as of one commit for as long as it lives, while the writer keeps committing;
//! copying every table of [`EVERY_TABLE`] out of it gives a database holding exactly the
//! writes acknowledged before the transaction began. The price is that pages freed meanwhile
//! are reused only after the copy ends (the live file may grow during a long backup).

use std::path::Path;

use redb::{Database, Durability, Key, ReadTransaction, ReadableTableMetadata, TableDefinition, TableHandle, Value};

use super::tables::*;
use crate::error::{Error, Result};

/// Records copied per write transaction of the copy (its memory bound; the copy is committed
/// without fsync until the last transaction).
pub const BATCH: u64 = 20_000;

/// One table of [`EVERY_TABLE`], whatever its key and value types.
pub trait AnyTable: Sync {
    /// The table's name in redb.
    fn name(&self) -> &str;
    /// Its number of records in `src` (0 when the table was never created).
    fn len(&self, src: &ReadTransaction) -> Result<u64>;
    /// Copies its records from `src` into `out`.
    fn copy(&self, src: &ReadTransaction, out: &mut Output<'_>) -> Result<()>;
}

struct Typed<K: Key + 'static, V: Value + 'static>(TableDefinition<'static, K, V>);

/// Every table of [`super::tables`]: what a copy carries. A store holding a table missing here
/// makes [`copy_store`] fail rather than leave it behind (and a unit test keeps this list equal
/// to the definitions in `tables.rs`).
pub static EVERY_TABLE: &[&dyn AnyTable] = &[
    &Typed(META),
    &Typed(SEQUENCES),
    &Typed(ORGID_ORG),
    &Typed(KEYHASH_ORG),
    &Typed(CODEHASH_INVITE),
    &Typed(REPLICAID_REPLICA),
    &Typed(ORG_REPLICA),
    &Typed(SLUG_REPLICA),
    &Typed(USERID_USER),
    &Typed(ORG_USER),
    &Typed(EMAIL_USER),
    &Typed(LINKEDACCOUNT_USER),
    &Typed(KBID_ENTRY),
    &Typed(KBID_TEXT),
    &Typed(REPLICA_KB),
    &Typed(KBCHUNK_CHUNK),
    &Typed(KBCHUNK_VECTOR),
    &Typed(SEQ_KBOUTBOX),
    &Typed(REPLICAUSERMSG_MESSAGE),
    &Typed(REPLICAPASSAGE_TEXT),
    &Typed(REPLICA_MESSAGECOUNT),
    &Typed(ONCE),
    &Typed(REPLICACHANNELMSG_MESSAGE),
    &Typed(KBID_SOURCE),
    &Typed(KBID_STOREDFILE),
    &Typed(KBID_JOB),
    &Typed(TOKENHASH_UPLOAD),
    &Typed(REPLICA_URL),
    &Typed(ORG_KBCOUNT),
    &Typed(REPLICA_KBSUMMARY),
    &Typed(REPLICAUSERMONTH_USAGE),
    &Typed(REPLICACHATKEY_CHAT),
    &Typed(CHATS),
    &Typed(CONVERSATIONS),
    &Typed(REPLICACONV_CHAT),
    &Typed(CHATMSG_USERCONV),
    &Typed(CONVMSG_USER),
    &Typed(USER_CHAT),
    &Typed(USERSOURCE_CHAT),
    &Typed(REPLICAMONTH_CONVERSATIONS),
    &Typed(REPLICADAY_CONVERSATIONS),
    &Typed(REPLICASOURCE_CONVERSATIONS),
    &Typed(ORGMONTH_CONVERSATIONS),
    &Typed(ORG_QUOTA),
    &Typed(OPEN_CONVERSATION),
    &Typed(REPLICATERM_CONVERSATIONS),
    &Typed(CHANNELREPLICA_INTEGRATION),
    &Typed(KEYHASH_EMBED),
    &Typed(REPLICA_EMBED),
    &Typed(ORG_REPLICAORDER),
    &Typed(ORG_PRIVATEREPLICA),
    &Typed(ORG_REPLICACOUNT),
    &Typed(SCOPE_KBORDER),
];

/// The destination of a copy and its progress.
pub struct Output<'a> {
    db: &'a Database,
    /// Records copied so far.
    pub done: u64,
    progress: &'a mut dyn FnMut(u64),
}

impl<K: Key + Sync + 'static, V: Value + Sync + 'static> AnyTable for Typed<K, V> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn len(&self, src: &ReadTransaction) -> Result<u64> {
        match src.open_table(self.0) {
            Ok(t) => Ok(t.len()?),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    fn copy(&self, src: &ReadTransaction, out: &mut Output<'_>) -> Result<()> {
        let table = match src.open_table(self.0) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let mut rows = redb::ReadableTable::iter(&table)?;
        loop {
            let mut txn = out.db.begin_write()?;
            txn.set_durability(Durability::None)?;
            let mut n = 0;
            {
                let mut dst = txn.open_table(self.0)?;
                while n < BATCH {
                    let Some(row) = rows.next() else { break };
                    let (k, v) = row?;
                    dst.insert(k.value(), v.value())?;
                    n += 1;
                }
            }
            txn.commit()?;
            out.done += n;
            (out.progress)(out.done);
            if n < BATCH {
                return Ok(());
            }
        }
    }
}

/// What a copy holds: the number of records in all, and the store's schema version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub records: u64,
    pub schema_version: u32,
}

/// Copies every table seen by `src` into a new redb database at `to` (which must not exist),
/// calling `progress(records copied, records in all)` after each batch; the file is durable
/// when this returns. Errors when `src` holds a table this build does not know.
pub fn copy_store(src: &ReadTransaction, to: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Copied> {
    let known: Vec<&str> = EVERY_TABLE.iter().map(|t| t.name()).collect();
    for handle in src.list_tables()? {
        let name = handle.name().to_string();
        if !known.contains(&name.as_str()) {
            return Err(Error::internal(format!("the store holds table {name:?}, which this build cannot copy")));
        }
    }
    if src.list_multimap_tables()?.next().is_some() {
        return Err(Error::internal("the store holds a multimap table, which this build cannot copy"));
    }
    let total = EVERY_TABLE.iter().map(|t| t.len(src)).sum::<Result<u64>>()?;
    let db = Database::create(to)?;
    let mut report = |done| progress(done, total);
    let mut out = Output { db: &db, done: 0, progress: &mut report };
    for table in EVERY_TABLE {
        table.copy(src, &mut out)?;
    }
    let records = out.done;
    // The last commit is durable and makes every earlier one durable with it.
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    txn.commit()?;
    let schema_version = super::migrate::stored_version(src)?;
    Ok(Copied { records, schema_version })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_of_tables_rs_is_copied() {
        let source = include_str!("tables.rs");
        let mut defined: Vec<&str> =
            source.split("TableDefinition::new(\"").skip(1).filter_map(|rest| rest.split('"').next()).collect();
        let mut listed: Vec<&str> = EVERY_TABLE.iter().map(|t| t.name()).collect();
        defined.sort_unstable();
        listed.sort_unstable();
        assert_eq!(listed, defined);
    }
}
