//! Chat history (spec §4.1): list per channel, save items (with channel data validation).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use serde_json::value::RawValue;

use super::{path_replica, IdView};
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::channel::Channel;
use crate::service::channel_data::{self, MessengerAData, MessengerBData};
use crate::service::history::{self, NewItem, Page};
use crate::service::{check_len, rfc3339};
use crate::store::records::{Message, SourceRef};

/// A retrieval source on the wire (spec §2.2), plus where it is in its document (additive,
/// absent when unknown): `url`, the web page of a `website` entry with a text fragment that
/// opens it scrolled to the quoted words, and `page`, the 1-based page of a PDF on which the
/// passage begins.
#[derive(Serialize)]
pub struct SourceView<'a> {
    id: u64,
    score: f32,
    status: &'static str,
    created_at: String,
    name: &'a str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page: Option<u32>,
}

/// A source of the retrieval check (`…/chat/completions/test`): its view, where its chunk
/// ranked by BM25 and by its vector (1 = first; absent when that ranking did not find it) and
/// the question's cosine to its vector (absent without one).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrievedView<'a> {
    #[serde(flatten)]
    source: SourceView<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bm25_rank: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vector_rank: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cosine: Option<f32>,
}

/// The wire view of retrieved source `s`, ranked `ranks`.
pub fn retrieved_view<'a>(s: &'a SourceRef, ranks: &crate::search::fusion::Ranks) -> RetrievedView<'a> {
    RetrievedView { source: source_view(s), bm25_rank: ranks.bm25, vector_rank: ranks.vector, cosine: ranks.cosine }
}

/// The wire view of source `s`.
pub fn source_view(s: &SourceRef) -> SourceView<'_> {
    SourceView {
        id: s.id,
        score: s.score,
        status: "scored",
        created_at: rfc3339(s.created_at),
        name: &s.name,
        content: &s.content,
        url: s.url.as_deref(),
        page: s.page,
    }
}

/// A chat history item on the wire (spec §2.1), plus `interrupted: true` on a reply that was
/// cut short (absent otherwise) and the item's `messengerA_data` / `messengerB_data` when it
/// came from that channel with them. Serialized straight from the record (no JSON tree; the
/// channel data is stored as JSON text and written as it is).
#[derive(Serialize)]
pub struct MessageView<'a> {
    content: &'a str,
    created_at: String,
    id: u64,
    is_private: bool,
    role: &'a str,
    source: &'a str,
    sources: Vec<SourceView<'a>>,
    user_uuid: uuid::Uuid,
    original_message_id: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    interrupted: bool,
    #[serde(flatten)]
    channel_data: ChannelData<'a>,
}

/// The channel data of an item, as its channel's field (`Channel::data_field`:
/// `messengerA_data`, `messengerB_data`); nothing for a channel without one or an item without
/// data.
pub struct ChannelData<'a>(Option<(&'static str, &'a RawValue)>);

impl Serialize for ChannelData<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0)
    }
}

/// The wire view of item `m`.
pub fn view(m: &Message) -> MessageView<'_> {
    let data: Option<&RawValue> = m.channel_data.as_deref().and_then(|d| serde_json::from_str(d).ok());
    MessageView {
        content: &m.content,
        created_at: rfc3339(m.created_at),
        id: m.id,
        is_private: m.is_private,
        role: &m.role,
        source: &m.source,
        sources: m.sources.iter().map(source_view).collect(),
        user_uuid: m.user,
        original_message_id: (m.role == "assistant").then(|| format!("replicad-{}", m.id)),
        interrupted: m.interrupted,
        channel_data: ChannelData(Channel::parse(&m.source).and_then(Channel::data_field).zip(data)),
    }
}

/// `{type, items}` of a history list.
#[derive(Serialize)]
struct Listed<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    items: Vec<MessageView<'a>>,
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
    Ok(Reply::ok(&Listed { kind: channel.unwrap_or("all"), items: items.iter().map(view).collect() }))
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history`
/// The caller's items on every channel, `{success, type: "all", items}`; `limit` (1–100,
/// default 20) newest items before `beforeID`, oldest first.
pub async fn list_all(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, None).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/web`
pub async fn list_web(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some(Channel::Web.name())).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/embed`
pub async fn list_embed(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some(Channel::Embed.name())).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/messengerA`
pub async fn list_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some(Channel::MessengerA.name())).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/messengerB`
pub async fn list_messenger_b(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, Some(Channel::MessengerB.name())).await
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
    Ok(Reply::ok(&IdView { id: ids.first() }))
}

/// # `POST /v1/replicas/{replicaUUID}/chat/history`
/// Saves a `user` item on `source` (default `web`, or `messengerB` when `messengerB_data` is
/// given); a repeated `messengerB_data.message_id` stores nothing new. 200 `{success, id}`.
pub async fn save(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: SaveBody = req.json()?;
    let channel = channel_data::of_source(body.source, body.messenger_b_data.as_ref())?;
    save_item(&app, &req, NewItem::from_user(body.content, channel)).await
}

/// # `POST /v1/replicas/{replicaUUID}/chat/history/messengerA`
/// Saves a `user` item of the messengerA channel; a repeated `(chat_id, message_id)` stores
/// nothing new. 200 `{success, id}`.
pub async fn save_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: SaveMessengerABody = req.json()?;
    let channel = body.messenger_a_data.stamped()?;
    save_item(&app, &req, NewItem::from_user(body.content, channel)).await
}
