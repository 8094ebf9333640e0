//! Channel integrations (spec §4.2, DECISIONS.md "Integrations"):
//! `POST` and `DELETE /v1/replicas/{replicaUUID}/integrations/messengerA`.
//!
//! The state of a connected bot shows in the replica's `messengerA_integration` object
//! ([`crate::service::integrations::integration_view`]); the token is never returned.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use super::path_replica;
use crate::app::App;
use crate::channels::messenger_a::api::{ApiError, Client};
use crate::channels::messenger_a::CHANNEL;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::integrations::{self, BotIdentity};

/// Body of `POST …/integrations/messengerA`.
#[derive(Deserialize)]
pub struct MessengerABody {
    /// The bot token given by the platform (`<digits>:<letters, digits, _ or ->`).
    #[serde(rename = "messengerA_token")]
    pub token: String,
    /// Handle the bot answers to in groups (`@name` or `name`); default: the bot's username.
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
    let client = Client::new(app.channels.http.clone(), &app.config.messenger_a_api_base, token);
    match client.get_me().await {
        Ok(me) => Ok(BotIdentity { id: me.id, username: me.username.unwrap_or(me.first_name) }),
        Err(ApiError::Unauthorized(d)) => Err(Error::new(
            Code::InvalidChannelToken,
            format!("messengerA refused the token (getMe: {})", if d.is_empty() { "Unauthorized" } else { &d }),
        )),
        Err(e) => Err(Error {
            internal: Some(e.to_string()),
            ..Error::new(Code::UpstreamError, "messengerA could not be reached to check the token")
        }),
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
    let secrets = &app.channels.secrets;
    let bot =
        integrations::connect_messenger_a(&app.store, secrets, replica.org, replica.id, token, mention, me).await?;
    app.channels.start_messenger_a(app.clone(), replica.id);
    Ok(Reply::ok(&json!({ "id": bot.bot_id.to_string() })))
}

/// # `DELETE /v1/replicas/{replicaUUID}/integrations/messengerA`
/// Stops the bot and forgets its token; 200 `{success}`. Errors: 404 (no such replica, or no
/// bot connected).
pub async fn disconnect_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    integrations::disconnect_messenger_a(&app.store, replica.id).await?;
    app.channels.stop(replica.id, CHANNEL);
    Ok(Reply::done())
}
