//! Answer quality and speed of the embedded generator, in-process (store + tantivy index in a
//! temporary directory per corpus, no HTTP): what `serve --demo` users get from
//! `POST …/chat/completions` with the default model.
//!
//! ```sh
//! cargo run --release --example answers                 # the table below, per corpus and split
//! cargo run --release --example answers -- --show dev   # … and every dev question's answer
//! cargo run --release --example answers -- --misses dev # … and the dev questions that failed
//! cargo run --release --example answers -- --save /tmp/sources.json  # … keeping what was retrieved
//! cargo run --example answers -- --replay /tmp/sources.json   # answers only, from kept sources
//! cargo run --release --example answers -- --ranks    # … and where the expected section ranks
//! cargo run --release --example answers -- --set heldout  # the held-out set instead
//! cargo run --release --example answers -- --embeddings DIR # hybrid retrieval (BM25 + vectors), as served
//! cargo run --release --example answers -- --embeddings DIR --floors tests/answers/floors.json  # CI's gate
//! cargo run --release --example answers -- --embeddings DIR --fit   # fits the reader's weights on dev
//! cargo run --example answers -- --replay /tmp/sources.json --always 0.5,0  # never "I don't know"
//! cargo run --example answers -- --replay /tmp/sources.json --without naming,heading_bonus  # rules off
//! cargo run --example answers -- --replay /tmp/sources.json --ablate  # each rule off in turn
//! ```
//!
//! `--fit` fits the embedded reader's `Weights` on the `dev` split of the dev set
//! (`common/reader_fit.rs`), prints them and answers with them; `--always S,C` answers every
//! question with `sentence_cosine` S and `section_cosine` C, "I don't know" set aside (to see
//! what the reader would quote). `--without R,…` answers with the reader's rules `R` off
//! (`Rules::NAMES`); `--ablate` answers once with every rule, then once with each rule off, and
//! prints, per rule, what the `all` row and the paraphrased questions lose without it.
//!
//! `--replay` skips indexing and retrieval (the generator alone, fast even in a debug build, for
//! iterating on it).
//!
//! Questions: `--set dev` (the default), `tests/answers/questions.json` over two corpora, the
//! Python tutorial (`data/sample/python-tutorial`) and the GNU sed manual (`data/sed-manual`);
//! `--set heldout`, `tests/answers/heldout/questions.json` over the Flask and SQLite
//! documentation (`tests/answers/heldout/*/docs`), never tuned on (see its README: measure it
//! at the end of a session, never while tuning). Each corpus is indexed as its own replica (one
//! entry per file, as the demo does).
//! Every question is retrieved (the best `chat::EMBEDDED_TOP_K` chunks, as the server does for
//! the embedded generator) and answered with
//! `generate::embedded::reply`. Measures:
//!
//! - **source**: share of answerable questions answered (not "I don't know") with a cited source
//!   whose heading path ends with one of the question's expected sections;
//! - **keys**: share of answerable questions whose answer contains every key span
//!   (case-insensitive, whitespace-normalised);
//! - **idk**: share of unanswerable questions answered "I don't know" with no source;
//! - **idkA**: share of answerable questions answered "I don't know";
//! - **idk5**: how many answerable questions were answered "I don't know" although an expected
//!   section was among the 5 best retrieved chunks;
//! - **top5**: share of answerable questions whose 5 best retrieved chunks hold an expected
//!   section (the part of the sources a routed model would get);
//! - **topk**: the same of all the chunks handed to the generator (the ceiling retrieval sets
//!   on **source**);
//! - **p50**: median time of the reader's answer (retrieval left out), in milliseconds.
//!
//! `--ranks` prints, for each answerable question whose sources lack an expected section, the
//! rank of the first chunk of one among the index's best 30 hits, and the titles of the best 5.
//!
//! Rows: per corpus and split, per corpus, per split, all, per question kind (`kind howto`, …)
//! and per phrasing (`phrasing lexical`, `phrasing paraphrase`: every held-out question, and the
//! dev set's paraphrased and near-domain unanswerable ones). In the dev
//! set the `dev` split is what the generator was tuned on; its `heldout` split (every third
//! question) was only measured while tuning, so it is not held out from the tuner's eyes as the
//! held-out set is.

#[path = "common/reader_fit.rs"]
mod fit;
#[path = "common/labelled.rs"]
mod labelled;

use std::collections::BTreeMap;
use std::time::Instant;

use labelled::{Kb, Question};
use replicad::generate::embedded::{reply_with, Rules, Signals, Weights};
use replicad::generate::{Closeness, Persona};
use replicad::service::chat;
use replicad::store::records::SourceRef;
use serde::{Deserialize, Serialize};

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// The outcome of one question.
struct Outcome {
    answered: bool,
    /// Whether an expected section is among the 5 best retrieved sources (answered or not).
    in_top5: bool,
    /// Whether an expected section is among the retrieved sources (answered or not).
    retrieved: bool,
    expected_source: bool,
    keys: bool,
    millis: f64,
}

/// What a question retrieved: its sources, best first, and how close the question is to each
/// by meaning (the cosine to its chunk and to each sentence; empty with BM25 alone).
#[derive(Clone, Default, Serialize, Deserialize)]
struct Kept {
    sources: Vec<SourceRef>,
    #[serde(default)]
    closeness: Vec<(Option<f32>, Vec<f32>)>,
}

impl Kept {
    fn closeness(&self) -> Vec<Closeness> {
        self.closeness
            .iter()
            .map(|(chunk, sentences)| Closeness { chunk: *chunk, sentences: sentences.clone() })
            .collect()
    }
}

/// The sources of `q` from `kb`, as the server retrieves them for the embedded generator.
async fn retrieve(kb: &Kb, q: &Question) -> Kept {
    let top = chat::EMBEDDED_TOP_K;
    let how = match std::env::var("FUSION_BM25_WEIGHT") {
        Ok(w) => replicad::search::fusion::Fusion::Convex { bm25_weight: w.parse().expect("weight") },
        Err(_) => chat::FUSION,
    };
    let asked = replicad::text::question::asked(&q.question);
    let found = chat::retrieve(&kb.store, &kb.search, kb.replica, None, asked, top, how).await.expect("retrieve");
    let closeness = found.iter().map(|r| (r.ranks.cosine, r.sentences.clone())).collect();
    Kept { closeness, sources: found.into_iter().map(|r| r.source).collect() }
}

/// The answer to `q` from `kept` read with weights `w`, judged; the reader's signals.
fn judge(q: &Question, kept: &Kept, w: &Weights) -> (Outcome, String, Option<Signals>) {
    let persona = Persona { name: "Tutor".into(), greeting: "Hello!".into(), ..Persona::default() };
    let started = Instant::now();
    let sources = &kept.sources;
    let (answer, explanation) = reply_with(&persona, &q.question, sources, &kept.closeness(), w);
    let (signals, answered) = (explanation.signals, explanation.answered);
    let millis = started.elapsed().as_secs_f64() * 1e3;
    let expected_source = answered && answer.used.iter().any(|i| q.expects(&sources[*i].name));
    let text = normalize(&answer.text);
    let keys = answered && q.keys.iter().all(|k| text.contains(&normalize(k)));
    let expected = |s: &SourceRef| q.expects(&s.name);
    let (in_top5, retrieved) = (sources.iter().take(5).any(expected), sources.iter().any(expected));
    (Outcome { answered, in_top5, retrieved, expected_source, keys, millis }, answer.text, signals)
}

/// Whether outcome `o` of `q` is right: an answerable question answered from an expected
/// section with every key, an unanswerable one not answered.
fn right(q: &Question, o: &Outcome) -> bool {
    if q.answerable() {
        o.expected_source && o.keys
    } else {
        !o.answered
    }
}

/// Prints where the first chunk of an expected section of `q` ranks among the index's best 30
/// hits, and the titles of the best 5.
async fn ranks(kb: &Kb, q: &Question) {
    let hits = kb.search.search(kb.replica, &q.question, 30).expect("search");
    let titles = kb.titles(hits.iter().map(|h| (h.entry, h.chunk)).collect()).await;
    let rank = titles.iter().position(|t| q.expects(t));
    println!("rank {:>4} {} {} {:?}", rank.map_or("-".into(), |r| (r + 1).to_string()), q.id, q.question, q.sections);
    for t in titles.iter().take(5) {
        println!("           {t}");
    }
}

/// Sums of one group of questions.
#[derive(Default)]
struct Tally {
    answerable: usize,
    source: usize,
    in_top5: usize,
    retrieved: usize,
    keys: usize,
    /// Answerable questions answered "I don't know": all, and those with an expected section in the top 5.
    idk_answerable: usize,
    idk_top5: usize,
    unanswerable: usize,
    idk: usize,
    millis: Vec<f64>,
}

impl Tally {
    fn add(&mut self, q: &Question, o: &Outcome) {
        if !q.answerable() {
            self.unanswerable += 1;
            self.idk += usize::from(!o.answered);
        } else {
            self.answerable += 1;
            self.source += usize::from(o.expected_source);
            self.in_top5 += usize::from(o.in_top5);
            self.retrieved += usize::from(o.retrieved);
            self.keys += usize::from(o.keys);
            self.idk_answerable += usize::from(!o.answered);
            self.idk_top5 += usize::from(!o.answered && o.in_top5);
        }
        self.millis.push(o.millis);
    }

    fn row(&mut self, name: &str) {
        let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        self.millis.sort_by(f64::total_cmp);
        let p50 = self.millis.get(self.millis.len() / 2).copied().unwrap_or(0.0);
        println!(
            "{name:<20} {:>4} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>5} {:>5} {:>6.3} {:>8.2}",
            self.answerable,
            share(self.in_top5, self.answerable),
            share(self.retrieved, self.answerable),
            share(self.source, self.answerable),
            share(self.keys, self.answerable),
            share(self.idk_answerable, self.answerable),
            self.idk_top5,
            self.unanswerable,
            share(self.idk, self.unanswerable),
            p50
        );
    }
}

/// The value following the flag `name` in the command line.
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (show, only) = (flag(&args, "--show"), flag(&args, "--misses"));
    let replay: Option<BTreeMap<String, Kept>> = flag(&args, "--replay")
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).expect("kept sources")).expect("sources JSON"));
    let mut kept: BTreeMap<String, Kept> = BTreeMap::new();
    let labelled = labelled::load(&args);
    let listed = |s: &Option<String>, q: &Question| s.as_deref().is_some_and(|s| s == q.split || s == "all");
    for (name, dir) in &labelled.corpora {
        let kb = if replay.is_none() { Some(Kb::open(dir, labelled::embedders(&args)).await) } else { None };
        for q in labelled.questions.iter().filter(|q| &q.corpus == name) {
            if only.is_some() && !listed(&only, q) {
                continue;
            }
            let found = match (&kb, &replay) {
                (Some(kb), _) => retrieve(kb, q).await,
                (None, Some(r)) => r.get(&q.id).cloned().unwrap_or_default(),
                (None, None) => unreachable!("a knowledge base is opened unless replaying"),
            };
            if let (Some(kb), true) = (&kb, args.iter().any(|a| a == "--ranks")) {
                if q.answerable() && !found.sources.iter().any(|s| q.expects(&s.name)) {
                    ranks(kb, q).await;
                }
            }
            kept.insert(q.id.clone(), found);
        }
    }
    if let Some(f) = flag(&args, "--save") {
        std::fs::write(f, serde_json::to_string(&kept).expect("JSON")).expect("write kept sources");
    }
    let mut w = if args.iter().any(|a| a == "--fit") { fit::fit(&labelled.questions, &kept) } else { Weights::FITTED };
    if let Some(g) = flag(&args, "--always") {
        let (s, c) = g.split_once(',').expect("--always SENTENCE,SECTION");
        w = fit::always((s.parse().expect("sentence_cosine"), c.parse().expect("section_cosine")));
    }
    for name in flag(&args, "--without").iter().flat_map(|l| l.split(',')) {
        w.rules = w.rules.without(name).unwrap_or_else(|| panic!("--without {name}: one of {:?}", Rules::NAMES));
    }
    if args.iter().any(|a| a == "--ablate") {
        return ablate(&labelled.questions, &kept, &w);
    }
    let mut tallies = tally(&labelled.questions, &kept, &w, |q, o, text, signals| {
        if listed(&show, q) || (only.is_some() && !right(q, o)) {
            let verdict = if right(q, o) { "ok" } else { "MISS" };
            println!("--- {} [{}] {} → {verdict} {signals:?}\n{text}\n", q.id, q.kind, q.question);
        }
    });
    println!(
        "{:<20} {:>4} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>5} {:>6} {:>8}",
        "group", "ans", "top5", "topk", "source", "keys", "idkA", "idk5", "unans", "idk", "p50 ms"
    );
    for (name, t) in &mut tallies {
        t.row(name);
    }
    if let Some(f) = flag(&args, "--floors") {
        check_floors(&f, &args, &tallies["all"]);
    }
}

/// The tallies of every group of `questions` answered from `kept` with weights `w`; `each` sees
/// every question's outcome, answer and signals.
fn tally(
    questions: &[Question],
    kept: &BTreeMap<String, Kept>,
    w: &Weights,
    mut each: impl FnMut(&Question, &Outcome, &str, Option<Signals>),
) -> BTreeMap<String, Tally> {
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for q in questions.iter().filter(|q| kept.contains_key(&q.id)) {
        let (o, text, signals) = judge(q, &kept[&q.id], w);
        each(q, &o, &text, signals);
        for group in q.groups() {
            tallies.entry(group).or_default().add(q, &o);
        }
    }
    tallies
}

/// The ablation of the reader's rules: `questions` answered from `kept` with weights `w`, then
/// with each rule off in turn; per rule, the `all` row's right answers (answerable ones citing
/// an expected section with every key, unanswerable ones "I don't know"), source, keys and idk,
/// and the paraphrased questions' keys, each beside what `w` reaches.
fn ablate(questions: &[Question], kept: &BTreeMap<String, Kept>, w: &Weights) {
    let measure = |w: &Weights| {
        let mut right_answers = 0;
        let tallies = tally(questions, kept, w, |q, o, _, _| right_answers += usize::from(right(q, o)));
        let share = |t: Option<&Tally>, n: fn(&Tally) -> (usize, usize)| {
            t.map_or(0.0, |t| n(t).0 as f64 / n(t).1.max(1) as f64)
        };
        let (all, para) = (tallies.get("all"), tallies.get("phrasing paraphrase"));
        [
            right_answers as f64,
            share(all, |t| (t.source, t.answerable)),
            share(all, |t| (t.keys, t.answerable)),
            share(all, |t| (t.idk, t.unanswerable)),
            share(para, |t| (t.keys, t.answerable)),
        ]
    };
    let base = measure(w);
    println!("{:<16} {:>6} {:>7} {:>7} {:>7} {:>9}", "without", "right", "source", "keys", "idk", "para keys");
    println!(
        "{:<16} {:>6} {:>7.3} {:>7.3} {:>7.3} {:>9.3}",
        "(all rules)", base[0], base[1], base[2], base[3], base[4]
    );
    for name in Rules::NAMES {
        let Some(rules) = w.rules.without(name) else { continue };
        let m = measure(&Weights { rules, ..*w });
        let d: Vec<f64> = m.iter().zip(&base).map(|(m, b)| m - b).collect();
        println!("{name:<16} {:>+6} {:>+7.3} {:>+7.3} {:>+7.3} {:>+9.3}", d[0], d[1], d[2], d[3], d[4]);
    }
}

/// The regression gate of CI: exits 1, naming each measure below its floor, when the `all` row
/// falls under the floors of this set (`--set`) in `file` (`{"dev": {"source": 0.9, …}, …}`;
/// measures `top5`, `source`, `keys`, `idk`).
fn check_floors(file: &str, args: &[String], all: &Tally) {
    let floors: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).expect("floors file")).expect("floors JSON");
    let set = flag(args, "--set").unwrap_or_else(|| "dev".into());
    let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    let measured = [
        ("top5", share(all.in_top5, all.answerable)),
        ("source", share(all.source, all.answerable)),
        ("keys", share(all.keys, all.answerable)),
        ("idk", share(all.idk, all.unanswerable)),
    ];
    let mut below = Vec::new();
    for (name, value) in measured {
        let floor = floors[&set][name].as_f64().unwrap_or_else(|| panic!("{file}: no floor {set}.{name}"));
        if value < floor {
            below.push(format!("{name} {value:.3} < floor {floor:.3}"));
        }
    }
    if !below.is_empty() {
        eprintln!("answers on the {set} set fell below their floors ({file}): {}", below.join("; "));
        std::process::exit(1);
    }
    println!("answers on the {set} set hold their floors ({file})");
}
