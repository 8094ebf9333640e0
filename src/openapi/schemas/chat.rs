//! Chat and chat-history schemas (spec §2.1, §4.1; docs/decisions.md "Chat"), one function each.

use serde_json::{json, Value};

use super::{date_time, deprecated, nullable, object, reference, sparse_id, string, success, uuid};
use crate::service::channel::{sources, Channel};

pub(super) fn add_all(add: &mut impl FnMut(&str, Value)) {
    add("MessengerBData", messenger_b_data());
    add("MessengerAData", messenger_a_data());
    add("CompletionRequest", completion_request());
    add("Completion", object(&["success", "content"], json!({ "success": success(), "content": string() }), false));
    add("CompletionTest", completion_test());
    add("CompletionMessengerARequest", completion_messenger_a_request());
    add("ExperimentalCompletionRequest", experimental_completion_request());
    add("ExperimentalCompletion", experimental_completion());
    add("HistorySave", history_save());
    add("HistorySaveMessengerA", history_save_messenger_a());
    add("HistorySaved", history_saved());
    add("Source", source_item());
    add("RetrievedSource", retrieved_source());
    add("ChatHistoryItem", chat_history_item());
    add("ChatHistory", chat_history());
}

fn source() -> Value {
    json!({ "type": "string", "enum": sources() })
}

fn content() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": 100000 })
}

fn messenger_b_data() -> Value {
    let opt = string();
    object(
        &["channel_id", "channel_name", "author_id", "author_name", "message_id"],
        json!({
            "channel_id": { "type": "string", "minLength": 1, "maxLength": 100 }, "channel_name": string(),
            "author_id": { "type": "string", "minLength": 1, "maxLength": 100 }, "author_name": string(),
            "message_id": { "type": "string", "minLength": 1, "maxLength": 100 },
            "created_at": opt, "server_id": opt, "server_name": opt,
        }),
        false,
    )
}

fn messenger_a_data() -> Value {
    object(
        &["chat_type", "chat_id", "message_id"],
        json!({
            "chat_type": { "type": "string", "enum": ["private", "group", "supergroup", "channel"] },
            "chat_id": { "type": "integer" },
            "chat_name": string(),
            "user_id": { "type": "integer", "description": "May be absent for channel messages." },
            "username": string(),
            "message_id": {
                "type": "integer",
                "minimum": 1,
                "description": "Unique within the chat; a repeated (chat_id, message_id) stores nothing new; \
                    0 or negative → 400.",
            },
            "message_thread_id": { "type": "integer", "minimum": 1, "description": "Supergroups only." },
        }),
        false,
    )
}

fn completion_request() -> Value {
    object(
        &["content"],
        json!({
            "content": content(),
            "skip_chat_history": { "type": "boolean", "default": false },
            "source": { "type": "string", "enum": sources(), "default": "web" },
            "messengerB_data": reference("MessengerBData"),
            "usageLimits": reference("CompletionUsageLimits"),
        }),
        true,
    )
}

fn completion_messenger_a_request() -> Value {
    object(
        &["content", "messengerA_data"],
        json!({
            "content": content(),
            "messengerA_data": reference("MessengerAData"),
            "imageURL": {
                "type": "string",
                "description": "An image with the message; given to models whose catalog entry has `vision`.",
            },
            "skip_chat_history": { "type": "boolean", "default": false },
            "usageLimits": reference("CompletionUsageLimits"),
        }),
        true,
    )
}

fn experimental_completion_request() -> Value {
    let message = object(
        &["role", "content"],
        json!({ "role": { "type": "string", "enum": ["system", "user", "assistant"] }, "content": string() }),
        true,
    );
    object(
        &["messages"],
        json!({
            "messages": { "type": "array", "minItems": 1, "items": message, "description": "The last one, of \
                role `user`, is the question; earlier ones are the conversation given to the model." },
            "store": { "type": "boolean", "default": true, "description": "Store the question and the reply." },
            "source": { "type": "string", "enum": sources(), "default": "web" },
            "messengerB_data": reference("MessengerBData"),
            "max_tokens": { "type": "integer", "minimum": 1 },
        }),
        true,
    )
}

fn experimental_completion() -> Value {
    let tokens = json!({ "type": "integer", "minimum": 0 });
    let choice = object(
        &["index", "message", "finish_reason"],
        json!({
            "index": { "type": "integer", "minimum": 0 },
            "message": object(
                &["role", "content"],
                json!({ "role": { "const": "assistant" }, "content": string() }),
                false,
            ),
            "finish_reason": string(),
        }),
        false,
    );
    object(
        &["id", "created", "object", "model", "choices", "usage"],
        json!({
            "id": string(),
            "created": { "type": "integer", "description": "Unix time, seconds." },
            "object": { "const": "chat.completion" },
            "model": string(),
            "choices": { "type": "array", "items": choice },
            "usage": object(
                &["prompt_tokens", "completion_tokens", "total_tokens"],
                json!({ "prompt_tokens": tokens, "completion_tokens": tokens, "total_tokens": tokens }),
                false,
            ),
        }),
        false,
    )
}

fn history_save() -> Value {
    object(
        &["content"],
        json!({ "content": content(), "source": source(), "messengerB_data": reference("MessengerBData") }),
        false,
    )
}

fn history_save_messenger_a() -> Value {
    object(
        &["content", "messengerA_data"],
        json!({ "content": content(), "messengerA_data": reference("MessengerAData") }),
        false,
    )
}

fn history_saved() -> Value {
    object(
        &["success", "id"],
        json!({ "success": success(), "id": nullable(sparse_id("The chat-history id of the saved item.")) }),
        false,
    )
}

fn source_item() -> Value {
    object(
        &["id", "score", "status", "created_at", "name", "content"],
        json!({
            "id": sparse_id("The knowledge-base entry's id."), "score": { "type": "number" },
            "status": { "type": "string", "enum": ["scored", "unscored"] },
            "created_at": date_time(), "name": string(), "content": string(),
            "url": {
                "type": "string",
                "format": "uri",
                "description": "Ours (additive): the web page of a `website` entry (where its redirects ended), with a URL text fragment (`#:~:text=start,end`) that opens it scrolled to the words the reply quotes (to the passage's opening words when it quotes none); absent for other entries.",
            },
            "page": {
                "type": "integer",
                "minimum": 1,
                "description": "Ours (additive): the 1-based page of the document (a PDF) on which the passage begins; absent for documents without pages.",
            },
        }),
        false,
    )
}

/// A source of the retrieval check: a [`source_item`] with where its chunk ranked each way
/// (each rank absent when that ranking did not find the chunk).
fn retrieved_source() -> Value {
    let mut v = source_item();
    let rank = |way: &str| {
        json!({
            "type": "integer",
            "minimum": 1,
            "description": format!("Ours: the chunk's place (1 = first) in the {way} ranking; absent when that ranking did not find it."),
        })
    };
    v["properties"]["bm25Rank"] = rank("BM25");
    v["properties"]["vectorRank"] = rank("vector (embedding)");
    v["properties"]["cosine"] = cosine("the question's embedding to the chunk's vector (absent without one)");
    v["properties"]["score"]["description"] = json!(
        "Ours: the fused score, 0.6 · bm25 / bm25_max + 0.4 · cosine' (the cosine scaled between the last and \
         the first vector hit) over the rankings that found the chunk; with no embedding model configured \
         (no `vectorRank` ever), 0.6 · bm25 / bm25_max."
    );
    v
}

fn chat_history_item() -> Value {
    object(
        &["content", "created_at", "id", "is_private", "role", "source", "sources", "user_uuid", "original_message_id"],
        json!({
            "content": string(), "created_at": date_time(),
            "id": sparse_id(""),
            "is_private": { "type": "boolean" },
            "role": { "type": "string", "enum": ["user", "assistant"] },
            "source": source(),
            "sources": { "type": "array", "items": reference("Source") },
            "user_uuid": uuid(),
            "original_message_id":
                deprecated(nullable(string()), "Deprecated (spec §2.1); set on assistant items."),
            "interrupted": {
                "const": true,
                "description": "Present (true) on a streamed reply whose client disconnected: the item keeps \
                    what was said before the cut.",
            },
            "messengerA_data": reference("MessengerAData"),
            "messengerB_data": reference("MessengerBData"),
        }),
        false,
    )
}

/// The `type` of a history list: `all`, or the channel listed.
fn history_types() -> Vec<&'static str> {
    std::iter::once("all").chain(Channel::ALL.map(Channel::name)).collect()
}

fn chat_history() -> Value {
    object(
        &["success", "type", "items"],
        json!({
            "success": success(),
            "type": { "type": "string", "enum": history_types() },
            "items": { "type": "array", "items": reference("ChatHistoryItem") },
        }),
        false,
    )
}

/// The answer of the retrieval check (`…/chat/completions/test`).
fn completion_test() -> Value {
    object(
        &["success", "content", "query", "sources"],
        json!({
            "success": success(),
            "content": string(),
            "query": { "type": "string", "description": "Ours: the search query the retrieval ran." },
            "sources": {
                "type": "array",
                "items": super::reference("RetrievedSource"),
                "description": "Ours: every source retrieved for the query, best first, with its fused `score` and its BM25 and vector ranks (a chunk whose own heading the query names whole may take BM25's last place).",
            },
            "reader": reader(),
        }),
        false,
    )
}

/// A cosine similarity of the question's embedding, described as to `what`.
fn cosine(what: &str) -> Value {
    json!({ "type": "number", "minimum": -1, "maximum": 1, "description": format!("Ours: the cosine similarity of {what}.") })
}

/// Why the embedded generator answered as it did (the retrieval check's `reader`).
fn reader() -> Value {
    let share = |what: &str| json!({ "type": "number", "description": format!("Ours: {what}") });
    let candidate = object(
        &["source", "text", "coverage", "standing", "title", "score", "quoted"],
        json!({
            "source": { "type": "integer", "minimum": 1, "description": "Ours: the passage's chunk, its place (1 = first: its retrieval rank) in `sources`." },
            "text": { "type": "string", "description": "Ours: the passage's opening words (at most 160 characters)." },
            "meaning": cosine("the question's embedding to the passage's closest sentence (absent without an embedding model)"),
            "coverage": share("the share of the question's terms the passage holds, each weighted by its rarity among the candidates' passages (a term found only in its heading path counts half)."),
            "standing": share("its chunk's retrieval score over the best chunk's (in 0..=1; `1 / rank` when the best score is not positive)."),
            "title": share("the agreement of its chunk's own heading with the question: the Dice coefficient of their terms (in 0..=1)."),
            "score": share("meaning + 0.5 × coverage + 0.6 × standing + 0.5 × title: the best score is quoted."),
            "quoted": { "type": "boolean", "description": "Ours: whether the answer quotes it." },
        }),
        false,
    );
    let confidence = object(
        &["value", "coverage"],
        json!({
            "value": share("what the decision compares with its thresholds: (sentence cosine + 0.25 × chunk cosine + 0.1 × the quoted passage's coverage) / 1.35 (coverage alone without an embedding model)."),
            "coverage": share("the quoted passage's coverage."),
            "chunkCosine": cosine("the question's embedding to the best-ranked chunk"),
            "sentenceCosine": cosine("the question's embedding to its closest candidate sentence"),
        }),
        false,
    );
    let mut v = object(
        &["verdict", "answered", "unknownTerms", "candidates"],
        json!({
            "verdict": { "type": "string", "enum": ["answered", "uncertain", "refused"], "description": "Ours: `answered`; `uncertain`: the closest passage, after the lead-in \"The closest passage I have:\"; `refused`: \"I don't know\", no sources." },
            "answered": { "type": "boolean", "description": "Ours: whether the reader quoted a passage (else it said it does not know)." },
            "confidence": confidence,
            "unknownTerms": { "type": "array", "items": { "type": "string" }, "description": "Ours: the question's terms (as the search index analyzes them: stop words left out, stemmed) that no document of the knowledge base holds; a question with one is at best `uncertain`, since the knowledge base never names what it asks about." },
            "candidates": { "type": "array", "items": candidate, "description": "Ours: the candidate passages of the best five chunks (at most 8), best score first." },
        }),
        false,
    );
    v["description"] =
        json!("Ours, from the embedded generator only (absent for upstream models): why it answered as it did.");
    v
}
