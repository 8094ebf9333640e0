//! A retrieved chunk cut into the passages an answer may quote, in document order.
//!
//! A passage is what a reader would point at: a paragraph (or a list, or a definition-list
//! entry: the lines naming it and its description) with the code blocks and the list that
//! follow it before the next paragraph — the example a paragraph introduces belongs to it. A
//! chunk that opens with a code block (the chunker cut a section before its example) has that
//! block as a passage of its own. Nothing here knows a word of any language: the cuts are the
//! text's own blank lines, indentation and list markers ([`blocks`]).
//!
//! Each passage keeps its parts as they are quoted ([`Part`]), its terms (the index's analyzer,
//! [`analyze_as`]) and the place of its prose sentences among the chunk's, which is the place
//! of their vectors in [`crate::generate::Closeness::sentences`] (one vector per prose sentence
//! of [`blocks::parse`], in order: `search::vectors::sentence_texts`).

use std::ops::Range;

use super::terms::Terms;
use crate::search::analyze_as;
use crate::text::blocks::{self, Block};

/// A piece of a passage, as it is quoted.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// A paragraph: its sentences (re-flowed), each with its terms.
    Prose(Vec<Sentence>),
    /// A list: its items, each re-flowed on one line with its marker.
    List(Vec<String>),
    /// The lines naming a definition-list entry (its description is the next part).
    Term(Vec<String>),
    /// A code block, quoted whole as a fenced block.
    Code(String),
}

/// A prose sentence and its terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Sentence {
    pub text: String,
    pub terms: Vec<String>,
}

impl Sentence {
    /// Whether it ends with a colon: it announces what follows it (a block, a list).
    pub fn announces(&self) -> bool {
        self.text.ends_with([':', '：'])
    }
}

impl Part {
    /// How many prose sentences [`blocks::parse`] counts in it (the vectors of
    /// [`crate::generate::Closeness::sentences`] are one per such sentence; a list is one prose
    /// block there).
    pub fn sentences(&self) -> usize {
        match self {
            Part::Prose(s) => s.len(),
            Part::List(items) => blocks::sentence_count(&items.join("\n")),
            Part::Term(_) | Part::Code(_) => 0,
        }
    }
}

/// A passage of a chunk.
#[derive(Debug)]
pub struct Passage {
    pub parts: Vec<Part>,
    /// The places of its prose sentences among the chunk's (those of their vectors).
    pub sentences: Range<usize>,
    /// Every term of its text (prose, list, entry name and code).
    pub terms: Terms,
    /// Words of its prose, list and entry name (code left out).
    pub words: usize,
    /// Its opening [`PREVIEW_CHARS`] characters as plain text ([`plain`]), as a trace shows
    /// it (made once with the chunk's analysis, not per question).
    pub preview: String,
}

/// Characters of a passage's text shown in a trace ([`Passage::preview`]).
pub const PREVIEW_CHARS: usize = 160;

/// The parts of a passage as plain text, joined by spaces.
fn plain(parts: &[Part]) -> String {
    let mut out: Vec<String> = Vec::new();
    for part in parts {
        out.push(match part {
            Part::Prose(s) => s.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" "),
            Part::List(items) => items.join(" "),
            Part::Term(lines) => lines.join(" "),
            Part::Code(code) => code.clone(),
        });
    }
    out.join(" ")
}

/// A chunk read as passages, question-independent (kept by [`super::cache`]).
#[derive(Debug)]
pub struct Analysis {
    pub passages: Vec<Passage>,
    /// Terms of the chunk's heading path (document title › headings).
    pub heading: Terms,
    /// Terms of the chunk's own (last) heading.
    pub title: Terms,
    bytes: usize,
}

/// Bytes a `String` header takes beside its text (for [`Analysis::bytes`]).
const STRING_BYTES: usize = 32;

impl Analysis {
    /// The passages of the chunk named `name` (its heading path) with text `content`, terms in
    /// language `lang` (ISO 639-1; `None`: the default analyzer).
    pub fn of(name: &str, content: &str, lang: Option<&str>) -> Analysis {
        let mut passages: Vec<Passage> = Vec::new();
        let mut open: Option<Builder> = None;
        let mut sentence = 0;
        for paragraph in paragraphs(content) {
            for part in parts(paragraph, lang) {
                let opens = match (&part, &open) {
                    (Part::Code(_), Some(_)) => false,
                    // a list a paragraph announces (it ends with ":") and an entry's description
                    (Part::List(_), Some(b)) => !b.announces(),
                    (Part::Prose(_), Some(b)) => !b.names_entry(),
                    _ => true,
                };
                if opens {
                    passages.extend(open.take().map(|b| b.done(sentence, lang)));
                    open = Some(Builder { parts: Vec::new(), first_sentence: sentence });
                }
                sentence += part.sentences();
                let parts = &mut open.as_mut().expect("a passage is open").parts;
                match (parts.last_mut(), part) {
                    // an example, a blank line, its output: one block
                    (Some(Part::Code(prev)), Part::Code(next)) => {
                        prev.push_str("\n\n");
                        prev.push_str(&next);
                    }
                    (_, part) => parts.push(part),
                }
            }
        }
        passages.extend(open.map(|b| b.done(sentence, lang)));
        let bytes = content.len() * 3
            + passages
                .iter()
                .map(|p| p.preview.len() + STRING_BYTES + p.terms.iter().map(|t| t.len() + STRING_BYTES).sum::<usize>())
                .sum::<usize>();
        let title = analyze_as(lang, crate::text::chunk::own_heading(name)).into();
        Analysis { passages, heading: analyze_as(lang, name).into(), title, bytes }
    }

    /// Estimated heap bytes held, for the cache's budget.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A passage being gathered.
struct Builder {
    parts: Vec<Part>,
    /// The place of its first prose sentence among the chunk's.
    first_sentence: usize,
}

impl Builder {
    /// Whether its last part is prose whose last sentence announces what follows.
    fn announces(&self) -> bool {
        matches!(self.parts.last(), Some(Part::Prose(s)) if s.last().is_some_and(Sentence::announces))
    }

    /// Whether its last part names a definition-list entry (its description follows).
    fn names_entry(&self) -> bool {
        matches!(self.parts.last(), Some(Part::Term(_)))
    }

    fn done(self, end: usize, lang: Option<&str>) -> Passage {
        let mut terms: Vec<String> = Vec::new();
        let mut words = 0;
        for part in &self.parts {
            let text = match part {
                Part::Prose(s) => {
                    s.iter().for_each(|s| terms.extend(s.terms.iter().cloned()));
                    words += s.iter().map(|s| s.text.split_whitespace().count()).sum::<usize>();
                    continue;
                }
                Part::List(items) => items.join("\n"),
                Part::Term(lines) => lines.join("\n"),
                Part::Code(code) => {
                    terms.extend(analyze_as(lang, code));
                    continue;
                }
            };
            words += text.split_whitespace().count();
            terms.extend(analyze_as(lang, &text));
        }
        terms.sort_unstable();
        terms.dedup();
        let preview = super::prefix(&plain(&self.parts), PREVIEW_CHARS).to_string();
        Passage {
            parts: self.parts,
            sentences: self.first_sentence..end.max(self.first_sentence),
            terms: terms.into(),
            words,
            preview,
        }
    }
}

/// The paragraphs of a chunk's text as [`blocks::parse`] cuts them (fences made indentation,
/// then blank lines).
fn paragraphs(content: &str) -> Vec<String> {
    crate::text::code::unfence(content).split("\n\n").map(str::to_string).collect()
}

/// The parts of one paragraph: a list as its items (or lines that stand as written as their
/// lines: [`blocks::line_units`]), else its blocks.
fn parts(paragraph: String, lang: Option<&str>) -> Vec<Part> {
    let lines: Vec<&str> = paragraph.lines().filter(|l| !l.trim().is_empty()).collect();
    let blocks = blocks::parse(&paragraph);
    if blocks.iter().all(|b| matches!(b, Block::Prose(_))) {
        if let Some(units) = blocks::line_units(&lines) {
            return vec![Part::List(units)];
        }
    }
    let sentence = |text: String| Sentence { terms: analyze_as(lang, &text), text };
    blocks
        .into_iter()
        .map(|b| match b {
            Block::Prose(s) => Part::Prose(s.into_iter().map(sentence).collect()),
            Block::Code(c) => Part::Code(c),
            Block::Term(t) => Part::Term(t),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(p: &Passage) -> Vec<String> {
        p.parts
            .iter()
            .map(|part| match part {
                Part::Prose(s) => s.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" "),
                Part::List(items) => items.join(" | "),
                Part::Term(t) => format!("term {}", t.join(",")),
                Part::Code(c) => format!("code {c}"),
            })
            .collect()
    }

    #[test]
    fn a_paragraph_keeps_the_code_and_the_list_that_follow_it() {
        let text = "Call it so:\n\n    run(1)\n\nIt takes three steps:\n\n* mix the flour\n  and water\n* bake it\n\n\
                    Then it cools. It is done.";
        let a = Analysis::of("Bread › Baking", text, Some("en"));
        assert_eq!(a.passages.len(), 3, "{:?}", a.passages);
        assert_eq!(texts(&a.passages[0]), ["Call it so:", "code run(1)"]);
        assert_eq!(texts(&a.passages[1]), ["It takes three steps:", "* mix the flour and water | * bake it"]);
        assert_eq!(texts(&a.passages[2]), ["Then it cools. It is done."]);
        // the sentences' places follow blocks::parse (a list is one prose block there)
        let counted: usize =
            blocks::parse(text).iter().map(|b| if let Block::Prose(s) = b { s.len() } else { 0 }).sum();
        assert_eq!(a.passages[2].sentences.end, counted);
        assert_eq!(a.passages[0].sentences, 0..1);
        assert!(a.passages[0].terms.contains("run"), "code terms count: {:?}", a.passages[0].terms);
    }

    #[test]
    fn a_definition_entry_is_its_name_and_description_and_a_leading_block_stands_alone() {
        let text = "    tail -f log\n\n-n\n--quiet\nBy default, sed prints the pattern space.\n\nd\nDelete the pattern space; start the next cycle.";
        let a = Analysis::of("sed › Options", text, Some("en"));
        let all: Vec<Vec<String>> = a.passages.iter().map(texts).collect();
        assert_eq!(
            all,
            [
                vec!["code tail -f log".to_string()],
                vec!["term -n,--quiet".into(), "By default, sed prints the pattern space.".into()],
                vec!["term d".into(), "Delete the pattern space; start the next cycle.".into()],
            ]
        );
        assert_eq!(a.passages[1].sentences, 0..1);
        assert_eq!(a.passages[2].sentences, 1..2);
    }
}
