//! Channel integrations (spec §4.2; one bot per channel and replica): `POST` and `DELETE
//! /v1/replicas/{replicaUUID}/integrations/<bot>`, for every bot channel
//! (`service::channel::Bot`): each bot's module gives its connect (body, token check) and both
//! rows' prose (`channels::BotModule`); the handlers here are every bot's.
//!
//! The state of a connected bot shows in the replica's `<bot>_integration` object
//! ([`crate::service::integrations::view`]); the token is never returned.

use std::sync::Arc;

use super::{path_replica, route_channel};
use super::{Operation, Serve};
use crate::app::App;
use crate::error::{Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::channel::Bot;
use crate::service::integrations;

/// The bot the route ends in.
fn route_bot(req: &Req) -> Result<Bot> {
    let channel = route_channel(req)?;
    channel.bot().ok_or_else(|| Error::internal(format!("channel {} runs no bot", channel.name())))
}

/// # `POST /v1/replicas/{replicaUUID}/integrations/<bot>`
/// The bot's connect (`channels::BotModule::connect`): checks the token with the platform,
/// stores it sealed, replaces any earlier bot of the replica and starts the bot; 200 `{success,
/// id}` with `id` the bot's user id on the platform (a string). Errors: 400 (malformed body,
/// `INVALID_CHANNEL_TOKEN`), 404, 409 `INTEGRATION_CONFLICT` (the bot serves another replica),
/// 502 (the platform could not be asked).
pub async fn connect(app: Arc<App>, req: Req) -> Result<Reply> {
    let bot = route_bot(&req)?;
    let replica = path_replica(&app, &req).await?;
    (crate::channels::module(bot).connect)(app, replica, req).await
}

/// # `DELETE /v1/replicas/{replicaUUID}/integrations/<bot>`
/// Stops the bot and forgets its token; 200 `{success}`. Errors: 404 (no such replica, or no
/// bot connected).
pub async fn disconnect(app: Arc<App>, req: Req) -> Result<Reply> {
    let bot = route_bot(&req)?;
    let replica = path_replica(&app, &req).await?;
    integrations::disconnect(&app.store, bot, replica.id).await?;
    app.bots.stop(replica.id, bot);
    Ok(Reply::done())
}

/// The rows of every bot's connect and disconnect operations.
pub fn operations() -> Vec<Operation> {
    let rows = Bot::ALL.map(|bot| {
        let module = crate::channels::module(bot);
        [
            (module.connect_operation)().serve(Access::Either, handler!(connect)),
            (module.disconnect_operation)().serve(Access::Either, handler!(disconnect)),
        ]
    });
    rows.into_iter().flatten().collect()
}
