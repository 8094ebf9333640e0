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
//!   batches side by side);
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
//! 16-bit activations per row (`replicad_kernels::int8`, [`encoder::Kernel`]); elsewhere, and
//! with `--embedding-precision f32`, everything is `f32` as before (vectors bit for bit).
//! Measured on this project's 2-core AMD EPYC (AVX2, no AVX-512) while two other builds ran
//! (load 10–12), pinned to one core, `f32` and `auto` alternated in one process
//! (`embed_bench --ab MODEL`), 2026-11-28:
//! - a 10-word question (13 tokens): CPU p50 **5.1 ms** against 10.4 ms in `f32` (2.0×);
//! - passages: 11.1 chunks of 256 tokens per CPU second against 10.1 (1.1×): half of a
//!   chunk's time is outside the linear layers (attention and softmax in `f32`, layer norms,
//!   GELU, copies), and on AVX2 the 8-bit product does only ~1.5× the `f32` one (below);
//! - RSS with the model loaded 72 MiB against 103 (the `f32` weights of the linear layers are
//!   not kept), 91 against 121 MiB after the passages;
//! - vectors (`embed_bench --cosines MODEL tests/answers/heldout tests/answers/heldout3`:
//!   every 200-word window of the held-out corpora and every held-out question): cosine to the
//!   `f32` vector min 0.9979, mean 0.9994 (passages), min 0.9990, mean 0.9996 (questions).
//!
//! One linear layer alone (`embed_bench --kernels`, 36 weight matrices in turn, thread CPU
//! time, same load): 13 rows × 384 → 1536 take 193 µs in 8-bit, 551 µs in `f32` and 1,704 µs
//! with candle's `QMatMul` Q8_0; 256 rows × 384 → 1536, 3.5 ms, 5.2 ms and 34 ms (43, 29 and
//! 4.4 G multiply-adds per second). candle's 8-bit product is 4–10× slower than `f32` here: its
//! x86 SIMD code is compiled only with `-C target-feature=+avx2` (not chosen at run time), so
//! it was not used; no other crate offering an 8-bit GEMM was tried in the time (tract-linalg
//! has one). The kernel's ceiling on AVX2 is 2 `vpmaddwd` per cycle, 32 multiply-adds per cycle
//! (each needs a `vpaddd` too: ~25 in practice); at the 2.25–3 GHz this core runs at, a chunk's
//! 2.72 G multiply-adds take at least 85 M cycles (28–35 ms) and its attention in `f32`
//! (16 per cycle) 19 M more: about 24–29 chunks per CPU second at best, a question's
//! 138 M multiply-adds 1.4–1.9 ms. AVX-512 VNNI (`vpdpbusd`, 64 byte products per
//! instruction, no separate add) would be the next kernel, about twice this one's arithmetic
//! per cycle; it is not written, no machine of this project having it to test and measure on.
//!
//! Retrieval (`cargo run --release --example retrieval -- sections --set heldout --embeddings
//! MODEL --embedding-precision f32|auto`), `f32` → 8-bit: heldout, served recall@5 0.891 →
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
pub mod exact;
pub mod hub;
pub mod install;
pub mod layout;
pub mod local;
pub mod pooling;
mod quantized;
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

    /// One vector per text, in order, each of [`Embedder::dimension`] `f32` with an L2 norm of 1
    /// (a zero vector stays zero). Texts longer than the model's window are cut, not refused.
    /// Errors: 502 `UPSTREAM_ERROR` for an upstream that fails or answers malformed vectors;
    /// 500 for an in-process inference failure.
    fn embed(&self, kind: Kind, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>>;

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
