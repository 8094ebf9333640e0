//! Chats (docs/decisions.md "Chat"): every history item belongs to one chat, kept at write time in
//! the transaction that stores the item ([`Recorder::record`]).
//!
//! A chat is one (replica, user, source) thread, or, for messengerA / messengerB group chats,
//! one per group (messengerA `chat_type` group, supergroup or channel: per `chat_id`;
//! messengerB with a `server_id`: per `channel_id`). An assistant item goes to the chat of the
//! latest item of its user on its source (the question it answers). Within a chat a new
//! conversation starts after [`SILENCE_MS`] without items (see [`conversations`]).
//!
//! Message items are addressed by UUIDs made from the numeric history id ([`message_uuid`]),
//! so `beforeUUID` / `afterUUID` are cursors over the id order (which is time order).
//!
//! The module owns the tables of chats and conversations: [`conversations`] reads and corrects
//! them, [`insights`] derives a closed conversation's summary, questions and topics.

pub mod conversations;
pub mod insights;

use serde_json::Value;
use uuid::Uuid;

use super::channel::Channel;
use super::quotas::Pool;
use crate::error::{Error, Result};
use crate::store::kv::{ReadTransaction, ReadableTable, Table, WriteTransaction};
use crate::store::records::{Chat, Conversation, Counts, Message, Replica, User};
use crate::store::{self, codec, k, migrate, tables, Store};

/// Silence after which the next item starts a new conversation: 30 minutes, in milliseconds.
pub const SILENCE_MS: i64 = 30 * 60 * 1000;

/// Files every history item stored before schema 3 under its chat and conversation, in id (so
/// time) order, through [`Recorder::record`] like a new item, once: when the 2 → 3 migration left
/// [`migrate::DERIVE_CHATS`] in `meta`, which this removes. Returns whether it derived anything.
pub fn derive_pending_in(txn: &WriteTransaction) -> Result<bool> {
    if !store::meta::Meta::open(txn)?.remove(migrate::DERIVE_CHATS)? {
        return Ok(false);
    }
    let messages = super::messages::open(txn)?;
    let mut keys = messages.keys()?;
    keys.sort_unstable_by_key(|&(replica, user, id)| (id, replica, user));
    let mut recorder = Recorder::open(txn)?;
    for key in keys {
        if let Some(m) = messages.get(key)? {
            recorder.record(&m, Pool::Organization)?;
        }
    }
    Ok(true)
}

/// Where [`Recorder::record`] put an item.
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    pub chat: Uuid,
    pub conversation: Uuid,
    /// The item started this conversation (and, with `new_chat`, the chat).
    pub new_conversation: bool,
    pub new_chat: bool,
    /// The conversation the silence before this item closed, if any.
    pub closed: Option<Uuid>,
}

/// The identity of a chat: a group chat is a channel's place (messengerA's `chat_id`,
/// messengerB's `channel_id` on a server); any other chat is one user on one source. Stored as
/// the tuple [`ChatIdentity::row`] of `tables::REPLICACHATKEY_CHAT`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ChatIdentity {
    source: String,
    /// The group's place; empty for a one-user chat.
    place: String,
    /// The user of a one-user chat; `None` for a group.
    user: Option<Uuid>,
    /// The group's name, when the channel data gives one (not part of the identity).
    name: Option<String>,
}

impl ChatIdentity {
    /// The identity of the chat of a user item on `source` with `channel_data`.
    fn of(user: Uuid, source: &str, channel_data: Option<&str>) -> ChatIdentity {
        let data: Option<Value> = channel_data.and_then(|d| serde_json::from_str(d).ok());
        let group = Channel::parse(source).zip(data).and_then(|(c, d)| c.group(&d));
        if let Some((place, name)) = group {
            return ChatIdentity { source: source.to_string(), place, user: None, name };
        }
        ChatIdentity { source: source.to_string(), place: String::new(), user: Some(user), name: None }
    }

    fn is_group(&self) -> bool {
        self.user.is_none()
    }

    /// The table row key of this chat of `replica`: `(replica, source, place, user or 0)`.
    fn row(&self, replica: u128) -> (u128, &str, &str, u128) {
        (replica, &self.source, &self.place, self.user.map_or(0, k))
    }
}

/// Adds item `m` to `c`.
fn count(c: &mut Counts, m: &Message) {
    if c.message_count == 0 {
        c.first_message_at = m.created_at;
    }
    c.message_count += 1;
    c.last_message_at = c.last_message_at.max(m.created_at);
    if m.role == "assistant" {
        c.replica_reply_count += 1;
        c.last_replica_reply_at = Some(m.created_at);
    }
}

/// A UUID v7 carrying the time `ms` (so that ids made while migrating old history sort by the
/// time of their items).
fn v7_at(ms: i64) -> Uuid {
    let ms = ms.max(0) as u64;
    Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, ms / 1000, (ms % 1000) as u32 * 1_000_000))
}

/// The tables a history write files its items under (chats, conversations and their indexes),
/// opened once per write rather than once per item: a redb `open_table` looks the table up in
/// the transaction's table tree (checking the key and value type names) and writes its new
/// root back when dropped; a completion's two items opened each of these tables twice.
pub struct Recorder<'t> {
    txn: &'t WriteTransaction,
    latest: Table<'t, (u128, u128, &'static str), u128>,
    keys: Table<'t, (u128, &'static str, &'static str, u128), u128>,
    chats: Table<'t, (u128, u128), &'static [u8]>,
    conversations: Table<'t, (u128, u128, u128), &'static [u8]>,
    conversation_chat: Table<'t, (u128, u128), u128>,
    chat_messages: Table<'t, (u128, u128, u64), (u128, u128)>,
    conversation_messages: Table<'t, (u128, u128, u64), u128>,
    user_chats: Table<'t, (u128, u128, u128), ()>,
    open_conversations: Table<'t, (u128, u128, u128), i64>,
}

impl<'t> Recorder<'t> {
    /// Opens the tables of `txn` that [`Recorder::record`] writes.
    pub fn open(txn: &'t WriteTransaction) -> Result<Recorder<'t>> {
        Ok(Recorder {
            txn,
            latest: txn.open_table(tables::USERSOURCE_CHAT)?,
            keys: txn.open_table(tables::REPLICACHATKEY_CHAT)?,
            chats: txn.open_table(tables::CHATS)?,
            conversations: txn.open_table(tables::CONVERSATIONS)?,
            conversation_chat: txn.open_table(tables::REPLICACONV_CHAT)?,
            chat_messages: txn.open_table(tables::CHATMSG_USERCONV)?,
            conversation_messages: txn.open_table(tables::CONVMSG_USER)?,
            user_chats: txn.open_table(tables::USER_CHAT)?,
            open_conversations: txn.open_table(tables::OPEN_CONVERSATION)?,
        })
    }

    /// The chat id of item `m`, made (with its identity row) when new; `(id, new, group, name)`.
    fn chat_id(&mut self, m: &Message) -> Result<(Uuid, bool, bool, Option<String>)> {
        let (replica, user) = (k(m.replica), k(m.user));
        if m.role == "assistant" && m.channel_data.is_none() {
            if let Some(chat) = self.latest.get((replica, user, m.source.as_str()))?.map(|v| v.value()) {
                return Ok((Uuid::from_u128(chat), false, false, None));
            }
        }
        let identity = ChatIdentity::of(m.user, &m.source, m.channel_data.as_deref());
        let found = self.keys.get(identity.row(replica))?.map(|v| v.value());
        let (id, new) = match found {
            Some(id) => (Uuid::from_u128(id), false),
            None => {
                let id = v7_at(m.created_at);
                self.keys.put(identity.row(replica), k(id))?;
                (id, true)
            }
        };
        self.latest.put((replica, user, m.source.as_str()), k(id))?;
        Ok((id, new, identity.is_group(), identity.name))
    }

    /// Files the stored item `m` under its chat and conversation, updating their counts and,
    /// when it starts a conversation, the usage counters (`service::usage::count_in`, in
    /// `pool`) once the quota admits it (`service::quotas::admit_conversation_in`): the
    /// chats-and-conversations half of a history write (by `history::Append` in the same
    /// transaction, and by the migration that derives chats from older history). Errors: 429
    /// when `m` would start a conversation beyond `pool`'s monthly quota.
    pub fn record(&mut self, m: &Message, pool: Pool) -> Result<Placed> {
        let (chat_id, new_chat, group, name) = self.chat_id(m)?;
        let replica = k(m.replica);
        let mut chat = match store::get::<(u128, u128), Chat, _>(&self.chats, (replica, k(chat_id)))? {
            Some(c) => c,
            None => Chat {
                id: chat_id,
                replica: m.replica,
                source: m.source.clone(),
                group,
                user: (!group).then_some(m.user),
                name: None,
                counts: Counts::default(),
                conversation: Uuid::nil(),
            },
        };
        if name.is_some() {
            chat.name = name;
        }
        let silent = chat.counts.message_count == 0 || m.created_at - chat.counts.last_message_at > SILENCE_MS;
        let closed = (silent && !chat.conversation.is_nil()).then_some(chat.conversation);
        if silent {
            chat.conversation = v7_at(m.created_at);
            self.conversation_chat.put((replica, k(chat.conversation)), k(chat_id))?;
        }
        count(&mut chat.counts, m);
        store::put(&mut self.chats, (replica, k(chat_id)), &chat)?;
        let last_message_at = self.count_in_conversation(&chat, m)?;
        let (user, conversation) = (k(m.user), k(chat.conversation));
        self.chat_messages.put((replica, k(chat_id), m.id), (user, conversation))?;
        self.conversation_messages.put((replica, conversation, m.id), user)?;
        self.user_chats.put((replica, user, k(chat_id)), ())?;
        self.open_conversations.put((replica, k(chat_id), conversation), last_message_at)?;
        if silent {
            super::quotas::admit_conversation_in(self.txn, m, pool)?;
            super::usage::count_in(self.txn, m, pool)?;
        }
        let placed =
            Placed { chat: chat_id, conversation: chat.conversation, new_conversation: silent, new_chat, closed };
        Ok(placed)
    }

    /// Counts `m` in the current conversation of `chat` (made when new); returns the time of
    /// the conversation's latest item.
    fn count_in_conversation(&mut self, chat: &Chat, m: &Message) -> Result<i64> {
        let key = (k(m.replica), k(chat.id), k(chat.conversation));
        let mut conv = match store::get::<(u128, u128, u128), Conversation, _>(&self.conversations, key)? {
            Some(c) => c,
            None => Conversation {
                id: chat.conversation,
                chat: chat.id,
                replica: m.replica,
                source: chat.source.clone(),
                group: chat.group,
                counts: Counts::default(),
                summary: None,
                common_questions: Vec::new(),
                common_topics: Vec::new(),
            },
        };
        count(&mut conv.counts, m);
        store::put(&mut self.conversations, key, &conv)?;
        Ok(conv.counts.last_message_at)
    }
}

/// Whether a question from `user` on `source` (with the channel's `channel_data`) at `now`
/// continues a conversation of `replica` (its chat had an item within [`SILENCE_MS`]) rather
/// than starting one (what the quota check before a reply asks, `service::quotas`).
pub fn continues_in(
    txn: &ReadTransaction,
    replica: Uuid,
    user: Uuid,
    source: &str,
    channel_data: Option<&str>,
    now: i64,
) -> Result<bool> {
    let (identity, r) = (ChatIdentity::of(user, source, channel_data), k(replica));
    let chat = txn.open_table(tables::REPLICACHATKEY_CHAT)?.get(identity.row(r))?.map(|v| v.value());
    let chat = match chat {
        Some(id) => store::get::<(u128, u128), Chat, _>(&txn.open_table(tables::CHATS)?, (r, id))?,
        None => None,
    };
    Ok(chat.is_some_and(|c| c.counts.message_count > 0 && now - c.counts.last_message_at <= SILENCE_MS))
}

/// Removes every chat and conversation of `replica` (the replica is being deleted).
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    let r = k(replica);
    let (lo, hi) = (0u128, u128::MAX);
    txn.open_table(tables::REPLICACHATKEY_CHAT)?
        .retain_in((r, "", "", 0)..=(r, "\u{10FFFF}", "\u{10FFFF}", u128::MAX), |_, _| false)?;
    txn.open_table(tables::CHATS)?.retain_in((r, lo)..=(r, hi), |_, _| false)?;
    txn.open_table(tables::CONVERSATIONS)?.retain_in((r, lo, lo)..=(r, hi, hi), |_, _| false)?;
    txn.open_table(tables::REPLICACONV_CHAT)?.retain_in((r, lo)..=(r, hi), |_, _| false)?;
    txn.open_table(tables::CHATMSG_USERCONV)?.retain_in((r, lo, 0)..=(r, hi, u64::MAX), |_, _| false)?;
    txn.open_table(tables::CONVMSG_USER)?.retain_in((r, lo, 0)..=(r, hi, u64::MAX), |_, _| false)?;
    txn.open_table(tables::USER_CHAT)?.retain_in((r, lo, lo)..=(r, hi, hi), |_, _| false)?;
    txn.open_table(tables::USERSOURCE_CHAT)?.retain_in((r, lo, "")..=(r, hi, "\u{10FFFF}"), |_, _| false)?;
    txn.open_table(tables::OPEN_CONVERSATION)?.retain_in((r, lo, lo)..=(r, hi, hi), |_, _| false)?;
    txn.open_table(tables::REPLICATERM_CONVERSATIONS)?.retain_in((r, "")..=(r, "\u{10FFFF}"), |_, _| false)?;
    super::usage::delete_all_in(txn, replica)
}

/// Who reads chats: the replica's owner (or the organization key alone) sees every chat;
/// another user sees the chats they wrote in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    All,
    Participant(Uuid),
}

impl Viewer {
    /// The viewer for `user` (`None`: the organization key alone) reading `replica`'s chats.
    pub fn of(replica: &Replica, user: Option<&User>) -> Viewer {
        match user {
            Some(u) if u.id != replica.owner => Viewer::Participant(u.id),
            _ => Viewer::All,
        }
    }

    /// Whether this viewer may read chat `chat` of `replica`.
    pub fn sees(self, txn: &ReadTransaction, replica: Uuid, chat: Uuid) -> Result<bool> {
        match self {
            Viewer::All => Ok(true),
            Viewer::Participant(u) => {
                Ok(txn.open_table(tables::USER_CHAT)?.get((k(replica), k(u), k(chat)))?.is_some())
            }
        }
    }
}

/// Orders of chat and conversation lists (`sortBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    ReplicaReplies,
    FirstMessageAt,
    LastReplicaReplyAt,
}

impl SortBy {
    /// The `sortBy` values, as on the wire, in the variants' order (`SortBy::X as usize` is
    /// the index of X's name).
    pub const NAMES: [&'static str; 3] = ["replicaReplies", "firstMessageAt", "lastReplicaReplyAt"];

    /// Parses a `sortBy` value.
    pub fn parse(s: &str) -> Option<SortBy> {
        match s {
            "replicaReplies" => Some(SortBy::ReplicaReplies),
            "firstMessageAt" => Some(SortBy::FirstMessageAt),
            "lastReplicaReplyAt" => Some(SortBy::LastReplicaReplyAt),
            _ => None,
        }
    }

    fn key(self, c: &Counts) -> i64 {
        match self {
            SortBy::ReplicaReplies => c.replica_reply_count as i64,
            SortBy::FirstMessageAt => c.first_message_at,
            SortBy::LastReplicaReplyAt => c.last_replica_reply_at.unwrap_or(i64::MIN),
        }
    }
}

/// A page of a chat or conversation list: `page` from 1, `page_size` 0–100, order.
#[derive(Debug, Clone, Copy)]
pub struct ListQuery {
    pub page: u64,
    pub page_size: u64,
    pub sort_by: SortBy,
    pub descending: bool,
}

/// Sorts `items` (ties by id, in the same direction) and cuts the page; `(page, total)`.
pub fn sort_page<T>(mut items: Vec<T>, q: ListQuery, counts: impl Fn(&T) -> (&Counts, Uuid)) -> (Vec<T>, u64) {
    items.sort_by(|a, b| {
        let ((ca, ia), (cb, ib)) = (counts(a), counts(b));
        let ord = q.sort_by.key(ca).cmp(&q.sort_by.key(cb)).then(ia.cmp(&ib));
        if q.descending {
            ord.reverse()
        } else {
            ord
        }
    });
    super::page_of(items, q.page, q.page_size)
}

/// The chats of `replica` `viewer` sees, decoded.
pub fn chats_in(txn: &ReadTransaction, replica: Uuid, viewer: Viewer) -> Result<Vec<Chat>> {
    let chats = txn.open_table(tables::CHATS)?;
    let r = k(replica);
    match viewer {
        Viewer::All => chats.range((r, 0)..=(r, u128::MAX))?.map(|row| codec::decode(row?.1.value())).collect(),
        Viewer::Participant(u) => {
            let mine = txn.open_table(tables::USER_CHAT)?;
            let mut out = Vec::new();
            for row in mine.range((r, k(u), 0)..=(r, k(u), u128::MAX))? {
                let chat = row?.0.value().2;
                out.extend(store::get::<(u128, u128), Chat, _>(&chats, (r, chat))?);
            }
            Ok(out)
        }
    }
}

/// A page of the chats of `replica` `viewer` sees, and their number.
pub async fn list(store: &Store, replica: Uuid, viewer: Viewer, q: ListQuery) -> Result<(Vec<Labeled<Chat>>, u64)> {
    store
        .read_scan(move |txn| {
            let (page, total) = sort_page(chats_in(txn, replica, viewer)?, q, |c| (&c.counts, c.id));
            let page = page.into_iter().map(|c| label_in(txn, &c, c.clone())).collect::<Result<_>>()?;
            Ok((page, total))
        })
        .await
}

/// Chat `chat` of `replica` if `viewer` sees it; 404 otherwise.
pub fn get_in(txn: &ReadTransaction, replica: Uuid, chat: Uuid, viewer: Viewer) -> Result<Chat> {
    let found = store::get::<(u128, u128), Chat, _>(&txn.open_table(tables::CHATS)?, (k(replica), k(chat)))?;
    match found {
        Some(c) if viewer.sees(txn, replica, chat)? => Ok(c),
        _ => Err(Error::not_found("chat")),
    }
}

/// Chat `chat` of `replica` as `viewer` sees it, labeled.
pub async fn get(store: &Store, replica: Uuid, chat: Uuid, viewer: Viewer) -> Result<Labeled<Chat>> {
    store
        .read(move |txn| {
            let c = get_in(txn, replica, chat, viewer)?;
            label_in(txn, &c, c.clone())
        })
        .await
}

/// A chat or conversation with the name and picture shown for it: a group's name, or the
/// name and profile image of the user of an individual chat.
#[derive(Debug, Clone)]
pub struct Labeled<T> {
    pub item: T,
    pub name: Option<String>,
    pub image: Option<String>,
}

/// `item` of chat `chat` labeled (see [`Labeled`]).
pub fn label_in<T>(txn: &ReadTransaction, chat: &Chat, item: T) -> Result<Labeled<T>> {
    if chat.group {
        return Ok(Labeled { item, name: chat.name.clone(), image: None });
    }
    let user = match chat.user {
        Some(u) => super::users::reader(txn)?.get(u)?,
        None => None,
    };
    let (name, image) = user.map(|u| (Some(u.name).filter(|n| !n.is_empty()), u.profile_image)).unwrap_or_default();
    Ok(Labeled { item, name, image })
}

const MESSAGE_UUID_HIGH: u64 = 0x7265_706c_6d73_8000; // "replms", version 8
const MESSAGE_UUID_VARIANT: u64 = 0x8000_0000_0000_0000;

/// The UUID of history item `id` in message lists (UUID version 8 carrying the id).
pub fn message_uuid(id: u64) -> Uuid {
    Uuid::from_u64_pair(MESSAGE_UUID_HIGH, MESSAGE_UUID_VARIANT | (id & !(0b11 << 62)))
}

/// The history id of a message UUID made by [`message_uuid`]; `None` for any other UUID.
pub fn message_id(uuid: Uuid) -> Option<u64> {
    let (high, low) = uuid.as_u64_pair();
    (high == MESSAGE_UUID_HIGH && low & (0b11 << 62) == MESSAGE_UUID_VARIANT).then_some(low & !(0b11 << 62))
}

/// Which items of a chat or conversation to list: at most `limit`, with an id below `before`
/// and above `after`. Without `after`, the newest such items; with `after` alone, the oldest.
/// Always oldest first.
#[derive(Debug, Clone, Copy)]
pub struct Cursor {
    pub limit: usize,
    pub before: Option<u64>,
    pub after: Option<u64>,
}

/// A history item with its sender's name and picture where known.
#[derive(Debug, Clone)]
pub struct Item {
    pub message: Message,
    pub sender_name: Option<String>,
    pub sender_image: Option<String>,
}

/// `(message id, user id)` of the items of `(replica, id)` in an index keyed
/// `(replica, chat or conversation, message id)`, chosen by `cursor`, oldest first.
pub fn ids_in<V: crate::store::kv::StoreValue>(
    table: &impl ReadableTable<(u128, u128, u64), V>,
    replica: Uuid,
    id: Uuid,
    cursor: Cursor,
    user_of: impl Fn(V::SelfType<'_>) -> u128,
) -> Result<Vec<(u64, u128)>> {
    let lo = cursor.after.map_or(0, |a| a.saturating_add(1));
    let hi = cursor.before.map_or(u64::MAX, |b| b.saturating_sub(1));
    if cursor.before == Some(0) || lo > hi {
        return Ok(Vec::new());
    }
    let range = table.range((k(replica), k(id), lo)..=(k(replica), k(id), hi))?;
    let mut out = Vec::new();
    if cursor.after.is_some() && cursor.before.is_none() {
        for row in range.take(cursor.limit) {
            let (key, v) = row?;
            out.push((key.value().2, user_of(v.value())));
        }
    } else {
        for row in range.rev().take(cursor.limit) {
            let (key, v) = row?;
            out.push((key.value().2, user_of(v.value())));
        }
        out.reverse();
    }
    Ok(out)
}

/// The items `ids` of `replica` with their senders.
pub fn items_in(txn: &ReadTransaction, replica: &Replica, ids: &[(u64, u128)]) -> Result<Vec<Item>> {
    let messages = super::messages::open(txn)?;
    let users = super::users::reader(txn)?;
    let mut out = Vec::with_capacity(ids.len());
    for &(id, user) in ids {
        let Some(m) = messages.get((k(replica.id), user, id))? else {
            continue;
        };
        let (name, image) = if m.role == "assistant" {
            (Some(replica.name.clone()), replica.profile_image.clone())
        } else {
            let u = users.get(Uuid::from_u128(user))?;
            let from_channel = channel_sender(&m);
            let name = from_channel.or_else(|| u.as_ref().map(|u| u.name.clone())).filter(|n| !n.is_empty());
            (name, u.and_then(|u| u.profile_image))
        };
        out.push(Item { message: m, sender_name: name, sender_image: image });
    }
    Ok(out)
}

/// The sender's name a channel reported with an item (its [`Channel::sender_field`]: messengerA
/// `username`, messengerB `author_name`).
fn channel_sender(m: &Message) -> Option<String> {
    let d: Value = serde_json::from_str(m.channel_data.as_deref()?).ok()?;
    let mut fields = Channel::ALL.into_iter().filter_map(Channel::sender_field);
    fields.find_map(|f| d[f].as_str()).map(str::to_string)
}

/// The items of chat `chat` chosen by `cursor`; 404 when `viewer` does not see the chat.
pub async fn messages(
    store: &Store,
    replica: std::sync::Arc<Replica>,
    chat: Uuid,
    viewer: Viewer,
    cursor: Cursor,
) -> Result<Vec<Item>> {
    store
        .read(move |txn| {
            get_in(txn, replica.id, chat, viewer)?;
            let index = txn.open_table(tables::CHATMSG_USERCONV)?;
            let ids = ids_in(&index, replica.id, chat, cursor, |(user, _)| user)?;
            items_in(txn, &replica, &ids)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_uuids_carry_the_history_id() {
        for id in [1u64, 42, u32::MAX as u64, (1 << 62) - 1] {
            let u = message_uuid(id);
            assert_eq!(u.get_version_num(), 8);
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(message_id(u), Some(id));
        }
        assert_eq!(message_id(Uuid::now_v7()), None);
    }
}
