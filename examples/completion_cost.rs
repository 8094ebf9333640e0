//! CPU time of an embedded completion, BM25 alone beside hybrid (BM25 + embeddings), measured
//! on the release binary pinned to one core (all its threads), the client on another.
//!
//! ```sh
//! eval "$(bash .ci/install-embedding-model)"
//! cargo build --release --bin replicad --example completion_cost
//! taskset -c 0 target/release/examples/completion_cost --bin target/release/replicad \
//!     --embeddings "$REPLICAD_TEST_EMBEDDING_MODEL" --core 1
//! ```
//!
//! `--bin` may be given several times (an older build beside this one): the binaries are
//! alternated, each in both modes, twice. For each mode (alternated: BM25, hybrid) a server starts on a fresh data
//! directory holding one replica whose knowledge base is the Python tutorial
//! (`data/sample/python-tutorial`, one entry per file, waited for until `READY`, vectors
//! included); then every question of the Python corpus of `tests/answers/questions.json` is asked
//! once (`POST …/chat/completions`, stored in the history: the question's vector is computed),
//! once again (the vector comes from the cache of recent questions; the reader's analyses of
//! the chunks too) and once more with the first space of each question doubled (`vector`: the
//! same words, embedded anew; so `vector` − `again` is what embedding a question costs in the
//! server, and `first` − `vector` what the first reading of the chunks costs). Reported per pass: the
//! server's CPU time per completion (user + system, from `/proc/PID/stat`, divided by the
//! completions) and the client's p50 / p99 latency.
//!
//! `--during-upload` (hybrid mode; give the server every core, `--core 0,1`): then the tutorial
//! is uploaded again, in capitals (every chunk a new text, embedded anew), and while it is not
//! `READY` the questions are asked, each with a number appended (each embedded anew): the
//! completions' latency while an upload is being embedded, and the upload's time.

#[path = "common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use replicad::store::Store;
use serde_json::{json, Value};

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// User + system CPU time of process `pid` so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
    let ticks: u64 = fields.get(11..13).map_or(0, |f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum());
    Duration::from_millis(ticks * 10)
}

fn questions() -> Vec<String> {
    let all: Value = serde_json::from_str(&std::fs::read_to_string("tests/answers/questions.json").expect("questions"))
        .expect("questions JSON");
    all["questions"]
        .as_array()
        .expect("questions")
        .iter()
        .filter(|q| q["corpus"] == "python")
        .map(|q| q["question"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Adds every file of the sample corpus and waits until all are `READY`.
async fn fill(client: &reqwest::Client, base: &str, key: &str, replica: &str, text: fn(String) -> String) {
    let mut ids = Vec::new();
    let mut files: Vec<PathBuf> =
        std::fs::read_dir("data/sample/python-tutorial").expect("corpus").flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files.iter().filter(|p| p.extension().is_some_and(|x| x == "txt")) {
        let body = json!({ "text": text(std::fs::read_to_string(f).expect("read")), "language": "en" });
        let r =
            client.post(format!("{base}/v1/replicas/{replica}/knowledge-base")).header("X-ORGANIZATION-SECRET", key);
        let v: Value = r.json(&body).send().await.expect("create").json().await.expect("JSON");
        ids.push(v["results"][0]["knowledgeBaseID"].as_u64().expect("id"));
    }
    for id in ids {
        loop {
            let r = client.get(format!("{base}/v1/replicas/{replica}/knowledge-base/{id}"));
            let v: Value =
                r.header("X-ORGANIZATION-SECRET", key).send().await.expect("get").json().await.expect("JSON");
            if v["status"] == "READY" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One completion of `question`; its latency in ms.
async fn ask(client: &reqwest::Client, base: &str, key: &str, replica: &str, question: &str) -> f64 {
    let t = Instant::now();
    let r = client.post(format!("{base}/v1/replicas/{replica}/chat/completions"));
    let r = r.header("X-ORGANIZATION-SECRET", key).json(&json!({ "content": question })).send().await;
    assert!(r.expect("completion").status().is_success());
    t.elapsed().as_secs_f64() * 1e3
}

/// `--during-upload`: the tutorial again in capitals, questions asked until it is `READY`.
async fn during_upload(client: &reqwest::Client, base: &str, key: &str, replica: &str) {
    let started = Instant::now();
    let upload = {
        let (client, base, key, replica) = (client.clone(), base.to_string(), key.to_string(), replica.to_string());
        tokio::spawn(async move { fill(&client, &base, &key, &replica, |t| t.to_uppercase()).await })
    };
    let mut millis = Vec::new();
    for (n, q) in questions().iter().cycle().enumerate() {
        if upload.is_finished() || started.elapsed() > Duration::from_secs(600) {
            break;
        }
        millis.push(ask(client, base, key, replica, &format!("{q} ({n})")).await);
    }
    upload.await.expect("upload");
    let ready = started.elapsed().as_secs_f64();
    millis.sort_by(f64::total_cmp);
    let at = |q: f64| millis.get(((millis.len().max(1) - 1) as f64 * q) as usize).copied().unwrap_or(f64::NAN);
    println!(
        "hybrid  during an upload (READY in {ready:.1} s): {} completions, latency p50 {:.2} ms, p99 {:.2} ms",
        millis.len(),
        at(0.5),
        at(0.99)
    );
}

async fn run(bin: &std::path::Path, core: &str, embeddings: Option<&str>, upload: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (key, replica) = {
        let store = Store::open(dir.path()).expect("store");
        common::bench_org(&store).await
    };
    // the store's writer thread closes the file after the last handle is dropped
    assert!(replicad::store::wait_closed(Duration::from_secs(5)), "the bench's store closed");
    let mut extra = Vec::new();
    if let Some(e) = embeddings {
        extra.extend(["--embedding-models", e]);
    }
    let (child, _, base) = common::start(bin, dir.path(), &extra);
    let pid = child.id();
    let pinned = std::process::Command::new("taskset").args(["-apc", core, &pid.to_string()]).output();
    assert!(pinned.is_ok_and(|o| o.status.success()), "taskset -apc {core} {pid}");
    let client = reqwest::Client::new();
    let started = Instant::now();
    fill(&client, &base, &key, &replica.to_string(), |t| t).await;
    let mode = if embeddings.is_some() { "hybrid" } else { "BM25" };
    println!("{mode:<7} knowledge base READY in {:.1} s", started.elapsed().as_secs_f64());
    let questions = questions();
    for pass in ["first", "again", "vector"] {
        let before = cpu(pid);
        let mut millis = Vec::new();
        for q in &questions {
            // "vector": the question with its first space doubled, the same words and tokens
            // but another text, so its vector is not in the cache of recent questions: the
            // cost of embedding it, with everything else as warm as in "again"
            let q = if pass == "vector" { q.replacen(' ', "  ", 1) } else { q.clone() };
            millis.push(ask(&client, &base, &key, &replica.to_string(), &q).await);
        }
        let per = (cpu(pid) - before).as_secs_f64() * 1e3 / questions.len() as f64;
        millis.sort_by(f64::total_cmp);
        let (p50, p99) = (millis[millis.len() / 2], millis[millis.len() * 99 / 100]);
        println!(
            "{mode:<7} {pass:<6} {} completions: server CPU {per:.2} ms each; latency p50 {p50:.2} ms, p99 {p99:.2} ms",
            questions.len()
        );
    }
    println!("{mode:<7} RSS {} MiB", common::rss_kib(pid) / 1024);
    if upload && embeddings.is_some() {
        during_upload(&client, &base, &key, &replica.to_string()).await;
    }
    common::stop(child);
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    replicad::install_crypto_provider();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut bins: Vec<PathBuf> = args.windows(2).filter(|w| w[0] == "--bin").map(|w| PathBuf::from(&w[1])).collect();
    if bins.is_empty() {
        bins.push("target/release/replicad".into());
    }
    let embeddings = flag(&args, "--embeddings").expect("--embeddings DIR (a model directory or catalog)");
    let core = flag(&args, "--core").unwrap_or_else(|| "1".into());
    let upload = args.iter().any(|a| a == "--during-upload");
    for _ in 0..2 {
        for bin in &bins {
            println!("{}", bin.display());
            if !upload {
                run(bin, &core, None, false).await;
            }
            run(bin, &core, Some(&embeddings), upload).await;
        }
    }
}
