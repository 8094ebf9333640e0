//! The chat history items (`tables::REPLICAUSERMSG_MESSAGE`, `(replica, user, id) → Message`):
//! this module alone opens the table; `history` appends and lists items, `chats` files them
//! under their chats and conversations, `chat` reads the turns of a prompt, all through it.

use uuid::Uuid;

use crate::error::Result;
use crate::store::kv::{ReadableTable, Reads, Table, WriteTransaction};
use crate::store::records::Message;
use crate::store::{self, codec, k, tables};

/// An item's key: `(replica, user, id)` as stored.
pub type Key = (u128, u128, u64);

/// The items table, open in a transaction.
pub struct Messages<T>(T);

/// The items table open in `txn` (a write transaction's sees its own writes; a store
/// snapshot's is shared by its reads). Errors: the store's.
pub fn open<R: Reads>(txn: &R) -> Result<Messages<R::Table<'_, Key, &'static [u8]>>> {
    Ok(Messages(txn.read_table(tables::REPLICAUSERMSG_MESSAGE)?))
}

impl<T: ReadableTable<Key, &'static [u8]>> Messages<T> {
    /// The item under `key`, if stored. Errors: the store's (a record that does not decode).
    pub fn get(&self, key: Key) -> Result<Option<Message>> {
        store::get(&self.0, key)
    }

    /// The items of `(replica, user)` with ids up to `upto`, newest first, decoded as read.
    pub fn newest_first(
        &self,
        replica: Uuid,
        user: Uuid,
        upto: u64,
    ) -> Result<impl Iterator<Item = Result<Message>> + '_> {
        let rows = self.0.range((k(replica), k(user), 0)..=(k(replica), k(user), upto))?;
        Ok(rows.rev().map(|row| row.and_then(|(_, v)| codec::decode::<Message>(v.value()))))
    }

    /// Every item of `replica`, in key order (by user, then id): a replica bundle's history.
    /// Errors: the store's.
    pub fn of_replica(&self, replica: Uuid) -> Result<Vec<Message>> {
        let r = k(replica);
        let rows = self.0.range((r, 0, 0)..=(r, u128::MAX, u64::MAX))?;
        rows.map(|row| row.and_then(|(_, v)| codec::decode::<Message>(v.value()))).collect()
    }

    /// The key of every item, in key order (the derivation of chats from an older store).
    pub fn keys(&self) -> Result<Vec<Key>> {
        self.0.iter()?.map(|row| Ok(row?.0.value())).collect()
    }
}

impl Messages<Table<'_, Key, &'static [u8]>> {
    /// Stores `m` under its key. Errors: the store's.
    pub fn put(&mut self, m: &Message) -> Result<()> {
        store::put(&mut self.0, (k(m.replica), k(m.user), m.id), m)
    }
}

/// Removes every item of `replica` (being deleted). Errors: the store's.
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    let r = k(replica);
    txn.open_table(tables::REPLICAUSERMSG_MESSAGE)?.retain_in((r, 0, 0)..=(r, u128::MAX, u64::MAX), |_, _| false)
}
