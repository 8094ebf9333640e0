//! Time from `POST …/knowledge-base` to searchable: a client creates a text
//! entry, polls it every millisecond until it reports `VECTOR_CREATED` or `READY` (the moment
//! every completion sees its chunks), and the time is recorded; `--rounds` of them, one after
//! the other, against replicad serving in this process on loopback. Prints p50, p99 and max.
//!
//! ```text
//! cargo run --release --example searchable -- --rounds 300
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};

use replicad::store::Store;

#[allow(dead_code)] // each example uses part of it
mod common;

#[derive(Parser)]
struct Args {
    /// Entries created, one after the other.
    #[arg(long, default_value_t = 300)]
    rounds: usize,
}

/// Creates entry `i` and polls it until searchable; the time that took.
async fn round(http: &reqwest::Client, kb: &str, key: &str, i: usize) -> Duration {
    let text = format!("The vortal{i} lantern is kept in vault number {}.", 40_000 + i);
    let started = Instant::now();
    let res = http.post(kb).header("X-ORGANIZATION-SECRET", key).json(&json!({"text": text})).send().await;
    let v: Value = res.expect("POST").json().await.expect("JSON");
    let id = v["results"][0]["knowledgeBaseID"].as_u64().unwrap_or_else(|| panic!("created: {v}"));
    loop {
        let res = http.get(format!("{kb}/{id}")).header("X-ORGANIZATION-SECRET", key).send().await;
        let v: Value = res.expect("GET").json().await.expect("JSON");
        if matches!(v["status"].as_str(), Some("VECTOR_CREATED" | "READY")) {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::main]
async fn main() {
    replicad::install_crypto_provider();
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("temp dir");
    let (key, replica) = common::bench_org(&Store::open(dir.path()).expect("open store")).await;
    tokio::time::sleep(Duration::from_millis(500)).await; // the store's writer thread lets go
    let base = common::serve(replicad::Config::new(dir.path().to_path_buf())).await;
    let http = reqwest::Client::new();
    let kb = format!("{base}/v1/replicas/{replica}/knowledge-base");
    round(&http, &kb, &key, usize::MAX / 2).await; // warm-up
    let mut times = Vec::with_capacity(args.rounds);
    for i in 0..args.rounds {
        times.push(round(&http, &kb, &key, i).await);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "POST …/knowledge-base to searchable, {} entries: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        times.len(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(times[times.len() - 1])
    );
}
