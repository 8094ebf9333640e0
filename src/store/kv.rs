//! The table API the services use, over either storage engine: redb (the default, one process)
//! or PostgreSQL ([`super::pg`], several nodes over one database).
//!
//! Why at this level: the services talk to the store through typed tables (`open_table`, point
//! reads, range scans, inserts and removals in a transaction) in some 370 places over 54 tables.
//! Putting the seam under that API keeps every business rule written once, with the same code
//! running on either engine; repositories per resource would have written each rule's storage
//! twice. The types here mirror redb's names and signatures ([`ReadTransaction`],
//! [`WriteTransaction`], [`Table`], [`ReadOnlyTable`], [`ReadableTable`], [`AccessGuard`],
//! [`Range`]), so code written against redb reads the same; tables are still declared as
//! `redb::TableDefinition`s, and keys and values keep redb's encodings ([`redb::Key`],
//! [`redb::Value`]) on both engines. Code outside `store` names none of redb's types: a table is
//! a [`TableDef`], a value type a [`StoreValue`], a key type a [`StoreKey`].
//!
//! On redb each call is the redb call (one `match` on the engine). On PostgreSQL a point read is
//! a statement on the transaction's connection, unless the write transaction read or wrote that
//! key already; writes wait on the client and go in one statement before the next range scan,
//! count or the commit ([`super::pg`], "Write transactions"), so [`Table::put`] and
//! [`Table::delete`], which answer nothing, cost no round trip, where `insert` and `remove`
//! read the old value first. A range is read lazily, a page at a time from whichever end is
//! iterated, so `range(..).rev().take(20)` reads one page.
//!
//! Errors: the crate's `Error`, from redb's (`store::error`) or from PostgreSQL's (a 500 whose
//! cause is the `postgres::Error`).

use std::borrow::Borrow;
use std::ops::{Bound, RangeBounds};

use redb::{Key, ReadableTable as _, ReadableTableMetadata as _, TableDefinition, TableHandle, Value};

use super::pg;
use super::sort_key::SortKey;
use crate::error::Result;

/// A key type of the store's tables: redb's encoding plus an order-preserving sort key
/// ([`super::sort_key`]), which the PostgreSQL engine orders rows by.
pub trait StoreKey: Key + 'static {
    /// The sort bytes of `key`.
    fn sort_key_of(key: &Self::SelfType<'_>) -> Vec<u8>;
}

impl<K> StoreKey for K
where
    K: Key + 'static,
    for<'a> K::SelfType<'a>: SortKey,
{
    fn sort_key_of(key: &Self::SelfType<'_>) -> Vec<u8> {
        key.sort_key()
    }
}

/// A table of the store, as the code outside `store` names it: its name and its key and value
/// types (declared in `store::tables`; on both engines a `redb::TableDefinition`).
pub type TableDef<K, V> = TableDefinition<'static, K, V>;

/// A value type of the store's tables, as the code outside `store` names it: redb's encoding,
/// kept on both engines.
pub trait StoreValue: Value + 'static {}

impl<V: Value + 'static> StoreValue for V {}

/// A write transaction on either engine: the tables it opens see its own writes, and all of
/// them commit together or not at all.
pub enum WriteTransaction {
    /// A redb write transaction (committed by the store's writer thread; boxed: it is 720
    /// bytes, and one is made per batch).
    Redb(Box<redb::WriteTransaction>),
    /// A transaction on a PostgreSQL connection ([`pg::PgTables::write`]).
    Pg(pg::Txn),
}

/// A read transaction on either engine: a consistent snapshot.
pub enum ReadTransaction {
    /// A redb read transaction.
    Redb(redb::ReadTransaction),
    /// A read-only `REPEATABLE READ` transaction on a PostgreSQL connection
    /// ([`pg::PgTables::read`]).
    Pg(pg::Txn),
}

/// A redb write transaction on `db`, as this API's. Errors: redb's (a latched handle, a
/// storage error).
pub fn begin_write(db: &redb::Database) -> Result<WriteTransaction> {
    Ok(WriteTransaction::Redb(Box::new(db.begin_write()?)))
}

/// A redb read transaction on `db`, as this API's. Errors: redb's.
pub fn begin_read(db: &redb::Database) -> Result<ReadTransaction> {
    use redb::ReadableDatabase as _;
    Ok(ReadTransaction::Redb(db.begin_read()?))
}

impl WriteTransaction {
    /// Opens table `def` for reading and writing (creating it on redb when missing). Errors
    /// as redb's `open_table` (a table opened twice, a type mismatch, a storage error).
    pub fn open_table<K: StoreKey, V: Value + 'static>(&self, def: TableDefinition<K, V>) -> Result<Table<'_, K, V>> {
        Ok(match self {
            WriteTransaction::Redb(txn) => Table::Redb(txn.open_table(def)?),
            WriteTransaction::Pg(txn) => Table::Pg(txn.table(def.name())),
        })
    }

    /// Deletes table `def` and its entries; whether it existed (on PostgreSQL, whether it had
    /// an entry).
    pub fn delete_table<K: StoreKey, V: Value + 'static>(&self, def: TableDefinition<K, V>) -> Result<bool> {
        match self {
            WriteTransaction::Redb(txn) => Ok(txn.delete_table(def)?),
            WriteTransaction::Pg(txn) => txn.delete_table(def.name()),
        }
    }

    /// Commits every write of the transaction, durably. Errors: the engine's (a full disk, a
    /// serialization failure on PostgreSQL, which the caller may run again).
    pub fn commit(self) -> Result<()> {
        match self {
            WriteTransaction::Redb(txn) => Ok(txn.commit()?),
            WriteTransaction::Pg(txn) => txn.commit(),
        }
    }

    /// Has the transaction notify the other nodes on `channel` when it commits
    /// ([`super::notify`]); nothing on redb, which no other process shares.
    pub fn notify_on_commit(&self, channel: &'static str) {
        if let WriteTransaction::Pg(txn) = self {
            txn.notify_on_commit(channel);
        }
    }

    /// Drops every write of the transaction.
    pub fn abort(self) -> Result<()> {
        match self {
            WriteTransaction::Redb(txn) => Ok(txn.abort()?),
            WriteTransaction::Pg(txn) => txn.end("ROLLBACK"),
        }
    }
}

impl ReadTransaction {
    /// Opens table `def` for reading. Errors as redb's `open_table` (on redb a table never
    /// written is `TableDoesNotExist`; on PostgreSQL it is an empty table).
    pub fn open_table<K: StoreKey, V: Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<ReadOnlyTable<K, V>> {
        Ok(match self {
            ReadTransaction::Redb(txn) => ReadOnlyTable::Redb(txn.open_table(def)?),
            ReadTransaction::Pg(txn) => ReadOnlyTable::Pg(txn.table(def.name())),
        })
    }

    /// Opens table `def` for reading, or `None` when redb has never created it (a store older
    /// than the table; on PostgreSQL every table exists). Errors as [`Self::open_table`].
    pub fn open_existing_table<K: StoreKey, V: Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<Option<ReadOnlyTable<K, V>>> {
        match self {
            ReadTransaction::Redb(txn) => match txn.open_table(def) {
                Ok(table) => Ok(Some(ReadOnlyTable::Redb(table))),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => Err(e.into()),
            },
            ReadTransaction::Pg(_) => self.open_table(def).map(Some),
        }
    }
}

/// A transaction tables can be read in: a [`ReadTransaction`], a store snapshot (whose reads
/// share each table it opens, [`super::Snapshot::table`]), or a [`WriteTransaction`] (which
/// sees its own writes). A function that only reads takes `&impl Reads` and serves all three.
pub trait Reads {
    /// The table it opens for reading.
    type Table<'t, K: StoreKey + Send + Sync, V: Value + Send + Sync + 'static>: ReadableTable<K, V>
    where
        Self: 't;

    /// Opens `def` for reading. Errors as the transaction's `open_table`.
    fn read_table<K, V>(&self, def: TableDefinition<K, V>) -> Result<Self::Table<'_, K, V>>
    where
        K: StoreKey + Send + Sync,
        V: Value + Send + Sync + 'static;
}

impl Reads for ReadTransaction {
    type Table<'t, K: StoreKey + Send + Sync, V: Value + Send + Sync + 'static> = ReadOnlyTable<K, V>;

    fn read_table<K, V>(&self, def: TableDefinition<K, V>) -> Result<ReadOnlyTable<K, V>>
    where
        K: StoreKey + Send + Sync,
        V: Value + Send + Sync + 'static,
    {
        self.open_table(def)
    }
}

impl Reads for WriteTransaction {
    type Table<'t, K: StoreKey + Send + Sync, V: Value + Send + Sync + 'static> = Table<'t, K, V>;

    fn read_table<K, V>(&self, def: TableDefinition<K, V>) -> Result<Table<'_, K, V>>
    where
        K: StoreKey + Send + Sync,
        V: Value + Send + Sync + 'static,
    {
        self.open_table(def)
    }
}

/// A table open in a [`WriteTransaction`].
pub enum Table<'t, K: StoreKey, V: Value + 'static> {
    Redb(redb::Table<'t, K, V>),
    Pg(pg::PgTable<K, V>),
}

/// A table open in a [`ReadTransaction`].
pub enum ReadOnlyTable<K: StoreKey, V: Value + 'static> {
    Redb(redb::ReadOnlyTable<K, V>),
    Pg(pg::PgTable<K, V>),
}

/// A key or value read from a table; [`AccessGuard::value`] decodes it.
pub struct AccessGuard<'a, V: Value + 'static>(Guarded<'a, V>);

enum Guarded<'a, V: Value + 'static> {
    Redb(redb::AccessGuard<'a, V>),
    Owned(Vec<u8>),
}

impl<'a, V: Value + 'static> AccessGuard<'a, V> {
    /// The decoded value, borrowing from the guard.
    pub fn value(&self) -> V::SelfType<'_> {
        match &self.0 {
            Guarded::Redb(g) => g.value(),
            Guarded::Owned(bytes) => V::from_bytes(bytes),
        }
    }

    fn redb(guard: redb::AccessGuard<'a, V>) -> Self {
        AccessGuard(Guarded::Redb(guard))
    }

    pub(super) fn owned(bytes: Vec<u8>) -> Self {
        AccessGuard(Guarded::Owned(bytes))
    }
}

/// A key and its value, as a range yields them.
pub type Entry<'a, K, V> = (AccessGuard<'a, K>, AccessGuard<'a, V>);

/// The entries of a key range, in key order, from either end.
pub struct Range<'a, K: StoreKey, V: Value + 'static>(Ranged<'a, K, V>);

enum Ranged<'a, K: StoreKey, V: Value + 'static> {
    Redb(redb::Range<'a, K, V>),
    Pg(pg::PgRange<K, V>),
}

impl<'a, K: StoreKey, V: Value + 'static> Iterator for Range<'a, K, V> {
    type Item = Result<Entry<'a, K, V>>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Ranged::Redb(r) => r.next().map(from_redb),
            Ranged::Pg(r) => r.next(),
        }
    }
}

impl<K: StoreKey, V: Value + 'static> DoubleEndedIterator for Range<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Ranged::Redb(r) => r.next_back().map(from_redb),
            Ranged::Pg(r) => r.next_back(),
        }
    }
}

/// An entry as redb answers it.
type RedbEntry<'a, K, V> = (redb::AccessGuard<'a, K>, redb::AccessGuard<'a, V>);

fn from_redb<'a, K: StoreKey, V: Value + 'static>(
    row: std::result::Result<RedbEntry<'a, K, V>, redb::StorageError>,
) -> Result<Entry<'a, K, V>> {
    let (k, v) = row?;
    Ok((AccessGuard::redb(k), AccessGuard::redb(v)))
}

/// redb's answer to `first` or `last`, as this API's.
fn end_of<'a, K: StoreKey, V: Value + 'static>(
    found: std::result::Result<Option<RedbEntry<'a, K, V>>, redb::StorageError>,
) -> Result<Option<Entry<'a, K, V>>> {
    found?.map(Ok).map(from_redb).transpose()
}

/// The sort-key bounds of `range` (what the PostgreSQL engine scans).
fn sort_bounds<'a, K: StoreKey, KR: Borrow<K::SelfType<'a>> + 'a>(
    range: &impl RangeBounds<KR>,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let bound = |b: Bound<&KR>| b.map(|k| K::sort_key_of(k.borrow()));
    (bound(range.start_bound()), bound(range.end_bound()))
}

/// Reading a table, open in either kind of transaction (redb's `ReadableTable`).
pub trait ReadableTable<K: StoreKey, V: Value + 'static> {
    /// The value under `key`, if any.
    fn get<'a>(&self, key: impl Borrow<K::SelfType<'a>>) -> Result<Option<AccessGuard<'_, V>>>;

    /// The entries whose keys are within `range`, in key order (double-ended).
    fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Range<'_, K, V>>
    where
        KR: Borrow<K::SelfType<'a>> + 'a;

    /// Every entry, in key order.
    fn iter(&self) -> Result<Range<'_, K, V>> {
        self.range::<K::SelfType<'_>>(..)
    }

    /// The entry with the smallest key, if any.
    fn first(&self) -> Result<Option<Entry<'_, K, V>>>;

    /// The entry with the largest key, if any.
    fn last(&self) -> Result<Option<Entry<'_, K, V>>>;

    /// The number of entries.
    fn len(&self) -> Result<u64>;

    /// Whether the table has no entry.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A table open in a store snapshot and shared by its reads ([`super::Snapshot::table`]).
pub type Shared<K, V> = std::sync::Arc<ReadOnlyTable<K, V>>;

/// A shared open table ([`super::Snapshot::table`] keeps them so) reads as the table.
impl<K: StoreKey, V: Value + 'static, T: ReadableTable<K, V>> ReadableTable<K, V> for std::sync::Arc<T> {
    fn get<'a>(&self, key: impl Borrow<K::SelfType<'a>>) -> Result<Option<AccessGuard<'_, V>>> {
        (**self).get(key)
    }

    fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Range<'_, K, V>>
    where
        KR: Borrow<K::SelfType<'a>> + 'a,
    {
        (**self).range(range)
    }

    fn first(&self) -> Result<Option<Entry<'_, K, V>>> {
        (**self).first()
    }

    fn last(&self) -> Result<Option<Entry<'_, K, V>>> {
        (**self).last()
    }

    fn len(&self) -> Result<u64> {
        (**self).len()
    }
}

/// A table of a write transaction opened the first time it is needed (a run of writes that
/// seldom touches it).
pub struct LazyTable<'t, K: StoreKey, V: Value + 'static> {
    txn: &'t WriteTransaction,
    def: TableDefinition<'static, K, V>,
    table: Option<Table<'t, K, V>>,
}

impl<'t, K: StoreKey, V: Value + 'static> LazyTable<'t, K, V> {
    /// Table `def` of `txn`, not opened yet.
    pub fn new(txn: &'t WriteTransaction, def: TableDefinition<'static, K, V>) -> Self {
        LazyTable { txn, def, table: None }
    }

    /// The table, opened on the first call. Errors as [`WriteTransaction::open_table`].
    pub fn get(&mut self) -> Result<&mut Table<'t, K, V>> {
        if self.table.is_none() {
            self.table = Some(self.txn.open_table(self.def)?);
        }
        Ok(self.table.as_mut().expect("opened above"))
    }
}

/// Implements [`ReadableTable`] for a table enum whose `Redb` variant implements redb's, and
/// its `get` and `range` as inherent methods (whose guards live as long as `$guard`).
macro_rules! readable {
    ($table:ident $(<$t:lifetime>)?, $guard:lifetime) => {
        impl<$($t,)? K: StoreKey, V: Value + 'static> $table<$($t,)? K, V> {
            /// The value under `key`, if any.
            pub fn get<'a>(&self, key: impl Borrow<K::SelfType<'a>>) -> Result<Option<AccessGuard<$guard, V>>> {
                match self {
                    $table::Redb(t) => Ok(t.get(key)?.map(AccessGuard::redb)),
                    $table::Pg(t) => t.get(&K::sort_key_of(key.borrow())),
                }
            }

            /// The entries whose keys are within `range`, in key order (double-ended).
            pub fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Range<$guard, K, V>>
            where
                KR: Borrow<K::SelfType<'a>> + 'a,
            {
                Ok(Range(match self {
                    $table::Redb(t) => Ranged::Redb(t.range(range)?),
                    $table::Pg(t) => Ranged::Pg(t.range(sort_bounds::<K, KR>(&range))),
                }))
            }
        }

        impl<$($t,)? K: StoreKey, V: Value + 'static> ReadableTable<K, V> for $table<$($t,)? K, V> {
            fn get<'a>(&self, key: impl Borrow<K::SelfType<'a>>) -> Result<Option<AccessGuard<'_, V>>> {
                $table::get(self, key)
            }

            fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Range<'_, K, V>>
            where
                KR: Borrow<K::SelfType<'a>> + 'a,
            {
                $table::range(self, range)
            }

            fn first(&self) -> Result<Option<Entry<'_, K, V>>> {
                match self {
                    $table::Redb(t) => end_of(t.first()),
                    $table::Pg(t) => t.range((Bound::Unbounded, Bound::Unbounded)).next().transpose(),
                }
            }

            fn last(&self) -> Result<Option<Entry<'_, K, V>>> {
                match self {
                    $table::Redb(t) => end_of(t.last()),
                    $table::Pg(t) => t.range((Bound::Unbounded, Bound::Unbounded)).next_back().transpose(),
                }
            }

            fn len(&self) -> Result<u64> {
                match self {
                    $table::Redb(t) => Ok(t.len()?),
                    $table::Pg(t) => t.len(),
                }
            }
        }
    };
}

readable!(Table<'t>, '_);
readable!(ReadOnlyTable, 'static);

impl<K: StoreKey, V: Value + 'static> Table<'_, K, V> {
    /// Puts `value` under `key`; the value it replaced, if any.
    pub fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<Option<AccessGuard<'_, V>>> {
        match self {
            Table::Redb(t) => Ok(t.insert(key, value)?.map(AccessGuard::redb)),
            Table::Pg(t) => t.insert(key.borrow(), value.borrow()),
        }
    }

    /// Puts `value` under `key`, without answering what it replaced: on PostgreSQL the write
    /// waits for the transaction's other writes and needs no read ([`Table::insert`] reads the
    /// old value first, a round trip unless the transaction read or wrote the key already).
    pub fn put<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<()> {
        match self {
            Table::Redb(t) => t.insert(key, value).map(drop).map_err(Into::into),
            Table::Pg(t) => t.put(key.borrow(), value.borrow()),
        }
    }

    /// Removes `key`, without answering the value it had ([`Table::put`]'s counterpart of
    /// [`Table::remove`]).
    pub fn delete<'a>(&mut self, key: impl Borrow<K::SelfType<'a>>) -> Result<()> {
        match self {
            Table::Redb(t) => t.remove(key).map(drop).map_err(Into::into),
            Table::Pg(t) => t.delete(&K::sort_key_of(key.borrow())),
        }
    }

    /// Removes `key`; the value it had, if any.
    pub fn remove<'a>(&mut self, key: impl Borrow<K::SelfType<'a>>) -> Result<Option<AccessGuard<'_, V>>> {
        match self {
            Table::Redb(t) => Ok(t.remove(key)?.map(AccessGuard::redb)),
            Table::Pg(t) => t.remove(&K::sort_key_of(key.borrow())),
        }
    }

    /// Removes every entry for which `predicate` is false.
    pub fn retain<F: for<'f> FnMut(K::SelfType<'f>, V::SelfType<'f>) -> bool>(&mut self, predicate: F) -> Result<()> {
        self.retain_in::<K::SelfType<'_>, F>(.., predicate)
    }

    /// Removes every entry within `range` for which `predicate` is false.
    pub fn retain_in<'a, KR, F>(&mut self, range: impl RangeBounds<KR> + 'a, predicate: F) -> Result<()>
    where
        KR: Borrow<K::SelfType<'a>> + 'a,
        F: for<'f> FnMut(K::SelfType<'f>, V::SelfType<'f>) -> bool,
    {
        match self {
            Table::Redb(t) => Ok(t.retain_in(range, predicate)?),
            Table::Pg(t) => t.retain_in(sort_bounds::<K, KR>(&range), predicate),
        }
    }
}
