//! `POST /v1/replicas/{replicaUUID}/integrations/messengerB` (spec §4.2): the body `{messengerBToken}`, the token checked with the REST API's "get
//! current user", and the operation's document row.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::rest::{self, RestError};
use super::BOT;
use crate::app::App;
use crate::channels::connect::{self, connected, platform_unreachable, token_refused};
use crate::error::{Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::Op;
use crate::service::integrations::{BotIdentity, NewBot};
use crate::store::records::Replica;

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

fn check_token(token: &str) -> Result<()> {
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
async fn verify(app: &App, token: &str) -> Result<BotIdentity> {
    match rest::current_user(&rest::client(&app.config, token)).await {
        Ok(me) => Ok(BotIdentity { id: me.id.get().to_string(), username: me.name }),
        Err(RestError::Unauthorized) => Err(token_refused(BOT, "get current user: 401 Unauthorized")),
        Err(e) => Err(platform_unreachable(BOT, e.to_string())),
    }
}

/// # `POST /v1/replicas/{replicaUUID}/integrations/messengerB`
/// Body `{messengerBToken}`. Checks the token (REST "get current user"), stores it sealed,
/// replaces any earlier bot of the replica and starts the bot on the gateway; 200 `{success,
/// id}` with `id` the bot's messengerB user id (a string). Errors: 400 (malformed body,
/// `INVALID_CHANNEL_TOKEN`), 409 `INTEGRATION_CONFLICT` (the bot serves another replica), 502
/// (the platform could not be asked).
pub async fn connect(app: Arc<App>, replica: Arc<Replica>, req: Req) -> Result<Reply> {
    let body: MessengerBBody = req.json()?;
    let token = body.token.trim();
    check_token(token)?;
    let me = verify(&app, token).await?;
    connected(&app, BOT, &replica, NewBot { token: token.to_string(), me, mention: None }).await
}

/// The path of the bot's connect and disconnect.
const PATH: &str = "/v1/replicas/{replicaUUID}/integrations/messengerB";

/// `disconnectMessengerB`'s document row (its handler is every bot's, `api::integrations`).
pub fn disconnect_operation() -> Op {
    let prose = "Our own operation. Stops the bot and forgets its token; 404 when no bot is connected.";
    connect::disconnect_operation(PATH, "disconnectMessengerB", "Disconnect the messengerB bot", prose)
}

/// `connectMessengerB`'s document row.
pub fn operation() -> Op {
    connect::operation(PATH, "connectMessengerB", "Connect a messengerB bot").body_of::<MessengerBBody>().describe(
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
}
