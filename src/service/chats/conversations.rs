//! Conversations (docs/decisions.md "Chat"): the runs of a chat's items with no silence longer than
//! 30 minutes, kept at write time by `service::chats::Recorder::record`; their lists, their items,
//! an owner's correction of `summary` / `commonQuestions` / `commonTopics`, and the mentions of
//! the replica in a group conversation.

use uuid::Uuid;

use super::{self as chats, Cursor, Item, Labeled, ListQuery, Viewer};
use crate::error::{Error, Result};
use crate::store::kv::{ReadTransaction, WriteTransaction};
use crate::store::records::{Chat, Conversation, Replica};
use crate::store::{self, codec, k, tables, Store};

/// The conversations of `replica` `viewer` sees: of chat `chat`, or of every chat.
fn all_in(txn: &ReadTransaction, replica: Uuid, chat: Option<Uuid>, viewer: Viewer) -> Result<Vec<Conversation>> {
    let chat_ids: Vec<Uuid> = match chat {
        Some(c) => vec![chats::get_in(txn, replica, c, viewer)?.id],
        None if viewer == Viewer::All => {
            let convs = txn.open_table(tables::CONVERSATIONS)?;
            let r = k(replica);
            return convs
                .range((r, 0, 0)..=(r, u128::MAX, u128::MAX))?
                .map(|row| codec::decode(row?.1.value()))
                .collect();
        }
        None => chats::chats_in(txn, replica, viewer)?.into_iter().map(|c| c.id).collect(),
    };
    let convs = txn.open_table(tables::CONVERSATIONS)?;
    let mut out = Vec::new();
    for c in chat_ids {
        let (r, c) = (k(replica), k(c));
        for row in convs.range((r, c, 0)..=(r, c, u128::MAX))? {
            out.push(codec::decode(row?.1.value())?);
        }
    }
    Ok(out)
}

/// A page of the conversations of `replica` (of chat `chat` when given) `viewer` sees, and
/// their number. 404 when `chat` is given and not seen.
pub async fn list(
    store: &Store,
    replica: Uuid,
    chat: Option<Uuid>,
    viewer: Viewer,
    q: ListQuery,
) -> Result<(Vec<Labeled<Conversation>>, u64)> {
    store
        .read_scan(move |txn| {
            let (page, total) = chats::sort_page(all_in(txn, replica, chat, viewer)?, q, |c| (&c.counts, c.id));
            Ok((page.into_iter().map(|c| label_in(txn, c)).collect::<Result<_>>()?, total))
        })
        .await
}

/// `c` labeled with the name and picture of its chat.
fn label_in(txn: &ReadTransaction, c: Conversation) -> Result<Labeled<Conversation>> {
    let chat = store::get::<(u128, u128), Chat, _>(&txn.open_table(tables::CHATS)?, (k(c.replica), k(c.chat)))?
        .ok_or_else(|| Error::internal(format!("conversation {} without its chat", c.id)))?;
    chats::label_in(txn, &chat, c)
}

/// Conversation `id` of `replica` (in chat `chat` when given) if `viewer` sees it; 404
/// otherwise.
pub fn get_in(
    txn: &ReadTransaction,
    replica: Uuid,
    chat: Option<Uuid>,
    id: Uuid,
    viewer: Viewer,
) -> Result<Conversation> {
    let missing = || Error::not_found("conversation");
    let of = txn.open_table(tables::REPLICACONV_CHAT)?.get((k(replica), k(id)))?.map(|v| v.value());
    let of = of.map(Uuid::from_u128).filter(|c| chat.is_none_or(|want| want == *c)).ok_or_else(missing)?;
    if !viewer.sees(txn, replica, of)? {
        return Err(missing());
    }
    let convs = txn.open_table(tables::CONVERSATIONS)?;
    store::get::<(u128, u128, u128), Conversation, _>(&convs, (k(replica), k(of), k(id)))?.ok_or_else(missing)
}

/// Conversation `id` as `viewer` sees it (see [`get_in`]), labeled.
pub async fn get(
    store: &Store,
    replica: Uuid,
    chat: Option<Uuid>,
    id: Uuid,
    viewer: Viewer,
) -> Result<Labeled<Conversation>> {
    store.read(move |txn| label_in(txn, get_in(txn, replica, chat, id, viewer)?)).await
}

/// An owner's correction of what was derived from a conversation.
#[derive(Debug, Clone, Default)]
pub struct Insights {
    pub summary: Option<String>,
    pub common_questions: Option<Vec<String>>,
    pub common_topics: Option<Vec<String>>,
}

/// Changes conversation `id` of `replica` (of chat `chat` when given) with `change` in one
/// write transaction (given the conversation's key). Only the replica's owner (or the
/// organization key alone) may: 404 for anyone else, as for a missing conversation.
async fn update<F>(store: &Store, replica: Uuid, chat: Option<Uuid>, id: Uuid, viewer: Viewer, change: F) -> Result<()>
where
    F: Fn(&WriteTransaction, (u128, u128, u128), &mut Conversation) -> Result<()> + Send + 'static,
{
    if viewer != Viewer::All {
        return Err(Error::not_found("conversation"));
    }
    store
        .write(move |txn| {
            let of = txn.open_table(tables::REPLICACONV_CHAT)?.get((k(replica), k(id)))?.map(|v| v.value());
            let of =
                of.filter(|c| chat.is_none_or(|want| k(want) == *c)).ok_or_else(|| Error::not_found("conversation"))?;
            let key = (k(replica), of, k(id));
            let mut convs = txn.open_table(tables::CONVERSATIONS)?;
            let mut c = store::get::<(u128, u128, u128), Conversation, _>(&convs, key)?
                .ok_or_else(|| Error::not_found("conversation"))?;
            change(txn, key, &mut c)?;
            store::put(&mut convs, key, &c)
        })
        .await
}

/// Replaces the given fields of conversation `id`. Only the replica's owner (or the
/// organization key alone) may: 404 for anyone else, as for a missing conversation.
pub async fn patch(store: &Store, replica: Uuid, id: Uuid, viewer: Viewer, fix: Insights) -> Result<()> {
    update(store, replica, None, id, viewer, move |_, _, c| {
        if let Some(s) = &fix.summary {
            c.summary = Some(s.clone());
        }
        if let Some(q) = &fix.common_questions {
            c.common_questions = q.clone();
        }
        if let Some(t) = &fix.common_topics {
            c.common_topics = t.clone();
        }
        Ok(())
    })
    .await
}

/// Asks for the insights of conversation `id` (of chat `chat`) to be computed again: clears
/// `summary`, `commonQuestions` and `commonTopics` (an owner's `PATCH` included) and queues the
/// conversation for [`super::insights`], in one write (durable: the queue is a store table). A
/// closed conversation is taken up by the job's next pass, an open one once it closes. Only the
/// replica's owner (or the organization key alone) may: 404 for anyone else, as for a missing
/// conversation or one of another chat.
pub async fn recompute(store: &Store, replica: Uuid, chat: Uuid, id: Uuid, viewer: Viewer) -> Result<()> {
    update(store, replica, Some(chat), id, viewer, |txn, key, c| {
        c.summary = None;
        c.common_questions.clear();
        c.common_topics.clear();
        txn.open_table(tables::OPEN_CONVERSATION)?.insert(key, c.counts.last_message_at)?;
        Ok(())
    })
    .await
}

/// The items of conversation `id` chosen by `cursor` (404 as for [`get_in`]).
pub async fn messages(
    store: &Store,
    replica: std::sync::Arc<Replica>,
    chat: Option<Uuid>,
    id: Uuid,
    viewer: Viewer,
    cursor: Cursor,
) -> Result<Vec<Item>> {
    store
        .read(move |txn| {
            get_in(txn, replica.id, chat, id, viewer)?;
            let index = txn.open_table(tables::CONVMSG_USER)?;
            let ids = chats::ids_in(&index, replica.id, id, cursor, |user| user)?;
            chats::items_in(txn, &replica, &ids)
        })
        .await
}

/// What `GET …/mentions` asks: at most `limit` mentions older than `before`, each with
/// `context` items on either side; runs of fewer than `min_placeholder` left-out items are
/// shown instead of summarized.
#[derive(Debug, Clone, Copy)]
pub struct MentionQuery {
    pub limit: usize,
    pub before: Option<u64>,
    pub context: usize,
    pub min_placeholder: usize,
}

/// One element of a mentions answer.
#[derive(Debug, Clone)]
pub enum Mention {
    /// Mentioning items with their neighbours (and short runs between them).
    Messages(Vec<Item>),
    /// `count` items left out.
    Placeholder(usize),
}

/// Whether `content` mentions `replica`: `@slug` or `@name` (name without spaces), in any
/// case.
pub fn mentions(replica: &Replica, content: &str) -> bool {
    let text = content.to_lowercase();
    let handles = [replica.slug.to_lowercase(), replica.name.to_lowercase().replace(' ', "")];
    handles.iter().any(|h| !h.is_empty() && text.contains(&format!("@{h}")))
}

/// The mentions of `replica` in conversation `id`, newest `q.limit` of them, and whether older
/// ones exist (`hasMore`).
pub async fn mentions_of(
    store: &Store,
    replica: std::sync::Arc<Replica>,
    id: Uuid,
    viewer: Viewer,
    q: MentionQuery,
) -> Result<(Vec<Mention>, bool)> {
    store
        .read(move |txn| {
            get_in(txn, replica.id, None, id, viewer)?;
            let index = txn.open_table(tables::CONVMSG_USER)?;
            let all = Cursor { limit: usize::MAX, before: q.before, after: None };
            let ids = chats::ids_in(&index, replica.id, id, all, |user| user)?;
            let items = chats::items_in(txn, &replica, &ids)?;
            Ok(arrange(items, &replica, q))
        })
        .await
}

/// Groups `items` (oldest first) into mentions and placeholders (see [`MentionQuery`]).
fn arrange(items: Vec<Item>, replica: &Replica, q: MentionQuery) -> (Vec<Mention>, bool) {
    let hits: Vec<usize> = (0..items.len()).filter(|&i| mentions(replica, &items[i].message.content)).collect();
    let has_more = hits.len() > q.limit;
    let hits = &hits[hits.len().saturating_sub(q.limit)..];
    let min = q.min_placeholder.max(1);
    // Windows [start, end) around each mention, merged when the run between them is short.
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for &i in hits {
        let (s, e) = (i.saturating_sub(q.context), (i + q.context + 1).min(items.len()));
        match windows.last_mut() {
            Some(last) if s < last.1 + min => last.1 = last.1.max(e),
            _ => windows.push((s, e)),
        }
    }
    let Some(&(first, _)) = windows.first() else { return (Vec::new(), false) };
    // With older mentions left for the next page, this page starts at its first window.
    let mut pos = if has_more { first } else { 0 };
    let mut out = Vec::new();
    for (s, e) in windows {
        if s - pos >= min {
            out.push(Mention::Placeholder(s - pos));
            pos = s;
        }
        out.push(Mention::Messages(items[pos..e].to_vec()));
        pos = e;
    }
    let tail = items.len() - pos;
    if tail >= min {
        out.push(Mention::Placeholder(tail));
    } else if let Some(Mention::Messages(last)) = out.last_mut() {
        last.extend(items[pos..].iter().cloned());
    }
    (out, has_more)
}
