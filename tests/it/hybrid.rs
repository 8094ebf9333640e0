//! Hybrid retrieval through the server (`--embedding-models`): a question in other words than
//! the text finds its passage by meaning; `llm.embeddingModel` is validated and fixed once set;
//! an upstream `/v1/embeddings` model (a loopback stand-in) embeds the chunks, and its failures
//! hold an entry short of `READY` while BM25 keeps answering; the vectors survive `kill -9`,
//! `reindex` and `backup`/`restore` without being computed again; another organization's
//! entries never change a replica's ranking. The real all-MiniLM-L6-v2 comes from
//! `.ci/install-embedding-model` (see `embedding.rs`).

use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{replica_body, DataDir, Org, Server};
use crate::embedding::{real_model_dir, Script, StandIn};

/// Writes an embedding catalog to `dir` and returns its path.
fn catalog(dir: &Path, models: Value) -> PathBuf {
    let path = dir.join("embedding-models.json");
    std::fs::write(&path, json!({ "models": models }).to_string()).unwrap();
    path
}

/// A catalog of the real model under the id `minilm`.
fn minilm_catalog(dir: &Path) -> PathBuf {
    catalog(dir, json!({ "minilm": { "name": "all-MiniLM-L6-v2", "dir": real_model_dir() } }))
}

/// A catalog of the real model under its own id, whose reader fit the decision uses.
fn fitted_catalog(dir: &Path) -> PathBuf {
    catalog(dir, json!({ "all-minilm-l6-v2": { "name": "all-MiniLM-L6-v2", "dir": real_model_dir() } }))
}

/// A catalog of the real model under two ids, `minilm` (the default) and `minilm-again`.
fn two_model_catalog(dir: &Path) -> PathBuf {
    let model = json!({ "name": "all-MiniLM-L6-v2", "dir": real_model_dir() });
    catalog(dir, json!({ "minilm": model, "minilm-again": model }))
}

/// Flags serving a catalog of one model `tiny` of `standin`, with e5-style prompts.
fn standin_flags(dir: &Path, standin: &StandIn) -> Vec<String> {
    let prompts = json!({ "query": "query: ", "passage": "passage: " });
    let model = json!({ "tiny": { "name": "tiny", "route": "standin/tiny", "dimension": 4, "prompts": prompts } });
    let path = catalog(dir, model);
    let upstream = format!("standin={}", standin.base_url);
    vec!["--embedding-models".into(), path.display().to_string(), "--llm-upstream".into(), upstream]
}

fn strs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

/// The sources of the retrieval check for `question`.
async fn retrieved(org: &Org, replica: &str, question: &str) -> Vec<Value> {
    let path = format!("/v1/replicas/{replica}/chat/completions/test");
    let (s, v) = org.post(&path, json!({ "content": question })).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["sources"].as_array().expect("sources").clone()
}

/// A new organization `name` of `server` with one replica whose knowledge base holds `texts`
/// (title, text), each `READY`.
async fn replica_with(server: &Server, name: &str, texts: &[(&str, &str)]) -> (Org, String) {
    let org = server.new_org(name).await;
    let replica = org.create_replica(&name.to_lowercase()).await;
    for (title, text) in texts {
        org.add_ready_text(&replica, title, text).await;
    }
    (org, replica)
}

/// How many passages the stand-in was asked to embed (its queries left out).
fn passages_embedded(standin: &StandIn) -> usize {
    let inputs = standin.seen().into_iter().flat_map(|(body, _)| body["input"].as_array().cloned().unwrap_or_default());
    inputs.filter(|i| i.as_str().is_some_and(|t| t.starts_with("passage: "))).count()
}

/// A server of the embedding catalog `catalog` writes into a temporary directory.
fn serving(catalog: fn(&Path) -> PathBuf) -> Server {
    let files = tempfile::tempdir().unwrap();
    let path = catalog(files.path());
    Server::start_with(&["--embedding-models", path.to_str().unwrap()])
}

/// A server with the real MiniLM model (`true`: retrieval by meaning too) and one without.
fn hybrid_and_plain() -> [(Server, bool); 2] {
    [(serving(minilm_catalog), true), (Server::start(), false)]
}

const FELINES: &str = "Felines sleep for most of the day, often twelve to sixteen hours.";
const ENGINES: &str = "Automobiles need fresh engine oil every ten thousand kilometres.";
const PARAPHRASE: &str = "How long do cats nap?";

#[tokio::test]
async fn a_question_in_other_words_finds_its_passage_by_meaning_where_bm25_finds_nothing() {
    for (server, by_meaning) in &hybrid_and_plain() {
        let (org, replica) = replica_with(server, "Meaning", &[("Felines", FELINES), ("Automobiles", ENGINES)]).await;
        let sources = retrieved(&org, &replica, PARAPHRASE).await;
        if !by_meaning {
            assert!(sources.is_empty(), "BM25 alone shares no word with the question: {sources:?}");
            continue;
        }
        let first = &sources[0];
        assert!(first["name"].as_str().unwrap().contains("Felines"), "{sources:?}");
        assert_eq!((&first["bm25Rank"], &first["vectorRank"]), (&json!(null), &json!(1)), "{first}");
        assert!(first["score"].as_f64().unwrap() > 0.0, "{first}");
    }
}

const DICTIONARIES: &str = "A dictionary maps keys to values, and any key is looked up in constant time. \
    Iterating over a dictionary yields each of its keys in insertion order. \
    You can get rid of a key and its value with the del statement, as in del d['jack']. \
    Keys must be immutable, such as strings and numbers.";

/// The retrieval check of `question` whole.
async fn checked(org: &Org, replica: &str, question: &str) -> Value {
    let path = format!("/v1/replicas/{replica}/chat/completions/test");
    let (s, v) = org.post(&path, json!({ "content": question })).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

const INTEGRATIONS: &str = "Acme connects to Slack, GitHub and Jira. \
    Every report can be exported as a spreadsheet or a PDF file.";

#[tokio::test]
async fn an_unknown_word_leads_the_answer_in_only_when_the_question_s_meaning_rests_on_it() {
    let server = serving(fitted_catalog);
    let (org, replica) =
        replica_with(&server, "About", &[("Integrations", INTEGRATIONS), ("Automobiles", ENGINES)]).await;
    let meaning = |v: &Value| v["reader"]["confidence"]["unknownMeaning"].as_f64().unwrap_or_else(|| panic!("{v}"));
    let fit = |v: &Value| v["reader"]["confidence"]["fit"].clone();
    // a word of the question the documents never use, but not what it asks about
    let generic = "Nowadays, what does Acme connect to, and what can a report be exported as?";
    let generic = checked(&org, &replica, generic).await;
    assert_eq!(generic["reader"]["unknownTerms"], json!(["nowaday"]), "{generic}");
    // what the question asks about, which the documents never name
    let subject = checked(&org, &replica, "Does Acme connect to Kubernetes?").await;
    assert_eq!(subject["reader"]["unknownTerms"], json!(["kubernet"]), "{subject}");
    assert!(meaning(&generic) < meaning(&subject), "{generic}\n{subject}");
    assert_eq!((fit(&generic), fit(&subject)), (json!("all-minilm-l6-v2"), json!("all-minilm-l6-v2")));
    assert_ne!(subject["reader"]["verdict"], json!("answered"), "{subject}");
    assert_eq!(generic["reader"]["verdict"], json!("answered"), "{generic}");
    assert!(generic["content"].as_str().unwrap().contains("Slack, GitHub and Jira"), "{generic}");
    // without an unknown term nothing rests on one
    let known = checked(&org, &replica, "What does Acme connect to?").await;
    assert_eq!((&known["reader"]["unknownTerms"], meaning(&known)), (&json!([]), 0.0), "{known}");
}

#[tokio::test]
async fn the_reader_quotes_the_passage_closest_in_meaning_and_shows_its_signals() {
    let question = "How do I remove a key from a dictionary?";
    for (server, by_meaning) in &hybrid_and_plain() {
        let texts = [("Dictionaries", DICTIONARIES), ("Automobiles", ENGINES)];
        let (org, replica) = replica_with(server, "Reader", &texts).await;
        let v = checked(&org, &replica, question).await;
        let reader = &v["reader"];
        let candidates = reader["candidates"].as_array().expect("the reader's candidates");
        assert!(!candidates.is_empty() && candidates[0]["source"] == 1, "{reader}");
        let has_meaning = |c: &Value| c["meaning"].is_number();
        // "remove" is no word of the knowledge base (it says "get rid of"): the trace names it
        assert_eq!(reader["unknownTerms"], json!(["remov"]), "{reader}");
        if !by_meaning {
            assert!(candidates.iter().all(|c| !has_meaning(c)), "{reader}");
            assert!(reader["confidence"].get("sentenceCosine").is_none(), "{reader}");
            continue;
        }
        // every candidate has its closeness by meaning; the quoted one is the best scored
        assert!(candidates.iter().all(has_meaning), "{reader}");
        assert_eq!(candidates[0]["quoted"], true, "{reader}");
        assert!(candidates[0]["text"].as_str().unwrap().starts_with("A dictionary maps keys"), "{reader}");
        assert!(v["content"].as_str().unwrap().contains("with the del statement"), "{v}");
        // … and the closest passage is led in as such
        assert_eq!((&reader["answered"], &reader["verdict"]), (&json!(true), &json!("uncertain")), "{reader}");
        assert!(v["content"].as_str().unwrap().starts_with("The closest passage I have:"), "{v}");
        let v = checked(&org, &replica, "How do I delete a key from a dictionary with del?").await;
        assert_eq!(v["reader"]["unknownTerms"], json!(["delet"]), "{v}");
        let v = checked(&org, &replica, "Which statement gets rid of a key of a dictionary?").await;
        assert_eq!((&v["reader"]["unknownTerms"], &v["reader"]["verdict"]), (&json!([]), &json!("answered")), "{v}");
        let c = &reader["confidence"];
        assert!(c["value"].is_number() && c["coverage"].is_number() && c["chunkCosine"].is_number(), "{reader}");
        assert!(c["typicalCosine"].is_number() && c["excessCosine"].is_number(), "{reader}");
        assert!(c["breadth"].as_f64().is_some_and(|b| b >= 0.0), "{reader}");
        // "remove" is what the question asks: its meaning rests on it
        assert!(c["unknownMeaning"].as_f64().is_some_and(|m| m > 0.0), "{reader}");
        let closest = candidates.iter().filter_map(|c| c["meaning"].as_f64()).fold(f64::MIN, f64::max);
        assert_eq!(c["sentenceCosine"].as_f64(), Some(closest), "the closest sentence's: {reader}");
        // each score is its signals' weighted sum; the best-ranked chunk stands at 1
        for c in candidates {
            let signal = |name: &str| c[name].as_f64().unwrap_or_else(|| panic!("{name} of {c}"));
            let sum = signal("meaning") + 0.5 * signal("coverage") + 0.6 * signal("standing") + 0.5 * signal("title");
            assert!((sum - signal("score")).abs() < 1e-4, "{c}");
            assert!(c["source"] != 1 || signal("standing") == 1.0, "{c}");
        }
    }
}

/// An identifier (here upper snake case with a mixed part) is a word of the text: a question
/// naming some of its parts finds the sentence that holds it, and the answer quotes it whole,
/// by meaning as by words alone (where the question naming the identifier counts twice).
#[tokio::test]
async fn a_question_naming_parts_of_an_identifier_is_answered_with_the_identifier() {
    for (server, by_meaning) in &hybrid_and_plain() {
        let secret = ("Secret", "The secret phrase is: RAINBOW_UNICORN_abc123");
        let (org, replica) = replica_with(server, "Phrases", &[secret]).await;
        let answer = org.ask(&replica, "What is the rainbow unicorn phrase mentioned in the text?").await;
        assert!(answer.contains("RAINBOW_UNICORN_abc123"), "by meaning {by_meaning}: {answer}");
    }
}

#[tokio::test]
async fn the_embedding_model_defaults_to_the_catalog_s_is_checked_and_cannot_change_once_set() {
    let server = serving(two_model_catalog);
    let org = server.new_org("Models").await;
    let replica = org.create_replica("default-model").await;
    let (_, v) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(v["llm"]["embeddingModelId"], "minilm", "{v}");
    assert!(v["llm"].get("embeddingModel").is_none(), "not a hosted id: left out of the hosted field: {v}");

    let mut body = replica_body("hosted-model", &org.owner_email);
    body["llm"]["embeddingModel"] = json!("qwen3-embedding-8b");
    let (s, v) = org.post("/v1/replicas", body.clone()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(v["error"].as_str().unwrap().contains("minilm"), "the message names the catalog: {v}");

    let path = format!("/v1/replicas/{replica}");
    let mut same = replica_body("default-model", &org.owner_email);
    let (s, v) = org.put(&path, same.clone()).await;
    assert_eq!(s, StatusCode::OK, "an absent model keeps the stored one: {v}");
    same["llm"]["embeddingModel"] = json!("minilm");
    assert_eq!(org.put(&path, same.clone()).await.0, StatusCode::OK);
    same["llm"]["embeddingModel"] = json!("minilm-again");
    let (s, v) = org.put(&path, same).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error_code"], "EMBEDDING_MODEL_FIXED", "{v}");
    let (_, v) = org.get(&path).await;
    assert_eq!(v["llm"]["embeddingModelId"], "minilm", "{v}");
}

#[tokio::test]
async fn an_upstream_model_embeds_the_chunks_and_its_failure_holds_the_entry_short_of_ready() {
    let standin = StandIn::start(vec![Script::Fail(503)], Script::Vectors).await;
    let files = tempfile::tempdir().unwrap();
    let mut flags = standin_flags(files.path(), &standin);
    flags.extend(["--llm-max-retries".into(), "0".into()]);
    let server = Server::start_with(&strs(&flags));
    let org = server.new_org("Upstream").await;
    let replica = org.create_replica("upstream").await;
    let kb = org.add_text(&replica, "Felines", FELINES).await;
    // The first passage request fails; until the retry (after a pause) the entry is searchable
    // by BM25, not READY
    let deadline = std::time::Instant::now() + crate::common::PATIENCE;
    while passages_embedded(&standin) == 0 {
        assert!(std::time::Instant::now() < deadline, "the chunk was never sent to be embedded");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let first = retrieved(&org, &replica, "How long do felines sleep?").await[0].clone();
    assert_eq!((&first["bm25Rank"], &first["vectorRank"]), (&json!(1), &json!(null)), "{first}");
    let (_, entry) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
    assert_ne!(entry["status"], "READY", "READY before its vectors are in: {entry}");
    // … and the retry (after a pause) brings the vectors in
    org.wait_ready(&replica, kb).await;
    let first = retrieved(&org, &replica, "How long do felines sleep?").await[0].clone();
    assert_eq!((&first["bm25Rank"], &first["vectorRank"]), (&json!(1), &json!(1)), "{first}");
    let seen = standin.seen();
    assert!(seen.len() >= 3, "a failed passage request, its retry, a question: {seen:?}");
    assert!(seen.iter().all(|(body, _)| body["model"] == "tiny"), "{seen:?}");
    assert!(server.dir().log().contains("embedding chunks failed"), "the failure is logged");
}

#[tokio::test]
async fn vectors_survive_kill_9_reindex_and_backup_without_being_computed_again() {
    let standin = StandIn::start(vec![], Script::Vectors).await;
    let files = tempfile::tempdir().unwrap();
    let flags = standin_flags(files.path(), &standin);
    // Takes a backup, which copies the redb file.
    let server = Server::start_in(DataDir::redb(), &strs(&flags));
    let (org, replica) = replica_with(&server, "Durable", &[("Felines", FELINES), ("Automobiles", ENGINES)]).await;
    let embedded = passages_embedded(&standin);
    assert_eq!(embedded, 4, "one passage per chunk and one per sentence (each text has one)");
    let has_vectors = |sources: &[Value]| !sources.is_empty() && sources.iter().all(|s| s["vectorRank"].is_number());

    let dir = server.kill9();
    let server = Server::start_in(dir, &strs(&flags));
    let org = org.at(&server);
    assert!(has_vectors(&retrieved(&org, &replica, "felines sleep").await), "after kill -9");

    let out = server.dir().cli(&["reindex"]);
    assert!(out.status.success(), "reindex: {}", String::from_utf8_lossy(&out.stderr));
    assert!(has_vectors(&retrieved(&org, &replica, "engine oil").await), "after reindex");

    let archive = files.path().join("backup.tar.gz");
    let out = server.dir().cli(&["backup", "--to", archive.to_str().unwrap()]);
    assert!(out.status.success(), "backup: {}", String::from_utf8_lossy(&out.stderr));
    let restored = DataDir::redb();
    let out = restored.cli(&["restore", "--from", archive.to_str().unwrap()]);
    assert!(out.status.success(), "restore: {}", String::from_utf8_lossy(&out.stderr));
    let again = Server::start_in(restored, &strs(&flags));
    let org = org.at(&again);
    assert!(has_vectors(&retrieved(&org, &replica, "felines sleep").await), "after restore");
    assert_eq!(passages_embedded(&standin), embedded, "no passage was embedded again");
}

#[tokio::test]
async fn another_organization_s_entries_never_change_a_replica_s_hybrid_ranking() {
    let server = serving(minilm_catalog);
    let dogs = ("Dogs", "Dogs sleep about half of the day and nap after meals.");
    let (mine, replica) = replica_with(&server, "Mine", &[("Felines", FELINES), ("Automobiles", ENGINES), dogs]).await;
    let before = retrieved(&mine, &replica, "How long do cats sleep?").await;

    let other = server.new_org("Other").await;
    let theirs = other.create_replica("theirs").await;
    for i in 0..6 {
        let text = format!("Cats sleep {i} hours; a sleeping cat naps in the sun, cats sleep long.");
        other.add_ready_text(&theirs, &format!("Cats {i}"), &text).await;
    }
    let after = retrieved(&mine, &replica, "How long do cats sleep?").await;
    assert_eq!(after, before, "the same sources, scores and ranks");
}
