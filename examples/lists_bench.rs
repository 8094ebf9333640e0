//! What a page of a list costs as the organization grows: one organization
//! with `--small` and then `--large` replicas and knowledge-base entries (file entries waiting for
//! their bytes, so nothing is processed or indexed meanwhile), each time served by the release
//! binary and asked, one request at a time over one connection, for the first, the middle and
//! the last page of 20 of `GET /v1/replicas` (creation and name order) and of the entry lists
//! (one replica's, and the organization-wide one), and for a filtered page (a filter makes the
//! list test every record: what every page cost before the write-time indexes).
//!
//! ```text
//! cargo build --release && cargo run --release --example lists_bench -- --small 1000 --large 100000
//! ```
//!
//! Prints the median latency of each request at both sizes and their ratio: a page that reads
//! only its own records costs the same at both sizes; the middle page also walks the skipped
//! index keys (from the nearer end, so at most half of them).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::task::JoinSet;
use uuid::Uuid;

use replicad::service::knowledge::{self, Content, Limits, NewEntry};
use replicad::service::replicas;
use replicad::store::Store;

#[allow(dead_code)] // each example uses part of it
mod common;

#[derive(Parser)]
struct Args {
    /// Replicas and entries of the first measurement.
    #[arg(long, default_value_t = 1_000)]
    small: usize,
    /// Replicas and entries of the second measurement.
    #[arg(long, default_value_t = 100_000)]
    large: usize,
    /// Requests per measured URL (the median is printed).
    #[arg(long, default_value_t = 101)]
    requests: usize,
    /// The replicad binary.
    #[arg(long, default_value = "target/release/replicad")]
    bin: PathBuf,
}

/// Writes in flight while filling (the writer commits them in groups).
const IN_FLIGHT: usize = 64;

/// Adds replicas and entries to the bench organization until each numbers `to`.
async fn fill(store: &Store, org: Uuid, replica: Uuid, from: usize, to: usize) {
    let started = Instant::now();
    let models = std::sync::Arc::new(replicad::models::Models::parse(replicad::models::SHIPPED).expect("models"));
    let mut tasks = JoinSet::new();
    for n in from..to {
        if tasks.len() >= IN_FLIGHT {
            tasks.join_next().await.expect("a task").expect("join");
        }
        let (store, models) = (store.clone(), models.clone());
        tasks.spawn(async move {
            let body = replicas::ReplicaInput {
                name: format!("Replica {:08}", (n * 7919) % 1_000_003),
                short_description: "bench".into(),
                greeting: "Hi".into(),
                owner_id: common::EMAIL.into(),
                slug: format!("r{n}"),
                ..Default::default()
            };
            replicas::create(&store, org, &body, &models, None, u64::MAX).await.expect("replica");
            let limits = Limits { max_entries_per_org: u64::MAX, max_file_bytes: 1 << 20, upload_ttl_ms: 86_400_000 };
            let new = NewEntry { title: Some(format!("Entry {n}")), ..NewEntry::text(String::new(), None) };
            let new = NewEntry { content: Content::Filename(format!("file-{n}.pdf")), ..new };
            knowledge::create(&store, org, replica, new, limits).await.expect("entry");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("join");
    }
    println!("filled to {to} replicas and entries in {:.1} s", started.elapsed().as_secs_f64());
}

/// The median latency of `requests` GETs of `url`, in milliseconds (after two unmeasured ones).
async fn median_ms(http: &reqwest::Client, url: &str, key: &str, requests: usize) -> f64 {
    let mut times = Vec::with_capacity(requests);
    for i in 0..requests + 2 {
        let started = Instant::now();
        let r = http.get(url).header("X-ORGANIZATION-SECRET", key).send().await.expect("GET");
        assert!(r.status().is_success(), "{url}: {}", r.status());
        let body = r.bytes().await.expect("body");
        assert!(!body.is_empty());
        if i >= 2 {
            times.push(started.elapsed());
        }
    }
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

/// The measured requests at `n` replicas and entries: (label, path).
fn requests(n: usize, replica: Uuid) -> Vec<(String, String)> {
    let (middle, last) = ((n / 2 / 20).max(1), n.div_ceil(20));
    let kb = format!("/v1/replicas/{replica}/knowledge-base");
    let mut out = Vec::new();
    for (label, base, sort) in [
        ("replicas, creation", "/v1/replicas".to_string(), ""),
        ("replicas, name", "/v1/replicas".to_string(), "&sort=name"),
        ("entries, one replica, createdAt", kb.clone(), ""),
        ("entries, one replica, title", kb.clone(), "&sort=-title"),
        ("entries, organization, createdAt", "/v1/knowledge-base".to_string(), ""),
    ] {
        for (which, page) in [("first", 1), ("middle", middle), ("last", last)] {
            out.push((format!("{label}: {which} page"), format!("{base}?pageSize=20&page={page}{sort}")));
        }
    }
    out.push(("replicas, filtered (search): first page".into(), "/v1/replicas?pageSize=20&search=replica".into()));
    out.push(("entries, filtered (status=NEW): first page".into(), format!("{kb}?pageSize=20&status=NEW")));
    out
}

async fn measure(bin: &Path, dir: &Path, key: &str, n: usize, replica: Uuid, count: usize) -> Vec<(String, f64)> {
    let (child, _, base) = common::start(bin, dir, &["--max-replicas-per-org", "1000000"]);
    let http = reqwest::Client::new();
    let mut out = Vec::new();
    for (label, path) in requests(n, replica) {
        out.push((label, median_ms(&http, &format!("{base}{path}"), key, count).await));
    }
    common::stop(child);
    out
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    replicad::install_crypto_provider();
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("data");
    let (mut results, mut filled, mut ids) = (Vec::new(), 0, None);
    for n in [args.small, args.large] {
        let store = Store::open(&dir).expect("open store");
        let (org, key, replica) = match ids.take() {
            Some(ids) => ids,
            None => common::bench_org_with_id(&store).await,
        };
        fill(&store, org, replica, filled, n).await;
        filled = n;
        drop(store);
        replicad::store::wait_closed(Duration::from_secs(5));
        results.push(measure(&args.bin, &dir, &key, n, replica, args.requests).await);
        ids = Some((org, key, replica));
    }
    println!("| request | {} (ms, p50) | {} (ms, p50) | ratio |", args.small, args.large);
    println!("|---|---|---|---|");
    for ((label, small), (_, large)) in results[0].iter().zip(&results[1]) {
        println!("| {label} | {small:.2} | {large:.2} | {:.1}× |", large / small);
    }
}
