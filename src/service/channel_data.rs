//! The channel data of a message (spec §4.1 `messengerA_data`, `messengerB_data`): the shapes,
//! their checks, the key that makes a repeated channel message store nothing new, and the form
//! stored with the message (JSON text). One copy of these rules for the history operations, the
//! completions and the channel bots.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::channel::{check_source, Channel};
use super::check_len;
use crate::error::{Error, Result};
use crate::store::kv::{LazyTable, ReadableTable, Reads, WriteTransaction};
use crate::store::tables;

/// Where a message is stored and with which channel data: `source`, the data as stored (JSON
/// text) and the de-duplication key (`None` for both without channel data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    pub source: String,
    pub data: Option<String>,
    pub key: Option<ChannelKey>,
}

/// The de-duplication key of a channel message: the channel (`messengerA`, `messengerB`), the
/// place in it (messengerA's `chat_id`, messengerB's `channel_id`) and the message id there.
/// `reply` marks the key of the reply stored for that message, so a retried message stores
/// neither a second question nor a second answer. Stored as the tuple [`ChannelKey::row`] of
/// `tables::REPLICACHANNELMSG_MESSAGE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelKey {
    pub channel: &'static str,
    pub place: String,
    pub message: String,
    pub reply: bool,
}

impl ChannelKey {
    fn of(channel: Channel, place: impl ToString, message: impl ToString) -> ChannelKey {
        ChannelKey { channel: channel.name(), place: place.to_string(), message: message.to_string(), reply: false }
    }

    /// The key of the reply stored for this message.
    pub fn reply(&self) -> ChannelKey {
        ChannelKey { reply: true, ..self.clone() }
    }

    /// The table row key of this message of `replica`.
    fn row(&self, replica: Uuid) -> (u128, &str, &str, &str, bool) {
        (crate::store::k(replica), self.channel, &self.place, &self.message, self.reply)
    }
}

/// The ids stored for channel messages (`tables::REPLICACHANNELMSG_MESSAGE`), opened when a
/// run of history writes first meets a channel message.
pub struct StoredIds<'t>(LazyTable<'t, (u128, &'static str, &'static str, &'static str, bool), u64>);

impl<'t> StoredIds<'t> {
    /// The table of `txn`, not opened yet.
    pub fn new(txn: &'t WriteTransaction) -> StoredIds<'t> {
        StoredIds(LazyTable::new(txn, tables::REPLICACHANNELMSG_MESSAGE))
    }

    /// The id of the item stored for `key` of `replica`, if any. Errors: the store's.
    pub fn get(&mut self, replica: Uuid, key: &ChannelKey) -> Result<Option<u64>> {
        Ok(self.0.get()?.get(key.row(replica))?.map(|v| v.value()))
    }

    /// Records that item `id` of `replica` is the one stored for `key`. Errors: the store's.
    pub fn put(&mut self, replica: Uuid, key: &ChannelKey, id: u64) -> Result<()> {
        self.0.get()?.put(key.row(replica), id)
    }
}

/// The id of the item stored for `key` of `replica`, as of `txn`. Errors: the store's.
pub fn stored_id(txn: &impl Reads, replica: Uuid, key: &ChannelKey) -> Result<Option<u64>> {
    let found = txn.read_table(tables::REPLICACHANNELMSG_MESSAGE)?.get(key.row(replica))?.map(|v| v.value());
    Ok(found)
}

/// The most characters of a `messengerB_data` id.
const ID_MAX: usize = 100;

/// `messengerB_data` (spec §4.1): ids as strings; no extra fields.
#[derive(Deserialize, Serialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessengerBData {
    #[schemars(length(min = 1, max = ID_MAX))]
    pub channel_id: String,
    pub channel_name: String,
    #[schemars(length(min = 1, max = ID_MAX))]
    pub author_id: String,
    pub author_name: String,
    #[schemars(length(min = 1, max = ID_MAX))]
    pub message_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

/// Chat kinds of `messengerA_data.chat_type`.
#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline, description = "")]
pub enum ChatType {
    Private,
    Group,
    Supergroup,
    Channel,
}

/// `messengerA_data` (spec §4.1): numeric ids; no extra fields.
#[derive(Deserialize, Serialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessengerAData {
    pub chat_type: ChatType,
    pub chat_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_name: Option<String>,
    /// May be absent for channel messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Unique within the chat; a repeated (chat_id, message_id) stores nothing new; 0 or
    /// negative → 400.
    #[schemars(range(min = 1))]
    pub message_id: i64,
    /// Supergroups only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub message_thread_id: Option<i64>,
}

impl MessengerBData {
    /// Checks the required ids are not empty.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in
            [("channel_id", &self.channel_id), ("author_id", &self.author_id), ("message_id", &self.message_id)]
        {
            check_len(&format!("messengerB_data.{name}"), v, 1, ID_MAX)?;
        }
        Ok(())
    }

    /// The de-duplication key: `(channel_id, message_id)`.
    pub fn key(&self) -> ChannelKey {
        ChannelKey::of(Channel::MessengerB, &self.channel_id, &self.message_id)
    }

    /// Checked, keyed and serialized, on source `messengerB`.
    pub fn stamped(&self) -> Result<Stamped> {
        self.validate()?;
        stamp(self.key(), self)
    }
}

impl MessengerAData {
    /// `message_id` > 0 (messengerA numbers a chat's messages from 1); `message_thread_id` > 0
    /// and only in supergroups.
    pub fn validate(&self) -> Result<()> {
        if self.message_id <= 0 {
            return Err(Error::invalid("messengerA_data.message_id", "must be greater than 0"));
        }
        if let Some(t) = self.message_thread_id {
            if t <= 0 {
                return Err(Error::invalid("messengerA_data.message_thread_id", "must be greater than 0"));
            }
            if self.chat_type != ChatType::Supergroup {
                return Err(Error::invalid("messengerA_data.message_thread_id", "is only allowed in supergroups"));
            }
        }
        Ok(())
    }

    /// The de-duplication key: `(chat_id, message_id)`.
    pub fn key(&self) -> ChannelKey {
        ChannelKey::of(Channel::MessengerA, self.chat_id, self.message_id)
    }

    /// Checked, keyed and serialized, on source `messengerA`.
    pub fn stamped(&self) -> Result<Stamped> {
        self.validate()?;
        stamp(self.key(), self)
    }
}

/// The stamp of a message on the channel of `key`, with `data` stored as JSON text.
fn stamp(key: ChannelKey, data: &impl Serialize) -> Result<Stamped> {
    let data = serde_json::to_string(data).map_err(Error::internal)?;
    Ok(Stamped { source: key.channel.to_string(), data: Some(data), key: Some(key) })
}

/// The source of a message given `source` and perhaps `messengerB_data` (the body of
/// `POST …/chat/history` and of the completions): `source` defaults to `messengerB` when the
/// data is given, else `web`; the data is only allowed with `messengerB`. 400 otherwise.
pub fn of_source(source: Option<String>, data: Option<&MessengerBData>) -> Result<Stamped> {
    let default = if data.is_some() { Channel::MessengerB } else { Channel::Web };
    let source = source.unwrap_or_else(|| default.name().to_string());
    check_source(&source)?;
    match data {
        Some(_) if source != Channel::MessengerB.name() => {
            Err(Error::invalid("messengerB_data", "is only allowed with source messengerB"))
        }
        Some(d) => d.stamped(),
        None => Ok(Stamped { source, data: None, key: None }),
    }
}
