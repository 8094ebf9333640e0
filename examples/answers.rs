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
//! cargo run --release --example answers -- --set heldout  # a held-out set instead (heldout, heldout3)
//! cargo run --release --example answers -- --offtopic      # the set's off-topic block
//! cargo run --release --example answers -- --and-offtopic  # the set, then its off-topic block (indexed once)
//! cargo run --release --example answers -- --set followups   # conversations, each turn after the one before
//! cargo run --release --example answers -- --set calibration --conversations  # the calibration set's
//! cargo run --release --example answers -- --set followups --stored-history  # … as a stored history gives the turn before
//! cargo run --release --example answers -- --embeddings DIR # hybrid retrieval (BM25 + vectors), as served
//! cargo run --example answers -- --embeddings DIR --floors tests/answers/floors.json  # CI's gate (dev profile: Cargo.toml optimises the kernels)
//! cargo run --release --example answers -- --embeddings CATALOG.json --llm-upstream NAME=URL  # an embeddings server's model
//! cargo run --example answers -- --replay /tmp/sources.json --weights 1,0.5,0.6,0.5,0.5
//! cargo run --example answers -- --replay /tmp/sources.json --dump /tmp/outcomes.jsonl
//! cargo run --example answers -- --replay /tmp/sources.json --fit /tmp/fit.json
//! ```
//!
//! `--weights M,C,S,T,H[,X]` scores passages with other reader weights than `Weights::FITTED`
//! (`generate::embedded::reader`); `--fit FILE` decides with another fitted decision than the
//! one shipped for the model (`data/reader/MODEL.json`); `--dump FILE` writes one JSON line per
//! question (its outcome, the decision's signals and its probability) for fitting the decision
//! (`tests/answers/calibrate.py`).
//! `--replay` skips indexing and retrieval (the generator alone, fast even in a debug build).
//!
//! Questions: `--set dev` (the default), `tests/answers/questions.json` over two corpora, the
//! Python tutorial (`data/sample/python-tutorial`) and the GNU sed manual (`data/sed-manual`);
//! `--set calibration`, business documents, FAQs and READMEs in four languages that the
//! reader's decision is fitted on with dev (`tests/answers/calibrate.py`); `--set business2`,
//! six more organizations' business documents in three languages, written blind (tuned on,
//! not fitted on);
//! `--set calibration-crosslingual` and `--set dev-crosslingual`, questions of those two in
//! another language than their documents (tuned on, not frozen); `--set heldout`,
//! `heldout3`, `heldout4` (business documents of twelve organizations) and `crosslingual`
//! (questions in another language than their documents), `tests/answers/SET/questions.json`
//! over documents nobody tuned for, frozen (their READMEs: measure them at the end of a
//! session, never while tuning); `--set followups`, `tests/answers/followups/conversations.json`,
//! conversations whose every turn is asked after the one before it (rows `kind followup` and
//! `kind newsubject`; frozen too). A turn is read as when the client sends the conversation's
//! turns itself (the turn before's quote found by reading its question again), or with
//! `--stored-history` as the widget, the web page and the messengers ask (the section the
//! turn before's answer quoted, as the server stores it with the answer). `--offtopic` asks each corpus's answerable questions of the next corpus's replica
//! instead: every one must be refused. Each corpus is indexed as its own replica (one entry per
//! file, as the demo does, its language detected). Every question is retrieved (the best
//! `chat::EMBEDDED_TOP_K` chunks, read in its conversation as the server does for the embedded
//! generator: `chat::retrieve_in_conversation`) and answered
//! with `generate::embedded::reply_with`. Measures:
//!
//! - **top5**: share of answerable questions whose 5 best retrieved chunks hold an expected
//!   section;
//! - **source**: share of answerable questions answered (not "I don't know") quoting an expected
//!   section (the first cited source is the quoted one);
//! - **chunk**: share of answerable questions whose quoted chunk holds every key span;
//! - **keys**: share of answerable questions whose answer holds every key span
//!   (case-insensitive, whitespace-normalised);
//! - **idkA**: share of answerable questions answered "I don't know";
//! - **lead**: share of answers (to any question) led in as uncertain;
//! - **idk**: share of unanswerable questions answered "I don't know"; **idk|lead**: refused or
//!   led in;
//! - **mark**: answers showing an inline-code backtick, a bracket or a comma more often than
//!   the chunk they quote holds it (the fences around code the reader shows as code, the
//!   lead-in and the source line aside): a count, which must be 0;
//! - **cont**: answers that are not one contiguous excerpt of their quoted source (after the
//!   lead-in, before the source line; letters and digits of the chunk as the reader reads it,
//!   without footnote references and emphasis marks): a count, which must be 0;
//! - **p50**: median time of the reader's answer (retrieval left out), in milliseconds.
//!
//! Rows: per corpus and split, per corpus, per split, all, per question kind and per phrasing.

#[path = "common/labelled.rs"]
mod labelled;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Instant;

use labelled::{Kb, Question};
use replicad::generate::embedded::{lead_in, reply_with, Confidence, Fit, Verdict, Weights};
use replicad::generate::{Closeness, Evidence, Persona, Spread};
use replicad::service::chat;
use replicad::store::records::SourceRef;
use serde::{Deserialize, Serialize};

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Letters and digits of `s`, lower-cased: what the contiguity check compares.
fn letters(s: &str) -> String {
    s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// Letters and digits of a chunk's text as the reader reads it (`text::blocks`: footnote
/// references and emphasis marks left out), for the contiguity check.
fn read(content: &str) -> String {
    use replicad::text::blocks::{parse, Block};
    let parts = parse(content).into_iter().map(|b| match b {
        Block::Prose(s) | Block::Term(s) => s.join(" "),
        Block::Code(c) => c,
    });
    letters(&parts.collect::<Vec<_>>().join(" "))
}

/// Marks the reader must never add: inline code, brackets, joining commas. The quote (without
/// the fences around code the reader shows as code) may hold each of them at most as often as
/// the text of the chunk it quotes.
const MARKS: [char; 4] = ['`', '[', ']', ','];

/// Whether `quote` holds a mark of [`MARKS`] more often than `content`, the chunk it quotes.
fn adds_markup(quote: &str, content: &str) -> bool {
    let fences_out: String =
        quote.lines().filter(|l| !l.trim_start().starts_with("```")).collect::<Vec<_>>().join("\n");
    let count = |s: &str, m: char| s.chars().filter(|c| *c == m).count();
    MARKS.iter().any(|&m| count(&fences_out, m) > count(content, m))
}

/// The outcome of one question.
struct Outcome {
    answered: bool,
    uncertain: bool,
    /// Whether an expected section is among the 5 best retrieved sources (answered or not).
    in_top5: bool,
    expected_source: bool,
    /// Whether the quoted chunk holds every key span.
    chunk_keys: bool,
    keys: bool,
    /// Whether the answer is one contiguous excerpt of its quoted source.
    contiguous: bool,
    /// Whether the answer shows a mark its source lacks ([`adds_markup`]).
    markup: bool,
    millis: f64,
}

/// What a question retrieved: its sources, best first, how close the question is to each
/// by meaning (the cosine to its chunk and to each sentence; empty with BM25 alone), and its
/// terms the knowledge base never uses.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Kept {
    sources: Vec<SourceRef>,
    #[serde(default)]
    closeness: Vec<(Option<f32>, Vec<f32>)>,
    #[serde(default)]
    unknown: Vec<String>,
    /// The question is in a language none of the documents is written in.
    #[serde(default)]
    other_language: bool,
    /// The catalog id of the embedding model that retrieved them (`None`: BM25 alone).
    #[serde(default)]
    model: Option<String>,
    /// The question the reader reads when it is not the one asked: read in its conversation,
    /// with the one before it (`chat::retrieve_in_conversation`).
    #[serde(default)]
    read: Option<String>,
    /// How close the question is to all of the knowledge base's chunks: mean, standard
    /// deviation and largest cosine (`None`: BM25 alone).
    #[serde(default)]
    spread: Option<(f32, f32, f32, usize)>,
    /// How much of the question's meaning rests on its unknown terms.
    #[serde(default)]
    unknown_meaning: Option<f32>,
    /// The section the conversation's last answer quoted (entry id, section name).
    #[serde(default)]
    last_quoted: Option<(u64, String)>,
}

impl Kept {
    fn closeness(&self) -> Vec<Closeness> {
        self.closeness
            .iter()
            .map(|(chunk, sentences)| Closeness { chunk: *chunk, sentences: sentences.clone() })
            .collect()
    }

    /// What retrieval found beside the sources, as the reader takes it, with `closeness`
    /// ([`Kept::closeness`]).
    fn evidence<'a>(&'a self, closeness: &'a [Closeness]) -> Evidence<'a> {
        Evidence {
            closeness,
            unknown: &self.unknown,
            other_language: self.other_language,
            model: self.model.as_deref(),
            spread: self.spread.map(|(mean, deviation, largest, rows)| Spread { mean, deviation, largest, rows }),
            unknown_meaning: self.unknown_meaning,
            last_quoted: self.last_quoted.as_ref().map(|(id, name)| (*id, name.as_str())),
        }
    }
}

/// The sources of `q` from `kb`, as the server retrieves them for the embedded generator, and
/// the section its answer quotes (entry id, section name; `None` when refused). `stored`: the
/// section the turn before quoted, as a stored history gives it (`None`: the client sent the
/// turns, so the earlier question is read again to find it).
async fn retrieve(kb: &Kb, q: &Question, stored: Option<Option<(u64, String)>>) -> (Kept, Option<(u64, String)>) {
    let top = chat::EMBEDDED_TOP_K;
    let asked = replicad::text::question::asked(&q.question);
    let previous = async { Ok(q.previous.clone().map(|question| chat::Previous { question, quoted: stored })) };
    let (retrieval, read) =
        chat::retrieve_in_conversation((&kb.store, &kb.search), (kb.replica, None), asked, previous, top)
            .await
            .expect("retrieve");
    let quoted = retrieval.quoted();
    let chat::Retrieval { found, unknown, other_language, model, spread, unknown_meaning, last_quoted, .. } = retrieval;
    let closeness = found.iter().map(|r| (r.ranks.cosine, r.sentences.clone())).collect();
    let read = (read != asked).then_some(read);
    let sources = found.into_iter().map(|r| r.source).collect();
    let spread = spread.map(|s| (s.mean, s.deviation, s.largest, s.rows));
    (Kept { closeness, sources, unknown, other_language, model, read, spread, unknown_meaning, last_quoted }, quoted)
}

/// The text an answer to `question` quotes: without its lead-in (when `uncertain`) and its
/// source line.
fn quoted_text<'t>(text: &'t str, uncertain: bool, question: &str) -> &'t str {
    let body = text.rsplit_once("\n\n(From: ").map_or(text, |(b, _)| b);
    let lead = if uncertain { lead_in(question) } else { "" };
    body.strip_prefix(lead).expect("an uncertain answer opens with its lead-in")
}

/// The answer to `q` from `kept` read with weights `w`, judged; the answer and its confidence.
fn judge(q: &Question, kept: &Kept, w: &Weights) -> (Outcome, String, Option<Confidence>, String) {
    let persona = Persona { name: "Tutor".into(), greeting: "Hello!".into(), ..Persona::default() };
    let started = Instant::now();
    let sources = &kept.sources;
    let closeness = kept.closeness();
    let evidence = kept.evidence(&closeness);
    let question = kept.read.as_deref().unwrap_or(&q.question);
    let (answer, explanation) = reply_with(&persona, question, sources, &evidence, w);
    let millis = started.elapsed().as_secs_f64() * 1e3;
    let answered = !answer.used.is_empty();
    let uncertain = explanation.verdict == Verdict::Uncertain;
    let quoted = answer.used.first().map(|i| &sources[*i]);
    let expected_source = quoted.is_some_and(|s| q.expects(&s.name));
    let holds = |text: &str| q.keys.iter().all(|k| normalize(text).contains(&normalize(k)));
    let keys = answered && holds(&answer.text);
    let chunk_keys = quoted.is_some_and(|s| holds(&s.content));
    let contiguous =
        quoted.is_none_or(|s| read(&s.content).contains(&letters(quoted_text(&answer.text, uncertain, question))));
    let markup = quoted.is_some_and(|s| adds_markup(quoted_text(&answer.text, uncertain, question), &s.content));
    let in_top5 = sources.iter().take(5).any(|s| q.expects(&s.name));
    let outcome =
        Outcome { answered, uncertain, in_top5, expected_source, chunk_keys, keys, contiguous, markup, millis };
    let trace = explanation
        .candidates
        .iter()
        .take(4)
        .map(|c| {
            let name = &sources[c.source].name;
            let mark = if q.expects(name) { "*" } else { " " };
            let m = c.meaning.unwrap_or(f32::NAN);
            format!("{mark} #{} p{} m {m:.2} c {:.2} s {:.2} {name}", c.source + 1, c.passage, c.coverage, c.score)
        })
        .collect::<Vec<_>>()
        .join("\n");
    (outcome, answer.text, explanation.confidence, trace)
}

/// Each of the best [`EXPLAINED`] candidate passages of answerable `q` quoted in turn (`Weights::pick`):
/// one JSON object per candidate with its signals, its chunk's cosine, and whether its quote is
/// right (an expected section, every key) — what the passage choice is fitted on.
fn candidate_rows(q: &Question, kept: &Kept, w: &Weights) -> Vec<serde_json::Value> {
    let persona = Persona::default();
    let closeness = kept.closeness();
    let evidence = kept.evidence(&closeness);
    let question = kept.read.as_deref().unwrap_or(&q.question);
    let holds = |text: &str| q.keys.iter().all(|k| normalize(text).contains(&normalize(k)));
    let (_, all) = reply_with(&persona, question, &kept.sources, &evidence, w);
    (0..all.candidates.len())
        .map(|k| {
            let (answer, e) = reply_with(&persona, question, &kept.sources, &evidence, &Weights { pick: Some(k), ..*w });
            let c = &e.candidates[0];
            let right = answer.used.first().is_some_and(|i| q.expects(&kept.sources[*i].name)) && holds(&answer.text);
            serde_json::json!({
                "id": q.id, "corpus": q.corpus, "phrasing": q.phrasing, "place": k, "source": c.source, "passage": c.passage,
                "meaning": c.meaning, "coverage": c.coverage, "standing": c.standing, "title": c.title, "score": c.score,
                "chunk": c.chunk, "right": right,
            })
        })
        .collect()
}

/// The decision's signals of a question, as its dump line holds them (a missing cosine: null).
fn signals(s: &replicad::generate::embedded::Signals) -> serde_json::Value {
    serde_json::json!({
        "sentence": s.sentence, "passage": s.passage, "chunk": s.chunk, "coverage": s.coverage,
        "title": s.title, "standing": s.standing, "unknown": s.unknown, "typical": s.typical,
        "breadth": s.breadth, "excess": s.excess, "unknownMeaning": s.unknown_meaning,
    })
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

/// Sums of one group of questions.
#[derive(Default)]
struct Tally {
    answerable: usize,
    source: usize,
    in_top5: usize,
    chunk_keys: usize,
    keys: usize,
    idk_answerable: usize,
    uncertain: usize,
    answers: usize,
    unanswerable: usize,
    idk: usize,
    idk_or_lead: usize,
    broken: usize,
    marked: usize,
    millis: Vec<f64>,
}

impl Tally {
    fn add(&mut self, q: &Question, o: &Outcome) {
        self.answers += usize::from(o.answered);
        self.uncertain += usize::from(o.uncertain);
        self.broken += usize::from(!o.contiguous);
        self.marked += usize::from(o.markup);
        if !q.answerable() {
            self.unanswerable += 1;
            self.idk += usize::from(!o.answered);
            self.idk_or_lead += usize::from(!o.answered || o.uncertain);
        } else {
            self.answerable += 1;
            self.source += usize::from(o.expected_source);
            self.in_top5 += usize::from(o.in_top5);
            self.chunk_keys += usize::from(o.chunk_keys);
            self.keys += usize::from(o.keys);
            self.idk_answerable += usize::from(!o.answered);
        }
        self.millis.push(o.millis);
    }

    fn share(n: usize, of: usize) -> f64 {
        if of == 0 {
            0.0
        } else {
            n as f64 / of as f64
        }
    }

    fn row(&mut self, name: &str) {
        let share = Tally::share;
        self.millis.sort_by(f64::total_cmp);
        let p50 = self.millis.get(self.millis.len() / 2).copied().unwrap_or(0.0);
        println!(
            "{name:<20} {:>4} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>5} {:>6.3} {:>8.3} {:>4} {:>4} {:>7.2}",
            self.answerable,
            share(self.in_top5, self.answerable),
            share(self.source, self.answerable),
            share(self.chunk_keys, self.answerable),
            share(self.keys, self.answerable),
            share(self.idk_answerable, self.answerable),
            share(self.uncertain, self.answers),
            self.unanswerable,
            share(self.idk, self.unanswerable),
            share(self.idk_or_lead, self.unanswerable),
            self.broken,
            self.marked,
            p50
        );
    }
}

/// The value following the flag `name` in the command line.
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// `Weights::FITTED`, or those of `--weights` (five comma-separated numbers, or six with the
/// chunk cosine's weight across languages), deciding with the fit of `--fit FILE` when given.
fn weights(args: &[String]) -> Weights {
    let decision = flag(args, "--fit").map(|f| {
        let fit = Fit::parse(&std::fs::read_to_string(&f).expect("--fit file")).expect("--fit: a reader fit");
        &*Box::leak(Box::new(fit))
    });
    let Some(list) = flag(args, "--weights") else { return Weights { decision, ..Weights::FITTED } };
    let v: Vec<f32> = list.split(',').map(|x| x.parse().expect("--weights: numbers")).collect();
    assert!(matches!(v.len(), 5..=7), "--weights M,C,S,T,H[,X[,K]]");
    let across_chunk = v.get(5).copied().unwrap_or(Weights::FITTED.across_chunk);
    let continuity = v.get(6).copied().unwrap_or(Weights::FITTED.continuity);
    Weights {
        meaning: v[0],
        coverage: v[1],
        standing: v[2],
        title: v[3],
        heading: v[4],
        across_chunk,
        continuity,
        decision,
        pick: None,
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (show, only) = (flag(&args, "--show"), flag(&args, "--misses"));
    let replay: Option<BTreeMap<String, Kept>> = flag(&args, "--replay")
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).expect("kept sources")).expect("sources JSON"));
    let blocks = blocks(&args);
    let mut kept: BTreeMap<String, Kept> = BTreeMap::new();
    let stored = args.iter().any(|a| a == "--stored-history");
    for (name, dir) in &blocks[0].1.corpora {
        let mut last = None;
        let kb = if replay.is_none() { Some(Kb::open(dir, labelled::embedders(&args)).await) } else { None };
        for q in blocks.iter().flat_map(|(_, b)| &b.questions).filter(|q| &q.corpus == name) {
            let found = match (&kb, &replay) {
                (Some(kb), _) => {
                    let before = q.previous.as_ref().and(last.take()).filter(|_| stored);
                    let (found, quoted) = retrieve(kb, q, before).await;
                    last = Some(quoted);
                    found
                }
                (None, Some(r)) => r.get(&q.id).cloned().unwrap_or_default(),
                (None, None) => unreachable!("a knowledge base is opened unless replaying"),
            };
            kept.insert(q.id.clone(), found);
        }
    }
    if let Some(f) = flag(&args, "--save") {
        std::fs::write(f, serde_json::to_string(&kept).expect("JSON")).expect("write kept sources");
    }
    let w = weights(&args);
    let mut rows = flag(&args, "--candidates").map(|f| std::fs::File::create(f).expect("candidates file"));
    let mut dump = flag(&args, "--dump").map(|f| std::fs::File::create(f).expect("dump file"));
    let listed = |s: &Option<String>, q: &Question| s.as_deref().is_some_and(|s| s == q.split || s == "all");
    let model = kept.values().find_map(|k| k.model.clone()).unwrap_or_else(|| "bm25".into());
    let mut below = false;
    for (set, labelled) in &blocks {
        let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
        for q in labelled.questions.iter().filter(|q| kept.contains_key(&q.id)) {
            let (o, text, confidence, trace) = judge(q, &kept[&q.id], &w);
            if listed(&show, q) || (listed(&only, q) && (!right(q, &o) || !o.contiguous || o.markup)) {
                let verdict = if right(q, &o) { "ok" } else { "MISS" };
                let c = confidence.map(|c| c.value);
                println!("--- {} [{}] {} → {verdict} confidence {c:?}\n{trace}\n{text}\n", q.id, q.kind, q.question);
            }
            if let Some(f) = dump.as_mut() {
                // the quote the reader would give were it never to refuse (the fit's positives)
                let (quoted, ..) = judge(q, &kept[&q.id], &Weights { pick: Some(0), ..w });
                writeln!(f, "{}", dump_line(q, &kept[&q.id], &o, quoted.keys, confidence)).expect("dump");
            }
            if let Some(f) = rows.as_mut().filter(|_| q.answerable()) {
                for row in candidate_rows(q, &kept[&q.id], &w) {
                    writeln!(f, "{row}").expect("candidates file");
                }
            }
            for group in q.groups() {
                tallies.entry(group).or_default().add(q, &o);
            }
        }
        print_table(set, &mut tallies);
        if let Some(f) = flag(&args, "--floors") {
            below |= !check_floors(&f, set, &model, &tallies["all"]);
        }
    }
    if below {
        std::process::exit(1);
    }
}

/// The blocks of questions `args` asks for, each with the name its floors are kept under:
/// the set of `--set` (`dev` by default), or its off-topic block with `--offtopic` (`SET-offtopic`),
/// or both with `--and-offtopic` (their knowledge bases indexed once).
fn blocks(args: &[String]) -> Vec<(String, labelled::Labelled)> {
    let set = flag(args, "--set").unwrap_or_else(|| "dev".into());
    let labelled = labelled::load(args);
    if args.iter().any(|a| a == "--offtopic") {
        return vec![(format!("{set}-offtopic"), labelled)];
    }
    if !args.iter().any(|a| a == "--and-offtopic") {
        return vec![(set, labelled)];
    }
    let off = labelled::off_topic(&labelled);
    vec![(set.clone(), labelled), (format!("{set}-offtopic"), off)]
}

/// One line of `--dump`: question `q`'s outcome `o`, whether the quote of its best candidate
/// holds the key spans (`quote_keys`, whatever the decision), the decision's signals and its
/// probability.
fn dump_line(
    q: &Question,
    kept: &Kept,
    o: &Outcome,
    quote_keys: bool,
    confidence: Option<Confidence>,
) -> serde_json::Value {
    serde_json::json!({
        "id": q.id, "corpus": q.corpus, "kind": q.kind, "phrasing": q.phrasing,
        "answerable": q.answerable(), "confidence": confidence.map(|c| c.value), "answered": o.answered, "uncertain": o.uncertain,
        "fit": confidence.map(|c| c.fit), "signals": confidence.map(|c| signals(&c.signals)),
        "unknown": kept.unknown, "otherLanguage": kept.other_language,
        "source": o.expected_source, "keys": o.keys, "chunk": o.chunk_keys, "top5": o.in_top5, "contiguous": o.contiguous,
        "quoteKeys": quote_keys,
    })
}

/// The table of `tallies` (one row per group) under the name of its block, `set`.
fn print_table(set: &str, tallies: &mut BTreeMap<String, Tally>) {
    println!("== {set}");
    println!(
        "{:<20} {:>4} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>6} {:>8} {:>4} {:>4} {:>7}",
        "group",
        "ans",
        "top5",
        "source",
        "chunk",
        "keys",
        "idkA",
        "lead",
        "unans",
        "idk",
        "idk|lead",
        "cont",
        "mark",
        "p50 ms"
    );
    for (name, t) in tallies {
        t.row(name);
    }
}

/// The regression gate of CI: `false`, naming each measure below its floor, when the `all` row
/// of block `set` (`SET` or `SET-offtopic`: [`blocks`]) falls under its floors for `model` (its
/// catalog id, `bm25` for words alone) in `file` (`{"all-minilm-l6-v2": {"dev": {"source": 0.9,
/// …}, …}, …}`); a set without floors for the model fails; measures `top5`, `source`, `keys`,
/// `idk`, `idkLead` (unanswerable questions refused or led in), `answered`, and that every
/// answer is one excerpt of its source (`cont`) showing no mark its source lacks (`mark`). The
/// example exits 1 when a block fails.
fn check_floors(file: &str, set: &str, model: &str, all: &Tally) -> bool {
    let floors: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).expect("floors file")).expect("floors JSON");
    if !floors[model][set].is_object() {
        eprintln!("{file} holds no floors of the {set} set for {model}");
        return false;
    }
    let share = Tally::share;
    let measured = [
        ("top5", share(all.in_top5, all.answerable)),
        ("source", share(all.source, all.answerable)),
        ("keys", share(all.keys, all.answerable)),
        ("idk", share(all.idk, all.unanswerable)),
        ("idkLead", share(all.idk_or_lead, all.unanswerable)),
        // floors of the share of answerable questions answered: 1 - idkA
        ("answered", 1.0 - share(all.idk_answerable, all.answerable)),
    ];
    let mut below = Vec::new();
    for (name, value) in measured {
        let Some(floor) = floors[model][set][name].as_f64() else { continue };
        if value < floor {
            below.push(format!("{name} {value:.3} < floor {floor:.3}"));
        }
    }
    if all.broken > 0 {
        below.push(format!("{} answers are not one contiguous excerpt of their source", all.broken));
    }
    if all.marked > 0 {
        below.push(format!("{} answers show a mark (`, [, ], or a comma) their source lacks", all.marked));
    }
    if !below.is_empty() {
        eprintln!("answers on the {set} set ({model}) fell below their floors ({file}): {}", below.join("; "));
        return false;
    }
    println!("answers on the {set} set ({model}) hold their floors ({file})");
    true
}
