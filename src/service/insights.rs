//! `summary`, `commonQuestions` and `commonTopics` of a conversation, computed by a background
//! job once the conversation has closed (30 minutes without messages).
//!
//! The queue is durable: every history write marks its conversation in `open_conversation`
//! (`service::chats::record_in`); the job ([`spawn`]) takes the rows whose last message is older
//! than [`SILENCE_MS`], computes, stores the result in the conversation and removes the row in
//! one write transaction, so a restart resumes where it stopped. Computed locally:
//! - questions: user messages that ask something (a `?`, or a leading interrogative word),
//!   near-duplicates (same terms, Jaccard ≥ 0.6) merged, at most [`MAX_ITEMS`];
//! - topics: the most distinctive terms of the user's messages by TF-IDF, against the conversations of
//!   the replica analyzed so far (document frequencies kept by this job), shown as the word
//!   the conversation used most for each stem, in the conversation's language;
//! - summary: who asked how much, the topics, and the first question.
//!
//! An owner's correction (`PATCH`) made before the job runs is kept: fields already set are not
//! replaced.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::chats::SILENCE_MS;
use crate::error::Result;
use crate::search::analyzers;
use crate::store::records::{Conversation, Message};
use crate::store::{self, k, now_ms, tables, Store};

/// Most questions and topics kept.
pub const MAX_ITEMS: usize = 5;
/// Conversations analyzed per pass, and the last messages of each that are read.
const PER_PASS: usize = 64;
const MAX_MESSAGES: usize = 500;

/// Runs the job for the life of the process: a pass every second.
pub fn spawn(store: Store) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            if let Err(e) = pass(&store).await {
                tracing::warn!(error = %e, "conversation insights pass failed");
            }
        }
    });
}

/// One pass: analyzes up to [`PER_PASS`] closed conversations; returns how many.
pub async fn pass(store: &Store) -> Result<usize> {
    let closed_before = now_ms() - SILENCE_MS;
    let due: Vec<(u128, u128, u128)> = store
        .read_scan(move |txn| {
            let mut out = Vec::new();
            for row in txn.open_table(tables::OPEN_CONVERSATION)?.iter()? {
                let (key, last) = row?;
                if last.value() < closed_before {
                    out.push(key.value());
                    if out.len() >= PER_PASS {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await?;
    for key in &due {
        analyze(store, *key).await?;
    }
    Ok(due.len())
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

async fn analyze(store: &Store, key: (u128, u128, u128)) -> Result<()> {
    let (replica, conv) = (Uuid::from_u128(key.0), key.2);
    let messages: Vec<Message> = store
        .read_scan(move |txn| {
            let index = txn.open_table(tables::CONVMSG_USER)?;
            let ids: Vec<(u64, u128)> = index
                .range((key.0, conv, 0)..=(key.0, conv, u64::MAX))?
                .rev()
                .take(MAX_MESSAGES)
                .map(|r| r.map(|(k, v)| (k.value().2, v.value())))
                .collect::<Result<_, _>>()?;
            let table = txn.open_table(tables::REPLICAUSERMSG_MESSAGE)?;
            let mut out = Vec::new();
            for (id, user) in ids.into_iter().rev() {
                out.extend(store::get::<(u128, u128, u64), Message, _>(&table, (key.0, user, id))?);
            }
            Ok(out)
        })
        .await?;
    let draft = tokio::task::spawn_blocking(move || draft(&messages)).await.map_err(crate::error::Error::internal)?;
    store.write(move |txn| finish_in(txn, replica, key, &draft)).await
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
/// conversation in them), stores what the owner did not set, and takes the conversation off
/// the queue.
fn finish_in(txn: &WriteTransaction, replica: Uuid, key: (u128, u128, u128), d: &Draft) -> Result<()> {
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
            c.summary = Some(summary(d, &topics));
        }
        if c.common_questions.is_empty() {
            c.common_questions = d.questions.clone();
        }
        if c.common_topics.is_empty() {
            c.common_topics = topics;
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
        }
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
