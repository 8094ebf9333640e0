//! Fitting the embedded reader's [`Weights`] on the `dev` split of the labelled dev set
//! (`examples/answers.rs --fit`; never on a held-out question), from what each question
//! retrieved with an embedding model:
//!
//! 1. `sentence_cosine` and `section_cosine`, by grid search: the pair whose answers, "I don't
//!    know" set aside (every question answered from its best section), cite an expected section
//!    and hold the keys most often; the smallest within [`GRID_TOLERANCE`] of the best.
//! 2. The confidence's weights, by logistic regression of "the answer cites an expected
//!    section" on the best section's signals (coverage, chunk cosine, sentence cosine):
//!    answers to answerable questions labelled by whether they are right, every unanswerable
//!    question labelled 0.
//! 3. Its `bias`, by calibrating one threshold on the unanswerable questions: the lowest
//!    threshold under which at least [`IDK_TARGET`] of them fall.
//!
//! Prints each step's figures and the weights, to be written into `Weights::FITTED`.

use std::collections::BTreeMap;

use replicad::generate::embedded::{Confidence, Rules, Signals, Weights};

use super::labelled::Question;
use super::{judge, Kept, Outcome};

/// Values of `sentence_cosine` and of `section_cosine` tried.
const SENTENCE_GRID: &[f32] = &[0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
const SECTION_GRID: &[f32] = &[0.0, 0.25, 0.5, 1.0];
/// How many fewer right sources and keys than the best the chosen pair may have (about 1 % of
/// them): beyond a point the grid is flat, and the smallest weights in it are chosen.
const GRID_TOLERANCE: usize = 2;
/// Share of the unanswerable `dev` questions the threshold must answer "I don't know".
const IDK_TARGET: f64 = 0.97;
/// Logistic regression: gradient steps, step size, L2 penalty.
const STEPS: usize = 20_000;
const RATE: f64 = 0.5;
const L2: f64 = 1e-3;

/// Weights `(sentence_cosine, section_cosine)` that never answer "I don't know" when a
/// section has a cosine.
pub fn always((sentence_cosine, section_cosine): (f32, f32)) -> Weights {
    let confidence = Confidence { coverage: 0.0, cosine: 0.0, sentence: 0.0, bias: 1.0 };
    Weights { sentence_cosine, section_cosine, confidence, rules: Rules::ALL }
}

/// The signals the confidence weighs, in the order of the fitted weights.
fn features(s: &Signals) -> Option<[f64; 3]> {
    let x = s.cosine?;
    Some([s.coverage as f64, x as f64, s.sentence.unwrap_or(x) as f64])
}

/// The fitted weights (printed with the figures that chose them).
pub fn fit(questions: &[Question], kept: &BTreeMap<String, Kept>) -> Weights {
    let dev: Vec<(&Question, &Kept)> =
        questions.iter().filter(|q| q.split == "dev").filter_map(|q| Some((q, kept.get(&q.id)?))).collect();
    assert!(
        dev.iter().any(|(_, k)| k.closeness.iter().any(|c| c.0.is_some())),
        "--fit needs the cosines of an embedding model (--embeddings DIR)"
    );
    let answerable = dev.iter().filter(|(q, _)| q.answerable()).count();
    let mut tried = Vec::new();
    for pair in SENTENCE_GRID.iter().flat_map(|&s| SECTION_GRID.iter().map(move |&c| (s, c))) {
        let right = dev
            .iter()
            .filter(|(q, _)| q.answerable())
            .map(|(q, k)| judge(q, k, &always(pair)).0)
            .map(|o| usize::from(o.expected_source) + usize::from(o.keys))
            .sum::<usize>();
        println!(
            "fit: sentence_cosine {:<5} section_cosine {:<5} source+keys {right} of {}",
            pair.0,
            pair.1,
            2 * answerable
        );
        tried.push((right, pair));
    }
    // the smallest weights within the tolerance of the best: the grid's top is flat
    let most = tried.iter().map(|(right, _)| *right).max().unwrap_or(0);
    let pair = tried.iter().find(|(right, _)| right + GRID_TOLERANCE >= most).map_or((0.0, 0.0), |(_, pair)| *pair);
    // every dev question read once with those weights: (question, outcome, signals)
    let read: Vec<(&Question, Outcome, Option<Signals>)> = dev
        .iter()
        .map(|(q, k)| {
            let (o, _, signals) = judge(q, k, &always(pair));
            (*q, o, signals)
        })
        .collect();
    // (features, label) of every dev question the reader weighed a section for
    let samples: Vec<([f64; 3], f64)> = read
        .iter()
        .filter_map(|(q, o, signals)| {
            let label = q.answerable() && o.expected_source;
            Some((features(signals.as_ref()?)?, f64::from(u8::from(label))))
        })
        .collect();
    let (w, c) = logistic(&samples);
    println!("fit: logistic over {} questions: {w:.3?}·(coverage, cosine, sentence) + {c:.3}", samples.len());
    let threshold = calibrated(&read, (w, c));
    let confidence =
        Confidence { coverage: w[0] as f32, cosine: w[1] as f32, sentence: w[2] as f32, bias: (c - threshold) as f32 };
    let fitted = Weights { sentence_cosine: pair.0, section_cosine: pair.1, confidence, rules: Rules::ALL };
    println!("fit: threshold {threshold:.3}\nfit: {fitted:?}");
    fitted
}

/// `(w, c)` of `P(label) = σ(w·x + c)` fitted to `(x, label)` samples by gradient descent on
/// the mean log loss (plus [`L2`] on `w`).
fn logistic(samples: &[([f64; 3], f64)]) -> ([f64; 3], f64) {
    let (mut w, mut c) = ([0.0; 3], 0.0);
    let n = samples.len().max(1) as f64;
    for _ in 0..STEPS {
        let (mut gw, mut gc) = (w.map(|wi| L2 * wi), 0.0);
        for (x, label) in samples {
            let z: f64 = w.iter().zip(x).map(|(a, b)| a * b).sum::<f64>() + c;
            let e = (1.0 / (1.0 + (-z).exp()) - label) / n;
            gw.iter_mut().zip(x).for_each(|(g, xi)| *g += e * xi);
            gc += e;
        }
        w.iter_mut().zip(gw).for_each(|(wi, g)| *wi -= RATE * g);
        c -= RATE * gc;
    }
    (w, c)
}

/// The lowest threshold on `w·features + c` under which [`IDK_TARGET`] of the unanswerable
/// `dev` questions (as `read`) fall, with the trade-off printed: each candidate's share of
/// unanswerable questions refused and of answerable ones answered right.
fn calibrated(read: &[(&Question, Outcome, Option<Signals>)], (w, c): ([f64; 3], f64)) -> f64 {
    let z = |s: &Signals| features(s).map(|x| w.iter().zip(x).map(|(a, b)| a * b).sum::<f64>() + c);
    let scored: Vec<(bool, bool, Option<f64>)> = read
        .iter()
        .map(|(q, o, signals)| {
            (q.answerable(), q.answerable() && o.expected_source && o.keys, signals.as_ref().and_then(z))
        })
        .collect();
    let mut candidates: Vec<f64> = scored.iter().filter(|s| !s.0).filter_map(|s| s.2).map(|z| z + 1e-3).collect();
    candidates.push(0.0);
    candidates.sort_by(f64::total_cmp);
    let unanswerable = scored.iter().filter(|s| !s.0).count().max(1) as f64;
    let answerable = scored.iter().filter(|s| s.0).count().max(1) as f64;
    let mut chosen = f64::INFINITY;
    for t in candidates {
        let refused = scored.iter().filter(|s| !s.0 && s.2.is_none_or(|z| z < t)).count() as f64 / unanswerable;
        let right = scored.iter().filter(|s| s.1 && s.2.is_some_and(|z| z >= t)).count() as f64 / answerable;
        println!("fit: threshold {t:>7.3}: unanswerable refused {refused:.3}, answerable right {right:.3}");
        if refused >= IDK_TARGET && t < chosen {
            chosen = t;
        }
    }
    chosen
}
