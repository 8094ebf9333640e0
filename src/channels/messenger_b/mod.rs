//! The messengerB bot of a replica (spec §4.2 `…/integrations/messengerB`, docs/decisions.md
//! "Integrations"): one gateway session (twilight-gateway, WebSocket, `--messenger-b-gateway`)
//! receives the messages, the REST API (twilight-http, `--messenger-b-api-base`) sends the
//! replies.
//!
//! - Direct messages are answered; server (guild) messages are answered when they mention the
//!   bot (the mention is taken out of the question). Other messages, messages of bots and
//!   system messages are skipped. The intents asked are `GUILDS`, `GUILD_MESSAGES` and
//!   `DIRECT_MESSAGES` (not the privileged `MESSAGE_CONTENT`: the platform gives the content
//!   of direct messages and of messages mentioning the bot without it).
//! - While the reply is produced the channel shows "typing" (renewed every 8 s). Replies longer
//!   than the platform's 2000 characters are sent as several messages; in servers the first
//!   one replies to the question. Replies never ping anyone (no allowed mentions).
//! - The question and the reply are stored as history (`source: messengerB`, full
//!   `messengerB_data`) by the chat service; the sender is the linked-account user
//!   `messengerB:<author id>` of the replica's organization. `channel_name` is the server
//!   channel's name (from the gateway's guild data or REST "get channel"), for a direct message
//!   the author's name; `server_name` comes from the gateway's guild data when it was seen.
//! - A message whose reply is already stored (an event replayed by the gateway) is not answered
//!   again.
//! - The gateway session heartbeats, follows RECONNECT and resumes (twilight-gateway). A session
//!   the gateway ends for good (revoked token: close code 4004), a refused token or an
//!   unreachable API is reported in the replica's `messengerB_integration` (`is_active: false`,
//!   `last_error`) and retried with back-off; READY or RESUMED marks it active again.

pub mod connect;
pub mod rest;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rest::RestError;
use tokio::task::JoinSet;
use twilight_gateway::{Event, EventTypeFlags, Intents, Shard, ShardId, StreamExt as _};
use twilight_http::Client;
use twilight_model::channel::message::{AllowedMentions, Message, MessageType};
use twilight_model::gateway::payload::incoming::GuildCreate;
use twilight_model::id::marker::{ChannelMarker, GuildMarker, UserMarker};
use twilight_model::id::Id;
use uuid::Uuid;

use super::Backoff;
use crate::app::App;
use crate::service::channel_data::MessengerBData;
use crate::service::chat::Ask;
use crate::service::integrations as store_bot;
use crate::store::records::Integration;

/// The channel name (runner key, history `source`, linked-account type).
pub const CHANNEL: &str = BOT.name();
/// This channel's bot.
pub const BOT: crate::service::channel::Bot = crate::service::channel::Bot::MessengerB;
/// Longest message the platform accepts, in characters (counted here in UTF-16 units, which
/// is never fewer).
pub const MESSAGE_LIMIT: usize = 2000;
/// How many times a message refused with 429 is tried again.
const SEND_ATTEMPTS: u32 = 5;
/// The gateway events the bot acts on.
const EVENTS: EventTypeFlags = EventTypeFlags::READY
    .union(EventTypeFlags::RESUMED)
    .union(EventTypeFlags::MESSAGE_CREATE)
    .union(EventTypeFlags::GUILD_CREATE);

fn intents() -> Intents {
    Intents::GUILDS | Intents::GUILD_MESSAGES | Intents::DIRECT_MESSAGES
}

/// Runs the bot of `replica` until it is disconnected (its record is gone).
pub async fn run(app: Arc<App>, replica: Uuid) {
    let mut backoff = Backoff::default();
    loop {
        let Some(bot) = super::stored_bot(&app, BOT, replica, &mut backoff).await else { return };
        let pause = match session(&app, &bot, &mut backoff).await {
            Err(RestError::RetryAfter(d)) => d,
            Err(e) => {
                tracing::warn!(%replica, error = %e, "messengerB bot failed; retrying");
                super::report(&app, BOT, &bot, Some(e.to_string())).await;
                backoff.next_delay()
            }
            Ok(message) => {
                tracing::warn!(%replica, error = %message, "messengerB gateway session ended; retrying");
                super::report(&app, BOT, &bot, Some(message)).await;
                backoff.next_delay()
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// What a session's message handlers share.
struct Bot {
    app: Arc<App>,
    rest: Arc<Client>,
    record: Integration,
    /// Names seen in guild data or asked of the API.
    channels: Mutex<HashMap<Id<ChannelMarker>, String>>,
    guilds: Mutex<HashMap<Id<GuildMarker>, String>>,
}

/// One gateway session, until the gateway ends it for good: answers why (`Ok`), or the REST
/// error that kept it from starting.
async fn session(app: &Arc<App>, record: &Integration, backoff: &mut Backoff) -> Result<String, RestError> {
    let token = store_bot::token(&app.secrets, BOT, record).map_err(|e| RestError::Network(super::error_text(&e)))?;
    let rest = Arc::new(rest::client(&app.config, &token));
    rest::current_user(&rest).await?;
    let gateway = app.config.messenger_b_gateway.trim_end_matches('/').to_string();
    let config = twilight_gateway::ConfigBuilder::new(token, intents()).proxy_url(gateway).build();
    let mut shard = Shard::with_config(ShardId::ONE, config);
    let bot = Arc::new(Bot {
        app: app.clone(),
        rest,
        record: record.clone(),
        channels: Mutex::default(),
        guilds: Mutex::default(),
    });
    let mut handlers = JoinSet::new();
    let mut closed = None;
    while let Some(item) = shard.next_event(EVENTS).await {
        match item {
            Ok(Event::Ready(_) | Event::Resumed) => {
                backoff.reset();
                super::report(app, BOT, record, None).await;
            }
            Ok(Event::MessageCreate(m)) => {
                handlers.spawn(handle(bot.clone(), m.0));
            }
            Ok(Event::GuildCreate(g)) => bot.remember(*g),
            Ok(Event::GatewayClose(frame)) => closed = frame.map(|f| (f.code, f.reason.to_string())),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), twilight_gateway::error::ReceiveMessageErrorType::Reconnect) => {
                super::report(app, BOT, record, Some(format!("messengerB gateway unreachable: {e}"))).await;
            }
            Err(e) => tracing::debug!(replica = %record.replica, error = %e, "messengerB: an event was skipped"),
        }
        while handlers.try_join_next().is_some() {}
    }
    Ok(match closed {
        Some((4004, reason)) => format!("the messengerB token was rejected (gateway close 4004: {reason})"),
        Some((code, reason)) => format!("the messengerB gateway ended the session (close {code}: {reason})"),
        None => "the messengerB gateway ended the session".to_string(),
    })
}

impl Bot {
    fn remember(&self, guild: GuildCreate) {
        if let GuildCreate::Available(g) = guild {
            let mut channels = lock(&self.channels);
            for c in g.channels {
                if let Some(name) = c.name {
                    channels.insert(c.id, name);
                }
            }
            lock(&self.guilds).insert(g.id, g.name);
        }
    }

    /// The name of server channel `id`: remembered, else asked of the API, else the id.
    async fn channel_name(&self, id: Id<ChannelMarker>) -> String {
        if let Some(name) = lock(&self.channels).get(&id) {
            return name.clone();
        }
        let asked = match self.rest.channel(id).await {
            Ok(r) => r.model().await.ok().and_then(|c| c.name),
            Err(e) => {
                tracing::debug!(channel = %id, error = %e, "messengerB: get channel failed");
                None
            }
        };
        match asked {
            Some(name) => lock(&self.channels).entry(id).or_insert(name).clone(),
            None => id.to_string(),
        }
    }

    /// `messengerB_data` of message `m`.
    async fn data(&self, m: &Message) -> MessengerBData {
        let author_name = m.author.global_name.clone().unwrap_or_else(|| m.author.name.clone());
        let (channel_name, server_name) = match m.guild_id {
            Some(g) => (self.channel_name(m.channel_id).await, lock(&self.guilds).get(&g).cloned()),
            None => (author_name.clone(), None),
        };
        MessengerBData {
            channel_id: m.channel_id.to_string(),
            channel_name,
            author_id: m.author.id.to_string(),
            author_name,
            message_id: m.id.to_string(),
            created_at: Some(m.timestamp.iso_8601().to_string()),
            server_id: m.guild_id.map(|g| g.to_string()),
            server_name,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The question in `m` when it is addressed to the bot `me` (a direct message, or a server
/// message mentioning it), without the mention; `None` otherwise.
fn question(me: Id<UserMarker>, m: &Message) -> Option<String> {
    if m.author.bot || !matches!(m.kind, MessageType::Regular | MessageType::Reply) {
        return None;
    }
    if m.guild_id.is_some() && !m.mentions.iter().any(|u| u.id == me) {
        return None;
    }
    let text = m.content.replace(&format!("<@{me}>"), " ").replace(&format!("<@!{me}>"), " ");
    let text = text.trim().trim_start_matches([',', ':']).trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The bot's user id, from its record.
fn bot_id(record: &Integration) -> Option<Id<UserMarker>> {
    record.platform_id.parse().ok().and_then(Id::new_checked)
}

/// Answers `m` when it is addressed to the bot; failures are logged (the gateway goes on).
async fn handle(bot: Arc<Bot>, m: Message) {
    if let Err(e) = answer(&bot, &m).await {
        tracing::warn!(replica = %bot.record.replica, message = %m.id, error = %e, "messengerB: a message was not answered");
    }
}

/// Why a message addressed to the bot was not answered (logged).
#[derive(Debug, thiserror::Error)]
enum AnswerError {
    /// The stored bot's platform id is not a user id.
    #[error("bad bot id")]
    BadBotId,
    /// The message's channel data, or a service (replica, user, stored reply), refused.
    #[error("{}", super::error_text(.0))]
    Service(#[from] crate::error::Error),
    /// The reply could not be sent.
    #[error("{0}")]
    Deliver(RestError),
}

async fn answer(bot: &Bot, m: &Message) -> Result<(), AnswerError> {
    let Some(question) = question(bot_id(&bot.record).ok_or(AnswerError::BadBotId)?, m) else { return Ok(()) };
    let app = &bot.app;
    let data = bot.data(m).await;
    let channel = data.stamped()?;
    let replica = crate::service::replicas::get(&app.store, bot.record.org, bot.record.replica, None).await?;
    let user = crate::service::users::linked(&app.store, replica.org, CHANNEL, &data.author_id).await?;
    if store_bot::stored_reply(&app.store, replica.id, user.id, &data.key()).await?.is_some() {
        return Ok(()); // a replayed event: answered already
    }
    let ask = Ask { content: question, ..Ask::on(channel) };
    let (rest, channel) = (bot.rest.clone(), m.channel_id);
    let typing = move || {
        let rest = rest.clone();
        async move {
            if let Err(e) = rest.create_typing_trigger(channel).await {
                tracing::debug!(error = %e, "messengerB: typing failed");
            }
        }
    };
    let reply = super::answer(app, &replica, user.id, ask, typing, Duration::from_secs(8)).await;
    deliver(&bot.rest, m, &reply).await.map_err(AnswerError::Deliver)
}

/// Sends `reply` in as many messages as the limit needs, the first one as a reply to the
/// question in servers. A 429 waits `retry_after` and tries again (a few times).
async fn deliver(rest: &Client, m: &Message, reply: &str) -> Result<(), RestError> {
    let no_pings = AllowedMentions::default();
    for (i, part) in super::messenger_a::text::split(reply, MESSAGE_LIMIT).iter().enumerate() {
        let mut attempt = 0;
        loop {
            let mut request = rest.create_message(m.channel_id).content(part).allowed_mentions(Some(&no_pings));
            if i == 0 && m.guild_id.is_some() {
                request = request.reply(m.id).fail_if_not_exists(false);
            }
            match request.await.map_err(RestError::from) {
                Ok(_) => break,
                Err(RestError::RetryAfter(d)) if attempt + 1 < SEND_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(d.min(Duration::from_secs(60))).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
