//! Reply generation (docs/decisions.md "Model catalog").
//!
//! Every model of the catalog is served by a [`Backend`]: the embedded extractive generator
//! ([`embedded`], needs no model server) or an OpenAI-compatible upstream ([`openai`]: llama.cpp's
//! `llama-server`, vLLM, Ollama, hosted providers). [`routing`] builds the model → backend map
//! from the operator's configuration; [`prompt`] assembles what an upstream is sent.
//!
//! A backend answers a [`Generation`] with [`Pieces`]: the reply as text deltas (one delta for a
//! non-streamed upstream reply) and, when known, the token usage.

pub mod embedded;
pub mod openai;
pub mod prompt;
pub mod routing;

use std::future::Future;
use std::pin::Pin;

pub use crate::embed::exact::Spread;
use crate::error::Result;
use crate::store::records::SourceRef;

pub use routing::{Backends, LlmConfig, ModelRoute, RouteError};

/// Name of the embedded backend (the `X-Replica-Backend` header value).
pub const EMBEDDED: &str = "embedded";

/// A boxed, sendable future (backends are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Token counts of one completion (OpenAI `usage`): reported by the upstream when it does,
/// estimated with [`prompt::estimate_tokens`] otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One piece of a reply as it is produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// The next part of the reply text.
    Text(String),
    /// Token usage of the whole completion (at most once, usually last).
    Usage(Usage),
    /// Indexes (into [`Generation::sources`]) of the sources the reply quotes. Without it,
    /// every source given to the model counts as used.
    Cited(Vec<usize>),
    /// Why the embedded reader answered as it did (that backend only).
    Explained(Box<embedded::Explanation>),
}

/// The replica facts a reply is made for.
#[derive(Debug, Clone, Default)]
pub struct Persona {
    pub name: String,
    /// `individual | character | brand`.
    pub kind: String,
    pub greeting: String,
    pub purpose: Option<String>,
    /// The replica's `llm.systemMessage`.
    pub system_message: Option<String>,
}

/// A message of the conversation sent to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// `system | user | assistant`.
    pub role: String,
    pub content: String,
}

/// How close a question is to a retrieved chunk by meaning, under the replica's embedding
/// model: the cosine similarity of the question's embedding to the chunk's vector (`None`: it
/// has none yet) and to each of its prose sentences' vectors, in the order of
/// `search::vectors::sentence_texts` (empty: none yet). Cosines are in −1..=1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Closeness {
    pub chunk: Option<f32>,
    pub sentences: Vec<f32>,
}

/// What retrieval tells the embedded reader beyond the sources: how close the question is to
/// each by meaning (`closeness`, in order; empty without an embedding model), the question's
/// terms no document of the knowledge base holds (`unknown`), whether it is in a language none
/// of them is written in (`other_language`: its words cannot confirm the answer), and the
/// catalog id of the embedding model the closeness is of (`model`; `None`: words alone), whose
/// fitted decision the reader uses (`embedded::decision`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence<'a> {
    pub closeness: &'a [Closeness],
    pub unknown: &'a [String],
    pub other_language: bool,
    pub model: Option<&'a str>,
    /// How close the question is to all of the knowledge base's chunks by meaning (`None`
    /// without an embedding model).
    pub spread: Option<Spread>,
    /// How much of the question's meaning rests on its `unknown` terms, `1 − cos` of the
    /// question with and without them, 0 with none (`None` without an embedding model).
    pub unknown_meaning: Option<f32>,
    /// The section the conversation's last answer quoted, as (entry id, section name): the
    /// subject a follow-up continues (`None`: no earlier question, or it was not answered).
    pub last_quoted: Option<(u64, &'a str)>,
}

/// Everything a backend may use to answer.
#[derive(Debug, Clone)]
pub struct Generation {
    pub persona: Persona,
    /// The question being answered (the last user message).
    pub question: String,
    /// Retrieved sources, best first; an answer's sources are the ones given to the model.
    pub sources: Vec<SourceRef>,
    /// How close the question is to each source by meaning, in order (empty without an
    /// embedding model).
    pub closeness: Vec<Closeness>,
    /// The question's terms that no document of the knowledge base holds
    /// (`service::chat::Retrieval::unknown`).
    pub unknown: Vec<String>,
    /// The question is in a language none of the knowledge base's documents is written in
    /// (`service::chat::Retrieval::other_language`).
    pub other_language: bool,
    /// The catalog id of the embedding model that retrieved the sources (`None`: words alone).
    pub embedding_model: Option<String>,
    /// How close the question is to all of the knowledge base's chunks by meaning
    /// (`service::chat::Retrieval::spread`).
    pub spread: Option<Spread>,
    /// How much of the question's meaning rests on its unknown terms
    /// (`service::chat::Retrieval::unknown_meaning`).
    pub unknown_meaning: Option<f32>,
    /// Earlier turns of the conversation, oldest first (already bounded by the token budget).
    pub history: Vec<Turn>,
    /// An image attached to the question (`imageURL`), sent only to vision routes.
    pub image_url: Option<String>,
    /// Upper bound of reply tokens asked of an upstream (`max_tokens`), if any.
    pub max_tokens: Option<u32>,
    /// The embedded reader's reading of `question` from `sources` with this evidence and
    /// [`embedded::Weights::FITTED`], when it was made already (`service::chat` reads a
    /// question to decide whether to read it in its conversation): the embedded backend then
    /// answers from it instead of reading again. `None`: read when answering.
    pub reading: Option<embedded::Reading>,
}

impl Generation {
    /// What retrieval found beyond the sources, for the embedded reader.
    pub fn evidence(&self) -> Evidence<'_> {
        Evidence {
            closeness: &self.closeness,
            unknown: &self.unknown,
            other_language: self.other_language,
            model: self.embedding_model.as_deref(),
            spread: self.spread,
            unknown_meaning: self.unknown_meaning,
            last_quoted: None,
        }
    }
}

/// The pieces of one reply, pulled one at a time. Dropping it cancels the generation (for an
/// upstream: the HTTP request and its connection).
pub trait Pieces: Send {
    /// The next piece; `Ok(None)` at the end. Errors are 502 `UPSTREAM_ERROR` (timeouts
    /// included), with messages that never carry upstream bodies or keys.
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Piece>>>;
}

/// A generation backend.
pub trait Backend: Send + Sync {
    /// What the `X-Replica-Backend` header says: `embedded` or the upstream's configured name.
    fn name(&self) -> &str;

    /// Starts answering `generation` with the upstream model `model` (ignored by the embedded
    /// backend); `vision` allows sending `image_url`. `stream` asks the upstream for SSE
    /// deltas. Returns once the upstream accepted the request (after retries); errors are
    /// 502 `UPSTREAM_ERROR`.
    fn start<'a>(
        &'a self,
        generation: &'a Generation,
        model: &'a str,
        vision: bool,
        stream: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Pieces>>>;

    /// Answers a bare Chat Completions `messages` array (`[{role, content}]`, none of a
    /// replica's persona or sources added) with the whole reply text, not streamed, from the
    /// upstream model `model`, asking at most `max_tokens` reply tokens: for background work
    /// such as the insights of a conversation (`service::chats::insights`). `Ok(None)` when the
    /// backend has no model to ask (the embedded generator; the caller computes locally).
    /// Errors as [`Backend::start`] (after the upstream's retries), and 502 `UPSTREAM_ERROR`
    /// when the answer is not a chat completion.
    fn complete_messages<'a>(
        &'a self,
        messages: &'a [serde_json::Value],
        model: &'a str,
        max_tokens: Option<u32>,
    ) -> BoxFuture<'a, Result<Option<String>>> {
        let _ = (messages, model, max_tokens);
        Box::pin(async { Ok(None) })
    }
}
