//! BM25 statistics of one replica's documents (tenant isolation).
//!
//! All replicas' chunks share one tantivy index, and tantivy's default statistics (document
//! count, a term's document frequency, a field's token count for the average length) are the
//! whole index's: one tenant's documents changed another's `sources[].score` and ranking. A
//! search therefore scores with [`ReplicaStatistics`], which counts only the asking replica's
//! live documents: its document count, a term's document frequency among them, and the sum of
//! their field lengths (tantivy's per-document field norms, the same lengths BM25 divides by).
//! A score then depends only on the replica's own knowledge base — not on other replicas'
//! documents, nor on deleted documents still in segments, nor on how segments were merged.
//!
//! The counts are computed per query from the searcher (no state to keep in step with writes):
//!
//! - the replica's live documents: one walk of the postings of its `replica` term in each
//!   segment, dropping deleted documents — O(R), R the replica's chunks;
//! - a field's token sum (for the average length): one field-norm read per replica document,
//!   once per field and query — O(R);
//! - a term's document frequency, per segment: when the term's postings there are fewer than
//!   the replica's documents, they are walked and each looked up among the replica's (binary
//!   search), else the replica's documents are walked and the postings skipped to each
//!   (`seek`, which steps over 128-document blocks by their skip entries) — O(min(df, R)·log R)
//!   plus O(df / 128) skip entries. It is never a walk of every posting of the term in the
//!   whole index: another tenant's documents cost at most their skip entries.
//!
//! So a query costs O(R + terms × min(df, R)) beyond the search itself, which already walks
//! the replica's postings of each term; the whole index's size enters only through the number
//! of segments (one term-dictionary lookup per term and segment, as any tantivy search) and
//! the skip entries. Multi-segment indexes are handled segment by segment (document ids are
//! per segment) and give the same statistics however the documents are split or merged, since
//! field norms survive merges.
//!
//! Alternatives weighed: caching the statistics per (replica, searcher generation) would save
//! the O(R) walks but is invalidated by every indexer commit (each write reloads the reader),
//! needs a bound and eviction, and the document frequencies of the query's terms would still
//! be counted per query; one index per organization would isolate organizations but not the
//! replicas within one (the scores must depend on the asking replica's knowledge base only),
//! and would multiply open files, writer threads and their memory budgets by the number of
//! tenants. The per-query count is what the measurements (`cargo run --release --example
//! retrieval -- bench N --tenants T`, release, both scorings interleaved in one run; p50 per
//! query): 10,290 chunks over 10 replicas 0.164 ms vs 0.107 ms whole-index; the same in one
//! replica 0.310 vs 0.154 ms; 50,454 chunks over 10 replicas 0.641 vs 0.367 ms. The added cost
//! grows with the replica (15–55 µs per 1,000 of its chunks in these runs) rather than with other
//! tenants' documents; it is of the order of the search's own. Should replicas of 100,000+ chunks
//! matter, cache the replica's document lists and token sums per (replica, searcher
//! generation); the document frequencies stay per query.
//!
//! Field lengths are tantivy's field norms (exact up to 40 tokens, then rounded to one of 256
//! buckets), which is what BM25's length normalization reads too; the whole-index scoring used
//! the exact token counts, hence small score differences between the two beyond isolation.

use std::collections::HashMap;
use std::sync::Mutex;

use tantivy::postings::TermInfo;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, InvertedIndexReader, Searcher, SegmentReader, Term, TERMINATED};

/// BM25 statistics over the live documents of one replica (see the module documentation).
pub struct ReplicaStatistics<'a> {
    searcher: &'a Searcher,
    /// Per segment, in the searcher's order: the replica's live documents, ascending.
    docs: Vec<Vec<DocId>>,
    num_docs: u64,
    /// Sum of field lengths per field, computed on first use.
    tokens: Mutex<HashMap<Field, u64>>,
}

impl<'a> ReplicaStatistics<'a> {
    /// The statistics of the documents holding `replica_term` (the replica's id term).
    pub fn new(searcher: &'a Searcher, replica_term: &Term) -> tantivy::Result<Self> {
        let mut docs = Vec::with_capacity(searcher.segment_readers().len());
        for segment in searcher.segment_readers() {
            let mut live = Vec::new();
            let index = segment.inverted_index(replica_term.field())?;
            if let Some(mut postings) = index.read_postings(replica_term, IndexRecordOption::Basic)? {
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if !segment.is_deleted(doc) {
                        live.push(doc);
                    }
                    doc = postings.advance();
                }
            }
            docs.push(live);
        }
        let num_docs = docs.iter().map(|d| d.len() as u64).sum();
        Ok(ReplicaStatistics { searcher, docs, num_docs, tokens: Mutex::new(HashMap::new()) })
    }

    /// Whether any of the replica's documents holds, in one of `fields`, the term `text` or
    /// the same stem told apart by a suffix: a term that begins with it or that it begins
    /// with, the shorter of the two of at least [`STEM_CHARS`] characters (an English stemmer
    /// leaves "define" `defin` and "definition" `definit`).
    pub fn holds_stem(&self, fields: &[Field], text: &str) -> tantivy::Result<bool> {
        // `text` itself and its prefixes of STEM_CHARS characters or more
        let mut keys: Vec<&str> = text.char_indices().map(|(i, _)| &text[..i]).skip(STEM_CHARS).collect();
        keys.push(text);
        let extended = text.chars().count() >= STEM_CHARS;
        for (segment, docs) in self.segments().filter(|(_, d)| !d.is_empty()) {
            for field in fields {
                let index = segment.inverted_index(*field)?;
                for key in &keys {
                    if let Some(info) = index.terms().get(key)? {
                        if count_postings(&index, &info, docs, 1)? > 0 {
                            return Ok(true);
                        }
                    }
                }
                if extended && holds_extension(&index, docs, text)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    fn segments(&self) -> impl Iterator<Item = (&SegmentReader, &[DocId])> {
        self.searcher.segment_readers().iter().zip(self.docs.iter().map(Vec::as_slice))
    }
}

/// The fewest characters of a stem [`ReplicaStatistics::holds_stem`] extends.
pub const STEM_CHARS: usize = 5;

/// Whether one of `docs` holds a term of `index` that begins with `text` and is longer.
fn holds_extension(index: &InvertedIndexReader, docs: &[DocId], text: &str) -> tantivy::Result<bool> {
    let mut terms = index.terms().range().gt(text.as_bytes()).into_stream()?;
    while terms.advance() && terms.key().starts_with(text.as_bytes()) {
        if count_postings(index, terms.value(), docs, 1)? > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// How many of `docs` (ascending) hold `term` in `segment`, counting no further than `enough`.
fn count_in(segment: &SegmentReader, docs: &[DocId], term: &Term, enough: u64) -> tantivy::Result<u64> {
    let index = segment.inverted_index(term.field())?;
    let Some(info) = index.get_term_info(term)? else { return Ok(0) };
    count_postings(&index, &info, docs, enough)
}

/// How many of `docs` (ascending) the postings of `info` in `index` hold, counting no further
/// than `enough`.
fn count_postings(index: &InvertedIndexReader, info: &TermInfo, docs: &[DocId], enough: u64) -> tantivy::Result<u64> {
    let mut postings = index.read_postings_from_terminfo(info, IndexRecordOption::Basic)?;
    let mut n = 0;
    if (info.doc_freq as usize) <= docs.len() {
        // Fewer postings than replica documents: walk the postings, look each up.
        let mut doc = postings.doc();
        while doc != TERMINATED && n < enough {
            n += u64::from(docs.binary_search(&doc).is_ok());
            doc = postings.advance();
        }
    } else {
        // Walk the replica's documents and skip through the postings to each.
        for &d in docs {
            if postings.doc() > d {
                continue;
            }
            let at = postings.seek(d);
            if at == TERMINATED {
                break;
            }
            n += u64::from(at == d);
            if n == enough {
                break;
            }
        }
    }
    Ok(n)
}

impl Bm25StatisticsProvider for ReplicaStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = cache.get(&field) {
            return Ok(*n);
        }
        let mut total = 0u64;
        for (segment, docs) in self.segments() {
            let norms = segment.get_fieldnorms_reader(field)?;
            total += docs.iter().map(|d| u64::from(norms.fieldnorm(*d))).sum::<u64>();
        }
        cache.insert(field, total);
        Ok(total)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.num_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut n = 0;
        for (segment, docs) in self.segments().filter(|(_, d)| !d.is_empty()) {
            n += count_in(segment, docs, term, u64::MAX)?;
        }
        Ok(n)
    }
}
