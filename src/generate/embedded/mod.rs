//! The embedded, offline generator: extractive answers from the retrieved chunks.
//!
//! Small talk (greetings, thanks, farewells, or a message with no content words) gets the
//! replica's greeting or a short courtesy. Otherwise the question's [`intent`] (a definition, a
//! how-to, or any other question) decides what a good answer holds, and [`passage`] picks it
//! from the chunks read as prose and code ([`crate::text::blocks`]): sentences of the best
//! section in document order, the code block that goes with them as a fenced Markdown block,
//! and the name of the sources. When the sources do not cover the question, the answer says so
//! and cites no source.

pub mod cache;
pub mod passage;
mod terms;

use crate::text::intent;
pub use passage::{Confidence, Explanation, Rules, ScoredSentence, Signals, Weights};

use std::collections::VecDeque;

use super::{prompt, Backend, BoxFuture, Closeness, Generation, Persona, Piece, Pieces, Usage};
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
            let (answer, explanation) = reply_with(&g.persona, &g.question, &g.sources, &g.closeness, &Weights::FITTED);
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
    reply_with(persona, message, sources, &[], &Weights::FITTED).0
}

/// The reply to `message` given the retrieved `sources` (best first) and how close the
/// question is to each by meaning (`closeness`, in order; empty without an embedding model),
/// read with weights `w`; of
/// the persona, the `name` (in "I don't know") and the `greeting` (answering a greeting) are
/// used. With it, why the reader answered so (empty for small talk).
pub fn reply_with(
    persona: &Persona,
    message: &str,
    sources: &[SourceRef],
    closeness: &[Closeness],
    w: &Weights,
) -> (Answer, Explanation) {
    if let Some(text) = small_talk(persona, message) {
        return (Answer { text, used: Vec::new() }, Explanation::default());
    }
    // One language for the question and every sentence, detected on the best source (longer and
    // more reliable than a question), so that both sides are analyzed alike.
    let lang = sources.first().and_then(cache::language);
    let reading = passage::answer(message, &intent::of(message), sources, closeness, lang, w);
    let answer = match reading.passage {
        Some(found) => Answer { text: found.text, used: found.used },
        None => Answer { text: dont_know(message, &persona.name), used: Vec::new() },
    };
    (answer, reading.explanation)
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

/// Languages whose questions the generator reads ([`intent`]) and whose analyzers drop stop
/// words, ISO 639-1; English first (it wins ties).
const STOP_WORD_LANGUAGES: &[&str] = &["en", "fr", "es", "de"];

/// The language of a question among those whose phrasings the generator reads: Japanese when it
/// holds kana, else the one of [`STOP_WORD_LANGUAGES`] whose analyzer finds the most stop words
/// among its words (a sentence's function words tell its language where trigram statistics of
/// a few words do not); English when none has any.
fn question_language(message: &str) -> &'static str {
    if message.chars().any(|c| matches!(c, '\u{3040}'..='\u{30ff}')) {
        return "ja";
    }
    let words: Vec<String> =
        message.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    let stop_words = |lang: &str| words.iter().filter(|w| analyze_as(Some(lang), w).is_empty()).count();
    // `max_by_key` keeps the last of equals: reversed, English wins ties
    let counted = STOP_WORD_LANGUAGES.iter().rev().map(|l| (*l, stop_words(l)));
    counted.max_by_key(|(_, n)| *n).filter(|(_, n)| *n > 0).map_or("en", |(l, _)| l)
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

/// The first `chars` characters of `text`.
fn prefix(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or(text, |(i, _)| &text[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(name: &str, content: &str) -> SourceRef {
        SourceRef { id: 1, score: 1.0, created_at: 0, name: name.into(), content: content.into() }
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

    #[test]
    fn quotes_the_sentence_that_answers() {
        let s = [src(
            "Modules",
            "If you quit from the interpreter, definitions are lost. A module is a file containing \
             Python definitions and statements. The file name is the module name.",
        )];
        let a = reply(&persona(), "What is a module?", &s);
        assert!(a.text.contains("A module is a file containing Python definitions"), "{}", a.text);
        assert!(a.text.ends_with("(From: Modules)"));
        assert_eq!(a.used, vec![0]);
    }

    /// Two entries of a manual's definition list, named `d` and `D`.
    const COMMANDS: &str = "If you use sed at all, you will want to know these commands.\n\nd\nDelete the pattern \
                            space; immediately start next cycle.\n\nD\nIf pattern space contains newlines, delete \
                            text in the pattern space up to the first newline.";

    #[test]
    fn a_definition_list_entry_defines_the_command_it_names_case_kept() {
        let s = [src("sed › Often-Used Commands", COMMANDS)];
        let a = reply(&persona(), "What does the D command do?", &s);
        assert!(a.text.starts_with("`D`: If pattern space contains newlines"), "{}", a.text);
        assert!(!a.text.contains("Delete the pattern space"), "{}", a.text);
        let a = reply(&persona(), "What does the d command do?", &s);
        assert!(a.text.starts_with("`d`: Delete the pattern space"), "{}", a.text);
    }

    #[test]
    fn a_sentence_naming_the_subject_defines_it() {
        let s = [
            src("Files", "Files can hold text. The JSON format is used by many applications for data exchange."),
            src(
                "Files › json",
                "Python allows you to use the popular data interchange format called JSON (JavaScript Object \
                 Notation). The standard module json can serialize data.",
            ),
        ];
        let a = reply(&persona(), "What is JSON?", &s);
        assert!(a.text.contains("called JSON (JavaScript Object Notation)"), "{}", a.text);
    }

    #[test]
    fn a_list_of_names_after_a_colon_says_what_each_is() {
        let s = [
            src(
                "Bakery › Ovens",
                "Load the dry oven before dawn. Move the loaves from the steam oven to the dry oven when \
                 the crust sets, and then move them back to the steam oven.",
            ),
            src(
                "Bakery › How the Bakery Works",
                "The bakery heats two ovens: the humid steam oven, and the hot dry oven. Both are lit at \
                 four. The dry oven keeps its heat overnight.",
            ),
        ];
        let a = reply(&persona(), "What is the dry oven?", &s);
        assert!(a.text.starts_with("The bakery heats two ovens:"), "{}", a.text);
        assert_eq!(a.used, vec![1]);
    }

    /// A section cut by the chunker between a sentence announcing a block and the block.
    const FIRST_HALF: &str = "A pump runs until its tank is full. To stop a pump before the tank is full, \
                              send it the halt signal:";
    const SECOND_HALF: &str = "    pump.signal(HALT)\n    pump.wait()\n\nThe pump then drains its hose.";

    #[test]
    fn a_sentence_cut_from_its_block_by_the_chunk_s_end_is_quoted_with_the_next_chunk_s_block() {
        let other = src("Pumps › Filling", "A pump fills its tank at ten litres a minute.");
        let s = [src("Pumps › Stopping", FIRST_HALF), other.clone(), src("Pumps › Stopping", SECOND_HALF)];
        let a = reply(&persona(), "How do I stop a pump before the tank is full?", &s);
        assert!(a.text.contains("send it the halt signal:\n\n```\npump.signal(HALT)\npump.wait()\n```"), "{}", a.text);
        assert!(a.used.contains(&0) && a.used.contains(&2), "{:?}", a.used);
        // without the chunk holding the block, the announcing sentence is never quoted
        let a = reply(&persona(), "How do I stop a pump before the tank is full?", &s[..2]);
        assert!(!a.text.contains("halt signal"), "{}", a.text);
    }

    /// The answer to `question` from two sections (heading path, text), checked to open with
    /// `start` and to quote the section at `used` alone.
    fn answered_from_one(question: &str, sections: [(&str, &str); 2], start: &str, used: usize) -> Answer {
        let a = reply(&persona(), question, &sections.map(|(name, text)| src(name, text)));
        assert!(a.text.starts_with(start), "{}", a.text);
        assert_eq!(a.used, vec![used]);
        a
    }

    #[test]
    fn a_second_section_is_quoted_only_about_the_question_s_subject() {
        let sections = [
            ("Kitchen › Kettles", "Kettles cannot be repaired once they crack."),
            ("Workshop › Moving", "Once broken, a vase is thrown away."),
        ];
        let a = answered_from_one("Can kettles be repaired once broken?", sections, "Kettles cannot be repaired", 0);
        assert!(!a.text.contains("vase"), "{}", a.text);
    }

    /// A question that writes an identifier apart, by its parts in order, names it: the
    /// sentence holding it answers although the question's other words are found nowhere.
    #[test]
    fn an_identifier_named_by_its_parts_answers_the_question() {
        let s = [src("Secret", "The secret phrase is: RAINBOW_UNICORN_abc123")];
        let a = reply(&persona(), "What is the rainbow unicorn phrase mentioned in the text?", &s);
        assert!(a.text.starts_with("The secret phrase is: RAINBOW_UNICORN_abc123"), "{}", a.text);
        assert_eq!(a.used, vec![0]);
        // its words apart or out of order name nothing: too little of the question is covered
        for question in ["What is the unicorn rainbow phrase mentioned in the text?", "What food do unicorns eat?"] {
            assert!(reply(&persona(), question, &s).text.starts_with("I don't know"), "{question}");
        }
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
