//! Chat history (spec §4.1): list per channel, save items (with channel data validation).

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use serde_json::value::RawValue;

use super::query::{self, Int};
use super::{path_replica, route_channel, Timestamp};
use super::{Operation, Serve};
use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::derived::SparseId;
use crate::openapi::operations::{op, Op};
use crate::service::channel::{sources, Channel};
use crate::service::channel_data::{self, MessengerAData, MessengerBData};
use crate::service::check_len;
use crate::service::history::{self, NewItem, Page, MAX_CONTENT_CHARS};
use crate::store::records::{Message, SourceRef};

/// A retrieval source on the wire (spec §2.2), plus where it is in its document (additive,
/// absent when unknown): `url`, the web page of a `website` entry with a text fragment that
/// opens it scrolled to the quoted words, and `page`, the 1-based page of a PDF on which the
/// passage begins.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Source")]
pub struct SourceView<'a> {
    /// The knowledge-base entry's id.
    #[schemars(with = "SparseId")]
    id: u64,
    score: f32,
    #[schemars(extend("enum" = ["scored", "unscored"]))]
    status: &'static str,
    created_at: Timestamp,
    name: &'a str,
    content: &'a str,
    /// Ours (additive): the web page of a `website` entry (where its redirects ended), with a
    /// URL text fragment (`#:~:text=start,end`) that opens it scrolled to the words the reply
    /// quotes (to the passage's opening words when it quotes none); absent for other entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(url)]
    url: Option<&'a str>,
    /// Ours (additive): the 1-based page of the document (a PDF) on which the passage begins;
    /// absent for documents without pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    page: Option<u32>,
}

/// A source of the retrieval check (`…/chat/completions/test`): its view, where its chunk
/// ranked by BM25 and by its vector (1 = first; absent when that ranking did not find it) and
/// the question's cosine to its vector (absent without one).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "RetrievedSource", transform = fused_score_doc)]
pub struct RetrievedView<'a> {
    #[serde(flatten)]
    source: SourceView<'a>,
    /// Ours: the chunk's place (1 = first) in the BM25 ranking; absent when that ranking did
    /// not find it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    bm25_rank: Option<u32>,
    /// Ours: the chunk's place (1 = first) in the vector (embedding) ranking; absent when that
    /// ranking did not find it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    vector_rank: Option<u32>,
    /// Ours: the cosine similarity of the question's embedding to the chunk's vector (absent
    /// without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1, max = 1))]
    cosine: Option<f32>,
}

/// The `score` of a retrieved source, in the document.
fn fused_score_doc(schema: &mut Schema) {
    if let Some(score) = schema.get_mut("properties").and_then(|p| p.get_mut("score")) {
        score["description"] = "Ours: the fused score, 0.6 · bm25 / bm25_max + 0.4 · cosine' (the cosine scaled \
            between the last and the first vector hit) over the rankings that found the chunk; for a question in \
            another language than every document (the trace's `reader.otherLanguage`, with a multilingual model), \
            0.3 · bm25 / bm25_max + 0.7 · cosine'; with no embedding model configured (no `vectorRank` ever), \
            0.6 · bm25 / bm25_max."
            .into();
    }
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
        created_at: Timestamp::of(s.created_at),
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
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "ChatHistoryItem")]
pub struct MessageView<'a> {
    content: &'a str,
    created_at: Timestamp,
    #[schemars(with = "SparseId")]
    id: u64,
    is_private: bool,
    #[schemars(extend("enum" = ["user", "assistant"]))]
    role: &'a str,
    #[schemars(extend("enum" = sources()))]
    source: &'a str,
    sources: Vec<SourceView<'a>>,
    user_uuid: uuid::Uuid,
    /// Deprecated (spec §2.1); set on assistant items.
    #[schemars(extend("deprecated" = true))]
    original_message_id: Option<String>,
    /// Present (true) on a streamed reply whose client disconnected: the item keeps what was
    /// said before the cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("const" = true))]
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

impl JsonSchema for ChannelData<'_> {
    fn schema_name() -> Cow<'static, str> {
        "ChannelData".into()
    }

    fn inline_schema() -> bool {
        true
    }

    /// `{messengerA_data?, messengerB_data?}`.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut properties = serde_json::Map::new();
        let fields = [Channel::MessengerA, Channel::MessengerB].map(|c| c.data_field().unwrap_or_default());
        properties.insert(fields[0].into(), generator.subschema_for::<MessengerAData>().into());
        properties.insert(fields[1].into(), generator.subschema_for::<MessengerBData>().into());
        json_schema!({ "type": "object", "properties": properties })
    }
}

/// The wire view of item `m`.
pub fn view(m: &Message) -> MessageView<'_> {
    let data: Option<&RawValue> = m.channel_data.as_deref().and_then(|d| serde_json::from_str(d).ok());
    MessageView {
        content: &m.content,
        created_at: Timestamp::of(m.created_at),
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
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "ChatHistory")]
struct Listed<'a> {
    #[serde(rename = "type")]
    #[schemars(extend("enum" = history_types()))]
    kind: &'a str,
    items: Vec<MessageView<'a>>,
}

/// The `type` of a history list: `all`, or the channel listed.
fn history_types() -> Vec<&'static str> {
    std::iter::once("all").chain(Channel::ALL.map(Channel::name)).collect()
}

async fn list(app: Arc<App>, req: Req, channel: Option<&str>) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let q: HistoryParams = query::read(&req)?;
    let page = Page { channel: channel.map(str::to_string), limit: q.limit.get(), before_id: q.before_id };
    let items = history::list(&app.store, replica.id, req.caller()?.acting_user(), page).await?;
    Ok(Reply::ok(&Listed { kind: channel.unwrap_or("all"), items: items.iter().map(view).collect() }))
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history`
/// The caller's items on every channel, `{success, type: "all", items}`; `limit` (1–100,
/// default 20) newest items before `beforeID`, oldest first.
pub async fn list_all(app: Arc<App>, req: Req) -> Result<Reply> {
    list(app, req, None).await
}

/// # `GET /v1/replicas/{replicaUUID}/chat/history/<channel>`
/// The caller's items on the channel the path ends in, `{success, type: <channel>, items}`,
/// paged as [`list_all`]; one row per channel ([`channel_lists`]).
pub async fn list_channel(app: Arc<App>, req: Req) -> Result<Reply> {
    let channel = route_channel(&req)?;
    list(app, req, Some(channel.name())).await
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "HistorySave")]
struct SaveBody {
    #[schemars(length(min = 1, max = MAX_CONTENT_CHARS))]
    content: String,
    #[schemars(extend("enum" = sources()))]
    source: Option<String>,
    #[serde(rename = "messengerB_data")]
    messenger_b_data: Option<MessengerBData>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "HistorySaveMessengerA")]
struct SaveMessengerABody {
    #[schemars(length(min = 1, max = MAX_CONTENT_CHARS))]
    content: String,
    #[serde(rename = "messengerA_data")]
    messenger_a_data: MessengerAData,
}

/// `{id}` of a saved item: its chat-history id, `null` when a repeated channel message stored
/// nothing new.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "HistorySaved")]
struct Saved {
    /// The chat-history id of the saved item.
    #[schemars(with = "Option<SparseId>")]
    id: Option<u64>,
}

async fn save_item(app: &App, req: &Req, item: NewItem) -> Result<Reply> {
    let replica = path_replica(app, req).await?;
    check_len("content", &item.content, 1, MAX_CONTENT_CHARS)?;
    let user = req.caller()?.acting_user();
    let ids = history::append(&app.store, replica.id, user, replica.private, vec![item]).await?;
    Ok(Reply::ok(&Saved { id: ids.first().copied() }))
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

/// Each channel's history list: its path, operation id and summary, made once from the
/// channel's name, in the document's order (the public channels first).
static CHANNEL_LISTS: LazyLock<Vec<[String; 3]>> = LazyLock::new(|| {
    let lists = Channel::ALL.into_iter().rev().map(|c| {
        let name = c.name();
        let capitalized = name[..1].to_uppercase() + &name[1..];
        [
            format!("/v1/replicas/{{replicaUUID}}/chat/history/{name}"),
            format!("listChatHistory{capitalized}"),
            format!("History of the {name} channel"),
        ]
    });
    lists.collect()
});

/// The history list of every channel (spec §4.1), all served by [`list_channel`].
fn channel_lists() -> Vec<Operation> {
    let row = |[path, id, summary]: &'static [String; 3]| {
        history_list(path, id, summary).serve(Access::Either, handler!(list_channel)).cached()
    };
    CHANNEL_LISTS.iter().map(row).collect()
}

/// Chat history (spec §4.1), per channel.
pub fn operations() -> Vec<Operation> {
    let h = "/v1/replicas/{replicaUUID}/chat/history";
    let msg_a = "/v1/replicas/{replicaUUID}/chat/history/messengerA";
    vec![
        history_list(h, "listChatHistory", "History on every channel")
            .serve(Access::Either, handler!(list_all))
            .cached(),
        op("POST", h, "saveChatHistory", "Chat history", "Save a history item")
            .body_of::<SaveBody>()
            .ok_of::<Saved>(200)
            .extra(&[429])
            .describe(
                "Saves a `user` item on `source` (default `web`, or `messengerB` with `messengerB_data`). A repeated \
                `messengerB_data.message_id` stores nothing new.",
            )
            .serve(Access::Either, handler!(save)),
    ]
    .into_iter()
    .chain(channel_lists())
    .chain([op("POST", msg_a, "saveChatHistoryMessengerA", "Chat history", "Save a messengerA item")
        .body_of::<SaveMessengerABody>()
        .ok_of::<Saved>(200)
        .extra(&[429])
        .describe("A repeated `(chat_id, message_id)` stores nothing new.")
        .serve(Access::Either, handler!(save_messenger_a))])
    .collect()
}

/// A chat-history list operation (spec §4.1): the same shape for every channel.
fn history_list(path: &'static str, id: &'static str, summary: &'static str) -> Op {
    op("GET", path, id, "Chat history", summary).query_of::<HistoryParams>().ok_of::<Listed>(200).describe(
        "The caller's history items on the channel of the path, newest `limit` (oldest first). A private replica the \
        caller may not see answers 404.",
    )
}

/// The query of the history lists.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(default)]
struct HistoryParams {
    /// Newest items, returned oldest first.
    limit: Int<1, 100, 20>,
    /// Only items with a smaller `id` (paging back in time).
    #[serde(rename = "beforeID")]
    before_id: Option<u64>,
}
