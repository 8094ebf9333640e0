//! The cost of the extraction sandbox per file: every file below `--dir` is
//! extracted `--rounds` times in this process (`ingest::extract::extract`, as the server did
//! before) and in a sandboxed child of `--bin` (`ingest::sandbox::Sandbox`, as it does now),
//! alternating, and checks both give the same text; prints p50/p99 of each.
//!
//! ```text
//! cargo build --release && cargo run --release --example extract_cost -- \
//!   --bin target/release/replicad --dir data/sample/python-tutorial --rounds 20
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;

use replicad::ingest::extract;
use replicad::ingest::formats::Format;
use replicad::ingest::sandbox::{Limits, Sandbox};

#[derive(Parser)]
struct Args {
    /// The replicad binary the sandbox runs.
    #[arg(long)]
    bin: PathBuf,
    /// Files to extract (every regular file below it with a recognised format).
    #[arg(long, default_value = "data/sample/python-tutorial")]
    dir: PathBuf,
    /// Extractions of each file, each way.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1000.0
}

fn files(dir: &PathBuf) -> Vec<(String, Format, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("--dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(entry.path()).expect("read");
        if let Some(format) = Format::detect(&name, None, &bytes) {
            out.push((name, format, bytes));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let sandbox = Sandbox::at(args.bin.clone(), Limits { memory_mib: 1024, cpu_seconds: 120 });
    let (mut inproc, mut boxed) = (Vec::new(), Vec::new());
    let files = files(&args.dir);
    for _ in 0..args.rounds {
        for (name, format, bytes) in &files {
            let started = Instant::now();
            let a = extract::extract(*format, bytes).expect(name);
            inproc.push(started.elapsed());
            let started = Instant::now();
            let b = sandbox.extract(*format, bytes.clone(), "file").await.expect(name);
            boxed.push(started.elapsed());
            assert_eq!(a, b, "{name}: the sandbox extracted other text");
        }
    }
    let bytes: usize = files.iter().map(|f| f.2.len()).sum();
    println!("{} files, {:.1} KiB in all, {} rounds", files.len(), bytes as f64 / 1024.0, args.rounds);
    for (label, samples) in [("in process", &mut inproc), ("sandboxed", &mut boxed)] {
        let (p50, p99) = (percentile(samples, 0.5), percentile(samples, 0.99));
        println!("{label:>11}: p50 {p50:.2} ms, p99 {p99:.2} ms per file");
    }
}
