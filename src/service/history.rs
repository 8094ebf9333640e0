//! Chat history (spec §2.1, §4.1): items per (replica, user), each with a numeric id that grows
//! with time, the channel (`source`) it belongs to and, for assistant items, its sources.

use std::collections::HashMap;

use uuid::Uuid;

use super::channel_data::{ChannelKey, Stamped};
use super::token_usage;
use crate::error::Result;
use crate::generate::Usage;
use crate::store::kv::{LazyTable, Table, WriteTransaction};
use crate::store::records::{Message, SourceRef};
use crate::store::{now_ms, replica_index, Grouped, Sequence, Sequences, Store};

/// Longest `content` of a chat message or history item, in characters (spec §2.1, §4.2).
pub const MAX_CONTENT_CHARS: usize = 100_000;

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

impl NewItem {
    /// A `user` item saying `content` on the channel of `channel` (its source, data and
    /// de-duplication key).
    pub fn from_user(content: String, channel: Stamped) -> NewItem {
        NewItem {
            role: "user",
            content,
            source: channel.source,
            sources: Vec::new(),
            channel_data: channel.data,
            channel_key: channel.key,
            interrupted: false,
        }
    }
}

/// A history write: `items` of `(replica, user)`, stored in order, and the tokens of the
/// completion that made them (when one did). It answers the items' ids; a channel message
/// already stored (same channel key) is not stored again, its existing id is answered.
///
/// The history writes queued together share their tables ([`Tables`], see
/// [`store::Grouped`]): a completion's question and reply, and the writes of every other
/// request in the same group commit, open them once. The replica's message count
/// (popularity) moves once per run of writes, by all of the run's items ([`Grouped::close`]:
/// each write moving it wrote the popularity order's key again, and removed the one the
/// write before it had put). Errors: those of [`super::chats::Recorder::record`] (a
/// conversation beyond the monthly quota), and the store's.
pub struct Append {
    pub replica: Uuid,
    pub user: Uuid,
    /// Whether the replica is private (its items are).
    pub private: bool,
    pub items: Vec<NewItem>,
    /// The items' `created_at`, in milliseconds since the epoch.
    pub now: i64,
    /// The tokens of the completion whose exchange `items` are ([`token_usage`]).
    pub tokens: Option<Usage>,
    /// Whose monthly conversations a conversation the items start counts in.
    pub pool: super::quotas::Pool,
}

/// The tables a run of [`Append`]s shares, open in one write transaction.
pub struct Tables<'t> {
    messages: super::messages::Messages<Table<'t, super::messages::Key, &'static [u8]>>,
    sequences: Sequences<'t>,
    popularity: replica_index::Popularity<'t>,
    recorder: super::chats::Recorder<'t>,
    channel_messages: super::channel_data::StoredIds<'t>,
    texts: LazyTable<'t, (u128, u64), &'static str>,
    tokens: LazyTable<'t, (u128, u128, u32), (u64, u64)>,
    /// The items stored so far per replica, counted when the run closes.
    counted: HashMap<Uuid, u64>,
}

impl Grouped for Append {
    type Output = Vec<u64>;
    type Tables<'t> = Tables<'t>;

    fn open(txn: &WriteTransaction) -> Result<Tables<'_>> {
        Ok(Tables {
            messages: super::messages::open(txn)?,
            sequences: Sequences::open(txn)?,
            popularity: replica_index::Popularity::open(txn)?,
            recorder: super::chats::Recorder::open(txn)?,
            channel_messages: super::channel_data::StoredIds::new(txn),
            texts: super::passages::lazy(txn),
            tokens: token_usage::lazy(txn),
            counted: HashMap::new(),
        })
    }

    fn apply(&self, t: &mut Tables<'_>) -> Result<Vec<u64>> {
        if let Some(usage) = self.tokens {
            token_usage::add_to(t.tokens.get()?, self.replica, self.user, self.now, usage)?;
        }
        let mut ids = Vec::with_capacity(self.items.len());
        let mut stored = 0;
        for item in &self.items {
            let existing = match &item.channel_key {
                Some(key) => t.channel_messages.get(self.replica, key)?,
                None => None,
            };
            let id = match existing {
                Some(id) => id,
                None => {
                    stored += 1;
                    self.store(t, item)?
                }
            };
            ids.push(id);
        }
        *t.counted.entry(self.replica).or_default() += stored;
        Ok(ids)
    }

    fn close(t: &mut Tables<'_>) -> Result<()> {
        for (replica, n) in std::mem::take(&mut t.counted) {
            t.popularity.add_messages(replica, n)?;
        }
        Ok(())
    }
}

impl Append {
    /// Stores `item` (new) with the tables of `t`; its id.
    fn store(&self, t: &mut Tables, item: &NewItem) -> Result<u64> {
        let (sources, passages) = match item.sources.is_empty() {
            true => (Vec::new(), Vec::new()),
            false => super::passages::keep(t.texts.get()?, self.replica, &item.sources)?,
        };
        let msg = Message {
            id: t.sequences.next(Sequence::Message)?,
            replica: self.replica,
            user: self.user,
            role: item.role.to_string(),
            content: item.content.clone(),
            source: item.source.clone(),
            sources,
            is_private: self.private,
            channel_data: item.channel_data.clone(),
            created_at: self.now,
            interrupted: item.interrupted,
            passages,
        };
        t.messages.put(&msg)?;
        if let Some(key) = &item.channel_key {
            t.channel_messages.put(self.replica, key, msg.id)?;
        }
        t.recorder.record(&msg, self.pool)?;
        Ok(msg.id)
    }
}

/// Stores `items` in order in one transaction; returns their ids (see [`Append`]).
pub async fn append(store: &Store, replica: Uuid, user: Uuid, private: bool, items: Vec<NewItem>) -> Result<Vec<u64>> {
    let pool = super::quotas::Pool::Organization;
    store.write_grouped(Append { replica, user, private, items, now: now_ms(), tokens: None, pool }).await
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
            let messages = super::messages::open(txn)?;
            let upper = page.before_id.map(|b| b.saturating_sub(1)).unwrap_or(u64::MAX);
            let mut out = Vec::new();
            for m in messages.newest_first(replica, user, upper)? {
                let mut m = m?;
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
