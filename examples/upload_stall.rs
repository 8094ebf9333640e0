//! How long small writes wait behind large ones: `--writers` tasks append
//! one small chat history item at a time (`service::history::append`, a durable write each)
//! while the main task, after a quiet second, uploads `--uploads` files of `--upload-mib` MiB
//! (`service::knowledge::uploads::upload`) one after another, then creates `--texts` text entries of
//! `--text-chars` characters (`service::knowledge::create`: chunking, language detection).
//! Prints the history writes' latency (p50, p99, max) while nothing else runs, while uploads
//! run, and while text entries are created, and how long each upload and creation took.
//!
//! ```text
//! cargo run --release --example upload_stall -- --uploads 5 --upload-mib 50 --texts 5
//! ```

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use uuid::Uuid;

use replicad::service::history::{self, NewItem};
use replicad::service::knowledge::uploads;
use replicad::service::knowledge::{self, Content, Limits, NewEntry};
use replicad::store::records::Replica;
use replicad::store::{tables, Store};

#[allow(dead_code)] // `serve` is for the examples that serve
mod common;

#[derive(Parser)]
struct Args {
    /// Tasks writing history items.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Files uploaded, one after another.
    #[arg(long, default_value_t = 5)]
    uploads: usize,
    /// Size of each uploaded file, in MiB.
    #[arg(long, default_value_t = 50)]
    upload_mib: usize,
    /// Text entries created, one after another.
    #[arg(long, default_value_t = 5)]
    texts: usize,
    /// Characters of each text entry.
    #[arg(long, default_value_t = 2_000_000)]
    text_chars: usize,
}

/// Phases of the run; each history write is counted in the phase it started in.
const QUIET: u8 = 0;
const UPLOADS: u8 = 1;
const TEXTS: u8 = 2;
const DONE: u8 = 3;

type Samples = Arc<Mutex<Vec<Vec<Duration>>>>;

fn history_writer(store: Store, replica: Uuid, phase: Arc<AtomicU8>, samples: Samples) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let user = Uuid::now_v7();
        loop {
            let p = phase.load(Ordering::Relaxed);
            if p == DONE {
                return;
            }
            let item = NewItem {
                role: "user",
                content: "a short question while a large write goes on".into(),
                source: "web".into(),
                sources: Vec::new(),
                channel_data: None,
                channel_key: None,
                interrupted: false,
            };
            let started = Instant::now();
            history::append(&store, replica, user, false, vec![item]).await.expect("history write");
            samples.lock().unwrap()[p as usize].push(started.elapsed());
        }
    })
}

fn report(name: &str, mut d: Vec<Duration>) {
    d.sort();
    let at =
        |q: f64| d.get(((d.len() as f64 * q) as usize).min(d.len().saturating_sub(1))).copied().unwrap_or_default();
    let ms = |x: Duration| x.as_secs_f64() * 1e3;
    let max = d.last().copied().unwrap_or_default();
    println!(
        "{name:<28} {:>7} writes  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms",
        d.len(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(max)
    );
}

/// Uploads `n` files of `mib` MiB, one after another; prints each upload's time.
async fn upload_files(store: &Store, org: Uuid, replica: Uuid, n: usize, mib: usize) {
    let limits =
        Limits { max_entries_per_org: u64::MAX, max_file_bytes: (mib as u64 + 1) << 20, upload_ttl_ms: 3_600_000 };
    let bytes = bytes::Bytes::from("plain text of an uploaded file\n".repeat((mib << 20) / 31));
    for i in 0..n {
        let new = NewEntry {
            content: Content::Filename(format!("file{i}.txt")),
            title: None,
            language: None,
            auto_refresh: false,
            custom_limit: None,
        };
        let created = knowledge::create(store, org, replica, new, limits).await.expect("file entry");
        let (token, _) = created.upload.expect("upload token");
        let started = Instant::now();
        uploads::upload(store, &token, bytes.clone(), Some("text/plain".into())).await.expect("upload");
        println!("upload {i}: {} MiB in {:.0} ms", bytes.len() >> 20, started.elapsed().as_secs_f64() * 1e3);
    }
}

/// Creates `n` text entries of `chars` characters, one after another; prints each one's time.
async fn create_texts(store: &Store, org: Uuid, replica: Uuid, n: usize, chars: usize) {
    let sentence = "Green tea is steamed or pan-fired soon after picking, which keeps it from oxidising. ";
    for i in 0..n {
        let mut text = format!("# Document {i}\n\n");
        while text.len() < chars {
            text.push_str(sentence);
            if text.len() % 1500 < sentence.len() {
                text.push_str("\n\n");
            }
        }
        text.truncate(chars);
        let started = Instant::now();
        knowledge::create(store, org, replica, NewEntry::text(text, Some("en")), Limits::UNLIMITED)
            .await
            .expect("text");
        println!("text entry {i}: {chars} characters in {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path()).expect("open store");
    let (_, replica) = common::bench_org(&store).await;
    let org = store
        .read(move |txn| {
            let table = txn.open_table(tables::REPLICAID_REPLICA)?;
            let r: Option<Replica> = replicad::store::get(&table, replicad::store::k(replica))?;
            Ok(r.expect("the bench replica").org)
        })
        .await
        .expect("read the replica");
    let phase = Arc::new(AtomicU8::new(QUIET));
    let samples: Samples = Arc::new(Mutex::new(vec![Vec::new(); 3]));
    let writers: Vec<_> =
        (0..args.writers).map(|_| history_writer(store.clone(), replica, phase.clone(), samples.clone())).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    phase.store(UPLOADS, Ordering::Relaxed);
    upload_files(&store, org, replica, args.uploads, args.upload_mib).await;
    phase.store(TEXTS, Ordering::Relaxed);
    create_texts(&store, org, replica, args.texts, args.text_chars).await;
    phase.store(DONE, Ordering::Relaxed);
    for w in writers {
        w.await.expect("writer");
    }
    let samples = std::mem::take(&mut *samples.lock().unwrap());
    println!("history writes ({} writers), by what ran beside them:", args.writers);
    for (name, d) in ["nothing", "uploads", "text entries"].iter().zip(samples) {
        report(name, d);
    }
}
