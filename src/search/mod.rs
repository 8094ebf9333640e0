//! Retrieval over knowledge-base chunks: full text with tantivy (BM25) and, with an embedding
//! model, the chunks' vectors ([`vectors`], computed by [`embedding`]), the two rankings fused
//! ([`fusion`], [`Search::hybrid`]).
//!
//! The index lives in `DATA_DIR/search/<generation>/`, named by the file `DATA_DIR/search/CURRENT`
//! (replaced by rename, so a rebuild swaps atomically). Each commit carries the payload
//! `{"seq": <last outbox seq applied>, "schema": SCHEMA_ID}`. The store is the source of truth:
//! see [`indexer`] for how the outbox keeps the index in step, and [`Search::rebuild`].
//! Tantivy's errors become the crate's `Error` with the tantivy error as its cause ([`error`]).

pub mod analyzers;
pub mod check;
pub mod defines;
pub mod embedding;
pub mod error;
pub mod fusion;
pub mod indexer;
pub mod positions;
pub mod statistics;
pub mod vectors;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, FAST, INDEXED, STORED, STRING,
};
use tantivy::{
    DocAddress, DocId, Index, IndexReader, IndexWriter, ReloadPolicy, Score, Searcher, SegmentReader, TantivyDocument,
    Term,
};
use uuid::Uuid;

use crate::embed::catalog::Embedders;
use crate::error::{Error, Result};
use crate::text::expansion;
use crate::text::intent::{self, Intent};

/// Identifies the schema and analyzers; an index made with another is rebuilt.
pub const SCHEMA_ID: &str = "chunks-v7-identifiers";
/// Weight of a term's BM25 score in a chunk's title (document › heading path) relative to its
/// body: titles are short, so a title hit alone would outrank the passage that explains the
/// term. 0.7 was best on `tests/retrieval` (0.25–2.0 tried).
const TITLE_BOOST: f32 = 0.7;
/// Weight of a term of the `body_exact` field (one-letter words and operators, case kept:
/// [`analyzers::ExactTokenizer`]) relative to a body term.
const EXACT_BOOST: f32 = 1.0;
/// Weight of a term of the `defines_<analyzer>` field (the subjects of a chunk's "X is …"
/// sentences: [`defines`]) relative to a body term.
const DEFINES_BOOST: f32 = 1.0;
/// Fewest terms a chunk's own heading must have to be found by the question naming all of them
/// ([`IndexGeneration::named_heading`]): one term ("Overview", "sed") says too little.
const NAMED_HEADING_MIN_TERMS: u32 = 2;
/// Indexing memory budget of the single writer thread, in bytes.
const WRITER_MEMORY: usize = 50_000_000;
/// How long the indexer leaves the writer open with nothing to index before closing it: long
/// enough that a burst of uploads or a website crawl reuses one writer, short enough that an
/// idle server does not hold it.
const WRITER_IDLE: std::time::Duration = std::time::Duration::from_secs(5);

/// Fields of a chunk document: `title_<analyzer>`, `body_<analyzer>`, `defines_<analyzer>` and
/// `heading_<analyzer>` for every analyzer of [`analyzers::ANALYZERS`] (a chunk fills those of
/// its entry's language).
#[derive(Clone)]
struct Fields {
    entry: Field,
    chunk: Field,
    replica: Field,
    /// Per analyzer, in the order of [`analyzers::ANALYZERS`].
    text: Vec<TextFields>,
    /// The body again, by [`analyzers::ExactTokenizer`] (whatever the language).
    exact: Field,
}

/// The text fields of one analyzer.
#[derive(Clone, Copy)]
struct TextFields {
    /// Document title › heading path (BM25, [`TITLE_BOOST`]).
    title: Field,
    body: Field,
    /// Subjects of the chunk's "X is …" sentences ([`defines`], [`DEFINES_BOOST`]).
    defines: Field,
    /// The chunk's own (last) heading: not scored by BM25, only matched whole, its length (the
    /// fieldnorm: its terms, stop words left out) telling when a question names all of it
    /// ([`IndexGeneration::named_heading`]).
    heading: Field,
}

/// What each commit records.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Payload {
    pub seq: u64,
    pub schema: &'static str,
}

#[derive(Deserialize)]
struct PayloadIn {
    seq: u64,
    schema: String,
}

/// One index generation, open for reading and writing.
struct IndexGeneration {
    name: String,
    index: Index,
    reader: IndexReader,
    /// The tantivy writer, open only while there is indexing to do: an open writer holds its
    /// worker threads and a 10,000-document channel allocated up front (2.4 MB resident), so the
    /// indexer closes it once it has been idle for [`WRITER_IDLE`] (see [`Search::close_writer`]).
    writer: Mutex<Option<IndexWriter>>,
    fields: Fields,
    /// Per analyzer (order of [`analyzers::ANALYZERS`]): whether any document uses its fields.
    /// Queries skip the others (most knowledge bases use one or two languages).
    in_use: RwLock<Vec<bool>>,
}

/// A retrieved chunk: its entry and position, and its BM25 score.
#[derive(Debug, Clone, Copy)]
pub struct Hit {
    pub entry: u64,
    pub chunk: u32,
    pub score: f32,
}

/// The search index of all replicas' knowledge bases.
pub struct Search {
    dir: PathBuf,
    current: RwLock<Arc<IndexGeneration>>,
    /// How far the index is behind the store (kept by the indexer task).
    pub progress: indexer::Progress,
    /// The embedding models; `None`: retrieval is BM25 alone.
    pub embedders: Option<Arc<Embedders>>,
    /// The chunks' vectors, per replica (kept by the indexer task).
    pub vectors: vectors::Vectors,
    /// Entries whose chunks wait for vectors ([`embedding`]).
    pub embedding: embedding::Queue,
    /// Vectors of recent questions, by `(model, question)`: a question asked again (a
    /// suggested question, a retried one) is not embedded again.
    query_vectors: Mutex<lru::LruCache<QueryKey, Arc<[f32]>>>,
    /// The last outbox seq the searchers see (the current commit's payload).
    applied: tokio::sync::watch::Sender<u64>,
}

/// `(model id, question)`.
type QueryKey = (String, String);

/// Questions whose vectors [`Search`] keeps (384 floats each for MiniLM: 1.5 MiB in all).
const QUERY_VECTORS: usize = 1024;

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let entry = b.add_u64_field("entry", INDEXED | STORED | FAST);
    let chunk = b.add_u64_field("chunk", STORED);
    let replica = b.add_text_field("replica", STRING);
    let text = analyzers::ANALYZERS
        .iter()
        .map(|a| {
            let options = TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(a.name)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            );
            let basic = TextOptions::default().set_indexing_options(
                TextFieldIndexing::default().set_tokenizer(a.name).set_index_option(IndexRecordOption::Basic),
            );
            TextFields {
                title: b.add_text_field(&format!("title_{}", a.name), options.clone()),
                body: b.add_text_field(&format!("body_{}", a.name), options.clone()),
                defines: b.add_text_field(&format!("defines_{}", a.name), options),
                heading: b.add_text_field(&format!("heading_{}", a.name), basic),
            }
        })
        .collect();
    let exact = b.add_text_field(
        "body_exact",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer(analyzers::EXACT).set_index_option(IndexRecordOption::WithFreqs),
        ),
    );
    (b.build(), Fields { entry, chunk, replica, text, exact })
}

fn open_generation(dir: &Path, name: &str, create: bool) -> Result<IndexGeneration> {
    let path = dir.join(name);
    let (schema, fields) = schema();
    let index = if create {
        std::fs::create_dir_all(&path)?;
        Index::create_in_dir(&path, schema)?
    } else {
        let index = Index::open_in_dir(&path)?;
        if index.schema() != schema {
            return Err(Error::internal(format!("index generation {name} has another schema")));
        }
        index
    };
    for a in analyzers::ANALYZERS {
        index.tokenizers().register(a.name, a.build());
    }
    index.tokenizers().register(analyzers::EXACT, tantivy::tokenizer::TextAnalyzer::from(analyzers::ExactTokenizer));
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
    let in_use = RwLock::new(vec![true; analyzers::ANALYZERS.len()]);
    let g = IndexGeneration { name: name.to_string(), index, reader, writer: Mutex::new(None), fields, in_use };
    g.reload()?;
    Ok(g)
}

impl IndexGeneration {
    /// Runs `f` with the writer, opening it first when it is closed. Only the indexer task
    /// writes, one step at a time, so the lock is never contended.
    fn with_writer<T>(&self, f: impl FnOnce(&mut IndexWriter) -> Result<T>) -> Result<T> {
        let mut slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let w = match &mut *slot {
            Some(w) => w,
            None => slot.insert(self.index.writer_with_num_threads(1, WRITER_MEMORY)?),
        };
        f(w)
    }

    /// Takes the writer out (closed) if it is open.
    fn take_writer(&self) -> Option<IndexWriter> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The analyzers whose fields any document uses ([`IndexGeneration::in_use`]), each with
    /// its fields and its tokenizer as the index registered it.
    fn analyzers_in_use(&self) -> Vec<(&'static analyzers::Analyzer, &TextFields, tantivy::tokenizer::TextAnalyzer)> {
        let in_use = self.in_use.read().unwrap_or_else(|p| p.into_inner()).clone();
        let used = analyzers::ANALYZERS.iter().zip(&self.fields.text).zip(in_use).filter(|(_, used)| *used);
        used.filter_map(|((a, text), _)| Some((a, text, self.index.tokenizers().get(a.name)?))).collect()
    }

    /// Makes the last commit visible to searches and notes which analyzers' fields hold terms.
    fn reload(&self) -> Result<()> {
        self.reader.reload()?;
        let searcher = self.reader.searcher();
        let mut in_use = Vec::with_capacity(self.fields.text.len());
        for fields in &self.fields.text {
            let mut used = false;
            for segment in searcher.segment_readers() {
                used |= segment.inverted_index(fields.body)?.terms().num_terms() > 0;
            }
            in_use.push(used);
        }
        *self.in_use.write().unwrap_or_else(|p| p.into_inner()) = in_use;
        Ok(())
    }

    fn payload(&self) -> Option<PayloadIn> {
        let metas = self.index.load_metas().ok()?;
        serde_json::from_str(metas.payload.as_deref()?).ok()
    }

    /// Adds chunk `chunk` of `entry`, analyzed as `language` (ISO 639-1, or `None`: default).
    fn add_chunk(&self, w: &IndexWriter, doc: ChunkDoc<'_>) -> Result<()> {
        let f = &self.fields;
        let analyzer = analyzers::for_language(doc.language);
        let slot = analyzers::ANALYZERS.iter().position(|a| a.name == analyzer.name).unwrap_or(0);
        let text = f.text[slot];
        let mut d = TantivyDocument::new();
        d.add_u64(f.entry, doc.entry);
        d.add_u64(f.chunk, doc.chunk as u64);
        d.add_text(f.replica, doc.replica.simple().to_string());
        d.add_text(text.title, doc.title);
        d.add_text(text.body, doc.body);
        d.add_text(text.defines, defines::subjects(doc.body, doc.language));
        d.add_text(text.heading, crate::text::chunk::own_heading(doc.title));
        d.add_text(f.exact, doc.body);
        let doc = d;
        w.add_document(doc)?;
        Ok(())
    }

    /// Of the chunks `query` finds (one point per question term a chunk's own heading holds, in
    /// the `heading_<analyzer>` fields `headings`), the one whose heading's terms are all the
    /// question's, the most of them (at least [`NAMED_HEADING_MIN_TERMS`]); `None` when there is
    /// none. A heading's term count is its fieldnorm (a term it repeats counts twice, so such a
    /// heading is never named whole: rare, and only a missed promotion).
    fn named_heading(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        headings: Vec<Field>,
    ) -> Result<Option<DocAddress>> {
        let whole = TopDocs::with_limit(1).tweak_score(move |segment: &SegmentReader| {
            let norms: Vec<_> = headings.iter().filter_map(|f| segment.get_fieldnorms_reader(*f).ok()).collect();
            move |doc: DocId, named: Score| {
                // a chunk fills the heading field of its language only
                let terms = norms.iter().map(|n| n.fieldnorm(doc)).max().unwrap_or(0);
                if terms >= NAMED_HEADING_MIN_TERMS && named as u32 == terms {
                    terms
                } else {
                    0
                }
            }
        });
        let best = searcher.search(query, &whole)?;
        Ok(best.into_iter().find(|(terms, _)| *terms > 0).map(|(_, addr)| addr))
    }

    /// Commits what the writer holds with payload `seq` (durable; not yet visible to searches).
    fn commit(&self, w: &mut IndexWriter, seq: u64) -> Result<()> {
        let payload = serde_json::to_string(&Payload { seq, schema: SCHEMA_ID }).map_err(Error::internal)?;
        let mut prepared = w.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        // the segment writer's arena (up to WRITER_MEMORY) was just freed
        crate::memory::release();
        Ok(())
    }
}

impl Search {
    /// Opens the current generation under `DATA_DIR/search`. Returns the search and whether it
    /// must be rebuilt (missing, unreadable, or of another schema), with the last applied seq.
    /// Call it only with the store open (the store's lock keeps other processes out).
    pub fn open(data_dir: &Path) -> Result<(Search, Option<u64>)> {
        let dir = data_dir.join("search");
        std::fs::create_dir_all(&dir)?;
        let existing = std::fs::read_to_string(dir.join("CURRENT")).ok().map(|s| s.trim().to_string());
        let opened = existing.as_deref().and_then(|name| match open_generation(&dir, name, false) {
            Ok(g) => Some(g),
            Err(e) => {
                tracing::warn!(error = %e, "search index unreadable; it will be rebuilt");
                None
            }
        });
        let (generation, seq) = match opened {
            Some(g) => {
                let seq = g.payload().filter(|p| p.schema == SCHEMA_ID).map(|p| p.seq);
                (g, seq)
            }
            None => {
                let name = new_generation_name();
                let g = open_generation(&dir, &name, true)?;
                write_current(&dir, &name)?;
                (g, None)
            }
        };
        remove_other_generations(&dir, &generation.name);
        let progress = indexer::Progress::default();
        let search = Search {
            dir,
            current: RwLock::new(Arc::new(generation)),
            progress,
            embedders: None,
            vectors: Default::default(),
            embedding: Default::default(),
            query_vectors: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(QUERY_VECTORS).unwrap_or(std::num::NonZeroUsize::MIN),
            )),
            applied: tokio::sync::watch::Sender::new(seq.unwrap_or(0)),
        };
        Ok((search, seq))
    }

    /// The last outbox seq whose change the searchers see.
    pub fn applied_seq(&self) -> u64 {
        *self.applied.borrow()
    }

    /// Waits until the searchers see every outbox row up to `seq`, at most `timeout`; whether
    /// they do.
    pub async fn wait_applied(&self, seq: u64, timeout: std::time::Duration) -> bool {
        let mut rx = self.applied.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|applied| *applied >= seq)).await;
        matches!(waited, Ok(Ok(_)))
    }

    /// Moves the outbox position back by `rows` (the indexer applies them again: idempotent).
    pub fn rewind(&self, rows: u64) {
        self.applied.send_modify(|seq| *seq = seq.saturating_sub(rows));
    }

    /// Records that the searchers now see the outbox up to `seq`.
    fn set_applied(&self, seq: u64) {
        self.applied.send_replace(seq);
    }

    /// This search with the embedding models `embedders` (hybrid retrieval: BM25 and vectors).
    pub fn with_embedders(self, embedders: Option<Arc<Embedders>>) -> Search {
        Search { embedders, ..self }
    }

    fn current(&self) -> Arc<IndexGeneration> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The best `limit` chunks of `replica` for `query` by BM25 (title and body), scored with
    /// the replica's own statistics ([`statistics`]): a score never depends on another
    /// replica's documents. The query is analyzed by every language's analyzer and matched
    /// against that language's fields, so a question finds chunks in whatever language they
    /// were indexed.
    ///
    /// A chunk whose own heading has two or more terms, all of them the question's ("Counting
    /// Lines" for "How do I count the lines of a file with sed?"), is about what the question
    /// asks however BM25 ranks it: when none such is among the best `limit`, the one with the
    /// most heading terms takes the last place (with that place's score).
    ///
    /// The question's terms include the words its form implies ([`expansion`]): another way to
    /// write one of its words ("second": "NUMBERth") counts like it; a word it leaves unsaid is
    /// looked for in headings only ("How does sed process its input?" names "How sed Works").
    pub fn search(&self, replica: Uuid, query: &str, limit: usize) -> Result<Vec<Hit>> {
        Ok(self.bm25(replica, query, limit, Scoring::Replica)?.hits)
    }

    /// [`Search::search`] with the statistics chosen by `scoring`; `Scoring::WholeIndex` is
    /// the former, shared scoring, kept for the before/after benchmark only.
    #[doc(hidden)]
    pub fn search_scored(&self, replica: Uuid, query: &str, limit: usize, scoring: Scoring) -> Result<Vec<Hit>> {
        Ok(self.bm25(replica, query, limit, scoring)?.hits)
    }

    /// [`Search::search`]'s hits with the query's terms that no document of the replica holds
    /// ([`Bm25::unknown`]; always empty under `Scoring::WholeIndex`).
    fn bm25(&self, replica: Uuid, query: &str, limit: usize, scoring: Scoring) -> Result<Bm25> {
        let g = self.current();
        let f = &g.fields;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        // one point per question term the chunk's own heading holds (in the fields `headings`)
        let mut heading: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut headings = Vec::new();
        // per analyzer in use that tells them: the terms naming the question's topic (its own,
        // no expansion) and the fields where a document holds them
        let mut vocabulary = Vec::new();
        // "What is X?" also looks for the chunks that say what X is
        let intent = intent::of(query);
        let defining = matches!(intent, Intent::Definition(_));
        // with the words its form implies: "second" also as "NUMBERth"; "works", unsaid, in headings
        let (said, unsaid) = expansion::expanded(query, &intent);
        for (a, text, mut analyzer) in g.analyzers_in_use() {
            headings.push(text.heading);
            let terms = analyzers::terms(&mut analyzer, &said);
            if let Some(topic) = a.topic_terms(query) {
                vocabulary.push((topic, [text.body, text.title]));
            }
            for t in &terms {
                let defines = defining.then_some((text.defines, DEFINES_BOOST));
                for (field, boost) in [(text.body, 1.0), (text.title, TITLE_BOOST)].into_iter().chain(defines) {
                    let q = TermQuery::new(Term::from_field_text(field, t), IndexRecordOption::WithFreqs);
                    should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
                }
            }
            let unsaid = analyzers::terms(&mut analyzer, &unsaid).into_iter().filter(|t| !terms.contains(t));
            for t in terms.iter().cloned().chain(unsaid) {
                let q = TermQuery::new(Term::from_field_text(text.heading, &t), IndexRecordOption::Basic);
                heading.push((Occur::Should, Box::new(ConstScoreQuery::new(Box::new(q), 1.0))));
            }
        }
        for t in analyzers::exact_terms(query) {
            let q = TermQuery::new(Term::from_field_text(f.exact, &t), IndexRecordOption::WithFreqs);
            should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), EXACT_BOOST))));
        }
        if should.is_empty() {
            return Ok(Bm25::default());
        }
        let replica_term = Term::from_field_text(f.replica, &replica.simple().to_string());
        let replica_q = TermQuery::new(replica_term.clone(), IndexRecordOption::Basic);
        let within = |q: BooleanQuery| {
            BooleanQuery::new(vec![
                (Occur::Must, Box::new(ConstScoreQuery::new(Box::new(replica_q.clone()), 0.0)) as Box<dyn Query>),
                (Occur::Must, Box::new(q)),
            ])
        };
        let asked = query;
        let query = within(BooleanQuery::new(should));
        let searcher = g.reader.searcher();
        let collector = TopDocs::with_limit(limit).order_by_score();
        let (mut top, unknown, other_language) = match scoring {
            Scoring::Replica => {
                let stats = statistics::ReplicaStatistics::new(&searcher, &replica_term)?;
                let top = searcher.search_with_statistics_provider(&query, &collector, &stats)?;
                (top, unknown(&stats, &vocabulary)?, in_another_language(&stats, f, asked)?)
            }
            Scoring::WholeIndex => (searcher.search(&query, &collector)?, Vec::new(), false),
        };
        // with fewer hits than `limit` every matching chunk is among them, a named one too (its
        // title holds its heading): only a full list can lack it
        if top.len() == limit {
            let named = g.named_heading(&searcher, &within(BooleanQuery::new(heading)), headings)?;
            if let (Some(named), Some(last)) = (named.filter(|n| top.iter().all(|(_, a)| a != n)), top.last_mut()) {
                last.1 = named;
            }
        }
        let hits = top
            .into_iter()
            .map(|(score, addr)| {
                let doc: TantivyDocument = searcher.doc(addr)?;
                let get = |field| doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0);
                Ok(Hit { entry: get(f.entry), chunk: get(f.chunk) as u32, score })
            })
            .collect::<Result<_>>()?;
        Ok(Bm25 { hits, unknown, other_language })
    }

    /// The best `limit` chunks of `replica` for `query`, best first: its BM25 hits
    /// ([`Search::search`]) and, with an embedding model, its nearest chunk vectors under the
    /// replica's model (`model`: its `llm.embeddingModel`), fused by `how` ([`fusion::fuse`];
    /// for a question in another language than every document, a multilingual model's
    /// [`Hybrid::other_language`], by [`fusion::Fusion::across_languages`]: BM25 weighed
    /// less); each hit with its cosine to the question, the BM25-only ones
    /// included. Without an embedding model, or when embedding the question fails (an upstream
    /// down: logged), the best `limit` BM25 hits alone, as fused hits of BM25 ranks only. With
    /// vectors, the best [`fusion::DEPTH`] of each ranking (or `limit`, when more) are fused, so
    /// a chunk's fused score and place do not depend on how many the caller keeps. A query read
    /// with the question before it ([`Asked::before`]) searches the words of both, and its
    /// vector is the sum of theirs ([`Search::question_vector`]).
    pub async fn hybrid(
        &self,
        replica: Uuid,
        model: Option<&str>,
        query: Asked<'_>,
        limit: usize,
        how: fusion::Fusion,
    ) -> Result<Hybrid> {
        let question = match self.question_vector(model, query).await {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!(error = %e, "embedding the question failed; retrieval is BM25 alone");
                None
            }
        };
        let (asked, words) = (query.text, query.words());
        let query = words.as_ref();
        let Some((model, v)) = question else {
            // nothing to fuse with: the BM25 hits kept, and no more read from the index
            let Bm25 { hits: bm25, unknown, .. } = self.bm25(replica, query, limit, Scoring::Replica)?;
            let hits = fusion::fuse(&bm25, &[], how, limit);
            return Ok(Hybrid {
                hits,
                question: None,
                unknown,
                other_language: false,
                spread: None,
                unknown_meaning: None,
            });
        };
        let depth = limit.max(fusion::DEPTH);
        let Bm25 { hits: bm25, mut unknown, other_language } = self.bm25(replica, query, depth, Scoring::Replica)?;
        // in another language than the documents, words cannot tell what the knowledge base
        // lacks: a multilingual model's meaning decides; an English-only model's cannot, and
        // the unknown terms keep refusing
        let other_language =
            other_language && self.embedders.as_ref().is_some_and(|e| e.of_replica(Some(&model)).multilingual());
        if other_language {
            unknown.clear();
        }
        let nearest = self.vectors.search(replica, &model, &v, depth);
        let how = if other_language { how.across_languages() } else { how };
        let mut hits = fusion::fuse(&bm25, &nearest.hits, how, limit);
        // the BM25 hits the vector ranking missed get their cosine too (the reader weighs it)
        let missing: Vec<(u64, u32)> =
            hits.iter().filter(|f| f.ranks.cosine.is_none()).map(|f| (f.entry, f.chunk)).collect();
        let mut cosines = self.vectors.cosines(replica, &model, &v, &missing).into_iter();
        for f in hits.iter_mut().filter(|f| f.ranks.cosine.is_none()) {
            f.ranks.cosine = cosines.next().flatten();
        }
        let unknown_meaning = self.unknown_meaning(Some(&model), asked, &unknown).await;
        let question = Some(QuestionVector { model, vector: v });
        Ok(Hybrid { hits, question, unknown, other_language, spread: nearest.spread, unknown_meaning })
    }

    /// The model id and vector of `query` under the model a replica naming `model` uses: its
    /// question's, plus the question's before it when it is read with it, normalised (each
    /// from the cache of recent questions when there: the question before was embedded when it
    /// was asked, so a follow-up costs no second embedding); `None` with no embedding model.
    async fn question_vector(&self, model: Option<&str>, query: Asked<'_>) -> Result<Option<(String, Arc<[f32]>)>> {
        let Some((id, asked)) = self.query_vector(model, query.text).await? else { return Ok(None) };
        let Some(before) = query.before else { return Ok(Some((id, asked))) };
        let Some((_, earlier)) = self.query_vector(model, before).await? else { return Ok(None) };
        let mut v: Vec<f32> = asked.iter().zip(earlier.iter()).map(|(a, b)| a + b).collect();
        crate::embed::normalize(&mut v);
        Ok(Some((id, v.into())))
    }

    /// How much of the meaning of the question `text` (embedded under the model a replica
    /// naming `model` uses) rests on its words that the knowledge base never names (`unknown`,
    /// as the analyzers in use make them): `1 − cos(v, v')`, `v` its vector (from the cache of
    /// recent questions) and `v'` that of `text` without those words; 1 when nothing is left.
    /// A generic word ("nowadays") leaves the meaning about where it was; the subject of the
    /// question ("Kubernetes") takes it away. 0 when no word of `text` is unknown; `None`
    /// when embedding fails (logged). Costs one more question embedding, only when a word is.
    async fn unknown_meaning(&self, model: Option<&str>, text: &str, unknown: &[String]) -> Option<f32> {
        if unknown.is_empty() {
            return Some(0.0);
        }
        let Some(kept) = self.without_words(text, unknown) else { return Some(0.0) };
        if kept.is_empty() {
            return Some(1.0);
        }
        let vectors =
            async { Ok::<_, Error>((self.query_vector(model, text).await?, self.query_vector(model, &kept).await?)) };
        match vectors.await {
            Ok((Some((_, v)), Some((_, w)))) => Some(1.0 - crate::embed::dot(&v, &w)),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "embedding the question without its unknown terms failed");
                None
            }
        }
    }

    /// `text` without its words (split at white space) of which an analyzer in use makes one
    /// of `terms`, the others joined by single spaces; `None` when no word is left out.
    fn without_words(&self, text: &str, terms: &[String]) -> Option<String> {
        let g = self.current();
        let mut tokenizers: Vec<_> = g.analyzers_in_use().into_iter().map(|(_, _, t)| t).collect();
        let mut unknown =
            |w: &str| tokenizers.iter_mut().any(|a| analyzers::terms(a, w).iter().any(|t| terms.contains(t)));
        let words: Vec<&str> = text.split_whitespace().collect();
        let kept: Vec<&str> = words.iter().copied().filter(|w| !unknown(w)).collect();
        (kept.len() < words.len()).then(|| kept.join(" "))
    }

    /// The model id and vector of `query` under the model a replica naming `model` uses;
    /// `None` with no embedding model.
    async fn query_vector(&self, model: Option<&str>, query: &str) -> Result<Option<(String, Arc<[f32]>)>> {
        let Some(embedders) = &self.embedders else { return Ok(None) };
        let embedder = embedders.of_replica(model);
        let key = (embedder.id().to_string(), query.to_string());
        if let Some(v) = self.query_vectors.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(Some((key.0, v.clone())));
        }
        let v: Arc<[f32]> = embedder.embed_queries(vec![query.to_string()]).await?.pop().unwrap_or_default().into();
        self.query_vectors.lock().unwrap_or_else(|p| p.into_inner()).put(key.clone(), v.clone());
        Ok(Some((key.0, v)))
    }

    /// Number of documents (chunks) in the current generation.
    pub fn num_docs(&self) -> u64 {
        self.current().reader.searcher().num_docs()
    }
}

/// What [`Search::hybrid`] found: the fused hits, best first, the question's embedding
/// (`None` without an embedding model or when embedding it failed), its terms that no
/// document of the replica holds ([`Bm25::unknown`]), and whether it is in a language none of
/// them is written in ([`Bm25::other_language`]) while a multilingual model embedded it (then
/// no term is unknown: the meaning decides, `embed::Embedder::multilingual`).
pub struct Hybrid {
    pub hits: Vec<fusion::Fused>,
    pub question: Option<QuestionVector>,
    pub unknown: Vec<String>,
    pub other_language: bool,
    /// How close the question is to all of the replica's chunks by meaning (`None` without
    /// vectors).
    pub spread: Option<crate::embed::exact::Spread>,
    /// How much of the question's meaning rests on its unknown terms
    /// ([`Search::unknown_meaning`]; `None` without vectors).
    pub unknown_meaning: Option<f32>,
}

/// What a BM25 search found: the hits, best first, and the query's terms naming its topic (as
/// the index's analyzer makes them, the function words of questions left out:
/// [`analyzers::Analyzer::topic_terms`]) that no live document of the replica holds in its
/// text or headings, not even told apart by a suffix
/// ([`statistics::ReplicaStatistics::holds_stem`]), under the replica's analyzer that leaves
/// the fewest such terms. A term the whole knowledge base never uses is a sign, by words
/// alone, that the question asks about something it does not cover.
#[derive(Debug, Default)]
struct Bm25 {
    hits: Vec<Hit>,
    unknown: Vec<String>,
    /// The question is in a language none of the replica's documents is written in
    /// ([`in_another_language`]).
    other_language: bool,
}

/// [`Bm25::unknown`]: for each analyzer in use, its terms of the query and the fields to look
/// them up in (`vocabulary`), counted over the replica's documents (`stats`).
fn unknown(stats: &statistics::ReplicaStatistics, vocabulary: &[(Vec<String>, [Field; 2])]) -> Result<Vec<String>> {
    let mut fewest: Option<Vec<String>> = None;
    for (terms, fields) in vocabulary {
        let mut missing = Vec::new();
        for t in terms {
            if !stats.holds_stem(fields, t)? {
                missing.push(t.clone());
            }
        }
        if fewest.as_ref().is_none_or(|f| missing.len() < f.len()) {
            fewest = Some(missing);
        }
    }
    Ok(fewest.unwrap_or_default())
}

/// Whether `query` is in a language none of the replica's documents is written in (`stats`:
/// the replica's; `f`: the index's fields): the body field of the analyzer of its language
/// ([`analyzers::told_by_function_words`], confirmed by [`analyzers::trigrams_agree`]) holds no token of the replica. Its words are then not
/// the documents' words, so none of them tells, by being absent, that the knowledge base lacks
/// what it asks (a question asked in English of a French knowledge base): the meaning decides.
/// `false` when its words do not tell its language.
fn in_another_language(stats: &statistics::ReplicaStatistics, f: &Fields, query: &str) -> Result<bool> {
    let Some(language) = analyzers::told_by_function_words(query) else { return Ok(false) };
    let analyzer = analyzers::for_language(Some(language));
    let Some(slot) = analyzers::ANALYZERS.iter().position(|a| a.name == analyzer.name) else { return Ok(false) };
    use tantivy::query::Bm25StatisticsProvider as _;
    // the trigram model confirms the language only when the replica has none of that language
    // (the rare case): most questions are in their documents' language and skip it
    Ok(stats.total_num_tokens(f.text[slot].body)? == 0 && analyzers::trigrams_agree(query, language))
}

/// What a retrieval is asked ([`Search::hybrid`]): a question, and the conversation's question
/// before it when it is read with it (a follow-up that says little on its own).
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub text: &'a str,
    pub before: Option<&'a str>,
}

impl<'a> From<&'a str> for Asked<'a> {
    fn from(text: &'a str) -> Asked<'a> {
        Asked { text, before: None }
    }
}

impl Asked<'_> {
    /// The words searched: the question's, after the question's before it (a blank line
    /// between them) when it is read with it.
    pub fn words(&self) -> std::borrow::Cow<'_, str> {
        match self.before {
            Some(before) => format!("{before}\n\n{}", self.text).into(),
            None => self.text.into(),
        }
    }
}

/// A question's embedding: the catalog id of the model and the (normalised) vector.
#[derive(Clone)]
pub struct QuestionVector {
    pub model: String,
    pub vector: Arc<[f32]>,
}

/// Which BM25 statistics a search scores with.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    /// The asking replica's documents only (what [`Search::search`] uses).
    Replica,
    /// Every document in the index (all tenants): the former scoring, under which one tenant's
    /// documents changed another's scores.
    WholeIndex,
}

/// A chunk to index.
pub struct ChunkDoc<'a> {
    pub replica: Uuid,
    pub entry: u64,
    pub chunk: u32,
    pub language: Option<&'a str>,
    pub title: &'a str,
    pub body: &'a str,
}

/// Terms of `text` for matching a question against sentences (the embedded generator): the
/// terms of the analyzer of `language` (ISO 639-1; English when `None`; one language for the
/// question and the sentences of its sources, so both are analyzed alike), plus the characters
/// and character bigrams of CJK and other dense scripts (single characters let a short question
/// cover a sentence that shares its words but not all their neighbours), less those holding a
/// function character ([`analyzers::CJK_FUNCTION_CHARS`]).
pub fn analyze_as(language: Option<&str>, text: &str) -> Vec<String> {
    let analyzer = analyzers::for_language(language.or(Some("en")));
    let cjk = analyzers::for_language(Some("zh"));
    let mut out: Vec<String> = if analyzer.name == cjk.name {
        cjk.part_terms(text).into_iter().filter(|t| !analyzers::has_dense(t)).collect()
    } else {
        analyzer.part_terms(text)
    };
    if !analyzers::has_dense(text) {
        return out;
    }
    // A word tokenizer keeps a dense run whole, which matches nothing: use characters and bigrams.
    out.retain(|t| !analyzers::has_dense(t));
    for t in cjk.terms(text).into_iter().filter(|t| analyzers::has_dense(t)) {
        let singles: Vec<String> = t.chars().filter(|c| analyzers::is_dense(*c)).map(String::from).collect();
        for c in singles.into_iter().chain([t]) {
            if !c.contains(analyzers::CJK_FUNCTION_CHARS) && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// Deletes generations left by an interrupted rebuild. Safe: the caller holds the store, so no
/// other process is building one.
fn remove_other_generations(dir: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("gen-") && name != current {
            if let Err(err) = std::fs::remove_dir_all(e.path()) {
                tracing::warn!(error = %err, dir = %name, "could not remove an old index generation");
            }
        }
    }
}

fn new_generation_name() -> String {
    format!("gen-{}", Uuid::now_v7().simple())
}

/// Points `CURRENT` at generation `name` (write a temporary file, fsync, rename).
fn write_current(dir: &Path, name: &str) -> Result<()> {
    use std::io::Write;
    let tmp = dir.join("CURRENT.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(name.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join("CURRENT"))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyze_gives_english_terms_and_cjk_bigrams() {
        assert_eq!(analyze_as(None, "How do I handle exceptions?"), vec!["handl".to_string(), "except".to_string()]);
        let terms = analyze_as(Some("zh"), "北京大学");
        assert!(terms.contains(&"京大".to_string()) && terms.contains(&"京".to_string()), "{terms:?}");
    }

    /// An entry of `replica` whose chunks are `(heading path, text)`.
    fn entry(entry: u64, replica: Uuid, chunks: &[(&str, &str)]) -> indexer::Change {
        let chunks = chunks
            .iter()
            .map(|(title, text)| crate::store::records::Chunk {
                title: format!("Manual › {title}"),
                text: text.to_string(),
                page: None,
            })
            .collect();
        let doc = indexer::EntryDoc { replica, revision: 1, language: Some("en".into()), chunks, vectors: None };
        indexer::Change { entry, doc: Some(doc) }
    }

    #[test]
    fn a_chunk_whose_heading_the_question_names_whole_takes_the_last_place() {
        let data = tempfile::tempdir().expect("temp dir");
        let (search, _) = Search::open(data.path()).expect("open");
        let (replica, other) = (Uuid::now_v7(), Uuid::now_v7());
        let wordy = "To count the words of a file, count each word of each line of the file and print the count.";
        search
            .stage(&[
                entry(1, replica, &[("Counting Words", wordy), ("Counting the Lines", "Print $= at the end.")]),
                entry(2, replica, &[("Lines", "Numbers start at one."), ("Counting Chars", wordy)]),
                entry(3, other, &[("Counting Files", "Use ls.")]),
            ])
            .expect("stage");
        search.commit(1).expect("commit");
        let chunks = |q: &str, limit: usize| -> Vec<(u64, u32)> {
            search.search(replica, q, limit).expect("search").iter().map(|h| (h.entry, h.chunk)).collect()
        };
        // BM25 puts "Counting the Lines" after the two wordy chunks; its heading's terms (the stop
        // word left out) are all the question's
        let all = chunks("How do I count the lines of a file?", 4);
        assert!(all.iter().position(|c| *c == (1, 1)) >= Some(2), "{all:?}");
        let two = chunks("How do I count the lines of a file?", 2);
        assert_eq!(two.len(), 2);
        assert_eq!(two[0], all[0], "the best hit keeps its place");
        assert_eq!(two[1], (1, 1), "the named heading takes the last place: {two:?}");
        // a one-term heading ("Lines") is not promoted
        let ranked = chunks("Which lines?", 4);
        assert_ne!(ranked[0], (2, 0), "{ranked:?}");
        assert_eq!(chunks("Which lines?", 1), ranked[..1]);
        // nor is another replica's chunk
        assert!(chunks("How do I count files?", 1).iter().all(|(e, _)| *e != 3));
    }

    #[test]
    fn a_question_is_searched_with_the_words_its_form_implies() {
        let data = tempfile::tempdir().expect("temp dir");
        let (search, _) = Search::open(data.path()).expect("open");
        let replica = Uuid::now_v7();
        let chatty = "The kettle heats the water. Heat the water in the kettle, then the kettle heats the pot.";
        search
            .stage(&[
                entry(1, replica, &[("Tea", chatty), ("Pots", chatty), ("How the Kettle Works", "A coil warms it.")]),
                entry(2, replica, &[("Options", "-k NUMBER Only keep the NUMBERth cup."), ("Cups", "Keep cups.")]),
            ])
            .expect("stage");
        search.commit(1).expect("commit");
        // the last of the best `limit` hits
        let last = |q: &str, limit: usize| {
            search.search(replica, q, limit).expect("search").last().map(|h| (h.entry, h.chunk))
        };
        // "How does the kettle …" also looks for "works", and so names "How the Kettle Works" whole
        assert_eq!(last("How does the kettle heat the water?", 2), Some((1, 2)));
        assert_ne!(last("Why does the kettle heat the water?", 2), Some((1, 2)));
        // a written-out ordinal also looks for the manuals' placeholders
        assert_eq!(last("Which cup is the third?", 1), Some((2, 0)));
    }

    #[test]
    fn the_terms_no_document_of_the_replica_holds_are_unknown() {
        let data = tempfile::tempdir().expect("temp dir");
        let (search, _) = Search::open(data.path()).expect("open");
        let (replica, other) = (Uuid::now_v7(), Uuid::now_v7());
        search
            .stage(&[
                entry(1, replica, &[("Kettles", "The kettle heats the water."), ("Terms", "Boiling, by definition.")]),
                entry(2, other, &[("Teapots", "A teapot keeps the tea warm.")]),
            ])
            .expect("stage");
        search.commit(1).expect("commit");
        let unknown = |q: &str| search.bm25(replica, q, 5, Scoring::Replica).expect("search").unknown;
        // stop words are no terms; a heading's words are known; another replica's are not
        assert!(unknown("How does the kettle heat water?").is_empty());
        assert!(unknown("What are kettles?").is_empty());
        // ("keep", a common word of the language's Stopwords ISO list, is not what it asks about)
        assert_eq!(unknown("How warm does the teapot keep the water?"), ["warm", "teapot"]);
        assert_eq!(unknown("Where is the teapot?"), ["teapot"]);
        // a stem told apart by a suffix ("defin", "definit") is known; a short one is not
        assert!(unknown("How do I define boiling?").is_empty());
        assert_eq!(unknown("Which heaters boil?"), ["heater"]);
        assert!(search.bm25(replica, "teapot", 5, Scoring::WholeIndex).expect("search").unknown.is_empty());
    }

    #[test]
    fn a_question_in_another_language_than_every_document_is_told() {
        let data = tempfile::tempdir().expect("temp dir");
        let (search, _) = Search::open(data.path()).expect("open");
        let (french, both) = (Uuid::now_v7(), Uuid::now_v7());
        let mut livraison = entry(1, french, &[("Livraison", "Nous livrons en France sous 48 heures.")]);
        if let Some(doc) = livraison.doc.as_mut() {
            doc.language = Some("fr".into());
        }
        let mut also_french = entry(2, both, &[("Livraison", "Nous livrons en France sous 48 heures.")]);
        if let Some(doc) = also_french.doc.as_mut() {
            doc.language = Some("fr".into());
        }
        let english = entry(3, both, &[("Returns", "Returns are accepted for 14 days.")]);
        search.stage(&[livraison, also_french, english]).expect("stage");
        search.commit(1).expect("commit");
        let unknown = |r: Uuid, q: &str| search.bm25(r, q, 5, Scoring::Replica).expect("search").unknown;
        let other = |r: Uuid, q: &str| search.bm25(r, q, 5, Scoring::Replica).expect("search").other_language;
        // English words on French documents: another language
        assert!(other(french, "How long does delivery take?"));
        // in the documents' language they are not, nor beside English documents
        assert!(!other(french, "Quels fromages en France ?") && !other(both, "How long does delivery take?"));
        assert_eq!(unknown(french, "Quels fromages en France ?"), ["fromag"]);
        assert_eq!(unknown(both, "How long does delivery take?"), ["deliveri"]);
    }

    #[test]
    fn an_index_of_another_schema_is_replaced_and_left_to_rebuild() {
        let data = tempfile::tempdir().expect("temp dir");
        let dir = data.path().join("search");
        let old = dir.join("gen-old");
        std::fs::create_dir_all(&old).expect("dir");
        let mut b = Schema::builder();
        b.add_u64_field("entry", INDEXED | STORED | FAST);
        Index::create_in_dir(&old, b.build()).expect("old index");
        write_current(&dir, "gen-old").expect("CURRENT");
        let (search, seq) = Search::open(data.path()).expect("open");
        assert_eq!(seq, None, "the store must be indexed again");
        assert!(!old.exists());
        assert!(search
            .search(Uuid::now_v7(), "What is the difference between p and P?", 5)
            .expect("search")
            .is_empty());
    }
}
