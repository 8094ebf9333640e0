//! Backup and restore at scale: writes `--messages` chat history items (100
//! per user, through `service::history::Append`, the code of every history write) and the
//! demo organization's replica into a store, then times `backup::write` (the snapshot copy and
//! the archive) and `backup::restore::restore` (unpack, open, index rebuild, check), printing
//! sizes and rates.
//!
//! ```text
//! cargo run --release --example backup_bench -- --messages 1000000
//! ```

use std::time::Instant;

use clap::Parser;

use replicad::backup::{self, restore};
use replicad::store::Store;

#[allow(dead_code)] // each example uses part of it
mod common;

#[derive(Parser)]
struct Args {
    /// History items to write before the backup.
    #[arg(long, default_value_t = 200_000)]
    messages: usize,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let tmp = tempfile::tempdir().expect("temp dir");
    let (data, archive, restored) = (tmp.path().join("data"), tmp.path().join("b.tar.gz"), tmp.path().join("r"));
    let store = Store::open(&data).expect("open store");
    let (_, replica) = common::bench_org(&store).await;
    common::fill_history(&store, replica, args.messages).await;
    let key = replicad::secrets::key_path(None, &data);
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).expect("key");

    let (mut progress, job) = backup::spawn(store.clone(), key, archive.clone());
    while let Some(p) = progress.recv().await {
        eprintln!("  {p}");
    }
    let s = job.await.expect("join").expect("backup");
    let mib = |b: u64| b as f64 / 1_048_576.0;
    println!(
        "backup: {} records, store copy {:.1} MiB, archive {:.1} MiB, {:.2} s ({:.0} records/s)",
        s.records,
        mib(s.store_bytes),
        mib(s.bytes),
        s.millis as f64 / 1000.0,
        s.records as f64 * 1000.0 / s.millis.max(1) as f64
    );
    let started = Instant::now();
    let r = restore::restore(&archive, &restored, None).await.expect("restore");
    println!(
        "restore: {} records, {} chunks indexed, {:.2} s",
        r.manifest.records,
        r.chunks,
        started.elapsed().as_secs_f64()
    );
}
