//! The labelled answer sets, shared by `examples/answers.rs` and `examples/retrieval.rs`
//! (`#[path]`-included; each uses a part): `--set dev` (the default) is
//! `tests/answers/questions.json`, the set the generator was tuned on; `--set heldout` is
//! `tests/answers/heldout/questions.json`, documentation nobody tuned for, frozen.
//! Both are checked by `tests/answers/check.py`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use replicad::embed::catalog::{Embedders, EmbeddingModels};
use replicad::search::{embedding, indexer, Search};
use replicad::service::knowledge::{self, Limits, NewEntry};
use replicad::store::records::Chunk;
use replicad::store::{self, codec, tables, Store};
use serde::Deserialize;
use uuid::Uuid;

#[derive(Deserialize)]
pub struct Labelled {
    pub corpora: BTreeMap<String, String>,
    pub questions: Vec<Question>,
}

#[derive(Deserialize)]
pub struct Question {
    pub id: String,
    pub corpus: String,
    pub split: String,
    pub kind: String,
    pub question: String,
    #[serde(default)]
    pub sections: Vec<String>,
    #[serde(default)]
    pub keys: Vec<String>,
    /// `lexical` or `paraphrase` (every held-out question; the dev set's newer ones).
    #[serde(default)]
    pub phrasing: Option<String>,
    /// Whether any organization's replica could answer it from its own documents ("Where are
    /// you located?"): the off-topic block leaves it out.
    #[serde(default)]
    pub generic: bool,
    /// The question asked before it in its conversation (the follow-up sets).
    #[serde(skip)]
    pub previous: Option<String>,
}

impl Question {
    pub fn answerable(&self) -> bool {
        self.kind != "unanswerable"
    }

    /// Whether a source or chunk titled `title` (its heading path) is one of the expected sections.
    pub fn expects(&self, title: &str) -> bool {
        self.sections.iter().any(|s| title.ends_with(s.as_str()))
    }

    /// The groups the question is counted in: corpus and split, corpus, split, all, its kind and
    /// its phrasing.
    pub fn groups(&self) -> Vec<String> {
        let (c, s) = (&self.corpus, &self.split);
        let mut groups =
            vec![format!("{c} {s}"), c.clone(), format!("all {s}"), "all".into(), format!("kind {}", self.kind)];
        groups.extend(self.phrasing.iter().map(|p| format!("phrasing {p}")));
        groups
    }
}

/// The set named by `--set` in `args`: `dev` (default, `tests/answers/questions.json`) or
/// `tests/answers/SET/questions.json` (`calibration`, `business2`, `heldout`, `heldout3`, `heldout4`,
/// `crosslingual`), or a set of conversations, `tests/answers/SET/conversations.json`
/// (`followups`, or with `--conversations` a set's own: [`Conversations`]). With `--offtopic`,
/// the off-topic block of that set instead ([`off_topic`]).
pub fn load(args: &[String]) -> Labelled {
    let set = args.iter().position(|a| a == "--set").and_then(|i| args.get(i + 1)).map_or("dev", String::as_str);
    let path = match set {
        "dev" => "tests/answers/questions.json".to_string(),
        other => format!("tests/answers/{other}/questions.json"),
    };
    // a set of conversations only (`followups`), or a set's conversations (`--conversations`)
    let conversations = format!("tests/answers/{set}/conversations.json");
    let path =
        if args.iter().any(|a| a == "--conversations") || !root().join(&path).exists() { conversations } else { path };
    let text = std::fs::read_to_string(root().join(&path)).unwrap_or_else(|e| panic!("--set {set}: {path}: {e}"));
    let labelled: Labelled = if text.contains("\"conversations\"") {
        serde_json::from_str::<Conversations>(&text).unwrap_or_else(|e| panic!("{path}: {e}")).into_questions()
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    if args.iter().any(|a| a == "--offtopic") {
        off_topic(&labelled)
    } else {
        labelled
    }
}

/// A set of conversations (`tests/answers/SET/conversations.json`: `--set followups`): each
/// turn is a question, asked after the one before it.
#[derive(Deserialize)]
pub struct Conversations {
    pub corpora: BTreeMap<String, String>,
    pub conversations: Vec<Conversation>,
}

#[derive(Deserialize)]
pub struct Conversation {
    pub id: String,
    pub corpus: String,
    pub turns: Vec<ConversationTurn>,
}

/// A turn: `role` is `first`, `followup` (says little on its own: answered from the
/// conversation's subject) or `newsubject` (answered from its own subject).
#[derive(Deserialize)]
pub struct ConversationTurn {
    pub question: String,
    pub role: String,
    #[serde(default)]
    pub sections: Vec<String>,
    #[serde(default)]
    pub keys: Vec<String>,
}

impl Conversations {
    /// Every turn as a question (id `CONVERSATION.N`, split `conversation`, kind its role) with
    /// the question before it.
    pub fn into_questions(self) -> Labelled {
        let mut questions = Vec::new();
        for c in self.conversations {
            let mut previous: Option<String> = None;
            for (i, t) in c.turns.into_iter().enumerate() {
                questions.push(Question {
                    id: format!("{}.{}", c.id, i + 1),
                    corpus: c.corpus.clone(),
                    split: "conversation".into(),
                    kind: t.role,
                    question: t.question.clone(),
                    sections: t.sections,
                    keys: t.keys,
                    phrasing: None,
                    generic: false,
                    previous: previous.replace(t.question),
                });
            }
        }
        Labelled { corpora: self.corpora, questions }
    }
}

/// The off-topic block of a set: each corpus's answerable questions asked of the next corpus's
/// replica (in the corpora's order, the last asking the first), every one of which must be
/// refused; a `generic` question (any replica may answer it) is left out. Each keeps its id (suffixed `>off`), split and phrasing; its kind is `unanswerable`.
pub fn off_topic(labelled: &Labelled) -> Labelled {
    let names: Vec<&String> = labelled.corpora.keys().collect();
    let next = |c: &str| names[(names.iter().position(|n| *n == c).expect("corpus") + 1) % names.len()].clone();
    let questions = labelled
        .questions
        .iter()
        .filter(|q| q.answerable() && !q.generic)
        .map(|q| Question {
            id: format!("{}>off", q.id),
            corpus: next(&q.corpus),
            split: q.split.clone(),
            kind: "unanswerable".into(),
            question: q.question.clone(),
            sections: Vec::new(),
            keys: Vec::new(),
            phrasing: q.phrasing.clone(),
            generic: false,
            previous: None,
        })
        .collect();
    Labelled { corpora: labelled.corpora.clone(), questions }
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One replica's knowledge base in a temporary directory: one entry per `.txt` or `.md` file of
/// a corpus directory, as the demo does.
pub struct Kb {
    _dir: tempfile::TempDir,
    pub store: Store,
    pub search: Arc<Search>,
    pub replica: Uuid,
}

/// The embedding models of `--embeddings PATH` in `args` (a catalog file or a model directory,
/// as `replicad serve --embedding-models`), in the arithmetic of `--embedding-precision f32|auto`
/// (default `auto`, as `serve`), the catalog's `route` entries served by the `--llm-upstream
/// NAME=BASE_URL` flags in `args`; `None` (BM25 alone) without `--embeddings`.
pub fn embedders(args: &[String]) -> Option<Arc<Embedders>> {
    let path = args.iter().position(|a| a == "--embeddings").and_then(|i| args.get(i + 1))?;
    let mut catalog = EmbeddingModels::load(std::path::Path::new(path)).expect("embedding models");
    let precision = args.iter().position(|a| a == "--embedding-precision").and_then(|i| args.get(i + 1));
    if precision.is_some_and(|p| p == "f32") {
        catalog.set_precision(replicad::embed::Precision::F32);
    }
    let policy = replicad::generate::LlmConfig::default().policy();
    // `--llm-upstream NAME=BASE_URL` (as `serve` takes it, repeatable): the upstreams that serve
    // a catalog's `route` entries
    let upstreams: Vec<String> = args.windows(2).filter(|w| w[0] == "--llm-upstream").map(|w| w[1].clone()).collect();
    replicad::install_crypto_provider(); // (their HTTP client needs one, as in `serve`)
    Some(Arc::new(catalog.build(&upstreams, policy).expect("embedding models load")))
}

impl Kb {
    /// Indexes `corpus` as one replica; with `embedders`, also embeds every chunk (hybrid
    /// retrieval, as the server does).
    pub async fn open(corpus: &str, embedders: Option<Arc<Embedders>>) -> Kb {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let search = Arc::new(Search::open(dir.path()).expect("index").0.with_embedders(embedders));
        let (replica, org) = (Uuid::now_v7(), Uuid::now_v7());
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(corpus))
            .expect("corpus")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "txt" || x == "md"))
            .collect();
        files.sort();
        for f in files {
            let new = NewEntry::text(std::fs::read_to_string(&f).expect("read"), None);
            knowledge::create(&store, org, replica, new, Limits::UNLIMITED).await.expect("create");
        }
        while indexer::apply_pending(&store, &search).await.expect("index") > 0 {}
        while embedding::step(&store, &search).await.expect("embed") {}
        while indexer::apply_pending(&store, &search).await.expect("index") > 0 {}
        Kb { _dir: dir, store, search, replica }
    }

    /// The titles (heading paths) of the chunks `keys`, in order.
    pub async fn titles(&self, keys: Vec<(u64, u32)>) -> Vec<String> {
        self.store
            .read(move |txn| {
                let chunks = txn.open_table(tables::KBCHUNK_CHUNK)?;
                let mut out = Vec::new();
                for &k in &keys {
                    out.push(store::get::<(u64, u32), Chunk, _>(&chunks, k)?.map(|c| c.title).unwrap_or_default());
                }
                Ok(out)
            })
            .await
            .expect("chunk titles")
    }

    /// Every chunk of the knowledge base (there is one replica).
    pub async fn chunks(&self) -> Vec<Chunk> {
        self.store
            .read(|txn| {
                use replicad::store::kv::ReadableTable as _;
                let mut out = Vec::new();
                for row in txn.open_table(tables::KBCHUNK_CHUNK)?.iter()? {
                    out.push(codec::decode(row?.1.value())?);
                }
                Ok(out)
            })
            .await
            .expect("chunks")
    }
}
