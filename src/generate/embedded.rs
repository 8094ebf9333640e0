//! The embedded, offline generator: extractive answers from the retrieved chunks.
//!
//! Small talk (greetings, thanks, farewells, or a message with no content words) gets the
//! replica's greeting or a short courtesy. Otherwise every sentence of the retrieved chunks is
//! scored by the query terms it contains (same analyzer as the index: stop words removed,
//! stemmed), each term weighted by its rarity among the candidate sentences; the best sentences
//! (at most [`MAX_SENTENCES`], in document order) form the answer, followed by the name of the
//! source. When no sentence covers enough of the question, the answer says so honestly.

use std::collections::VecDeque;

use unicode_segmentation::UnicodeSegmentation;

use super::{prompt, Backend, BoxFuture, Generation, Piece, Pieces, Usage};
use crate::error::Result;
use crate::search::analyze_as;
use crate::store::records::SourceRef;
use crate::text::language;

/// Words per streamed delta of an embedded answer.
pub const WORDS_PER_DELTA: usize = 3;

/// The embedded backend: [`reply`] as a [`Backend`]. Its answer comes as deltas of
/// [`WORDS_PER_DELTA`] words, then the cited sources and an estimated usage.
pub struct Embedded;

impl Backend for Embedded {
    fn name(&self) -> &str {
        super::EMBEDDED
    }

    fn start<'a>(
        &'a self,
        g: &'a Generation,
        _model: &'a str,
        _vision: bool,
        _stream: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Pieces>>> {
        Box::pin(async move {
            let persona = Persona { name: &g.persona.name, greeting: &g.persona.greeting };
            let answer = reply(&persona, &g.question, &g.sources);
            let sent: usize = g.sources.iter().map(|s| prompt::estimate_tokens(&s.content)).sum();
            let usage = Usage {
                prompt_tokens: (prompt::estimate_tokens(&g.question) + sent) as u64,
                completion_tokens: prompt::estimate_tokens(&answer.text) as u64,
            };
            let mut queue: VecDeque<Piece> = deltas(&answer.text).into_iter().map(Piece::Text).collect();
            queue.push_back(Piece::Cited(answer.used));
            queue.push_back(Piece::Usage(usage));
            Ok(Box::new(Queued(queue)) as Box<dyn Pieces>)
        })
    }
}

/// `text` cut after every [`WORDS_PER_DELTA`]-th word (the pieces join back to `text`).
pub fn deltas(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
    words.chunks(WORDS_PER_DELTA).map(|c| c.concat()).collect()
}

/// Pieces already known.
struct Queued(VecDeque<Piece>);

impl Pieces for Queued {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Piece>>> {
        let next = self.0.pop_front();
        Box::pin(async move { Ok(next) })
    }
}

/// Most sentences quoted in one answer.
pub const MAX_SENTENCES: usize = 3;

/// The replica facts the generator uses.
pub struct Persona<'a> {
    pub name: &'a str,
    pub greeting: &'a str,
}

/// An answer and the indexes (into the given sources) of the sources it quoted.
pub struct Answer {
    pub text: String,
    pub used: Vec<usize>,
}

const GREETINGS: &[&str] =
    &["hi", "hello", "hey", "hiya", "howdy", "greetings", "good morning", "good afternoon", "good evening", "yo"];
const THANKS: &[&str] = &["thanks", "thank you", "thx", "cheers", "much appreciated"];
const FAREWELLS: &[&str] = &["bye", "goodbye", "see you", "good night", "farewell"];

/// The reply to `message` given the retrieved `sources` (best first).
pub fn reply(persona: &Persona, message: &str, sources: &[SourceRef]) -> Answer {
    if let Some(text) = small_talk(persona, message) {
        return Answer { text, used: Vec::new() };
    }
    extract(message, sources).unwrap_or_else(|| Answer {
        text: format!(
            "I don't know that yet: nothing in {}'s knowledge base answers it. \
             Try rephrasing, or ask about something the knowledge base covers.",
            persona.name
        ),
        used: Vec::new(),
    })
}

fn normalized(message: &str) -> String {
    let s: String =
        message.to_lowercase().chars().map(|c| if c.is_alphanumeric() || c == '\'' { c } else { ' ' }).collect();
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn starts_with_any(s: &str, words: &[&str]) -> bool {
    words.iter().any(|w| s == *w || s.starts_with(&format!("{w} ")))
}

fn small_talk(persona: &Persona, message: &str) -> Option<String> {
    let n = normalized(message);
    let short = n.split(' ').count() <= 4;
    if short && starts_with_any(&n, THANKS) {
        return Some("You're welcome! Ask me anything else.".into());
    }
    if short && starts_with_any(&n, FAREWELLS) {
        return Some("Goodbye! Come back any time.".into());
    }
    let greeting = short && starts_with_any(&n, GREETINGS);
    if greeting || analyze_as(None, message).is_empty() {
        let g = persona.greeting.trim();
        return Some(if g.is_empty() {
            format!("Hello! I'm {}. What would you like to know?", persona.name)
        } else {
            g.to_string()
        });
    }
    None
}

/// A candidate sentence: where it is, its text and its terms.
struct Sentence {
    source: usize,
    position: usize,
    text: String,
    terms: Vec<String>,
    /// Terms of the chunk title that the sentence itself lacks (they count half).
    heading: Vec<String>,
}

fn is_prose(s: &str) -> bool {
    let letters = s.chars().filter(|c| c.is_alphabetic()).count();
    !s.contains(">>>") && !s.contains("...") && letters * 2 > s.chars().count() && letters >= 12
}

/// Whether a paragraph is a code block: every line indented, or an interactive session.
fn is_code(paragraph: &str) -> bool {
    let mut lines = paragraph.lines().filter(|l| !l.trim().is_empty()).peekable();
    lines.peek().is_some() && (paragraph.contains(">>>") || lines.all(|l| l.starts_with([' ', '\t'])))
}

/// The prose sentences of the sources. Paragraphs are re-flowed first (a line break inside a
/// paragraph is a space), since Unicode sentence rules end a sentence at every line break.
/// A sentence's terms include those of its chunk's title (its heading path).
fn sentences(sources: &[SourceRef], lang: Option<&str>) -> Vec<Sentence> {
    let mut out = Vec::new();
    for (si, src) in sources.iter().enumerate() {
        let title_terms = analyze_as(lang, &src.name);
        let paragraphs = src
            .content
            .split("\n\n")
            .filter(|p| !is_code(p))
            .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "));
        let sentences: Vec<String> =
            paragraphs.flat_map(|p| p.unicode_sentences().map(|s| s.trim().to_string()).collect::<Vec<_>>()).collect();
        for (pi, text) in sentences.into_iter().enumerate() {
            if is_prose(&text) {
                let terms = analyze_as(lang, &text);
                let heading: Vec<String> = title_terms.iter().filter(|t| !terms.contains(t)).cloned().collect();
                out.push(Sentence { source: si, position: pi, text, terms, heading });
            }
        }
    }
    out
}

/// Characters of the best source that language detection looks at (enough for a reliable
/// answer; detection cost grows with the text).
const LANGUAGE_SAMPLE: usize = 400;

/// The first `chars` characters of `text`.
fn prefix(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or(text, |(i, _)| &text[..i])
}

fn extract(message: &str, sources: &[SourceRef]) -> Option<Answer> {
    // One language for the question and every sentence, detected on the best source (longer and
    // more reliable than a question), so that both sides are analyzed alike.
    let lang = sources.first().and_then(|s| language::detect(prefix(&s.content, LANGUAGE_SAMPLE)));
    let query = analyze_as(lang, message);
    let cands = sentences(sources, lang);
    if query.is_empty() || cands.is_empty() {
        return None;
    }
    let n = cands.len() as f32;
    let weight = |t: &String| {
        let df = cands.iter().filter(|s| s.terms.contains(t)).count() as f32;
        1.0 + ((n + 1.0) / (df + 1.0)).ln()
    };
    let weights: Vec<(String, f32)> = query.iter().map(|t| (t.clone(), weight(t))).collect();
    let total: f32 = weights.iter().map(|(_, w)| w).sum();
    // (score with a bonus for better-ranked sources, share of the question covered, sentence)
    let mut scored: Vec<(f32, f32, &Sentence)> = cands
        .iter()
        .map(|s| {
            let body: f32 = weights.iter().filter(|(t, _)| s.terms.contains(t)).map(|(_, w)| w).sum();
            let heading: f32 = weights.iter().filter(|(t, _)| s.heading.contains(t)).map(|(_, w)| w).sum();
            let rank_bonus = 1.0 / (1.0 + 0.15 * s.source as f32);
            ((body + 0.5 * heading) * rank_bonus, (body + heading) / total.max(f32::EPSILON), s)
        })
        .filter(|(score, _, _)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.terms.len().cmp(&b.2.terms.len())));
    let &(best, coverage, first) = scored.first()?;
    if first.terms.iter().all(|t| !query.contains(t)) {
        return None; // only headings match: no sentence says anything about the question
    }
    let needed = if query.len() >= 2 { 0.5 } else { 0.99 };
    if coverage < needed {
        return None;
    }
    let mut chosen: Vec<&Sentence> =
        scored.iter().take_while(|(s, _, _)| *s >= best * 0.6).take(MAX_SENTENCES).map(|(_, _, s)| *s).collect();
    chosen.sort_by_key(|s| (s.source, s.position));
    let mut used: Vec<usize> = chosen.iter().map(|s| s.source).collect();
    used.dedup();
    let body = chosen.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ");
    let mut names: Vec<&str> = Vec::new();
    for i in &used {
        if !names.contains(&sources[*i].name.as_str()) {
            names.push(&sources[*i].name);
        }
    }
    Some(Answer { text: format!("{body}\n\n(From: {})", names.join("; ")), used })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(name: &str, content: &str) -> SourceRef {
        SourceRef { id: 1, score: 1.0, created_at: 0, name: name.into(), content: content.into() }
    }

    const P: Persona = Persona { name: "Tutor", greeting: "Hi! Ask me about Python." };

    #[test]
    fn greets_thanks_and_admits_ignorance() {
        assert_eq!(reply(&P, "Hello!", &[]).text, "Hi! Ask me about Python.");
        assert!(reply(&P, "thanks a lot", &[]).text.starts_with("You're welcome"));
        assert!(reply(&P, "What is the capital of Peru?", &[]).text.starts_with("I don't know that yet"));
    }

    #[test]
    fn quotes_the_sentence_that_answers() {
        let s = [src(
            "Modules",
            "If you quit from the interpreter, definitions are lost. A module is a file containing \
             Python definitions and statements. The file name is the module name.",
        )];
        let a = reply(&P, "What is a module?", &s);
        assert!(a.text.contains("A module is a file containing Python definitions"), "{}", a.text);
        assert!(a.text.ends_with("(From: Modules)"));
        assert_eq!(a.used, vec![0]);
    }

    #[test]
    fn deltas_join_back_to_the_text() {
        let text = "A module is a file\n\n(From: Modules)";
        let d = deltas(text);
        assert!(d.len() > 1);
        assert_eq!(d.concat(), text);
    }

    #[test]
    fn unrelated_sources_give_no_answer() {
        let s = [src("Floats", "Floating-point numbers are represented in hardware as binary fractions.")];
        assert!(reply(&P, "How do I open a socket connection?", &s).text.starts_with("I don't know"));
    }
}
