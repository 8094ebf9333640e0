//! Keeps the index in step with the store through the knowledge-base outbox.
//!
//! Each outbox row names an entry that changed. The indexer reads a batch of rows and, in the
//! same read transaction, the entries' current chunks and language; deletes the entries'
//! documents and adds the current ones (idempotent: applying a row twice gives the same
//! index); commits tantivy with the last seq as payload and reloads the searchers; then, in one
//! store write, removes the rows and marks the revisions `READY`. A crash anywhere in between
//! only makes it apply rows again.
//!
//! **On a store several nodes share** (PostgreSQL, `Store::is_shared`) every node keeps its own
//! index from the same outbox: the rows stay (the other nodes read them too), each node reads
//! past its own position (the seq of its last index commit), looks for rows every
//! notification of another node's commit that added outbox rows (`store::notify`; and every
//! `SHARED_POLL`, 1 s, in case one was lost), and after a start applies its last
//! batch again, in case the crash came between its index commit and the `READY` write. A
//! retrieval on a node that is behind waits for it (`service::chat::catch_up`). The rows every
//! live node has applied are removed ([`super::positions`]); a node that finds rows it had not
//! applied removed rebuilds its index from the tables.
//!
//! **Searchable means searchable** (docs/decisions.md "Knowledge base", status meaning). Clients poll
//! an entry until it reports `VECTOR_CREATED` or `READY` and then ask at once, so an entry
//! reports either only once a searcher sees its chunks: the status is written after the commit
//! and the reload, never before (an earlier version marked `VECTOR_CREATED` before the commit,
//! and a question asked right then was answered "I don't know"). Of the three ways to hold this
//! — the status after the commit, a completion that waits until the index has applied the
//! replica's last write, or a search that also reads what is not yet committed — the first puts
//! no cost on the completion path (nothing is waited for or merged per question) and only
//! delays the status by one commit. This server therefore moves an entry from `PROCESSED_TEXT`
//! straight to `READY`; `VECTOR_CREATED` is only seen on entries stored by older versions. With
//! an embedding model, `READY` also waits for every chunk's vector: an entry lacking some is
//! searchable by BM25 at once and handed to [`super::embedding`], whose last write for it appends
//! the outbox row that brings its vectors into the vector search and the entry to `READY`. The other direction needs nothing here: a `DELETE` or a
//! text `PATCH` removes or replaces the entry's chunks in the store in its own write, and
//! the chat service (`service::chat::retrieve`) re-reads every hit's chunk from the store, so a hit on
//! old index documents never brings back old text.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tantivy::Term;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::positions;
use super::vectors::{self, ChunkVectors, EntryVectors};
use super::{new_generation_name, open_generation, write_current, ChunkDoc, IndexGeneration, Search};
use crate::embed::catalog::Embedders;
use crate::error::{Error, Result};
use crate::store::kb;
use crate::store::kv::ReadTransaction;
use crate::store::records::{Chunk, KbStatus};
use crate::store::{self, Store};

/// Most outbox rows applied in one index commit.
const BATCH: usize = 512;

/// How often the indexer looks at a store that other nodes write too (PostgreSQL) for outbox
/// rows they appended, besides being woken by their commits' notifications (`store::notify`):
/// in case one was lost.
const SHARED_POLL: Duration = Duration::from_secs(1);

/// How far the index is behind the store's outbox, as the indexer task last saw it
/// (readiness and metrics read it; see `ops::health`).
pub struct Progress {
    /// Milliseconds since the epoch since when outbox rows may be waiting; 0: caught up.
    behind_since_ms: AtomicI64,
}

impl Default for Progress {
    /// Behind from now: at start the outbox may hold rows not yet applied.
    fn default() -> Self {
        Progress { behind_since_ms: AtomicI64::new(store::now_ms()) }
    }
}

impl Progress {
    /// How long rows have been waiting, in milliseconds; `None` when the index is caught up.
    pub fn lag_ms(&self) -> Option<i64> {
        let since = self.behind_since_ms.load(Ordering::Relaxed);
        (since > 0).then(|| (store::now_ms() - since).max(0))
    }

    fn caught_up(&self) {
        self.behind_since_ms.store(0, Ordering::Relaxed);
    }

    /// New rows may have arrived: behind from now, unless already behind.
    fn woken(&self) {
        let _ = self.behind_since_ms.compare_exchange(0, store::now_ms(), Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The current content of one changed entry (`doc: None` when it is gone).
pub struct Change {
    pub entry: u64,
    pub doc: Option<EntryDoc>,
}

/// What the index holds of an entry.
pub struct EntryDoc {
    pub replica: Uuid,
    pub revision: u64,
    /// The entry's `language`, else the detected one (ISO 639-1); picks the analyzer.
    pub language: Option<String>,
    pub chunks: Vec<Chunk>,
    /// The catalog id of the replica's embedding model and the chunks' stored vectors of it
    /// (those of the chunks' current text: [`vectors::stored`]); `None` with no embedding model.
    pub vectors: Option<(String, ChunkVectors)>,
}

impl EntryDoc {
    /// Whether every chunk has its vector (or no embedding model is configured): only then is
    /// the entry `READY`.
    pub fn complete(&self) -> bool {
        self.vectors.as_ref().is_none_or(|(_, v)| v.len() == self.chunks.len())
    }

    /// The entry's rows for the in-memory vector search.
    fn vector_update(&self, entry: u64) -> Option<EntryVectors> {
        let (model, vectors) = self.vectors.as_ref()?;
        Some(EntryVectors { entry, replica: Some(self.replica), model: model.clone(), vectors: vectors.clone() })
    }
}

/// The in-memory vector rows of `changes` (gone entries remove theirs).
fn vector_updates(changes: &[Change]) -> Vec<EntryVectors> {
    changes
        .iter()
        .filter_map(|c| match &c.doc {
            Some(d) => d.vector_update(c.entry),
            None => Some(EntryVectors { entry: c.entry, replica: None, model: String::new(), vectors: Vec::new() }),
        })
        .collect()
}

impl IndexGeneration {
    fn add_entry(&self, w: &tantivy::IndexWriter, entry: u64, doc: &EntryDoc) -> Result<()> {
        for (i, c) in doc.chunks.iter().enumerate() {
            let language = doc.language.as_deref();
            let chunk =
                ChunkDoc { replica: doc.replica, entry, chunk: i as u32, language, title: &c.title, body: &c.text };
            self.add_chunk(w, chunk)?;
        }
        Ok(())
    }
}

impl Search {
    /// Replaces the documents of each changed entry in the writer (not yet committed).
    pub fn stage(&self, changes: &[Change]) -> Result<()> {
        let g = self.current();
        g.with_writer(|w| {
            for c in changes {
                w.delete_term(Term::from_field_u64(g.fields.entry, c.entry));
                if let Some(doc) = &c.doc {
                    g.add_entry(w, c.entry, doc)?;
                }
            }
            Ok(())
        })
    }

    /// Commits what [`Search::stage`] added with payload `seq` and makes it visible to searches.
    pub fn commit(&self, seq: u64) -> Result<()> {
        let g = self.current();
        g.with_writer(|w| g.commit(w, seq))?;
        g.reload()?;
        self.set_applied(seq);
        Ok(())
    }

    /// Drops what was staged since the last commit with the writer (one that met an I/O error,
    /// ENOSPC included, refuses further work; the next step opens a fresh one); the outbox rows
    /// stay, so the next attempt applies them again.
    pub fn rollback(&self) {
        drop(self.current().take_writer());
    }

    /// Whether the current generation's writer is open (there was indexing since it was last
    /// closed).
    pub fn writer_open(&self) -> bool {
        self.current().writer.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Closes the writer after waiting for its merges to finish, and gives the memory it held
    /// back to the operating system. Blocking (merges can take a while); the next indexing
    /// step opens a new writer. Called by the indexer task only, like every writing step, so
    /// no other writer is opened while this one still holds the index's lock.
    pub fn close_writer(&self) -> Result<()> {
        let Some(w) = self.current().take_writer() else { return Ok(()) };
        w.wait_merging_threads()?;
        crate::memory::release();
        Ok(())
    }

    /// Builds a fresh generation from `all` entries, commits it with payload `seq`, points
    /// `CURRENT` at it and swaps it in; searches keep answering from the old one meanwhile.
    pub fn rebuild(&self, all: &[Change], seq: u64) -> Result<()> {
        let name = new_generation_name();
        let g = open_generation(&self.dir, &name, true)?;
        g.with_writer(|w| {
            for c in all {
                if let Some(doc) = &c.doc {
                    g.add_entry(w, c.entry, doc)?;
                }
            }
            g.commit(w, seq)
        })?;
        g.reload()?;
        write_current(&self.dir, &name)?;
        let old = std::mem::replace(&mut *self.current.write().unwrap_or_else(|p| p.into_inner()), Arc::new(g));
        let old_dir = self.dir.join(&old.name);
        drop(old);
        if let Err(e) = std::fs::remove_dir_all(&old_dir) {
            tracing::warn!(error = %e, dir = %old_dir.display(), "could not remove the old index generation");
        }
        self.set_applied(seq);
        Ok(())
    }
}

fn entry_doc(txn: &ReadTransaction, id: u64, embedders: Option<&Embedders>) -> Result<Option<EntryDoc>> {
    let Some(e) = kb::entry(txn, id)? else {
        return Ok(None);
    };
    let language = e.language.clone().or(kb::source_in(txn, id)?.detected_language);
    let model = match embedders {
        Some(m) => Some(vectors::model_of(txn, m, e.replica)?),
        None => None,
    };
    let vectors = model.map(|m| (m, Vec::new()));
    let mut doc = EntryDoc { replica: e.replica, revision: e.revision, language, chunks: Vec::new(), vectors };
    if e.chunk_count == 0 || e.status == KbStatus::Unprocessable {
        return Ok(Some(doc));
    }
    doc.chunks = kb::chunks(txn, id)?;
    if let Some((model, found)) = &mut doc.vectors {
        *found = vectors::stored(txn, id, &doc.chunks, model)?;
    }
    Ok(Some(doc))
}

/// The `(entry, revision)` of the changes to mark `READY`: those whose vectors are all in.
fn indexed_revisions(changes: &[Change]) -> Vec<(u64, u64)> {
    changes.iter().filter_map(|c| c.doc.as_ref().filter(|d| d.complete()).map(|d| (c.entry, d.revision))).collect()
}

/// Hands the entries of `changes` still lacking vectors to the embedding queue.
fn queue_incomplete(search: &Search, changes: &[Change]) {
    for c in changes {
        if let Some(d) = c.doc.as_ref().filter(|d| !d.complete()) {
            search.embedding.push(d.replica, c.entry);
        }
    }
}

/// Applies up to one batch of outbox rows; returns how many rows it applied.
pub async fn apply_pending(store: &Store, search: &Arc<Search>) -> Result<usize> {
    let embedders = search.embedders.clone();
    // On redb every row not yet applied is still in the outbox (applied rows are removed); on
    // a shared store the rows stay for the other nodes, and this node reads past its position.
    let shared = store.is_shared();
    let after = if shared { search.applied_seq() } else { 0 };
    let read = store
        .read_scan(move |txn| {
            if shared && positions::rows_missing(txn, after)? {
                return Ok(None);
            }
            let mut seqs = Vec::new();
            let mut entries: Vec<u64> = Vec::new();
            for (seq, entry) in kb::outbox_after(txn, after, BATCH)? {
                seqs.push(seq);
                if !entries.contains(&entry) {
                    entries.push(entry);
                }
            }
            let changes = entries
                .into_iter()
                .map(|entry| Ok(Change { entry, doc: entry_doc(txn, entry, embedders.as_deref())? }))
                .collect::<Result<Vec<_>>>()?;
            Ok(Some((seqs, changes)))
        })
        .await?;
    let Some((seqs, changes)) = read else {
        tracing::warn!("outbox rows this node had not applied were removed (it was gone); rebuilding its index");
        return rebuild_from_store(store, search).await.map(|n| n.max(1));
    };
    let Some(&last) = seqs.last() else { return Ok(0) };
    let s = search.clone();
    let changes =
        tokio::task::spawn_blocking(move || s.stage(&changes).map(|_| changes)).await.map_err(Error::internal)??;
    let indexed = indexed_revisions(&changes);
    let s = search.clone();
    tokio::task::spawn_blocking(move || s.commit(last)).await.map_err(Error::internal)??;
    search.vectors.apply(vector_updates(&changes));
    queue_incomplete(search, &changes);
    let n = seqs.len();
    store
        .write(move |txn| {
            if shared {
                positions::record(txn, last, store::now_ms())?;
            } else {
                kb::remove_outbox_rows(txn, &seqs)?;
            }
            kb::mark_indexed_in(txn, &indexed, KbStatus::Ready)
        })
        .await?;
    Ok(n)
}

/// Writes this node's position in the shared outbox while it has nothing to apply
/// ([`positions`]); a failure is logged (the next report writes it).
async fn report_idle(store: &Store, search: &Search) {
    let applied = search.applied_seq();
    if let Err(e) = store.write(move |txn| positions::record(txn, applied, store::now_ms())).await {
        tracing::warn!(error = %e, "recording this node's outbox position failed");
    }
}

/// Rebuilds the index from every entry in the store; returns the number of chunks indexed.
pub async fn rebuild_from_store(store: &Store, search: &Arc<Search>) -> Result<usize> {
    let (all, seq) = all_entries(store, search).await?;
    let chunks = all.iter().filter_map(|c| c.doc.as_ref()).map(|d| d.chunks.len()).sum();
    let s = search.clone();
    let all =
        tokio::task::spawn_blocking(move || s.rebuild(&all, seq).map(|_| all)).await.map_err(Error::internal)??;
    search.vectors.clear();
    search.vectors.apply(vector_updates(&all));
    queue_incomplete(search, &all);
    let ready = indexed_revisions(&all);
    let shared = store.is_shared();
    store
        .write(move |txn| {
            if !shared {
                kb::trim_outbox(txn, seq)?;
            }
            kb::mark_indexed_in(txn, &ready, KbStatus::Ready)
        })
        .await?;
    Ok(chunks)
}

/// Loads the stored vectors of every entry into the vector search (the index itself is
/// already up to date), and queues the entries that lack some for embedding: those stored
/// before an embedding model was configured, or under another default model, or left
/// unfinished by the last stop.
pub async fn load_vectors(store: &Store, search: &Arc<Search>) -> Result<usize> {
    if search.embedders.is_none() {
        return Ok(0);
    }
    let (all, _) = all_entries(store, search).await?;
    search.vectors.apply(vector_updates(&all));
    queue_incomplete(search, &all);
    Ok(search.embedding.len())
}

/// Every entry of the store as the index holds it, and the outbox's last seq.
async fn all_entries(store: &Store, search: &Search) -> Result<(Vec<Change>, u64)> {
    let embedders = search.embedders.clone();
    store
        .read_scan(move |txn| {
            let seq = store::outbox_seq(txn)?;
            let ids = kb::entry_ids(txn)?;
            let all = ids
                .into_iter()
                .map(|entry| Ok(Change { entry, doc: entry_doc(txn, entry, embedders.as_deref())? }))
                .collect::<Result<Vec<_>>>()?;
            Ok((all, seq))
        })
        .await
}

/// Whether the index must be rebuilt at start: unknown payload, or ahead of the store.
pub async fn needs_rebuild(store: &Store, index_seq: Option<u64>) -> Result<bool> {
    let Some(index_seq) = index_seq else { return Ok(true) };
    let store_seq = store.read(store::outbox_seq).await?;
    Ok(index_seq > store_seq)
}

/// A request to the indexer task to rebuild; answered with the chunk count.
pub type RebuildRequest = oneshot::Sender<Result<usize>>;

/// Starts the indexer task; send on the returned channel to ask for a rebuild.
/// The task ends at its next safe point (after the batch it is applying) once `stop` is
/// requested.
pub fn spawn(
    store: Store,
    search: Arc<Search>,
    rebuild_first: bool,
    mut stop: crate::stop::Stop,
) -> mpsc::Sender<RebuildRequest> {
    let (tx, mut rx) = mpsc::channel::<RebuildRequest>(4);
    if store.is_shared() {
        // The batch of the last commit may have been applied to the index but not marked
        // `READY` (a crash in between); applying it again marks it.
        search.rewind(BATCH as u64);
    }
    tokio::spawn(async move {
        if rebuild_first {
            match rebuild_from_store(&store, &search).await {
                Ok(n) => tracing::info!(chunks = n, "search index rebuilt from the store"),
                Err(e) => tracing::error!(error = %e, "search index rebuild failed"),
            }
        } else {
            match load_vectors(&store, &search).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(entries = n, "entries queued for embedding"),
                Err(e) => tracing::error!(error = %e, "loading the chunks' vectors failed"),
            }
        }
        let mut reported = 0;
        while !stop.requested() {
            while let Ok(reply) = rx.try_recv() {
                let _ = reply.send(rebuild_from_store(&store, &search).await);
            }
            match apply_pending(&store, &search).await {
                Ok(0) => {
                    search.progress.caught_up();
                    if store.is_shared() && store::now_ms() - reported > positions::REPORT_EVERY_MS {
                        reported = store::now_ms();
                        report_idle(&store, &search).await;
                    }
                }
                Ok(_) => continue,
                Err(e) => {
                    // A full disk (readiness reports the growing lag) or another I/O error:
                    // start from the last commit and try again.
                    tracing::error!(error = %e, "indexing failed; retrying");
                    let s = search.clone();
                    let _ = tokio::task::spawn_blocking(move || s.rollback()).await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
            tokio::select! {
                _ = store.outbox_notify.notified() => search.progress.woken(),
                req = rx.recv() => match req {
                    Some(reply) => { let _ = reply.send(rebuild_from_store(&store, &search).await); }
                    None => break,
                },
                _ = stop.wait() => break,
                _ = tokio::time::sleep(SHARED_POLL), if store.is_shared() => search.progress.woken(),
                _ = tokio::time::sleep(super::WRITER_IDLE), if search.writer_open() => {
                    let s = search.clone();
                    match tokio::task::spawn_blocking(move || s.close_writer()).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::warn!(error = %e, "closing the index writer failed"),
                        Err(e) => tracing::warn!(error = %e, "closing the index writer panicked"),
                    }
                }
            }
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(entry: u64, replica: Uuid, text: &str) -> Change {
        let chunks = vec![Chunk { title: "Guide".into(), text: text.into(), page: None }];
        Change {
            entry,
            doc: Some(EntryDoc { replica, revision: 1, language: Some("en".into()), chunks, vectors: None }),
        }
    }

    #[test]
    fn the_writer_is_opened_for_indexing_and_closed_when_idle_without_losing_commits() {
        let data = tempfile::tempdir().expect("temp dir");
        let (search, _) = Search::open(data.path()).expect("open");
        let replica = Uuid::now_v7();
        assert!(!search.writer_open(), "an opened index holds no writer");
        search.stage(&[change(1, replica, "Walruses haul out on sea ice.")]).expect("stage");
        assert!(search.writer_open());
        search.commit(1).expect("commit");
        search.close_writer().expect("close");
        assert!(!search.writer_open());
        // a second step opens a new writer; both commits are searchable, also after a reopen
        search.stage(&[change(2, replica, "Walruses dive for clams.")]).expect("stage again");
        search.commit(2).expect("commit again");
        search.close_writer().expect("close again");
        drop(search);
        let (search, seq) = Search::open(data.path()).expect("reopen");
        assert_eq!(seq, Some(2));
        let entries: Vec<u64> =
            search.search(replica, "walruses", 5).expect("search").iter().map(|h| h.entry).collect();
        assert_eq!(entries.len(), 2, "{entries:?}");
        // a rollback drops what was staged with the writer
        search.stage(&[change(3, replica, "Walruses have tusks.")]).expect("stage a third");
        search.rollback();
        assert!(!search.writer_open());
        search.stage(&[]).expect("a fresh writer");
        search.commit(3).expect("commit nothing");
        assert_eq!(search.search(replica, "tusks", 5).expect("search").len(), 0);
    }
}
