//! Chat history (spec §4.1): list per channel, save items (with channel data validation).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::path_replica;
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::channel_data::{self, MessengerAData, MessengerBData};
use crate::service::history::{self, NewItem, Page};
use crate::service::{check_len, rfc3339};
use crate::store::records::{Message, SourceRef};

/// A retrieval source on the wire (spec §2.2).
pub fn source_view(s: &SourceRef) -> Value {
    json!({
        "id": s.id, "score": s.score, "status": "scored",
        "created_at": rfc3339(s.created_at), "name": s.name, "content": s.content,
    })
}

/// A chat history item on the wire (spec §2.1), plus `interrupted: true` on a reply that was
/// cut short (absent otherwise) and the item's `messengerA_data` / `messengerB_data` when it
/// came from that channel with them.
pub fn view(m: &Message) -> Value {
    let sources: Vec<Value> = m.sources.iter().map(source_view).collect();
    let mut v = json!({
        "content": m.content,
        "created_at": rfc3339(m.created_at),
        "id": m.id,
        "is_private": m.is_private,
        "role": m.role,
        "source": m.source,
        "sources": sources,
        "user_uuid": m.user,
        "original_message_id": (m.role == "assistant").then(|| format!("replicad-{}", m.id)),
    });
    if m.interrupted {
        v["interrupted"] = json!(true);
    }
    let data_field = match m.source.as_str() {
        "messengerA" => Some("messengerA_data"),
        "messengerB" => Some("messengerB_data"),
        _ => None,
    };
    if let (Some(field), Some(data)) = (data_field, &m.channel_data) {
        if let Ok(data) = serde_json::from_str::<Value>(data) {
            v[field] = data;
        }
    }
    v
}

async fn list(app: Arc<App>, req: Req, channel: Option<&str>) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let limit = req.query_int(&["limit"], 20, 1, 100)? as usize;
    let before_id = match req.query("beforeID") {
        Some(v) => Some(v.parse::<u64>().map_err(|_| Error::new(Code::InvalidQuery, "beforeID must be a message id"))?),
        None => None,
    };
    let page = Page { channel: channel.map(str::to_string), limit, before_id };
    let items = history::list(&app.store, replica.id, req.caller()?.acting_user(), page).await?;
    let items: Vec<Value> = items.iter().map(view).collect();
    Ok(Reply::ok(&json!({ "type": channel.unwrap_or("all"), "items": items })))
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history`
/// The caller's items on every channel, `{success, type: "all", items}`; `limit` (1–100,
/// default 20) newest items before `beforeID`, oldest first.
pub async fn list_all(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, None).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/web`
pub async fn list_web(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some("web")).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/embed`
pub async fn list_embed(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some("embed")).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/messengerA`
pub async fn list_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some("messengerA")).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/messengerB`
pub async fn list_messenger_b(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some("messengerB")).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SaveBody {
    content: String,
    source: Option<String>,
    #[serde(rename = "messengerB_data")]
    messenger_b_data: Option<MessengerBData>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SaveMessengerABody {
    content: String,
    #[serde(rename = "messengerA_data")]
    messenger_a_data: MessengerAData,
}

async fn save_item(app: &App, req: &Req, item: NewItem) -> Result<Reply> {
    let replica = path_replica(app, req).await?;
    check_len("content", &item.content, 1, crate::service::history::MAX_CONTENT_CHARS)?;
    let user = req.caller()?.acting_user();
    let ids = history::append(&app.store, replica.id, user, replica.private, vec![item]).await?;
    Ok(Reply::ok(&json!({ "id": ids.first() })))
}

/// # `POST /v1/replicas/{replicaUUID}/chat/history`
/// Saves a `user` item on `source` (default `web`, or `messengerB` when `messengerB_data` is
/// given); a repeated `messengerB_data.message_id` stores nothing new. 200 `{success, id}`.
pub async fn save(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: SaveBody = req.json()?;
    let channel = channel_data::of_source(body.source, body.messenger_b_data.as_ref())?;
    let item = NewItem {
        role: "user",
        content: body.content,
        source: channel.source,
        sources: Vec::new(),
        channel_data: channel.data,
        channel_key: channel.key,
        interrupted: false,
    };
    save_item(&app, &req, item).await
}

/// # `POST /v1/replicas/{replicaUUID}/chat/history/messengerA`
/// Saves a `user` item of the messengerA channel; a repeated `(chat_id, message_id)` stores
/// nothing new. 200 `{success, id}`.
pub async fn save_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: SaveMessengerABody = req.json()?;
    let channel = body.messenger_a_data.stamped()?;
    let item = NewItem {
        role: "user",
        content: body.content,
        source: channel.source,
        sources: Vec::new(),
        channel_data: channel.data,
        channel_key: channel.key,
        interrupted: false,
    };
    save_item(&app, &req, item).await
}
