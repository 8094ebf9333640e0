//! What the benchmark examples share: an organization with one replica written straight into a
//! store, and replicad serving a data directory in this process on loopback.

use uuid::Uuid;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use replicad::service::history::{Append, NewItem};
use replicad::service::{orgs, replicas};
use replicad::store::{Grouped, Store};

/// E-mail of the owner user of [`bench_org`]'s organization.
pub const EMAIL: &str = "bench@example.org";

/// Makes the organization "Bench" and its replica `bench` (model `replicad-extractive`) in
/// `store`; returns (API key, replica).
pub async fn bench_org(store: &Store) -> (String, Uuid) {
    let (_, key, replica) = bench_org_with_id(store).await;
    (key, replica)
}

/// [`bench_org`], also returning the organization's id: (organization, API key, replica).
pub async fn bench_org_with_id(store: &Store) -> (Uuid, String, Uuid) {
    let new = orgs::NewOrg { organization_name: "Bench".into(), name: "Bench Owner".into(), email: EMAIL.into() };
    let (org, key) = orgs::create_direct(store, new).await.expect("org");
    let llm = replicas::LlmInput { model: Some("replicad-extractive".into()), ..Default::default() };
    let body = replicas::ReplicaInput {
        name: "Bench".into(),
        short_description: "bench".into(),
        greeting: "Hi".into(),
        owner_id: EMAIL.into(),
        slug: "bench".into(),
        llm,
        ..Default::default()
    };
    let models = replicad::models::Models::parse(replicad::models::SHIPPED).expect("models");
    let replica = replicas::create(store, org.id, &body, &models, None, 10).await.expect("replica");
    (org.id, key, replica)
}

/// Serves `config` on a free loopback port in this process; returns the base URL. Exits the
/// process if the server fails.
pub async fn serve(config: replicad::Config) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        if let Err(e) = replicad::serve(config, listener, std::future::pending()).await {
            eprintln!("replicad: {e}");
            std::process::exit(1);
        }
    });
    base
}

/// Writes `messages` chat history items to `replica` (100 per user, alternating roles, through
/// `service::history::Append`, the code of every history write), 10,000 per write transaction.
pub async fn fill_history(store: &Store, replica: Uuid, messages: usize) {
    let started = Instant::now();
    let batch = 10_000usize;
    for first in (0..messages).step_by(batch) {
        store
            .write(move |txn| {
                let mut tables = Append::open(txn)?;
                let mut user = Uuid::now_v7();
                for n in first..(first + batch).min(messages) {
                    if n % 100 == 0 {
                        user = Uuid::now_v7();
                    }
                    let role = if n % 2 == 0 { "user" } else { "assistant" };
                    let content = format!("message {n}: a question or an answer of a typical length, some forty words");
                    let it = NewItem {
                        role,
                        content,
                        source: "web".into(),
                        sources: Vec::new(),
                        channel_data: None,
                        channel_key: None,
                        interrupted: false,
                    };
                    let (items, now) = (vec![it], replicad::store::now_ms());
                    Append { replica, user, private: false, items, now, tokens: None, pool: Default::default() }
                        .apply(&mut tables)?;
                }
                Ok(())
            })
            .await
            .expect("write history");
    }
    println!("wrote {messages} history items in {:.1} s", started.elapsed().as_secs_f64());
}

/// Starts the release binary `bin` serving `dir` on a free loopback port (no entry quota, and
/// `extra` arguments); returns it, the time to its `listening on` line and the base URL.
pub fn start(bin: &Path, dir: &Path, extra: &[&str]) -> (Child, Duration, String) {
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--max-kb-entries-per-org", "1000000", "--data-dir"])
        .arg(dir)
        .args(extra)
        .env("REPLICAD_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).expect("read");
    let took = started.elapsed();
    let base = line.strip_prefix("listening on ").expect("a listening line").trim().to_string();
    (child, took, base)
}

/// Stops a server [`start`] started (SIGTERM, then waits).
pub fn stop(mut child: Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
}

/// The resident set of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}
