//! How much time replicad adds to a completion served by an upstream model: time to first byte
//! (response head) of `POST /v1/replicas/{id}/chat/completions` through replicad, minus that of
//! `POST /v1/chat/completions` sent directly to the upstream, at several concurrencies.
//!
//! Everything runs in this process on loopback: a fake OpenAI-compatible upstream that answers
//! after a fixed delay (keep-alive, like real servers), and replicad itself (`replicad::serve`,
//! a temporary data directory, one replica with one knowledge-base entry, its model routed to
//! the fake). Through replicad each completion also retrieves sources, builds the prompt and
//! stores the exchange and its usage (one durable write).
//!
//! ```text
//! cargo run --release --example llm_overhead -- --delay-ms 50 --requests 400 --concurrency 1,64
//! ```

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};

#[allow(dead_code)] // each example uses part of it
mod common;

#[derive(Parser)]
struct Args {
    /// The upstream's fixed answer delay, in milliseconds.
    #[arg(long, default_value_t = 50)]
    delay_ms: u64,
    /// Requests per measurement (per concurrency and target).
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Send `skip_chat_history: true` (the usage is still written, durably).
    #[arg(long)]
    skip_history: bool,
    /// Concurrencies to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    concurrency: Vec<usize>,
}

/// Starts the fake upstream; returns its base URL (`http://ADDR/v1`).
async fn fake_upstream(delay: Duration) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let body = json!({
        "id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is 42."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 6, "total_tokens": 106},
    })
    .to_string();
    let body = Bytes::from(body);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let body = body.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let body = body.clone();
                async move {
                    let _ = req.into_body().collect().await;
                    tokio::time::sleep(delay).await;
                    let mut res = Response::new(Full::new(body));
                    res.headers_mut().insert("content-type", "application/json".parse().unwrap());
                    Ok::<_, Infallible>(res)
                }
            });
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}/v1")
}

/// Starts replicad routing `llama-3.1-8b-instruct` to `upstream`; returns its base URL.
async fn replicad(upstream: &str, data_dir: std::path::PathBuf) -> String {
    let mut config = replicad::Config::new(data_dir);
    config.llm.upstreams = vec![format!("fake={upstream}")];
    config.llm.routes = vec!["llama-3.1-8b-instruct=fake/fake".into()];
    common::serve(config).await
}

async fn call(http: &reqwest::Client, url: &str, key: &str, body: Value) -> Value {
    let res = http.post(url).header("X-ORGANIZATION-SECRET", key).json(&body).send().await.expect("request");
    let status = res.status();
    let v: Value = res.json().await.expect("JSON");
    assert!(status.is_success(), "{url}: {status} {v}");
    v
}

/// An organization and a replica with one READY entry; returns (key, completions URL).
async fn setup(http: &reqwest::Client, base: &str, data_dir: &std::path::Path) -> (String, String) {
    let code = loop {
        let invite = replicad::admin::Request::Invite { expires_in_secs: None };
        match replicad::admin::request(data_dir, &invite).await {
            Ok(Some(replicad::admin::Answer::Invite { code })) => break code,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    let v = http
        .post(format!("{base}/v1/api-keys/invites/{code}/redeem"))
        .json(&json!({"organizationName": "Bench", "name": "Bench Owner", "email": "bench@example.org"}))
        .send()
        .await
        .expect("redeem")
        .json::<Value>()
        .await
        .expect("JSON");
    let key = v["apiKey"].as_str().expect("apiKey").to_string();
    let replica = json!({
        "name": "Bench", "shortDescription": "bench", "greeting": "Hi", "ownerID": "bench@example.org",
        "slug": "bench", "llm": {"model": "llama-3.1-8b-instruct"},
    });
    let id = call(http, &format!("{base}/v1/replicas"), &key, replica).await["uuid"].as_str().unwrap().to_string();
    let text = "The Zorblax reactor operates at a steady temperature of 451 kelvin.";
    let kb_url = format!("{base}/v1/replicas/{id}/knowledge-base");
    let kb = call(http, &kb_url, &key, json!({"text": text, "title": "Reactor"})).await["results"][0]
        ["knowledgeBaseID"]
        .as_u64()
        .unwrap();
    loop {
        let v: Value = http
            .get(format!("{kb_url}/{kb}"))
            .header("X-ORGANIZATION-SECRET", &key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v["status"] == "READY" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (key, format!("{base}/v1/replicas/{id}/chat/completions"))
}

/// TTFB (response head) of `requests` POSTs of `body` to `url` by `concurrency` workers.
async fn measure(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    body: Value,
    requests: usize,
    concurrency: usize,
) -> Vec<f64> {
    let per_worker = requests.div_ceil(concurrency);
    let body = Arc::new(body);
    let workers = (0..concurrency).map(|_| {
        let (http, url, key, body) = (http.clone(), url.to_string(), key.to_string(), body.clone());
        tokio::spawn(async move {
            let mut out = Vec::with_capacity(per_worker);
            for _ in 0..per_worker {
                let started = Instant::now();
                let res =
                    http.post(&url).header("X-ORGANIZATION-SECRET", &key).json(&*body).send().await.expect("send");
                out.push(started.elapsed().as_secs_f64() * 1000.0);
                assert!(res.status().is_success(), "{}", res.status());
                let _ = res.bytes().await;
            }
            out
        })
    });
    let mut all = Vec::new();
    for w in workers.collect::<Vec<_>>() {
        all.extend(w.await.expect("worker"));
    }
    all.sort_by(f64::total_cmp);
    all
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    replicad::install_crypto_provider();
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter("warn").init();
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("temp dir");
    let upstream = fake_upstream(Duration::from_millis(args.delay_ms)).await;
    let base = replicad(&upstream, dir.path().to_path_buf()).await;
    let http = reqwest::Client::builder().pool_max_idle_per_host(256).build().expect("client");
    let (key, url) = setup(&http, &base, dir.path()).await;
    let direct_url = format!("{upstream}/chat/completions");
    let direct_body = json!({"model": "fake", "messages": [{"role": "user", "content": "What is the answer?"}]});
    let via_body = json!({
        "content": "At what temperature does the Zorblax reactor operate?",
        "skip_chat_history": args.skip_history,
    });
    // Warm-up (connections, caches).
    measure(&http, &direct_url, &key, direct_body.clone(), 32, 8).await;
    measure(&http, &url, &key, via_body.clone(), 32, 8).await;
    println!("upstream delay {} ms, {} requests per row; TTFB in ms", args.delay_ms, args.requests);
    println!("{:>11} {:>8} {:>8} {:>8} {:>8} {:>8}", "concurrency", "target", "p50", "p90", "p99", "mean");
    for &c in &args.concurrency {
        let direct = measure(&http, &direct_url, &key, direct_body.clone(), args.requests, c).await;
        let via = measure(&http, &url, &key, via_body.clone(), args.requests, c).await;
        for (name, v) in [("direct", &direct), ("replicad", &via)] {
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            println!("{c:>11} {name:>8} {:>8.2} {:>8.2} {:>8.2} {mean:>8.2}", pct(v, 0.5), pct(v, 0.9), pct(v, 0.99));
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        println!(
            "{c:>11} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
            "overhead",
            pct(&via, 0.5) - pct(&direct, 0.5),
            pct(&via, 0.9) - pct(&direct, 0.9),
            pct(&via, 0.99) - pct(&direct, 0.99),
            mean(&via) - mean(&direct)
        );
    }
}
