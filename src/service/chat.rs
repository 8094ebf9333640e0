//! Chat completions (spec §4.2 `POST …/chat/completions`, DECISIONS.md "Chat"): retrieve the
//! replica's best chunks, generate the reply, store both history items with the sources.

use std::sync::Arc;

use uuid::Uuid;

use super::history::{self, NewItem};
use crate::error::{Error, Result};
use crate::generate::embedded::{self, Persona};
use crate::search::Search;
use crate::store::records::{Chunk, KbEntry, Replica, SourceRef};
use crate::store::{self, tables, Store};

/// Chunks retrieved per question.
pub const TOP_K: usize = 5;
/// Sources kept with an answer at most.
pub const MAX_SOURCES: usize = 3;

/// A completion request after validation.
#[derive(Debug, Clone)]
pub struct Ask {
    pub content: String,
    pub skip_chat_history: bool,
    pub source: String,
    pub channel_data: Option<String>,
    pub channel_key: Option<String>,
}

/// The reply, the sources it was built from, and the backend that made it.
pub struct Completion {
    pub content: String,
    pub sources: Vec<SourceRef>,
    pub backend: &'static str,
    /// Id of the stored assistant item (`None` with `skip_chat_history`).
    pub message_id: Option<u64>,
}

/// The best chunks of `replica` for `query`, re-read from the store (chunks of entries deleted
/// since they were indexed are dropped).
pub async fn retrieve(store: &Store, search: &Arc<Search>, replica: Uuid, query: &str) -> Result<Vec<SourceRef>> {
    let (s, q) = (search.clone(), query.to_string());
    let hits = tokio::task::spawn_blocking(move || s.search(replica, &q, TOP_K)).await.map_err(Error::internal)??;
    store
        .read(move |txn| {
            let entries = txn.open_table(tables::KB_ENTRIES)?;
            let chunks = txn.open_table(tables::KB_CHUNKS)?;
            let mut out = Vec::new();
            for h in hits {
                let Some(e) = store::get::<u64, KbEntry, _>(&entries, h.entry)? else { continue };
                let Some(c) = store::get::<(u64, u32), Chunk, _>(&chunks, (h.entry, h.chunk))? else { continue };
                if e.replica == replica {
                    out.push(SourceRef {
                        id: e.id,
                        score: h.score,
                        created_at: e.created_at,
                        name: c.title,
                        content: c.text,
                    });
                }
            }
            Ok(out)
        })
        .await
}

/// Answers `ask` as `replica` for `user` and stores the exchange unless asked not to.
pub async fn complete(
    store: &Store,
    search: &Arc<Search>,
    replica: &Replica,
    user: Uuid,
    ask: Ask,
) -> Result<Completion> {
    let retrieved = retrieve(store, search, replica.id, &ask.content).await?;
    tracing::debug!(
        replica = %replica.id,
        retrieved = ?retrieved.iter().map(|s| (s.name.as_str(), s.score)).collect::<Vec<_>>(),
        "retrieval"
    );
    let persona = Persona { name: &replica.name, greeting: &replica.greeting };
    let answer = embedded::reply(&persona, &ask.content, &retrieved);
    let sources: Vec<SourceRef> =
        answer.used.iter().take(MAX_SOURCES).filter_map(|i| retrieved.get(*i).cloned()).collect();
    let mut completion =
        Completion { content: answer.text, sources, backend: crate::generate::EMBEDDED, message_id: None };
    if !ask.skip_chat_history {
        // The reply to a channel message is keyed after it, so a retried message (same channel
        // key) stores neither a second question nor a second answer.
        let reply_key = ask.channel_key.as_ref().map(|k| format!("reply:{k}"));
        let question = NewItem {
            role: "user",
            content: ask.content,
            source: ask.source.clone(),
            sources: Vec::new(),
            channel_data: ask.channel_data,
            channel_key: ask.channel_key,
        };
        let reply = NewItem {
            role: "assistant",
            content: completion.content.clone(),
            source: ask.source,
            sources: completion.sources.clone(),
            channel_data: None,
            channel_key: reply_key,
        };
        let ids = history::append(store, replica.id, user, replica.private, vec![question, reply]).await?;
        completion.message_id = ids.last().copied();
    }
    Ok(completion)
}
