//! In-process embeddings from a model directory ([`super::layout`]): tokenizer (`tokenizer.json`
//! by the `tokenizers` crate), encoder ([`super::encoder`]), pooling ([`super::pooling`]).
//!
//! Texts get the directory's prompt for their [`Kind`], are cut at the model's window
//! ([`Layout::max_tokens`]), sorted by length and run in batches of [`BATCH`] padded to their
//! longest text (so a short question never pays for a long chunk's padding). Inference is CPU
//! work of milliseconds to seconds: [`Local`] runs it on tokio's blocking pool, never on the
//! runtime's workers; [`Model::embed_blocking`] is the same work for callers already on a
//! thread of their own (indexer, benches).

use std::path::Path;
use std::sync::Arc;

use tokenizers::{Tokenizer, TruncationParams};

use super::encoder::{Batch, Encoder};
use super::layout::Layout;
use super::pooling::pool;
use super::{BoxFuture, Embedder, Kind};
use crate::error::{Error, Result};

/// Texts run through the encoder at once; bounds the memory of one batch (16 × 256 tokens ×
/// 384 floats per layer's states). Measured on the indexing path (release build, one core,
/// `examples/completion_cost.rs`): the sample tutorial's chunks, nearly all cut at the 256-token
/// window, are all embedded in 55 s in batches of 16 and in 65 s one at a time (on 200-word
/// passages of varied length `examples/embed_bench.rs` found the opposite: 9.5 chunks/s one at
/// a time, 7.5–8.0 in batches, padding to the longest being wasted work).
pub const BATCH: usize = 16;

/// A loaded model: what [`Local`] shares with its blocking tasks.
pub struct Model {
    layout: Layout,
    tokenizer: Tokenizer,
    encoder: Encoder,
}

impl Model {
    /// Loads the directory (`config.json`, `tokenizer.json`, `model.safetensors` and the
    /// sentence-transformers files); errors name the file at fault. Takes ~0.1 s for MiniLM.
    pub fn load(dir: &Path) -> Result<Model, String> {
        let layout = Layout::read(dir)?;
        let path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let truncation = TruncationParams { max_length: layout.max_tokens, ..Default::default() };
        tokenizer.with_truncation(Some(truncation)).map_err(|e| format!("{}: {e}", path.display()))?;
        tokenizer.with_padding(None);
        let encoder = Encoder::load(&layout)?;
        Ok(Model { layout, tokenizer, encoder })
    }

    /// What the directory says (dimension, pooling, window, prompts).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Normalised vectors of `texts`, in order, computed on the calling thread (blocking).
    pub fn embed_blocking(&self, kind: Kind, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let prompt = match kind {
            Kind::Query => &self.layout.query_prompt,
            Kind::Passage => &self.layout.passage_prompt,
        };
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
        let encodings =
            self.tokenizer.encode_batch(inputs, true).map_err(|e| Error::internal(format!("tokenizer: {e}")))?;
        let tokens: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| tokens[i].len());
        let mut out = vec![Vec::new(); tokens.len()];
        for group in order.chunks(BATCH) {
            let rows: Vec<&[u32]> = group.iter().map(|&i| tokens[i]).collect();
            let vectors = self.run(&rows).map_err(|e| Error::internal(format!("embedding inference: {e}")))?;
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
}

impl Local {
    /// Loads the model directory `dir` as catalog model `id`; errors as [`Model::load`].
    pub fn load(id: &str, dir: &Path) -> Result<Local, String> {
        Ok(Local { id: id.to_string(), model: Arc::new(Model::load(dir)?) })
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
    fn rows_are_right_padded_to_the_longest_with_a_mask() {
        let b = pad(&[&[101, 7, 102], &[101, 102]], 0);
        assert_eq!((b.rows, b.len), (2, 3));
        assert_eq!(b.ids, vec![101, 7, 102, 101, 102, 0]);
        assert_eq!(b.mask, vec![1, 1, 1, 1, 1, 0]);
    }
}
