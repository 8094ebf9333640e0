//! Retrieval quality and speed of the knowledge base, in-process (store + tantivy index in a
//! temporary directory, no HTTP).
//!
//! ```sh
//! cargo run --release --example retrieval -- eval            # recall@5, nDCG@10 on tests/retrieval
//! cargo run --release --example retrieval -- eval --misses   # … and the questions missed at 5
//! cargo run --release --example retrieval -- bench 10000     # ingest MB/s; search p50/p99 at ≥10k chunks
//! cargo run --release --example retrieval -- bench 10000 --tenants 10   # … the chunks spread over 10 replicas
//! cargo run --release --example retrieval -- sections --set heldout  # right section: BM25 vs SQLite FTS5
//! cargo run --release --example retrieval -- sections --embeddings DIR  # … and vectors, RRF, convex
//! FUSION_BM25_WEIGHTS=0.3,0.5 cargo run --release --example retrieval -- sections --embeddings DIR  # … and other convex weights
//! ```
//!
//! `eval` indexes `data/sample/python-tutorial` as the demo does and asks every question of
//! `tests/retrieval/questions.json`; a retrieved chunk is relevant when its whitespace-normalised
//! text contains a labelled passage (whitespace-normalised). recall@5: share of a question's
//! passages found in the top 5, averaged; nDCG@10: binary gains, each passage counted once.
//!
//! `bench N` ingests copies of the sample documents (each copy a new entry, words varied so
//! the vocabulary grows; 16 creates in flight, as a bulk import would send them) until the index holds at least N chunks, reporting text MB/s from the
//! first create to the last entry `READY`; then times 2,000 searches (the labelled questions,
//! round robin) and reports p50/p99, of the search as served (scored with the asking replica's
//! own statistics) and, interleaved in the same run, of the former whole-index scoring.
//! `--tenants T` spreads the entries round robin over T replicas of T organizations (one
//! index, as served) and asks the first, which then holds about 1/T of the chunks.
//!
//! `sections` asks the answerable questions of a labelled answer set (`--set dev`, the default,
//! or `--set heldout`; see `examples/common/labelled.rs`), each corpus indexed as `answers`
//! does, and ranks the chunks two ways: the index as served (BM25), and SQLite FTS5 over the
//! very same chunks (`tests/answers/fts5.py`, run with `python3`: bm25 over title and text,
//! porter stemming, the question's words OR-ed). A chunk is relevant when its heading path ends
//! with an expected section. recall@5: share of questions with a relevant chunk in the top 5;
//! MRR: mean reciprocal rank of the first relevant chunk in the top 10 (0 when none). Rows as in
//! `answers`: per corpus, split, question kind and phrasing.

#[path = "common/labelled.rs"]
mod labelled;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use labelled::root;
use replicad::search::fusion::Fusion;
use replicad::search::{indexer, Scoring, Search};
use replicad::service::chat;
use replicad::service::knowledge::{self, Limits, NewEntry};
use replicad::store::kv::ReadableTable as _;
use replicad::store::{self, records::Chunk, tables, Store};
use serde_json::Value;
use uuid::Uuid;

const CORPUS: &str = "data/sample/python-tutorial";
const QUESTIONS: &str = "tests/retrieval/questions.json";

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An in-process store and index in a temporary directory, with one replica's entries.
struct Kb {
    _dir: tempfile::TempDir,
    store: Store,
    search: Arc<Search>,
    replica: Uuid,
    org: Uuid,
}

impl Kb {
    fn open() -> Kb {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let (search, _) = Search::open(dir.path()).expect("index");
        Kb { _dir: dir, store, search: Arc::new(search), replica: Uuid::now_v7(), org: Uuid::now_v7() }
    }

    async fn add(&self, text: String) -> u64 {
        self.add_to(self.org, self.replica, text).await
    }

    async fn add_to(&self, org: Uuid, replica: Uuid, text: String) -> u64 {
        let new = NewEntry::text(text, Some("en"));
        knowledge::create(&self.store, org, replica, new, Limits::UNLIMITED).await.expect("create").id
    }

    /// Applies the outbox until it is empty (what the indexer task does in the server).
    async fn index_all(&self) {
        while indexer::apply_pending(&self.store, &self.search).await.expect("index") > 0 {}
    }

    async fn chunk_text(&self, entry: u64, chunk: u32) -> String {
        self.store
            .read(move |txn| {
                let c: Option<Chunk> = store::get(&txn.open_table(tables::KBCHUNK_CHUNK)?, (entry, chunk))?;
                Ok(c.map(|c| c.text).unwrap_or_default())
            })
            .await
            .expect("chunk")
    }
}

fn corpus_files() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(root().join(CORPUS))
        .expect("corpus")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .map(|p| (name(&p), std::fs::read_to_string(&p).expect("read")))
        .collect();
    files.sort();
    files
}

fn name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
}

async fn eval(show_misses: bool) {
    let kb = Kb::open();
    let mut doc_of = std::collections::HashMap::new();
    for (file, text) in corpus_files() {
        doc_of.insert(kb.add(text).await, file);
    }
    kb.index_all().await;
    let labelled: Value = serde_json::from_str(&std::fs::read_to_string(root().join(QUESTIONS)).expect("questions"))
        .expect("questions JSON");
    let questions = labelled["questions"].as_array().expect("questions");
    let (mut recall5, mut ndcg10, mut hit1) = (0.0, 0.0, 0.0);
    for q in questions {
        let text = q["question"].as_str().unwrap_or_default();
        let passages: Vec<(String, String)> = q["relevant"]
            .as_array()
            .expect("relevant")
            .iter()
            .map(|r| (r["doc"].as_str().unwrap_or("").to_string(), normalize(r["passage"].as_str().unwrap_or(""))))
            .collect();
        let hits = kb.search.search(kb.replica, text, 10).expect("search");
        let mut found = vec![None; passages.len()];
        for (rank, h) in hits.iter().enumerate() {
            let chunk = normalize(&kb.chunk_text(h.entry, h.chunk).await);
            for (i, (doc, passage)) in passages.iter().enumerate() {
                if found[i].is_none() && doc_of.get(&h.entry) == Some(doc) && chunk.contains(passage.as_str()) {
                    found[i] = Some(rank);
                }
            }
        }
        let at5 = found.iter().filter(|r| r.is_some_and(|r| r < 5)).count() as f64 / passages.len() as f64;
        let dcg: f64 = found.iter().flatten().map(|r| 1.0 / ((*r as f64) + 2.0).log2()).sum();
        let ideal: f64 = (0..passages.len().min(10)).map(|i| 1.0 / ((i as f64) + 2.0).log2()).sum();
        recall5 += at5;
        ndcg10 += dcg / ideal;
        hit1 += if found.contains(&Some(0)) { 1.0 } else { 0.0 };
        if show_misses && at5 < 1.0 {
            println!("miss {} ({at5:.2}): {text}", q["id"].as_str().unwrap_or(""));
        }
    }
    let n = questions.len() as f64;
    println!(
        "questions {}  recall@5 {:.3}  nDCG@10 {:.3}  precision@1 {:.3}",
        questions.len(),
        recall5 / n,
        ndcg10 / n,
        hit1 / n
    );
}

/// How deep the rankings of `sections` go (MRR@10): the depth the server fuses at.
const DEPTH: usize = replicad::search::fusion::DEPTH;

/// Per question of `questions`, the indexes in `chunks` of its best [`DEPTH`] chunks by SQLite
/// FTS5 (`tests/answers/fts5.py`).
fn fts5(chunks: &[Chunk], questions: &[&labelled::Question]) -> Vec<Vec<usize>> {
    let chunks: Vec<(&str, &str)> = chunks.iter().map(|c| (c.title.as_str(), c.text.as_str())).collect();
    let questions: Vec<&str> = questions.iter().map(|q| q.question.as_str()).collect();
    let request = serde_json::json!({ "chunks": chunks, "questions": questions, "depth": DEPTH });
    let mut child = Command::new("python3")
        .arg(root().join("tests/answers/fts5.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().expect("stdin").write_all(request.to_string().as_bytes()).expect("write to fts5.py");
    let out = child.wait_with_output().expect("fts5.py");
    assert!(out.status.success(), "fts5.py failed");
    serde_json::from_slice(&out.stdout).expect("fts5.py JSON")
}

/// recall@5 and MRR sums of one group, per ranking (the columns of [`sections`]).
#[derive(Default)]
struct Ranks {
    questions: usize,
    at5: Vec<usize>,
    reciprocal: Vec<f64>,
}

/// The rankings `sections` compares: BM25 and FTS5, and with `--embeddings` the vectors alone,
/// reciprocal rank fusion and the fusion the server uses (`chat::FUSION`).
fn columns(hybrid: bool) -> Vec<String> {
    let mut c: Vec<String> = ["BM25", "FTS5"].map(String::from).to_vec();
    if hybrid {
        c.extend(["vector", "RRF", "served"].map(String::from));
        c.extend(tried_weights().iter().map(|w| format!("w{w}")));
    }
    c
}

/// BM25 weights of convex fusions to rank by besides the served one, from
/// `FUSION_BM25_WEIGHTS` (comma-separated, e.g. `0.3,0.5`; columns `w0.3`, `w0.5`).
fn tried_weights() -> Vec<f32> {
    let listed = std::env::var("FUSION_BM25_WEIGHTS").unwrap_or_default();
    listed.split(',').filter(|w| !w.is_empty()).map(|w| w.trim().parse().expect("a BM25 weight")).collect()
}

/// The titles of `replica`'s best `DEPTH` chunks for `q` by each ranking of [`columns`] but FTS5.
async fn ranked(kb: &labelled::Kb, q: &str) -> Vec<Vec<String>> {
    let hits = kb.search.search(kb.replica, q, DEPTH).expect("search");
    let mut out = vec![kb.titles(hits.iter().map(|h| (h.entry, h.chunk)).collect()).await];
    if kb.search.embedders.is_none() {
        return out;
    }
    let vector = kb.search.hybrid(kb.replica, None, q.into(), DEPTH, Fusion::Rrf).await.expect("hybrid");
    let only: Vec<(u64, u32)> = {
        let mut v: Vec<_> = vector.hits.iter().filter(|f| f.ranks.vector.is_some()).collect();
        v.sort_by_key(|f| f.ranks.vector);
        v.iter().map(|f| (f.entry, f.chunk)).collect()
    };
    out.push(kb.titles(only).await);
    let tried = tried_weights().into_iter().map(|w| Fusion::Convex { bm25_weight: w });
    for how in [Fusion::Rrf, chat::FUSION].into_iter().chain(tried) {
        let fused = kb.search.hybrid(kb.replica, None, q.into(), DEPTH, how).await.expect("hybrid");
        out.push(kb.titles(fused.hits.iter().map(|f| (f.entry, f.chunk)).collect()).await);
    }
    out
}

async fn sections(args: &[String]) {
    let labelled = labelled::load(args);
    let embedders = labelled::embedders(args);
    let names = columns(embedders.is_some());
    let mut tallies: BTreeMap<String, Ranks> = BTreeMap::new();
    for (name, dir) in &labelled.corpora {
        let kb = labelled::Kb::open(dir, embedders.clone()).await;
        let chunks = kb.chunks().await;
        let questions: Vec<&labelled::Question> =
            labelled.questions.iter().filter(|q| &q.corpus == name && q.answerable()).collect();
        for (q, fts) in questions.iter().zip(fts5(&chunks, &questions)) {
            let mut lists = ranked(&kb, &q.question).await;
            lists.insert(1, fts.iter().map(|&i| chunks[i].title.clone()).collect());
            let ranks: Vec<Option<usize>> = lists.iter().map(|l| l.iter().position(|t| q.expects(t))).collect();
            for group in q.groups() {
                let t = tallies.entry(group).or_default();
                t.questions += 1;
                t.at5.resize(ranks.len(), 0);
                t.reciprocal.resize(ranks.len(), 0.0);
                for (i, rank) in ranks.iter().enumerate() {
                    t.at5[i] += usize::from(rank.is_some_and(|r| r < 5));
                    t.reciprocal[i] += rank.map_or(0.0, |r| 1.0 / (r + 1) as f64);
                }
            }
        }
    }
    print!("{:<22} {:>4}", "group", "ans");
    names.iter().for_each(|c| print!(" {:>10} {:>10}", format!("{c} r@5"), format!("{c} MRR")));
    println!();
    for (name, t) in &tallies {
        let n = t.questions as f64;
        print!("{name:<22} {:>4}", t.questions);
        for i in 0..names.len() {
            print!(" {:>10.3} {:>10.3}", t.at5[i] as f64 / n, t.reciprocal[i] / n);
        }
        println!();
    }
}

/// Replaces every 7th word with a numbered variant so copies grow the vocabulary like real
/// documents would, instead of repeating one document's terms.
fn vary(text: &str, copy: usize) -> String {
    text.split(' ')
        .enumerate()
        .map(|(i, w)| if i % 7 == 3 && w.chars().all(char::is_alphabetic) { format!("{w}{copy}") } else { w.into() })
        .collect::<Vec<_>>()
        .join(" ")
}

async fn bench(min_chunks: u64, tenants: usize) {
    let kb = Kb::open();
    let owners: Vec<(Uuid, Uuid)> = std::iter::once((kb.org, kb.replica))
        .chain((1..tenants.max(1)).map(|_| (Uuid::now_v7(), Uuid::now_v7())))
        .collect();
    let files = corpus_files();
    let (mut bytes, mut copy) = (0usize, 0usize);
    let started = Instant::now();
    let _indexer = indexer::spawn(kb.store.clone(), kb.search.clone(), false, replicad::ops::shutdown::Stop::never());
    // Clients import in parallel: 16 creates in flight share the store's group commits.
    while chunks(&kb).await < min_chunks {
        let batch: Vec<String> = (0..64).map(|i| vary(&files[(copy + i) % files.len()].1, copy + i)).collect();
        copy += batch.len();
        bytes += batch.iter().map(String::len).sum::<usize>();
        for group in batch.chunks(16) {
            let owned = group.iter().enumerate().map(|(i, t)| (owners[(copy + i) % owners.len()], t.clone()));
            futures_util::future::join_all(owned.map(|((org, replica), t)| kb.add_to(org, replica, t))).await;
        }
    }
    let n = chunks(&kb).await;
    while kb.search.num_docs() < n {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "ingest: {copy} entries, {:.1} MB of text, {n} chunks to READY in {secs:.1} s = {:.2} MB/s",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / secs
    );
    let labelled: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(QUESTIONS)).expect("questions")).expect("JSON");
    let questions: Vec<String> = labelled["questions"]
        .as_array()
        .expect("questions")
        .iter()
        .map(|q| q["question"].as_str().unwrap_or("").into())
        .collect();
    let modes =
        [("replica statistics (served)", Scoring::Replica), ("whole-index statistics (before)", Scoring::WholeIndex)];
    let mut times = vec![Vec::new(); modes.len()];
    for i in 0..2000 {
        for (m, (_, scoring)) in modes.iter().enumerate() {
            let t = Instant::now();
            let hits =
                kb.search.search_scored(kb.replica, &questions[i % questions.len()], 5, *scoring).expect("search");
            times[m].push(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(hits);
        }
    }
    for ((label, _), mut times) in modes.iter().zip(times) {
        times.sort_by(f64::total_cmp);
        let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
        println!(
            "search at {n} chunks, {} tenant(s), {label}: p50 {:.3} ms  p99 {:.3} ms  (2000 queries, top 5)",
            owners.len(),
            pct(0.50),
            pct(0.99)
        );
    }
}

/// Chunks in the store.
async fn chunks(kb: &Kb) -> u64 {
    kb.store.read(|txn| txn.open_table(tables::KBCHUNK_CHUNK)?.len()).await.expect("count")
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("eval") => eval(args.iter().any(|a| a == "--misses")).await,
        Some("sections") => sections(&args).await,
        Some("bench") => {
            let tenants = args.iter().position(|a| a == "--tenants").and_then(|i| args.get(i + 1)?.parse().ok());
            bench(args.get(1).and_then(|n| n.parse().ok()).unwrap_or(10_000), tenants.unwrap_or(1)).await
        }
        _ => eprintln!(
            "usage: retrieval eval [--misses] | retrieval bench [MIN_CHUNKS] [--tenants T] | retrieval sections [--set dev|heldout]"
        ),
    }
}
