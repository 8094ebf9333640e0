//! Channel integrations of a replica (spec §4.2 `…/integrations/messengerA` and
//! `…/integrations/messengerB`, docs/decisions.md "Integrations"): the stored bot (token sealed at
//! rest), the state its runner reports, the messengerA `getUpdates` offset, and the
//! integration objects of replica reads.
//!
//! Both bots are [`BotRecord`]s, one table each, and share every operation here. The runner
//! (`channels::messenger_a` / `channels::messenger_b`) is the only writer of the state and the
//! offset; a write of the runner only applies to the connection it was started for
//! (`connected_at`), so a bot connected again or disconnected meanwhile is never overwritten by
//! a stale runner.

use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use super::channel::Bot;
use super::channel_data::ChannelKey;
use crate::error::{Code, Error, Result};
use crate::secrets::Secrets;
use crate::store::codec::Record;
use crate::store::kv::{ReadableTable, Shared, TableDef};
use crate::store::records::{Message, MessengerABot, MessengerBBot};
use crate::store::{self, k, now_ms, tables, Store};

/// A stored bot of one channel: what the shared operations of this module need of it.
pub trait BotRecord: Record + Clone + Send + Sync + 'static {
    /// The bot this is the record of (its channel name and table: [`Bot::name`], [`Bot::table`]).
    const BOT: Bot;
    /// The replica the bot serves.
    fn replica(&self) -> Uuid;
    /// The platform's id of the bot (one bot serves one replica).
    fn platform_id(&self) -> String;
    /// The connection the record was written for.
    fn connected_at(&self) -> i64;
    /// The sealed token.
    fn sealed_token(&self) -> &[u8];
    /// `is_active`, `last_error`, `last_error_at`, `updated_at`, to report the runner's state.
    fn state_mut(&mut self) -> (&mut bool, &mut Option<String>, &mut Option<i64>, &mut i64);
    /// The integration object of replica reads (see [`IntegrationView`]).
    fn view(&self) -> IntegrationView;
}

/// The accessors every bot record has alike (fields `replica`, `bot_id`, `connected_at`,
/// `sealed_token`, `is_active`, `last_error`, `last_error_at`, `updated_at`).
macro_rules! bot_record_fields {
    () => {
        fn replica(&self) -> Uuid {
            self.replica
        }
        fn platform_id(&self) -> String {
            self.bot_id.to_string()
        }
        fn connected_at(&self) -> i64 {
            self.connected_at
        }
        fn sealed_token(&self) -> &[u8] {
            &self.sealed_token
        }
        fn state_mut(&mut self) -> (&mut bool, &mut Option<String>, &mut Option<i64>, &mut i64) {
            (&mut self.is_active, &mut self.last_error, &mut self.last_error_at, &mut self.updated_at)
        }
    };
}

/// The `messengerA_integration` / `messengerB_integration` object of a replica read
/// (docs/decisions.md "Replicas"; `null` when no bot is connected): `{token: null,
/// service_name, is_active}` plus, as fields of our own, `last_error` and `last_error_at`
/// (RFC 3339) when the runner met an error, and messengerA's `mention`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Integration")]
pub struct IntegrationView {
    /// Never returned (the field stays, as null).
    #[schemars(with = "()")]
    pub token: Option<String>,
    /// The bot's username on the channel.
    pub service_name: String,
    /// The bot's connection works (messengerA: its last poll succeeded; messengerB: its gateway
    /// session is ready).
    pub is_active: bool,
    /// Our own: what went wrong last (revoked token, unreachable channel, …); absent after a
    /// successful poll (messengerA) or a ready gateway session (messengerB). The bot retries
    /// with back-off (1 s doubling up to 5 min, or the channel's retry_after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Our own: when `last_error` happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<chrono::DateTime<chrono::Utc>>")]
    pub last_error_at: Option<String>,
    /// Our own, messengerA only: the handle the bot answers to in groups (with its @).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mention: Option<String>,
}

/// The [`IntegrationView`] fields every bot record has alike (`username`, `is_active`,
/// `last_error`, `last_error_at`).
macro_rules! state_view {
    ($bot:expr) => {
        IntegrationView {
            token: None,
            service_name: $bot.username.clone(),
            is_active: $bot.is_active,
            last_error: $bot.last_error.clone(),
            last_error_at: $bot.last_error_at.map(super::rfc3339),
            mention: None,
        }
    };
}

impl BotRecord for MessengerABot {
    const BOT: Bot = Bot::MessengerA;
    bot_record_fields!();
    fn view(&self) -> IntegrationView {
        IntegrationView { mention: Some(self.mention.clone()), ..state_view!(self) }
    }
}

impl BotRecord for MessengerBBot {
    const BOT: Bot = Bot::MessengerB;
    bot_record_fields!();
    fn view(&self) -> IntegrationView {
        state_view!(self)
    }
}

/// `replica id → bot record` (`store::records`), one table per bot; this module alone opens
/// them.
const fn table_of(bot: Bot) -> TableDef<u128, &'static [u8]> {
    match bot {
        Bot::MessengerA => tables::REPLICA_MESSENGERA,
        Bot::MessengerB => tables::REPLICA_MESSENGERB,
    }
}

/// Every bot's records as a store snapshot shares them (a page of replica views).
pub struct BotViews(Vec<(Bot, Shared<u128, &'static [u8]>)>);

impl BotViews {
    /// The tables of `txn`, opened once per snapshot ([`store::Snapshot::table`]). Errors: the
    /// store's.
    pub fn of(txn: &store::Snapshot) -> Result<BotViews> {
        Ok(BotViews(Bot::ALL.into_iter().map(|b| Ok((b, txn.table(table_of(b))?))).collect::<Result<_>>()?))
    }

    /// The integration object of each bot of `replica`, `None` for a bot not connected.
    /// Errors: the store's.
    pub fn of_replica(&self, replica: Uuid) -> Result<Vec<(Bot, Option<IntegrationView>)>> {
        self.0.iter().map(|(b, t)| Ok((*b, view_in(*b, t, replica)?))).collect()
    }
}

/// The integration object of `bot` of `replica`, if one is connected, read in `table`
/// (`table_of(bot)`, opened by the caller): the one place a [`Bot`] names its record type.
fn view_in(
    bot: Bot,
    table: &impl ReadableTable<u128, &'static [u8]>,
    replica: Uuid,
) -> Result<Option<IntegrationView>> {
    Ok(match bot {
        Bot::MessengerA => bot_in::<MessengerABot>(table, replica)?.map(|b| b.view()),
        Bot::MessengerB => bot_in::<MessengerBBot>(table, replica)?.map(|b| b.view()),
    })
}

/// What the platform said about the bot being connected.
#[derive(Debug, Clone)]
pub struct BotIdentity {
    pub id: i64,
    pub username: String,
}

fn seal_context(channel: &str, replica: Uuid) -> Vec<u8> {
    [channel.as_bytes(), replica.as_bytes()].concat()
}

/// `token` sealed for the `channel` bot of `replica` (store it as the record's sealed token).
pub fn seal(secrets: &Secrets, channel: &str, replica: Uuid, token: &str) -> Result<Vec<u8>> {
    secrets.seal(token.as_bytes(), &seal_context(channel, replica))
}

/// The plain token of `bot` of `replica`.
pub fn token<R: BotRecord>(secrets: &Secrets, replica: Uuid, bot: &R) -> Result<String> {
    let plain = secrets.open(bot.sealed_token(), &seal_context(R::BOT.name(), replica))?;
    String::from_utf8(plain).map_err(Error::internal)
}

/// Stores the bot `make(previous)` for `replica`, replacing any earlier one. Errors: 409
/// `INTEGRATION_CONFLICT` when the same platform bot is connected to another replica (two
/// runners of one bot would take each other's messages).
pub async fn connect<R: BotRecord>(
    store: &Store,
    replica: Uuid,
    make: impl Fn(Option<R>) -> R + Send + 'static,
) -> Result<R> {
    store
        .write(move |txn| {
            let mut table = txn.open_table(table_of(R::BOT))?;
            let previous = store::get::<u128, R, _>(&table, k(replica))?;
            let bot = make(previous);
            for row in table.iter()? {
                let (key, v) = row?;
                let other: R = store::codec::decode(v.value())?;
                if key.value() != k(replica) && other.platform_id() == bot.platform_id() {
                    return Err(Error::new(
                        Code::IntegrationConflict,
                        format!(
                            "this {} bot is connected to another replica; disconnect it there first",
                            R::BOT.name()
                        ),
                    ));
                }
            }
            store::put(&mut table, k(replica), &bot)?;
            Ok(bot)
        })
        .await
}

/// Stores the messengerA bot of `replica` (replacing any earlier one), its token sealed; keeps
/// the update offset when the same bot is connected again. Errors as [`connect`].
pub async fn connect_messenger_a(
    store: &Store,
    secrets: &Secrets,
    org: Uuid,
    replica: Uuid,
    token: &str,
    mention: String,
    me: BotIdentity,
) -> Result<MessengerABot> {
    let sealed_token = seal(secrets, Bot::MessengerA.name(), replica, token)?;
    let now = now_ms();
    connect(store, replica, move |previous: Option<MessengerABot>| MessengerABot {
        replica,
        org,
        sealed_token: sealed_token.clone(),
        bot_id: me.id,
        username: me.username.clone(),
        mention: mention.clone(),
        is_active: false,
        last_error: None,
        last_error_at: None,
        offset: previous.filter(|p| p.bot_id == me.id).map_or(0, |p| p.offset),
        connected_at: now,
        updated_at: now,
    })
    .await
}

/// Removes the `R` bot of `replica`. Errors: 404 when none is connected.
pub async fn disconnect<R: BotRecord>(store: &Store, replica: Uuid) -> Result<()> {
    store
        .write(move |txn| {
            let removed = txn.open_table(table_of(R::BOT))?.remove(k(replica))?.is_some();
            if removed {
                Ok(())
            } else {
                Err(Error::not_found(&format!("{} integration", R::BOT.name())))
            }
        })
        .await
}

/// The `R` bot of `replica`, if one is connected.
pub async fn bot<R: BotRecord>(store: &Store, replica: Uuid) -> Result<Option<R>> {
    store.read(move |txn| store::get::<u128, R, _>(&txn.open_table(table_of(R::BOT))?, k(replica))).await
}

/// The `R` bot of `replica`, if any, read in `bots` (`table_of(R::BOT)`, opened by the caller).
pub fn bot_in<R: BotRecord>(bots: &impl ReadableTable<u128, &'static [u8]>, replica: Uuid) -> Result<Option<R>> {
    store::get::<u128, R, _>(bots, k(replica))
}

/// Key of the sealed value in `meta` that tells whether the key in use is the one the stored
/// tokens were sealed with.
const KEY_CHECK: &str = "secrets_key_check";

/// Whether `secrets` opens what the store's tokens were sealed with: a value sealed at the first
/// start (`meta` `secrets_key_check`) must open. `true` when there was none (it is written
/// now). Errors: the store's.
pub async fn secrets_key_matches(store: &Store, secrets: &Secrets) -> Result<bool> {
    let sealed = secrets.seal(b"replicad", KEY_CHECK.as_bytes())?;
    let stored = store
        .write(move |txn| {
            let mut meta = crate::store::meta::Meta::open(txn)?;
            if let Some(found) = meta.get(KEY_CHECK)? {
                return Ok(Some(found));
            }
            meta.put(KEY_CHECK, &sealed)?;
            Ok(None)
        })
        .await?;
    Ok(stored.is_none_or(|s| secrets.open(&s, KEY_CHECK.as_bytes()).is_ok()))
}

/// Every replica with a `bot` connected, with when it was connected (ms since the epoch): the
/// bots the channels run.
pub async fn connections(store: &Store, bot: Bot) -> Result<Vec<(Uuid, i64)>> {
    store
        .read(move |txn| {
            let table = txn.open_table(table_of(bot))?;
            let mut out = Vec::new();
            for row in table.iter()? {
                let (id, value) = row?;
                let connected_at = match bot {
                    Bot::MessengerA => store::codec::decode::<MessengerABot>(value.value())?.connected_at,
                    Bot::MessengerB => store::codec::decode::<MessengerBBot>(value.value())?.connected_at,
                };
                out.push((Uuid::from_u128(id.value()), connected_at));
            }
            Ok(out)
        })
        .await
}

/// The channels with a bot connected to `replica`, in a read transaction (the `integration`
/// filter of `GET /v1/replicas`).
pub fn connected_in(txn: &crate::store::kv::ReadTransaction, replica: Uuid) -> Result<Vec<&'static str>> {
    let mut out = Vec::new();
    for bot in Bot::ALL {
        if txn.open_table(table_of(bot))?.get(k(replica))?.is_some() {
            out.push(bot.name());
        }
    }
    Ok(out)
}

/// Removes every bot of `replica` (the replica is being deleted).
pub fn delete_all_in(txn: &crate::store::kv::WriteTransaction, replica: Uuid) -> Result<()> {
    for bot in Bot::ALL {
        txn.open_table(table_of(bot))?.remove(k(replica))?;
    }
    Ok(())
}

/// Applies `change` to the `R` bot of `replica` if it is still the connection made at
/// `connected_at`; answers whether it was.
pub async fn update<R: BotRecord>(
    store: &Store,
    replica: Uuid,
    connected_at: i64,
    change: impl Fn(&mut R) + Send + 'static,
) -> Result<bool> {
    store
        .write(move |txn| {
            let mut table = txn.open_table(table_of(R::BOT))?;
            let Some(mut bot) = store::get::<u128, R, _>(&table, k(replica))? else { return Ok(false) };
            if bot.connected_at() != connected_at {
                return Ok(false);
            }
            change(&mut bot);
            *bot.state_mut().3 = now_ms();
            store::put(&mut table, k(replica), &bot)?;
            Ok(true)
        })
        .await
}

/// Records the runner's state: active (`error` `None`, which clears the last error) or not,
/// with the error.
pub async fn report<R: BotRecord>(
    store: &Store,
    replica: Uuid,
    connected_at: i64,
    error: Option<String>,
) -> Result<bool> {
    let at = now_ms();
    update::<R>(store, replica, connected_at, move |bot| {
        let (is_active, last_error, last_error_at, _) = bot.state_mut();
        *is_active = error.is_none();
        *last_error = error.clone();
        *last_error_at = error.as_ref().map(|_| at);
    })
    .await
}

/// Records that every messengerA update below `offset` was handled.
pub async fn advance_messenger_a(store: &Store, replica: Uuid, connected_at: i64, offset: i64) -> Result<bool> {
    update::<MessengerABot>(store, replica, connected_at, move |bot| bot.offset = bot.offset.max(offset)).await
}

/// The stored reply to the channel message `channel_key` of `(replica, user)`, if one was
/// stored (a reply whose delivery was not confirmed before a restart is sent again, not made
/// again).
pub async fn stored_reply(
    store: &Store,
    replica: Uuid,
    user: Uuid,
    channel_key: &ChannelKey,
) -> Result<Option<Message>> {
    let key = channel_key.reply();
    store
        .read(move |txn| {
            let Some(id) = super::channel_data::stored_id(txn, replica, &key)? else {
                return Ok(None);
            };
            super::messages::open(txn)?.get((k(replica), k(user), id))
        })
        .await
}
