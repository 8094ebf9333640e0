//! Chats (spec §4.2 chats rows, docs/decisions.md "Chat"): list, read, and a chat's messages.
//! Also the query parsing and message view shared with `api::conversations`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::path_replica;
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::chats::{self, Cursor, Item, Labeled, ListQuery, SortBy, Viewer};
use crate::service::rfc3339;
use crate::store::records::{Chat, Counts, Replica};

/// `page` (≥ 1, default 1), `pageSize` (0–100, default 24), `sortBy` (default `default`),
/// `sortOrder` (`asc|desc`, default `desc`) of chat and conversation lists.
pub fn list_query(req: &Req, default: SortBy) -> Result<ListQuery> {
    let page = req.query_int(&["page"], 1, 1, 1_000_000)?;
    let page_size = req.query_int(&["pageSize"], 24, 0, 100)?;
    let sort_by = match req.query("sortBy") {
        None => default,
        Some(s) => SortBy::parse(s).ok_or_else(|| {
            Error::new(Code::InvalidQuery, format!("sortBy must be one of {}", SortBy::NAMES.join(", ")))
        })?,
    };
    let descending = super::sort_order(req)?.unwrap_or(true);
    Ok(ListQuery { page, page_size, sort_by, descending })
}

/// A message UUID of the query (`beforeUUID`, `afterUUID`); 400 when it names no message.
fn message_param(req: &Req, name: &str) -> Result<Option<u64>> {
    let Some(raw) = req.query(name) else { return Ok(None) };
    let id = uuid::Uuid::parse_str(raw).ok().and_then(chats::message_id);
    id.map(Some).ok_or_else(|| Error::new(Code::InvalidQuery, format!("{name} must be the uuid of a message")))
}

/// `limit` (1–100, default 20), `beforeUUID`, `afterUUID` of message lists.
pub fn cursor(req: &Req) -> Result<Cursor> {
    let limit = req.query_int(&["limit"], 20, 1, 100)? as usize;
    Ok(Cursor { limit, before: message_param(req, "beforeUUID")?, after: message_param(req, "afterUUID")? })
}

/// The replica of the path and who reads its chats.
pub async fn replica_and_viewer(app: &App, req: &Req) -> Result<(std::sync::Arc<Replica>, Viewer)> {
    let replica = path_replica(app, req).await?;
    let viewer = Viewer::of(&replica, req.caller()?.user.as_ref());
    Ok((replica, viewer))
}

/// The counts of a chat or conversation on the wire, into `v`.
pub fn put_counts(v: &mut Value, c: &Counts) {
    v["messageCount"] = json!(c.message_count);
    v["replicaReplyCount"] = json!(c.replica_reply_count);
    v["firstMessageAt"] = json!(rfc3339(c.first_message_at));
    v["lastMessageAt"] = json!(rfc3339(c.last_message_at));
    if let Some(t) = c.last_replica_reply_at {
        v["lastReplicaReplyAt"] = json!(rfc3339(t));
    }
}

/// `individual` or `group`.
pub fn kind(group: bool) -> &'static str {
    if group {
        "group"
    } else {
        "individual"
    }
}

/// A chat on the wire (docs/decisions.md "Chat"); absent optional fields are omitted.
pub fn view(c: &Labeled<Chat>) -> Value {
    let chat = &c.item;
    let mut v = json!({ "uuid": chat.id, "source": chat.source, "chatType": kind(chat.group) });
    put_counts(&mut v, &chat.counts);
    if let Some(n) = &c.name {
        v["chatName"] = json!(n);
    }
    if let Some(i) = &c.image {
        v["chatImageURL"] = json!(i);
    }
    v
}

/// A message item on the wire (docs/decisions.md "Chat"), with the history `id` as a field of
/// our own.
pub fn message_view(it: &Item) -> Value {
    let m = &it.message;
    let mut v = json!({
        "uuid": chats::message_uuid(m.id),
        "id": m.id,
        "createdAt": rfc3339(m.created_at),
        "content": m.content,
        "role": m.role,
        "source": m.source,
        "replicaUUID": m.replica,
    });
    if let Some(n) = &it.sender_name {
        v["senderName"] = json!(n);
    }
    if let Some(i) = &it.sender_image {
        v["senderProfileImageURL"] = json!(i);
    }
    v
}

/// `{success, items}` of message items.
pub fn messages_reply(items: &[Item]) -> Reply {
    Reply::ok(&json!({ "items": items.iter().map(message_view).collect::<Vec<_>>() }))
}

/// # `GET /v1/replicas/{replicaUUID}/chats`
/// `{success, items, total}`; paging and sorting of [`list_query`] (default `replicaReplies`).
pub async fn list(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let q = list_query(&req, SortBy::ReplicaReplies)?;
    let (items, total) = chats::list(&app.store, replica.id, viewer, q).await?;
    Ok(Reply::ok(&json!({ "items": items.iter().map(view).collect::<Vec<_>>(), "total": total })))
}

/// # `GET /v1/replicas/{replicaUUID}/chats/{chatUUID}`
/// `{success, chat}`; 404 for a chat the caller does not see.
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let chat = chats::get(&app.store, replica.id, req.uuid_param("chatUUID")?, viewer).await?;
    Ok(Reply::ok(&json!({ "chat": view(&chat) })))
}

/// # `GET /v1/replicas/{replicaUUID}/chats/{chatUUID}/messages`
/// `{success, items}` oldest first; `limit`, `beforeUUID`, `afterUUID` ([`cursor`]).
pub async fn messages(app: Arc<App>, req: Req) -> Result<Reply> {
    let (replica, viewer) = replica_and_viewer(&app, &req).await?;
    let (chat, cursor) = (req.uuid_param("chatUUID")?, cursor(&req)?);
    let items = chats::messages(&app.store, replica, chat, viewer, cursor).await?;
    Ok(messages_reply(&items))
}
