//! What the in-process embedding model costs, and whether it embeds right.
//!
//! ```sh
//! eval "$(bash .ci/install-embedding-model)"
//! cargo build --release --example embed_bench
//! taskset -c 1 target/release/examples/embed_bench "$REPLICAD_TEST_EMBEDDING_MODEL"
//! ```
//! Prints: RSS before and after loading; the cosine of each sentence to its paraphrase and to
//! every unrelated sentence (each paraphrase must score above all of them, else it exits 1);
//! query embedding latency (10-word question, p50/p99); passage throughput (200-word chunks,
//! several batch sizes); vector search over 10,000 and 100,000 random 384-dim vectors, every row
//! scored and codes first (`embed::exact`), and how often the two find the same hits.

use std::path::PathBuf;
use std::time::Instant;

use replicad::embed::exact::{top_k, Codes};
use replicad::embed::local::Model;
use replicad::embed::{dot, normalize, Kind, Precision};

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
/// Questions of 1 to about 40 tokens (around the kernels' switches at 6 and 32 rows), embedded
/// one at a time for `--fingerprint`.
const FINGERPRINT_QUESTIONS: [&str; 5] = [
    "port",
    "How can I change the port the server listens on?",
    "Where is the configuration file kept, and which of its settings can I change without a restart?",
    "Wie ändere ich den Port, auf dem der Server lauscht, wenn der Standardport schon belegt ist und ich keinen Zugriff auf die Firewall habe?",
    "What happens to the answers already cached when I replace a document in the knowledge base with a newer version of the same file, and how long until the new text is searched?",
];

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

/// CPU time of the calling thread, in ms.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid pointer it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
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

/// Whether each sentence of [`PAIRS`] (as a query) scores its paraphrase above every unrelated
/// sentence of [`PAIRS`] (passages), printing the cosines.
fn check_pairs(model: &Model) -> bool {
    let passages = |pick: fn(&(&'static str, &'static str, &'static str)) -> &'static str| {
        PAIRS.iter().map(|t| pick(t).to_string()).collect::<Vec<_>>()
    };
    let paraphrases = model.embed_blocking(Kind::Passage, &passages(|t| t.1)).unwrap();
    let unrelated = model.embed_blocking(Kind::Passage, &passages(|t| t.2)).unwrap();
    let (mut to_paraphrase, mut to_unrelated) = (Vec::new(), Vec::new());
    println!("cosine: paraphrase vs the closest of the {} unrelated sentences", PAIRS.len());
    for ((a, _, _), p) in PAIRS.iter().zip(&paraphrases) {
        let v = model.embed_blocking(Kind::Query, &[a.to_string()]).unwrap();
        let cosines: Vec<f32> = unrelated.iter().map(|u| dot(&v[0], u)).collect();
        let closest = cosines.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        println!("  {:.3} vs {closest:.3}  {a}", dot(&v[0], p));
        to_paraphrase.push(dot(&v[0], p));
        to_unrelated.push(cosines);
    }
    paraphrases_rank_first(&to_paraphrase, &to_unrelated)
}

/// Whether every sentence's paraphrase scores above every unrelated sentence: `paraphrase[i]` is
/// sentence `i`'s cosine to its paraphrase, `unrelated[i]` its cosines to the unrelated sentences.
/// A rank, not a margin: each model's cosines sit in a band of its own (unrelated sentences
/// 0.05–0.10 and paraphrases 0.39–0.78 with all-MiniLM-L6-v2; 0.71–0.79 and 0.80–0.91 with
/// multilingual-e5-small), so no fixed margin suits every model. A model that embeds every text alike (ties) fails it, and one
/// that embeds at random passes it once in 6⁵.
fn paraphrases_rank_first(paraphrase: &[f32], unrelated: &[Vec<f32>]) -> bool {
    paraphrase.len() == unrelated.len() && paraphrase.iter().zip(unrelated).all(|(p, u)| u.iter().all(|u| p > u))
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
    let tokens = model.token_ids(Kind::Query, QUESTION).map_or(0, |t| t.len());
    println!("query embedding (10 words, {tokens} tokens): wall p50 {w50:.2} ms, p99 {w99:.2} ms; CPU p50 {c50:.2} ms, p99 {c99:.2} ms");
}

fn throughput(model: &Model) {
    let texts = chunks(64);
    let tokens = model.layout().max_tokens;
    let lengths: Vec<usize> = texts.iter().map(|t| model.token_ids(Kind::Passage, t).map_or(0, |t| t.len())).collect();
    let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
    println!(
        "passages: {mean:.0} tokens on average, {} to {}",
        lengths.iter().min().unwrap_or(&0),
        lengths.iter().max().unwrap_or(&0)
    );
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

/// `--kernels`: one linear layer of MiniLM's shapes (`rows × inputs → outputs`), 36 distinct
/// weight matrices in turn so that they come from memory as in a forward pass, multiplied by
/// candle in `f32` (as `encoder::Dense` does), by candle's 8-bit `QMatMul` (Q8_0), and by
/// `replicad_kernels::int8` on each SIMD path this CPU has (`int8 Vnni`: AVX-512 VNNI `vpdpwssd`,
/// `int8 Avx2`: `vpmaddwd`; the same bits). Prints µs per product (CPU time of the thread, median
/// of 7 rounds) and GMAC/s.
fn kernels() {
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};
    use replicad_kernels::int8::{chosen, describe, Linear, Path};
    let paths: Vec<Path> = [Path::Vnni, Path::Avx2].into_iter().filter(|p| p.available()).collect();
    println!("int8 serves on {:?}: {}", chosen(), describe(chosen()));
    let random = |n: usize, seed: u64| -> Vec<f32> {
        replicad_kernels::pseudo_random(n, seed).into_iter().map(|v| v * 0.1).collect()
    };
    for (inputs, outputs) in [(384, 384), (384, 1536), (1536, 384)] {
        let layers = 36 * 384 * 384 / (inputs * outputs);
        let weights: Vec<Vec<f32>> = (0..layers).map(|i| random(inputs * outputs, i as u64 + 1)).collect();
        let bias = vec![0.0f32; outputs];
        let f32s: Vec<Tensor> = weights
            .iter()
            .map(|w| Tensor::from_slice(w, (outputs, inputs), &Device::Cpu).unwrap().t().unwrap().contiguous().unwrap())
            .collect();
        let q8: Vec<QMatMul> = weights
            .iter()
            .map(|w| {
                let t = Tensor::from_slice(w, (outputs, inputs), &Device::Cpu).unwrap();
                QMatMul::from_qtensor(QTensor::quantize(&t, GgmlDType::Q8_0).unwrap()).unwrap()
            })
            .collect();
        let int8: Vec<Linear> = weights.iter().map(|w| Linear::quantize(w, &bias, outputs, inputs)).collect();
        for rows in [1, 3, 13, 32, 256] {
            let xv = random(rows * inputs, 99);
            let x = Tensor::from_slice(&xv, (rows, inputs), &Device::Cpu).unwrap();
            let macs = (rows * inputs * outputs) as f64;
            let mut line = format!("  {rows:>3} × {inputs:>4} → {outputs:>4}:");
            let mut time = |name: &str, f: &mut dyn FnMut(usize)| {
                let mut rounds: Vec<f64> = (0..7)
                    .map(|_| {
                        let t = thread_cpu_ms();
                        for i in 0..layers {
                            f(i);
                        }
                        (thread_cpu_ms() - t) * 1e3 / layers as f64
                    })
                    .collect();
                rounds.sort_by(f64::total_cmp);
                let us = rounds[3];
                line += &format!("  {name} {us:>7.1} µs {:>5.1} GMAC/s", macs / us / 1e3);
            };
            time("f32", &mut |i| {
                let w = &f32s[i];
                let y = if rows <= 32 {
                    w.t().unwrap().matmul(&x.t().unwrap()).unwrap().t().unwrap().contiguous().unwrap()
                } else {
                    x.matmul(w).unwrap()
                };
                std::hint::black_box(y);
            });
            time("candle Q8_0", &mut |i| {
                std::hint::black_box(q8[i].forward(&x).unwrap());
            });
            for &path in &paths {
                time(&format!("int8 {path:?}"), &mut |i| {
                    std::hint::black_box(int8[i].forward_on(path, &xv, rows));
                });
            }
            println!("{line}");
        }
    }
}

/// `--kernels-q4`: one linear layer of multilingual-e5-small's shapes (`rows × inputs →
/// outputs`; the queries, keys and values stacked), distinct weight matrices in turn (about 12
/// MB of them, so that they come from memory as in a forward pass), in `Q4_0` blocks: candle's
/// `QMatMul` (`Q4_0` × `Q8_0`), the 8-bit kernel on the weights dequantized and quantized again
/// (`replicad_kernels::int8`, on the path it serves on: VNNI `vpdpwssd` or AVX2 `vpmaddwd`), and `replicad_kernels::q4` on each path this CPU
/// has. Prints µs per product (CPU time of the thread, median of 7 rounds) and GMAC/s.
fn kernels_q4() {
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};
    use replicad_kernels::q4::{self, Path};
    let random = |n: usize, seed: u64| -> Vec<f32> {
        replicad_kernels::pseudo_random(n, seed).into_iter().map(|v| v * 0.1).collect()
    };
    let paths: Vec<Path> = [Path::Vnni, Path::Avx2].into_iter().filter(|p| p.available()).collect();
    for (inputs, outputs) in [(384, 1152), (384, 384), (384, 1536), (1536, 384)] {
        let layers = 48 * 384 * 384 / (inputs * outputs);
        let weights: Vec<Tensor> = (0..layers)
            .map(|i| Tensor::from_vec(random(inputs * outputs, i as u64 + 1), (outputs, inputs), &Device::Cpu).unwrap())
            .collect();
        let qt: Vec<QTensor> = weights.iter().map(|w| QTensor::quantize(w, GgmlDType::Q4_0).unwrap()).collect();
        let blocks: Vec<Vec<u8>> = qt.iter().map(|q| q.data().unwrap().to_vec()).collect();
        let candle: Vec<QMatMul> = weights
            .iter()
            .map(|w| QMatMul::from_qtensor(QTensor::quantize(w, GgmlDType::Q4_0).unwrap()).unwrap())
            .collect();
        let bias = vec![0.0f32; outputs];
        let ours: Vec<q4::Linear> = blocks.iter().map(|b| q4::Linear::from_q4_0(b, &bias, outputs, inputs)).collect();
        let int8: Vec<replicad_kernels::int8::Linear> = blocks
            .iter()
            .map(|b| {
                let mut w = vec![0f32; outputs * inputs];
                for (o, row) in w.chunks_exact_mut(inputs).enumerate() {
                    let n = q4::row_bytes(inputs);
                    q4::dequantize_row(&b[o * n..(o + 1) * n], row);
                }
                replicad_kernels::int8::Linear::quantize(&w, &bias, outputs, inputs)
            })
            .collect();
        for rows in [1, 15, 64, 256] {
            let xv = random(rows * inputs, 99);
            let x = Tensor::from_slice(&xv, (rows, inputs), &Device::Cpu).unwrap();
            let macs = (rows * inputs * outputs) as f64;
            let mut line = format!("  {rows:>3} × {inputs:>4} → {outputs:>4}:");
            let mut time = |name: &str, f: &mut dyn FnMut(usize)| {
                let mut rounds: Vec<f64> = (0..7)
                    .map(|_| {
                        let t = thread_cpu_ms();
                        for i in 0..layers {
                            f(i);
                        }
                        (thread_cpu_ms() - t) * 1e3 / layers as f64
                    })
                    .collect();
                rounds.sort_by(f64::total_cmp);
                let us = rounds[3];
                line += &format!("  {name} {us:>7.1} µs {:>5.1}", macs / us / 1e3);
            };
            time("candle Q4_0", &mut |i| {
                std::hint::black_box(candle[i].forward(&x).unwrap());
            });
            time("int8", &mut |i| {
                std::hint::black_box(int8[i].forward(&xv, rows));
            });
            for &path in &paths {
                time(&format!("q4 {path:?}"), &mut |i| {
                    std::hint::black_box(ours[i].forward_on(path, &xv, rows));
                });
            }
            println!("{line}");
        }
    }
    println!("(µs per product, then GMAC/s)");
}

/// Each question's top 5 passages (windows) by the `f32` vectors, against its top 5 when the
/// question is embedded by `auto` and the passages are the stored `f32` ones (mixed: a new build
/// on an old index) and when both are `auto`: the share of those top 5 found again, and the
/// largest change of a question–passage cosine.
fn mixing(dir: &str, passages: &(Vec<Vec<f32>>, Vec<Vec<f32>>), questions: &(Vec<Vec<f32>>, Vec<Vec<f32>>)) {
    let top5 = |q: &[f32], ps: &[Vec<f32>]| {
        let mut scored: Vec<(f32, usize)> = ps.iter().enumerate().map(|(i, p)| (dot(q, p), i)).collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.iter().take(5).map(|s| s.1).collect::<Vec<usize>>()
    };
    for (name, q_fast, p_fast) in [("mixed (question auto, passages f32)", true, false), ("both auto", true, true)] {
        let (mut same, mut total, mut worst) = (0, 0, 0f32);
        for (qe, qf) in questions.0.iter().zip(&questions.1) {
            let q = if q_fast { qf } else { qe };
            let ps = if p_fast { &passages.1 } else { &passages.0 };
            let (want, got) = (top5(qe, &passages.0), top5(q, ps));
            same += got.iter().filter(|i| want.contains(i)).count();
            total += want.len();
            for (pe, p) in passages.0.iter().zip(ps) {
                worst = worst.max((dot(qe, pe) - dot(q, p)).abs());
            }
        }
        println!(
            "{dir}: {name}: {same} of {total} top-5 passages of the f32 ranking found again; largest cosine change {worst:.4}"
        );
    }
}

/// `--ab MODEL_DIR`: the model loaded in `f32` and in `auto` in one process, timed in
/// alternation (5 rounds each): a 10-word question's CPU time (p50 and p99 of 100 per round,
/// all rounds pooled) and 16 passages of 200 words per call (chunks per CPU second, median round),
/// so that the machine's other load weighs on both alike.
fn ab(dir: &std::path::Path) {
    let models = [
        Model::load(dir, Precision::F32).unwrap_or_else(|e| panic!("{e}")),
        Model::load(dir, Precision::Auto).unwrap_or_else(|e| panic!("{e}")),
    ];
    let q = vec![QUESTION.to_string()];
    let texts = chunks(16);
    let (mut query, mut passages): ([Vec<f64>; 2], [Vec<f64>; 2]) = Default::default();
    for round in 0..6 {
        for (m, model) in models.iter().enumerate() {
            let runs = vec![(); 100];
            let mut cpu = Vec::new();
            for _ in &runs {
                let c = thread_cpu_ms();
                model.embed_blocking(Kind::Query, &q).unwrap();
                cpu.push(thread_cpu_ms() - c);
            }
            let c = cpu_ms();
            model.embed_blocking(Kind::Passage, &texts).unwrap();
            let per_cpu_s = texts.len() as f64 / ((cpu_ms() - c) / 1e3);
            if round > 0 {
                // round 0 warms up
                query[m].extend(cpu);
                passages[m].push(per_cpu_s);
            }
        }
    }
    for (m, model) in models.iter().enumerate() {
        let (p50, p99) = percentiles(query[m].clone());
        let (chunks, _) = percentiles(passages[m].clone());
        println!(
            "{}: query (10 words) CPU p50 {p50:.2} ms, p99 {p99:.2} ms; passages {chunks:.1} chunks of 256 tokens per CPU second",
            model.kernel().describe()
        );
    }
}

/// Text files (`.md`, `.txt`, `.rst`, `.html`) under `dir`, recursively, sorted.
fn text_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            text_files(&path, out);
        } else if path.extension().is_some_and(|x| ["md", "txt", "rst", "html"].iter().any(|e| x == *e)) {
            out.push(path);
        }
    }
}

/// `--cosines MODEL_DIR DIR...`: every 200-word window of the text files under each `DIR` (as
/// passages) and every question of a `questions.json` there (as queries), embedded in `f32` and
/// in `auto`; prints the cosine of each kind's vectors to the `f32` ones (min, 1st percentile,
/// mean) and exits 1 if a passage's is below 0.995 or their mean below 0.999.
fn cosines(model_dir: &std::path::Path, dirs: &[String]) {
    let exact = Model::load(model_dir, Precision::F32).unwrap_or_else(|e| panic!("{e}"));
    let fast = Model::load(model_dir, Precision::Auto).unwrap_or_else(|e| panic!("{e}"));
    println!("comparing {:?} with {:?}", fast.kernel(), exact.kernel());
    let mut ok = true;
    for dir in dirs {
        let mut files = Vec::new();
        text_files(std::path::Path::new(dir), &mut files);
        let mut passages = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            let words: Vec<&str> = text.split_whitespace().collect();
            passages.extend(words.chunks(200).map(|w| w.join(" ")));
        }
        let questions: Vec<String> = std::fs::read_to_string(std::path::Path::new(dir).join("questions.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["questions"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|q| q["question"].as_str().map(str::to_string))
            .collect();
        let mut vectors = Vec::new(); // [(f32, auto)] for passages, then questions
        for (kind, texts) in [(Kind::Passage, &passages), (Kind::Query, &questions)] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for group in texts.chunks(64) {
                a.extend(exact.embed_blocking(kind, group).unwrap());
                b.extend(fast.embed_blocking(kind, group).unwrap());
            }
            if !texts.is_empty() {
                let mut cos: Vec<f32> = a.iter().zip(&b).map(|(a, b)| dot(a, b)).collect();
                let mean = cos.iter().map(|&c| f64::from(c)).sum::<f64>() / cos.len() as f64;
                cos.sort_by(f32::total_cmp);
                let p1 = cos[(cos.len() - 1) / 100];
                println!(
                    "{dir}: {} {kind:?} texts: cosine to f32 min {:.5}, p1 {p1:.5}, mean {mean:.5}",
                    cos.len(),
                    cos[0]
                );
                ok &= cos[0] >= 0.995 && mean >= 0.999;
            }
            vectors.push((a, b));
        }
        mixing(dir, &vectors[0], &vectors[1]);
    }
    if !ok {
        eprintln!("a vector is further from its f32 vector than the stated tolerance (min 0.995, mean 0.999)");
        std::process::exit(1);
    }
}

fn main() {
    replicad::embed::local::one_thread_per_product();
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--ab") {
        ab(std::path::Path::new(&args[i + 1]));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--queries") {
        // the 10-word question alone, 2,000 times (to profile it: `perf record`)
        let model = Model::load(std::path::Path::new(&args[i + 1]), precision()).unwrap_or_else(|e| panic!("{e}"));
        let q = vec![QUESTION.to_string()];
        let (_, _, c50, c99) = timed(&[(); 2000], |_| {
            model.embed_blocking(Kind::Query, &q).unwrap();
        });
        println!("{}: query (10 words) CPU p50 {c50:.2} ms, p99 {c99:.2} ms", model.kernel().describe());
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--fingerprint") {
        // xxh3 of the bits of two passages' vectors, to compare builds (tests/it/embedding.rs),
        // then of questions' vectors, each embedded alone as a question is (few rows per product)
        let model = Model::load(std::path::Path::new(&args[i + 1]), precision()).unwrap_or_else(|e| panic!("{e}"));
        let texts = ["How do I delete a key from a dictionary?", "Use del d[key] to remove an entry from a dict."];
        let vectors = model.embed_blocking(Kind::Passage, &texts.map(str::to_string)).unwrap();
        let hash = |v: &[Vec<f32>]| {
            let bytes: Vec<u8> = v.iter().flatten().flat_map(|v| v.to_bits().to_le_bytes()).collect();
            xxhash_rust::xxh3::xxh3_64(&bytes)
        };
        println!("{:?}: {:#018x}", model.kernel(), hash(&vectors));
        let questions =
            FINGERPRINT_QUESTIONS.iter().flat_map(|q| model.embed_blocking(Kind::Query, &[q.to_string()]).unwrap());
        println!("questions, one at a time: {:#018x}", hash(&questions.collect::<Vec<_>>()));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--cosines") {
        let model = args.get(i + 1).expect("--cosines MODEL_DIR DIR...");
        cosines(std::path::Path::new(model), &args[i + 2..]);
        return;
    }
    if std::env::args().any(|a| a == "--kernels-q4") {
        kernels_q4();
        return;
    }
    if std::env::args().any(|a| a == "--kernels") {
        kernels();
        return;
    }
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os("REPLICAD_TEST_EMBEDDING_MODEL"))
        .expect("usage: embed_bench MODEL_DIR (or REPLICAD_TEST_EMBEDDING_MODEL; run .ci/install-embedding-model)")
        .into();
    let before = rss_kib();
    let t = Instant::now();
    let model = Model::load(&dir, precision()).unwrap_or_else(|e| panic!("{e}"));
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let layout = model.layout();
    println!(
        "model {}: dim {}, {:?} pooling, window {} tokens, prompts {:?}/{:?}; loaded in {load_ms:.0} ms; {}",
        dir.display(),
        layout.dimension,
        layout.pooling,
        layout.max_tokens,
        layout.query_prompt,
        layout.passage_prompt,
        model.kernel().describe()
    );
    model.embed_blocking(Kind::Query, &[QUESTION.to_string()]).unwrap();
    println!("RSS: {} MiB before loading, {} MiB loaded (after one query)", before / 1024, rss_kib() / 1024);
    let pairs_ok = check_pairs(&model);
    query_latency(&model);
    throughput(&model);
    println!("RSS after the passages: {} MiB", rss_kib() / 1024);
    drop(model);
    // `--no-search`: the model's figures alone
    for n in [10_000, 100_000].into_iter().filter(|_| !std::env::args().any(|a| a == "--no-search")) {
        vector_search(n, layout_dim(&dir));
    }
    if !pairs_ok {
        eprintln!("a sentence's paraphrase did not score above every unrelated sentence");
        std::process::exit(1);
    }
}

/// `--embedding-precision f32|auto` (default `auto`, as `serve`).
fn precision() -> Precision {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--embedding-precision").and_then(|i| args.get(i + 1)) {
        Some(p) if p == "f32" => Precision::F32,
        _ => Precision::Auto,
    }
}

fn layout_dim(dir: &std::path::Path) -> usize {
    replicad::embed::layout::Layout::read(dir).map(|l| l.dimension).unwrap_or(384)
}

#[cfg(test)]
mod tests {
    use super::paraphrases_rank_first;

    #[test]
    fn paraphrases_above_every_unrelated_sentence_pass_in_a_narrow_band_of_cosines() {
        // multilingual-e5-small's figures: every cosine between 0.66 and 0.92
        let unrelated = vec![vec![0.757, 0.70, 0.71], vec![0.784, 0.74, 0.72], vec![0.787, 0.73, 0.66]];
        assert!(paraphrases_rank_first(&[0.913, 0.874, 0.796], &unrelated));
    }

    #[test]
    fn a_paraphrase_below_any_unrelated_sentence_fails() {
        let unrelated = vec![vec![0.1, 0.2], vec![0.1, 0.75]];
        assert!(!paraphrases_rank_first(&[0.9, 0.7], &unrelated));
    }

    #[test]
    fn a_model_that_embeds_every_text_alike_fails() {
        // every vector the same: every cosine 1
        assert!(!paraphrases_rank_first(&[1.0; 3], &vec![vec![1.0; 3]; 3]));
    }
}
