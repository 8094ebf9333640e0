//! Chat completions (spec §4.2 `POST …/chat/completions`, docs/decisions.md "Chat"): retrieve the
//! replica's best chunks, build the [`Generation`] (persona, sources, this user's recent turns
//! within the token budget), ask the model's backend, and store both history items (the reply
//! with the sources given to the model) together with the token usage, in one write.
//!
//! [`complete`] waits for the whole reply; [`stream`] hands out its deltas as they come. A
//! stream whose reader goes away cancels the generation (the upstream request is dropped) and
//! stores what was said with `interrupted` set.

use std::sync::Arc;

use tokio::sync::mpsc;
use uuid::Uuid;

use super::channel_data::{ChannelKey, Stamped};
use super::history::{self, NewItem};
use super::quotas::Pool;
use super::text_fragment;
use crate::error::{Error, Result};
use crate::generate::embedded::{self, reader, Explanation, Verdict, Weights};
use crate::generate::{
    prompt, Backends, Closeness, Evidence, Generation, ModelRoute, Persona, Piece, Pieces, Spread, Turn, Usage,
    EMBEDDED,
};
use crate::search::fusion::{Fusion, Ranks};
use crate::search::{vectors, Asked, Hybrid, QuestionVector, Search};
use crate::store::kb;
use crate::store::records::{Chunk, ChunkVector, KbKind, Replica, SourceRef};
use crate::store::snapshot::Snapshot;
use crate::store::{now_ms, Store};
use crate::text::question;

/// Chunks retrieved per question.
pub const TOP_K: usize = 5;
/// Chunks retrieved per question for the embedded generator: the chunks whose passages its
/// reader chooses among ([`reader::CANDIDATE_SOURCES`]).
pub const EMBEDDED_TOP_K: usize = reader::CANDIDATE_SOURCES;
/// How the BM25 and the vector rankings are fused (`search::fusion`): a convex combination
/// weighing BM25 0.6, chosen on the dev set's retrieval (`FUSION_BM25_WEIGHTS=… examples/retrieval
/// sections --embeddings`, all-MiniLM-L6-v2, 156 answerable questions of which 40 paraphrased;
/// recall@5 / MRR@10 of the right section: BM25 alone 0.891 / 0.806, vectors alone 0.891 /
/// 0.745, RRF 0.949 / 0.811, convex with BM25 weighing 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7:
/// 0.923 / 0.787, 0.936 / 0.799, 0.949 / 0.821, 0.949 / 0.824, **0.962 / 0.837**, 0.949 / 0.839,
/// 0.942 / 0.834; on the paraphrased questions 0.6 also ranks best, 0.875 / 0.717).
pub const FUSION: Fusion = Fusion::Convex { bm25_weight: 0.6 };
/// Sources kept with an answer that cites some of them (the embedded generator) at most.
pub const MAX_SOURCES: usize = 3;

/// What a completion needs besides the replica and the user.
#[derive(Clone)]
pub struct Context {
    pub store: Store,
    pub search: Arc<Search>,
    pub backends: Arc<Backends>,
    /// `max_tokens` asked of upstreams unless the request says otherwise.
    pub max_tokens: Option<u32>,
}

/// A completion request after validation.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub content: String,
    pub skip_chat_history: bool,
    pub source: String,
    pub channel_data: Option<String>,
    pub channel_key: Option<ChannelKey>,
    /// An image for vision routes (`imageURL` of the messengerA operation).
    pub image_url: Option<String>,
    /// Earlier turns given by the client (experimental operation); the stored history of
    /// `(replica, user, source)` is used when `None`.
    pub turns: Option<Vec<Turn>>,
    pub max_tokens: Option<u32>,
    /// Whose monthly conversations a conversation this question starts counts in: the
    /// organization's own, or its public chats' visitors' (the embed operations).
    pub pool: Pool,
}

/// An image given with a question (`imageURL`): an http(s) URL or a `data:image/` URL; 400
/// otherwise.
pub fn check_image_url(url: &str) -> Result<()> {
    if ["https://", "http://", "data:image/"].iter().any(|p| url.starts_with(p)) {
        Ok(())
    } else {
        Err(Error::invalid("imageURL", "must be an http(s) URL or a data:image/ URL"))
    }
}

impl Ask {
    /// An empty request on the channel of `channel` (its source, data and key).
    pub fn on(channel: Stamped) -> Ask {
        Ask { source: channel.source, channel_data: channel.data, channel_key: channel.key, ..Ask::default() }
    }
}

/// The reply, the sources it was built from, and the backend that made it.
#[derive(Debug, Clone)]
pub struct Completion {
    pub content: String,
    /// The sources the reply cites (stored with it).
    pub sources: Vec<SourceRef>,
    /// Every source retrieved for the question and handed to the model, best first, scored.
    pub retrieved: Vec<SourceRef>,
    /// Where each of `retrieved` ranked by BM25 and by its vector.
    pub ranks: Vec<Ranks>,
    /// The `X-Replica-Backend` value.
    pub backend: String,
    /// Id of the stored assistant item (`None` with `skip_chat_history`).
    pub message_id: Option<u64>,
    pub usage: Usage,
    /// The reply was cut short (see [`crate::store::records::Message::interrupted`]).
    pub interrupted: bool,
    /// Why the embedded reader answered as it did (`None` from an upstream model).
    pub explanation: Option<Explanation>,
}

/// What a stream reports, in order: deltas, then at most one `Failed`, then `Done` (unless the
/// store write fails, which is reported as `Failed`).
#[derive(Debug)]
pub enum Event {
    Delta(String),
    Failed(Error),
    /// (boxed: a completion with its reader's explanation is far larger than a delta)
    Done(Box<Completion>),
}

/// A reply being streamed: the backend's name (known before the first byte) and its events.
pub struct Streaming {
    pub backend: String,
    pub events: mpsc::Receiver<Event>,
}

/// A retrieved source, where its chunk ranked by BM25 and by its vector (with its cosine),
/// and the question's cosine to each of its sentences' vectors ([`Closeness::sentences`]).
#[derive(Debug, Clone)]
pub struct Retrieved {
    pub source: SourceRef,
    pub ranks: Ranks,
    pub sentences: Vec<f32>,
}

/// The best `top` chunks of `replica` for `query` (a question, or one read with the question
/// before it: [`Asked`]; [`TOP_K`] for a model, [`EMBEDDED_TOP_K`]
/// for the embedded generator), best first: BM25 and, with an embedding model, the chunks'
/// vectors under the replica's `llm.embeddingModel` (`model`), fused ([`Search::hybrid`]);
/// re-read from the store (chunks of entries deleted since they were indexed are dropped; see
/// `search::indexer`); `how`: [`FUSION`] but to measure others. Identical chunks — the same passage uploaded twice, in one entry or
/// several — are collapsed into the best-scored one (re-running a setup does not degrade
/// answers); the entries stay as the client made them. The index is asked for `top` hits, and
/// only when some of them were collapsed for twice as many, so that collapsing still leaves up
/// to `top`.
pub async fn retrieve(
    store: &Store,
    search: &Arc<Search>,
    replica: Uuid,
    model: Option<&str>,
    query: Asked<'_>,
    top: usize,
    how: Fusion,
) -> Result<Retrieval> {
    catch_up(store, search).await?;
    let (found, collapsed) = retrieve_from(store, search, (replica, model, how), query, top, top).await?;
    if collapsed == 0 {
        return Ok(found);
    }
    Ok(retrieve_from(store, search, (replica, model, how), query, top * 2, top).await?.0)
}

/// What [`retrieve`] found: the sources, best first, the question's terms that no document of
/// the replica's knowledge base holds (`search::Hybrid::unknown`), whether the question is in
/// a language none of them is written in (`search::Hybrid::other_language`), and the catalog
/// id of the embedding model whose vectors took part (`None`: BM25 alone).
#[derive(Debug, Clone, Default)]
pub struct Retrieval {
    pub found: Vec<Retrieved>,
    pub unknown: Vec<String>,
    pub other_language: bool,
    pub model: Option<String>,
    /// How close the question is to all of the replica's chunks by meaning
    /// (`search::Hybrid::spread`).
    pub spread: Option<Spread>,
    /// How much of the question's meaning rests on its unknown terms
    /// (`search::Hybrid::unknown_meaning`).
    pub unknown_meaning: Option<f32>,
    /// The embedded reader's reading of the question from these sources, when it was read
    /// ([`retrieve_in_conversation`]); the reply is then made from it, not read again.
    pub reading: Option<embedded::Reading>,
    /// The section the conversation's last answer quoted, as (entry id, section name), which
    /// the reading weighs ([`retrieve_in_conversation`]).
    pub last_quoted: Option<(u64, String)>,
}

impl Retrieval {
    /// Its sources and their closeness by meaning, in order, as a generation takes them
    /// (copies: [`Retrieval::into_parts`] moves them).
    pub fn sources(&self) -> (Vec<SourceRef>, Vec<Closeness>) {
        let closeness = self.found.iter().map(|r| Closeness { chunk: r.ranks.cosine, sentences: r.sentences.clone() });
        (self.found.iter().map(|r| r.source.clone()).collect(), closeness.collect())
    }

    /// Its sources, their ranks and their closeness by meaning, in order, moved out.
    fn into_parts(found: Vec<Retrieved>) -> (Vec<SourceRef>, Vec<Ranks>, Vec<Closeness>) {
        let (mut sources, mut ranks, mut closeness) = (Vec::new(), Vec::new(), Vec::new());
        for r in found {
            closeness.push(Closeness { chunk: r.ranks.cosine, sentences: r.sentences });
            sources.push(r.source);
            ranks.push(r.ranks);
        }
        (sources, ranks, closeness)
    }

    /// Reads `question` from these sources with the embedded reader, keeping the reading
    /// ([`Retrieval::reading`], which the reply is then made from): its verdict and fitted
    /// probability (0 when it reads nothing: small talk, no sources).
    fn judge(&mut self, question: &str) -> (Verdict, f32) {
        let reading = self.read(question, self.last_quoted.as_ref());
        self.keep(reading)
    }

    /// The embedded reader's reading of `question` from these sources, with `last_quoted` the
    /// section the conversation's last answer quoted, not kept.
    fn read(&self, question: &str, last_quoted: Option<&(u64, String)>) -> embedded::Reading {
        let (sources, closeness) = self.sources();
        let evidence = Evidence {
            closeness: &closeness,
            unknown: &self.unknown,
            other_language: self.other_language,
            model: self.model.as_deref(),
            spread: self.spread,
            unknown_meaning: self.unknown_meaning,
            last_quoted: last_quoted.map(|(id, name)| (*id, name.as_str())),
        };
        embedded::read_question(question, &sources, &evidence, &Weights::FITTED)
    }

    /// Keeps `reading` as this retrieval's ([`Retrieval::judge`]): its verdict and fitted
    /// probability.
    fn keep(&mut self, reading: embedded::Reading) -> (Verdict, f32) {
        let e = &reading.explanation;
        let judged = (e.verdict, e.confidence.map_or(0.0, |c| c.value));
        self.reading = Some(reading);
        judged
    }

    /// Whether the section the conversation's last answer quoted could change its reading's
    /// quote: a candidate of another section than the quoted one scores within
    /// [`Weights::continuity`] of it (the most that section's standing adds), or the
    /// candidates shown were cut there ([`embedded::reader::EXPLAINED`]). When not, and the
    /// question is answered, the history need not be read ([`retrieve_in_conversation`]).
    fn contested(&self) -> bool {
        let Some(reading) = &self.reading else { return false };
        let candidates = &reading.explanation.candidates;
        let Some(best) = candidates.first() else { return false };
        let reach = |c: &embedded::Candidate| c.score + Weights::FITTED.continuity >= best.score;
        let cut = candidates.len() == embedded::reader::EXPLAINED && candidates.last().is_some_and(reach);
        cut || candidates.iter().any(|c| self.section(c.source) != self.section(best.source) && reach(c))
    }

    /// The section of found source `i`, as (entry id, section name).
    fn section(&self, i: usize) -> (u64, &str) {
        let s = &self.found[i].source;
        (s.id, s.name.as_str())
    }

    /// Whether a found source is in `section` (entry id, section name): only then can a
    /// candidate continue it.
    fn holds(&self, (id, name): &(u64, String)) -> bool {
        (0..self.found.len()).any(|i| self.section(i) == (*id, name.as_str()))
    }

    /// The section its reading quotes, as (entry id, section name), if it answered.
    pub fn quoted(&self) -> Option<(u64, String)> {
        let quote = self.reading.as_ref()?.quote.as_ref()?;
        let (id, name) = self.section(quote.used[0]);
        Some((id, name.to_string()))
    }
}

/// The conversation's turn before a question ([`retrieve_in_conversation`]).
#[derive(Debug, Clone, Default)]
pub struct Previous {
    /// What it asked (`question::asked` of the visitor's message).
    pub question: String,
    /// The section its answer quoted, as (entry id, section name): `Some(None)` when the
    /// stored answer quoted none (or there is none), `None` when the history does not say
    /// (turns a client sends carry no sources), so that the question is read again to find it.
    pub quoted: Option<Option<(u64, String)>>,
}

/// Retrieval for the embedded generator's question `asked`, read in its conversation
/// (`previous`: the turn before it, if any):
/// - **the section the last answer quoted** is the subject a follow-up continues: a candidate
///   passage in it adds its standing once more ([`Weights::continuity`]), so "What temperature
///   does it keep then?" after an answer from *Holiday mode* is answered from *Holiday mode*
///   when its words find that section too, and a question on a new subject, whose words find
///   the old section far behind, is not pulled back to it, nor refused because of it
///   ([`continuation_kept`]). The section is the stored answer's
///   first source, or, when the client sends its turns itself, the quote of the earlier
///   question read again (its vector from the cache of recent questions). A stored history
///   silent for [`chats::SILENCE_MS`](super::chats::SILENCE_MS) has no turn before: a new
///   conversation continues nothing.
/// - the history is read (`previous` awaited) only when the conversation could change the
///   reading: the question alone is not answered, or another section's candidate stands within
///   [`Weights::continuity`] of the best ([`Retrieval::contested`]). A question its own words
///   answer reads nothing more than it did without a conversation.
/// - when the reader would not answer the question on its own, the earlier question and this
///   one are retrieved together (the words of both; the sum of their vectors, the earlier
///   one's from the cache: no second embedding, [`Asked`]), and that reading is kept when the
///   reader is surer of it and answers it ("Can you show an example?"), or leads both in and
///   the joined one is much surer ([`surer_together`]).
///
/// On the calibration set's conversations the two answered follow-ups from the right section
/// for 0.724 with all-MiniLM-L6-v2 (0.586 with the second alone), 0.586 with
/// multilingual-e5-small (0.552) and 0.621 with BM25 alone (0.586), and changes of subject as
/// before (0.900, 0.900, 0.850); keeping the joined reading also when both are led in
/// ([`JOINED_ODDS`]) raised the follow-ups to 0.793 and 0.655 (BM25 alone 0.621 =), changes of
/// subject as before. A flat bonus instead (0.6: 0.759 with all-MiniLM-L6-v2) pulled
/// "Welchen Preis hat die Inspektion?" back to the list of services answered before it; the
/// standing weighed 1.5 times lost changes of subject with BM25 alone (0.800); a bonus
/// shrinking with the best passage's coverage of the question did worse (0.690). Earlier
/// measures: the sum of the vectors answered follow-ups from the right section for 0.724
/// against 0.690 with the joined text embedded anew; keeping a joined reading that is only led
/// in, when surer by 0.1, lost changes of subject on the held-out conversations (0.778 against
/// 0.889). Returns the retrieval and the question the reader reads (`asked`, or both joined by
/// a blank line). The same general signals decide (`embedded::decision`): no list of
/// follow-up phrases.
pub async fn retrieve_in_conversation<F>(
    (store, search): (&Store, &Arc<Search>),
    (replica, model): (Uuid, Option<&str>),
    asked: &str,
    previous: F,
    top: usize,
) -> Result<(Retrieval, String)>
where
    F: std::future::Future<Output = Result<Option<Previous>>>,
{
    let mut alone = retrieve(store, search, replica, model, asked.into(), top, FUSION).await?;
    let (mut verdict, mut value) = alone.judge(asked);
    if verdict == Verdict::Answered && !alone.contested() {
        // the conversation could change nothing: its history is not read
        return Ok((alone, asked.to_string()));
    }
    let before = previous.await?.filter(|p| !p.question.trim().is_empty() && p.question != asked);
    let last_quoted = match &before {
        Some(Previous { quoted: Some(quoted), .. }) => quoted.clone(),
        Some(p) => {
            let mut earlier = retrieve(store, search, replica, model, p.question.as_str().into(), top, FUSION).await?;
            earlier.judge(&p.question);
            earlier.quoted()
        }
        None => None,
    };
    if let Some(section) = last_quoted.as_ref().filter(|s| alone.holds(s)) {
        // read again only when a candidate can continue the section: otherwise nothing moves
        let continued = alone.read(asked, Some(section));
        if continuation_kept(verdict, continued.explanation.verdict) {
            alone.last_quoted = Some(section.clone());
            (verdict, value) = alone.keep(continued);
        }
    }
    let Some(before) = before.filter(|_| verdict != Verdict::Answered) else {
        return Ok((alone, asked.to_string()));
    };
    let query = Asked { text: asked, before: Some(&before.question) };
    let mut together = retrieve(store, search, replica, model, query, top, FUSION).await?;
    together.last_quoted = last_quoted;
    let joined = query.words().into_owned();
    let (verdict_together, value_together) = together.judge(&joined);
    if surer_together((verdict_together, value_together), (verdict, value, !alone.unknown.is_empty())) {
        return Ok((together, joined));
    }
    Ok((alone, asked.to_string()))
}

/// Whether a question's reading with the section the last answer quoted continued (verdict
/// `continued`) replaces its reading without it (`alone`): unless it refuses a question the
/// reader answers or leads in without it. The continuity only weighs which passage is quoted;
/// the subject before is not what a question asks of the knowledge base, so it never makes
/// the reader say "I don't know" ("OK. What is a lambda, by the way?" after two turns on
/// default argument values, with multilingual-e5-small: led in from *Lambda Expressions*
/// alone, refused when read from *Default Argument Values*).
fn continuation_kept(alone: Verdict, continued: Verdict) -> bool {
    continued != Verdict::Refused || alone == Verdict::Refused
}

/// How many times the odds of a question's reading alone (`p / (1 - p)` of its fitted
/// probability) a joined reading that is only led in must reach to be kept
/// ([`surer_together`]). On the calibration set's conversations the joined readings of
/// follow-ups ("Show me one, please.") had 5.5 to 8.5 times the odds of their reading alone,
/// those of questions on a new subject pulled back to the old one at most 2.3 times.
const JOINED_ODDS: f32 = 3.0;

/// Whether a question's joined reading (`together`: its verdict and fitted probability) is
/// kept over its reading alone (`alone`: its verdict, never answered since an answered one is
/// not read joined, its fitted probability, and whether it names terms no document holds):
/// when it is answered and surer; or, when both are led in and the question alone names
/// nothing unknown, when it has [`JOINED_ODDS`] times the odds. A follow-up that says little
/// on its own is then read in its subject even when the joined reading is only led in ("Show
/// me one, please." after "What are list comprehensions?", which alone is led in from
/// *Command Line Arguments*). A question led in because it names what the knowledge base
/// lacks ("How do I decorate a function?") is about that, which no earlier question supplies,
/// and one the reader refuses alone is never led in because the question before it was on
/// the knowledge base.
fn surer_together(
    (verdict, together): (Verdict, f32),
    (alone_verdict, alone, names_unknown): (Verdict, f32, bool),
) -> bool {
    let odds = |p: f32| p / (1.0 - p).max(f32::EPSILON);
    match (verdict, alone_verdict) {
        (Verdict::Answered, _) => together > alone,
        (Verdict::Uncertain, Verdict::Uncertain) => !names_unknown && odds(together) >= JOINED_ODDS * odds(alone),
        _ => false,
    }
}

/// Longest a retrieval waits for this node's index to apply what other nodes wrote.
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// On a store other nodes write too (PostgreSQL), waits until this node's index has applied
/// every knowledge-base change committed before the question (the outbox's last seq), at most
/// [`CATCH_UP_WAIT`]: an entry another node reported `READY` is then searchable here too. On
/// redb the index is this process's own and `READY` already means searchable here.
async fn catch_up(store: &Store, search: &Search) -> Result<()> {
    if !store.is_shared() {
        return Ok(());
    }
    let head = store.outbox_head().await?;
    if search.applied_seq() >= head {
        return Ok(());
    }
    store.outbox_notify.notify_one();
    if !search.wait_applied(head, CATCH_UP_WAIT).await {
        tracing::warn!(head, applied = search.applied_seq(), "the search index is behind the store; answering from it");
    }
    Ok(())
}

/// Up to `top` distinct chunks among the best `hits` of the index, and how many hits were
/// collapsed into an earlier identical one.
///
/// The BM25 search runs inline on the runtime's worker, like the store's reads (`store`'s
/// module docs): a top-k search over one replica's chunks takes tens of microseconds (the
/// collector skips blocks that cannot enter the top k), less than the hop to the blocking pool
/// and back that it used to take (a wake-up of a pool thread and of the worker: 10 % of a
/// completion's CPU in a profile of the completions benchmark).
async fn retrieve_from(
    store: &Store,
    search: &Search,
    (replica, model, how): (Uuid, Option<&str>, Fusion),
    query: Asked<'_>,
    hits: usize,
    top: usize,
) -> Result<(Retrieval, usize)> {
    let Hybrid { hits, question, unknown, other_language, spread, unknown_meaning } =
        search.hybrid(replica, model, query, hits, how).await?;
    let model = question.as_ref().map(|q| q.model.clone());
    let (found, collapsed) = store
        .read(move |txn| {
            // the snapshot's tables are opened once for the reads until the next commit
            let mut out: Vec<Retrieved> = Vec::new();
            let mut seen = Seen::default();
            let mut collapsed = 0;
            let mut live = Live::default();
            for h in &hits {
                let Some(created_at) = live.created_at(txn, replica, h.entry)? else { continue };
                let Some(c) = kb::chunk(txn, (h.entry, h.chunk))? else { continue };
                if !seen.insert(&c.text, &out) {
                    collapsed += 1;
                    continue;
                }
                let sentences = match &question {
                    Some(q) => sentence_cosines(kb::vector(txn, (h.entry, h.chunk))?, &c, q),
                    None => Vec::new(),
                };
                let url = match live.is_website(h.entry) {
                    true => page_url(txn, h.entry)?,
                    false => None,
                };
                let (name, content, page) = (c.title, c.text, c.page);
                let source = SourceRef { id: h.entry, score: h.score, created_at, name, content, url, page };
                out.push(Retrieved { source, ranks: h.ranks, sentences });
                if out.len() == top {
                    break;
                }
            }
            Ok((out, collapsed))
        })
        .await?;
    let reading = None;
    Ok((
        Retrieval { found, unknown, other_language, model, spread, unknown_meaning, reading, last_quoted: None },
        collapsed,
    ))
}

/// The question's cosine to each sentence vector in `stored`, the stored vectors of a chunk
/// whose current text is `c`; empty when they are missing or stale.
fn sentence_cosines(stored: Option<ChunkVector>, c: &Chunk, q: &QuestionVector) -> Vec<f32> {
    let sentences = vectors::sentences_of(stored, c, &q.model).unwrap_or_default();
    if sentences.iter().any(|v| v.len() != q.vector.len()) {
        return Vec::new();
    }
    sentences.iter().map(|v| crate::embed::dot(&q.vector, v)).collect()
}

/// The entries one retrieval has read: each is read once however many of its chunks were hit
/// (most hits of a question come from a few entries).
#[derive(Default)]
struct Live {
    /// Per entry read: its `created_at` and whether it is a web page, `None` when it is gone or
    /// not the replica's.
    read: Vec<(u64, Option<(i64, bool)>)>,
}

impl Live {
    /// The `created_at` of entry `id` when it exists and is `replica`'s (the index may still
    /// hold chunks of an entry deleted since, see `search::indexer`).
    fn created_at(&mut self, txn: &Snapshot, replica: Uuid, id: u64) -> Result<Option<i64>> {
        Ok(self.entry(txn, replica, id)?.map(|(created_at, _)| created_at))
    }

    /// Entry `id` as [`Live::read`] keeps it, read once.
    fn entry(&mut self, txn: &Snapshot, replica: Uuid, id: u64) -> Result<Option<(i64, bool)>> {
        if let Some((_, known)) = self.read.iter().find(|(e, _)| *e == id) {
            return Ok(*known);
        }
        let entry = kb::entry(txn, id)?;
        let known = entry.filter(|e| e.replica == replica).map(|e| (e.created_at, e.kind == KbKind::Website));
        self.read.push((id, known));
        Ok(known)
    }

    /// Whether entry `id` (already read) is a live `website` entry of the replica.
    fn is_website(&self, id: u64) -> bool {
        self.read.iter().any(|(e, known)| *e == id && matches!(known, Some((_, true))))
    }
}

/// The page `website` entry `id` was fetched from: where its redirects ended, else its `url`.
fn page_url(txn: &Snapshot, id: u64) -> Result<Option<String>> {
    let source = kb::source_in(txn, id)?;
    Ok(source.website.map(|w| w.final_url).or(source.url))
}

/// The passages kept by one retrieval (each `SourceRef` of its `out`, in order), to find a
/// passage that repeats one of them ([`passage_key`]).
///
/// Most retrievals repeat nothing, so a passage is first compared by its count of bytes above
/// the space character ([`solid_len`], one pass the compiler vectorizes): passages with the
/// same words have the same count. The words' hash is computed only when the counts agree (it
/// was 6 % of a completion's CPU when computed for every passage).
#[derive(Default)]
struct Seen {
    /// Per kept passage: its solid length and, once computed, its key.
    kept: Vec<(usize, Option<u64>)>,
}

impl Seen {
    /// `false` when `text` repeats a passage of `out` (the kept ones); else records it as the
    /// next one kept (the caller pushes it to `out`).
    fn insert(&mut self, text: &str, out: &[Retrieved]) -> bool {
        let len = solid_len(text);
        let mut key = None;
        for (i, (kept_len, kept_key)) in self.kept.iter_mut().enumerate() {
            if *kept_len == len
                && *key.get_or_insert_with(|| passage_key(text))
                    == *kept_key.get_or_insert_with(|| passage_key(&out[i].source.content))
            {
                return false;
            }
        }
        self.kept.push((len, key));
        true
    }
}

/// Bytes of `text` above the space character: passages with the same words (split on ASCII
/// whitespace, [`passage_key`]) have the same count.
///
/// Counted in runs of 255 bytes into a `u8` (which cannot overflow), so the compiler compares
/// and adds whole vector registers of bytes. Summed straight into a `usize` it widened every
/// byte to 64 bits and handled two bytes per step: 2.7 % of a completion's CPU in a profile of
/// the completions benchmark, 0.3 % counted this way.
fn solid_len(text: &str) -> usize {
    let run = |bytes: &[u8]| bytes.iter().fold(0u8, |n, &b| n + u8::from(b > b' '));
    text.as_bytes().chunks(usize::from(u8::MAX)).map(|c| usize::from(run(c))).sum()
}

/// What makes two passages the same: their words, whatever the (ASCII) spacing, as a 64-bit
/// hash of the words in order. A byte scan without a copy: it ran on every retrieval and took 8 %
/// of a completion's CPU when it joined the words into a new string.
fn passage_key(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    text.split_ascii_whitespace().for_each(|w| w.hash(&mut h));
    h.finish()
}

/// A request ready for its backend.
struct Prepared {
    generation: Generation,
    /// Where each of `generation.sources` ranked by BM25 and by its vector.
    ranks: Vec<Ranks>,
    route: ModelRoute,
    replica: Replica,
    user: Uuid,
    ask: Ask,
}

/// The persona of a replica.
fn persona(r: &Replica) -> Persona {
    Persona {
        name: r.name.clone(),
        kind: r.kind.clone(),
        greeting: r.greeting.clone(),
        purpose: r.purpose.clone(),
        system_message: r.llm.system_message.clone(),
    }
}

/// The newest turns of `(replica, user)` on `source` that fit the prompt's history budget
/// (the scan stops at the first turn that does not fit).
async fn recent_turns(store: &Store, replica: Uuid, user: Uuid, source: &str) -> Result<Vec<Turn>> {
    let source = source.to_string();
    store
        .read(move |txn| {
            let messages = super::messages::open(txn)?;
            let mut failed = None;
            let newest_first = messages
                .newest_first(replica, user, u64::MAX)?
                .map_while(|m| match m {
                    Ok(m) => Some(m),
                    Err(e) => {
                        failed = Some(e);
                        None
                    }
                })
                .filter(|m| m.source == source)
                .map(|m| Turn { role: m.role, content: m.content });
            let turns = prompt::window(newest_first, prompt::HISTORY_TOKEN_BUDGET);
            failed.map_or(Ok(turns), Err)
        })
        .await
}

/// The conversation's turn before `ask` ([`retrieve_in_conversation`]): the last user turn
/// the client sent with it (whose answer's sources it does not send), else the last question
/// stored on its channel with the sources of the answer stored after it (none when the client
/// keeps no history, or when the channel's last item is older than
/// [`chats::SILENCE_MS`](super::chats::SILENCE_MS): the question starts a new conversation,
/// as the conversation quota counts it).
async fn previous_turn(cx: &Context, replica: Uuid, user: Uuid, ask: &Ask) -> Result<Option<Previous>> {
    if let Some(turns) = &ask.turns {
        let question = turns.iter().rev().find(|t| t.role == "user");
        return Ok(question.map(|t| Previous { question: question::asked(&t.content).to_string(), quoted: None }));
    }
    if ask.skip_chat_history {
        return Ok(None);
    }
    let (source, since) = (ask.source.clone(), now_ms() - super::chats::SILENCE_MS);
    cx.store
        .read(move |txn| {
            let messages = super::messages::open(txn)?;
            let mut quoted = None;
            for m in messages.newest_first(replica, user, u64::MAX)? {
                let m = m?;
                match m.role.as_str() {
                    _ if m.source != source => {}
                    _ if quoted.is_none() && m.created_at < since => return Ok(None),
                    "user" => {
                        let question = question::asked(&m.content).to_string();
                        return Ok(Some(Previous { question, quoted: Some(quoted.flatten()) }));
                    }
                    "assistant" if quoted.is_none() => quoted = Some(m.sources.first().map(|s| (s.id, s.name.clone()))),
                    _ => {}
                }
            }
            Ok(None)
        })
        .await
}

async fn prepare(cx: &Context, replica: &Replica, user: Uuid, mut ask: Ask) -> Result<Prepared> {
    if !ask.skip_chat_history {
        let (id, source, data) = (replica.id, ask.source.clone(), ask.channel_data.clone());
        let continues = move |txn: &crate::store::kv::ReadTransaction, now| {
            super::chats::continues_in(txn, id, user, &source, data.as_deref(), now)
        };
        super::quotas::check_new_conversation(&cx.store, replica.org, ask.pool, continues).await?;
    }
    let route = cx.backends.route(&replica.llm.model).clone();
    let embedded = route.backend.name() == EMBEDDED;
    let top = if embedded { EMBEDDED_TOP_K } else { TOP_K };
    let (model, asked) = (replica.llm.embedding_model.as_deref(), question::asked(&ask.content));
    let (retrieval, read) = if embedded {
        let previous = previous_turn(cx, replica.id, user, &ask);
        retrieve_in_conversation((&cx.store, &cx.search), (replica.id, model), asked, previous, top).await?
    } else {
        (retrieve(&cx.store, &cx.search, replica.id, model, asked.into(), top, FUSION).await?, ask.content.clone())
    };
    let Retrieval { found, unknown, other_language, model: embedding_model, spread, unknown_meaning, reading, .. } =
        retrieval;
    let (sources, ranks, closeness) = Retrieval::into_parts(found);
    tracing::debug!(
        replica = %replica.id,
        retrieved = ?sources.iter().map(|s| (s.name.as_str(), s.score)).collect::<Vec<_>>(),
        "retrieval"
    );
    let history = match ask.turns.take() {
        Some(turns) => prompt::window(turns.into_iter().rev(), prompt::HISTORY_TOKEN_BUDGET),
        // The embedded generator answers from the question alone: no history to read.
        None if embedded => Vec::new(),
        None => recent_turns(&cx.store, replica.id, user, &ask.source).await?,
    };
    let generation = Generation {
        persona: persona(replica),
        closeness,
        unknown,
        other_language,
        embedding_model,
        spread,
        unknown_meaning,
        question: read,
        sources,
        history,
        image_url: ask.image_url.clone(),
        max_tokens: ask.max_tokens.or(cx.max_tokens),
        reading,
    };
    Ok(Prepared { generation, ranks, route, replica: replica.clone(), user, ask })
}

impl Prepared {
    async fn start(&self, stream: bool) -> Result<Box<dyn Pieces>> {
        let r = &self.route;
        r.backend.start(&self.generation, &r.upstream_model, r.vision, stream).await
    }

    /// The estimated usage of this request when the backend reports none.
    fn estimate(&self, reply: &str) -> Usage {
        let sent = prompt::estimate_prompt_tokens(&self.generation);
        Usage { prompt_tokens: sent as u64, completion_tokens: prompt::estimate_tokens(reply) as u64 }
    }
}

/// A reply as its pieces come in.
#[derive(Default)]
struct ChatReply {
    text: String,
    usage: Option<Usage>,
    cited: Option<Vec<usize>>,
    explanation: Option<Explanation>,
}

impl ChatReply {
    fn add(&mut self, piece: Piece) {
        match piece {
            Piece::Text(t) if self.text.is_empty() => self.text = t,
            Piece::Text(t) => self.text.push_str(&t),
            Piece::Usage(u) => self.usage = Some(u),
            Piece::Cited(c) => self.cited = Some(c),
            Piece::Explained(e) => self.explanation = Some(*e),
        }
    }
}

/// Stores the exchange (unless asked not to) and the usage in one write.
async fn finish(store: &Store, mut p: Prepared, reply: ChatReply, interrupted: bool) -> Result<Completion> {
    let usage = reply.usage.unwrap_or_else(|| p.estimate(&reply.text));
    let given = std::mem::take(&mut p.generation.sources);
    let sources: Vec<SourceRef> = match &reply.cited {
        Some(cited) => cited.iter().take(MAX_SOURCES).filter_map(|i| given.get(*i).cloned()).collect(),
        None => given.clone(),
    };
    let sources = one_per_section(sources).into_iter().map(|s| linked(s, &reply.text)).collect();
    let mut completion = Completion {
        content: reply.text,
        sources,
        retrieved: given,
        ranks: std::mem::take(&mut p.ranks),
        backend: p.route.backend.name().to_string(),
        message_id: None,
        usage,
        interrupted,
        explanation: reply.explanation,
    };
    let items = if p.ask.skip_chat_history { Vec::new() } else { exchange(&p.ask, &completion) };
    let (replica, user, private, now) = (p.replica.id, p.user, p.replica.private, now_ms());
    let (tokens, pool) = (Some(usage), p.ask.pool);
    let ids = store.write_grouped(history::Append { replica, user, private, items, now, tokens, pool }).await?;
    completion.message_id = ids.last().copied();
    Ok(completion)
}

/// `sources` with one source per section (heading path): a later chunk of a section already
/// cited is the same citation, not a second one.
fn one_per_section(sources: Vec<SourceRef>) -> Vec<SourceRef> {
    let mut out: Vec<SourceRef> = Vec::with_capacity(sources.len());
    for s in sources {
        if !out.iter().any(|o| o.name == s.name) {
            out.push(s);
        }
    }
    out
}

/// Source `s` of a reply `reply` with its web page's link pointing at the words quoted
/// ([`text_fragment::link`]).
fn linked(mut s: SourceRef, reply: &str) -> SourceRef {
    s.url = s.url.map(|url| text_fragment::link(&url, &s.content, reply));
    s
}

/// The question and the reply as history items. The reply to a channel message is keyed after
/// it, so a retried message (same channel key) stores neither a second question nor answer.
fn exchange(ask: &Ask, c: &Completion) -> Vec<NewItem> {
    let question = NewItem {
        role: "user",
        content: ask.content.clone(),
        source: ask.source.clone(),
        sources: Vec::new(),
        channel_data: ask.channel_data.clone(),
        channel_key: ask.channel_key.clone(),
        interrupted: false,
    };
    let reply = NewItem {
        role: "assistant",
        content: c.content.clone(),
        source: ask.source.clone(),
        sources: c.sources.clone(),
        channel_data: None,
        channel_key: ask.channel_key.as_ref().map(ChannelKey::reply),
        interrupted: c.interrupted,
    };
    vec![question, reply]
}

/// Answers `ask` as `replica` for `user` and stores the exchange unless asked not to.
/// Errors: 429 `CONVERSATION_QUOTA_EXCEEDED` (or `EMBED_CONVERSATION_QUOTA_EXCEEDED` for
/// [`Pool::Visitors`]) before anything is generated when the question would start a
/// conversation beyond its pool's monthly quota (`service::quotas::check_new_conversation`); 502
/// `UPSTREAM_ERROR` when the model's upstream fails (nothing is stored then).
pub async fn complete(cx: &Context, replica: &Replica, user: Uuid, ask: Ask) -> Result<Completion> {
    let p = prepare(cx, replica, user, ask).await?;
    let mut pieces = p.start(false).await?;
    let mut reply = ChatReply::default();
    while let Some(piece) = pieces.next().await? {
        reply.add(piece);
    }
    drop(pieces);
    finish(&cx.store, p, reply, false).await
}

/// Starts answering `ask` as a stream. Returns once the backend produced its first piece, so
/// a failure before anything was said is an error here (502 `UPSTREAM_ERROR`) and stores
/// nothing; later failures arrive as [`Event::Failed`] and the reply is stored as interrupted.
pub async fn stream(cx: &Context, replica: &Replica, user: Uuid, ask: Ask) -> Result<Streaming> {
    let p = prepare(cx, replica, user, ask).await?;
    let mut pieces = p.start(true).await?;
    let first = pieces.next().await?;
    let (tx, events) = mpsc::channel(32);
    let backend = p.route.backend.name().to_string();
    tokio::spawn(drive(cx.store.clone(), p, pieces, first, tx));
    Ok(Streaming { backend, events })
}

/// Forwards the deltas to `tx` until the end, a failure, or until `tx`'s reader is gone; then
/// drops the generation and stores what was said.
async fn drive(store: Store, p: Prepared, mut pieces: Box<dyn Pieces>, first: Option<Piece>, tx: mpsc::Sender<Event>) {
    let mut reply = ChatReply::default();
    let mut next = first;
    let (mut failure, mut cancelled) = (None, false);
    while let Some(piece) = next {
        if let Piece::Text(t) = &piece {
            if tx.send(Event::Delta(t.clone())).await.is_err() {
                cancelled = true;
                break;
            }
        }
        reply.add(piece);
        next = tokio::select! {
            r = pieces.next() => match r {
                Ok(p) => p,
                Err(e) => { failure = Some(e); break; }
            },
            _ = tx.closed() => { cancelled = true; break; }
        };
    }
    drop(pieces); // cancels the upstream request
    if cancelled {
        tracing::info!(replica = %p.replica.id, "client went away mid-stream; the reply is stored as interrupted");
    }
    let interrupted = cancelled || failure.is_some();
    let done = finish(&store, p, reply, interrupted).await;
    if let Some(e) = failure {
        let _ = tx.send(Event::Failed(e)).await;
    }
    let _ = tx.send(done.map_or_else(Event::Failed, |c| Event::Done(Box::new(c)))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(content: &str) -> Retrieved {
        let source = SourceRef::sample("", content);
        Retrieved { source, ranks: Ranks::default(), sentences: Vec::new() }
    }

    #[test]
    fn a_joined_reading_led_in_is_kept_only_when_much_surer_than_a_question_led_in_alone_on_known_terms() {
        use Verdict::{Answered, Refused, Uncertain};
        // "Show me one, please." after "What are list comprehensions?": odds x 7
        assert!(surer_together((Uncertain, 0.368), (Uncertain, 0.077, false)));
        // a new subject pulled back to the old one: odds x 1.3
        assert!(!surer_together((Uncertain, 0.294), (Uncertain, 0.241, false)));
        // led in alone for what it names that the documents lack
        assert!(!surer_together((Uncertain, 0.630), (Uncertain, 0.199, true)));
        // refused alone: only an answer replaces the refusal, never a lead-in
        assert!(!surer_together((Uncertain, 0.367), (Refused, 0.05, false)));
        assert!(surer_together((Answered, 0.523), (Refused, 0.05, false)));
        assert!(surer_together((Answered, 0.45), (Uncertain, 0.30, true)));
        assert!(!surer_together((Answered, 0.45), (Uncertain, 0.50, false)));
        assert!(!surer_together((Refused, 0.04), (Uncertain, 0.01, false)));
    }

    #[test]
    fn the_subject_before_never_turns_an_answer_or_a_lead_in_into_a_refusal() {
        use Verdict::{Answered, Refused, Uncertain};
        assert!(!continuation_kept(Uncertain, Refused));
        assert!(!continuation_kept(Answered, Refused));
        for (alone, continued) in
            [(Refused, Refused), (Refused, Uncertain), (Uncertain, Answered), (Answered, Uncertain)]
        {
            assert!(continuation_kept(alone, continued), "{alone:?} -> {continued:?}");
        }
    }

    #[test]
    fn a_passage_repeating_a_kept_one_in_other_spacing_is_found_and_others_are_kept() {
        let mut seen = Seen::default();
        let mut out = Vec::new();
        for text in ["The kettle boils at noon.", "Another passage entirely."] {
            assert!(seen.insert(text, &out), "{text}");
            out.push(kept(text));
        }
        assert!(!seen.insert("The  kettle\nboils at\tnoon.", &out), "the same words, other spacing");
        // The same solid length, other words: kept.
        assert!(seen.insert("The kettle boils at nooN.", &out));
        out.push(kept("The kettle boils at nooN."));
        // Words joined differently have the same solid length but are not the same passage.
        assert!(seen.insert("Thekettle boils at noon.", &out));
        out.push(kept("Thekettle boils at noon."));
        assert!(!seen.insert("Thekettle boils at noon.", &out));
        assert_eq!(seen.kept.len(), out.len());
    }

    #[test]
    fn the_solid_length_counts_every_byte_above_space_across_runs_of_255() {
        let text = "déjà vu\t\n ".repeat(300) + "end";
        let naive = text.bytes().filter(|&b| b > b' ').count();
        assert_eq!(solid_len(&text), naive);
        assert_eq!(solid_len(&"x".repeat(255 * 4 + 1)), 255 * 4 + 1);
        assert_eq!(solid_len(" \t\n"), 0);
        assert_eq!(solid_len(""), 0);
    }
}
