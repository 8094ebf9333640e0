//! Embeddings from an OpenAI-compatible upstream: `POST {base}/embeddings` with
//! `{"model", "input": [texts], "encoding_format": "float"}`, answered by
//! `{"data": [{"index", "embedding": [f32…]}…]}`.
//!
//! The upstream is declared as the language-model ones are (`--llm-upstream NAME=BASE_URL`, key
//! from `REPLICAD_LLM_<NAME>_API_KEY`), with their timeouts and retries ([`crate::upstream`]).
//! Texts go in requests of at most [`MAX_INPUTS`]; every answer is checked (one vector per
//! input, each of the catalog's dimension, finite) and normalised, since not every server
//! normalises. A malformed answer is 502 `UPSTREAM_ERROR` "sent an answer that is not an
//! embedding list", naming the upstream only.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{normalize, BoxFuture, Embedder, Kind};
use crate::error::Result;
use crate::upstream::Client;

/// Most texts in one request (OpenAI accepts 2,048, llama.cpp its batch size; 64 suits all).
pub const MAX_INPUTS: usize = 64;
/// Largest answer read, in bytes (64 vectors × 4,096 dims as JSON text is ~5 MiB).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// An embedding model served by an upstream.
pub struct Upstream {
    id: String,
    client: Arc<Client>,
    /// The model name sent upstream.
    model: String,
    dimension: usize,
    query_prompt: String,
    passage_prompt: String,
}

impl Upstream {
    /// Catalog model `id`, served by `client` as `model`, answering vectors of `dimension`;
    /// the prompts are prefixed to questions and passages (empty: none).
    pub fn new(id: &str, client: Arc<Client>, model: &str, dimension: usize, prompts: (String, String)) -> Upstream {
        let (query_prompt, passage_prompt) = prompts;
        Upstream { id: id.to_string(), client, model: model.to_string(), dimension, query_prompt, passage_prompt }
    }

    /// The vectors of one request's worth of texts.
    async fn request(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>> {
        let body = json!({"model": self.model, "input": inputs, "encoding_format": "float"});
        let started = std::time::Instant::now();
        let resp = self.client.post("/embeddings", &body).await?;
        let bytes = self.read(resp).await?;
        crate::telemetry::upstream_answered(self.client.name(), started.elapsed());
        let answer: Value =
            serde_json::from_slice(&bytes).map_err(|e| self.client.err("sent an answer that is not JSON", e))?;
        vectors(&answer, inputs.len(), self.dimension)
            .map_err(|detail| self.client.err("sent an answer that is not an embedding list", detail))
    }

    /// The whole body, each chunk within the idle timeout, at most [`MAX_BODY_BYTES`].
    async fn read(&self, mut resp: reqwest::Response) -> Result<Vec<u8>> {
        let idle = self.client.policy().idle;
        let mut buf = Vec::new();
        loop {
            match tokio::time::timeout(idle, resp.chunk()).await {
                Err(_) => return Err(self.client.err("stalled (no data within the idle timeout)", "idle timeout")),
                Ok(Err(e)) => return Err(self.client.err("broke off its answer", e.without_url())),
                Ok(Ok(None)) => return Ok(buf),
                Ok(Ok(Some(chunk))) => buf.extend_from_slice(&chunk),
            }
            if buf.len() > MAX_BODY_BYTES {
                return Err(self.client.err("sent an answer that is too large", buf.len()));
            }
        }
    }
}

/// What is wrong with an `/embeddings` answer that is JSON ([`vectors`]): the cause of the 502
/// "sent an answer that is not an embedding list", logged, not shown.
#[derive(Debug, thiserror::Error)]
enum AnswerError {
    /// No `data` array.
    #[error("no data array")]
    NoData,
    /// Another number of vectors than inputs sent.
    #[error("{got} vectors for {sent} inputs")]
    Count { got: usize, sent: usize },
    /// An item of `data` without an `embedding` array (e.g. base64 text).
    #[error("an item without an embedding array")]
    NoEmbedding,
    /// A vector holding something other than numbers.
    #[error("a non-number in a vector")]
    NotANumber,
    /// A vector of another length than the catalog's dimension, or with a value not finite.
    #[error("a vector of {len} values (expected {dimension} finite)")]
    Dimension { len: usize, dimension: usize },
    /// An `index` beyond the inputs, or given twice.
    #[error("index {0} out of range or repeated")]
    Index(usize),
}

/// The `n` normalised vectors of an `/embeddings` answer, ordered by `index`; the error says
/// what is wrong (logged, not shown).
fn vectors(answer: &Value, n: usize, dimension: usize) -> Result<Vec<Vec<f32>>, AnswerError> {
    let data = answer["data"].as_array().ok_or(AnswerError::NoData)?;
    if data.len() != n {
        return Err(AnswerError::Count { got: data.len(), sent: n });
    }
    let mut out = vec![Vec::new(); n];
    for (pos, item) in data.iter().enumerate() {
        let index = item["index"].as_u64().map_or(pos, |i| i as usize);
        let values = item["embedding"].as_array().ok_or(AnswerError::NoEmbedding)?;
        let mut v: Vec<f32> = values
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect::<Option<_>>()
            .ok_or(AnswerError::NotANumber)?;
        if v.len() != dimension || v.iter().any(|x| !x.is_finite()) {
            return Err(AnswerError::Dimension { len: v.len(), dimension });
        }
        let slot = out.get_mut(index).filter(|s| s.is_empty()).ok_or(AnswerError::Index(index))?;
        normalize(&mut v);
        *slot = v;
    }
    Ok(out)
}

impl Embedder for Upstream {
    fn id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed(&self, kind: Kind, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>> {
        Box::pin(async move {
            let prompt = if kind == Kind::Query { &self.query_prompt } else { &self.passage_prompt };
            let inputs: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
            let mut out = Vec::with_capacity(inputs.len());
            for group in inputs.chunks(MAX_INPUTS) {
                out.extend(self.request(group).await?);
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_ordered_by_index_and_normalised() {
        let a = json!({"data": [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 4.0]}]});
        assert_eq!(vectors(&a, 2, 2).unwrap(), vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    }

    #[test]
    fn malformed_answers_say_what_is_wrong() {
        for (answer, needle) in [
            (json!({"object": "list"}), "no data"),
            (json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}), "1 vectors for 2 inputs"),
            (json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 0.0]}]}), "1 values"),
            (
                json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}),
                "repeated",
            ),
            (
                json!({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1.0, 0.0]}]}),
                "embedding array",
            ),
        ] {
            let err = vectors(&answer, 2, 2).unwrap_err().to_string();
            assert!(err.contains(needle), "{answer}: {err}");
        }
    }
}
