//! Chats (spec §4.2 chats rows, docs/decisions.md "Chat"): list, read, and a chat's messages.
//! Also the query parsing and message view shared with `api::conversations`.

use std::sync::Arc;

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize, Serializer};
use uuid::Uuid;

use super::query::{self, Int, Named, OneOf, SortOrder};
use super::Timestamp;
use super::{path_replica, Items, Page};
use super::{Operation, Serve};
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::derived::SparseId;
use crate::openapi::operations::op;
use crate::service::channel::sources;
use crate::service::chats::{self, Cursor, Item, Labeled, ListQuery, SortBy, Viewer};
use crate::store::records::{Chat, Counts, Replica};

/// The query of a chat or conversation list; `S` is the order key, with its default.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(default, rename_all = "camelCase", bound = "S: Named + Default")]
#[schemars(bound = "S: Named + Default")]
pub struct ListParams<S> {
    /// Page number, from 1.
    page: Int<1, 1_000_000, 1>,
    /// Items per page.
    page_size: Int<0, 100, 24>,
    /// Order key.
    sort_by: OneOf<S>,
    /// Direction.
    sort_order: OneOf<SortOrder>,
}

/// The chat list's query: most replica replies first unless told.
pub type ChatListParams = ListParams<SortByOr<{ SortBy::ReplicaReplies as usize }>>;
/// The conversation lists' query: the last replica reply first unless told.
pub type ConversationListParams = ListParams<SortByOr<{ SortBy::LastReplicaReplyAt as usize }>>;

impl<const D: usize> ListParams<SortByOr<D>> {
    /// The list query of `req`.
    pub fn read(req: &Req) -> Result<ListQuery> {
        let q: Self = query::read(req)?;
        let (sort_by, descending) = (q.sort_by.0 .0, q.sort_order.0.descending());
        Ok(ListQuery { page: q.page.0, page_size: q.page_size.0, sort_by, descending })
    }
}

/// A `sortBy` whose default is the order `D`: a [`SortBy`] as `usize`, its index in
/// `SortBy::NAMES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortByOr<const D: usize>(SortBy);

impl<const D: usize> Default for SortByOr<D> {
    fn default() -> Self {
        SortByOr(SortBy::parse(SortBy::NAMES[D]).expect("every name parses"))
    }
}

impl<const D: usize> Named for SortByOr<D> {
    fn table() -> Vec<(String, Self)> {
        query::table_of(&SortBy::NAMES, |name| SortBy::parse(name).map(SortByOr))
    }
}

/// The query of the message lists.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(default)]
pub struct MessagesParams {
    /// Most items.
    limit: Int<1, 100, 20>,
    /// Only items older than this message (the newest `limit` of them).
    #[serde(rename = "beforeUUID")]
    before: Option<Uuid>,
    /// Only items newer than this message (the oldest `limit` of them when alone).
    #[serde(rename = "afterUUID")]
    after: Option<Uuid>,
}

/// The message a cursor parameter (`beforeUUID`, `afterUUID`) names; 400 when it names none.
pub(super) fn message(name: &str, uuid: Option<Uuid>) -> Result<Option<u64>> {
    let Some(uuid) = uuid else { return Ok(None) };
    let id = chats::message_id(uuid);
    id.map(Some).ok_or_else(|| Error::new(Code::InvalidQuery, format!("{name} must be the uuid of a message")))
}

/// The cursor of a message list.
pub(super) fn cursor(req: &Req) -> Result<Cursor> {
    let q: MessagesParams = query::read(req)?;
    Ok(Cursor { limit: q.limit.get(), before: message("beforeUUID", q.before)?, after: message("afterUUID", q.after)? })
}

/// The replica of the path and who reads its chats.
pub async fn replica_and_viewer(app: &App, req: &Req) -> Result<(std::sync::Arc<Replica>, Viewer)> {
    let replica = path_replica(app, req).await?;
    let viewer = Viewer::of(&replica, req.caller()?.user.as_ref());
    Ok((replica, viewer))
}

/// The counts of a chat or conversation on the wire (the `counts` of the `Chat` and
/// `Conversation` schemas): `lastReplicaReplyAt` is absent before the first reply.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct CountsView {
    message_count: u64,
    /// Assistant messages.
    replica_reply_count: u64,
    first_message_at: Timestamp,
    last_message_at: Timestamp,
    /// Absent before the first reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_replica_reply_at: Option<Timestamp>,
}

impl From<&Counts> for CountsView {
    fn from(c: &Counts) -> Self {
        CountsView {
            message_count: c.message_count,
            replica_reply_count: c.replica_reply_count,
            first_message_at: Timestamp::of(c.first_message_at),
            last_message_at: Timestamp::of(c.last_message_at),
            last_replica_reply_at: c.last_replica_reply_at.map(Timestamp::of),
        }
    }
}

/// The name and picture of a chat, a conversation or a message's sender on the wire, under the
/// keys `K` gives (`chatName` / `chatImageURL`, `conversationName` / `conversationImageURL`,
/// `senderName` / `senderProfileImageURL`); each omitted when absent. Flattened into its view.
pub struct LabelView<'a, K> {
    values: [Option<&'a str>; 2],
    keys: PhantomData<K>,
}

/// The keys of a [`LabelView`], and what each says in the document.
pub trait LabelKeys {
    /// The name's key and the picture's.
    const KEYS: [&'static str; 2];
    /// Their descriptions.
    const DOCS: [&'static str; 2];
}

/// A chat's label: `chatName`, `chatImageURL`.
pub struct ChatLabel;

impl LabelKeys for ChatLabel {
    const KEYS: [&'static str; 2] = ["chatName", "chatImageURL"];
    const DOCS: [&'static str; 2] = [
        "The group's name, or the user's name of an individual chat.",
        "The user's profile image of an individual chat.",
    ];
}

/// A message's sender: `senderName`, `senderProfileImageURL`.
pub struct SenderLabel;

impl LabelKeys for SenderLabel {
    const KEYS: [&'static str; 2] = ["senderName", "senderProfileImageURL"];
    const DOCS: [&'static str; 2] =
        ["Where known: the channel's sender name, the user's name, or the replica's name for assistant messages.", ""];
}

impl<'a, K> LabelView<'a, K> {
    /// `name` and `image` under `K`'s keys.
    pub fn new(name: Option<&'a str>, image: Option<&'a str>) -> Self {
        LabelView { values: [name, image], keys: PhantomData }
    }
}

impl<K: LabelKeys> Serialize for LabelView<'_, K> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(K::KEYS.iter().zip(self.values).filter_map(|(k, v)| Some((k, v?))))
    }
}

impl<K: LabelKeys> JsonSchema for LabelView<'_, K> {
    fn schema_name() -> Cow<'static, str> {
        K::KEYS.join("_").into()
    }

    fn inline_schema() -> bool {
        true
    }

    /// Both keys optional strings.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut properties = serde_json::Map::new();
        for (key, doc) in K::KEYS.iter().zip(K::DOCS) {
            let mut string = serde_json::json!({ "type": "string" });
            if !doc.is_empty() {
                string["description"] = doc.into();
            }
            properties.insert(key.to_string(), string);
        }
        json_schema!({ "type": "object", "properties": properties })
    }
}

/// The kinds of a chat or conversation: `individual`, `group`.
pub const KINDS: [&str; 2] = ["individual", "group"];

/// `individual` or `group`.
pub fn kind(group: bool) -> &'static str {
    KINDS[usize::from(group)]
}

/// A chat on the wire (the `Chat` schema; docs/decisions.md "Chat"); absent optional fields are
/// omitted.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Chat")]
pub struct ChatView<'a> {
    uuid: Uuid,
    #[schemars(extend("enum" = sources()))]
    source: &'a str,
    #[serde(flatten)]
    label: LabelView<'a, ChatLabel>,
    #[schemars(extend("enum" = KINDS))]
    chat_type: &'static str,
    #[serde(flatten)]
    counts: CountsView,
}

/// The wire view of chat `c`.
pub fn view(c: &Labeled<Chat>) -> ChatView<'_> {
    let chat = &c.item;
    ChatView {
        uuid: chat.id,
        source: &chat.source,
        label: LabelView::new(c.name.as_deref(), c.image.as_deref()),
        chat_type: kind(chat.group),
        counts: (&chat.counts).into(),
    }
}

/// `{chat}` of `GET …/chats/{chatUUID}` (the `ChatRead` schema).
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "ChatRead")]
pub struct ChatRead<'a> {
    pub chat: ChatView<'a>,
}

/// A message item on the wire (the `Message` schema; docs/decisions.md "Chat"), with the history
/// `id` as a field of our own.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Message")]
pub struct MessageView<'a> {
    /// Cursor for beforeUUID / afterUUID.
    uuid: Uuid,
    /// The chat-history id of the item (ours).
    #[schemars(with = "SparseId")]
    id: u64,
    created_at: Timestamp,
    content: &'a str,
    #[schemars(extend("enum" = ["user", "assistant"]))]
    role: &'a str,
    #[serde(flatten)]
    sender: LabelView<'a, SenderLabel>,
    #[schemars(extend("enum" = sources()))]
    source: &'a str,
    #[serde(rename = "replicaUUID")]
    replica_uuid: Uuid,
}

/// The wire view of message item `it`.
pub fn message_view(it: &Item) -> MessageView<'_> {
    let m = &it.message;
    MessageView {
        uuid: chats::message_uuid(m.id),
        id: m.id,
        created_at: Timestamp::of(m.created_at),
        content: &m.content,
        role: &m.role,
        sender: LabelView::new(it.sender_name.as_deref(), it.sender_image.as_deref()),
        source: &m.source,
        replica_uuid: m.replica,
    }
}

/// `{success, items}` of message items (the `MessageList` schema).
pub fn messages_reply(items: &[Item]) -> Reply {
    Reply::ok(&Items { items: items.iter().map(message_view).collect() })
}

/// # `GET /v1/replicas/{replicaUUID}/chats`
/// `{success, items, total}`; paging and sorting of [`ChatListParams`] (default `replicaReplies`).
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let q = ChatListParams::read(&req)?;
    let (items, total) = chats::list(&app.store, replica.id, viewer, q).await?;
    Ok(Reply::ok(&Page { items: items.iter().map(view).collect(), total }))
}

/// # `GET /v1/replicas/{replicaUUID}/chats/{chatUUID}`
/// `{success, chat}`; 404 for a chat the caller does not see.
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let chat = chats::get(&app.store, replica.id, req.uuid_param("chatUUID")?, viewer).await?;
    Ok(Reply::ok(&ChatRead { chat: view(&chat) }))
}

/// # `GET /v1/replicas/{replicaUUID}/chats/{chatUUID}/messages`
/// `{success, items}` oldest first; `limit`, `beforeUUID`, `afterUUID` ([`cursor`]).
pub async fn messages(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let (chat, cursor) = (req.uuid_param("chatUUID")?, cursor(&req)?);
    let items = chats::messages(&app.store, replica, chat, viewer, cursor).await?;
    Ok(messages_reply(&items))
}

/// The document's rows of this file's operations (see `super::operations`).
pub fn operations() -> Vec<Operation> {
    let chat = "/v1/replicas/{replicaUUID}/chats/{chatUUID}";
    vec![
        op("GET", "/v1/replicas/{replicaUUID}/chats", "listChats", CHATS, "List chats")
            .query_of::<ChatListParams>()
            .ok_as::<Page<ChatView>>(200, "ChatList")
            .describe(
                "A chat is one (replica, user, source) thread; messengerA / messengerB group chats are one chat per \
                group. The replica's owner (or the organization key alone) sees every chat, another user the chats \
                they wrote in. Counts are kept as messages are stored.",
            )
            .serve(Access::Either, handler!(list)),
        op("GET", chat, "getChat", CHATS, "Read a chat").ok_of::<ChatRead>(200).serve(Access::Either, handler!(read)),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/chats/{chatUUID}/messages",
            "listChatMessages",
            CHATS,
            "Messages of a chat",
        )
        .query_of::<MessagesParams>()
        .ok_as::<Items<MessageView>>(200, "MessageList")
        .describe("Oldest first. Message `uuid`s are cursors for `beforeUUID` / `afterUUID`.")
        .serve(Access::Either, handler!(messages)),
    ]
}

/// The tag of the chat and conversation operations.
pub(super) const CHATS: &str = "Chats and conversations";
