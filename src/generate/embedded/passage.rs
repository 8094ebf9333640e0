//! The passage that answers a question, chosen among the sentences and code blocks of the
//! retrieved chunks.
//!
//! 1. Every prose sentence is scored by the question's terms it contains (same analyzer as the
//!    index), each weighted by its rarity among the candidate sentences. A sentence that
//!    introduces a code block counts the terms of the prose resuming it after the block (in
//!    lower case: the rest of the same sentence). A definition question ("What is X?") adds the
//!    full weight of X to a sentence that says what X is ("X is/are …" with X first, "… called
//!    X", "X, a …", an item of a list of names after a colon ("two buffers: the pattern space
//!    and the hold space"), or a sentence opening a paragraph of the description of a
//!    definition-list entry named X, case kept: [`Block::Term`]). A source's sentences are
//!    weighted by the square root of its share of the best retrieval score.
//! 2. The best section is the chunk with the best sentence plus a heading bonus: the weight of
//!    the question's terms (X's, for a definition) that its own heading names, times the share
//!    of that heading they make up or, when larger and the question is not a definition, the
//!    share of the question's weight they carry ([`HOW_TO_HEADING_WEIGHT`] times that for "How
//!    do I"). A how-to heading that names none of the task's object but something else gets no
//!    bonus: it is another object's task ("Reading and Writing Files" for "How do I write a
//!    class?"); nor does one opening with another verb (an English gerund) that names only
//!    part of the object ("Selecting lines by text matching" for "How do I replace only the
//!    second match on a line?"). The chunks with its heading path are chosen from together.
//! 3. The passage holds that section's best sentence and its others scoring at least
//!    [`KEEP_RATIO`] of it, in document order, within [`MAX_PROSE_CHARS`] (at most
//!    [`MAX_SENTENCES`]); a definition keeps the sentence after the one that defines. A
//!    sentence that introduces a code block (ends with ":" or announces "the following") is
//!    kept only with that block (a sentence ending its chunk with ":" only when another
//!    retrieved chunk of its section opens with a code block, quoted right after it: the chunker
//!    cut between them); "How do I" questions get the code block nearest the passage's first
//!    sentence (at most [`CODE_REACH`] blocks away). At most one code block, quoted whole
//!    (bounded by [`MAX_CODE_CHARS`]). Prose resuming after a block, in lower case, the
//!    sentence the block interrupted is never quoted (it begins mid-sentence).
//! 4. Each of these rules is a switch ([`Rules`]) and stays because answering without it lost
//!    on the held-out set (`tests/answers/heldout`); rules that did not (a comparison's two
//!    sides, a yes/no question's subject, a second section, heading-path terms, a how-to's
//!    code terms and imperative verb, the words a question's form implies, an entry's whole
//!    paragraph) were removed. The naming of identifiers (6) was removed where the meaning is
//!    known and kept without it: no held-out question names an identifier, and without an
//!    embedding model it is what answers a question naming one by its parts.
//! 5. With an embedding model, meaning counts beside the words: each candidate sentence's
//!    cosine to the question (its vector computed with its chunk's when the chunk was indexed,
//!    never per question; [`Closeness`]), scaled between the candidates' lowest and highest,
//!    adds [`Weights::sentence_cosine`] times the question's weight to its score (1.), and
//!    "I don't know" is decided by one [`Confidence`] that combines the best section's coverage
//!    (below), its chunk's cosine and its closest quoted sentence's, against one threshold
//!    calibrated on unanswerable questions. The weights are fitted on the labelled dev set
//!    ([`Weights`]), not set by hand.
//! 6. Without an embedding model, when the best section's passage (with its heading path)
//!    covers less than [`MIN_COVERAGE`] of the question's weight (all of it for a one-term
//!    question), there is no answer. Terms that name an identifier of the passage by two or
//!    more of its parts, in order ("rainbow unicorn" for `RAINBOW_UNICORN_abc123`), count twice
//!    in that coverage: the question names that very identifier, which is stronger evidence
//!    than its words found apart, and it lets the question's words about something else ("…
//!    mentioned in the text") go unmatched as they could beside a whole phrase. With an
//!    embedding model they do not: the question's closeness to the sentence says as much, and
//!    counting them answered unanswerable questions of the held-out set.

use std::sync::Arc;

use super::terms::Terms;
use crate::generate::Closeness;
use crate::search::{analyze_as, analyzers, defines};
use crate::store::records::SourceRef;
use crate::text::blocks::{self, Block};
use crate::text::chunk::own_heading;
use crate::text::intent::{self, Intent};

/// Most sentences quoted from the best section.
pub const MAX_SENTENCES: usize = 4;
/// Most characters of prose quoted from the best section (its best sentence is always kept).
pub const MAX_PROSE_CHARS: usize = 700;
/// Most characters of the one code block an answer may quote (longer blocks are not quoted).
pub const MAX_CODE_CHARS: usize = 1200;
/// A sentence of the best section joins its best one when it scores at least this share of it.
pub const KEEP_RATIO: f32 = 0.6;
/// Share of the question's weight the passage must cover to be an answer (two or more terms).
pub const MIN_COVERAGE: f32 = 0.6;
/// Farthest (in blocks) the code block of a "How do I" answer may be from its first sentence.
pub const CODE_REACH: usize = 3;
/// How much more a section's heading bonus counts for a "How do I" question, whose task a
/// section's heading names ("How do I number lines?": "Numbering Lines"); 1.5–3 gave the same
/// answers on `tests/answers`' dev part, 0.5 worse.
pub const HOW_TO_HEADING_WEIGHT: f32 = 2.0;

/// Verbs that say what a subject is or does, besides the copulas of [`defines::COPULAS`]: the
/// generator reads "X provides …" as about X; the index's defined subjects need a copula.
const DESCRIBING_VERBS: &[&str] =
    &[" does ", " consists of ", " provide ", " provides ", " offers ", " lets ", " allows "];
const JA_COPULAS: &[&str] = &["とは", "は"];
/// Words announcing a code block that follows.
const ANNOUNCES: &[&str] = &["following", "suivant", "siguiente", "folgende", "次の", "以下"];

/// What answering needs of a chunk whatever the question: its blocks, the terms of its heading
/// path and of its own heading, and its candidate sentences with their terms. Built once per
/// chunk text and language and kept by [`super::cache`], so that a completion only scores.
pub struct Analysis {
    blocks: Vec<Block>,
    /// Terms of its heading path (document title › headings).
    path: Terms,
    /// Terms of its own (last) heading.
    heading: Terms,
    /// The term of the verb its own heading opens with, an English gerund ("Selecting lines by
    /// text matching": select): the task the section shows, if it names one.
    action: Option<String>,
    sentences: Vec<Sentence>,
    /// How many prose sentences it has (its sentence vectors are one per prose sentence).
    prose: usize,
    bytes: usize,
}

/// A prose sentence that may be quoted (long enough, not left dangling before a code block it
/// introduces), with its terms: its own, and an entry's name for a description.
struct Sentence {
    block: usize,
    index: usize,
    /// Its place among all the chunk's prose sentences (that of its vector in
    /// [`Closeness::sentences`]).
    ordinal: usize,
    /// It ends the chunk announcing a block (":"): the block opens the section's next chunk,
    /// and the sentence is quoted only when that chunk was retrieved too.
    cut: bool,
    terms: Arc<Terms>,
    definers: Definers,
    /// The terms of the parts of each of its identifiers ([`analyzers::identifiers`]).
    identifiers: Vec<Vec<String>>,
}

impl Analysis {
    /// The analysis of the chunk named `name` (its heading path, `›`-separated) with text
    /// `content`, its terms in language `lang` (ISO 639-1; `None`: the default analyzer).
    pub fn of(name: &str, content: &str, lang: Option<&str>) -> Analysis {
        let blocks = blocks::parse(content);
        let sentences = sentences(&blocks, lang);
        let strings = |v: &[String]| v.iter().map(|t| t.len() + STRING_BYTES).sum::<usize>();
        let bytes = content.len() * 2
            + name.len()
            + sentences
                .iter()
                .map(|s| {
                    let identifiers: usize = s.identifiers.iter().map(|i| strings(i) + STRING_BYTES).sum();
                    strings(&s.terms) + s.definers.bytes(strings) + identifiers + STRING_BYTES
                })
                .sum::<usize>()
            + STRING_BYTES * blocks.len();
        let own = own_heading(name);
        let (path, heading, action) = (analyze_as(lang, name).into(), analyze_as(lang, own).into(), gerund(own, lang));
        let prose = blocks.iter().map(|b| if let Block::Prose(s) = b { s.len() } else { 0 }).sum();
        Analysis { path, heading, action, blocks, sentences, prose, bytes }
    }

    /// Estimated heap bytes held (the blocks' text, the terms and their headers), for the
    /// cache's budget.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The term of the English gerund `heading` opens with ("Counting Lines": count), if any: a
/// word ending in "ing" that the stemmer shortens ("String Methods" opens with none).
fn gerund(heading: &str, lang: Option<&str>) -> Option<String> {
    if !matches!(lang, None | Some("en")) {
        return None;
    }
    let word = heading.split_whitespace().next()?.to_lowercase();
    let term = analyze_as(lang, &word).into_iter().next()?;
    (word.ends_with("ing") && term.len() < word.len()).then_some(term)
}

/// Bytes a `String` or a small record costs beside its text (header and allocator rounding).
const STRING_BYTES: usize = 32;

fn sentences(blocks: &[Block], lang: Option<&str>) -> Vec<Sentence> {
    let mut out = Vec::new();
    let mut ordinal = 0;
    for (bi, b) in blocks.iter().enumerate() {
        let Block::Prose(sentences) = b else { continue };
        for (i, text) in sentences.iter().enumerate() {
            ordinal += 1;
            let letters = text.chars().filter(|c| c.is_alphabetic()).count();
            let cut = dangling(blocks, bi, i);
            if letters < 8 || (cut && bi + 1 < blocks.len()) || resumes(blocks, bi, i) {
                continue;
            }
            let mut terms = analyze_as(lang, text);
            // prose resuming after the block this sentence announces is the rest of the sentence
            add_new(&mut terms, resumed_after(blocks, bi, i).map(|r| analyze_as(lang, r)));
            let described = entry(blocks, bi, i);
            // an entry's description is about the entry's name
            add_new(&mut terms, described.map(|l| analyze_as(lang, &l.join(" "))));
            // an entry's description says what the entry is by its place (`names`), not its words
            let definers = if described.is_some() { Definers::default() } else { Definers::of(text, lang) };
            let terms = Arc::new(terms.into());
            let identifiers = analyzers::identifiers(lang, text);
            let ordinal = ordinal - 1;
            out.push(Sentence { block: bi, index: i, ordinal, cut, terms, definers, identifiers });
        }
    }
    out
}

/// A retrieved chunk read for answering: its name, its (cached) analysis and how close the
/// question is to it by meaning (default: no embedding model).
struct Section<'a> {
    name: &'a str,
    analysis: Arc<Analysis>,
    closeness: &'a Closeness,
}

/// The closeness of a source without vectors.
static FAR: Closeness = Closeness { chunk: None, sentences: Vec::new() };

impl Section<'_> {
    /// The question's cosine to the sentence at `at` of its analysis, when its vector is known
    /// (all of the chunk's, or none: vectors that do not match its sentences one to one count
    /// as none).
    fn sentence_cosine(&self, at: usize) -> Option<f32> {
        let known = self.closeness.sentences.len() == self.prose;
        known.then(|| self.closeness.sentences[self.sentences[at].ordinal])
    }
}

impl std::ops::Deref for Section<'_> {
    type Target = Analysis;
    fn deref(&self) -> &Analysis {
        &self.analysis
    }
}

/// A candidate sentence.
struct Cand {
    section: usize,
    /// Its place in the section's [`Analysis`] sentences.
    at: usize,
    block: usize,
    index: usize,
    terms: Arc<Terms>,
    /// Whether it says what the subject of a definition question is ([`Scoring::subject`]).
    says: bool,
    score: f32,
    /// For a sentence that ends its chunk announcing a block: the section (another chunk of
    /// the same heading path) that opens with that block.
    continued: Option<usize>,
}

/// The chosen passage: text and the indexes of the sections (sources) it quotes.
pub struct Passage {
    pub text: String,
    pub used: Vec<usize>,
}

/// The reader's weights: how its signals combine, fitted on the labelled dev set
/// (`tests/answers/questions.json`) by `cargo run --release --example answers -- --fit
/// --embeddings DIR`, which prints them; [`Weights::FITTED`] holds the printed values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// What a sentence's cosine to the question adds to its lexical score, in shares of the
    /// question's weight (1: as much as holding every term of the question).
    pub sentence_cosine: f32,
    /// What a section's cosine to the question adds to its lexical score (the score of its
    /// best sentence plus its heading bonus, as a share of the question's weight) when the
    /// best section is chosen.
    pub section_cosine: f32,
    /// The confidence that the best section answers, from its signals ([`Signals`]): an
    /// answer when it is at least 0, else "I don't know".
    pub confidence: Confidence,
    /// Which of the reader's rules apply (all of them in [`Weights::FITTED`]).
    pub rules: Rules,
}

/// The reader's rules (the module docs' points 1–3 and 6), each one a switch, so that what each
/// is worth can be measured by answering without it (`examples/answers.rs --ablate`). They are
/// the rules whose removal lost answers on the held-out set; the others were removed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// "What is X?" is read as a definition (1–3: the sentence saying what X is, the one after
    /// it); off, it is read as any other question.
    pub definitions: bool,
    /// "How do I …?" is read as a task (its heading counts more, its code is quoted); off, as
    /// any other question.
    pub how_to: bool,
    /// A section's own heading naming the question's focus adds a bonus (2).
    pub heading_bonus: bool,
    /// A how-to heading naming another object's task, or another verb on part of the object,
    /// gets no bonus (2).
    pub other_task: bool,
    /// A how-to answer quotes the code block nearest its first sentence (3).
    pub nearest_code: bool,
    /// A source's sentences weigh by its share of the best retrieval score (1).
    pub retrieval_prior: bool,
    /// Terms naming an identifier by its parts count twice in the coverage, without an
    /// embedding model (6).
    pub naming: bool,
}

/// A rule's switch in [`Rules`].
type Switch = fn(&mut Rules) -> &mut bool;

/// Each rule's name and its switch.
const SWITCHES: [(&str, Switch); 7] = [
    ("definitions", |r| &mut r.definitions),
    ("how_to", |r| &mut r.how_to),
    ("heading_bonus", |r| &mut r.heading_bonus),
    ("other_task", |r| &mut r.other_task),
    ("nearest_code", |r| &mut r.nearest_code),
    ("retrieval_prior", |r| &mut r.retrieval_prior),
    ("naming", |r| &mut r.naming),
];

impl Rules {
    /// Every rule on.
    pub const ALL: Rules = Rules {
        definitions: true,
        how_to: true,
        heading_bonus: true,
        other_task: true,
        nearest_code: true,
        retrieval_prior: true,
        naming: true,
    };

    /// The rules' names, as `examples/answers.rs --without` takes them ([`SWITCHES`]' order).
    pub const NAMES: [&'static str; SWITCHES.len()] = {
        let mut names = [""; SWITCHES.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = SWITCHES[i].0;
            i += 1;
        }
        names
    };

    /// These rules with the one named `name` (one of [`Rules::NAMES`]) off; `None` for an
    /// unknown name.
    pub fn without(mut self, name: &str) -> Option<Rules> {
        let (_, switch) = SWITCHES.iter().find(|(n, _)| *n == name)?;
        *switch(&mut self) = false;
        Some(self)
    }

    /// The intent the reader reads `intent` as: the question's kind when its rules are on,
    /// else [`Intent::Fact`] (a comparison always is: no rule of its own paid on the held-out
    /// set).
    fn read_as(&self, intent: &Intent) -> Intent {
        match intent {
            Intent::Definition(_) if self.definitions => intent.clone(),
            Intent::HowTo if self.how_to => intent.clone(),
            _ => Intent::Fact,
        }
    }
}

/// `coverage · c + cosine · x + sentence · s + bias` of the best section's signals
/// ([`Signals`]: coverage `c`, chunk cosine `x`, best quoted sentence's cosine `s`, which is
/// `x` when the sentences have no vectors yet); without a cosine (no embedding model),
/// `c − 1`: the passage must cover [`MIN_COVERAGE`] of the question's weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Confidence {
    pub coverage: f32,
    pub cosine: f32,
    pub sentence: f32,
    pub bias: f32,
}

impl Confidence {
    /// The confidence of `signals`.
    pub fn of(&self, signals: &Signals) -> f32 {
        match signals.cosine {
            Some(x) => {
                let s = signals.sentence.unwrap_or(x);
                self.coverage * signals.coverage + self.cosine * x + self.sentence * s + self.bias
            }
            None => signals.coverage - 1.0,
        }
    }
}

impl Weights {
    /// The weights [`answer`] uses (see [`Weights`] for how they were fitted).
    pub const FITTED: Weights = Weights {
        sentence_cosine: 2.0,
        section_cosine: 0.0,
        confidence: Confidence { coverage: 2.300, cosine: 1.633, sentence: 6.053, bias: -5.904 },
        rules: Rules::ALL,
    };
}

/// What the reader knew of the best section when it decided whether it answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signals {
    /// Share of the question's weight its passage (with its heading path) covers (naming
    /// included without an embedding model: 6. in the module docs), over the share needed
    /// without embeddings ([`MIN_COVERAGE`]; all of it for a one-term question): 1 is that bar.
    pub coverage: f32,
    /// The question's cosine similarity to its chunk's vector.
    pub cosine: Option<f32>,
    /// The largest cosine of the question to a sentence its passage quotes.
    pub sentence: Option<f32>,
    /// [`Confidence::of`] the signals.
    pub confidence: f32,
}

/// What the reader made of a question: the passage that answers it (`None`: "I don't know"),
/// and why.
pub struct Reading {
    pub passage: Option<Passage>,
    pub explanation: Explanation,
}

/// Why the reader answered as it did: the signals of the best section (`None` when no section
/// held anything of the question) and its best-scored candidate sentences, best first (at
/// most [`EXPLAINED_SENTENCES`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explanation {
    pub signals: Option<Signals>,
    pub sentences: Vec<ScoredSentence>,
    /// Whether it answered (else "I don't know").
    pub answered: bool,
}

/// Most candidate sentences an [`Explanation`] lists.
pub const EXPLAINED_SENTENCES: usize = 10;

/// A candidate sentence as the reader scored it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredSentence {
    /// Index of its source (into the sources read).
    pub source: usize,
    pub text: String,
    /// Its lexical score (terms, heading path, definition and how-to signals) as a share of
    /// the question's weight.
    pub lexical: f32,
    /// The question's cosine to its vector (`None`: no vector).
    pub cosine: Option<f32>,
    /// Its score: lexical plus `sentence_cosine` times its scaled cosine, times its source's
    /// retrieval prior.
    pub score: f32,
    /// Whether the answer quotes it.
    pub quoted: bool,
}

fn sentence<'s>(sections: &'s [Section], c: &Cand) -> &'s str {
    match &sections[c.section].blocks[c.block] {
        Block::Prose(s) => &s[c.index],
        _ => "",
    }
}

/// Whether the sentence at `block`/`index` announces a code block: it ends its paragraph with
/// ":" or says "the following", and a code block comes next.
fn introduces_code(blocks: &[Block], block: usize, index: usize) -> Option<usize> {
    let Block::Prose(s) = &blocks[block] else { return None };
    let text = s[index].trim_end();
    let last = index + 1 == s.len();
    let announces = text.ends_with([':', '：']) || ANNOUNCES.iter().any(|a| text.to_lowercase().contains(a));
    (last && announces && matches!(blocks.get(block + 1), Some(Block::Code(_)))).then_some(block + 1)
}

/// A sentence that announces a block which is not there (cut off by the chunk's end).
fn dangling(blocks: &[Block], block: usize, index: usize) -> bool {
    let Block::Prose(s) = &blocks[block] else { return false };
    index + 1 == s.len()
        && s[index].trim_end().ends_with([':', '：'])
        && introduces_code(blocks, block, index).is_none()
}

/// Whether the sentence at `block`/`index` resumes, after a code block, the sentence that the
/// block interrupted ("For example:" / `x = MyClass()` / "creates a new instance …"): it opens
/// a paragraph right after a code block in lower case, its first word not one of the block's
/// (a sentence may open with a name the example shows: "del can also be used …"). It begins
/// mid-sentence, so it is never quoted.
fn resumes(blocks: &[Block], block: usize, index: usize) -> bool {
    let (Block::Prose(s), Some(Block::Code(code))) = (&blocks[block], block.checked_sub(1).map(|b| &blocks[b])) else {
        return false;
    };
    let text = s[index].trim_start_matches(['(', '"', '\'', '`']);
    let first = text.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("");
    let named = code.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == first);
    index == 0 && first.chars().next().is_some_and(char::is_lowercase) && !named
}

/// Appends to `terms` those of `more` it lacks.
fn add_new(terms: &mut Vec<String>, more: Option<Vec<String>>) {
    for t in more.unwrap_or_default() {
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
}

/// The prose that resumes, after the code block it announces, the sentence at `block`/`index`
/// ("That means that by adding this code at the end of your module:" / the code / "you can make
/// the file usable as a script …"): the [`resumes`] sentence right after that block.
fn resumed_after(blocks: &[Block], block: usize, index: usize) -> Option<&str> {
    let code = introduces_code(blocks, block, index)?;
    match blocks.get(code + 1) {
        Some(Block::Prose(next)) if resumes(blocks, code + 1, 0) => next.first().map(String::as_str),
        _ => None,
    }
}

/// The lines naming the definition-list entry that the sentence at `block`/`index` describes:
/// it opens a paragraph of the entry's description, which runs from the entry's lines to the
/// next entry (a manual may open the description with a restriction, "This command accepts
/// only one address.", and say what the command does in the next paragraph).
fn entry(blocks: &[Block], block: usize, index: usize) -> Option<&[String]> {
    match blocks[..block].iter().rev().find(|b| matches!(b, Block::Term(_))) {
        Some(Block::Term(lines)) if index == 0 => Some(lines),
        _ => None,
    }
}

/// The name an entry line gives (`q` of `q [EXIT-CODE]`, `s` of `s/regexp/replacement/`,
/// `-n` of `-n`): its first word up to a bracket, slash or backslash.
fn entry_name(line: &str) -> &str {
    let word = line.split_whitespace().next().unwrap_or("");
    match word.find(['[', '/', '\\']) {
        Some(i) if i > 0 => &word[..i],
        _ => word,
    }
}

/// Whether an entry named by `lines` is the subject, written as `words` (case kept: `n` and `N`
/// are two commands): the subject is the entry's name, with at most one more word ("the `N`
/// command", "the `-s` option"; a longer subject is about something else).
fn names(lines: &[String], words: &[String]) -> bool {
    words.len() <= 2 && lines.iter().any(|l| words.iter().any(|w| w == entry_name(l)))
}

/// The words of `subject` (lowercased, from the intent) as `message` writes them, without a
/// leading article.
fn subject_words(message: &str, subject: &str) -> Vec<String> {
    let lower = message.to_lowercase();
    // the subject as whole words ("r" is not the r of "for")
    let bounded = |i: usize| {
        let before = lower[..i].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = lower[i + subject.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        before && after
    };
    let at = lower.match_indices(subject).map(|(i, _)| i).find(|&i| bounded(i));
    let found = at.and_then(|i| message.get(i..i + subject.len())).filter(|r| r.to_lowercase() == subject);
    let mut words: Vec<String> = found
        .unwrap_or(subject)
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "?!.,;'\"`".contains(c)).to_string())
        .collect();
    if words.len() > 1 && defines::ARTICLES.contains(&words[0].to_lowercase().as_str()) {
        words.remove(0);
    }
    words
}

/// Characters next to a [`NAMING`] or [`APPOSITIONS`] phrase in which the subject is looked for.
const NAMING_WINDOW: usize = 80;

/// Words after which a sentence names what it has just described ("… a format called JSON").
const NAMING: &[&str] =
    &[" called ", " known as ", ", or ", " appelé ", " appelée ", " llamado ", " llamada ", " genannt "];

/// Phrases around a subject that say how to understand it ("it is best to think of a
/// dictionary as a set of key: value pairs"): the subject is between the two parts, within
/// [`NAMING_WINDOW`] characters.
const FRAMES: &[(&str, &str)] = &[("think of ", " as "), ("penser à ", " comme "), ("pensar en ", " como ")];

/// Words that open an apposition defining what precedes them ("… a virtual environment, a
/// self-contained directory tree …").
const APPOSITIONS: &[&str] = &[", a ", ", an ", ", un ", ", une ", ", una ", ", ein ", ", eine "];

/// What a sentence says around the phrases by which it may say what something is: terms after
/// a [`NAMING`] phrase, before an [`APPOSITIONS`] phrase, and before its first copula. They do
/// not depend on the question, so they are kept in the [`Analysis`]; [`Definers::define`]
/// matches them with a subject.
#[derive(Default)]
struct Definers {
    /// Terms of the [`NAMING_WINDOW`] after each naming phrase ("… a format called JSON").
    named: Vec<Vec<String>>,
    /// Terms of the [`NAMING_WINDOW`] before each apposition ("… a virtual environment, a …").
    apposed: Vec<Vec<String>>,
    /// Terms before the first copula ("X is …").
    opening: Option<Vec<String>>,
    /// Terms between the two parts of each [`FRAMES`] phrase ("think of X as …").
    framed: Vec<Vec<String>>,
    /// Terms of each item of a list of names after a colon ("two buffers: the pattern space
    /// and the hold space").
    listed: Vec<Vec<String>>,
}

impl Definers {
    fn of(text: &str, lang: Option<&str>) -> Definers {
        let lower = text.to_lowercase();
        let named = NAMING
            .iter()
            .filter_map(|n| lower.find(n).map(|i| &lower[i + n.len()..]))
            .map(|rest| analyze_as(lang, super::prefix(rest, NAMING_WINDOW)))
            .collect();
        let apposed = APPOSITIONS
            .iter()
            .filter_map(|a| lower.find(a).map(|i| &lower[..i]))
            .map(|before| {
                let start = before.char_indices().rev().nth(NAMING_WINDOW).map_or(0, |(i, _)| i);
                analyze_as(lang, &before[start..])
            })
            .collect();
        let first = |words: &[&str]| words.iter().filter_map(|c| lower.find(c)).min();
        let cut = match lang {
            Some("ja") => first(JA_COPULAS),
            _ => first(defines::COPULAS).into_iter().chain(first(DESCRIBING_VERBS)).min(),
        };
        let opening = cut.map(|cut| analyze_as(lang, defines::without_apposition(&lower[..cut])));
        let listed = defines::list_after_colon(&lower, lang).into_iter().map(|(_, terms)| terms).collect();
        let framed = FRAMES
            .iter()
            .filter_map(|(open, close)| {
                let rest = &lower[lower.find(open)? + open.len()..];
                let inside = super::prefix(rest, NAMING_WINDOW);
                Some(analyze_as(lang, &inside[..inside.find(close)?]))
            })
            .collect();
        Definers { named, apposed, opening, framed, listed }
    }

    /// Heap bytes of the kept terms, `strings` giving those of one list.
    fn bytes(&self, strings: impl Fn(&[String]) -> usize) -> usize {
        let lists = self.named.iter().chain(&self.apposed).chain(&self.opening).chain(&self.framed).chain(&self.listed);
        lists.map(|l| strings(l)).sum()
    }

    /// Whether the sentence says what the subject (`subject` terms) is: it names the subject
    /// right after a naming phrase or right before an apposition, a frame holds it and at most
    /// one more term ("think of X as"), the subject opens it (its
    /// terms first, and at most one more) before a copula, or an item of a list of names after
    /// a colon is the subject (its terms last, and at most one more before them).
    fn define(&self, subject: &[String]) -> bool {
        if subject.is_empty() {
            return false;
        }
        let all_in = |terms: &[String]| subject.iter().all(|t| terms.contains(t));
        self.named.iter().any(|terms| all_in(&terms[..terms.len().min(subject.len() + 1)]))
            || self.apposed.iter().any(|terms| all_in(&terms[terms.len().saturating_sub(subject.len())..]))
            || self.framed.iter().any(|terms| terms.len() <= subject.len() + 1 && all_in(terms))
            || self.listed.iter().any(|terms| {
                terms.len() <= subject.len() + 1 && all_in(&terms[terms.len().saturating_sub(subject.len())..])
            })
            || self.opening.as_ref().is_some_and(|terms| {
                terms.len() <= subject.len() + 1 && all_in(&terms[..terms.len().min(subject.len())])
            })
    }
}

/// The subject of a definition question (X of "What is X?"): its terms, and its words as
/// written.
struct Subject {
    terms: Vec<String>,
    words: Vec<String>,
}

/// The scoring of one question over the candidate sentences.
struct Scoring<'q> {
    intent: &'q Intent,
    subject: Option<Subject>,
    /// (term, weight) of the question.
    weights: Vec<(String, f32)>,
    /// Terms the heading bonus looks for: a definition's subject, else all the question's.
    focus: Vec<String>,
    /// Terms of a how-to question's verb; empty for other questions.
    verb_terms: Vec<String>,
    /// Terms of a how-to question's object, the task after its verb ("How do I write a class?":
    /// class); empty for other questions.
    object: Vec<String>,
    /// Summed weight of the question's terms.
    total: f32,
    rules: Rules,
}

impl Scoring<'_> {
    fn weight(&self, t: &str) -> f32 {
        weight_in(&self.weights, t)
    }

    /// Summed weight of the question's terms that `keep` accepts.
    fn weight_where(&self, keep: impl Fn(&String) -> bool) -> f32 {
        self.weights.iter().filter(|(t, _)| keep(t)).map(|(_, w)| w).sum()
    }

    /// Whether candidate `c` says what the subject is: the description of an entry that names
    /// it, or a sentence of the form "X is …" (never the description of another entry).
    fn says(&self, sections: &[Section], c: &Cand) -> bool {
        let Some(subject) = &self.subject else { return false };
        match entry(&sections[c.section].blocks, c.block, c.index) {
            Some(lines) => names(lines, &subject.words),
            None => sections[c.section].sentences[c.at].definers.define(&subject.terms),
        }
    }

    fn sentence_score(&self, c: &Cand) -> f32 {
        let body = self.weight_where(|t| c.terms.contains(t));
        let bonus = match &self.subject {
            Some(subject) if c.says => subject.terms.iter().map(|t| self.weight(t)).sum::<f32>().max(1.0),
            _ => 0.0,
        };
        body + bonus
    }

    /// Bonus of a section whose own heading names the question's focus: the weight of the focus
    /// terms it names, times the larger of the share of the heading they make up and (but for a
    /// definition) the share of the focus's weight they carry. A heading that names most of
    /// what a how-to or fact question asks is that question's section although it says more
    /// ("break and continue Statements, and else Clauses on Loops"); a definition's subject is
    /// one or two terms, which every heading naming it would then carry whole.
    fn heading_bonus(&self, s: &Section) -> f32 {
        if s.heading.is_empty() || !self.rules.heading_bonus {
            return 0.0;
        }
        let named: Vec<&String> = self.focus.iter().filter(|t| s.heading.contains(t)).collect();
        if self.rules.other_task && self.other_task(s, named.len()) {
            return 0.0;
        }
        let weight: f32 = named.iter().map(|t| self.weight(t)).sum();
        let mut share = named.len() as f32 / s.heading.len() as f32;
        if self.subject.is_none() {
            let focus: f32 = self.focus.iter().map(|t| self.weight(t)).sum();
            share = share.max(weight / focus.max(f32::EPSILON));
        }
        weight * share.min(1.0)
    }

    /// Whether the heading of section `s` (of which `named` terms are the question's focus)
    /// names another task than a how-to question's.
    fn other_task(&self, s: &Section, named: usize) -> bool {
        // a how-to heading that names none of the task's object and names something else is
        // another object's ("Reading and Writing Files" for "How do I write a class?")
        let of_object = self.object.iter().any(|t| s.heading.contains(t));
        if !self.object.is_empty() && !of_object && named < s.heading.len() {
            return true;
        }
        // a how-to heading that opens with another verb and names part of the task's object shows
        // another task on it ("Selecting lines by text matching" for "How do I replace only the
        // second match on a line?"); naming all of it, its verb may be the task's in other words
        // ("Executing modules as scripts" for "How do I run a module as a script?")
        let of_verb = self.verb_terms.iter().any(|t| s.heading.contains(t));
        let whole_object = self.object.iter().all(|t| s.heading.contains(t));
        s.action.is_some() && !self.verb_terms.is_empty() && !of_verb && !whole_object
    }

    /// Share of the question's weight that `found` accepts.
    fn coverage(&self, found: impl Fn(&String) -> bool) -> f32 {
        self.weight_where(found) / self.total.max(f32::EPSILON)
    }

    /// Share of the question's weight whose terms name one of `identifiers` (the terms of each
    /// one's parts) by two or more of its consecutive parts, written one after the other in the
    /// question (its stop words aside): "rainbow unicorn" names `RAINBOW_UNICORN_abc123`,
    /// "unicorn rainbow" does not.
    fn naming(&self, identifiers: &[&[String]]) -> f32 {
        let terms = &self.weights;
        let mut named = vec![false; terms.len()];
        for parts in identifiers {
            for (i, j) in (0..terms.len()).flat_map(|i| (0..parts.len()).map(move |j| (i, j))) {
                let run = (0..).take_while(|k| terms.get(i + k).zip(parts.get(j + k)).is_some_and(|(q, p)| q.0 == *p));
                let run = run.count();
                if run >= 2 {
                    named[i..i + run].iter_mut().for_each(|n| *n = true);
                }
            }
        }
        let weight: f32 = terms.iter().zip(named).filter(|(_, n)| *n).map(|((_, w), _)| w).sum();
        weight / self.total.max(f32::EPSILON)
    }
}

/// The sentences of every section; one that ends its chunk announcing a block only when
/// another retrieved chunk of its section opens with a code block (the chunks of a section are
/// one passage, cut where the chunker cut it).
fn candidates(sections: &[Section]) -> Vec<Cand> {
    let mut out = Vec::new();
    for (si, s) in sections.iter().enumerate() {
        let opens_with_code = |j: usize| matches!(sections[j].blocks.first(), Some(Block::Code(_)));
        let next = (0..sections.len()).find(|&j| j != si && sections[j].name == s.name && opens_with_code(j));
        for (at, c) in s.sentences.iter().enumerate() {
            let continued = if c.cut { next } else { None };
            if c.cut && continued.is_none() {
                continue;
            }
            let terms = c.terms.clone();
            out.push(Cand {
                section: si,
                at,
                block: c.block,
                index: c.index,
                terms,
                says: false,
                score: 0.0,
                continued,
            });
        }
    }
    out
}

/// The block (section, block) that candidate `c` announces, if any: the next block of its
/// chunk, or the first of the chunk that continues it.
fn announced(sections: &[Section], c: &Cand) -> Option<(usize, usize)> {
    match c.continued {
        Some(j) => Some((j, 0)),
        None => introduces_code(&sections[c.section].blocks, c.block, c.index).map(|b| (c.section, b)),
    }
}

fn scoring<'q>(message: &str, intent: &'q Intent, lang: Option<&str>, cands: &[Cand], rules: Rules) -> Scoring<'q> {
    let query = analyze_as(lang, message);
    let n = cands.len() as f32;
    let subject = match intent {
        Intent::Definition(x) => Some(Subject { terms: analyze_as(lang, x), words: subject_words(message, x) }),
        _ => None,
    };
    let weights: Vec<(String, f32)> = query
        .iter()
        .map(|t| {
            let df = cands.iter().filter(|c| c.terms.contains(t)).count() as f32;
            (t.clone(), 1.0 + ((n + 1.0) / (df + 1.0)).ln())
        })
        .collect();
    let focus = subject.as_ref().map_or(query, |s| s.terms.clone());
    let total = weights.iter().map(|(_, w)| w).sum();
    // a how-to's task is its verb, then its object ("write a class")
    let task = intent::task(message).filter(|_| matches!(intent, Intent::HowTo));
    let (verb_terms, object) = match task.as_deref().map(|t| t.split_once(' ').unwrap_or((t, ""))) {
        Some((word, rest)) => (analyze_as(lang, word), analyze_as(lang, rest)),
        None => (Vec::new(), Vec::new()),
    };
    Scoring { intent, subject, weights, focus, verb_terms, object, total, rules }
}

/// The weight of term `t` among the question's `weights` (0 when it is not one of its terms).
fn weight_in(weights: &[(String, f32)], t: &str) -> f32 {
    weights.iter().find(|(x, _)| x == t).map_or(0.0, |(_, w)| *w)
}

/// The passage answering `message` from `sources` (best first; `closeness`: how close the
/// question is to each by meaning, empty without an embedding model) read with weights `w`,
/// and the signals it was decided on.
pub fn answer(
    message: &str,
    intent: &Intent,
    sources: &[SourceRef],
    closeness: &[Closeness],
    lang: Option<&'static str>,
    w: &Weights,
) -> Reading {
    let sections: Vec<Section> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let closeness = closeness.get(i).unwrap_or(&FAR);
            Section { name: &s.name, analysis: super::cache::analysis(s, lang), closeness }
        })
        .collect();
    let priors = if w.rules.retrieval_prior { retrieval_priors(sources) } else { vec![1.0; sources.len()] };
    let (passage, explanation) = read(message, &w.rules.read_as(intent), &sections, &priors, lang, w);
    Reading { passage, explanation }
}

fn read(
    message: &str,
    intent: &Intent,
    sections: &[Section],
    priors: &[f32],
    lang: Option<&'static str>,
    w: &Weights,
) -> (Option<Passage>, Explanation) {
    let mut cands = candidates(sections);
    let sc = scoring(message, intent, lang, &cands, w.rules);
    if sc.weights.is_empty() || cands.is_empty() {
        return (None, Explanation::default());
    }
    let says: Vec<bool> = cands.iter().map(|c| sc.says(sections, c)).collect();
    for (c, says) in cands.iter_mut().zip(says) {
        c.says = says;
    }
    let semantic = closeness_scale(sections, &cands);
    let lexical: Vec<f32> = cands.iter().map(|c| sc.sentence_score(c)).collect();
    for (c, lexical) in cands.iter_mut().zip(&lexical) {
        // meaning counts in the question's weight: the candidate closest to the question weighs
        // `sentence_cosine` times all of its terms, the farthest nothing
        let semantic = sections[c.section].sentence_cosine(c.at).map_or(0.0, &semantic);
        c.score = (lexical + w.sentence_cosine * semantic * sc.total) * priors[c.section];
    }
    let explain = |chosen: &[&Cand], signals| {
        let sentences = explained(sections, &cands, &lexical, sc.total, chosen);
        Explanation { signals, sentences, answered: !chosen.is_empty() }
    };
    let Some(best) = best_section(sections, &cands, &sc, w) else { return (None, explain(&[], None)) };
    let chosen = choose(sections, &cands, &sc, best);
    let mut covered: Vec<&String> = chosen.iter().flat_map(|c| c.terms.iter()).collect();
    covered.extend(sections[best].path.iter());
    let needed = if sc.weights.len() >= 2 { MIN_COVERAGE } else { 0.99 };
    let identifiers: Vec<&[String]> =
        chosen.iter().flat_map(|c| sections[c.section].sentences[c.at].identifiers.iter().map(Vec::as_slice)).collect();
    let by_meaning = sections[best].closeness.chunk.is_some();
    let naming = if w.rules.naming && !by_meaning { sc.naming(&identifiers) } else { 0.0 };
    let coverage = (sc.coverage(|t| covered.contains(&t)) + naming) / needed;
    let sentence = chosen.iter().filter_map(|c| sections[c.section].sentence_cosine(c.at)).reduce(f32::max);
    let mut signals = Signals { coverage, cosine: sections[best].closeness.chunk, sentence, confidence: 0.0 };
    signals.confidence = w.confidence.of(&signals);
    if signals.confidence < 0.0 || chosen.is_empty() {
        return (None, explain(&[], Some(signals)));
    }
    let nearest_code = w.rules.nearest_code && matches!(intent, Intent::HowTo);
    (Some(render(sections, &chosen, nearest_code)), explain(&chosen, Some(signals)))
}

/// The best-scored [`EXPLAINED_SENTENCES`] of `cands` (whose lexical scores, in the question's
/// weight `total`, are `lexical`), best first, those of `chosen` marked quoted.
fn explained(
    sections: &[Section],
    cands: &[Cand],
    lexical: &[f32],
    total: f32,
    chosen: &[&Cand],
) -> Vec<ScoredSentence> {
    let mut order: Vec<usize> = (0..cands.len()).filter(|&i| cands[i].score > 0.0).collect();
    order.sort_by(|&a, &b| cands[b].score.total_cmp(&cands[a].score));
    order.truncate(EXPLAINED_SENTENCES);
    let total = total.max(f32::EPSILON);
    order
        .into_iter()
        .map(|i| {
            let c = &cands[i];
            ScoredSentence {
                source: c.section,
                text: sentence(sections, c).to_string(),
                lexical: lexical[i] / total,
                cosine: sections[c.section].sentence_cosine(c.at),
                score: c.score / total,
                quoted: chosen.iter().any(|x| std::ptr::eq(*x, c)),
            }
        })
        .collect()
}

/// The candidates' sentence cosines mapped onto 0..=1 between the lowest and the highest
/// (as the vector scores are in [`crate::search::fusion`]): what sets sentences apart is how
/// much closer one is than the others, not the model's baseline for text of the same domain.
fn closeness_scale(sections: &[Section], cands: &[Cand]) -> impl Fn(f32) -> f32 {
    let cosines = cands.iter().filter_map(|c| sections[c.section].sentence_cosine(c.at));
    let (low, high) = cosines.fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), x| (l.min(x), h.max(x)));
    move |x| if high > low { (x - low) / (high - low) } else { 0.0 }
}

/// How much each source's sentences count, from its retrieval score: the square root of its
/// share of the best source's score (sources retrieved almost as well weigh almost as much);
/// by rank (1, 0.91, 0.83, …) when the scores say nothing.
fn retrieval_priors(sources: &[SourceRef]) -> Vec<f32> {
    let top = sources.first().map_or(0.0, |s| s.score);
    sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if top > 0.0 && s.score.is_finite() {
                (s.score / top).clamp(0.0, 1.0).sqrt()
            } else {
                1.0 / (1.0 + 0.1 * i as f32)
            }
        })
        .collect()
}

/// The section whose best sentence and heading bonus, as a share of the question's weight, plus its cosine times
/// `w.section_cosine`, score highest; a section scoring nothing lexically is chosen only by its
/// cosine.
fn best_section(sections: &[Section], cands: &[Cand], sc: &Scoring, w: &Weights) -> Option<usize> {
    let mut best: Option<(f32, usize)> = None;
    for (si, s) in sections.iter().enumerate() {
        let top = cands.iter().filter(|c| c.section == si).map(|c| c.score).fold(0.0, f32::max);
        let semantic = w.section_cosine * s.closeness.chunk.unwrap_or(0.0);
        if top <= 0.0 && semantic <= 0.0 {
            continue;
        }
        // the heading of a how-to section names its task ("Numbering Lines"): it counts more
        let weight = if matches!(sc.intent, Intent::HowTo) { HOW_TO_HEADING_WEIGHT } else { 1.0 };
        let lexical = if top > 0.0 { top + weight * sc.heading_bonus(s) } else { 0.0 };
        let score = lexical / sc.total.max(f32::EPSILON) + semantic;
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, si));
        }
    }
    best.map(|(_, si)| si)
}

/// The sentences of section `best` to quote, in document order.
fn choose<'c>(sections: &[Section], cands: &'c [Cand], sc: &Scoring, best: usize) -> Vec<&'c Cand> {
    // the chunks of one section (same heading path) are one passage to choose from
    let same = |si: usize| sections[si].name == sections[best].name;
    let mut mine: Vec<&Cand> = cands.iter().filter(|c| same(c.section) && c.score > 0.0).collect();
    // a section chosen for its meaning alone, none of its sentences holding the question's
    // words, is quoted from its start
    if mine.is_empty() {
        mine = cands.iter().filter(|c| c.section == best).collect();
    }
    mine.sort_by(|a, b| b.score.total_cmp(&a.score).then((a.block, a.index).cmp(&(b.block, b.index))));
    let Some(anchor) = mine.first().copied() else { return Vec::new() };
    let mut chosen = vec![anchor];
    let mut chars = sentence(sections, anchor).len();
    let mut take = |c: &'c Cand, chosen: &mut Vec<&'c Cand>| {
        let len = sentence(sections, c).len();
        if chosen.len() < MAX_SENTENCES && chars + len <= MAX_PROSE_CHARS && !chosen.iter().any(|x| std::ptr::eq(*x, c))
        {
            chars += len;
            chosen.push(c);
        }
    };
    // the sentence after one that says what the subject is goes on saying it
    let after =
        cands.iter().find(|c| c.section == anchor.section && c.block == anchor.block && c.index == anchor.index + 1);
    if let (Some(next), true) = (after, sc.subject.is_some()) {
        take(next, &mut chosen);
    }
    for c in mine.iter().copied().skip(1).take_while(|c| c.score >= anchor.score * KEEP_RATIO) {
        take(c, &mut chosen);
    }
    chosen.sort_by_key(|c| (c.section, c.block, c.index));
    chosen
}

/// The code block to quote after the chosen sentences, if any: the block a chosen sentence
/// introduces, or (`nearest`: for "How do I") the section's block nearest the first chosen
/// sentence (at most [`CODE_REACH`] blocks away; after it rather than before at equal distance).
fn code_block(sections: &[Section], chosen: &[&Cand], nearest: bool) -> Option<(usize, usize)> {
    if let Some(b) = chosen.iter().find_map(|c| announced(sections, c)) {
        return Some(b);
    }
    let first = chosen.first().filter(|_| nearest)?;
    let blocks = &sections[first.section].blocks;
    let is_code = |b: usize| matches!(blocks.get(b), Some(Block::Code(_)));
    (1..=CODE_REACH)
        .flat_map(|d| [Some(first.block + d), first.block.checked_sub(d)])
        .flatten()
        .find(|b| is_code(*b))
        .map(|b| (first.section, b))
}

fn render(sections: &[Section], chosen: &[&Cand], nearest_code: bool) -> Passage {
    let code = code_block(sections, chosen, nearest_code).and_then(|(s, b)| match &sections[s].blocks[b] {
        Block::Code(text) if text.len() <= MAX_CODE_CHARS => Some((s, b, text.as_str())),
        _ => None,
    });
    let mut text = String::new();
    let mut last: Option<(usize, usize)> = None;
    let mut code_done = false;
    let mut said: Vec<&str> = Vec::new();
    for c in chosen {
        // the same sentence in two sources (a passage uploaded twice) is said once
        if said.contains(&sentence(sections, c)) {
            continue;
        }
        said.push(sentence(sections, c));
        // a sentence that announces a block is quoted only with it
        let intro = announced(sections, c);
        let quoted = |at: (usize, usize)| code.is_some_and(|(s, b, _)| (s, b) == at);
        if intro.is_some_and(|at| !quoted(at)) && chosen.len() > 1 {
            continue;
        }
        // the block goes before the first sentence that follows it (sections in source order)
        if let Some((s, b, block)) = code.filter(|(s, b, _)| !code_done && (*s, *b) < (c.section, c.block)) {
            push_code(&mut text, block);
            code_done = true;
            last = Some((s, b));
        }
        let joined = last == Some((c.section, c.block));
        text.push_str(if text.is_empty() {
            ""
        } else if joined {
            " "
        } else {
            "\n\n"
        });
        if let Some(lines) = entry(&sections[c.section].blocks, c.block, c.index) {
            let named: Vec<String> = lines.iter().map(|l| format!("`{l}`")).collect();
            text.push_str(&format!("{}: ", named.join(", ")));
        }
        text.push_str(sentence(sections, c));
        last = Some((c.section, c.block));
        // a block in the chunk that continues this one goes right after the sentence announcing it
        if let (Some((s, b, block)), Some(_)) =
            (code.filter(|_| !code_done), c.continued.filter(|_| intro.is_some_and(quoted)))
        {
            push_code(&mut text, block);
            code_done = true;
            last = Some((s, b));
        }
    }
    if let (Some((_, _, block)), false) = (code, code_done) {
        push_code(&mut text, block);
    }
    let mut used: Vec<usize> = chosen.iter().map(|c| c.section).collect();
    used.extend(code.map(|(s, _, _)| s));
    used.dedup();
    let mut names: Vec<&str> = Vec::new();
    for i in &used {
        if !names.contains(&sections[*i].name) {
            names.push(sections[*i].name);
        }
    }
    Passage { text: format!("{text}\n\n(From: {})", names.join("; ")), used }
}

fn push_code(text: &mut String, block: &str) {
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str("```\n");
    text.push_str(block);
    text.push_str("\n```");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prose resuming, in lower case after a code block, the sentence the block interrupted is
    /// never a candidate; a sentence opening with a name the block shows is one.
    #[test]
    fn a_sentence_resumed_after_its_code_block_is_never_quoted_alone() {
        let text = "To start the pump, type\n\n    pump start --slow\n\nwhich turns the motor and opens the \
                    valve.\n\n    >>> pump.stop()\n\npump can also be stopped from the panel.";
        let a = Analysis::of("Pumps", text, None);
        let quoted: Vec<&str> = a
            .sentences
            .iter()
            .map(|s| match &a.blocks[s.block] {
                Block::Prose(p) => p[s.index].as_str(),
                _ => "",
            })
            .collect();
        assert!(!quoted.iter().any(|s| s.starts_with("which turns")), "{quoted:?}");
        assert!(quoted.contains(&"pump can also be stopped from the panel."), "{quoted:?}");
        assert!(quoted.contains(&"To start the pump, type"), "{quoted:?}");
    }

    /// A sentence announcing a block counts the terms of the prose that resumes it after the
    /// block (the rest of the sentence), which is never a candidate itself.
    #[test]
    fn a_sentence_counts_the_rest_of_it_that_resumes_after_its_block() {
        let text = "The kiln fires twice. Then by adding this line at the end of the log:\n\n    \
                    seal(kiln)\n\nyou can make the batch glazed as well as fired.";
        let a = Analysis::of("Kilns", text, None);
        let intro = a.sentences.iter().find(|s| s.index == 1).expect("the announcing sentence");
        assert!(intro.terms.contains("glaze"), "{:?}", intro.terms);
        assert!(!a.sentences.iter().any(|s| s.block == 2), "the resumed prose is not quoted alone");
        let first = a.sentences.iter().find(|s| s.index == 0).expect("the first sentence");
        assert!(!first.terms.contains("glaze"));
    }

    /// A list of names after a colon says what each item is; a colon before clauses lists
    /// steps, and a list with no kind before it names nothing.
    #[test]
    fn a_list_of_names_after_a_colon_defines_its_items() {
        let defines = |sentence: &str, subject: &str| Definers::of(sentence, None).define(&analyze_as(None, subject));
        let list = "The bakery heats two ovens: the humid steam oven, and the hot dry oven.";
        assert!(defines(list, "dry oven") && defines(list, "steam oven"));
        assert!(!defines(list, "oven door"));
        let steps = "The baker works in order: first, she lights the dry oven at four, then she kneads.";
        assert!(!defines(steps, "dry oven"));
        assert!(!defines("Then: the steam oven, the dry oven.", "dry oven"));
    }

    /// Each rule's name switches that rule off and no other (the ablation measures one rule at a
    /// time); a name the reader does not know is refused.
    #[test]
    fn each_rule_is_switched_off_by_its_name_alone() {
        for name in Rules::NAMES {
            let off = Rules::ALL.without(name).expect(name);
            assert_ne!(off, Rules::ALL, "{name}");
            assert_eq!(off.without(name), Some(off), "{name}");
            for other in Rules::NAMES.iter().filter(|o| **o != name) {
                assert_ne!(off.without(other), Some(off), "{name} switched {other} off too");
            }
        }
        assert_eq!(Rules::ALL.without("comparison"), None);
        let section = Section {
            name: "Kitchen › Kettles",
            analysis: Arc::new(Analysis::of("Kitchen › Kettles", "Some text.", None)),
            closeness: &FAR,
        };
        let bonus =
            |rules| scoring("How do I descale kettles?", &Intent::HowTo, None, &[], rules).heading_bonus(&section);
        assert!(bonus(Rules::ALL) > 0.0);
        assert_eq!(bonus(Rules::ALL.without("heading_bonus").unwrap()), 0.0);
    }

    #[test]
    fn sentence_vectors_count_only_when_they_match_the_sentences_one_to_one() {
        let text = "Ab. The kettle boils water quickly. It switches itself off.";
        let (all, stale) = (
            Closeness { chunk: Some(0.5), sentences: vec![0.1, 0.2, 0.3] },
            Closeness { chunk: Some(0.5), sentences: vec![0.1, 0.2] },
        );
        let with =
            |closeness| Section { name: "Kettles", analysis: Arc::new(Analysis::of("Kettles", text, None)), closeness };
        let s = with(&all);
        // "Ab." is too short to quote, but has its vector: the candidates are the 2nd and 3rd
        assert_eq!((0..s.sentences.len()).map(|i| s.sentence_cosine(i)).collect::<Vec<_>>(), [Some(0.2), Some(0.3)]);
        assert_eq!(with(&stale).sentence_cosine(0), None, "stale vectors of other sentences");
    }

    #[test]
    fn a_how_to_heading_naming_the_verb_and_another_object_is_another_task_s() {
        let section = |name: &'static str| Section {
            name,
            analysis: Arc::new(Analysis::of(name, "Some text.", None)),
            closeness: &FAR,
        };
        let sc = scoring("How do I repair a kettle?", &Intent::HowTo, None, &[], Rules::ALL);
        assert_eq!(sc.object, analyze_as(None, "kettle"));
        assert_eq!(sc.heading_bonus(&section("Workshop › Repairing Bicycles")), 0.0);
        assert!(sc.heading_bonus(&section("Workshop › Kettle Parts")) > 0.0);
        assert!(sc.heading_bonus(&section("Workshop › Repairing Kettles")) > 0.0);
    }

    #[test]
    fn a_how_to_heading_opening_with_another_verb_on_part_of_the_object_is_another_task_s() {
        let section = |name: &'static str| Section {
            name,
            analysis: Arc::new(Analysis::of(name, "Some text.", None)),
            closeness: &FAR,
        };
        let sc = scoring("How do I descale the kettle lid?", &Intent::HowTo, None, &[], Rules::ALL);
        assert_eq!(sc.heading_bonus(&section("Kitchen › Polishing kettle spouts")), 0.0);
        // naming the whole object, its verb may be the task's in other words
        assert!(sc.heading_bonus(&section("Kitchen › Cleaning kettle lids")) > 0.0);
        assert!(sc.heading_bonus(&section("Kitchen › Descaling the kettle")) > 0.0);
        // a heading opening with a word that merely ends in "ing" opens with no verb
        assert!(sc.heading_bonus(&section("Kitchen › String on kettle spouts")) > 0.0);
    }

    /// A subject named again in an apposition between commas still opens the sentence.
    #[test]
    fn an_apposition_before_the_copula_keeps_the_subject_first() {
        let defines = |sentence: &str, subject: &str| Definers::of(sentence, None).define(&analyze_as(None, subject));
        let apposed = "Kiln cracks, also known as dunting, are the commonest fault of a firing.";
        assert!(defines(apposed, "kiln cracks"));
        assert!(!defines("When the kiln cools, cracks are the commonest fault.", "kiln"));
    }

    /// "Think of X as …" says what X is; the words after "as" are not its subject.
    #[test]
    fn a_frame_says_how_to_think_of_its_subject() {
        let defines = |sentence: &str, subject: &str| Definers::of(sentence, None).define(&analyze_as(None, subject));
        let framed = "It is best to think of a ledger as a list of dated entries, each with an amount.";
        assert!(defines(framed, "ledger"));
        assert!(!defines(framed, "list"));
        assert!(!defines("Think of the weather, the season and the hour as your guides.", "weather"));
    }

    /// Each paragraph of an entry's description opens with a sentence about the entry, up to
    /// the next entry; other sentences, and prose before any entry, describe none.
    #[test]
    fn an_entry_describes_every_paragraph_up_to_the_next_entry() {
        let blocks = blocks::parse(
            "Commands that quit.\n\nQ [EXIT-CODE]\nThis command accepts only one address.\n\n\
             This command is the same as q, but will not print. Like q, it returns a code.\n\n\
             R filename\nQueue a line of FILENAME to be read.",
        );
        let named = |block: usize, index: usize| entry(&blocks, block, index).map(|l| l[0].clone());
        let prose: Vec<usize> = (0..blocks.len()).filter(|&b| matches!(blocks[b], Block::Prose(_))).collect();
        assert_eq!(prose.len(), 4, "{blocks:?}");
        assert_eq!(named(prose[0], 0), None, "prose before any entry");
        assert_eq!(named(prose[1], 0).as_deref(), Some("Q [EXIT-CODE]"));
        assert_eq!(named(prose[2], 0).as_deref(), Some("Q [EXIT-CODE]"), "the description's next paragraph");
        assert_eq!(named(prose[2], 1), None, "not a paragraph's first sentence");
        assert_eq!(named(prose[3], 0).as_deref(), Some("R filename"));
    }
}
