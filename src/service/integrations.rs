//! Channel integrations of a replica (spec §4.2 `…/integrations/messengerA`, DECISIONS.md
//! "Integrations"): the stored bot (token sealed at rest), the state its runner reports, the
//! `getUpdates` offset, and the integration object of replica reads.
//!
//! The runner (`channels::messenger_a`) is the only writer of the state and the offset; a write
//! of the runner only applies to the connection it was started for (`connected_at`), so a bot
//! connected again or disconnected meanwhile is never overwritten by a stale runner.

use std::collections::HashMap;

use redb::ReadableTable;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::error::{Code, Error, Result};
use crate::secrets::Secrets;
use crate::store::records::{Message, MessengerABot};
use crate::store::{self, k, now_ms, tables, Store};

/// The channel name used as sealing context and in messages.
pub const MESSENGER_A: &str = "messengerA";

/// What `getMe` said about the bot being connected.
#[derive(Debug, Clone)]
pub struct BotIdentity {
    pub id: i64,
    pub username: String,
}

fn seal_context(replica: Uuid) -> Vec<u8> {
    [MESSENGER_A.as_bytes(), replica.as_bytes()].concat()
}

/// Stores the bot of `replica` (replacing any earlier one), its token sealed; keeps the update
/// offset when the same bot is connected again. Errors: 409 `INTEGRATION_CONFLICT` when the
/// bot is connected to another replica (two pollers of one bot would take each other's updates).
pub async fn connect_messenger_a(
    store: &Store,
    secrets: &Secrets,
    org: Uuid,
    replica: Uuid,
    token: &str,
    mention: String,
    me: BotIdentity,
) -> Result<MessengerABot> {
    let sealed = secrets.seal(token.as_bytes(), &seal_context(replica))?;
    let now = now_ms();
    store
        .write(move |txn| {
            let mut table = txn.open_table(tables::REPLICA_MESSENGERA)?;
            for row in table.iter()? {
                let (key, v) = row?;
                let other: MessengerABot = store::codec::decode(v.value())?;
                if key.value() != k(replica) && other.bot_id == me.id {
                    return Err(Error::new(
                        Code::IntegrationConflict,
                        "this messengerA bot is connected to another replica; disconnect it there first",
                    ));
                }
            }
            let previous = store::get::<u128, MessengerABot, _>(&table, k(replica))?;
            let offset = previous.filter(|p| p.bot_id == me.id).map_or(0, |p| p.offset);
            let bot = MessengerABot {
                replica,
                org,
                sealed_token: sealed.clone(),
                bot_id: me.id,
                username: me.username.clone(),
                mention: mention.clone(),
                is_active: false,
                last_error: None,
                last_error_at: None,
                offset,
                connected_at: now,
                updated_at: now,
            };
            store::put(&mut table, k(replica), &bot)?;
            Ok(bot)
        })
        .await
}

/// Removes the bot of `replica`. Errors: 404 when none is connected.
pub async fn disconnect_messenger_a(store: &Store, replica: Uuid) -> Result<()> {
    store
        .write(move |txn| {
            let removed = txn.open_table(tables::REPLICA_MESSENGERA)?.remove(k(replica))?.is_some();
            if removed {
                Ok(())
            } else {
                Err(Error::not_found("messengerA integration"))
            }
        })
        .await
}

/// The bot of `replica`, if one is connected.
pub async fn messenger_a(store: &Store, replica: Uuid) -> Result<Option<MessengerABot>> {
    store
        .read(move |txn| store::get::<u128, MessengerABot, _>(&txn.open_table(tables::REPLICA_MESSENGERA)?, k(replica)))
        .await
}

/// The bots of `replicas` that are connected (for lists of replicas).
pub async fn messenger_a_of(store: &Store, replicas: Vec<Uuid>) -> Result<HashMap<Uuid, MessengerABot>> {
    store
        .read(move |txn| {
            let table = txn.open_table(tables::REPLICA_MESSENGERA)?;
            let mut out = HashMap::new();
            for id in replicas {
                if let Some(bot) = store::get::<u128, MessengerABot, _>(&table, k(id))? {
                    out.insert(id, bot);
                }
            }
            Ok(out)
        })
        .await
}

/// Every replica with a messengerA bot (started at server start).
pub async fn all_messenger_a(store: &Store) -> Result<Vec<Uuid>> {
    store
        .read(|txn| {
            let table = txn.open_table(tables::REPLICA_MESSENGERA)?;
            let mut ids = Vec::new();
            for row in table.iter()? {
                ids.push(Uuid::from_u128(row?.0.value()));
            }
            Ok(ids)
        })
        .await
}

/// Whether `replica` has a messengerA bot, in a read transaction (the `integration` filter).
pub fn has_messenger_a_in(txn: &redb::ReadTransaction, replica: Uuid) -> Result<bool> {
    Ok(txn.open_table(tables::REPLICA_MESSENGERA)?.get(k(replica))?.is_some())
}

/// The plain token of `bot`.
pub fn messenger_a_token(secrets: &Secrets, bot: &MessengerABot) -> Result<String> {
    let plain = secrets.open(&bot.sealed_token, &seal_context(bot.replica))?;
    String::from_utf8(plain).map_err(Error::internal)
}

/// Applies `change` to the bot of `replica` if it is still the connection made at
/// `connected_at`; answers whether it was.
async fn update_bot(
    store: &Store,
    replica: Uuid,
    connected_at: i64,
    change: impl Fn(&mut MessengerABot) + Send + 'static,
) -> Result<bool> {
    store
        .write(move |txn| {
            let mut table = txn.open_table(tables::REPLICA_MESSENGERA)?;
            let Some(mut bot) = store::get::<u128, MessengerABot, _>(&table, k(replica))? else { return Ok(false) };
            if bot.connected_at != connected_at {
                return Ok(false);
            }
            change(&mut bot);
            bot.updated_at = now_ms();
            store::put(&mut table, k(replica), &bot)?;
            Ok(true)
        })
        .await
}

/// Records the runner's state: active (`error` `None`, which clears the last error) or not,
/// with the error.
pub async fn report_messenger_a(
    store: &Store,
    replica: Uuid,
    connected_at: i64,
    error: Option<String>,
) -> Result<bool> {
    let at = now_ms();
    update_bot(store, replica, connected_at, move |bot| {
        bot.is_active = error.is_none();
        if let Some(e) = &error {
            bot.last_error = Some(e.clone());
            bot.last_error_at = Some(at);
        } else {
            bot.last_error = None;
            bot.last_error_at = None;
        }
    })
    .await
}

/// Records that every update below `offset` was handled.
pub async fn advance_messenger_a(store: &Store, replica: Uuid, connected_at: i64, offset: i64) -> Result<bool> {
    update_bot(store, replica, connected_at, move |bot| bot.offset = bot.offset.max(offset)).await
}

/// The stored reply to the channel message `channel_key` of `(replica, user)`, if one was
/// stored (a reply whose delivery was not confirmed before a restart is sent again, not made
/// again).
pub async fn stored_reply(store: &Store, replica: Uuid, user: Uuid, channel_key: &str) -> Result<Option<Message>> {
    let key = format!("reply:{channel_key}");
    store
        .read(move |txn| {
            let Some(id) =
                txn.open_table(tables::CHANNELMSG_MESSAGE)?.get((k(replica), key.as_str()))?.map(|v| v.value())
            else {
                return Ok(None);
            };
            store::get::<(u128, u128, u64), Message, _>(
                &txn.open_table(tables::REPLICAUSERMSG_MESSAGE)?,
                (k(replica), k(user), id),
            )
        })
        .await
}

/// The `messengerA_integration` object of a replica read (DECISIONS.md "Replicas"): `null`
/// when no bot is connected, else `{token: null, service_name, is_active}` plus, as fields of
/// our own, `mention`, `last_error` and `last_error_at` (RFC 3339) when the runner met an error.
pub fn integration_view(bot: Option<&MessengerABot>) -> Value {
    let Some(bot) = bot else { return Value::Null };
    let mut v = json!({
        "token": null,
        "service_name": bot.username,
        "is_active": bot.is_active,
        "mention": bot.mention,
    });
    if let Some(e) = &bot.last_error {
        v["last_error"] = json!(e);
    }
    if let Some(at) = bot.last_error_at {
        v["last_error_at"] = json!(super::rfc3339(at));
    }
    v
}
