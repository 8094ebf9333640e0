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
//! A question's embedding is bound by memory: each forward pass reads the 42 MB of the linear
//! layers' weights (74 % of its time is in the matrix products' inner loops, `perf`), so it
//! costs about as much for 3 tokens as for 20. A passage is bound by arithmetic: f32 MiniLM
//! spends some 5 GFLOP on a 256-token chunk, so 50 chunks per second on one core (250 GFLOP/s)
//! is beyond an f32 model of this size on a CPU core. What was tried besides: candle's 8-bit
//! and 4-bit matrix products (`QMatMul`, Q8_0 / Q4_0) on MiniLM's shapes were faster only for
//! questions of a few tokens (3 tokens: 7.0 ms against 16.3 in f32) and slower at 16 tokens
//! (37.0 against 20.8 ms; 29.1 with AVX2 compiled in); f16 / bf16 weights were no faster and
//! gave NaN; stacking the query, key and value products into one changed nothing measurable.
//! A smaller model, or the cache of recent questions (there is one), are what is left.
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
