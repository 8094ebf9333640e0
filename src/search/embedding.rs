//! Computes the embeddings of the chunks that lack one, in the background, fairly across
//! replicas.
//!
//! The indexer makes a changed entry searchable by BM25 at once and hands it here when some of
//! its chunks have no vector of the replica's model yet ([`Queue::push`]); the entry reports
//! `READY` only once all are in. This task embeds [`SLICE`] chunks at a time, taking the
//! replicas in turn (one upload of thousands of chunks does not hold back another replica's
//! small one), and stores each slice's vectors in one write. The write that completes an entry
//! appends an outbox row for it, so the indexer loads its vectors and marks it `READY` (the
//! status is still written only after searches see what it promises).
//!
//! A vector is stored with the model id and the key of the text it was computed from
//! ([`ChunkVector`]): a chunk whose text changed meanwhile is skipped (its entry is queued
//! again by the indexer with the new text). An embedding failure (an upstream down) is logged
//! and retried after [`RETRY`]; BM25 keeps answering meanwhile.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use uuid::Uuid;

use super::vectors::{self, passage_text, text_key};
use super::Search;
use crate::embed::catalog::Embedders;
use crate::error::Result;
use crate::store::records::{ChunkVector, KbEntry, KbStatus};
use crate::store::{self, kb, tables, Store};

/// Most chunks embedded in one step (one store write): ~1.5 s of one core for MiniLM.
pub const SLICE: usize = 16;
/// Wait before trying again after an embedding failure.
const RETRY: Duration = Duration::from_secs(5);

/// Entries waiting for vectors, per replica, taken in turn.
#[derive(Default)]
pub struct Queue {
    waiting: Mutex<Waiting>,
    notify: Notify,
}

#[derive(Default)]
struct Waiting {
    by_replica: BTreeMap<Uuid, VecDeque<u64>>,
    /// The replica served last.
    last: Option<Uuid>,
}

impl Queue {
    /// Queues `entry` of `replica` (once).
    pub fn push(&self, replica: Uuid, entry: u64) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let q = w.by_replica.entry(replica).or_default();
        if !q.contains(&entry) {
            q.push_back(entry);
        }
        drop(w);
        self.notify.notify_one();
    }

    /// The next entry, of the replica after the one served last.
    fn next(&self) -> Option<(Uuid, u64)> {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let after = w.last.and_then(|l| w.by_replica.range(l..).map(|(r, _)| *r).find(|r| *r != l));
        let replica = after.or_else(|| w.by_replica.keys().next().copied())?;
        let q = w.by_replica.get_mut(&replica)?;
        let entry = q.pop_front()?;
        if q.is_empty() {
            w.by_replica.remove(&replica);
        }
        w.last = Some(replica);
        Some((replica, entry))
    }

    /// Puts `entry` back at the head of its replica's turn (a slice of it is left).
    fn put_back(&self, replica: Uuid, entry: u64) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let q = w.by_replica.entry(replica).or_default();
        if !q.contains(&entry) {
            q.push_front(entry);
        }
    }

    /// How many entries wait.
    pub fn len(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).by_replica.values().map(VecDeque::len).sum()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The chunks of an entry still to embed.
struct Work {
    revision: u64,
    model: String,
    /// `(chunk index, text to embed)`.
    missing: Vec<(u32, String)>,
}

/// What is left to embed of `entry`; `None` when the entry is gone or has nothing to embed.
fn work_of(txn: &redb::ReadTransaction, embedders: &Embedders, entry: u64) -> Result<Option<Work>> {
    let Some(e) = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KBID_ENTRY)?, entry)? else {
        return Ok(None);
    };
    if e.chunk_count == 0 || e.status == KbStatus::Unprocessable {
        return Ok(None);
    }
    let model = vectors::model_of(txn, embedders, e.replica)?;
    let chunks = kb::chunks_of(&txn.open_table(tables::KBCHUNK_CHUNK)?, entry)?;
    let have: Vec<u32> = vectors::stored(txn, entry, &chunks, &model)?.into_iter().map(|(c, _)| c).collect();
    let missing = chunks
        .iter()
        .enumerate()
        .filter(|(i, _)| !have.contains(&(*i as u32)))
        .map(|(i, c)| (i as u32, passage_text(c)))
        .collect();
    Ok(Some(Work { revision: e.revision, model, missing }))
}

/// Stores the vectors of a slice of `entry` (those whose chunk still has the text embedded)
/// and drops those of chunks past its end; when `last`, appends the outbox row that lets the
/// indexer mark the entry `READY`.
fn store_slice(
    txn: &redb::WriteTransaction,
    entry: u64,
    work: &Work,
    computed: &[(u32, u64, Vec<f32>)],
    last: bool,
) -> Result<()> {
    let Some(e) = store::get::<u64, KbEntry, _>(&txn.open_table(tables::KBID_ENTRY)?, entry)? else {
        return Ok(());
    };
    let chunks = kb::chunks_of(&txn.open_table(tables::KBCHUNK_CHUNK)?, entry)?;
    let mut table = txn.open_table(tables::KBCHUNK_VECTOR)?;
    for (chunk, key, vector) in computed {
        let current = chunks.get(*chunk as usize).map(|c| text_key(&passage_text(c)));
        if current == Some(*key) {
            let v = ChunkVector { model: work.model.clone(), text_key: *key, vector: vector.clone() };
            table.insert((entry, *chunk), store::codec::encode(&v)?.as_slice())?;
        }
    }
    table.retain_in((entry, e.chunk_count)..=(entry, u32::MAX), |_, _| false)?;
    if last && e.revision == work.revision {
        kb::enqueue(txn, entry, e.revision)?;
    }
    Ok(())
}

/// Embeds and stores one slice of the next waiting entry; `false` when none waits.
pub async fn step(store: &Store, search: &Search) -> Result<bool> {
    let Some(embedders) = search.embedders.clone() else { return Ok(false) };
    let Some((replica, entry)) = search.embedding.next() else { return Ok(false) };
    let e = embedders.clone();
    let Some(work) = store.read(move |txn| work_of(txn, &e, entry)).await? else { return Ok(true) };
    let slice: Vec<(u32, String)> = work.missing.iter().take(SLICE).cloned().collect();
    let last = slice.len() == work.missing.len();
    let model = embedders.of_replica(Some(&work.model));
    let texts: Vec<String> = slice.iter().map(|(_, t)| t.clone()).collect();
    let embedded = match model.embed_passages(texts).await {
        Ok(v) => v,
        Err(err) => {
            search.embedding.put_back(replica, entry);
            return Err(err);
        }
    };
    let computed: Vec<(u32, u64, Vec<f32>)> =
        slice.iter().zip(embedded).map(|((c, t), v)| (*c, text_key(t), v)).collect();
    let work = Arc::new(work);
    let computed = Arc::new(computed);
    store.write_kb(move |txn| store_slice(txn, entry, &work, &computed, last)).await?;
    if !last {
        search.embedding.put_back(replica, entry);
    }
    Ok(true)
}

/// Starts the embedding task (nothing to do without an embedding model); it ends at its next
/// step once `stop` is requested.
pub fn spawn(store: Store, search: Arc<Search>, mut stop: crate::stop::Stop) {
    if search.embedders.is_none() {
        return;
    }
    tokio::spawn(async move {
        while !stop.requested() {
            match step(&store, &search).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "embedding chunks failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(RETRY) => continue,
                        _ = stop.wait() => break,
                    }
                }
            }
            tokio::select! {
                _ = search.embedding.notify.notified() => {}
                _ = stop.wait() => break,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_take_turns_and_an_entry_put_back_keeps_its_place() {
        let q = Queue::default();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        q.push(a, 1);
        q.push(a, 2);
        q.push(a, 1);
        q.push(b, 9);
        assert_eq!(q.len(), 3);
        assert_eq!(q.next(), Some((a, 1)));
        q.put_back(a, 1);
        assert_eq!(q.next(), Some((b, 9)), "the other replica's turn");
        assert_eq!(q.next(), Some((a, 1)), "the entry put back comes first in its replica's turn");
        assert_eq!(q.next(), Some((a, 2)));
        assert_eq!(q.next(), None);
        assert!(q.is_empty());
    }
}
