//! Whether to answer: a logistic regression over the reader's general signals, fitted per
//! embedding model (and for BM25 alone) on a calibration set, its weights read from
//! `data/reader/MODEL.json`.
//!
//! The signals ([`Signals`]) say how close the question is to what the reader would quote (by
//! meaning: to the closest sentence of any candidate, to the quoted passage's closest sentence,
//! to the best-ranked chunk, and to the knowledge base as a whole: the mean of its cosines to
//! every chunk, how many there are, how far the closest stands above chance; by words: the
//! quoted passage's coverage, its heading's agreement, its chunk's retrieval standing) and how
//! much of the question the knowledge base never names (the share of its terms no document
//! holds, and with a model how much of its meaning rests on them: [`Fit::about`] tells with it
//! whether they are what the question asks about, so that the answer is at best led in). The
//! whole knowledge base matters because a cosine means different things in different ones:
//! the best of a long manual's hundreds of chunks stands high even for a question it does not
//! answer, the best of a short company profile's dozen stays low even for one it does. None of
//! them knows a word, a phrasing or
//! a document format. The fit ([`Fit`]) gives their weights and a bias; the score is the
//! logistic of their weighted sum, the probability that the knowledge base answers the
//! question. Below [`Fit::refuse`] the reader says "I don't know"; below [`Fit::uncertain`] it
//! leads the closest passage in as uncertain.
//!
//! `tests/answers/calibrate.py` fits the weights from `examples/answers --dump` files (the dev
//! set, the calibration set of business documents, FAQs and READMEs in four languages, and
//! their off-topic blocks: another corpus's questions asked of each replica; the positives
//! are the answerable questions whose quote holds the answer) and writes the file. A model without a file of its own is decided by the BM25 fit (the word signals alone;
//! [`for_model`] logs it once per model).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;

/// The fits shipped in the binary: `(catalog id, JSON)`; `bm25` is the fit for retrieval by
/// words alone.
const FITS: &[(&str, &str)] = &[
    ("bm25", include_str!("../../../data/reader/bm25.json")),
    ("all-minilm-l6-v2", include_str!("../../../data/reader/all-minilm-l6-v2.json")),
    ("multilingual-e5-small", include_str!("../../../data/reader/multilingual-e5-small.json")),
];

/// The id of the fit for retrieval by words alone.
pub const BM25: &str = "bm25";

/// The signals the decision weighs (each in 0..=1 but the cosines, in −1..=1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Signals {
    /// The question's cosine to the closest sentence of any candidate (with a model).
    pub sentence: Option<f32>,
    /// The question's cosine to the quoted passage's closest sentence (with a model).
    pub passage: Option<f32>,
    /// The question's cosine to the best-ranked chunk (with a model).
    pub chunk: Option<f32>,
    /// The quoted passage's coverage of the question's weighted terms.
    pub coverage: f32,
    /// The quoted chunk's own heading's agreement with the question (Dice of their terms).
    pub title: f32,
    /// The quoted chunk's retrieval score over the best chunk's.
    pub standing: f32,
    /// The share of the question's terms that no document of the knowledge base holds.
    pub unknown: f32,
    /// The mean of the question's cosines to all of the knowledge base's chunks (with a model).
    pub typical: Option<f32>,
    /// The natural logarithm of the number of chunks with vectors, that number held within
    /// [`FITTED_CHUNKS`] ([`breadth`]; with a model).
    pub breadth: Option<f32>,
    /// The closest chunk's cosine less what the closest of that many chunks would reach by
    /// chance, `mean + deviation · √(2 ln n)` of the question's cosines to all `n` of them: the
    /// best of a long manual's many chunks stands high by chance, the best of a short profile's
    /// few does not (with a model).
    pub excess: Option<f32>,
    /// How much of the question's meaning rests on its terms no document holds: `1 − cos` of
    /// the question's vector with and without them, 0 when none is unknown (with a model).
    pub unknown_meaning: Option<f32>,
}

/// The sizes of knowledge base, in chunks, that the shipped fits were made on (the calibration
/// set's dozen or so per replica, the manuals' 120 to 220): a knowledge base outside them counts
/// as the nearest edge ([`breadth`]), since a weight fitted on those says nothing of 3 chunks
/// or of 50,000.
pub const FITTED_CHUNKS: (f32, f32) = (10.0, 250.0);

/// [`Signals::breadth`] of a knowledge base of `chunks` chunks: `ln` of `chunks` held within
/// [`FITTED_CHUNKS`].
pub fn breadth(chunks: usize) -> f32 {
    (chunks as f32).clamp(FITTED_CHUNKS.0, FITTED_CHUNKS.1).ln()
}

impl Signals {
    /// The value of the signal named `name` (a fit's feature); `None` for an unknown name or a
    /// cosine that is missing.
    pub fn get(&self, name: &str) -> Option<f32> {
        match name {
            "sentence" => self.sentence,
            "passage" => self.passage,
            "chunk" => self.chunk,
            "coverage" => Some(self.coverage),
            "title" => Some(self.title),
            "standing" => Some(self.standing),
            "unknown" => Some(self.unknown),
            "typical" => self.typical,
            "breadth" => self.breadth,
            "excess" => self.excess,
            "unknownMeaning" => self.unknown_meaning,
            _ => None,
        }
    }
}

/// A fitted decision: the logistic regression's weights over named signals, and its two
/// thresholds on the probability.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Fit {
    /// The catalog id of the embedding model it was fitted for (`bm25`: words alone).
    pub model: String,
    /// The signals it weighs ([`Signals::get`]), in the order of `weights`.
    pub features: Vec<String>,
    pub weights: Vec<f32>,
    pub bias: f32,
    /// Probability below which the reader says "I don't know".
    pub refuse: f32,
    /// Probability below which the answer is led in as uncertain.
    pub uncertain: f32,
    /// The unknown meaning ([`Signals::unknown_meaning`]) at or above which the question's
    /// unknown terms are what it asks about (the answer at best led in), below which they are
    /// generic words of it; absent: every unknown term is ([`Fit::asks_about`]).
    #[serde(default)]
    pub about: Option<f32>,
    /// The decision for questions in another language than every document (JSON
    /// `otherLanguage`; absent: this one), fitted apart: their words are not the documents', so
    /// words cannot tell an answerable one from an off-topic one, and a threshold fitted on
    /// both kinds of question serves neither ([`Fit::for_question`]).
    #[serde(default, rename = "otherLanguage")]
    pub other_language: Option<Box<Fit>>,
}

impl Fit {
    /// The decision for a question in another language than every document
    /// (`other_language`: [`Fit::other_language`] when there is one) or not (this one).
    pub fn for_question(&self, other_language: bool) -> &Fit {
        self.other_language.as_deref().filter(|_| other_language).unwrap_or(self)
    }

    /// The probability that the knowledge base answers the question, from `s`; `None` when
    /// one of its features is missing from `s` (a cosine without vectors).
    pub fn score(&self, s: &Signals) -> Option<f32> {
        let mut z = self.bias;
        for (name, w) in self.features.iter().zip(&self.weights) {
            z += w * s.get(name)?;
        }
        Some(1.0 / (1.0 + (-z).exp()))
    }

    /// Whether the question's `unknown` terms (those no document holds) are what it asks about,
    /// so that the closest passage may not answer it: how much of its meaning rests on them
    /// ([`Signals::unknown_meaning`]) reaches [`Fit::about`], or, without either, any is unknown.
    pub fn asks_about(&self, s: &Signals, unknown: &[String]) -> bool {
        !unknown.is_empty() && self.about.zip(s.unknown_meaning).is_none_or(|(about, meaning)| meaning >= about)
    }

    /// Parses a fit file; an error names what is wrong (a feature no signal has, weights of
    /// another length, thresholds out of order).
    pub fn parse(json: &str) -> Result<Fit, FitError> {
        let fit: Fit = serde_json::from_str(json)?;
        fit.check()?;
        if let Some(other) = &fit.other_language {
            other.check()?;
        }
        Ok(fit)
    }

    /// Whether its features are signals and its weights and thresholds in shape ([`Fit::parse`]).
    fn check(&self) -> Result<(), FitError> {
        let some = Some(0.0);
        let (sentence, passage, chunk, typical, breadth, excess) = (some, some, some, some, some, some);
        let unknown_meaning = some;
        let probe =
            Signals { sentence, passage, chunk, typical, breadth, excess, unknown_meaning, ..Signals::default() };
        if let Some(bad) = self.features.iter().find(|f| probe.get(f).is_none()) {
            return Err(FitError::UnknownSignal { model: self.model.clone(), signal: bad.clone() });
        }
        let ordered = matches!(
            self.refuse.partial_cmp(&self.uncertain),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        );
        if self.features.len() != self.weights.len() || !ordered {
            return Err(FitError::Shape(self.model.clone()));
        }
        Ok(())
    }
}

/// Why a reader fit file is refused ([`Fit::parse`]).
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// Not the JSON of a fit.
    #[error("a reader fit: {0}")]
    Json(#[from] serde_json::Error),
    /// A feature no [`Signals`] field has.
    #[error("the reader fit of {model} weighs an unknown signal {signal:?}")]
    UnknownSignal { model: String, signal: String },
    /// Weights of another length than the features, or `refuse` above `uncertain`.
    #[error("the reader fit of {0}: weights or thresholds out of shape")]
    Shape(String),
}

/// Every shipped fit, by model id.
fn fits() -> &'static HashMap<&'static str, Fit> {
    static FITTED: OnceLock<HashMap<&'static str, Fit>> = OnceLock::new();
    FITTED.get_or_init(|| {
        FITS.iter().map(|(id, json)| (*id, Fit::parse(json).expect("a shipped reader fit parses (tested)"))).collect()
    })
}

/// The fit for answers retrieved with embedding model `model` (`None`: words alone): its own,
/// or the BM25 fit when it has none (logged once per model).
pub fn for_model(model: Option<&str>) -> &'static Fit {
    let fits = fits();
    if let Some(fit) = model.and_then(|m| fits.get(m)) {
        return fit;
    }
    if let Some(m) = model {
        static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
        if !warned.iter().any(|w| w == m) {
            warned.push(m.to_string());
            tracing::warn!(model = m, "the embedded reader has no decision fitted for this embedding model; it decides by words alone (the BM25 fit)");
        }
    }
    &fits[BM25]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_fit_parses_and_weighs_its_model_s_signals() {
        for (id, json) in FITS {
            let fit = Fit::parse(json).expect("parses");
            assert_eq!(&fit.model, id);
            let by_meaning = fit.features.iter().any(|f| ["sentence", "passage", "chunk"].contains(&f.as_str()));
            assert_eq!(by_meaning, *id != BM25, "{id}: {:?}", fit.features);
        }
        assert_eq!(for_model(Some("no-such-model")).model, BM25);
        assert_eq!(for_model(None).model, BM25);
    }

    #[test]
    fn the_score_rises_with_its_positive_weights_and_needs_every_feature() {
        let json = r#"{"model":"m","features":["coverage","sentence"],"weights":[2,4],"bias":-3,"refuse":0.2,"uncertain":0.5}"#;
        let fit = Fit::parse(json).expect("parses");
        let low = Signals { coverage: 0.1, sentence: Some(0.2), ..Signals::default() };
        let high = Signals { coverage: 0.9, sentence: Some(0.7), ..Signals::default() };
        assert!(fit.score(&low).unwrap() < fit.score(&high).unwrap());
        assert_eq!(fit.score(&Signals { coverage: 1.0, ..Signals::default() }), None);
        assert!(Fit::parse(&json.replace("coverage", "colour")).is_err());
        assert!(Fit::parse(&json.replace("0.2", "0.9")).is_err());
    }

    #[test]
    fn a_question_in_another_language_is_decided_by_the_fit_s_own_decision_for_such_questions() {
        let other = r#"{"model":"m","features":["sentence"],"weights":[1],"bias":0,"refuse":0.1,"uncertain":0.3}"#;
        let json = format!(
            r#"{{"model":"m","features":["coverage"],"weights":[1],"bias":0,"refuse":0.2,"uncertain":0.5,"otherLanguage":{other}}}"#
        );
        let fit = Fit::parse(&json).expect("parses");
        assert_eq!(fit.for_question(false).features, ["coverage"]);
        assert_eq!(fit.for_question(true).features, ["sentence"]);
        let alone = Fit::parse(other).expect("parses");
        assert_eq!(alone.for_question(true), &alone, "without one, its own decision");
        // the nested decision is checked as the outer one is
        assert!(Fit::parse(&json.replace("sentence", "colour")).is_err());
        // multilingual-e5-small ships one
        let e5 = for_model(Some("multilingual-e5-small"));
        assert!(e5.other_language.is_some() && !std::ptr::eq(e5.for_question(true), e5));
    }

    #[test]
    fn unknown_terms_are_what_the_question_asks_about_from_the_fit_s_meaning_on() {
        let json = r#"{"model":"m","features":["coverage"],"weights":[1],"bias":0,"refuse":0.2,"uncertain":0.5}"#;
        let every = Fit::parse(json).expect("parses");
        let about = Fit::parse(&json.replace("0.5}", "0.5,\"about\":0.05}")).expect("parses");
        assert_eq!(about.about, Some(0.05));
        let unknown = ["kubernet".to_string()];
        let (generic, subject) = (Some(0.02), Some(0.3));
        for (fit, meaning, asks) in [
            (&every, generic, true),
            (&every, None, true),
            (&about, generic, false),
            (&about, subject, true),
            (&about, Some(0.05), true),
            (&about, None, true),
        ] {
            let s = Signals { unknown_meaning: meaning, ..Signals::default() };
            assert_eq!(fit.asks_about(&s, &unknown), asks, "{:?} {meaning:?}", fit.about);
            assert!(!fit.asks_about(&s, &[]), "no unknown term, nothing asked about");
        }
    }
}
