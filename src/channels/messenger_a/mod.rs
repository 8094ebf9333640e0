//! The messengerA bot of a replica (spec §4.2 `…/integrations/messengerA`, docs/decisions.md
//! "Integrations"): long polling with `getUpdates`, replies with `sendMessage`.
//!
//! - Private chats: every text message is answered. Groups and supergroups: messages that
//!   mention the bot's `mention` handle or reply to the bot are answered (the mention is taken
//!   out of the question); other text messages are stored as history only. Channel posts and
//!   messages of bots are skipped.
//! - While the reply is produced the chat shows "typing" (`sendChatAction`, renewed every 4 s).
//!   Replies longer than the platform's limit are sent as several messages.
//! - The question and the reply are stored as history (`source: messengerA`, full
//!   `messengerA_data`) by the chat service, as `…/chat/completions/messengerA` does; the sender
//!   is the linked-account user `messengerA:<user id>` of the replica's organization.
//! - The update offset is stored after each update is handled and its reply delivered, so a
//!   restart neither loses an update nor answers one twice: an update whose reply was stored but
//!   not confirmed delivered is delivered from the store, not generated again.
//! - Errors (unreachable API, revoked token, 429) are reported in the replica's
//!   `messengerA_integration` (`is_active: false`, `last_error`) and retried with back-off
//!   (`retry_after` when the API gives one).

pub mod api;
pub mod connect;
pub mod text;

use std::sync::Arc;
use std::time::Duration;

use api::{ApiError, Client, Update};
use uuid::Uuid;

use super::Backoff;
use crate::app::App;
use crate::error::Error;
use crate::service::channel::Bot;
use crate::service::channel_data::{ChatType, MessengerAData};
use crate::service::chat::Ask;
use crate::service::history::{self, NewItem};
use crate::service::integrations as store_bot;
use crate::store::records::{Integration, Replica};

/// The channel name (runner key, history `source`, linked-account type).
pub const CHANNEL: &str = BOT.name();
/// This channel's bot.
pub const BOT: Bot = Bot::MessengerA;
/// The public Bot API.
pub const DEFAULT_API_BASE: &str = crate::config::DEFAULT_MESSENGER_A_API_BASE;
/// How many times a `sendMessage` refused with 429 is tried again.
const SEND_ATTEMPTS: u32 = 5;

/// Runs the bot of `replica` until it is disconnected (its record is gone).
pub async fn run(app: Arc<App>, replica: Uuid) {
    let mut backoff = Backoff::default();
    loop {
        let Some(bot) = super::stored_bot(&app, BOT, replica, &mut backoff).await else { return };
        let pause = match poll(&app, &bot).await {
            Ok(()) => {
                backoff.reset();
                None
            }
            Err(Failure::RetryAfter(s)) => Some(Duration::from_secs(s.min(3600))),
            Err(Failure::Other(message)) => {
                tracing::warn!(%replica, error = %message, "messengerA bot failed; retrying");
                super::report(&app, BOT, &bot, Some(message)).await;
                Some(backoff.next_delay())
            }
        };
        if let Some(p) = pause {
            tokio::time::sleep(p).await;
        }
    }
}

/// Why a round of polling stopped.
enum Failure {
    RetryAfter(u64),
    Other(String),
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        match e {
            ApiError::RetryAfter(s) => Failure::RetryAfter(s),
            e => Failure::Other(e.to_string()),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Other(super::error_text(&e))
    }
}

/// One `getUpdates` and the handling of what it returned.
async fn poll(app: &Arc<App>, bot: &Integration) -> Result<(), Failure> {
    let token = store_bot::token(&app.secrets, BOT, bot)?;
    let client = Client::new(app.platform_http.clone(), &app.config.messenger_a_api_base, &token);
    let updates = client.get_updates(bot.cursor, app.config.messenger_a_poll_timeout).await?;
    if !bot.is_active || bot.last_error.is_some() {
        super::report(app, BOT, bot, None).await;
    }
    if updates.is_empty() {
        return Ok(());
    }
    let replica = crate::service::replicas::get(&app.store, bot.org, bot.replica, None).await?;
    for update in updates {
        let id = update.update_id;
        if id < bot.cursor {
            continue;
        }
        handle(app, &client, bot, &replica, update).await?;
        if !store_bot::advance(&app.store, BOT, bot, id + 1).await? {
            return Ok(()); // disconnected or connected again meanwhile
        }
    }
    Ok(())
}

/// A text message, who sent it, and whether it is addressed to the bot.
struct Incoming {
    data: MessengerAData,
    sender: i64,
    text: String,
    addressed: bool,
}

fn incoming(bot: &Integration, update: Update) -> Option<Incoming> {
    let m = update.message?;
    let text = m.text.or(m.caption).filter(|t| !t.trim().is_empty())?;
    let from = m.from.as_ref();
    if from.is_some_and(|f| f.is_bot) {
        return None;
    }
    let chat_type = match m.chat.kind.as_str() {
        "private" => ChatType::Private,
        "group" => ChatType::Group,
        "supergroup" => ChatType::Supergroup,
        _ => return None,
    };
    let replied_to_bot =
        m.reply_to_message.as_ref().and_then(|r| r.from.as_ref()).is_some_and(|f| f.id.to_string() == bot.platform_id);
    let addressed = chat_type == ChatType::Private || replied_to_bot || text::mentions(&text, mention(bot));
    let chat_name = m.chat.title.clone().or_else(|| {
        let names: Vec<&str> =
            [&m.chat.names.first_name, &m.chat.names.last_name].into_iter().flatten().map(String::as_str).collect();
        (!names.is_empty()).then(|| names.join(" "))
    });
    let thread = m.message_thread_id.filter(|t| *t > 0 && m.is_topic_message && chat_type == ChatType::Supergroup);
    let data = MessengerAData {
        chat_type,
        chat_id: m.chat.id,
        chat_name,
        user_id: from.map(|f| f.id),
        username: from.and_then(|f| f.names.username.clone()),
        message_id: m.message_id,
        message_thread_id: thread,
    };
    Some(Incoming { sender: from.map_or(m.chat.id, |f| f.id), data, text, addressed })
}

/// The handle the bot answers to in groups (every messengerA bot is connected with one).
fn mention(bot: &Integration) -> &str {
    bot.mention.as_deref().unwrap_or_default()
}

/// Stores and, when addressed to the bot, answers one update.
async fn handle(
    app: &Arc<App>,
    client: &Client,
    bot: &Integration,
    replica: &Replica,
    update: Update,
) -> Result<(), Failure> {
    let Some(msg) = incoming(bot, update) else { return Ok(()) };
    let channel = msg.data.stamped()?;
    let user = crate::service::users::linked(&app.store, replica.org, CHANNEL, &msg.sender.to_string()).await?;
    if !msg.addressed {
        let item = NewItem::from_user(msg.text, channel);
        history::append(&app.store, replica.id, user.id, replica.private, vec![item]).await?;
        return Ok(());
    }
    let reply = match store_bot::stored_reply(&app.store, replica.id, user.id, &msg.data.key()).await? {
        Some(stored) => stored.content,
        None => {
            let ask = Ask { content: text::strip_mention(&msg.text, mention(bot)), ..Ask::on(channel) };
            generate(app, client, replica, user.id, &msg.data, ask).await
        }
    };
    deliver(client, &msg.data, &reply).await
}

/// The reply to `ask`, with "typing" shown meanwhile (`sendChatAction`, renewed every 4 s).
async fn generate(
    app: &App,
    client: &Client,
    replica: &Replica,
    user: Uuid,
    data: &MessengerAData,
    ask: Ask,
) -> String {
    let (client, chat, thread) = (client.clone(), data.chat_id, data.message_thread_id);
    let typing = move || {
        let client = client.clone();
        async move {
            if let Err(e) = client.send_typing(chat, thread).await {
                tracing::debug!(error = %e, "messengerA: sendChatAction failed");
            }
        }
    };
    super::answer(app, replica, user, ask, typing, Duration::from_secs(4)).await
}

/// Sends `reply` in as many messages as the limit needs, the first one as a reply to the
/// question in groups. A 429 waits `retry_after` and tries again; a chat the bot may not write
/// to (400/403) is given up (logged); a revoked token or an unreachable API is a failure (the
/// update is handled again later).
async fn deliver(client: &Client, data: &MessengerAData, reply: &str) -> Result<(), Failure> {
    let reply_to = (data.chat_type != ChatType::Private).then_some(data.message_id);
    for (i, part) in text::split(reply, text::MESSAGE_LIMIT).iter().enumerate() {
        let reply_to = if i == 0 { reply_to } else { None };
        let mut attempt = 0;
        loop {
            match client.send_message(data.chat_id, part, reply_to, data.message_thread_id).await {
                Ok(()) => break,
                Err(ApiError::RetryAfter(s)) if attempt + 1 < SEND_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(s.min(60))).await;
                }
                Err(ApiError::Api { code, description }) => {
                    tracing::warn!(chat = data.chat_id, code, %description, "messengerA: reply not delivered");
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}
