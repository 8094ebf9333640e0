//! Conversations (spec §4.2 conversation rows, docs/decisions.md "Chat"): below a chat, and the
//! deprecated operations below the replica (same data), an owner's `PATCH`, and mentions.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::chats::{cursor, kind, list_query, message_view, messages_reply, put_counts, replica_and_viewer};
use crate::app::App;
use crate::error::{Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::chats::{Labeled, SortBy};
use crate::service::check_len;
use crate::service::conversations::{self as service, Insights, Mention, MentionQuery};
use crate::store::records::Conversation;

/// A conversation on the wire (docs/decisions.md "Chat"); absent optional fields are omitted.
pub fn view(c: &Labeled<Conversation>) -> Value {
    let conv = &c.item;
    let mut v = json!({
        "uuid": conv.id,
        "chatUUID": conv.chat,
        "source": conv.source,
        "conversationType": kind(conv.group),
        "commonQuestions": conv.common_questions,
        "commonTopics": conv.common_topics,
    });
    put_counts(&mut v, &conv.counts);
    if let Some(n) = &c.name {
        v["conversationName"] = json!(n);
    }
    if let Some(i) = &c.image {
        v["conversationImageURL"] = json!(i);
    }
    if let Some(s) = &conv.summary {
        v["summary"] = json!(s);
    }
    v
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
    let q = list_query(&req, SortBy::LastReplicaReplyAt)?;
    let (items, total) = service::list(&app.store, replica.id, chat_param(&req)?, viewer, q).await?;
    Ok(Reply::ok(&json!({ "items": items.iter().map(view).collect::<Vec<_>>(), "total": total })))
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
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PatchBody {
    summary: Option<String>,
    common_questions: Option<Vec<String>>,
    common_topics: Option<Vec<String>>,
}

/// Most items of `commonQuestions` / `commonTopics`.
pub const MAX_INSIGHTS: usize = 50;

fn check_list(field: &str, items: &Option<Vec<String>>) -> Result<()> {
    let items = items.as_deref().unwrap_or_default();
    if items.len() > MAX_INSIGHTS {
        return Err(Error::invalid(field, format!("must have at most {MAX_INSIGHTS} items")));
    }
    items.iter().try_for_each(|s| check_len(field, s, 1, 1000))
}

/// # `PATCH /v1/replicas/{replicaUUID}/conversations/{conversationUUID}`
/// An owner's correction of `summary` (≤ 10000 chars), `commonQuestions`, `commonTopics`
/// (≤ 50 items of 1–1000 chars); the fields given replace the stored ones. `{success}`.
pub async fn patch(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let id = req.uuid_param("conversationUUID")?;
    let body: PatchBody = req.json()?;
    if let Some(s) = &body.summary {
        check_len("summary", s, 0, 10_000)?;
    }
    check_list("commonQuestions", &body.common_questions)?;
    check_list("commonTopics", &body.common_topics)?;
    let fix =
        Insights { summary: body.summary, common_questions: body.common_questions, common_topics: body.common_topics };
    service::patch(&app.store, replica.id, id, viewer, fix).await?;
    Ok(Reply::done())
}

/// # `POST /v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/insights`
/// Ours: asks for `summary`, `commonQuestions` and `commonTopics` to be computed again
/// (replacing an owner's `PATCH`); 202 `{success}` once queued (see
/// `service::conversations::recompute`). The replica's owner or the organization key alone;
/// 404 otherwise.
pub async fn recompute(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let (chat, id) = (req.uuid_param("chatUUID")?, req.uuid_param("conversationUUID")?);
    service::recompute(&app.store, replica.id, chat, id, viewer).await?;
    Ok(Reply::success(202, &json!({})))
}

/// # `GET /v1/replicas/{replicaUUID}/conversations/{conversationUUID}/mentions` (deprecated)
/// `{success, items, hasMore}`: `{type: "mention", messages}` and `{type: "placeholder",
/// count}` items, oldest first. Query: `limit` (mentions, 1–100, default 20), `beforeUUID`,
/// `contextMessages` (0–10, default 2), `minimumMessagesInPlaceholder` (1–100, default 3).
pub async fn mentions(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let id = req.uuid_param("conversationUUID")?;
    let c = cursor(&req)?;
    let q = MentionQuery {
        limit: c.limit,
        before: c.before,
        context: req.query_int(&["contextMessages"], 2, 0, 10)? as usize,
        min_placeholder: req.query_int(&["minimumMessagesInPlaceholder"], 3, 1, 100)? as usize,
    };
    let (found, has_more) = service::mentions_of(&app.store, replica, id, viewer, q).await?;
    let items: Vec<Value> = found
        .iter()
        .map(|m| match m {
            Mention::Messages(items) => {
                json!({ "type": "mention", "messages": items.iter().map(message_view).collect::<Vec<_>>() })
            }
            Mention::Placeholder(count) => json!({ "type": "placeholder", "count": count }),
        })
        .collect();
    Ok(Reply::ok(&json!({ "items": items, "hasMore": has_more })))
}
