//! `summary`, `commonQuestions` and `commonTopics` of a conversation, computed by a background
//! job once the conversation has closed (30 minutes without messages).
//!
//! The queue is durable: every history write marks its conversation in `open_conversation`
//! (`service::chats::Recorder::record`), and so does a recomputation asked for by the owner
//! ([`super::conversations::recompute`]); the job ([`spawn`]) takes the rows whose last message
//! is older than [`SILENCE_MS`], computes, stores the result in the conversation and removes the
//! row in one write transaction, so a restart resumes where it stopped.
//!
//! **From the replica's language model** when its `llm.model` is routed to an upstream
//! (`generate::Backends`): the newest messages that fit in
//! [`prompt::TRANSCRIPT_TOKEN_BUDGET`] tokens are sent as a transcript with instructions
//! ([`ask_messages`]) asking for one JSON object `{summary, commonQuestions, commonTopics}`
//! written in the conversation's language; the answer is parsed defensively ([`parse_answer`]:
//! code fences and text around the object are ignored, values are trimmed and bounded, a field
//! missing or of the wrong type is taken from the local computation). When the upstream fails
//! after its own retries (or answers no JSON object), the conversation stays queued and is
//! retried after [`RETRY_FIRST_MS`], doubled per failure up to [`RETRY_MAX_MS`] (on the
//! server's clock; the failure count is kept in memory, so a restart retries at once). After
//! [`MAX_FAILURES`] failures in a row (about 19 hours) the local computation fills it, so no
//! conversation waits forever; the owner can ask for a recomputation later.
//!
//! **Computed locally** when the model is served by the embedded generator:
//! - questions: user messages that ask something (a `?`, or a leading interrogative word),
//!   near-duplicates (same terms, Jaccard ≥ 0.6) merged, at most [`MAX_ITEMS`];
//! - topics: the most distinctive terms of the user's messages by TF-IDF, against the conversations of
//!   the replica analyzed so far (document frequencies kept by this job), shown as the word
//!   the conversation used most for each stem, in the conversation's language;
//! - summary: who asked how much, the topics, and the first question.
//!
//! An owner's correction (`PATCH`) made before the job runs is kept: fields already set are not
//! replaced (a recomputation clears them first).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use uuid::Uuid;

use super::SILENCE_MS;
use crate::error::{Code, Error, Result};
use crate::generate::{prompt, Backends, Turn, EMBEDDED};
use crate::search::analyzers;
use crate::store::kv::{ReadableTable, WriteTransaction};
use crate::store::lease::Lease;
use crate::store::records::{Conversation, Message};
use crate::store::{self, k, now_ms, tables, Store};

/// Most questions and topics kept.
pub const MAX_ITEMS: usize = 5;
/// Conversations analyzed per pass, and the last messages of each that are read.
const PER_PASS: usize = 64;
const MAX_MESSAGES: usize = 500;
/// Wait before retrying a conversation whose upstream failed: 1 minute, doubled per failure.
pub const RETRY_FIRST_MS: i64 = 60_000;
/// Longest wait between two retries: 1 hour.
pub const RETRY_MAX_MS: i64 = 3_600_000;
/// Failures in a row after which the local computation is used (1 + 2 + … + 32 minutes, then
/// hourly: about 19 hours).
pub const MAX_FAILURES: u32 = 24;
/// Reply tokens asked of the upstream.
const ANSWER_MAX_TOKENS: u32 = 1024;

/// A queued conversation: (replica, chat, conversation).
type Key = (u128, u128, u128);

/// The upstream failures of a queued conversation.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    /// Not retried before this time (ms since the epoch, on the server's clock).
    retry_at: i64,
}

/// The job's state: the store, the model routes, and the conversations waiting to be retried.
pub struct Job {
    store: Store,
    backends: Arc<Backends>,
    failing: Mutex<HashMap<Key, Failures>>,
}

/// Runs the job for the life of the process: a pass every second, on the one node that holds
/// the `insights` lease when several share the store (`store::lease`).
pub fn spawn(store: Store, backends: Arc<Backends>) {
    let job = Job { store, backends, failing: Mutex::new(HashMap::new()) };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut lease = None;
        loop {
            tick.tick().await;
            if !Lease::keep(&mut lease, &job.store.leases, "insights").await {
                continue;
            }
            if let Err(e) = job.pass().await {
                tracing::warn!(error = %e, "conversation insights pass failed");
            }
        }
    });
}

impl Job {
    /// One pass: analyzes up to [`PER_PASS`] closed conversations that are not waiting for a
    /// retry; returns how many were tried.
    pub async fn pass(&self) -> Result<usize> {
        let now = now_ms();
        let closed_before = now - SILENCE_MS;
        let (failed, waiting): (Vec<Key>, HashSet<Key>) = {
            let failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
            let waiting = failing.iter().filter(|(_, f)| f.retry_at > now).map(|(key, _)| *key).collect();
            (failing.keys().copied().collect(), waiting)
        };
        let (due, gone): (Vec<Key>, Vec<Key>) = self
            .store
            .read_scan(move |txn| {
                let (mut out, mut gone) = (Vec::new(), Vec::new());
                let queue = txn.open_table(tables::OPEN_CONVERSATION)?;
                // Failures of conversations no longer queued (their replica was deleted) are forgotten.
                for key in &failed {
                    if queue.get(*key)?.is_none() {
                        gone.push(*key);
                    }
                }
                for row in queue.iter()? {
                    let (key, last) = row?;
                    if last.value() < closed_before && !waiting.contains(&key.value()) {
                        out.push(key.value());
                        if out.len() >= PER_PASS {
                            break;
                        }
                    }
                }
                Ok((out, gone))
            })
            .await?;
        if !gone.is_empty() {
            let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
            gone.iter().for_each(|key| _ = failing.remove(key));
        }
        for key in &due {
            self.analyze_or_retry(*key).await?;
        }
        Ok(due.len())
    }

    /// Analyzes `key`; an upstream failure schedules a retry (see the module docs).
    async fn analyze_or_retry(&self, key: Key) -> Result<()> {
        let failures = self.failing.lock().unwrap_or_else(|e| e.into_inner()).get(&key).map_or(0, |f| f.count);
        match analyze(&self.store, &self.backends, key, failures >= MAX_FAILURES).await {
            Err(e) if e.code == Code::UpstreamError => {
                let count = failures + 1;
                let wait = RETRY_FIRST_MS.saturating_mul(1 << (count - 1).min(20)).min(RETRY_MAX_MS);
                tracing::warn!(conversation = %Uuid::from_u128(key.2), failures = count, retry_in_ms = wait,
                    "conversation insights: the model's upstream failed; kept queued");
                let retry_at = now_ms() + wait;
                self.failing.lock().unwrap_or_else(|e| e.into_inner()).insert(key, Failures { count, retry_at });
                Ok(())
            }
            done => {
                self.failing.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
                done
            }
        }
    }
}

/// What one conversation says, before the replica's document frequencies weigh its terms.
#[derive(Debug, Clone, Default)]
struct Draft {
    questions: Vec<String>,
    /// stem → (messages holding it, the word used most for it)
    terms: BTreeMap<String, (u64, String)>,
    user_messages: usize,
    replies: usize,
}

/// What the replica's model said about a conversation; `None` fields are computed locally.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asked {
    pub summary: Option<String>,
    pub common_questions: Option<Vec<String>>,
    pub common_topics: Option<Vec<String>>,
}

/// Computes and stores the insights of conversation `key`: from the replica's model when it is
/// routed to an upstream (unless `local_only`), locally otherwise. 502 `UPSTREAM_ERROR` when the
/// upstream fails or answers no JSON object (nothing is stored then).
async fn analyze(store: &Store, backends: &Backends, key: Key, local_only: bool) -> Result<()> {
    let (replica, conv) = (Uuid::from_u128(key.0), key.2);
    let (messages, model): (Vec<Message>, Option<(String, String)>) = store
        .read_scan(move |txn| {
            let index = txn.open_table(tables::CONVMSG_USER)?;
            let ids: Vec<(u64, u128)> = index
                .range((key.0, conv, 0)..=(key.0, conv, u64::MAX))?
                .rev()
                .take(MAX_MESSAGES)
                .map(|r| r.map(|(k, v)| (k.value().2, v.value())))
                .collect::<Result<_, _>>()?;
            let messages = crate::service::messages::open(txn)?;
            let mut out = Vec::new();
            for (id, user) in ids.into_iter().rev() {
                out.extend(messages.get((key.0, user, id))?);
            }
            let r = crate::store::replica_index::get_in(txn, Uuid::from_u128(key.0))?;
            Ok((out, r.map(|r| (r.llm.model, r.name))))
        })
        .await?;
    let asked = match model {
        Some((model, name)) if !local_only && !messages.is_empty() => {
            let route = backends.route(&model);
            if route.backend.name() == EMBEDDED {
                None
            } else {
                let sent = ask_messages(&name, &messages);
                let answer = route.backend.complete_messages(&sent, &route.upstream_model, Some(ANSWER_MAX_TOKENS));
                let text = answer.await?.unwrap_or_default();
                Some(parse_answer(&text).ok_or_else(|| {
                    crate::upstream::upstream_error(
                        route.backend.name(),
                        "answered the insights request without a JSON object",
                        "no JSON object",
                    )
                })?)
            }
        }
        _ => None,
    };
    let draft = tokio::task::spawn_blocking(move || draft(&messages)).await.map_err(Error::internal)?;
    let asked = asked.unwrap_or_default();
    store.write(move |txn| finish_in(txn, replica, key, &draft, &asked)).await
}

/// The English name of the language `text` is written in, when detection is reliable (as
/// `text::language::detect` judges it).
fn language_name(text: &str) -> Option<&'static str> {
    crate::text::language::detect(text)?;
    Some(whatlang::detect(text)?.lang().eng_name())
}

/// The Chat Completions messages asking the replica's model for the insights of a conversation
/// with `messages` (oldest first): instructions in a `system` message, then the transcript
/// (`User:` / `<replica name>:` lines, the newest that fit in
/// [`prompt::TRANSCRIPT_TOKEN_BUDGET`]) as one `user` message.
pub fn ask_messages(replica_name: &str, messages: &[Message]) -> Vec<Value> {
    let turns = messages.iter().rev().map(|m| {
        let who = if m.role == "assistant" { replica_name } else { "User" };
        Turn { role: m.role.clone(), content: format!("{who}: {}", m.content.trim()) }
    });
    let mut kept = prompt::window(turns.clone(), prompt::TRANSCRIPT_TOKEN_BUDGET);
    if kept.is_empty() {
        // The newest message alone is over the budget: its beginning, cut to the budget.
        let bytes = prompt::TRANSCRIPT_TOKEN_BUDGET * 4;
        let cut = |t: &str| t.char_indices().map(|(i, c)| i + c.len_utf8()).take_while(|end| *end <= bytes).last();
        kept.extend(
            turns.take(1).map(|t| Turn { content: t.content[..cut(&t.content).unwrap_or(0)].to_string(), ..t }),
        );
    }
    let transcript: String = kept.iter().map(|t| t.content.as_str()).collect::<Vec<_>>().join("\n\n");
    let language = language_name(&transcript).map_or_else(
        || "the language the user writes in".to_string(),
        |l| format!("{l}, the language of the conversation"),
    );
    let system = format!(
        "You read a conversation between a user and {replica_name}, an assistant, and describe it for \
         {replica_name}'s owner. Answer with one JSON object and nothing else, of this shape:\n\
         {{\"summary\": \"...\", \"commonQuestions\": [\"...\"], \"commonTopics\": [\"...\"]}}\n\
         - summary: two or three sentences on what the user wanted and what they were told.\n\
         - commonQuestions: the questions the user asked, in the user's words, near-duplicates merged, at \
         most {MAX_ITEMS}; an empty list when the user asked nothing.\n\
         - commonTopics: what the conversation was about, at most {MAX_ITEMS} short topics of one to three \
         words, most important first.\n\
         Write every value in {language}."
    );
    vec![
        json!({"role": "system", "content": system}),
        json!({"role": "user", "content": format!("The conversation:\n\n{transcript}")}),
    ]
}

/// Text bounded to `max` characters, trimmed; `None` when empty.
fn bounded(s: &str, max: usize) -> Option<String> {
    let s: String = s.trim().chars().take(max).collect();
    (!s.is_empty()).then(|| s.trim_end().to_string())
}

/// A list of strings (or one string), trimmed, bounded, empty items dropped, at most
/// [`MAX_ITEMS`].
fn strings(v: &Value) -> Option<Vec<String>> {
    let items = match v {
        Value::Array(items) => items.iter().map(|i| i.as_str()).collect::<Option<Vec<_>>>()?,
        Value::String(s) => vec![s.as_str()],
        _ => return None,
    };
    Some(items.into_iter().filter_map(|s| bounded(s, 300)).take(MAX_ITEMS).collect())
}

/// The insights in a model's answer `text`: the outermost `{…}` of the text (code fences and
/// prose around it ignored) parsed as JSON; `summary` (≤ 2000 characters), `commonQuestions` and
/// `commonTopics` (≤ [`MAX_ITEMS`] strings of ≤ 300 characters) taken when of the right type.
/// `None` when the text holds no JSON object or none of the three fields.
pub fn parse_answer(text: &str) -> Option<Asked> {
    let (start, end) = (text.find('{')?, text.rfind('}')?);
    let v: Value = serde_json::from_str(text.get(start..=end)?).ok()?;
    let field = |names: &[&str]| names.iter().find_map(|n| v.get(*n)).cloned().unwrap_or(Value::Null);
    let asked = Asked {
        summary: field(&["summary"]).as_str().and_then(|s| bounded(s, 2000)),
        common_questions: strings(&field(&["commonQuestions", "common_questions", "questions"])),
        common_topics: strings(&field(&["commonTopics", "common_topics", "topics"])),
    };
    (asked != Asked::default()).then_some(asked)
}

const INTERROGATIVES: &[&str] = &[
    "what", "how", "why", "when", "where", "who", "which", "can", "could", "do", "does", "did", "is", "are", "should",
    "would", "will", "was", "were",
];

fn is_question(text: &str) -> bool {
    let first = text.split_whitespace().next().unwrap_or("").to_lowercase();
    text.contains('?')
        || text.contains('？')
        || INTERROGATIVES.contains(&first.trim_matches(|c: char| !c.is_alphanumeric()))
}

fn jaccard(a: &[String], b: &[String]) -> f64 {
    let common = a.iter().filter(|t| b.contains(t)).count() as f64;
    let all = (a.len() + b.len()) as f64 - common;
    if all == 0.0 {
        1.0
    } else {
        common / all
    }
}

fn draft(messages: &[Message]) -> Draft {
    let text: String = messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
    let analyzer = analyzers::for_language(crate::text::language::detect(&text).or(Some("en")));
    let mut d = Draft::default();
    let mut asked: Vec<Vec<String>> = Vec::new();
    let mut words: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for m in messages {
        if m.role == "assistant" {
            d.replies += 1;
            continue;
        }
        let terms = analyzer.terms(&m.content);
        d.user_messages += 1;
        if is_question(&m.content) && !asked.iter().any(|q| jaccard(q, &terms) >= 0.6) {
            asked.push(terms.clone());
            d.questions.push(m.content.trim().chars().take(300).collect());
        }
        for word in m.content.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() > 2) {
            if let Some(stem) = analyzer.terms(word).into_iter().next() {
                *words.entry(stem).or_default().entry(word.to_lowercase()).or_default() += 1;
            }
        }
        for t in terms.into_iter().filter(|t| t.chars().count() > 2 && !t.chars().all(|c| c.is_ascii_digit())) {
            d.terms.entry(t).or_insert((0, String::new())).0 += 1;
        }
    }
    for (stem, (_, shown)) in d.terms.iter_mut() {
        let best =
            words.get(stem).and_then(|w| w.iter().max_by_key(|(word, n)| (**n, std::cmp::Reverse((*word).clone()))));
        *shown = best.map_or_else(|| stem.clone(), |(w, _)| w.clone());
    }
    d.questions.truncate(MAX_ITEMS);
    d
}

/// Weighs the draft's terms against the replica's document frequencies (then counts this
/// conversation in them), stores what the owner did not set (the model's answer where it gave
/// a field, the local computation otherwise), and takes the conversation off the queue.
fn finish_in(txn: &WriteTransaction, replica: Uuid, key: Key, d: &Draft, asked: &Asked) -> Result<()> {
    let mut df = txn.open_table(tables::REPLICATERM_CONVERSATIONS)?;
    let analyzed = df.get((k(replica), ""))?.map(|v| v.value()).unwrap_or(0);
    let mut scored: Vec<(f64, &str)> = Vec::new();
    for (stem, (tf, shown)) in &d.terms {
        let n = df.get((k(replica), stem.as_str()))?.map(|v| v.value()).unwrap_or(0);
        let idf = ((analyzed as f64 + 1.0) / (n as f64 + 1.0)).ln() + 1.0;
        scored.push((*tf as f64 * idf, shown.as_str()));
        df.insert((k(replica), stem.as_str()), n + 1)?;
    }
    df.insert((k(replica), ""), analyzed + 1)?;
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let mut topics: Vec<String> = Vec::new();
    for (_, word) in scored {
        if topics.len() < MAX_ITEMS && !topics.iter().any(|t| t == word) {
            topics.push(word.to_string());
        }
    }
    let mut convs = txn.open_table(tables::CONVERSATIONS)?;
    if let Some(mut c) = store::get::<(u128, u128, u128), Conversation, _>(&convs, key)? {
        if c.summary.is_none() {
            c.summary = Some(asked.summary.clone().unwrap_or_else(|| summary(d, &topics)));
        }
        if c.common_questions.is_empty() {
            c.common_questions = asked.common_questions.clone().unwrap_or_else(|| d.questions.clone());
        }
        if c.common_topics.is_empty() {
            c.common_topics = asked.common_topics.clone().unwrap_or(topics);
        }
        store::put(&mut convs, key, &c)?;
    }
    txn.open_table(tables::OPEN_CONVERSATION)?.remove(key)?;
    Ok(())
}

fn summary(d: &Draft, topics: &[String]) -> String {
    let mut s = format!("{} message(s) from the user, {} repl(ies).", d.user_messages, d.replies);
    if !topics.is_empty() {
        s.push_str(&format!(" Topics: {}.", topics.join(", ")));
    }
    if let Some(q) = d.questions.first() {
        s.push_str(&format!(" First question: {q}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> Message {
        Message {
            id: 1,
            replica: Uuid::nil(),
            user: Uuid::nil(),
            role: role.into(),
            content: content.into(),
            source: "web".into(),
            sources: vec![],
            is_private: false,
            channel_data: None,
            created_at: 0,
            interrupted: false,
            passages: Vec::new(),
        }
    }

    #[test]
    fn the_answer_is_parsed_defensively() {
        let a = parse_answer("Sure!\n```json\n{\"summary\": \" Asked about pumps. \", \"topics\": \"pumps\", \"commonQuestions\": [\"Where?\", \" \", 3]}\n```").unwrap();
        assert_eq!(a.summary.as_deref(), Some("Asked about pumps."));
        assert_eq!(a.common_topics, Some(vec!["pumps".to_string()]), "a string for a list, another field name");
        assert_eq!(a.common_questions, None, "a list with a non-string is not taken");
        let many = format!("{{\"commonTopics\": {}}}", serde_json::to_string(&vec!["t"; 9]).unwrap());
        assert_eq!(parse_answer(&many).unwrap().common_topics.unwrap().len(), MAX_ITEMS);
        for bad in ["no json here", "{not json}", "{\"summary\": 3}", "{\"other\": \"x\"}"] {
            assert_eq!(parse_answer(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_request_names_the_language_and_keeps_the_newest_messages_in_the_budget() {
        let mut old = msg("user", &"alt ".repeat(4 * prompt::TRANSCRIPT_TOKEN_BUDGET));
        old.content.insert_str(0, "OLDEST ");
        let sent = ask_messages(
            "Kai",
            &[
                old,
                msg("user", "Wie heiß wird der Reaktor im Winter, wenn die Stadt über dem Meer schwebt?"),
                msg("assistant", "Der Reaktor läuft immer bei 451 Kelvin, auch im Winter, und hält die Stadt warm."),
            ],
        );
        let system = sent[0]["content"].as_str().unwrap();
        assert!(system.contains("Write every value in German"), "{system}");
        let transcript = sent[1]["content"].as_str().unwrap();
        assert!(transcript.contains("User: Wie heiß") && transcript.contains("Kai: Der Reaktor"), "{transcript}");
        assert!(!transcript.contains("OLDEST"), "what does not fit the budget is left out");
    }

    #[test]
    fn questions_are_found_and_near_duplicates_merged() {
        let d = draft(&[
            msg("user", "How hot does the reactor get?"),
            msg("assistant", "The reactor runs at 451 kelvin."),
            msg("user", "how hot does the reactor get"),
            msg("user", "Thanks, that helps."),
            msg("user", "Where is the cooling pump?"),
        ]);
        assert_eq!(d.questions, vec!["How hot does the reactor get?", "Where is the cooling pump?"]);
        assert_eq!((d.user_messages, d.replies), (4, 1));
        assert_eq!(d.terms.get("reactor").map(|t| t.0), Some(2), "terms of the user's messages");
    }
}
