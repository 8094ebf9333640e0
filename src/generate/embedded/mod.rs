//! The embedded, offline generator: extractive answers from the retrieved chunks.
//!
//! Small talk (greetings, thanks, farewells, or a message with no content words) gets the
//! replica's greeting or a short courtesy. Otherwise the [`reader`] quotes one contiguous
//! passage of the retrieved chunks ([`passage`]) — the one the question's closeness by meaning,
//! its terms and the retrieval rank point to — and names its source; a question the sources do
//! not cover gets "I don't know" and no source, one they cover uncertainly the closest passage
//! after a short lead-in.

pub mod cache;
pub mod decision;
pub mod passage;
pub mod reader;
mod terms;

pub use decision::{Fit, Signals};
pub use reader::{Candidate, Confidence, Explanation, Verdict, Weights};

use std::collections::VecDeque;

use super::{prompt, Backend, BoxFuture, Evidence, Generation, Persona, Piece, Pieces, Usage};
use crate::error::Result;
use crate::search::analyze_as;
use crate::store::records::SourceRef;

/// Words per streamed delta of an embedded answer.
pub const WORDS_PER_DELTA: usize = 3;

/// The embedded backend: [`reply`] as a [`Backend`]. Its answer comes as deltas of
/// [`WORDS_PER_DELTA`] words when streamed (else as one piece), then the cited sources and an
/// estimated usage.
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
        stream: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Pieces>>> {
        Box::pin(async move {
            let reading = match &g.reading {
                Some(r) => r.clone(),
                None => read_question(&g.question, &g.sources, &g.evidence(), &Weights::FITTED),
            };
            let (answer, explanation) = reply_from(&g.persona, &g.question, &g.sources, reading);
            let sent: usize = g.sources.iter().map(|s| prompt::estimate_tokens(&s.content)).sum();
            let usage = Usage {
                prompt_tokens: (prompt::estimate_tokens(&g.question) + sent) as u64,
                completion_tokens: prompt::estimate_tokens(&answer.text) as u64,
            };
            // a reply that is not streamed is read whole: one piece (no cutting and joining again)
            let texts = if stream { deltas(&answer.text) } else { vec![answer.text] };
            let mut queue: VecDeque<Piece> = texts.into_iter().map(Piece::Text).collect();
            queue.push_back(Piece::Cited(answer.used));
            queue.push_back(Piece::Explained(Box::new(explanation)));
            queue.push_back(Piece::Usage(usage));
            Ok(Box::new(Queued(queue)) as Box<dyn Pieces>)
        })
    }
}

/// `text` cut after every [`WORDS_PER_DELTA`]-th word, a fenced code block being one delta
/// of its own (the pieces join back to `text`).
pub fn deltas(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (prose, fenced) = match rest.find("```") {
            Some(start) => {
                let end = rest[start + 3..].find("```").map_or(rest.len(), |e| start + 3 + e + 3);
                (&rest[..start], &rest[start..end])
            }
            None => (rest, ""),
        };
        let words: Vec<&str> = prose.split_inclusive(char::is_whitespace).collect();
        out.extend(words.chunks(WORDS_PER_DELTA).map(|c| c.concat()));
        if !fenced.is_empty() {
            out.push(fenced.to_string());
        }
        rest = &rest[prose.len() + fenced.len()..];
    }
    out
}

/// Pieces already known.
struct Queued(VecDeque<Piece>);

impl Pieces for Queued {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Piece>>> {
        let next = self.0.pop_front();
        Box::pin(async move { Ok(next) })
    }
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

/// The reply to `message` given the retrieved `sources` (best first) alone, as without an
/// embedding model ([`reply_with`]).
pub fn reply(persona: &Persona, message: &str, sources: &[SourceRef]) -> Answer {
    reply_with(persona, message, sources, &Evidence::default(), &Weights::FITTED).0
}

/// The reply to `message` given the retrieved `sources` (best first) and how close the
/// question is to each by meaning and which of its terms the knowledge base never uses
/// (`evidence`), read with weights `w`; of the persona, the `name` (in "I don't know") and the `greeting`
/// (answering a greeting) are used. With it, why the reader answered so (empty for small
/// talk).
pub fn reply_with(
    persona: &Persona,
    message: &str,
    sources: &[SourceRef],
    evidence: &Evidence,
    w: &Weights,
) -> (Answer, Explanation) {
    reply_from(persona, message, sources, read_question(message, sources, evidence, w))
}

/// What the reader made of a message from its sources, before any word of the reply is
/// written: the quote ([`reader::read`]; `None` when the knowledge base does not cover the
/// question) and why, or that the message is small talk (answered without reading). It does
/// not depend on the persona, so one reading serves both the decision to read a question in
/// its conversation (`service::chat::retrieve_in_conversation`) and the reply
/// ([`reply_from`]).
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// The quote, without lead-in or source line.
    pub quote: Option<reader::Quote>,
    /// Why the reader answered so (empty for small talk).
    pub explanation: Explanation,
    /// The message is small talk, answered with a courtesy and not read.
    pub small_talk: Option<Talk>,
}

/// The reader's [`Reading`] of `message` from `sources` (best first) with `evidence`, read
/// with weights `w` (what [`reply_with`] answers from).
pub fn read_question(message: &str, sources: &[SourceRef], evidence: &Evidence, w: &Weights) -> Reading {
    if let Some(talk) = small_talk(message) {
        return Reading { small_talk: Some(talk), ..Reading::default() };
    }
    // One language for the question and every passage, detected on the best source (longer
    // and more reliable than a question), so that both sides are analyzed alike.
    let lang = sources.first().and_then(cache::language);
    let (quote, explanation) = reader::read(message, sources, evidence, lang, w);
    Reading { quote, explanation, small_talk: None }
}

/// The reply of `persona` to `message` from `reading`, the [`Reading`] of `message` from
/// `sources` ([`read_question`]), and why the reader answered so.
pub fn reply_from(persona: &Persona, message: &str, sources: &[SourceRef], reading: Reading) -> (Answer, Explanation) {
    let Reading { quote, explanation, small_talk: talk } = reading;
    if let Some(talk) = talk {
        return (Answer { text: courtesy(persona, talk), used: Vec::new() }, explanation);
    }
    let answer = match quote {
        Some(q) => {
            let lead = if q.uncertain { lead_in(message) } else { "" };
            let quoted = &sources[q.used[0]];
            let page = quoted.page.map(|n| format!(", p. {n}")).unwrap_or_default();
            Answer { text: format!("{lead}{}\n\n(From: {}{page})", q.text, quoted.name), used: q.used }
        }
        None => Answer { text: dont_know(message, &persona.name), used: Vec::new() },
    };
    (answer, explanation)
}

/// The lead-in of an answer the reader is unsure of, in the question's language
/// ([`question_language`]), ending with a blank line.
pub fn lead_in(message: &str) -> &'static str {
    match question_language(message) {
        "fr" => "Le passage le plus proche que j'aie :\n\n",
        "es" => "El pasaje más cercano que tengo:\n\n",
        "de" => "Die nächstliegende Stelle, die ich habe:\n\n",
        "ja" => "最も近い箇所はこちらです：\n\n",
        _ => "The closest passage I have:\n\n",
    }
}

/// "I don't know" about `message`, naming the replica `name`, in the question's language
/// ([`question_language`]).
fn dont_know(message: &str, name: &str) -> String {
    match question_language(message) {
        "fr" => format!(
            "Je ne le sais pas encore : rien dans la base de connaissances de {name} n'y répond. \
             Reformulez la question, ou posez-en une sur ce que couvre la base de connaissances."
        ),
        "es" => format!(
            "Todavía no lo sé: nada en la base de conocimientos de {name} lo responde. \
             Reformule la pregunta o pregunte por algo que cubra la base de conocimientos."
        ),
        "de" => format!(
            "Das weiß ich noch nicht: Nichts in der Wissensdatenbank von {name} beantwortet das. \
             Formulieren Sie die Frage anders, oder fragen Sie nach etwas, das die Wissensdatenbank abdeckt."
        ),
        "ja" => format!(
            "まだわかりません。{name}のナレッジベースには、その答えがありません。\
             言い換えるか、ナレッジベースが扱う内容について質問してください。"
        ),
        _ => format!(
            "I don't know that yet: nothing in {name}'s knowledge base answers it. \
             Try rephrasing, or ask about something the knowledge base covers."
        ),
    }
}

/// The language of a question among those the generator answers in
/// ([`crate::search::analyzers::question_language`]).
fn question_language(message: &str) -> &'static str {
    crate::search::analyzers::question_language(message)
}

fn normalized(message: &str) -> String {
    let s: String =
        message.to_lowercase().chars().map(|c| if c.is_alphanumeric() || c == '\'' { c } else { ' ' }).collect();
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn starts_with_any(s: &str, words: &[&str]) -> bool {
    words.iter().any(|w| s == *w || s.starts_with(&format!("{w} ")))
}

/// Small talk: a message answered with a courtesy, not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Talk {
    /// Thanks.
    Thanks,
    /// A farewell.
    Farewell,
    /// A greeting, or a message with no content words.
    Greeting,
}

/// Whether `message` is small talk, and which.
fn small_talk(message: &str) -> Option<Talk> {
    let n = normalized(message);
    let short = n.split(' ').count() <= 4;
    if short && starts_with_any(&n, THANKS) {
        return Some(Talk::Thanks);
    }
    if short && starts_with_any(&n, FAREWELLS) {
        return Some(Talk::Farewell);
    }
    let greeting = short && starts_with_any(&n, GREETINGS);
    (greeting || analyze_as(None, message).is_empty()).then_some(Talk::Greeting)
}

/// The reply of `persona` to small talk `talk`: the replica's greeting to a greeting.
fn courtesy(persona: &Persona, talk: Talk) -> String {
    match talk {
        Talk::Thanks => "You're welcome! Ask me anything else.".into(),
        Talk::Farewell => "Goodbye! Come back any time.".into(),
        Talk::Greeting => {
            let g = persona.greeting.trim();
            if g.is_empty() {
                format!("Hello! I'm {}. What would you like to know?", persona.name)
            } else {
                g.to_string()
            }
        }
    }
}

/// The first `chars` characters of `text`.
fn prefix(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or(text, |(i, _)| &text[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(name: &str, content: &str) -> SourceRef {
        SourceRef::sample(name, content)
    }

    fn persona() -> Persona {
        Persona { name: "Tutor".into(), greeting: "Hi! Ask me about Python.".into(), ..Persona::default() }
    }

    #[test]
    fn greets_thanks_and_admits_ignorance() {
        assert_eq!(reply(&persona(), "Hello!", &[]).text, "Hi! Ask me about Python.");
        assert!(reply(&persona(), "thanks a lot", &[]).text.starts_with("You're welcome"));
        assert!(reply(&persona(), "What is the capital of Peru?", &[]).text.starts_with("I don't know that yet"));
    }

    /// The paragraphs of a chunk, in order, as far as the budget allows (the one before the
    /// best-matching paragraph is the context a section opens with).
    #[test]
    fn quotes_the_paragraphs_that_answer_in_order_and_names_its_source() {
        let s = [src(
            "Modules",
            "If you quit from the interpreter, definitions are lost.\n\nA module is a file containing \
             Python definitions and statements. The file name is the module name.",
        )];
        let a = reply(&persona(), "What is a module?", &s);
        assert_eq!(
            a.text,
            "If you quit from the interpreter, definitions are lost.\n\nA module is a file containing Python \
             definitions and statements. The file name is the module name.\n\n(From: Modules)"
        );
        assert_eq!(a.used, vec![0]);
    }

    /// A section's opening words stay with the passage after them that answers, also when that
    /// passage alone fills most of the budget (what introduces the answer often states it).
    #[test]
    fn the_words_that_open_a_section_are_quoted_with_the_passage_that_answers() {
        let intro = "The substitute command is the most used command of the editor: s/regexp/replacement/flags.";
        let filler = "Lighthouses stand on rocky coasts and guide the ships at night. ".repeat(17);
        let text =
            format!("{intro}\n\nThe replacement is applied by the substitute command to the first match. {filler}");
        let a =
            reply(&persona(), "How is the replacement applied by the substitute command?", &[src("Substitute", &text)]);
        assert!(a.text.starts_with(intro), "{}", a.text);
        assert!(a.text.contains("applied by the substitute command to the first match."), "{}", a.text);
    }

    /// A passage longer than the budget is cut to whole sentences around its closest sentence.
    #[test]
    fn a_long_paragraph_is_cut_to_whole_sentences_around_its_best_one() {
        let filler = "Lighthouses stand on rocky coasts and guide the ships at night. ".repeat(20);
        let text = format!("{filler}The lamp is visible for 22 nautical miles on a clear night. {filler}");
        let question = "How far is the lamp visible?";
        let a = reply(&persona(), question, &[src("Lamp", &text)]);
        assert!(a.text.contains("The lamp is visible for 22 nautical miles"), "{}", a.text);
        // the quote's words, without a lead-in and the source line
        let quote = a.text.strip_prefix(lead_in(question)).unwrap_or(&a.text);
        let words = quote.split_whitespace().count() - "(From: Lamp)".split_whitespace().count();
        assert!(words <= reader::MAX_WORDS, "{words} words: {}", a.text);
        assert!(a.text.ends_with("at night.\n\n(From: Lamp)"), "whole sentences: {}", a.text);
    }

    #[test]
    fn the_source_line_names_a_pdf_passages_page() {
        let s = SourceRef { page: Some(4), ..src("manual.pdf", "The lamp is visible for 22 nautical miles.") };
        let a = reply(&persona(), "How far is the lamp visible?", &[s]);
        assert!(a.text.ends_with("(From: manual.pdf, p. 4)"), "{}", a.text);
    }

    #[test]
    fn a_definition_list_entry_is_quoted_with_its_name() {
        let options = "-n\n--quiet\nBy default, sed prints out the pattern space at the end of each cycle.\n\n\
                       -e script\nAdd the commands in script to the set of commands to run.";
        let s = [src("sed › Options", options)];
        let a = reply(&persona(), "What does the --quiet option do?", &s);
        assert!(a.text.starts_with("-n\n--quiet\nBy default, sed prints out"), "{}", a.text);
    }

    #[test]
    fn a_how_to_passage_keeps_the_code_it_introduces() {
        let text = "A pump runs until its tank is full.\n\nTo stop a pump before the tank is full, send it the \
                    halt signal:\n\n    pump.signal(HALT)\n    pump.wait()\n\nThe pump then drains its hose \
                    into the drain by the wall, which takes about ten minutes on most models of the range.";
        let s = [src("Pumps › Stopping", text)];
        let a = reply(&persona(), "How do I stop a pump before the tank is full?", &s);
        let announced = "To stop a pump before the tank is full, send it the halt signal:\n\n```\npump.signal(HALT)\n\
                         pump.wait()\n```\n\nThe pump then drains";
        assert!(a.text.contains(announced), "{}", a.text);
    }

    #[test]
    fn a_list_a_paragraph_announces_is_quoted_with_it() {
        let text = "Acme Tools is a company that makes garden tools.\n\nOur product line offers:\n\n\
                    * spades forged from one piece of steel\n* rakes with ash handles\n* shears that stay sharp\n\n\
                    Orders ship within two days.";
        let s = [src("Acme › Products", text)];
        let a = reply(&persona(), "What does the product line offer?", &s);
        assert!(a.text.contains("Our product line offers:\n\n* spades forged"), "{}", a.text);
        assert!(a.text.contains("* shears that stay sharp"), "the whole list: {}", a.text);
    }

    /// Two chunks of one section, its quoted one cited first and once.
    #[test]
    fn an_answer_cites_its_quoted_section_first_and_each_section_once() {
        let s = [
            src("Kitchen › Kettles", "Kettles boil water for tea."),
            src("Kitchen › Kettles", "Kettles cannot be repaired once they crack."),
            src("Workshop › Vases", "Once broken, a vase is thrown away."),
        ];
        let a = reply(&persona(), "Can kettles be repaired once they crack?", &s);
        assert!(a.text.starts_with("Kettles cannot be repaired"), "{}", a.text);
        assert_eq!(a.used, vec![1, 2], "the quoted chunk, then the other section");
    }

    /// A question that names an identifier by its parts finds the passage holding it.
    #[test]
    fn an_identifier_named_by_its_parts_answers_the_question() {
        let s = [src("Secret", "The secret phrase is: RAINBOW_UNICORN_abc123")];
        let a = reply(&persona(), "What is the rainbow unicorn phrase?", &s);
        assert!(a.text.contains("The secret phrase is: RAINBOW_UNICORN_abc123"), "{}", a.text);
        assert_eq!(a.used, vec![0]);
        // what retrieval says the knowledge base never names ("food", "eat") counts too
        let unknown = ["food".to_string(), "eat".to_string()];
        let evidence = Evidence { unknown: &unknown, ..Evidence::default() };
        let (a, _) = reply_with(&persona(), "What food do unicorns eat?", &s, &evidence, &Weights::FITTED);
        assert!(a.text.starts_with("I don't know"), "{}", a.text);
    }

    #[test]
    fn i_don_t_know_is_said_in_the_question_s_language() {
        let asked = |q: &str| reply(&persona(), q, &[]).text;
        assert!(asked("Comment ouvrir une connexion réseau avec un serveur distant ?").starts_with("Je ne le sais pas"));
        assert!(asked("¿Cómo abro una conexión de red con un servidor remoto?").starts_with("Todavía no lo sé"));
        assert!(asked("Wie öffne ich eine Netzwerkverbindung zu einem entfernten Server?").starts_with("Das weiß ich"));
        assert!(asked("リモートサーバーへのネットワーク接続はどうやって開きますか？").starts_with("まだわかりません"));
        assert!(asked("How do I open a network connection to a remote server?").starts_with("I don't know"));
        // a short question, by its function words
        assert!(asked("Comment ouvrir une connexion ?").starts_with("Je ne le sais pas"));
        assert!(asked("¿Cómo abro una conexión?").starts_with("Todavía no lo sé"));
        assert!(asked("Wie öffne ich eine Verbindung?").starts_with("Das weiß ich"));
        assert!(asked("How do I open a socket connection?").starts_with("I don't know"));
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
        assert!(reply(&persona(), "How do I open a socket connection?", &s).text.starts_with("I don't know"));
    }
}
