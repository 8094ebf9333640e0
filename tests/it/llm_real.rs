//! Replies from a real language model: SmolLM2-135M-Instruct served by node-llama-cpp behind the
//! OpenAI-compatible wrapper `tests/llm-server/server.mjs`, started by each test on a free
//! loopback port. Its words are not deterministic: the tests check the protocol, the flow and
//! what is stored, never the wording.
//!
//! They run when `REPLICAD_REAL_MODEL_TESTS=1`, and then fail loudly if Node, the server or the
//! weights are missing. `bash .ci/run` installs the server and the weights, sets
//! `REPLICAD_TEST_LLM_NODE_MODULES` and `REPLICAD_TEST_LLM_MODEL`, and sets
//! `REPLICAD_REAL_MODEL_TESTS=1`. Without it (a contributor's plain `cargo test`) each test
//! writes on the terminal what it needs and passes without running.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::sse::{check_shape, parse};
use crate::common::{replica_body, user, Org, Server, ZORBLAX, ZORBLAX_QUESTION};

/// Held by each test while it runs, so the suite runs one model server at a time: two of them
/// at once on a small machine made each reply several times slower (over the client's 60 s).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest wait for the model server to load the weights and listen.
const LOAD_PATIENCE: Duration = Duration::from_secs(120);
const MODEL: &str = "llama-3.1-8b-instruct";

/// The model server; killed when dropped.
struct ModelServer {
    child: Child,
    base_url: String,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the real-model tests need node-llama-cpp and the SmolLM2 weights. \
             Run `bash .ci/run` (or `eval \"$(bash .ci/install-llm)\"` before `cargo test`)."
        )
    })
}

/// How to run these tests, written when they do not run.
const HOW: &str = "needs a real model and runs when REPLICAD_REAL_MODEL_TESTS=1 \
     (`bash .ci/run` sets it; or: eval \"$(bash .ci/install-llm)\"; REPLICAD_REAL_MODEL_TESTS=1 cargo test --test it llm_real)";

impl ModelServer {
    /// The model server when `REPLICAD_REAL_MODEL_TESTS=1`; otherwise `None`, after telling the
    /// terminal (not libtest's captured output) that test `name` did not run and how to run it.
    fn start_if_enabled(name: &str) -> Option<ModelServer> {
        if std::env::var("REPLICAD_REAL_MODEL_TESTS").is_ok_and(|v| v == "1") {
            return Some(ModelServer::start());
        }
        let _ = writeln!(std::io::stderr(), "\nllm_real::{name}: not run: {HOW}");
        None
    }

    fn start() -> ModelServer {
        let modules = required_env("REPLICAD_TEST_LLM_NODE_MODULES");
        let model = required_env("REPLICAD_TEST_LLM_MODEL");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/llm-server/server.mjs");
        let mut child = Command::new("node")
            .args([script, "--node-modules", &modules, "--model", &model, "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start node (Node.js is required for the real-model tests)");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(LOAD_PATIENCE).unwrap_or_default();
        let Some(url) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            panic!("the model server did not start (printed {line:?})");
        };
        ModelServer { base_url: format!("{url}/v1"), child }
    }

    /// A replicad routing [`MODEL`] to this server as upstream `local`, replies ≤ 24 tokens.
    fn replicad(&self) -> Server {
        let upstream = format!("local={}", self.base_url);
        let route = format!("{MODEL}=local/smollm2-135m-instruct");
        Server::start_with(&["--llm-upstream", &upstream, "--model-route", &route, "--llm-max-tokens", "24"])
    }
}

async fn reactor(org: &Org) -> (String, u64) {
    let mut body = replica_body("reactor", &org.owner_email);
    body["llm"] = json!({"model": MODEL, "systemMessage": "Answer in one short sentence."});
    let replica = org.create_replica_from(body).await;
    let kb = org.add_ready_text(&replica, "Zorblax reactor", ZORBLAX).await;
    (replica, kb)
}

#[tokio::test]
async fn a_real_model_answers_from_the_sources_it_was_given_and_reports_usage() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(model) =
        ModelServer::start_if_enabled("a_real_model_answers_from_the_sources_it_was_given_and_reports_usage")
    else {
        return;
    };
    let server = model.replicad();
    let org = server.new_org("Real").await;
    let (replica, kb) = reactor(&org).await;

    let path = format!("/v1/replicas/{replica}/chat/completions");
    let r = org.call(Method::POST, &path, Some(&json!({"content": ZORBLAX_QUESTION})), &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.header("x-replica-backend"), Some("local"));
    let answer = r.body["content"].as_str().expect("content");
    assert!(!answer.trim().is_empty(), "{}", r.text);
    let items = org.history(&replica, "").await;
    assert_eq!(items.len(), 2);
    assert_eq!(items[1]["content"], json!(answer));
    assert_eq!(items[1]["sources"][0]["id"], json!(kb), "the source given to the model is stored");

    let path = format!("/v1/experimental/replicas/{replica}/chat/completions");
    let body = json!({"messages": [{"role": "user", "content": "What powers Quenth?"}], "store": false});
    let (s, v) = org.post_as(&path, body, &user("email", &org.owner_email)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["object"], json!("chat.completion"));
    let usage = &v["usage"];
    assert!(usage["prompt_tokens"].as_u64().is_some_and(|n| n > 20), "the sources are in the prompt: {v}");
    let completion = usage["completion_tokens"].as_u64().expect("completion_tokens");
    assert!((1..=24).contains(&completion), "max_tokens bounds the reply: {v}");
}

#[tokio::test]
async fn a_real_model_streams_its_reply_as_server_sent_events() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(model) = ModelServer::start_if_enabled("a_real_model_streams_its_reply_as_server_sent_events") else {
        return;
    };
    let server = model.replicad();
    let org = server.new_org("RealStream").await;
    let (replica, kb) = reactor(&org).await;
    let path = format!("/v1/replicas/{replica}/chat/completions");
    let body = json!({"content": ZORBLAX_QUESTION});
    let r = org.call(Method::POST, &path, Some(&body), &[("accept", "text/event-stream")]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let events = parse(&r.text);
    let (text, error, message) = check_shape(&events);
    assert!(error.is_none(), "{}", r.text);
    assert!(events.len() > 3, "several deltas: {}", r.text);
    assert_eq!(message["content"], json!(text));
    assert_eq!(message["interrupted"], json!(false));
    assert_eq!(message["sources"][0]["id"], json!(kb));
    let items = org.history(&replica, "").await;
    assert_eq!(items[1]["id"], message["id"]);
    assert_eq!(items[1]["content"], json!(text));
}
