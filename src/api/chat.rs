//! Chat completions (spec §4.2, docs/decisions.md "Chat"):
//! `POST /v1/replicas/{replicaUUID}/chat/completions`, `…/chat/completions/messengerA` and the
//! OpenAI-shaped `POST /v1/experimental/replicas/{replicaUUID}/chat/completions`.
//!
//! With `Accept: text/event-stream` the reply streams as server-sent events:
//! - `event: delta` / `data: {"delta": "<text>"}`: one per piece of text, in order;
//! - `event: error` / `data: <spec §7 error body>`: only when the model failed after it began
//!   (the message event still follows, with `interrupted: true`);
//! - `event: message` / `data: {"success": true, "content": "<whole reply>", "sources": [<Source>],
//!   "id": <history item id or null>, "interrupted": <bool>}`;
//! - `data: [DONE]`.
//!
//! A failure before the first delta is an ordinary JSON error answer (e.g. 502 `UPSTREAM_ERROR`).
//! Every completion answers `X-Replica-Backend` (`embedded` or the upstream's name).

use std::sync::Arc;

use bytes::Bytes;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::history::{retrieved_view, source_view, RetrievedView, SourceView};
use super::path_replica;
use super::{Operation, Serve};
use crate::app::App;
use crate::error::{Error, Result};
use crate::generate::embedded::Explanation;
use crate::generate::Turn;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::{error_body, sse_event, Reply};
use crate::openapi::derived::written;
use crate::openapi::operations::op;
use crate::service::channel::{sources, Channel};
use crate::service::channel_data::{self, MessengerAData, MessengerBData};
use crate::service::chat::{self, Ask, Completion, Event};
use crate::service::check_len;
use crate::service::history::MAX_CONTENT_CHARS;
use crate::store::records::Replica;

/// Request body of `…/chat/completions`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "CompletionRequest")]
pub struct CompletionBody {
    #[schemars(length(min = 1, max = MAX_CONTENT_CHARS))]
    pub content: String,
    #[serde(default)]
    pub skip_chat_history: bool,
    #[schemars(extend("enum" = sources(), "default" = Channel::Web.name()))]
    pub source: Option<String>,
    #[serde(rename = "messengerB_data")]
    pub messenger_b_data: Option<MessengerBData>,
    /// The caller's own caps (spec §8): `conversationsPerMonth` (see
    /// `service::quotas::check_usage_limits`).
    #[serde(rename = "usageLimits", default)]
    #[schemars(schema_with = "usage_limits", description = "")]
    pub usage_limits: Option<Value>,
}

/// Request body of `…/chat/completions/messengerA`.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "CompletionMessengerARequest")]
pub struct MessengerACompletionBody {
    #[schemars(length(min = 1, max = MAX_CONTENT_CHARS))]
    pub content: String,
    #[serde(rename = "messengerA_data")]
    pub messenger_a_data: MessengerAData,
    /// An image with the message; given to models whose catalog entry has `vision`.
    #[serde(rename = "imageURL")]
    pub image_url: Option<String>,
    #[serde(default)]
    pub skip_chat_history: bool,
    #[serde(rename = "usageLimits", default)]
    #[schemars(schema_with = "usage_limits")]
    pub usage_limits: Option<Value>,
}

/// The `usageLimits` of a completion body: the `CompletionUsageLimits` schema.
fn usage_limits(_: &mut SchemaGenerator) -> Schema {
    written("CompletionUsageLimits")
}

/// One message of the experimental (OpenAI-shaped) body.
#[derive(Deserialize, JsonSchema)]
#[schemars(inline, description = "")]
pub struct OpenAiMessage {
    #[schemars(extend("enum" = ["system", "user", "assistant"]))]
    pub role: String,
    pub content: String,
}

/// Request body of the experimental operation.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "ExperimentalCompletionRequest")]
pub struct ExperimentalBody {
    /// The last one, of role `user`, is the question; earlier ones are the conversation given
    /// to the model.
    #[schemars(length(min = 1))]
    pub messages: Vec<OpenAiMessage>,
    /// Store the question and the reply.
    #[serde(default = "yes")]
    pub store: bool,
    #[schemars(extend("enum" = sources(), "default" = Channel::Web.name()))]
    pub source: Option<String>,
    #[serde(rename = "messengerB_data")]
    pub messenger_b_data: Option<MessengerBData>,
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
}

fn yes() -> bool {
    true
}

fn wants_stream(req: &Req) -> bool {
    req.headers.get_all("accept").iter().any(|v| v.to_str().is_ok_and(|s| s.contains("text/event-stream")))
}

/// Answers `ask` as JSON (`render` builds the body) or, when asked, as an event stream.
async fn answer(
    app: &App,
    req: &Req,
    replica: &Replica,
    ask: Ask,
    render: fn(&Completion, &Replica) -> Reply,
) -> Result<Reply> {
    let user = req.caller()?.acting_user();
    let cx = app.chat_context();
    if wants_stream(req) {
        let started = chat::stream(&cx, replica, user, ask).await?;
        let (request_id, expose) = (req.request_id.clone(), app.config.expose_internal_errors);
        let reply = Reply::event_stream(started.events, move |ev| encode(ev, &request_id, expose));
        return Ok(reply.with_header("x-replica-backend", &started.backend));
    }
    let done = chat::complete(&cx, replica, user, ask).await?;
    Ok(render(&done, replica).with_header("x-replica-backend", &done.backend))
}

/// The SSE frames of one stream event (see the module docs).
pub fn encode(ev: Event, request_id: &str, expose_internal: bool) -> Bytes {
    match ev {
        Event::Delta(text) => sse_event(Some("delta"), &to_json(&DeltaEvent { delta: &text })),
        Event::Failed(e) => sse_event(Some("error"), &to_json(&error_body(&e, request_id, expose_internal))),
        Event::Done(c) => {
            let message = MessageEvent {
                success: true,
                content: &c.content,
                sources: c.sources.iter().map(source_view).collect(),
                id: c.message_id,
                interrupted: c.interrupted,
            };
            let mut out = sse_event(Some("message"), &to_json(&message)).to_vec();
            out.extend_from_slice(&sse_event(None, "[DONE]"));
            Bytes::from(out)
        }
    }
}

/// `data` of an `event: delta` (see the module docs).
#[derive(Serialize)]
struct DeltaEvent<'a> {
    delta: &'a str,
}

/// `data` of the stream's `event: message` (see the module docs): `id` is `null` when nothing
/// was stored in the history.
#[derive(Serialize)]
struct MessageEvent<'a> {
    success: bool,
    content: &'a str,
    sources: Vec<SourceView<'a>>,
    id: Option<u64>,
    interrupted: bool,
}

/// An event's data as JSON text (these views always serialize).
fn to_json(view: &impl Serialize) -> String {
    serde_json::to_string(view).unwrap_or_default()
}

/// `{content}` of `…/chat/completions` and `…/chat/completions/messengerA` ([`Reply::ok`] adds
/// `success`).
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Completion")]
struct ContentView<'a> {
    content: &'a str,
}

fn content_reply(c: &Completion, _: &Replica) -> Reply {
    Reply::ok(&ContentView { content: &c.content })
}

/// # `POST /v1/replicas/{replicaUUID}/chat/completions`
/// 200 `{success, content}` (or the event stream) with `X-Replica-Backend`; stores the question
/// and the answer (with its `sources`) unless `skip_chat_history`. Errors: 400, 404, 502.
pub async fn complete(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: CompletionBody = req.json()?;
    check_len("content", &body.content, 1, MAX_CONTENT_CHARS)?;
    let channel = channel_data::of_source(body.source, body.messenger_b_data.as_ref())?;
    crate::service::quotas::check_usage_limits(&app.store, replica.org, body.usage_limits.as_ref()).await?;
    let ask = Ask { content: body.content, skip_chat_history: body.skip_chat_history, ..Ask::on(channel) };
    answer(&app, &req, &replica, ask, content_reply).await
}

/// # `POST /v1/replicas/{replicaUUID}/chat/completions/test`
/// A retrieval check (docs/decisions.md "Knowledge base"), organization key only: the body of
/// `…/chat/completions`; 200 `{success, content, query, sources}` — the reply, the search query
/// it used, every source retrieved for it, best first, with its fused score, its BM25 and
/// vector ranks (`bm25Rank`, `vectorRank`) and its cosine to the question, and, from the
/// embedded generator, `reader`: why it answered so ([`ReaderView`]) — with
/// `X-Replica-Backend`. Nothing is stored in the history (token usage is counted). Errors: 400,
/// 404, 502.
pub async fn complete_test(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: CompletionBody = req.json()?;
    check_len("content", &body.content, 1, MAX_CONTENT_CHARS)?;
    let channel = channel_data::of_source(body.source, body.messenger_b_data.as_ref())?;
    let ask = Ask { content: body.content.clone(), skip_chat_history: true, ..Ask::on(channel) };
    let user = req.caller()?.acting_user();
    let done = chat::complete(&app.chat_context(), &replica, user, ask).await?;
    let view = TestView {
        content: &done.content,
        query: &body.content,
        sources: done.retrieved.iter().zip(&done.ranks).map(|(s, r)| retrieved_view(s, r)).collect(),
        reader: done.explanation.as_ref().map(reader_view),
    };
    Ok(Reply::ok(&view).with_header("x-replica-backend", &done.backend))
}

/// `{content, query, sources, reader?}` of `…/chat/completions/test` ([`Reply::ok`] adds
/// `success`); `reader` only from the embedded generator.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "CompletionTest")]
struct TestView<'a> {
    content: &'a str,
    /// Ours: the search query the retrieval ran.
    query: &'a str,
    /// Ours: every source retrieved for the query, best first, with its fused `score` and its
    /// BM25 and vector ranks (a chunk whose own heading the query names whole may take BM25's
    /// last place).
    sources: Vec<RetrievedView<'a>>,
    /// Ours, from the embedded generator only (absent for upstream models): why it answered as
    /// it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    reader: Option<ReaderView<'a>>,
}

/// Why the embedded reader answered as it did (the retrieval check's `reader`): its decision
/// (`answered`, `uncertain`: led in as the closest passage, `refused`: "I don't know"), the
/// confidence it decided on (its signals and fitted probability), the question's terms no
/// document of the knowledge base holds, and the candidate passages with their signals, best
/// score first.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
struct ReaderView<'a> {
    /// Ours: `answered`; `uncertain`: the closest passage, after the lead-in "The closest
    /// passage I have:"; `refused`: "I don't know", no sources.
    #[schemars(extend("enum" = ["answered", "uncertain", "refused"]))]
    verdict: &'static str,
    /// Ours: whether the reader quoted a passage (else it said it does not know).
    answered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<ConfidenceView>,
    /// Ours: the question's terms (as the search index analyzes them: stop words left out,
    /// stemmed) that no document of the knowledge base holds (their share of the question is
    /// one of the decision's signals).
    unknown_terms: &'a [String],
    /// Ours: the question is in a language none of the knowledge base's documents is written
    /// in (told by its function words): none of its terms is unknown, and the answer, found
    /// by meaning alone, is at best led in.
    other_language: bool,
    /// Ours: the candidate passages of the best five chunks (at most 8), best score first.
    candidates: Vec<CandidateView<'a>>,
}

/// [`Confidence`](crate::generate::embedded::Confidence) on the wire: the signals of the
/// quoted passage (for a question in another language than every document, of the passage the
/// general score puts first, which the decision was fitted on) and the fitted decision's
/// probability.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
struct ConfidenceView {
    /// Ours: the probability, from a logistic regression over the signals below fitted per
    /// embedding model (`fit`), that the knowledge base answers the question; the reader
    /// refuses below the fit's `refuse` threshold and leads in below its `uncertain` one. For
    /// a question in another language than every document (`otherLanguage`), whose quote
    /// meaning alone chooses, the passage signals below are those of the candidate that
    /// meaning + 0.5 × coverage + 0.6 × standing + 0.5 × title puts first (what the fit was
    /// fitted on).
    #[schemars(range(min = 0, max = 1))]
    value: f32,
    /// Ours: the embedding model whose fitted decision decided (`bm25`: the fit for words
    /// alone, also used for a model without a fit of its own).
    fit: &'static str,
    /// Ours: the quoted passage's coverage of the question's weighted terms.
    coverage: f32,
    /// Ours: the quoted chunk's own heading's agreement with the question (Dice of terms).
    title: f32,
    /// Ours: the quoted chunk's retrieval score over the best chunk's.
    standing: f32,
    /// Ours: the share of the question's terms no document of the knowledge base holds.
    unknown_share: f32,
    /// Ours: the cosine similarity of the question's embedding to the best-ranked chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1, max = 1))]
    chunk_cosine: Option<f32>,
    /// Ours: the cosine similarity of the question's embedding to its closest candidate
    /// sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1, max = 1))]
    sentence_cosine: Option<f32>,
    /// Ours: the cosine similarity of the question's embedding to the quoted passage's
    /// closest sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1, max = 1))]
    passage_cosine: Option<f32>,
    /// Ours: the mean cosine similarity of the question's embedding to all of the knowledge
    /// base's chunks.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1, max = 1))]
    typical_cosine: Option<f32>,
    /// Ours: the natural logarithm of the number of the knowledge base's chunks with vectors.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    breadth: Option<f32>,
    /// Ours: the closest chunk's cosine less what the closest of that many would reach by
    /// chance (the mean plus `√(2 ln n)` standard deviations of the question's cosines to all
    /// `n` chunks).
    #[serde(skip_serializing_if = "Option::is_none")]
    excess_cosine: Option<f32>,
    /// Ours (with an embedding model): how much of the question's meaning rests on its
    /// `unknownTerms`, `1 − cos` of its vector with and without their words (0 with none, 1
    /// when nothing else is left). At or above the fit's threshold they are what the question
    /// asks about and the answer is at best `uncertain`; below it they are generic words of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    unknown_meaning: Option<f32>,
}

/// A candidate passage of [`ReaderView`]: `source` is its chunk's 1-based place in `sources`
/// (its retrieval rank), `meaning` the question's cosine to its closest sentence, `coverage`
/// the share of the question's weighted terms it holds, `standing` its chunk's retrieval score
/// over the best chunk's, `title` its chunk's heading's agreement with the question,
/// `chunkCosine` the question's cosine to its chunk, `score` their weighted sum (of meaning and
/// the chunk's cosine alone for a question in another language than every document).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
struct CandidateView<'a> {
    /// Ours: the passage's chunk, its place (1 = first: its retrieval rank) in `sources`.
    #[schemars(range(min = 1))]
    source: usize,
    /// Ours: the passage's opening words (at most 160 characters).
    text: &'a str,
    /// Ours: the cosine similarity of the question's embedding to the passage's closest
    /// sentence (absent without an embedding model).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1, max = 1))]
    meaning: Option<f32>,
    /// Ours: the share of the question's terms the passage holds, each weighted by its rarity
    /// among the candidates' passages (a term found only in its heading path counts half).
    coverage: f32,
    /// Ours: its chunk's retrieval score over the best chunk's (in 0..=1; `1 / rank` when the
    /// best score is not positive).
    standing: f32,
    /// Ours: the agreement of its chunk's own heading with the question: the Dice coefficient
    /// of their terms (in 0..=1).
    title: f32,
    /// Ours: the cosine similarity of the question's embedding to the passage's chunk (absent
    /// without an embedding model).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1, max = 1))]
    chunk_cosine: Option<f32>,
    /// Ours: its chunk is in the section the conversation's last answer quoted (the subject a
    /// follow-up continues; never on `…/chat/completions/test`, which reads no history).
    continues: bool,
    /// Ours: meaning + 0.5 × coverage + 0.6 × standing + 0.5 × title; for a question in another
    /// language than every document (`otherLanguage`: its words are not the documents'),
    /// meaning + 2 × chunkCosine; standing once more when it `continues`. The best score is
    /// quoted.
    score: f32,
    /// Ours: whether the answer quotes it.
    quoted: bool,
}

fn reader_view(e: &Explanation) -> ReaderView<'_> {
    let candidates = e
        .candidates
        .iter()
        .map(|c| CandidateView {
            source: c.source + 1,
            text: &c.text,
            meaning: c.meaning,
            coverage: c.coverage,
            standing: c.standing,
            title: c.title,
            chunk_cosine: c.chunk,
            continues: c.continues,
            score: c.score,
            quoted: c.quoted,
        })
        .collect();
    let confidence = e.confidence.map(|c| ConfidenceView {
        value: c.value,
        fit: c.fit,
        coverage: c.signals.coverage,
        title: c.signals.title,
        standing: c.signals.standing,
        unknown_share: c.signals.unknown,
        chunk_cosine: c.signals.chunk,
        sentence_cosine: c.signals.sentence,
        passage_cosine: c.signals.passage,
        typical_cosine: c.signals.typical,
        breadth: c.signals.breadth,
        excess_cosine: c.signals.excess,
        unknown_meaning: c.signals.unknown_meaning,
    });
    ReaderView {
        verdict: e.verdict.name(),
        answered: e.verdict != crate::generate::embedded::Verdict::Refused,
        confidence,
        unknown_terms: &e.unknown,
        other_language: e.other_language,
        candidates,
    }
}

/// # `POST /v1/replicas/{replicaUUID}/chat/completions/messengerA`
/// As `…/chat/completions` on the messengerA channel: `messengerA_data` is required (validated
/// as for history items; a repeated message stores nothing new) and `imageURL` reaches models
/// whose catalog entry has `vision`. Errors: 400, 404, 502.
pub async fn complete_messenger_a(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: MessengerACompletionBody = req.json()?;
    check_len("content", &body.content, 1, MAX_CONTENT_CHARS)?;
    let channel = body.messenger_a_data.stamped()?;
    if let Some(url) = &body.image_url {
        chat::check_image_url(url)?;
    }
    crate::service::quotas::check_usage_limits(&app.store, replica.org, body.usage_limits.as_ref()).await?;
    let ask = Ask {
        content: body.content,
        skip_chat_history: body.skip_chat_history,
        image_url: body.image_url,
        ..Ask::on(channel)
    };
    answer(&app, &req, &replica, ask, content_reply).await
}

/// The question (last message, from the user) and the earlier turns of an experimental body.
fn split_messages(messages: Vec<OpenAiMessage>) -> Result<(String, Vec<Turn>)> {
    let mut turns = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        if !["system", "user", "assistant"].contains(&m.role.as_str()) {
            return Err(Error::invalid(&format!("messages[{i}].role"), "must be system, user or assistant"));
        }
        turns.push(Turn { role: m.role, content: m.content });
    }
    match turns.pop() {
        Some(last) if last.role == "user" => {
            check_len("messages[-1].content", &last.content, 1, crate::service::history::MAX_CONTENT_CHARS)?;
            Ok((last.content, turns))
        }
        _ => Err(Error::invalid("messages", "must end with a message of role user")),
    }
}

fn openai_reply(c: &Completion, replica: &Replica) -> Reply {
    let id = c.message_id.map_or_else(|| uuid::Uuid::now_v7().simple().to_string(), |i| i.to_string());
    let body = OpenAiCompletion {
        id: format!("chatcmpl-{id}"),
        created: chrono::Utc::now().timestamp(),
        object: "chat.completion",
        model: &replica.llm.model,
        choices: [OpenAiChoice {
            index: 0,
            message: AnswerMessage { role: "assistant", content: &c.content },
            finish_reason: "stop",
        }],
        usage: OpenAiUsage {
            prompt_tokens: c.usage.prompt_tokens,
            completion_tokens: c.usage.completion_tokens,
            total_tokens: c.usage.prompt_tokens + c.usage.completion_tokens,
        },
    };
    Reply::raw(200, to_json(&body).into(), "application/json")
}

/// The OpenAI-shaped answer of the experimental completion: one choice, the whole reply.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "ExperimentalCompletion")]
struct OpenAiCompletion<'a> {
    id: String,
    /// Unix time, seconds.
    created: i64,
    #[schemars(extend("const" = "chat.completion"))]
    object: &'static str,
    model: &'a str,
    choices: [OpenAiChoice<'a>; 1],
    usage: OpenAiUsage,
}

/// A choice of [`OpenAiCompletion`].
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
struct OpenAiChoice<'a> {
    index: u32,
    message: AnswerMessage<'a>,
    finish_reason: &'static str,
}

/// The message of an [`OpenAiChoice`]: the replica's whole reply.
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
struct AnswerMessage<'a> {
    #[schemars(extend("const" = "assistant"))]
    role: &'static str,
    content: &'a str,
}

/// The token counts of an [`OpenAiCompletion`].
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
struct OpenAiUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

/// # `POST /v1/experimental/replicas/{replicaUUID}/chat/completions`
/// OpenAI-shaped: body `{messages: [{role, content}], store (default true), source,
/// messengerB_data, max_tokens}`; the last message is the question and the earlier ones are the
/// conversation given to the model (instead of the stored history). Answers
/// `{id, created, object: "chat.completion", model, choices, usage}` (or the event stream).
/// Requires a user (`X-USER-ID`). Errors: 400, 401, 404, 502.
pub async fn complete_experimental(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = path_replica(&app, &req).await?;
    let body: ExperimentalBody = req.json()?;
    let (content, turns) = split_messages(body.messages)?;
    let channel = channel_data::of_source(body.source, body.messenger_b_data.as_ref())?;
    let ask = Ask {
        content,
        skip_chat_history: !body.store,
        turns: Some(turns),
        max_tokens: body.max_tokens,
        ..Ask::on(channel)
    };
    answer(&app, &req, &replica, ask, openai_reply).await
}

/// Completions (spec §2.1, §4.1): plain, messengerA and the OpenAI-shaped one.
pub fn operations() -> Vec<Operation> {
    vec![
        op("POST", "/v1/replicas/{replicaUUID}/chat/completions", "createChatCompletion", "Chat", "Ask the replica")
            .streams()
            .body_of::<CompletionBody>()
            .ok_of::<ContentView>(200)
            .extra(&[429, 502])
            .describe(
                "Retrieves the most relevant knowledge and answers. Stores the question and the answer (with its \
                `sources`) in the chat history unless `skip_chat_history`. The `X-Replica-Backend` response header \
                names the generator that answered (`embedded` or the upstream's name). 502 `UPSTREAM_ERROR` when the \
                model server fails after retries. With `Accept: text/event-stream` the reply streams as server-sent \
                events: `event: delta` / `data: {\"delta\": \"…\"}` per piece of text; `event: error` (a §7 error \
                body) only if the model fails after it began; `event: message` / `data: {success, content, sources, \
                id, interrupted}`; then `data: [DONE]`. A client that disconnects cancels the model request; the \
                history keeps what was said, flagged `interrupted`.",
            )
            .serve(Access::Either, handler!(complete)),
        op(
            "POST",
            "/v1/replicas/{replicaUUID}/chat/completions/messengerA",
            "createChatCompletionMessengerA",
            "Chat",
            "Ask the replica on messengerA",
        )
        .streams()
        .body_of::<MessengerACompletionBody>()
        .ok_of::<ContentView>(200)
        .extra(&[429, 502])
        .describe(
            "As `…/chat/completions`, on the messengerA channel: `messengerA_data` is required (a repeated \
                message id stores nothing new) and `imageURL` reaches vision-capable models.",
        )
        .serve(Access::Either, handler!(complete_messenger_a)),
        op(
            "POST",
            "/v1/replicas/{replicaUUID}/chat/completions/test",
            "testChatCompletion",
            "Chat",
            "Check retrieval for a question",
        )
        .body_of::<CompletionBody>()
        .ok_of::<TestView>(200)
        .extra(&[429, 502])
        .describe(
            "Organization key only. A retrieval check with the body of `…/chat/completions`: answers the reply, the \
            search `query` it ran and every retrieved source, best first, with its `bm25Rank`, its `vectorRank` \
            and its fused `score` (fields of our own; a chunk whose own heading the query names whole may take \
            BM25's last place). With an embedding model configured the question is searched both ways (BM25 and \
            the replica's `llm.embeddingModel`) and the rankings are fused (a convex combination); without one, \
            by BM25 alone (`vectorRank` and `cosine` absent). The embedded generator adds `reader`: its decision, \
            the confidence it decided on and its candidate passages with their signals. \
            The query is searched with the words its form implies as well (English: a written-out ordinal also \
            looks for `Nth` and `NUMBERth`; \"How does X …?\" for a heading saying \"works\"). Nothing is stored \
            in the chat history; the token usage is counted.",
        )
        .serve(Access::Org, handler!(complete_test)),
        op(
            "POST",
            "/v1/experimental/replicas/{replicaUUID}/chat/completions",
            "createExperimentalChatCompletion",
            "Chat",
            "OpenAI-shaped completion",
        )
        .streams()
        .body_of::<ExperimentalBody>()
        .ok_raw::<OpenAiCompletion>(200)
        .extra(&[429, 502])
        .describe(
            "Requires a user (`X-USER-ID` + `X-USER-ID-TYPE`). The last message (role `user`) is the question; \
                earlier ones replace the stored history in the prompt. `store` (default true) keeps the question and \
                the reply in the history. Streams with `Accept: text/event-stream` (the events of \
                `…/chat/completions`).",
        )
        .serve(Access::User, handler!(complete_experimental)),
    ]
}
