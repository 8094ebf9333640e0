//! `POST /v1/replicas/{replicaUUID}/integrations/messengerA` (spec §4.2): the body
//! `{messengerA_token, mention?}`, the token checked with `getMe`, and the operation's document
//! row.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::api::{ApiError, Client};
use super::BOT;
use crate::app::App;
use crate::channels::connect::{self, connected, platform_unreachable, token_refused};
use crate::error::{Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::Op;
use crate::service::integrations::{BotIdentity, NewBot};
use crate::store::records::Replica;

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

/// Asks `getMe` who the bot of `token` is. 400 `INVALID_CHANNEL_TOKEN` when the platform
/// refuses the token, 502 `UPSTREAM_ERROR` when it cannot be asked.
async fn verify(app: &App, token: &str) -> Result<BotIdentity> {
    let client = Client::new(app.platform_http.clone(), &app.config.messenger_a_api_base, token);
    match client.get_me().await {
        Ok(me) => Ok(BotIdentity { id: me.id.to_string(), username: me.username.unwrap_or(me.first_name) }),
        Err(ApiError::Unauthorized(d)) => {
            Err(token_refused(BOT, &format!("getMe: {}", if d.is_empty() { "Unauthorized" } else { &d })))
        }
        Err(e) => Err(platform_unreachable(BOT, e.to_string())),
    }
}

/// # `POST /v1/replicas/{replicaUUID}/integrations/messengerA`
/// Body `{messengerA_token, mention?}`. Checks the token with `getMe`, stores it sealed,
/// replaces any earlier bot of the replica and starts the bot; 200 `{success, id}` with `id`
/// the bot's messengerA user id (a string). Errors: 400 (malformed body,
/// `INVALID_CHANNEL_TOKEN`), 409 `INTEGRATION_CONFLICT` (the bot serves another replica), 502
/// (the platform could not be asked).
pub async fn connect(app: Arc<App>, replica: Arc<Replica>, req: Req) -> Result<Reply> {
    let body: MessengerABody = req.json()?;
    let token = body.token.trim();
    check_token(token)?;
    let mention = body.mention.as_deref().map(normalize_mention).transpose()?;
    let me = verify(&app, token).await?;
    let mention = match mention {
        Some(m) => m,
        None => normalize_mention(&me.username).unwrap_or_else(|_| format!("@{}", me.id)),
    };
    connected(&app, BOT, &replica, NewBot { token: token.to_string(), me, mention: Some(mention) }).await
}

/// The path of the bot's connect and disconnect.
const PATH: &str = "/v1/replicas/{replicaUUID}/integrations/messengerA";

/// `disconnectMessengerA`'s document row (its handler is every bot's, `api::integrations`).
pub fn disconnect_operation() -> Op {
    let prose = "Stops the bot and forgets its token; 404 when no bot is connected.";
    connect::disconnect_operation(PATH, "disconnectMessengerA", "Disconnect the messengerA bot", prose)
}

/// `connectMessengerA`'s document row.
pub fn operation() -> Op {
    connect::operation(PATH, "connectMessengerA", "Connect a messengerA bot").body_of::<MessengerABody>().describe(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_mentions_are_checked() {
        assert!(check_token("123:abc_DEF-9").is_ok());
        for bad in ["", "123", ":abc", "12a:abc", "123:", "123:a b"] {
            assert!(check_token(bad).is_err(), "{bad:?}");
        }
        assert_eq!(normalize_mention(" @docs_bot ").unwrap(), "@docs_bot");
        assert_eq!(normalize_mention("docs_bot").unwrap(), "@docs_bot");
        assert!(normalize_mention("@").is_err());
        assert!(normalize_mention("docs-bot").is_err());
    }
}
