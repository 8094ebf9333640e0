//! `POST /v1/replicas/{replicaUUID}/chat/completions` (spec §4.2, DECISIONS.md "Chat").

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::history::MessengerBData;
use super::path_replica;
use crate::app::App;
use crate::error::Result;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::chat::{self, Ask};
use crate::service::check_len;

/// Request body.
#[derive(Deserialize)]
pub struct CompletionBody {
    pub content: String,
    #[serde(default)]
    pub skip_chat_history: bool,
    pub source: Option<String>,
    #[serde(rename = "messengerB_data")]
    pub messenger_b_data: Option<MessengerBData>,
    /// Accepted (spec §8); per-request limits are not applied yet.
    #[serde(rename = "usageLimits")]
    pub usage_limits: Option<Value>,
}

/// # `POST /v1/replicas/{replicaUUID}/chat/completions`
/// 200 `{success, content}` with `X-Replica-Backend`; stores the question and the answer (with
/// its `sources`) unless `skip_chat_history`. Errors: 400, 404.
pub async fn complete(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: CompletionBody = req.json()?;
    check_len("content", &body.content, 1, 100_000)?;
    let (source, channel_data, channel_key) = super::history::channel_of(body.source, body.messenger_b_data.as_ref())?;
    let ask =
        Ask { content: body.content, skip_chat_history: body.skip_chat_history, source, channel_data, channel_key };
    let user = req.caller()?.acting_user();
    let done = chat::complete(&app.store, &app.search, &replica, user, ask).await?;
    Ok(Reply::ok(&json!({ "content": done.content })).with_header("x-replica-backend", done.backend))
}
