//! Channel integrations (spec §4.2, docs/decisions.md "Integrations"):
//! `POST` and `DELETE /v1/replicas/{replicaUUID}/integrations/messengerA` and
//! `…/integrations/messengerB`.
//!
//! The state of a connected bot shows in the replica's `messengerA_integration` /
//! `messengerB_integration` object ([`crate::service::integrations::integration_view`]); the
//! token is never returned.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::path_replica;
use super::{Operation, Serve};
use crate::app::App;
use crate::channels::messenger_a::api::{ApiError, Client};
use crate::channels::messenger_b::rest::{self as b_rest, RestError};
use crate::error::{Code, Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::{op, Op};
use crate::service::channel::Bot;
use crate::service::integrations::{self, BotIdentity};
use crate::store::records::{MessengerABot, MessengerBBot};

/// Body of `POST …/integrations/messengerA`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "MessengerAConnect")]
pub struct MessengerABody {
    /// The bot token given by the channel. Stored encrypted (--secrets-key-file); never
    /// returned by any read.
    #[serde(rename = "messengerA_token")]
    #[schemars(regex(pattern = r"^[0-9]+:[A-Za-z0-9_-]+$"), length(max = 200))]
    pub token: String,
    /// The handle the bot answers to in groups; default: the bot's username.
    #[schemars(regex(pattern = r"^@?[A-Za-z0-9_]{1,64}$"))]
    pub mention: Option<String>,
}

/// `{id}` of a connected bot: its user id on the channel.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "IntegrationConnected")]
struct Connected {
    /// The bot's user id on the channel.
    id: String,
}

fn check_token(token: &str) -> Result<()> {
    let ok = token.len() <= 200
        && token.split_once(':').is_some_and(|(id, secret)| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_digit())
                && !secret.is_empty()
                && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("messengerA_token", "is not a bot token (<bot id>:<secret>)"))
    }
}

/// `@name` from `@name` or `name`: letters, digits and `_`, 1–64 characters.
fn normalize_mention(mention: &str) -> Result<String> {
    let name = mention.trim().trim_start_matches('@');
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Error::invalid("mention", "must be a handle: letters, digits and _, 1 to 64 characters"));
    }
    Ok(format!("@{name}"))
}

/// 400 `INVALID_CHANNEL_TOKEN`: `channel` refused the token (`detail` says how).
fn token_refused(channel: &str, detail: &str) -> Error {
    Error::new(Code::InvalidChannelToken, format!("{channel} refused the token ({detail})"))
}

/// 502 `UPSTREAM_ERROR`: `channel` could not be asked about the token (`cause` is logged only).
fn platform_unreachable(channel: &str, cause: String) -> Error {
    Error::new(Code::UpstreamError, format!("{channel} could not be reached to check the token")).with_cause_text(cause)
}

/// Asks `getMe` who the bot of `token` is. 400 `INVALID_CHANNEL_TOKEN` when the platform
/// refuses the token, 502 `UPSTREAM_ERROR` when it cannot be asked.
async fn verify(app: &App, token: &str) -> Result<BotIdentity> {
    let client = Client::new(app.platform_http.clone(), &app.config.messenger_a_api_base, token);
    match client.get_me().await {
        Ok(me) => Ok(BotIdentity { id: me.id, username: me.username.unwrap_or(me.first_name) }),
        Err(ApiError::Unauthorized(d)) => Err(token_refused(
            Bot::MessengerA.name(),
            &format!("getMe: {}", if d.is_empty() { "Unauthorized" } else { &d }),
        )),
        Err(e) => Err(platform_unreachable(Bot::MessengerA.name(), e.to_string())),
    }
}

/// # `POST /v1/replicas/{replicaUUID}/integrations/messengerA`
/// Body `{messengerA_token, mention?}`. Checks the token with `getMe`, stores it sealed,
/// replaces any earlier bot of the replica and starts the bot; 200 `{success, id}` with `id`
/// the bot's messengerA user id (a string). Errors: 400 (malformed body,
/// `INVALID_CHANNEL_TOKEN`), 404, 409 `INTEGRATION_CONFLICT` (the bot serves another replica),
/// 502 (the platform could not be asked).
pub async fn connect_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: MessengerABody = req.json()?;
    let token = body.token.trim();
    check_token(token)?;
    let mention = body.mention.as_deref().map(normalize_mention).transpose()?;
    let me = verify(&app, token).await?;
    let mention = match mention {
        Some(m) => m,
        None => normalize_mention(&me.username).unwrap_or_else(|_| format!("@{}", me.id)),
    };
    let secrets = &app.secrets;
    let bot =
        integrations::connect_messenger_a(&app.store, secrets, replica.org, replica.id, token, mention, me).await?;
    app.bots.start(Bot::MessengerA, replica.id);
    Ok(Reply::ok(&Connected { id: bot.bot_id.to_string() }))
}

/// # `DELETE /v1/replicas/{replicaUUID}/integrations/messengerA`
/// Stops the bot and forgets its token; 200 `{success}`. Errors: 404 (no such replica, or no
/// bot connected).
pub async fn disconnect_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    integrations::disconnect::<MessengerABot>(&app.store, replica.id).await?;
    app.bots.stop(replica.id, Bot::MessengerA);
    Ok(Reply::done())
}

/// Body of `POST …/integrations/messengerB`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MessengerBConnect")]
pub struct MessengerBBody {
    /// The bot token given by the channel (50 to 80 characters). Stored encrypted
    /// (--secrets-key-file); never returned by any read.
    #[serde(rename = "messengerBToken")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9._-]{50,80}$"))]
    pub token: String,
}

fn check_b_token(token: &str) -> Result<()> {
    let ok = (50..=80).contains(&token.len())
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("messengerBToken", "is not a bot token (50 to 80 letters, digits, '.', '_' or '-')"))
    }
}

/// Asks the REST API who the bot of `token` is. 400 `INVALID_CHANNEL_TOKEN` when the platform
/// refuses the token, 502 `UPSTREAM_ERROR` when it cannot be asked.
async fn verify_b(app: &App, token: &str) -> Result<(u64, String)> {
    match b_rest::current_user(&b_rest::client(&app.config, token)).await {
        Ok(me) => Ok((me.id.get(), me.name)),
        Err(RestError::Unauthorized) => {
            Err(token_refused(Bot::MessengerB.name(), "get current user: 401 Unauthorized"))
        }
        Err(e) => Err(platform_unreachable(Bot::MessengerB.name(), e.to_string())),
    }
}

/// # `POST /v1/replicas/{replicaUUID}/integrations/messengerB`
/// Body `{messengerBToken}`. Checks the token (REST "get current user"), stores it sealed,
/// replaces any earlier bot of the replica and starts the bot on the gateway; 200 `{success,
/// id}` with `id` the bot's messengerB user id (a string). Errors: 400 (malformed body,
/// `INVALID_CHANNEL_TOKEN`), 404, 409 `INTEGRATION_CONFLICT` (the bot serves another replica),
/// 502 (the platform could not be asked).
pub async fn connect_messenger_b(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: MessengerBBody = req.json()?;
    let token = body.token.trim();
    check_b_token(token)?;
    let (bot_id, username) = verify_b(&app, token).await?;
    let sealed_token = integrations::seal(&app.secrets, Bot::MessengerB.name(), replica.id, token)?;
    let now = crate::store::now_ms();
    let (org, id) = (replica.org, replica.id);
    let bot = integrations::connect(&app.store, id, move |_: Option<MessengerBBot>| MessengerBBot {
        replica: id,
        org,
        sealed_token: sealed_token.clone(),
        bot_id,
        username: username.clone(),
        is_active: false,
        last_error: None,
        last_error_at: None,
        connected_at: now,
        updated_at: now,
    })
    .await?;
    app.bots.start(Bot::MessengerB, replica.id);
    Ok(Reply::ok(&Connected { id: bot.bot_id.to_string() }))
}

/// # `DELETE /v1/replicas/{replicaUUID}/integrations/messengerB`
/// Stops the bot and forgets its token; 200 `{success}`. Errors: 404 (no such replica, or no
/// bot connected).
pub async fn disconnect_messenger_b(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    integrations::disconnect::<MessengerBBot>(&app.store, replica.id).await?;
    app.bots.stop(replica.id, Bot::MessengerB);
    Ok(Reply::done())
}

/// The document's rows of the bots' connect and disconnect operations.
pub fn operations() -> Vec<Operation> {
    let disconnect = op(
        "DELETE",
        "/v1/replicas/{replicaUUID}/integrations/messengerA",
        "disconnectMessengerA",
        "Integrations",
        "Disconnect the messengerA bot",
    )
    .describe("Stops the bot and forgets its token; 404 when no bot is connected.")
    .serve(Access::Either, handler!(disconnect_messenger_a));
    let connect = messenger_a_connect().serve(Access::Either, handler!(connect_messenger_a));
    [vec![connect, disconnect], messenger_b_ops()].into_iter().flatten().collect()
}

/// `connectMessengerA`.
fn messenger_a_connect() -> Op {
    op(
        "POST",
        "/v1/replicas/{replicaUUID}/integrations/messengerA",
        "connectMessengerA",
        "Integrations",
        "Connect a messengerA bot",
    )
    .body_of::<MessengerABody>()
    .ok_of::<Connected>(200)
    .extra(&[409, 502])
    .describe(
        "Checks the token with the Bot API's `getMe` (400 `INVALID_CHANNEL_TOKEN` when refused, 502 when the \
            API cannot be reached), stores it encrypted, replaces any earlier bot of the replica and starts it: \
            long polling with `getUpdates` (base URL `--messenger-a-api-base`). The bot answers every text \
            message of a private chat, and in groups the messages that mention `mention` or reply to it; it shows \
            \"typing\" while the reply is made and splits replies longer than 4096 characters. Questions and \
            replies are stored as history (`source: messengerA`, full `messengerA_data`) of the linked-account \
            user `messengerA:<user id>`; unaddressed group messages are stored too. The update offset is kept in \
            the store: a restart neither loses nor repeats a message. The state shows in the replica's \
            `messengerA_integration`. 409 `INTEGRATION_CONFLICT` when the bot serves another replica.",
    )
}

/// The messengerB integration: connect (the hosted service's operation) and disconnect (our
/// own, to stop a bot without deleting its replica).
fn messenger_b_ops() -> Vec<Operation> {
    let path = "/v1/replicas/{replicaUUID}/integrations/messengerB";
    vec![
        op("POST", path, "connectMessengerB", "Integrations", "Connect a messengerB bot")
            .body_of::<MessengerBBody>()
            .ok_of::<Connected>(200)
            .extra(&[409, 502])
            .describe(
                "Checks the token with the REST API's \"get current user\" (400 `INVALID_CHANNEL_TOKEN` when refused, \
                502 when the API cannot be reached; base URL `--messenger-b-api-base`), stores it encrypted, replaces \
                any earlier bot of the replica and starts it on the gateway (`--messenger-b-gateway`; intents \
                GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES; heartbeats, RECONNECT and session resume handled). The bot \
                answers direct messages, and in servers the messages that mention it; it shows \"typing\" while the \
                reply is made, splits replies longer than 2000 characters (the first part replies to the question in \
                servers) and pings nobody. Questions and replies are stored as history (`source: messengerB`, full \
                `messengerB_data`; `channel_name` is the author's name for a direct message) of the linked-account \
                user `messengerB:<author id>`. The state shows in the replica's `messengerB_integration`. `id` in \
                the answer is ours (the bot's user id). 409 `INTEGRATION_CONFLICT` when the bot serves another \
                replica.",
            )
            .serve(Access::Either, handler!(connect_messenger_b)),
        op("DELETE", path, "disconnectMessengerB", "Integrations", "Disconnect the messengerB bot")
            .describe("Our own operation. Stops the bot and forgets its token; 404 when no bot is connected.")
            .serve(Access::Either, handler!(disconnect_messenger_b)),
    ]
}
