//! The chunks' embeddings in memory, per replica, for exact nearest-neighbour search
//! ([`crate::embed::exact`]).
//!
//! The store's `kbchunk_vector` table is the source of truth; this is a copy the indexer keeps
//! in step ([`super::indexer`]): it loads an entry's vectors when it applies the entry's outbox
//! row, and all of them when it rebuilds. A replica's vectors are one flat matrix (`n × dim`
//! `f32`, row-major) with its 8-bit codes ([`exact::Codes`]), replaced whole on each change
//! (copy on write), so a search never waits for an update: a search reads ~0.4 KiB of codes
//! per 384-dim vector (figures in [`crate::embed`]).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use uuid::Uuid;

use crate::embed::catalog::Embedders;
use crate::embed::exact;
use crate::error::Result;
use crate::store;
use crate::store::kv::ReadTransaction;
use crate::store::records::{Chunk, ChunkVector};
use crate::text::blocks::{self, Block};
use crate::text::chunk::own_heading;

/// The text a chunk's vector is computed from: its title (document › heading path), a newline,
/// its text. Models cut what passes their window (256 tokens for MiniLM), so the heading path
/// always counts.
pub fn passage_text(c: &Chunk) -> String {
    format!("{}\n{}", c.title, c.text)
}

/// The texts a chunk's sentence vectors are computed from ([`ChunkVector::sentences`]): each
/// prose sentence of its text ([`blocks::parse`], in order, as the embedded reader reads it),
/// after its own heading and a newline (the sentence's context, shorter than the whole path).
pub fn sentence_texts(c: &Chunk) -> Vec<String> {
    let heading = own_heading(&c.title);
    let prose = blocks::parse(&c.text).into_iter().filter_map(|b| match b {
        Block::Prose(sentences) => Some(sentences),
        _ => None,
    });
    prose.flatten().map(|s| format!("{heading}\n{s}")).collect()
}

/// The version of how a chunk's text is cut into the sentences its sentence vectors are of
/// ([`sentence_texts`], `text::blocks`): a change to the cut is a new version. It seeds
/// [`text_key`], so a stored vector of another version is not current ([`stored`],
/// [`sentences_of`]) and the embedding task derives it again in the background; a vector is
/// never served against the wrong sentence. 0 (the unseeded keys of older stores): lists and
/// lines re-flowed into one text; 1: a list's items and a paragraph's kept lines are cut apart.
pub const SEGMENTATION_VERSION: u64 = 1;

/// Key of a text embedded ([`ChunkVector::text_key`]): its XXH3-64 seeded with
/// [`SEGMENTATION_VERSION`].
pub fn text_key(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(text.as_bytes(), SEGMENTATION_VERSION)
}

/// The catalog id of `replica`'s embedding model ([`Embedders::of_replica`] of its
/// `llm.embeddingModel`); the default when the replica is gone.
pub fn model_of(txn: &ReadTransaction, embedders: &Embedders, replica: Uuid) -> Result<String> {
    let r = store::replica_index::get_in(txn, replica)?;
    let named = r.and_then(|r| r.llm.embedding_model);
    Ok(embedders.of_replica(named.as_deref()).id().to_string())
}

/// The stored vectors of `entry`'s `chunks` under `model`, `(chunk index, vector)`, of those
/// whose vectors (the chunk's and its sentences') were computed from their current text.
pub fn stored(txn: &ReadTransaction, entry: u64, chunks: &[Chunk], model: &str) -> Result<ChunkVectors> {
    let mut out = Vec::new();
    for (chunk, v) in store::kb::vectors_of(txn, entry)? {
        let Some(c) = chunks.get(chunk as usize) else { continue };
        if current(&v, c, model) && v.sentences.is_some() {
            out.push((chunk, v.vector));
        }
    }
    Ok(out)
}

/// Whether `v` was computed from chunk `c`'s current text under `model`.
fn current(v: &ChunkVector, c: &Chunk, model: &str) -> bool {
    v.model == model && v.text_key == text_key(&passage_text(c))
}

/// The sentence vectors in `v`, the stored vectors of a chunk whose current text is `c`, under
/// `model` ([`sentence_texts`]' order); `None` when they are missing or of another text or
/// model.
pub fn sentences_of(v: Option<ChunkVector>, c: &Chunk, model: &str) -> Option<Vec<Vec<f32>>> {
    v.filter(|v| current(v, c, model)).and_then(|v| v.sentences)
}

/// One replica's vectors, all of one model.
#[derive(Default)]
struct Matrix {
    model: String,
    dim: usize,
    /// `chunks.len() × dim` values.
    rows: Vec<f32>,
    /// The rows coded on 8 bits, scored first by a search.
    codes: exact::Codes,
    /// `(entry, chunk)` of each row.
    chunks: Vec<(u64, u32)>,
    /// The row of each `(entry, chunk)` (~24 bytes per row beside its 1.5 KiB of values).
    row_of: HashMap<(u64, u32), usize>,
}

/// A chunk found by its vector: cosine similarity to the question, in −1..=1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    pub entry: u64,
    pub chunk: u32,
    pub score: f32,
}

/// What [`Vectors::search`] found: the closest chunks, best first, and how close the question
/// is to the replica's chunks as a whole ([`exact::Spread`]; `None` without vectors).
#[derive(Debug, Clone, Default)]
pub struct Nearest {
    pub hits: Vec<VectorHit>,
    pub spread: Option<exact::Spread>,
}

/// `(chunk index, vector)` of an entry's chunks that have one.
pub type ChunkVectors = Vec<(u32, Vec<f32>)>;

/// The vectors of one entry, as the indexer found them in the store.
pub struct EntryVectors {
    pub entry: u64,
    /// `None`: the entry is gone (its rows are removed).
    pub replica: Option<Uuid>,
    /// Catalog id of the model the vectors are of.
    pub model: String,
    /// The chunks without one are left out.
    pub vectors: ChunkVectors,
}

/// The vectors of every replica.
#[derive(Default)]
pub struct Vectors {
    replicas: RwLock<HashMap<Uuid, Arc<Matrix>>>,
    /// The replica of each entry with rows.
    owners: RwLock<HashMap<u64, Uuid>>,
}

impl Vectors {
    /// Replaces the rows of each entry of `updates` (removes those of gone entries). A replica
    /// whose vectors are of another model than an update's starts again from that update (a
    /// changed default model: the indexer brings the other entries' new vectors as they come).
    pub fn apply(&self, updates: Vec<EntryVectors>) {
        let mut owners = self.owners.write().unwrap_or_else(|p| p.into_inner());
        let mut by_replica: HashMap<Uuid, Vec<EntryVectors>> = HashMap::new();
        let mut touched: Vec<Uuid> = Vec::new();
        for u in updates {
            if let Some(old) = owners.remove(&u.entry) {
                touched.push(old);
            }
            if let Some(r) = u.replica {
                if !u.vectors.is_empty() {
                    owners.insert(u.entry, r);
                }
                touched.push(r);
                by_replica.entry(r).or_default().push(u);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        let mut replicas = self.replicas.write().unwrap_or_else(|p| p.into_inner());
        for r in touched {
            let empty = Arc::new(Matrix::default());
            let old = replicas.get(&r).cloned().unwrap_or(empty);
            let adds = by_replica.remove(&r).unwrap_or_default();
            let changed: Vec<u64> = owners_changed(&adds, &old, &owners, r);
            let next = rebuilt(&old, &changed, adds);
            if next.chunks.is_empty() {
                replicas.remove(&r);
            } else {
                replicas.insert(r, Arc::new(next));
            }
        }
    }

    /// Drops every vector (before a rebuild loads them all again).
    pub fn clear(&self) {
        self.replicas.write().unwrap_or_else(|p| p.into_inner()).clear();
        self.owners.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The `k` chunks of `replica` whose vectors of `model` are closest to `query` (normalised,
    /// of the model's dimension), best first, and the spread of its cosines to all of the
    /// replica's chunks. Empty when the replica has no vectors of that model.
    pub fn search(&self, replica: Uuid, model: &str, query: &[f32], k: usize) -> Nearest {
        let Some(m) = self.replicas.read().unwrap_or_else(|p| p.into_inner()).get(&replica).cloned() else {
            return Nearest::default();
        };
        if m.model != model || m.dim != query.len() {
            return Nearest::default();
        }
        let exact::Ranked { hits, spread } = exact::top_k(query, &m.rows, &m.codes, k);
        let hits =
            hits.into_iter().map(|(row, score)| VectorHit { entry: m.chunks[row].0, chunk: m.chunks[row].1, score });
        Nearest { hits: hits.collect(), spread }
    }

    /// The cosine similarity of `query` (normalised, of `model`'s dimension) to each of
    /// `chunks` (`(entry, chunk)`) of `replica`, in order; `None` for a chunk with no vector of
    /// `model`.
    pub fn cosines(&self, replica: Uuid, model: &str, query: &[f32], chunks: &[(u64, u32)]) -> Vec<Option<f32>> {
        let m = self.replicas.read().unwrap_or_else(|p| p.into_inner()).get(&replica).cloned();
        let m = m.filter(|m| m.model == model && m.dim == query.len());
        let row = |c: &(u64, u32)| m.as_ref().and_then(|m| Some(&m.rows[m.row_of.get(c)? * m.dim..][..m.dim]));
        chunks.iter().map(|c| row(c).map(|r| crate::embed::dot(query, r))).collect()
    }

    /// How many chunk vectors `replica` has.
    pub fn count(&self, replica: Uuid) -> usize {
        self.replicas.read().unwrap_or_else(|p| p.into_inner()).get(&replica).map_or(0, |m| m.chunks.len())
    }
}

/// The entries whose old rows in `old` must go: those updated, and those no longer `r`'s.
fn owners_changed(adds: &[EntryVectors], old: &Matrix, owners: &HashMap<u64, Uuid>, r: Uuid) -> Vec<u64> {
    let mut out: Vec<u64> = adds.iter().map(|u| u.entry).collect();
    out.extend(old.chunks.iter().map(|c| c.0).filter(|e| owners.get(e) != Some(&r)));
    out.sort_unstable();
    out.dedup();
    out
}

/// `old` without the rows of `dropped`, plus the rows of `adds` (of one model: a model other
/// than `old`'s replaces all of `old`).
fn rebuilt(old: &Matrix, dropped: &[u64], adds: Vec<EntryVectors>) -> Matrix {
    let model = adds.iter().find(|u| !u.vectors.is_empty()).map(|u| u.model.clone());
    let mut next = match model {
        Some(m) if m != old.model => Matrix { model: m, ..Matrix::default() },
        _ => Matrix { model: old.model.clone(), dim: old.dim, ..Matrix::default() },
    };
    if next.model == old.model {
        for (i, c) in old.chunks.iter().enumerate() {
            if dropped.binary_search(&c.0).is_err() {
                next.chunks.push(*c);
                next.rows.extend_from_slice(&old.rows[i * old.dim..(i + 1) * old.dim]);
            }
        }
    }
    for u in adds.into_iter().filter(|u| u.model == next.model) {
        for (chunk, v) in u.vectors {
            if next.chunks.is_empty() {
                next.dim = v.len();
            }
            if v.len() == next.dim {
                next.chunks.push((u.entry, chunk));
                next.rows.extend_from_slice(&v);
            }
        }
    }
    next.row_of = next.chunks.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    next.codes = exact::Codes::of(&next.rows, next.dim);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(entry: u64, replica: Uuid, model: &str, vectors: &[[f32; 2]]) -> EntryVectors {
        let vectors = vectors.iter().enumerate().map(|(i, v)| (i as u32, v.to_vec())).collect();
        EntryVectors { entry, replica: Some(replica), model: model.into(), vectors }
    }

    #[test]
    fn vectors_of_another_segmentation_version_are_not_served() {
        let c = Chunk { title: "Profile".into(), text: "Company: Acme\nFounded: 2016".into(), page: None };
        let stored = |text_key| ChunkVector {
            model: "m".into(),
            text_key,
            vector: vec![1.0],
            sentences: Some(vec![vec![1.0], vec![0.0]]),
        };
        let now = stored(text_key(&passage_text(&c)));
        assert!(sentences_of(Some(now), &c, "m").is_some());
        // a store written before the segmentation versions (unseeded keys): derived again
        let before = stored(xxhash_rust::xxh3::xxh3_64(passage_text(&c).as_bytes()));
        assert_eq!(sentences_of(Some(before), &c, "m"), None);
        assert_eq!(sentence_texts(&c), ["Profile\nCompany: Acme", "Profile\nFounded: 2016"]);
    }

    #[test]
    fn entries_are_replaced_removed_and_kept_apart_per_replica_and_model() {
        let v = Vectors::default();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        v.apply(vec![update(1, a, "m", &[[1.0, 0.0], [0.0, 1.0]]), update(2, b, "m", &[[1.0, 0.0]])]);
        let hits = v.search(a, "m", &[0.0, 1.0], 5).hits;
        assert_eq!(hits.iter().map(|h| (h.entry, h.chunk)).collect::<Vec<_>>(), vec![(1, 1), (1, 0)]);
        assert_eq!(v.cosines(a, "m", &[0.0, 1.0], &[(1, 0), (1, 1), (2, 0)]), vec![Some(0.0), Some(1.0), None]);
        assert_eq!(v.count(b), 1);
        assert!(v.search(a, "other", &[0.0, 1.0], 5).hits.is_empty(), "another model's question finds nothing");
        // a new revision of entry 1 replaces its rows
        v.apply(vec![update(1, a, "m", &[[0.6, 0.8]])]);
        assert_eq!(v.count(a), 1);
        // a gone entry's rows go
        v.apply(vec![EntryVectors { entry: 2, replica: None, model: String::new(), vectors: Vec::new() }]);
        assert_eq!(v.count(b), 0);
        // vectors of another model start the replica again
        v.apply(vec![update(3, a, "n", &[[1.0, 0.0]])]);
        assert_eq!(v.count(a), 1);
        assert_eq!(v.search(a, "n", &[1.0, 0.0], 5).hits[0].entry, 3);
    }
}
