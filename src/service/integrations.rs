//! Channel integrations of a replica (spec §4.2 `…/integrations/messengerA` and
//! `…/integrations/messengerB`; one bot per channel and replica, its token never read back):
//! the stored bot of each bot
//! channel ([`Integration`], its token sealed at rest), the state its runner reports, its update
//! cursor, and the integration objects of replica reads.
//!
//! One table holds every channel's bots, `(channel name, replica) → Integration`
//! (`store::tables::CHANNELREPLICA_INTEGRATION`), and this module alone opens it: a new bot
//! channel needs no table and no code here. The runner (`channels::<name>`) is the only writer
//! of the state and the cursor; a write of the runner only applies to the connection it was
//! started for (`connected_at`), so a bot connected again or disconnected meanwhile is never
//! overwritten by a stale runner.

use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use super::channel::Bot;
use super::channel_data::ChannelKey;
use crate::error::{Code, Error, Result};
use crate::secrets::Secrets;
use crate::store::kv::Shared;
use crate::store::records::{Integration, Message, Replica};
use crate::store::{self, k, now_ms, tables, Store};

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

/// The integration object of `bot` (see [`IntegrationView`]).
pub fn view(bot: &Integration) -> IntegrationView {
    IntegrationView {
        token: None,
        service_name: bot.username.clone(),
        is_active: bot.is_active,
        last_error: bot.last_error.clone(),
        last_error_at: bot.last_error_at.map(super::rfc3339),
        mention: bot.mention.clone(),
    }
}

/// The key of the `bot` channel's bot of `replica`.
fn key(bot: Bot, replica: Uuid) -> (&'static str, u128) {
    (bot.name(), k(replica))
}

/// The keys of every replica's bot of the `bot` channel.
fn channel_keys(bot: Bot) -> std::ops::RangeInclusive<(&'static str, u128)> {
    key(bot, Uuid::nil())..=(bot.name(), u128::MAX)
}

/// Every bot's records as a store snapshot shares them (a page of replica views).
pub struct BotViews(Shared<(&'static str, u128), &'static [u8]>);

impl BotViews {
    /// The table of `txn`, opened once per snapshot ([`store::Snapshot::table`]). Errors: the
    /// store's.
    pub fn of(txn: &store::Snapshot) -> Result<BotViews> {
        Ok(BotViews(txn.table(tables::CHANNELREPLICA_INTEGRATION)?))
    }

    /// The integration object of each bot of `replica`, `None` for a bot not connected.
    /// Errors: the store's.
    pub fn of_replica(&self, replica: Uuid) -> Result<Vec<(Bot, Option<IntegrationView>)>> {
        let view_of = |b: Bot| store::get::<_, Integration, _>(&self.0, key(b, replica)).map(|i| i.as_ref().map(view));
        Bot::ALL.into_iter().map(|b| Ok((b, view_of(b)?))).collect()
    }
}

/// What the platform said about the bot being connected.
#[derive(Debug, Clone)]
pub struct BotIdentity {
    /// Its user id on the platform, as text.
    pub id: String,
    pub username: String,
}

fn seal_context(bot: Bot, replica: Uuid) -> Vec<u8> {
    [bot.name().as_bytes(), replica.as_bytes()].concat()
}

/// The plain token of `integration`, the `bot` channel's.
pub fn token(secrets: &Secrets, bot: Bot, integration: &Integration) -> Result<String> {
    let plain = secrets.open(&integration.sealed_token, &seal_context(bot, integration.replica))?;
    String::from_utf8(plain).map_err(Error::internal)
}

/// What a connect stores: the bot `me` with its `token` (sealed here) and `mention` (see
/// [`Integration::mention`]).
pub struct NewBot {
    pub token: String,
    pub me: BotIdentity,
    pub mention: Option<String>,
}

/// Stores `new` as `replica`'s bot of the `bot` channel, replacing any earlier one; keeps the
/// update cursor when the same platform bot is connected again. Errors: 409
/// `INTEGRATION_CONFLICT` when the same platform bot is connected to another replica (two
/// runners of one bot would take each other's messages); the secrets' and the store's.
pub async fn connect(
    store: &Store,
    secrets: &Secrets,
    bot: Bot,
    replica: &Replica,
    new: NewBot,
) -> Result<Integration> {
    let sealed_token = secrets.seal(new.token.as_bytes(), &seal_context(bot, replica.id))?;
    let now = now_ms();
    let (org, replica) = (replica.org, replica.id);
    let NewBot { me, mention, .. } = new;
    store
        .write(move |txn| {
            let mut table = txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?;
            let previous = store::get::<_, Integration, _>(&table, key(bot, replica))?;
            for row in table.range(channel_keys(bot))? {
                let (found, v) = row?;
                let other: Integration = store::codec::decode(v.value())?;
                if found.value().1 != k(replica) && other.platform_id == me.id {
                    return Err(Error::new(
                        Code::IntegrationConflict,
                        format!("this {} bot is connected to another replica; disconnect it there first", bot.name()),
                    ));
                }
            }
            let integration = Integration {
                replica,
                org,
                sealed_token: sealed_token.clone(),
                platform_id: me.id.clone(),
                username: me.username.clone(),
                mention: mention.clone(),
                is_active: false,
                last_error: None,
                last_error_at: None,
                cursor: previous.filter(|p| p.platform_id == me.id).map_or(0, |p| p.cursor),
                connected_at: now,
                updated_at: now,
            };
            store::put(&mut table, key(bot, replica), &integration)?;
            Ok(integration)
        })
        .await
}

/// Removes the `bot` channel's bot of `replica`. Errors: 404 when none is connected.
pub async fn disconnect(store: &Store, bot: Bot, replica: Uuid) -> Result<()> {
    store
        .write(move |txn| {
            let removed = txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?.remove(key(bot, replica))?.is_some();
            if removed {
                Ok(())
            } else {
                Err(Error::not_found(&format!("{} integration", bot.name())))
            }
        })
        .await
}

/// The `bot` channel's bot of `replica`, if one is connected.
pub async fn get(store: &Store, bot: Bot, replica: Uuid) -> Result<Option<Integration>> {
    store
        .read(move |txn| {
            store::get::<_, Integration, _>(&txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?, key(bot, replica))
        })
        .await
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
            let table = txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?;
            let mut out = Vec::new();
            for row in table.range(channel_keys(bot))? {
                let (found, value) = row?;
                let connected_at = store::codec::decode::<Integration>(value.value())?.connected_at;
                out.push((Uuid::from_u128(found.value().1), connected_at));
            }
            Ok(out)
        })
        .await
}

/// The channels with a bot connected to `replica`, in a read transaction (the `integration`
/// filter of `GET /v1/replicas`).
pub fn connected_in(txn: &crate::store::kv::ReadTransaction, replica: Uuid) -> Result<Vec<&'static str>> {
    let table = txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?;
    let mut out = Vec::new();
    for bot in Bot::ALL {
        if table.get(key(bot, replica))?.is_some() {
            out.push(bot.name());
        }
    }
    Ok(out)
}

/// Removes every bot of `replica` (the replica is being deleted).
pub fn delete_all_in(txn: &crate::store::kv::WriteTransaction, replica: Uuid) -> Result<()> {
    let mut table = txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?;
    for bot in Bot::ALL {
        table.delete(key(bot, replica))?;
    }
    Ok(())
}

/// Applies `change` to `integration`, the `bot` channel's, if it is still the stored connection
/// (the same `connected_at`); answers whether it was.
async fn update(
    store: &Store,
    bot: Bot,
    integration: &Integration,
    change: impl Fn(&mut Integration) + Send + 'static,
) -> Result<bool> {
    let (replica, connected_at) = (integration.replica, integration.connected_at);
    store
        .write(move |txn| {
            let mut table = txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?;
            let Some(mut found) = store::get::<_, Integration, _>(&table, key(bot, replica))? else {
                return Ok(false);
            };
            if found.connected_at != connected_at {
                return Ok(false);
            }
            change(&mut found);
            found.updated_at = now_ms();
            store::put(&mut table, key(bot, replica), &found)?;
            Ok(true)
        })
        .await
}

/// Records the runner's state of `integration`, the `bot` channel's: active (`error` `None`,
/// which clears the last error) or not, with the error.
pub async fn report(store: &Store, bot: Bot, integration: &Integration, error: Option<String>) -> Result<bool> {
    let at = now_ms();
    update(store, bot, integration, move |found| {
        found.is_active = error.is_none();
        found.last_error = error.clone();
        found.last_error_at = error.as_ref().map(|_| at);
    })
    .await
}

/// Records that every update of `integration`, the `bot` channel's, below `cursor` was
/// handled.
pub async fn advance(store: &Store, bot: Bot, integration: &Integration, cursor: i64) -> Result<bool> {
    update(store, bot, integration, move |found| found.cursor = found.cursor.max(cursor)).await
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
