//! Chats, usage and analytics at scale: 1,000,000 stored messages over 10,000 chats, then the
//! latency of `GET …/chats`, `GET /v1/users/me/usage` and `GET …/analytics/conversations/
//! historical`, and the throughput of `POST …/chat/history` (which keeps chats, conversations and
//! counters in its write) at a given concurrency.
//!
//! The history is written through `service::history::Append` (the code of every history
//! write, chats and counters included) in transactions of 10,000 items on a store this program
//! opens; then replicad serves that store (`replicad::serve`, in this process, loopback).
//! Each chat gets 10 conversations of 10 messages (user and assistant in turn), 6 days apart.
//!
//! ```text
//! cargo run --release --example chats_bench -- --chats 10000 --requests 200 --concurrency 64
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};
use uuid::Uuid;

use replicad::service::history::{Append, NewItem};
use replicad::store::{Grouped, Store};

#[allow(dead_code)] // each example uses part of it
mod common;
use common::EMAIL;

#[derive(Parser)]
struct Args {
    /// Chats to write (each gets 100 messages).
    #[arg(long, default_value_t = 10_000)]
    chats: usize,
    /// Requests per latency measurement.
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// Concurrent `POST …/chat/history` requests.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Seconds of `POST …/chat/history` load.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

const CONVERSATIONS: usize = 10;
const PER_CONVERSATION: usize = 10;

fn item(i: usize) -> NewItem {
    NewItem {
        role: if i % 2 == 0 { "user" } else { "assistant" },
        content: format!("message {i}: how does the reactor cooling loop work at night?"),
        source: if i % 3 == 0 { "embed".into() } else { "web".into() },
        sources: Vec::new(),
        channel_data: None,
        channel_key: None,
        interrupted: false,
    }
}

/// Writes the organization, the replica and the history; returns (key, replica).
async fn fill(dir: &std::path::Path, chats: usize) -> (String, Uuid) {
    let store = Store::open(dir).expect("open store");
    let (key, replica) = common::bench_org(&store).await;
    let users: Arc<Vec<Uuid>> = Arc::new((0..chats).map(|_| Uuid::now_v7()).collect());
    let day = 86_400_000i64;
    let start_ms = replicad::store::now_ms() - (CONVERSATIONS as i64) * 6 * day;
    let started = Instant::now();
    let total = chats * CONVERSATIONS * PER_CONVERSATION;
    let batch = 10_000usize;
    for first in (0..total).step_by(batch) {
        let users = users.clone();
        store
            .write(move |txn| {
                let mut tables = Append::open(txn)?;
                for n in first..(first + batch).min(total) {
                    let (slot, rest) = (n / (chats * PER_CONVERSATION), n % (chats * PER_CONVERSATION));
                    let (chat, m) = (rest / PER_CONVERSATION, rest % PER_CONVERSATION);
                    let at = start_ms + slot as i64 * 6 * day + rest as i64 * 1000;
                    let it = NewItem { source: "web".into(), ..item(m) };
                    let append = Append {
                        replica,
                        user: users[chat],
                        private: false,
                        items: vec![it],
                        now: at,
                        tokens: None,
                        pool: Default::default(),
                    };
                    append.apply(&mut tables)?;
                }
                Ok(())
            })
            .await
            .expect("write history");
    }
    let secs = started.elapsed().as_secs_f64();
    println!("wrote {total} messages over {chats} chats in {secs:.1} s ({:.0} messages/s)", total as f64 / secs);
    (key, replica)
}

/// p50 / p99 / max latency of `requests` sequential GETs of `url`.
async fn latency(http: &reqwest::Client, url: &str, key: &str, requests: usize) -> String {
    let mut times = Vec::with_capacity(requests);
    for _ in 0..requests {
        let t = Instant::now();
        let res = http
            .get(url)
            .header("X-ORGANIZATION-SECRET", key)
            .header("X-USER-ID", EMAIL)
            .header("X-USER-ID-TYPE", "email")
            .send()
            .await
            .expect("request");
        assert!(res.status().is_success(), "{url}: {}", res.status());
        let _: Value = res.json().await.expect("JSON");
        times.push(t.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    format!("p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", ms(at(0.5)), ms(at(0.99)), ms(times[times.len() - 1]))
}

/// `POST …/chat/history` from `concurrency` tasks for `seconds`; requests per second.
async fn history_load(http: &reqwest::Client, base: &str, key: &str, replica: Uuid, args: &Args) -> f64 {
    let url = format!("{base}/v1/replicas/{replica}/chat/history");
    let until = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..args.concurrency {
        let (http, url, key) = (http.clone(), url.clone(), key.to_string());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                let res = http
                    .post(&url)
                    .header("X-ORGANIZATION-SECRET", &key)
                    .header("X-USER-ID", format!("load-{t}"))
                    .header("X-USER-ID-TYPE", "embed")
                    .json(&json!({"content": "a question under load", "source": "embed"}))
                    .send()
                    .await
                    .expect("POST");
                assert!(res.status().is_success(), "{}", res.status());
                n += 1;
            }
            n
        }));
    }
    let mut done = 0;
    for t in tasks {
        done += t.await.expect("task");
    }
    done as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    replicad::install_crypto_provider();
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("temp dir");
    let (key, replica) = fill(dir.path(), args.chats).await;
    tokio::time::sleep(Duration::from_millis(500)).await; // the store's writer thread lets go
    let base = common::serve(replicad::Config::new(dir.path().to_path_buf())).await;
    let http = reqwest::Client::new();
    let r = format!("{base}/v1/replicas/{replica}");
    for (name, url) in [
        ("GET …/chats (sortBy replicaReplies)", format!("{r}/chats")),
        ("GET …/chats?sortBy=firstMessageAt&page=100", format!("{r}/chats?sortBy=firstMessageAt&page=100")),
        ("GET /v1/users/me/usage", format!("{base}/v1/users/me/usage")),
        ("GET …/analytics/conversations/historical", format!("{r}/analytics/conversations/historical")),
        ("GET …/analytics/conversations/sources", format!("{r}/analytics/conversations/sources")),
    ] {
        // one warm-up request, then the measurement
        latency(&http, &url, &key, 1).await;
        println!("{name}: {}", latency(&http, &url, &key, args.requests).await);
    }
    let rps = history_load(&http, &base, &key, replica, &args).await;
    println!("POST …/chat/history at c{}: {rps:.0} req/s", args.concurrency);
}
