//! Computes the embeddings of the chunks that lack one, in the background, fairly across
//! replicas.
//!
//! The indexer makes a changed entry searchable by BM25 at once and hands it here when some of
//! its chunks have no vector of the replica's model yet ([`Queue::push`]); the entry reports
//! `READY` only once all are in. A chunk's vectors are its own and one per prose sentence
//! ([`sentence_texts`], for the embedded reader: about as many tokens again as the chunk, so
//! embedding takes about twice as long as the chunks' alone). This task embeds [`SLICE`]
//! chunks at a time, taking the replicas in turn (one upload of thousands of chunks does not
//! hold back another replica's small one), and stores each slice's vectors in one write. The write that completes an entry
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

use super::vectors::{self, passage_text, sentence_texts, text_key};
use super::Search;
use crate::embed::catalog::Embedders;
use crate::error::Result;
use crate::store::records::{ChunkVector, KbStatus};
use crate::store::{kb, Store};

/// Most chunks embedded in one step (one store write), with their sentences: ~3 s of one core
/// for MiniLM.
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
    by_replica: BTreeMap<Uuid, VecDeque<Waiter>>,
    /// The replica served last.
    last: Option<Uuid>,
}

/// A waiting entry and, once a slice of it was embedded, what is left of it (read from the
/// store once per entry, not once per slice).
struct Waiter {
    entry: u64,
    rest: Option<Work>,
}

impl Queue {
    /// Queues `entry` of `replica` (once); an entry already waiting is read from the store
    /// again when its turn comes (its text may have changed).
    pub fn push(&self, replica: Uuid, entry: u64) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let q = w.by_replica.entry(replica).or_default();
        match q.iter_mut().find(|x| x.entry == entry) {
            Some(waiting) => waiting.rest = None,
            None => q.push_back(Waiter { entry, rest: None }),
        }
        drop(w);
        self.notify.notify_one();
    }

    /// The next entry, of the replica after the one served last.
    fn next(&self) -> Option<(Uuid, Waiter)> {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let after = w.last.and_then(|l| w.by_replica.range(l..).map(|(r, _)| *r).find(|r| *r != l));
        let replica = after.or_else(|| w.by_replica.keys().next().copied())?;
        let q = w.by_replica.get_mut(&replica)?;
        let waiter = q.pop_front()?;
        if q.is_empty() {
            w.by_replica.remove(&replica);
        }
        w.last = Some(replica);
        Some((replica, waiter))
    }

    /// Puts `entry` back at the head of its replica's turn with what is left of it, unless it
    /// was queued again meanwhile (then it is read again).
    fn put_back(&self, replica: Uuid, entry: u64, rest: Work) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let q = w.by_replica.entry(replica).or_default();
        if !q.iter().any(|x| x.entry == entry) {
            q.push_front(Waiter { entry, rest: Some(rest) });
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
#[derive(Debug, PartialEq)]
struct Work {
    revision: u64,
    model: String,
    missing: Vec<Missing>,
}

/// A chunk to embed: its index, its text ([`passage_text`]) and its sentences'
/// ([`sentence_texts`]).
type Missing = (u32, String, Vec<String>);

/// The vectors of a chunk: its index, the key of its text, its vector and its sentences'.
type Computed = (u32, u64, Vec<f32>, Vec<Vec<f32>>);

/// What is left to embed of `entry`; `None` when the entry is gone or has nothing to embed.
fn work_of(txn: &crate::store::kv::ReadTransaction, embedders: &Embedders, entry: u64) -> Result<Option<Work>> {
    let Some(e) = kb::entry(txn, entry)? else {
        return Ok(None);
    };
    if e.chunk_count == 0 || e.status == KbStatus::Unprocessable {
        return Ok(None);
    }
    let model = vectors::model_of(txn, embedders, e.replica)?;
    let chunks = kb::chunks(txn, entry)?;
    let have: Vec<u32> = vectors::stored(txn, entry, &chunks, &model)?.into_iter().map(|(c, _)| c).collect();
    let missing = chunks
        .iter()
        .enumerate()
        .filter(|(i, _)| !have.contains(&(*i as u32)))
        .map(|(i, c)| (i as u32, passage_text(c), sentence_texts(c)))
        .collect();
    Ok(Some(Work { revision: e.revision, model, missing }))
}

/// Stores the vectors of a slice of `entry` (those whose chunk still has the text embedded)
/// and drops those of chunks past its end; when `last`, appends the outbox row that lets the
/// indexer mark the entry `READY`.
fn store_slice(
    txn: &crate::store::kv::WriteTransaction,
    entry: u64,
    (revision, model): (u64, &str),
    computed: &[Computed],
    last: bool,
) -> Result<()> {
    let Some(e) = kb::entry(txn, entry)? else {
        return Ok(());
    };
    let mut current = Vec::with_capacity(computed.len());
    for (chunk, key, vector, sentences) in computed {
        if kb::chunk(txn, (entry, *chunk))?.is_some_and(|c| text_key(&passage_text(&c)) == *key) {
            let (vector, sentences) = (vector.clone(), Some(sentences.clone()));
            current.push((*chunk, ChunkVector { model: model.to_string(), text_key: *key, vector, sentences }));
        }
    }
    kb::put_vectors(txn, entry, &current, e.chunk_count)?;
    if last && e.revision == revision {
        kb::enqueue(txn, entry, e.revision)?;
    }
    Ok(())
}

/// Embeds and stores one slice of the next waiting entry; `false` when none waits.
pub async fn step(store: &Store, search: &Search) -> Result<bool> {
    let Some(embedders) = search.embedders.clone() else { return Ok(false) };
    let Some((replica, Waiter { entry, rest })) = search.embedding.next() else { return Ok(false) };
    let mut work = match rest {
        Some(work) => work,
        None => {
            let e = embedders.clone();
            let Some(work) = store.read(move |txn| work_of(txn, &e, entry)).await? else { return Ok(true) };
            work
        }
    };
    let take = work.missing.len().min(SLICE);
    let slice: Vec<Missing> = work.missing.drain(..take).collect();
    let last = work.missing.is_empty();
    // the chunks' texts, then their sentences': one call
    let mut texts: Vec<String> = slice.iter().map(|(_, t, _)| t.clone()).collect();
    texts.extend(slice.iter().flat_map(|(_, _, s)| s.iter().cloned()));
    let embedded = match embedders.of_replica(Some(&work.model)).embed_passages(texts).await {
        Ok(v) => v,
        Err(err) => {
            work.missing.splice(0..0, slice);
            search.embedding.put_back(replica, entry, work);
            return Err(err);
        }
    };
    let computed: Arc<Vec<Computed>> = Arc::new(split(&slice, embedded));
    let (revision, model) = (work.revision, Arc::<str>::from(work.model.as_str()));
    store.write_kb(move |txn| store_slice(txn, entry, (revision, &model), &computed, last)).await?;
    if !last {
        search.embedding.put_back(replica, entry, work);
    }
    Ok(true)
}

/// The vectors of `slice` from `embedded`: its chunks', then its sentences', in order.
fn split(slice: &[Missing], embedded: Vec<Vec<f32>>) -> Vec<Computed> {
    let mut rest = embedded.into_iter();
    let chunks: Vec<Vec<f32>> = rest.by_ref().take(slice.len()).collect();
    let sentences = slice.iter().map(|(_, _, s)| rest.by_ref().take(s.len()).collect::<Vec<_>>());
    let keys = slice.iter().map(|(c, t, _)| (*c, text_key(t)));
    keys.zip(chunks).zip(sentences).map(|(((c, key), v), s)| (c, key, v, s)).collect()
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
        let taken = |q: &Queue| q.next().map(|(r, w)| (r, w.entry, w.rest));
        assert_eq!(taken(&q), Some((a, 1, None)));
        let rest = || Work { revision: 1, model: "m".into(), missing: vec![(3, "text".into(), Vec::new())] };
        q.put_back(a, 1, rest());
        assert_eq!(taken(&q), Some((b, 9, None)), "the other replica's turn");
        assert_eq!(taken(&q), Some((a, 1, Some(rest()))), "put back first in its replica's turn, with its rest");
        // queued again after it was put back: read again from the store
        q.put_back(a, 1, rest());
        q.push(a, 1);
        assert_eq!(taken(&q), Some((a, 1, None)));
        assert_eq!(taken(&q), Some((a, 2, None)));
        assert!(taken(&q).is_none());
        assert!(q.is_empty());
    }

    #[test]
    fn a_slice_s_vectors_are_its_chunks_then_its_sentences() {
        let slice = vec![(0, "a".into(), vec!["a1".into(), "a2".into()]), (4, "b".into(), vec!["b1".into()])];
        let embedded = [[1.0], [2.0], [3.0], [4.0], [5.0]].map(|v: [f32; 1]| v.to_vec()).to_vec();
        let computed = split(&slice, embedded);
        assert_eq!(computed[0], (0, text_key("a"), vec![1.0], vec![vec![3.0], vec![4.0]]));
        assert_eq!(computed[1], (4, text_key("b"), vec![2.0], vec![vec![5.0]]));
    }
}
