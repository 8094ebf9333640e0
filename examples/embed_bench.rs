//! What the in-process embedding model costs, and whether it embeds right.
//!
//! ```sh
//! eval "$(bash .ci/install-embedding-model)"
//! cargo build --release --example embed_bench
//! taskset -c 1 target/release/examples/embed_bench "$REPLICAD_TEST_EMBEDDING_MODEL"
//! ```
//! Prints: RSS before and after loading; the cosine of paraphrase and unrelated pairs (every
//! paraphrase must score above every unrelated pair of the same sentence, else it exits 1);
//! query embedding latency (10-word question, p50/p99); passage throughput (200-word chunks,
//! several batch sizes); vector search over 10,000 and 100,000 random 384-dim vectors, every row
//! scored and codes first (`embed::exact`), and how often the two find the same hits.

use std::path::PathBuf;
use std::time::Instant;

use replicad::embed::exact::{top_k, Codes};
use replicad::embed::local::Model;
use replicad::embed::{dot, normalize, Kind};

/// `(sentence, paraphrase, unrelated)`.
const PAIRS: &[(&str, &str, &str)] = &[
    (
        "How do I delete a key from a dictionary?",
        "Use del d[key] to remove an entry from a dict.",
        "The train to the coast leaves at noon every Sunday.",
    ),
    (
        "Why does 0.1 + 0.2 not equal 0.3?",
        "Binary floating point cannot represent most decimal fractions exactly, so sums are rounded.",
        "Our office is closed on public holidays.",
    ),
    ("A man is playing a guitar.", "Someone is playing an instrument.", "The stock market fell sharply today."),
    (
        "What's the way to handle errors in Python?",
        "Exceptions are caught with try and except blocks.",
        "Bake the bread for forty minutes at 200 degrees.",
    ),
    (
        "The secret phrase is RAINBOW_UNICORN_42.",
        "What is the rainbow unicorn phrase mentioned in the text?",
        "How many legs does a spider have?",
    ),
];

const QUESTION: &str = "How can I change the port the server listens on?";

const WORDS: &str = "the server reads its configuration file at start and listens on the port given there \
    a request is parsed authorized and answered by the handler of its route while background tasks index new \
    documents split them into chunks of a few hundred words and keep the search index consistent with the store \
    errors are reported with a status code a machine readable code and a message that never leaks secrets \
    operators back up the data directory online restore it on another machine and check its integrity";

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// CPU time of the process (all its threads: candle hands some work to rayon), in ms: what a request costs the server, unlike wall time,
/// which on a shared machine also counts the time other processes held the core.
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// Runs `f` once per item, returning `(wall p50, wall p99, cpu p50, cpu p99)` in ms.
fn timed<T>(items: &[T], mut f: impl FnMut(&T)) -> (f64, f64, f64, f64) {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for item in items {
        let (t, c) = (Instant::now(), cpu_ms());
        f(item);
        cpu.push(cpu_ms() - c);
        wall.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let ((w50, w99), (c50, c99)) = (percentiles(wall), percentiles(cpu));
    (w50, w99, c50, c99)
}

fn percentiles(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// `n` different chunks of 200 words each.
fn chunks(n: usize) -> Vec<String> {
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    (0..n).map(|i| (0..200).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect()
}

fn check_pairs(model: &Model) -> bool {
    let mut ok = true;
    println!("cosine: paraphrase vs unrelated");
    for (a, p, u) in PAIRS {
        let v = model.embed_blocking(Kind::Query, &[a.to_string()]).unwrap();
        let w = model.embed_blocking(Kind::Passage, &[p.to_string(), u.to_string()]).unwrap();
        let (sp, su) = (dot(&v[0], &w[0]), dot(&v[0], &w[1]));
        ok &= sp > su + 0.1;
        println!("  {sp:.3} vs {su:.3}  {a}");
    }
    ok
}

fn query_latency(model: &Model) {
    let q = vec![QUESTION.to_string()];
    for _ in 0..20 {
        model.embed_blocking(Kind::Query, &q).unwrap();
    }
    let runs = vec![(); 300];
    let (w50, w99, c50, c99) = timed(&runs, |_| {
        model.embed_blocking(Kind::Query, &q).unwrap();
    });
    println!("query embedding (10 words): wall p50 {w50:.2} ms, p99 {w99:.2} ms; CPU p50 {c50:.2} ms, p99 {c99:.2} ms");
}

fn throughput(model: &Model) {
    let texts = chunks(64);
    let tokens = model.layout().max_tokens;
    // texts per call; within a call the model batches them by its token budget
    for batch in [1, 4, 8, 16] {
        let (t, c) = (Instant::now(), cpu_ms());
        for group in texts.chunks(batch) {
            model.embed_blocking(Kind::Passage, group).unwrap();
        }
        let per_s = texts.len() as f64 / t.elapsed().as_secs_f64();
        let per_cpu_s = texts.len() as f64 / ((cpu_ms() - c) / 1e3);
        println!("passages (200 words, cut at {tokens} tokens), {batch:>2} per call: {per_s:.1} chunks/s wall, {per_cpu_s:.1} per CPU second");
    }
    let (t, c) = (Instant::now(), cpu_ms());
    model.embed_blocking(Kind::Passage, &texts).unwrap();
    let per_s = texts.len() as f64 / t.elapsed().as_secs_f64();
    let per_cpu_s = texts.len() as f64 / ((cpu_ms() - c) / 1e3);
    println!(
        "passages, all {} in one call (as the indexer): {per_s:.1} chunks/s wall, {per_cpu_s:.1} per CPU second",
        texts.len()
    );
}

fn vector_search(n: usize, dim: usize) {
    let mut state = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let mut vectors: Vec<f32> = (0..n * dim).map(|_| next()).collect();
    vectors.chunks_exact_mut(dim).for_each(normalize);
    let queries: Vec<Vec<f32>> = (0..200)
        .map(|_| {
            let mut q: Vec<f32> = (0..dim).map(|_| next()).collect();
            normalize(&mut q);
            q
        })
        .collect();
    let codes = Codes::of(&vectors, dim);
    for (name, codes) in [("every row scored", &Codes::default()), ("8-bit codes, then rescored", &codes)] {
        let (w50, w99, c50, c99) = timed(&queries, |q| {
            std::hint::black_box(top_k(q, &vectors, codes, 20));
        });
        println!("search, {name}, {n} vectors × {dim}, top 20: wall p50 {w50:.2} ms, p99 {w99:.2} ms; CPU p50 {c50:.2} ms, p99 {c99:.2} ms");
    }
    let same = queries.iter().filter(|q| top_k(q, &vectors, &codes, 20) == top_k(q, &vectors, &Codes::default(), 20));
    println!("  the codes found the hits of every row scored for {} of {} questions", same.count(), queries.len());
}

fn main() {
    replicad::embed::local::one_thread_per_product();
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os("REPLICAD_TEST_EMBEDDING_MODEL"))
        .expect("usage: embed_bench MODEL_DIR (or REPLICAD_TEST_EMBEDDING_MODEL; run .ci/install-embedding-model)")
        .into();
    let before = rss_kib();
    let t = Instant::now();
    let model = Model::load(&dir).unwrap_or_else(|e| panic!("{e}"));
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let layout = model.layout();
    println!(
        "model {}: dim {}, {:?} pooling, window {} tokens, prompts {:?}/{:?}; loaded in {load_ms:.0} ms",
        dir.display(),
        layout.dimension,
        layout.pooling,
        layout.max_tokens,
        layout.query_prompt,
        layout.passage_prompt
    );
    model.embed_blocking(Kind::Query, &[QUESTION.to_string()]).unwrap();
    println!("RSS: {} MiB before loading, {} MiB loaded (after one query)", before / 1024, rss_kib() / 1024);
    let pairs_ok = check_pairs(&model);
    query_latency(&model);
    throughput(&model);
    println!("RSS after the passages: {} MiB", rss_kib() / 1024);
    drop(model);
    for n in [10_000, 100_000] {
        vector_search(n, layout_dim(&dir));
    }
    if !pairs_ok {
        eprintln!("a paraphrase did not score clearly above its unrelated sentence");
        std::process::exit(1);
    }
}

fn layout_dim(dir: &std::path::Path) -> usize {
    replicad::embed::layout::Layout::read(dir).map(|l| l.dimension).unwrap_or(384)
}
