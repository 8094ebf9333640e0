//! The embedded reader: which passage of the retrieved chunks answers, how much of it to quote,
//! and whether to answer at all.
//!
//! 1. **Candidates** are the passages ([`super::passage`]) of the best [`CANDIDATE_SOURCES`]
//!    retrieved chunks. Each is scored by four general signals, none of which knows a word,
//!    a phrasing, a grammar or a document format:
//!    - *meaning*: the question's cosine to the passage's closest sentence (the sentences'
//!      vectors are computed with their chunk's when it is indexed, never per question;
//!      [`Closeness`](crate::generate::Closeness)); absent without an embedding model;
//!    - *coverage*: the share of the question's terms (the index's analyzer) the passage holds,
//!      each weighted by its rarity among the candidates' passages (a term every passage holds
//!      tells them apart no more than none does), the chunk's heading path counting
//!      [`Weights::heading`] for a term the passage itself lacks;
//!    - *standing*: where retrieval put the passage's chunk, as its retrieval score over the
//!      best chunk's (so a chunk far behind the first counts for less than one just behind
//!      it; on the dev set this chose a chunk holding the key spans for 0.705 of the answerable
//!      questions, against 0.673 with `1 / (1 + rank)`, which sees only the order);
//!    - *title*: how much the chunk's own heading and the question say the same (the Dice
//!      coefficient of their terms): a section titled with what the question asks, no more.
//!
//!    The score is their weighted sum ([`Weights`], chosen on the dev set: `examples/answers
//!    --replay FILE --weights …`). A question in another language than every document
//!    ([`Evidence::other_language`], with a multilingual model) is scored by meaning alone,
//!    its closest sentence's cosine and twice its chunk's ([`Weights::score`]): its words are
//!    not the documents', so coverage and title count only the names both share (the
//!    company's, on every profile line) and standing is half a BM25 score on those words. On
//!    the cross-lingual calibration block (131 questions, both ways) that chose a right quote
//!    for 0.763 of them instead of 0.672 (English questions on French, German or Spanish
//!    text 0.686 → 0.721, French or German ones on English text 0.644 → 0.844). In a
//!    conversation, a candidate in the section the last answer quoted adds its standing once
//!    more ([`Weights::continuity`], `service::chat::retrieve_in_conversation`). The best
//!    passage is quoted; an equal score goes to the better-ranked chunk, then to the earlier
//!    passage.
//! 2. **The quote** is that passage and the ones after it in its chunk, as far as [`MAX_WORDS`]
//!    of prose allows, in the document's order with nothing skipped: code blocks whole (up to
//!    [`MAX_CODE_CHARS`]); a first passage longer than the budget is cut to whole sentences
//!    around its sentence closest to the question. The signals of step 1 are those of this
//!    span (what the visitor will read), so a short paragraph introducing an example scores
//!    with the example and the paragraph after it; of two spans that score the same, the one
//!    opening earlier is quoted (measured on the dev set: preferring the span that opens with
//!    the best-matching passage held the key spans for 0.61 of the answerable questions
//!    instead of 0.67, the context before it often being what states them). For the same
//!    reason the quote is cut around the span's best sentence (its question terms held and its
//!    cosine) with what comes before it (up to half the budget, more when what follows is
//!    short) and, when that reaches the chosen passage's start, all the passages before it in
//!    its chunk if they fit in that half: the words that open a section stay with the passage
//!    after them that answers, and a paragraph on another point is not put before it
//!    (the walkthrough's "How do I delete a key from it?"), the quote still one contiguous excerpt (dev set, all-MiniLM-L6-v2: keys held
//!    0.718 → 0.731, the calibration set unchanged).
//! 3. **Whether to answer** is decided from retrieval alone, by a logistic regression over
//!    the quoted passage's signals, the question's closeness to the best chunk and sentence
//!    by meaning, its closeness to the knowledge base as a whole (the mean of its cosines to
//!    every chunk, how many chunks there are, and how far the closest stands above what the
//!    closest of that many would reach by chance), and the share of its terms no document of
//!    the knowledge base holds, fitted per embedding model on a calibration set of many kinds
//!    of documents in four languages ([`decision`]). Below its `refuse` probability the knowledge base does not cover the
//!    question: "I don't know", no sources. Below its `uncertain` probability it answers with
//!    the closest passage after a short, honest lead-in ("The closest passage I have:"). An
//!    unknown term counts by the share of the question it is, weighed with the rest (the common
//!    words of the language, its Stopwords ISO list in `search::analyzers`, are never unknown
//!    terms), and a question with one is at best led in when the term is what it asks about:
//!    with an embedding model, when as much of its meaning rests on its unknown terms as the
//!    fit's `about` says ([`decision::Fit::asks_about`]; the question embedded without their
//!    words, [`Evidence::unknown_meaning`]): "nowadays" in a long question moves its vector by
//!    0.01, "Kubernetes" in "Does Acme connect to Kubernetes?" by far more; without a model or
//!    an `about`, always. A question in another language than every
//!    document ([`Evidence::other_language`]) has no unknown terms (its words are not the
//!    documents' words) and, found by meaning alone, is at best led in too.

use super::cache;
use super::decision::{self, Signals};
use super::passage::{Analysis, Part, Passage};
use crate::generate::Evidence;
use crate::search::analyze_as;
use crate::store::records::SourceRef;

/// Retrieved chunks whose passages are candidates (the best-ranked first).
pub const CANDIDATE_SOURCES: usize = 5;
/// Most words of prose (and list items) quoted.
pub const MAX_WORDS: usize = 200;
/// Longest code block quoted (characters); a longer one is left out.
pub const MAX_CODE_CHARS: usize = 1500;
/// Other sections cited after the quoted one, from the best-ranked chunks.
pub const MORE_SOURCES: usize = 2;

/// The reader's weights and thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Weight of *meaning* in a passage's score.
    pub meaning: f32,
    /// Weight of *coverage*.
    pub coverage: f32,
    /// Weight of *standing* (the chunk's retrieval score over the best chunk's).
    pub standing: f32,
    /// Weight of *title*: how much the chunk's own heading and the question say the same.
    pub title: f32,
    /// What a term found only in the chunk's heading path counts for, against 1 in the passage.
    pub heading: f32,
    /// Weight of the chunk's cosine to the question in the score of a question in another
    /// language than every document ([`Evidence::other_language`]), which meaning alone
    /// scores: its words are not the documents' words, so coverage and title count only
    /// shared names, and standing is half a BM25 score on those words ([`Weights::score`]).
    pub across_chunk: f32,
    /// Weight of *standing* once more for a candidate in the section the conversation's last
    /// answer quoted ([`Evidence::last_quoted`]): a follow-up continues its subject, as far as
    /// its own words also find that section (a question on a new subject, whose words find
    /// the old section far behind, is not pulled back to it).
    pub continuity: f32,
    /// The decision to use instead of the one fitted for the retrieval's model (to measure
    /// another fit: `examples/answers --fit FILE`); `None`: [`decision::for_model`].
    pub decision: Option<&'static decision::Fit>,
    /// Quote the candidate at this place of the score order instead of the best, answering
    /// whatever the decision (to measure each candidate's quote: `examples/answers
    /// --candidates FILE`); `None`: the best, as the decision says.
    pub pick: Option<usize>,
}

impl Weights {
    /// The weights the server answers with (how they were chosen: the module's docs).
    pub const FITTED: Weights = Weights {
        meaning: 1.0,
        coverage: 0.5,
        standing: 0.6,
        title: 0.5,
        heading: 0.5,
        across_chunk: 2.0,
        continuity: 1.0,
        decision: None,
        pick: None,
    };

    /// Candidate `c`'s score: meaning + coverage + standing + title, each weighted, or, for a
    /// question in another language than every document (`across`), meaning + the chunk's
    /// cosine weighted [`Weights::across_chunk`] (chosen on the cross-lingual calibration
    /// block: the module's docs).
    pub fn score(&self, c: &Candidate, across: bool) -> f32 {
        let meaning = c.meaning.map_or(0.0, |m| self.meaning * m);
        if across {
            meaning + self.across_chunk * c.chunk.unwrap_or(0.0)
        } else {
            meaning + self.coverage * c.coverage + self.standing * c.standing + self.title * c.title
        }
    }
}

/// How sure the reader is that the knowledge base covers the question: the signals of the
/// quoted passage and the fitted decision's probability ([`decision`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Confidence {
    pub signals: Signals,
    /// The fitted probability that the knowledge base answers the question (in 0..=1), which
    /// the decision compares with its fit's thresholds (when the model's fit needs a cosine the
    /// retrieval did not give, the BM25 fit decides: [`Confidence::fit`]).
    pub value: f32,
    /// The model id of the fit that decided (`bm25`: words alone).
    pub fit: &'static str,
}

/// What the reader decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// The passage answers.
    #[default]
    Answered,
    /// The closest passage, led in as uncertain.
    Uncertain,
    /// "I don't know": the knowledge base does not cover the question.
    Refused,
}

impl Verdict {
    /// Its name in the retrieval check's trace.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Answered => "answered",
            Verdict::Uncertain => "uncertain",
            Verdict::Refused => "refused",
        }
    }
}

/// A candidate passage and its signals, as the trace shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Index of its chunk among the sources (its retrieval rank, 0-based).
    pub source: usize,
    /// Index of the passage in its chunk.
    pub passage: usize,
    /// The passage's opening words.
    pub text: String,
    pub meaning: Option<f32>,
    pub coverage: f32,
    /// The question's cosine to its chunk (`None` without an embedding model).
    pub chunk: Option<f32>,
    /// Its chunk's retrieval score over the best chunk's ([`standing`]).
    pub standing: f32,
    /// Its chunk's heading's agreement with the question ([`agreement`]).
    pub title: f32,
    /// Its chunk is in the section the conversation's last answer quoted.
    pub continues: bool,
    pub score: f32,
    pub quoted: bool,
}

/// Why the reader answered as it did: every candidate (best score first), the confidence, the
/// question's terms the knowledge base never uses, and the decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explanation {
    pub candidates: Vec<Candidate>,
    pub confidence: Option<Confidence>,
    pub unknown: Vec<String>,
    /// The question is in a language none of the documents is written in ([`Evidence`]).
    pub other_language: bool,
    pub verdict: Verdict,
}

/// Candidates shown in a trace at most.
pub const EXPLAINED: usize = 8;

/// The reader's answer: the quote (without lead-in or source line) and the sources it cites,
/// the quoted one first.
#[derive(Debug, Clone)]
pub struct Quote {
    pub text: String,
    pub used: Vec<usize>,
    pub uncertain: bool,
}

/// Reads `sources` (best first) for `question`, with what retrieval found beside them
/// (`evidence`), terms in `lang`, weights `w`. `None` (with the explanation) when the
/// knowledge base does not cover the question.
pub fn read(
    question: &str,
    sources: &[SourceRef],
    evidence: &Evidence,
    lang: Option<&'static str>,
    w: &Weights,
) -> (Option<Quote>, Explanation) {
    let closeness = evidence.closeness;
    let asked = question_terms(question, lang);
    let shown = sources.len().min(CANDIDATE_SOURCES);
    let analyses: Vec<_> = sources[..shown].iter().map(|s| cache::analysis(s, lang)).collect();
    if asked.is_empty() || analyses.iter().all(|a| a.passages.is_empty()) {
        return (None, Explanation { verdict: Verdict::Refused, ..Explanation::default() });
    }
    let weights = rarity(&asked, &analyses);
    let title: Vec<f32> = analyses.iter().map(|a| agreement(&asked, &a.title)).collect();
    let standing: Vec<f32> = (0..analyses.len()).map(|s| standing(sources, s)).collect();
    let mut candidates = Vec::new();
    for (s, a) in analyses.iter().enumerate() {
        let cos = closeness.get(s).map(|c| c.sentences.as_slice()).unwrap_or_default();
        let chunk = closeness.get(s).and_then(|c| c.chunk);
        for p in 0..a.passages.len() {
            let quoted = &a.passages[p..span_end(&a.passages, p)];
            let meaning = closest(cos, quoted);
            let coverage = coverage(&asked, &weights, quoted, a, w.heading);
            let (standing, title, text) = (standing[s], title[s], a.passages[p].preview.clone());
            let (source, passage, quoted, score) = (s, p, false, 0.0);
            let continues =
                evidence.last_quoted.is_some_and(|(id, name)| sources[s].id == id && sources[s].name == name);
            let mut c = Candidate {
                source,
                passage,
                text,
                meaning,
                coverage,
                chunk,
                standing,
                title,
                continues,
                score,
                quoted,
            };
            c.score = w.score(&c, evidence.other_language);
            candidates.push(c);
        }
    }
    // as far as the question's own words find the section (its best chunk's standing), the
    // same for each of its passages, so that their own order stays
    let found = candidates.iter().filter(|c| c.continues).map(|c| c.standing).fold(0.0, f32::max);
    for c in candidates.iter_mut().filter(|c| c.continues) {
        c.score += w.continuity * found;
    }
    // the decision reads the passage the general score puts first (what its fit was fitted
    // on), also where meaning alone chooses the quote (a question in another language)
    let judged = if evidence.other_language {
        candidates.iter().min_by(|a, b| first(a, b, |c| w.score(c, false))).cloned()
    } else {
        None
    };
    candidates.sort_by(|a, b| first(a, b, |c| c.score));
    let chosen = w.pick.unwrap_or(0).min(candidates.len() - 1);
    candidates.swap(0, chosen);
    let best = candidates[0].clone();
    let unknown = evidence.unknown.len() as f32 / asked.len().max(evidence.unknown.len()) as f32;
    let judged = signals(evidence, judged.as_ref().unwrap_or(&best), unknown);
    let (confidence, mut verdict) = decide(evidence, judged, w.decision);
    if w.pick.is_some() {
        verdict = Verdict::Answered;
    }
    candidates[0].quoted = verdict != Verdict::Refused;
    candidates.truncate(EXPLAINED);
    let unknown = evidence.unknown.to_vec();
    let other_language = evidence.other_language;
    let explanation = Explanation { candidates, confidence: Some(confidence), unknown, other_language, verdict };
    if verdict == Verdict::Refused {
        return (None, explanation);
    }
    let a = &analyses[best.source];
    let cos = closeness.get(best.source).map(|c| c.sentences.as_slice()).unwrap_or_default();
    let text = quote(a, best.passage, &asked, &weights, cos);
    let used = cited(sources, best.source);
    (Some(Quote { text, used, uncertain: verdict == Verdict::Uncertain }), explanation)
}

/// The order of candidates, best first: the higher `score`, then the better-ranked chunk, then
/// the earlier passage.
fn first(a: &Candidate, b: &Candidate, score: impl Fn(&Candidate) -> f32) -> std::cmp::Ordering {
    score(b).total_cmp(&score(a)).then(a.source.cmp(&b.source)).then(a.passage.cmp(&b.passage))
}

/// The question's terms, each once, in order.
fn question_terms(question: &str, lang: Option<&str>) -> Vec<String> {
    let mut terms = analyze_as(lang, question);
    let mut seen = std::collections::HashSet::new();
    terms.retain(|t| seen.insert(t.clone()));
    terms
}

/// Each question term's weight: its rarity among the candidates' passages, `ln(1 + (n + 1) /
/// (df + 1))` for `n` passages of which `df` hold it.
fn rarity(asked: &[String], analyses: &[std::sync::Arc<Analysis>]) -> Vec<f32> {
    let passages: Vec<&Passage> = analyses.iter().flat_map(|a| a.passages.iter()).collect();
    let n = passages.len() as f32;
    asked
        .iter()
        .map(|t| {
            let df = passages.iter().filter(|p| p.terms.contains(t)).count() as f32;
            (1.0 + (n + 1.0) / (df + 1.0)).ln()
        })
        .collect()
}

/// The end of the passages a quote opening with passage `p` of `passages` spans: the next ones
/// while their words stay within [`MAX_WORDS`] (at least `p` itself).
fn span_end(passages: &[Passage], p: usize) -> usize {
    let mut words = passages[p].words;
    let mut end = p + 1;
    while end < passages.len() && words + passages[end].words <= MAX_WORDS {
        words += passages[end].words;
        end += 1;
    }
    end
}

/// The share of the question's weight `passages` hold, a term only in their chunk's heading
/// path counting `heading`.
fn coverage(asked: &[String], weights: &[f32], passages: &[Passage], a: &Analysis, heading: f32) -> f32 {
    let total: f32 = weights.iter().sum();
    let held: f32 = asked
        .iter()
        .zip(weights)
        .map(|(t, w)| {
            if passages.iter().any(|p| p.terms.contains(t)) {
                *w
            } else if a.heading.contains(t) {
                heading * w
            } else {
                0.0
            }
        })
        .sum();
    if total > 0.0 {
        held / total
    } else {
        0.0
    }
}

/// Where retrieval put chunk `s` of `sources`: its score relative to the best chunk's (in
/// 0..=1 as the scores fall), or `1 / (1 + s)` when the best score is not positive.
fn standing(sources: &[SourceRef], s: usize) -> f32 {
    let top = sources[0].score;
    if top > 0.0 {
        (sources[s].score / top).clamp(0.0, 1.0)
    } else {
        1.0 / (1.0 + s as f32)
    }
}

/// How much the question and a chunk's own heading `title` say the same: twice the terms they
/// share over the terms of both (the Dice coefficient), 0 for an empty heading.
fn agreement(asked: &[String], title: &super::terms::Terms) -> f32 {
    let shared = title.iter().filter(|t| asked.contains(t)).count();
    let all = asked.len() + title.len();
    if all == 0 {
        0.0
    } else {
        2.0 * shared as f32 / all as f32
    }
}

/// The question's cosine to the closest sentence of `passages` (`cos`: one per prose sentence
/// of their chunk); `None` when unknown.
fn closest(cos: &[f32], passages: &[Passage]) -> Option<f32> {
    let (first, last) = (passages.first()?, passages.last()?);
    cos.get(first.sentences.start..last.sentences.end)?.iter().copied().reduce(f32::max)
}

/// The decision's signals for quoting `best`, with `unknown` the share of the question's terms
/// no document holds and `unknown_meaning` how much of its meaning rests on them.
fn signals(evidence: &Evidence, best: &Candidate, unknown: f32) -> Signals {
    let (closeness, spread, unknown_meaning) = (evidence.closeness, evidence.spread, evidence.unknown_meaning);
    Signals {
        typical: spread.map(|s| s.mean),
        breadth: spread.map(|s| decision::breadth(s.rows)),
        excess: spread.map(|s| s.excess()),
        sentence: closeness.iter().flat_map(|c| c.sentences.iter().copied()).reduce(f32::max),
        passage: best.meaning,
        chunk: closeness.first().and_then(|c| c.chunk),
        coverage: best.coverage,
        title: best.title,
        standing: best.standing,
        unknown,
        unknown_meaning,
    }
}

/// The fitted decision ([`decision::for_model`], its decision for a question in another language
/// than the documents when it has one: [`decision::Fit::for_question`]) on `signals`: its
/// confidence and verdict. A retrieval without the cosines its model's fit weighs (vectors not
/// computed yet) is decided by the BM25 fit. `chosen`: a fit to use instead ([`Weights::decision`]). Without meaning,
/// a passage that holds none of the question's terms is refused whatever the fit says. An
/// answer is at best led in when a term the knowledge base never names is what the question
/// asks about ([`decision::Fit::asks_about`]: the closest passage may not answer it), and when
/// the question is in another language than the documents (no word confirms it: meaning alone).
fn decide(evidence: &Evidence, signals: Signals, chosen: Option<&'static decision::Fit>) -> (Confidence, Verdict) {
    let model = evidence.model.filter(|_| evidence.closeness.iter().any(|c| c.chunk.is_some()));
    let mut fit = chosen.unwrap_or_else(|| decision::for_model(model)).for_question(evidence.other_language);
    let value = fit.score(&signals).unwrap_or_else(|| {
        fit = decision::for_model(None);
        fit.score(&signals).expect("the BM25 fit weighs word signals only")
    });
    // by words alone, a passage holding no term of the question is no evidence at all
    let no_evidence = signals.coverage == 0.0 && signals.sentence.is_none();
    let unsure = fit.asks_about(&signals, evidence.unknown) || evidence.other_language;
    let verdict = if value < fit.refuse || no_evidence {
        Verdict::Refused
    } else if value < fit.uncertain || unsure {
        Verdict::Uncertain
    } else {
        Verdict::Answered
    };
    (Confidence { signals, value, fit: fit.model.as_str() }, verdict)
}

/// The sources an answer quoting `quoted` cites: it first, then up to [`MORE_SOURCES`] other
/// sections among the best-ranked candidates (a section once, however many of its chunks).
fn cited(sources: &[SourceRef], quoted: usize) -> Vec<usize> {
    let mut used = vec![quoted];
    for (i, s) in sources.iter().enumerate().take(CANDIDATE_SOURCES) {
        if used.len() > MORE_SOURCES {
            break;
        }
        if !used.iter().any(|u| sources[*u].name == s.name) {
            used.push(i);
        }
    }
    used
}

/// The quote of chunk `a` around its best sentence in the passages from `at` on
/// ([`span_end`]), within [`MAX_WORDS`]: the words that open the chunk, before `at`, may
/// introduce it ([`span`]).
fn quote(a: &Analysis, at: usize, asked: &[String], weights: &[f32], cos: &[f32]) -> String {
    let mut parts = parts_of(&a.passages[..at]);
    let opens = parts.len();
    parts.extend(parts_of(&a.passages[at..span_end(&a.passages, at)]));
    render(&window(&parts, opens, asked, weights, cos))
}

/// The parts of `passages` in order, each with the index of its first prose sentence in the
/// chunk.
fn parts_of(passages: &[Passage]) -> Vec<(&Part, usize)> {
    let mut parts = Vec::new();
    for passage in passages {
        let mut sentence = passage.sentences.start;
        for part in &passage.parts {
            parts.push((part, sentence));
            sentence += part.sentences();
        }
    }
    parts
}

/// A unit the budget counts, in order: a prose sentence (`index` in its part), or a whole list
/// or entry name; its words and its score (question terms held and closeness by meaning).
struct Unit {
    part: usize,
    index: usize,
    words: usize,
    score: f32,
    /// A prose sentence ending with a colon: it announces what follows it.
    announces: bool,
}

/// The units of `parts` ([`Unit`]).
fn units(parts: &[(&Part, usize)], asked: &[String], weights: &[f32], cos: &[f32]) -> Vec<Unit> {
    let mut units = Vec::new();
    for (i, (part, first)) in parts.iter().enumerate() {
        match part {
            Part::Prose(s) => units.extend(s.iter().enumerate().map(|(j, s)| {
                let held: f32 = asked.iter().zip(weights).filter(|(t, _)| s.terms.contains(t)).map(|(_, w)| w).sum();
                let score = held + cos.get(first + j).copied().unwrap_or(0.0);
                Unit { part: i, index: j, words: s.text.split_whitespace().count(), score, announces: s.announces() }
            })),
            Part::List(items) => {
                let words = items.iter().map(|t| t.split_whitespace().count()).sum();
                units.push(Unit { part: i, index: 0, words, score: 0.0, announces: false });
            }
            Part::Term(lines) => {
                units.push(Unit { part: i, index: 0, words: lines.len(), score: 0.0, announces: false })
            }
            Part::Code(_) => {}
        }
    }
    units
}

/// What the quote keeps of `parts`, whose best unit is among those from part `opens` on: the
/// units of [`span`], and the code blocks among them or right after them (when the prose
/// before the block is kept to its end), or the blocks alone of passages without prose.
fn window<'p>(
    parts: &[(&'p Part, usize)],
    opens: usize,
    asked: &[String],
    weights: &[f32],
    cos: &[f32],
) -> Vec<Kept<'p>> {
    let units = units(parts, asked, weights, cos);
    let from = match units.iter().position(|u| u.part >= opens) {
        Some(from) => from,
        // the quoted passages have no prose: their blocks alone
        None if opens > 0 => return window(&parts[opens..], 0, asked, weights, cos),
        None => units.len(),
    };
    let (start, mut end) = span(&units, from);
    // a sentence announcing what the quote does not hold (a block too long, a list past the
    // budget) is not its last words
    while end > start + 1 && units[end - 1].announces && !followed(parts, &units, end) {
        end -= 1;
    }
    let kept = |part: usize, index: usize| units[start..end].iter().any(|u| (u.part, u.index) == (part, index));
    // the parts the kept units reach: from the first kept one to the last, and the blocks that
    // directly follow the last when nothing of it was cut
    let mut first = units.get(start).map_or(0, |u| u.part);
    // the blocks that open the quote (a chunk cut before its example) when nothing before is cut
    if start == 0 {
        while first > 0 && matches!(parts[first - 1].0, Part::Code(_)) {
            first -= 1;
        }
    }
    // (a passage without prose: every part is a block, all kept)
    let mut last = if units.is_empty() { parts.len() } else { units[end - 1].part };
    if end == units.len() || units[end].part != last {
        while last + 1 < parts.len() && matches!(parts[last + 1].0, Part::Code(_)) {
            last += 1;
        }
    }
    let mut out = Vec::new();
    for (i, (part, _)) in parts.iter().enumerate().take(last + 1).skip(first) {
        match part {
            Part::Code(code) if code.len() <= MAX_CODE_CHARS => out.push(Kept::Code(code)),
            Part::Prose(s) => {
                let said: Vec<&str> =
                    s.iter().enumerate().filter(|(j, _)| kept(i, *j)).map(|(_, s)| s.text.as_str()).collect();
                if !said.is_empty() {
                    out.push(Kept::Prose(said.join(" ")));
                }
            }
            Part::List(items) if kept(i, 0) => out.push(Kept::List(items)),
            Part::Term(lines) if kept(i, 0) => out.push(Kept::Term(lines)),
            _ => {}
        }
    }
    out
}

/// Whether the quote of `units[..end]` goes on with what its last unit announces: the next
/// unit in the same passage run is a list kept whole, or the part after the last unit is a code
/// block short enough to quote.
fn followed(parts: &[(&Part, usize)], units: &[Unit], end: usize) -> bool {
    let last = &units[end - 1];
    let next_in_part = units.get(end).is_some_and(|u| u.part == last.part);
    !next_in_part && matches!(parts.get(last.part + 1), Some((Part::Code(code), _)) if code.len() <= MAX_CODE_CHARS)
}

/// The span `start..end` of `units` to keep: the best-scored unit from `from` on, what comes
/// before it from `from` on up to half of [`MAX_WORDS`] (a passage opens with what introduces
/// it) and, when that reaches `from`, the units before `from` too if all of them fit in that
/// half (the words that open the chunk), then what follows, then more before from `from` on,
/// as far as the budget allows.
fn span(units: &[Unit], from: usize) -> (usize, usize) {
    if from >= units.len() {
        return (from, from);
    }
    let best =
        (from..units.len()).max_by(|a, b| units[*a].score.total_cmp(&units[*b].score).then(b.cmp(a))).unwrap_or(from);
    let (mut start, mut end, mut words) = (best, best + 1, units[best].words);
    grow_back(units, from, MAX_WORDS / 2, &mut start, &mut words);
    let opening: usize = units[..from].iter().map(|u| u.words).sum();
    if start == from && words + opening <= MAX_WORDS / 2 {
        (start, words) = (0, words + opening);
    }
    while end < units.len() && words + units[end].words <= MAX_WORDS {
        words += units[end].words;
        end += 1;
    }
    grow_back(units, from, MAX_WORDS, &mut start, &mut words);
    (start, end)
}

/// Moves `start` back over `units`, not before `floor`, while the words stay within `limit`.
fn grow_back(units: &[Unit], floor: usize, limit: usize, start: &mut usize, words: &mut usize) {
    while *start > floor && *words + units[*start - 1].words <= limit {
        *start -= 1;
        *words += units[*start].words;
    }
}

/// A part of the quote.
enum Kept<'p> {
    Prose(String),
    List(&'p [String]),
    Term(&'p [String]),
    Code(&'p str),
}

/// The quote's text as the document wrote it: its parts apart by blank lines, a list's items
/// and kept lines one per line, an entry's names on their lines right above its description.
fn render(kept: &[Kept]) -> String {
    let mut text = String::new();
    let mut after_term = false;
    for k in kept {
        if !text.is_empty() {
            text.push_str(if after_term { "\n" } else { "\n\n" });
        }
        after_term = false;
        match k {
            Kept::Prose(p) => text.push_str(p),
            Kept::List(items) => text.push_str(&items.join("\n")),
            Kept::Term(lines) => {
                text.push_str(&lines.join("\n"));
                after_term = true;
            }
            Kept::Code(code) => {
                text.push_str("```\n");
                text.push_str(code);
                text.push_str("\n```");
            }
        }
    }
    text
}
