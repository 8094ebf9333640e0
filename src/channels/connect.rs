//! What connecting a bot shares across the bot channels (spec §4.2 `POST
//! …/integrations/<channel>`): the answer `{success, id}`, the
//! two ways a platform's token check fails, and storing the bot and starting its runner. Each
//! bot's module (`channels::<name>::connect`) reads its own body, checks its token with its
//! platform and ends with [`connected`].

use schemars::JsonSchema;
use serde::Serialize;

use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::response::Reply;
use crate::openapi::operations::{op, Op};
use crate::service::channel::Bot;
use crate::service::integrations::{self, NewBot};
use crate::store::records::Replica;

/// `{id}` of a connected bot: its user id on the channel.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "IntegrationConnected")]
pub struct Connected {
    /// The bot's user id on the channel.
    id: String,
}

/// 400 `INVALID_CHANNEL_TOKEN`: the `bot`'s platform refused the token (`detail` says how).
pub fn token_refused(bot: Bot, detail: &str) -> Error {
    Error::new(Code::InvalidChannelToken, format!("{} refused the token ({detail})", bot.name()))
}

/// 502 `UPSTREAM_ERROR`: the `bot`'s platform could not be asked about the token (`cause` is
/// logged only).
pub fn platform_unreachable(bot: Bot, cause: String) -> Error {
    let message = format!("{} could not be reached to check the token", bot.name());
    Error::new(Code::UpstreamError, message).with_cause_text(cause)
}

/// A bot's connect row, `POST path` (`id`, `summary`), answering [`Connected`] or 409 / 502 as
/// every bot's connect does; the bot's module adds its body type and prose.
pub fn operation(path: &'static str, id: &'static str, summary: &'static str) -> Op {
    op("POST", path, id, "Integrations", summary).ok_of::<Connected>(200).extra(&[409, 502])
}

/// A bot's disconnect row, `DELETE path` (`id`, `summary`), with the bot's prose.
pub fn disconnect_operation(path: &'static str, id: &'static str, summary: &'static str, prose: &'static str) -> Op {
    op("DELETE", path, id, "Integrations", summary).describe(prose)
}

/// Stores `new` as `replica`'s `bot` (replacing any earlier one), starts its runner and answers
/// 200 `{success, id}`. Errors: 409 `INTEGRATION_CONFLICT`, the store's
/// ([`integrations::connect`]).
pub async fn connected(app: &App, bot: Bot, replica: &Replica, new: NewBot) -> Result<Reply> {
    let stored = integrations::connect(&app.store, &app.secrets, bot, replica, new).await?;
    app.bots.start(bot, stored.replica);
    Ok(Reply::ok(&Connected { id: stored.platform_id }))
}
