//! Chat history (spec §2.1, §4.1): items per (replica, user), each with a numeric id that grows
//! with time, the channel (`source`) it belongs to and, for assistant items, its sources.

use redb::{Key, ReadableTable, Table, TableDefinition, Value, WriteTransaction};
use uuid::Uuid;

use super::channel_data::ChannelKey;
use crate::error::{Error, Result};
use crate::store::records::{Message, SourceRef};
use crate::store::{self, k, next_seq, now_ms, tables, Sequence, Store};

/// Longest `content` of a chat message or history item, in characters (spec §2.1, §4.2).
pub const MAX_CONTENT_CHARS: usize = 100_000;

/// Message-source values (spec §2.6).
pub const SOURCES: &[&str] = &["messengerB", "messengerA", "embed", "web", "messengerA_autopilot"];

/// A history item to store.
#[derive(Debug, Clone)]
pub struct NewItem {
    pub role: &'static str,
    pub content: String,
    pub source: String,
    pub sources: Vec<SourceRef>,
    pub channel_data: Option<String>,
    /// The channel message this item is (or answers), for de-duplication.
    pub channel_key: Option<ChannelKey>,
    /// A reply cut short (see [`Message::interrupted`]).
    pub interrupted: bool,
}

/// Writes `items` for `(replica, user)` in `txn`, in order; returns their ids. A channel
/// message already stored (same channel key) is not stored again: its existing id is returned.
/// The tables are opened once for all the items, and the replica's message count (popularity)
/// moves once: a completion's question and reply are one write. Errors: those of
/// [`super::chats::Recorder::record`] (a conversation beyond the monthly quota), and the store's.
pub fn append_in(
    txn: &WriteTransaction,
    replica: Uuid,
    user: Uuid,
    private: bool,
    items: &[NewItem],
    now: i64,
) -> Result<Vec<u64>> {
    let mut messages = txn.open_table(tables::REPLICAUSERMSG_MESSAGE)?;
    let mut channel_messages = Lazy::new(txn, tables::REPLICACHANNELMSG_MESSAGE);
    let mut texts = Lazy::new(txn, tables::REPLICAPASSAGE_TEXT);
    let mut recorder = super::chats::Recorder::open(txn)?;
    let mut ids = Vec::with_capacity(items.len());
    let mut stored = 0;
    for item in items {
        let existing = match &item.channel_key {
            Some(key) => channel_messages.get()?.get(key.row(replica))?.map(|v| v.value()),
            None => None,
        };
        if let Some(id) = existing {
            ids.push(id);
            continue;
        }
        let (sources, passages) = match item.sources.is_empty() {
            true => (Vec::new(), Vec::new()),
            false => super::passages::keep(texts.get()?, replica, &item.sources)?,
        };
        let msg = Message {
            id: next_seq(txn, Sequence::Message)?,
            replica,
            user,
            role: item.role.to_string(),
            content: item.content.clone(),
            source: item.source.clone(),
            sources,
            is_private: private,
            channel_data: item.channel_data.clone(),
            created_at: now,
            interrupted: item.interrupted,
            passages,
        };
        store::put(&mut messages, (k(replica), k(user), msg.id), &msg)?;
        if let Some(key) = &item.channel_key {
            channel_messages.get()?.insert(key.row(replica), msg.id)?;
        }
        recorder.record(&msg)?;
        ids.push(msg.id);
        stored += 1;
    }
    count_messages(txn, replica, stored)?;
    Ok(ids)
}

/// A table of a write transaction opened the first time it is needed (most history writes
/// need neither the channel-message table nor the cited texts).
struct Lazy<'t, K: Key + 'static, V: Value + 'static> {
    txn: &'t WriteTransaction,
    def: TableDefinition<'static, K, V>,
    table: Option<Table<'t, K, V>>,
}

impl<'t, K: Key + 'static, V: Value + 'static> Lazy<'t, K, V> {
    fn new(txn: &'t WriteTransaction, def: TableDefinition<'static, K, V>) -> Self {
        Lazy { txn, def, table: None }
    }

    fn get(&mut self) -> Result<&mut Table<'t, K, V>> {
        if self.table.is_none() {
            self.table = Some(self.txn.open_table(self.def)?);
        }
        Ok(self.table.as_mut().expect("opened above"))
    }
}

/// Stores `items` in order in one transaction; returns their ids.
pub async fn append(store: &Store, replica: Uuid, user: Uuid, private: bool, items: Vec<NewItem>) -> Result<Vec<u64>> {
    let now = now_ms();
    store.write(move |txn| append_in(txn, replica, user, private, &items, now)).await
}

/// Which items of a history to list.
#[derive(Debug, Clone)]
pub struct Page {
    /// Only items of this source (channel); all when `None`.
    pub channel: Option<String>,
    /// At most this many items (the newest ones before `before_id`), oldest first.
    pub limit: usize,
    /// Only items with an id below this one.
    pub before_id: Option<u64>,
}

/// The newest `page.limit` items of `(replica, user)` matching `page`, oldest first.
pub async fn list(store: &Store, replica: Uuid, user: Uuid, page: Page) -> Result<Vec<Message>> {
    store
        .read(move |txn| {
            let table = txn.table(tables::REPLICAUSERMSG_MESSAGE)?;
            let upper = page.before_id.map(|b| b.saturating_sub(1)).unwrap_or(u64::MAX);
            let mut out = Vec::new();
            for row in table.range((k(replica), k(user), 0)..=(k(replica), k(user), upper))?.rev() {
                let (_, v) = row?;
                let mut m: Message = store::codec::decode(v.value())?;
                if page.channel.as_ref().is_none_or(|c| c == &m.source) {
                    super::passages::fill(txn, &mut m)?;
                    out.push(m);
                    if out.len() >= page.limit {
                        break;
                    }
                }
            }
            out.reverse();
            Ok(out)
        })
        .await
}

/// Checks a `source` value.
pub fn check_source(source: &str) -> Result<()> {
    if SOURCES.contains(&source) {
        Ok(())
    } else {
        Err(Error::invalid("source", format!("must be one of {}", SOURCES.join(", "))))
    }
}

/// Counts `n` more chat history items of `replica` (popularity).
fn count_messages(txn: &WriteTransaction, replica: Uuid, n: u64) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let mut t = txn.open_table(tables::REPLICA_MESSAGECOUNT)?;
    let before = t.get(k(replica))?.map(|v| v.value()).unwrap_or(0);
    t.insert(k(replica), before + n)?;
    drop(t);
    store::replica_index::popularity_changed(txn, replica, before, before + n)
}
