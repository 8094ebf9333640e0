//! Conversations (spec §4.2 conversation rows, docs/decisions.md "Chat"): below a chat, and the
//! deprecated operations below the replica (same data), an owner's `PATCH`, and mentions.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::chats::{
    cursor, kind, message, message_view, messages_reply, replica_and_viewer, ConversationListParams, CountsView,
    LabelKeys, LabelView, MessageView, MessagesParams, CHATS, KINDS,
};
use super::query::{self, Int};
use super::{Items, Page};
use super::{Operation, Serve};
use crate::app::App;
use crate::error::{Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::{op, Op};
use crate::service::channel::sources;
use crate::service::chats::conversations::{self as service, Insights, Mention, MentionQuery};
use crate::service::chats::Labeled;
use crate::service::check_len;
use crate::store::records::Conversation;

/// A conversation on the wire (the `Conversation` schema; docs/decisions.md "Chat"); absent
/// optional fields are omitted. Read alone it is the answer itself, flat (`ConversationRead`).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Conversation")]
pub struct ConversationView<'a> {
    uuid: Uuid,
    #[serde(rename = "chatUUID")]
    chat_uuid: Uuid,
    #[schemars(extend("enum" = sources()))]
    source: &'a str,
    #[serde(flatten)]
    label: LabelView<'a, ConversationLabel>,
    /// Absent until computed (once the conversation has closed: 30 minutes without messages)
    /// or set by the owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    common_questions: &'a [String],
    common_topics: &'a [String],
    #[schemars(extend("enum" = KINDS))]
    conversation_type: &'static str,
    #[serde(flatten)]
    counts: CountsView,
}

/// The wire view of conversation `c`.
pub fn view(c: &Labeled<Conversation>) -> ConversationView<'_> {
    let conv = &c.item;
    ConversationView {
        uuid: conv.id,
        chat_uuid: conv.chat,
        source: &conv.source,
        label: LabelView::new(c.name.as_deref(), c.image.as_deref()),
        summary: conv.summary.as_deref(),
        common_questions: &conv.common_questions,
        common_topics: &conv.common_topics,
        conversation_type: kind(conv.group),
        counts: (&conv.counts).into(),
    }
}

/// An item of a mention list (the `Mention` schema): `{type: "mention", messages}` or
/// `{type: "placeholder", count}`.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
#[schemars(rename = "Mention")]
pub enum MentionView<'a> {
    Mention {
        messages: Vec<MessageView<'a>>,
    },
    Placeholder {
        #[schemars(range(min = 1))]
        count: usize,
    },
}

/// A conversation's label: `conversationName`, `conversationImageURL`.
pub struct ConversationLabel;

impl LabelKeys for ConversationLabel {
    const KEYS: [&'static str; 2] = ["conversationName", "conversationImageURL"];
    const DOCS: [&'static str; 2] = ["The name of its chat.", "The image of its chat."];
}

impl<'a> From<&'a Mention> for MentionView<'a> {
    fn from(m: &'a Mention) -> Self {
        match m {
            Mention::Messages(items) => MentionView::Mention { messages: items.iter().map(message_view).collect() },
            Mention::Placeholder(count) => MentionView::Placeholder { count: *count },
        }
    }
}

/// `{items, hasMore}` of the mention list (the `MentionList` schema).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "MentionList")]
pub struct MentionList<'a> {
    pub items: Vec<MentionView<'a>>,
    pub has_more: bool,
}

fn chat_param(req: &Req) -> Result<Option<uuid::Uuid>> {
    if req.params.iter().any(|(k, _)| k == "chatUUID") {
        req.uuid_param("chatUUID").map(Some)
    } else {
        Ok(None)
    }
}

/// # `GET /v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations`
/// # `GET /v1/replicas/{replicaUUID}/conversations` (deprecated: every chat)
/// `{success, items, total}`; paging and sorting as chats (default `lastReplicaReplyAt`).
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let q = ConversationListParams::read(&req)?;
    let (items, total) = service::list(&app.store, replica.id, chat_param(&req)?, viewer, q).await?;
    Ok(Reply::ok(&Page { items: items.iter().map(view).collect(), total }))
}

/// # `GET /v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}`
/// # `GET /v1/replicas/{replicaUUID}/conversations/{conversationUUID}` (deprecated)
/// The conversation's fields plus `success` (flat).
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let id = req.uuid_param("conversationUUID")?;
    let c = service::get(&app.store, replica.id, chat_param(&req)?, id, viewer).await?;
    Ok(Reply::ok(&view(&c)))
}

/// # `GET /v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/messages`
/// # `GET /v1/replicas/{replicaUUID}/conversations/{conversationUUID}/messages` (deprecated)
/// `{success, items}` oldest first; `limit`, `beforeUUID`, `afterUUID`.
pub async fn messages(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let (id, chat, cursor) = (req.uuid_param("conversationUUID")?, chat_param(&req)?, cursor(&req)?);
    let items = service::messages(&app.store, replica, chat, id, viewer, cursor).await?;
    Ok(messages_reply(&items))
}

/// Body of `PATCH …/conversations/{conversationUUID}` (unknown fields are ignored).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ConversationPatch")]
struct PatchBody {
    #[schemars(length(max = MAX_SUMMARY))]
    summary: Option<String>,
    #[schemars(length(max = MAX_INSIGHTS), inner(length(min = 1, max = MAX_INSIGHT_CHARS)))]
    common_questions: Option<Vec<String>>,
    #[schemars(length(max = MAX_INSIGHTS), inner(length(min = 1, max = MAX_INSIGHT_CHARS)))]
    common_topics: Option<Vec<String>>,
}

/// Most items of `commonQuestions` / `commonTopics`.
pub const MAX_INSIGHTS: usize = 50;
/// Most characters of an item of `commonQuestions` / `commonTopics`.
const MAX_INSIGHT_CHARS: usize = 1000;
/// Most characters of a conversation's `summary`.
const MAX_SUMMARY: usize = 10_000;

fn check_list(field: &str, items: &Option<Vec<String>>) -> Result<()> {
    let items = items.as_deref().unwrap_or_default();
    if items.len() > MAX_INSIGHTS {
        return Err(Error::invalid(field, format!("must have at most {MAX_INSIGHTS} items")));
    }
    items.iter().try_for_each(|s| check_len(field, s, 1, MAX_INSIGHT_CHARS))
}

/// # `PATCH /v1/replicas/{replicaUUID}/conversations/{conversationUUID}`
/// An owner's correction of `summary` (≤ 10000 chars), `commonQuestions`, `commonTopics`
/// (≤ 50 items of 1–1000 chars); the fields given replace the stored ones. `{success}`.
pub async fn patch(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let id = req.uuid_param("conversationUUID")?;
    let body: PatchBody = req.json()?;
    if let Some(s) = &body.summary {
        check_len("summary", s, 0, MAX_SUMMARY)?;
    }
    check_list("commonQuestions", &body.common_questions)?;
    check_list("commonTopics", &body.common_topics)?;
    let fix =
        Insights { summary: body.summary, common_questions: body.common_questions, common_topics: body.common_topics };
    service::patch(&app.store, replica.id, id, viewer, fix).await?;
    Ok(Reply::done())
}

/// The 202 of [`recompute`]: no field but the `success` [`Reply::success`] adds (the `Done`
/// schema).
#[derive(Serialize)]
struct Queued {}

/// # `POST /v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/insights`
/// Ours: asks for `summary`, `commonQuestions` and `commonTopics` to be computed again
/// (replacing an owner's `PATCH`); 202 `{success}` once queued (see
/// `service::chats::conversations::recompute`). The replica's owner or the organization key alone;
/// 404 otherwise.
pub async fn recompute(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let (chat, id) = (req.uuid_param("chatUUID")?, req.uuid_param("conversationUUID")?);
    service::recompute(&app.store, replica.id, chat, id, viewer).await?;
    Ok(Reply::success(202, &Queued {}))
}

/// # `GET /v1/replicas/{replicaUUID}/conversations/{conversationUUID}/mentions` (deprecated)
/// `{success, items, hasMore}`: `{type: "mention", messages}` and `{type: "placeholder",
/// count}` items, oldest first. Query: `limit` (mentions, 1–100, default 20), `beforeUUID`,
/// `contextMessages` (0–10, default 2), `minimumMessagesInPlaceholder` (1–100, default 3).
pub async fn mentions(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let id = req.uuid_param("conversationUUID")?;
    let q: MentionParams = query::read(&req)?;
    let q = MentionQuery {
        limit: q.limit.get(),
        before: message("beforeUUID", q.before)?,
        context: q.context_messages.get(),
        min_placeholder: q.minimum_messages_in_placeholder.get(),
    };
    let (found, has_more) = service::mentions_of(&app.store, replica, id, viewer, q).await?;
    Ok(Reply::ok(&MentionList { items: found.iter().map(MentionView::from).collect(), has_more }))
}

/// The query of the mentions.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(default, rename_all = "camelCase")]
struct MentionParams {
    /// Most mentions.
    limit: Int<1, 100, 20>,
    /// Only mentions older than this message (paging back with `hasMore`).
    #[serde(rename = "beforeUUID")]
    before: Option<Uuid>,
    /// Neighbours shown on each side of a mentioning message.
    context_messages: Int<0, 10, 2>,
    /// Runs of left-out messages shorter than this are shown as messages instead of a placeholder.
    minimum_messages_in_placeholder: Int<1, 100, 3>,
}

/// The recomputation of a conversation's insights (our own operation: its description says why it is a POST).
fn recompute_row() -> Op {
    op(
        "POST",
        "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/insights",
        "recomputeConversationInsights",
        CHATS,
        "Compute a conversation's summary, questions and topics again",
    )
    .ok(202, "Done")
    .describe(
        "Ours (the interface has no such operation). `summary`, `commonQuestions` and `commonTopics` are computed \
        once a conversation closes (30 minutes without messages): by the replica's language model when its \
        `llm.model` is served by an upstream (asked for a JSON object in the conversation's language), locally \
        otherwise (questions the user asked, distinctive terms by TF-IDF, a short extractive summary). An \
        owner's `PATCH` is kept until this operation is called: it clears the three fields (the `PATCH` \
        included) and queues the conversation; 202 once queued (durably). A closed conversation is computed \
        again within seconds, an open one once it closes; read the conversation to see the result (`summary` \
        is absent until then). When the upstream fails, the conversation stays queued and is retried with a \
        backoff (1 minute, doubled up to 1 hour; computed locally after 24 failures in a row, about 19 hours). Only the \
        replica's owner or the organization key alone; others get 404, as for a conversation of another chat. \
        A POST on a sub-resource was chosen over a PATCH flag because it starts work rather than sets fields.",
    )
}

/// The document's rows of this file's operations (see `super::operations`).
pub fn operations() -> Vec<Operation> {
    let conv = "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}";
    let old = "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}";
    vec![
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations",
            "listChatConversations",
            CHATS,
            "Conversations of a chat",
        )
        .query_of::<ConversationListParams>()
        .ok_as::<Page<ConversationView>>(200, "ConversationList")
        .describe("A new conversation starts after 30 minutes without messages in the chat.")
        .serve(Access::Either, handler!(list)),
        op("GET", conv, "getChatConversation", CHATS, "Read a conversation")
            .ok_as::<ConversationView>(200, "ConversationRead")
            .serve(Access::Either, handler!(read)),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/conversations",
            "listConversations",
            CHATS,
            "List conversations (every chat)",
        )
        .deprecated()
        .query_of::<ConversationListParams>()
        .ok_as::<Page<ConversationView>>(200, "ConversationList")
        .describe("Deprecated: use `…/chats/{chatUUID}/conversations`. The conversations of every chat.")
        .serve(Access::Either, handler!(list)),
        op("GET", old, "getConversation", CHATS, "Read a conversation")
            .deprecated()
            .ok_as::<ConversationView>(200, "ConversationRead")
            .describe("Deprecated: use `…/chats/{chatUUID}/conversations/{conversationUUID}`.")
            .serve(Access::Either, handler!(read)),
        op("PATCH", old, "updateConversation", CHATS, "Correct a conversation's summary, questions, topics")
            .body_of::<PatchBody>()
            .describe(
                "An owner's correction: the fields given replace the stored ones (unknown fields are ignored) and are \
                kept until a recomputation is asked for (`POST …/chats/{chatUUID}/conversations/{conversationUUID}/\
                insights`). Only the replica's owner or the organization key alone; others get 404.",
            )
            .serve(Access::Either, handler!(patch)),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}/mentions",
            "listConversationMentions",
            CHATS,
            "Mentions of the replica",
        )
        .deprecated()
        .query_of::<MentionParams>()
        .ok_of::<MentionList>(200)
        .describe(
            "Deprecated. Messages that mention the replica (`@slug`, or `@name` without spaces, in any case), \
                newest `limit` mentions, oldest first: `{type: mention, messages}` (the mentioning message with \
                `contextMessages` neighbours each side) and `{type: placeholder, count}` for runs left out. \
                `hasMore`: older mentions exist (page back with `beforeUUID` = the first message's uuid).",
        )
        .serve(Access::Either, handler!(mentions)),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/messages",
            "listChatConversationMessages",
            CHATS,
            "Messages of a conversation",
        )
        .query_of::<MessagesParams>()
        .ok_as::<Items<MessageView>>(200, "MessageList")
        .serve(Access::Either, handler!(messages)),
        recompute_row().serve(Access::Either, handler!(recompute)),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}/messages",
            "listConversationMessages",
            CHATS,
            "Messages of a conversation",
        )
        .deprecated()
        .query_of::<MessagesParams>()
        .ok_as::<Items<MessageView>>(200, "MessageList")
        .describe("Deprecated: use `…/chats/{chatUUID}/conversations/{conversationUUID}/messages`.")
        .serve(Access::Either, handler!(messages)),
    ]
}
