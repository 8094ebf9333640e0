//! Start-up time and idle memory on a large data directory: one organization
//! with `--messages` chat history items and `--entries` knowledge-base text entries (eight
//! chunks each: 10,000 chunks by default), then `--starts` starts of the release binary, timed
//! from spawn to its `listening on` line, with the RSS a second later.
//!
//! ```text
//! cargo build --release && cargo run --release --example startup_bench -- --messages 1000000
//! ```
//!
//! The first start processes and indexes the entries (not timed); the timed starts open the
//! store and the existing index (tantivy reads its meta file and segment list: nothing is
//! rebuilt unless the index is missing or of another schema).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;

use replicad::service::knowledge::{self, NewEntry};
use replicad::store::Store;

#[allow(dead_code)] // each example uses part of it
mod common;

#[derive(Parser)]
struct Args {
    /// History items to store.
    #[arg(long, default_value_t = 1_000_000)]
    messages: usize,
    /// Knowledge-base text entries to store (eight chunks each).
    #[arg(long, default_value_t = 1_250)]
    entries: usize,
    /// Timed starts.
    #[arg(long, default_value_t = 5)]
    starts: usize,
    /// The replicad binary.
    #[arg(long, default_value = "target/release/replicad")]
    bin: PathBuf,
}

/// A paragraph of entry `n`, part `p` (distinct words, so that chunks differ).
fn paragraph(n: usize, p: usize) -> String {
    format!(
        "Section {p} of document {n}. The widget model {n}-{p} ships with a calibrated sensor, a \
         replaceable battery rated for {} cycles and a firmware that reports its state every {} \
         seconds. Operators reset it by holding the button for five seconds; the light then \
         blinks twice and the device restarts with its factory settings kept in flash memory.\n\n",
        500 + p * 7,
        10 + n % 50
    )
    .repeat(3)
}

async fn fill(dir: &Path, args: &Args) -> (String, uuid::Uuid) {
    let store = Store::open(dir).expect("open store");
    let (org, key, replica) = common::bench_org_with_id(&store).await;
    common::fill_history(&store, replica, args.messages).await;
    let limits = knowledge::Limits { max_entries_per_org: u64::MAX, max_file_bytes: 0, upload_ttl_ms: 0 };
    for n in 0..args.entries {
        let text: String = (0..10).map(|p| paragraph(n, p)).collect();
        knowledge::create(&store, org, replica, NewEntry::text(text, Some("en")), limits).await.expect("entry");
    }
    (key, replica)
}

/// Waits until every entry is `READY` (processed and indexed); returns the first entry's
/// `chunkCount`.
async fn wait_ready(base: &str, key: &str, replica: uuid::Uuid, entries: usize) -> u64 {
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/replicas/{replica}/knowledge-base?status=READY&pageSize=1");
    loop {
        let body: serde_json::Value =
            http.get(&url).header("X-ORGANIZATION-SECRET", key).send().await.expect("list").json().await.expect("json");
        if body["total"].as_u64() == Some(entries as u64) {
            return body["items"][0]["chunkCount"].as_u64().unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    replicad::install_crypto_provider();
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("data");
    let (key, replica) = fill(&dir, &args).await;
    let (child, _, base) = common::start(&args.bin, &dir, &[]);
    let indexing = Instant::now();
    let chunks = wait_ready(&base, &key, replica, args.entries).await;
    let secs = indexing.elapsed().as_secs_f64();
    println!("{} entries of {chunks} chunks each processed and indexed in {secs:.1} s", args.entries);
    common::stop(child);
    let mut times = Vec::new();
    for _ in 0..args.starts {
        let (child, took, _) = common::start(&args.bin, &dir, &[]);
        std::thread::sleep(Duration::from_secs(1));
        println!(
            "start to listening: {:.1} ms, RSS after 1 s: {:.1} MB",
            took.as_secs_f64() * 1e3,
            common::rss_kib(child.id()) as f64 / 1024.0
        );
        times.push(took);
        common::stop(child);
    }
    times.sort();
    println!("median start to listening: {:.1} ms", times[times.len() / 2].as_secs_f64() * 1e3);
}
