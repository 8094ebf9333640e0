//! Crash safety, run by `.ci/run`: the real binary serves a data directory
//! while writers of every kind (chat history, replicas, knowledge-base text entries, file
//! uploads) run concurrently over HTTP; it is killed with SIGKILL at a random moment, started
//! again, and checked. Every round:
//! - the server starts (its `listening on` line within 20 s);
//! - every write it acknowledged (a 2xx answer) is there, as it was sent;
//! - nothing is half there: every record listed is one a writer sent, complete, and the counts
//!   kept at write time (`chat_history_count`, the organization's replica and entry counts of
//!   `replicad orgs list`) equal what the lists hold;
//! - `replicad check` reports the search index in agreement with the store and every recorded
//!   uploaded file whole, and the files directory holds no file that no record names (the
//!   start removes what a kill left between a file's write and its record's commit).
//!
//! Exits 1 on the first violation (printing it), 0 after `--rounds` rounds; stops early (and
//! fails) when `--seconds` pass before `--min-rounds` rounds are done.
//!
//! `cargo run --example crash -- --bin target/debug/replicad --rounds 25 --seconds 110`

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

type Outcome = Result<(), String>;

/// What the writers sent and what the server acknowledged.
#[derive(Default, Clone)]
struct Ledger {
    /// History contents sent / acknowledged (id → content).
    history_sent: BTreeSet<String>,
    history_acked: BTreeMap<u64, String>,
    /// Replica slugs sent / acknowledged (uuid → slug).
    replicas_sent: BTreeSet<String>,
    replicas_acked: BTreeMap<String, String>,
    /// Entry titles sent / acknowledged (id → title), text entries and uploads alike.
    entries_sent: BTreeSet<String>,
    entries_acked: BTreeMap<u64, String>,
    /// Uploads acknowledged: entry id → bytes uploaded.
    uploads_acked: BTreeMap<u64, u64>,
    /// Writes the server answered with an error (each one a violation).
    refused: Vec<String>,
}

struct Args {
    bin: PathBuf,
    rounds: u32,
    min_rounds: u32,
    seconds: u64,
}

fn args() -> Args {
    let mut a = Args { bin: PathBuf::from("target/debug/replicad"), rounds: 25, min_rounds: 20, seconds: 110 };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or_default();
        let number = || value.parse::<u64>().unwrap_or_else(|_| panic!("{} needs a number", pair[0]));
        match pair[0].as_str() {
            "--bin" => a.bin = PathBuf::from(value),
            "--rounds" => a.rounds = number() as u32,
            "--min-rounds" => a.min_rounds = number() as u32,
            "--seconds" => a.seconds = number(),
            other => panic!("unknown flag {other} (--bin, --rounds, --min-rounds, --seconds)"),
        }
    }
    a.min_rounds = a.min_rounds.min(a.rounds);
    a
}

/// A small xorshift generator: kill moments need no more.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

struct Server {
    child: Child,
    base: String,
}

fn start(bin: &Path, dir: &Path) -> Result<Server, String> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.with_extension("log")).unwrap();
    let mut child = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--max-replicas-per-org", "1000000"])
        .args(["--max-kb-entries-per-org", "1000000", "--data-dir"])
        .arg(dir)
        .env("REPLICAD_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        // Keep the pipe open for the life of the server.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    match rx
        .recv_timeout(Duration::from_secs(20))
        .ok()
        .and_then(|l| l.strip_prefix("listening on ").map(str::to_string))
    {
        Some(url) => Ok(Server { child, base: url.trim().to_string() }),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("the server did not start; see {}", dir.with_extension("log").display()))
        }
    }
}

fn kill9(mut server: Server) {
    let _ = server.child.kill();
    let _ = server.child.wait();
}

fn cli(bin: &Path, dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(bin).args(args).arg("--data-dir").arg(dir).env("REPLICAD_LOG", "warn").output();
    let out = out.map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("replicad {args:?} failed: {stdout}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// The organization's key and its replica `main`, made through the CLI and the API.
struct Tenant {
    key: String,
    replica: String,
}

struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        let mut rb =
            self.http.request(method, format!("{}{path}", self.base)).header("X-ORGANIZATION-SECRET", &self.key);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let res = rb.send().await.map_err(|e| e.to_string())?;
        let status = res.status().as_u16();
        let text = res.text().await.map_err(|e| e.to_string())?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    async fn get(&self, path: &str) -> Result<Value, String> {
        match self.call(reqwest::Method::GET, path, None).await? {
            (200, v) => Ok(v),
            (s, v) => Err(format!("GET {path}: {s} {v}")),
        }
    }

    async fn post(&self, path: &str, body: Value) -> Result<(u16, Value), String> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }
}

async fn tenant(bin: &Path, dir: &Path, server: &Server, http: &reqwest::Client) -> Result<Tenant, String> {
    let code = cli(bin, dir, &["invites", "create"])?;
    let body = json!({"organizationName": "Crash", "name": "Crash Owner", "email": "crash@example.org"});
    let url = format!("{}/v1/api-keys/invites/{}/redeem", server.base, code.trim());
    let v: Value =
        http.post(url).json(&body).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
    let key = v["apiKey"].as_str().ok_or(format!("redeem: {v}"))?.to_string();
    let api = Api { http: http.clone(), base: server.base.clone(), key: key.clone() };
    let (_, v) = api.post("/v1/replicas", replica_body("main")).await?;
    let replica = v["uuid"].as_str().ok_or(format!("replica: {v}"))?.to_string();
    Ok(Tenant { key, replica })
}

fn replica_body(slug: &str) -> Value {
    json!({"name": format!("Replica {slug}"), "shortDescription": "crash test", "greeting": "Hi",
        "ownerID": "crash@example.org", "slug": slug, "llm": {"model": "replicad-extractive"}})
}

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One writer of `kind` until its requests fail (the server was killed).
async fn writer(api: Arc<Api>, replica: String, kind: &'static str, n: usize, ledger: Arc<Mutex<Ledger>>) {
    loop {
        // Unique over the whole run: a write cut by a kill may be stored, so names never repeat.
        let name = format!("{kind}-{n}-{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let ok = match kind {
            "history" => write_history(&api, &replica, &name, &ledger).await,
            "replica" => write_replica(&api, &name, &ledger).await,
            "entry" => write_entry(&api, &replica, &name, &ledger).await,
            _ => write_upload(&api, &replica, &name, &ledger).await,
        };
        if let Err(e) = ok {
            // A refused connection or a reset is the kill; an answer other than success is not.
            if e.starts_with("answer ") {
                ledger.lock().unwrap().refused.push(e);
            }
            return;
        }
    }
}

async fn write_history(api: &Api, replica: &str, content: &str, ledger: &Mutex<Ledger>) -> Outcome {
    ledger.lock().unwrap().history_sent.insert(content.to_string());
    let (s, v) = api.post(&format!("/v1/replicas/{replica}/chat/history"), json!({ "content": content })).await?;
    let id = v["id"].as_u64().filter(|_| s == 200).ok_or(format!("answer to history: {s} {v}"))?;
    ledger.lock().unwrap().history_acked.insert(id, content.to_string());
    Ok(())
}

async fn write_replica(api: &Api, slug: &str, ledger: &Mutex<Ledger>) -> Outcome {
    ledger.lock().unwrap().replicas_sent.insert(slug.to_string());
    let (s, v) = api.post("/v1/replicas", replica_body(slug)).await?;
    let id = v["uuid"].as_str().filter(|_| s == 201).ok_or(format!("answer to replica: {s} {v}"))?;
    ledger.lock().unwrap().replicas_acked.insert(id.to_string(), slug.to_string());
    Ok(())
}

async fn write_entry(api: &Api, replica: &str, title: &str, ledger: &Mutex<Ledger>) -> Outcome {
    ledger.lock().unwrap().entries_sent.insert(title.to_string());
    let text = format!("{title} is the name of a knowledge-base entry written while the server may be killed.");
    let body = json!({"title": title, "text": text, "language": "en"});
    let (s, v) = api.post(&format!("/v1/replicas/{replica}/knowledge-base"), body).await?;
    let id =
        v["results"][0]["knowledgeBaseID"].as_u64().filter(|_| s == 207).ok_or(format!("answer to entry: {s} {v}"))?;
    ledger.lock().unwrap().entries_acked.insert(id, title.to_string());
    Ok(())
}

async fn write_upload(api: &Api, replica: &str, name: &str, ledger: &Mutex<Ledger>) -> Outcome {
    let filename = format!("{name}.txt");
    ledger.lock().unwrap().entries_sent.insert(filename.clone());
    let (s, v) = api.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "filename": filename })).await?;
    let result = &v["results"][0];
    let id =
        result["knowledgeBaseID"].as_u64().filter(|_| s == 207).ok_or(format!("answer to upload entry: {s} {v}"))?;
    ledger.lock().unwrap().entries_acked.insert(id, filename.clone());
    let url = result["signedURL"].as_str().ok_or(format!("no signedURL: {v}"))?;
    let bytes = format!("{name} holds the uploaded notes of a crash round.\n").repeat(20);
    let res = api.http.put(url).body(bytes.clone()).send().await.map_err(|e| e.to_string())?;
    if res.status().as_u16() != 200 {
        return Err(format!("answer to upload: {}", res.status()));
    }
    ledger.lock().unwrap().uploads_acked.insert(id, bytes.len() as u64);
    Ok(())
}

/// Every item of a paged list at `path` (`page`, `pageSize` 100, `items`).
async fn list_all(api: &Api, path: &str) -> Result<Vec<Value>, String> {
    let mut all = Vec::new();
    for page in 1.. {
        let sep = if path.contains('?') { '&' } else { '?' };
        let v = api.get(&format!("{path}{sep}page={page}&pageSize=100")).await?;
        let items = v["items"].as_array().ok_or(format!("{path}: {v}"))?;
        all.extend(items.iter().cloned());
        if items.len() < 100 {
            break;
        }
    }
    Ok(all)
}

async fn verify_history(api: &Api, replica: &str, ledger: &Ledger) -> Outcome {
    let mut listed = BTreeMap::new();
    let mut before = String::new();
    loop {
        let v = api.get(&format!("/v1/replicas/{replica}/chat/history?limit=100{before}")).await?;
        let items = v["items"].as_array().ok_or(format!("history: {v}"))?;
        let Some(oldest) = items.first() else { break };
        for item in items {
            let content = item["content"].as_str().unwrap_or_default().to_string();
            if !ledger.history_sent.contains(&content) {
                return Err(format!("history item {item} was never sent"));
            }
            listed.insert(item["id"].as_u64().unwrap_or(0), content);
        }
        before = format!("&beforeID={}", oldest["id"]);
    }
    for (id, content) in &ledger.history_acked {
        if listed.get(id) != Some(content) {
            return Err(format!("acknowledged history item {id} ({content}) is missing or altered"));
        }
    }
    let count = api.get(&format!("/v1/replicas/{replica}")).await?["chat_history_count"].as_u64();
    if count != Some(listed.len() as u64) {
        return Err(format!("chat_history_count {count:?} but {} items listed", listed.len()));
    }
    Ok(())
}

async fn verify_replicas(api: &Api, ledger: &Ledger, usage: &Value) -> Outcome {
    let listed = list_all(api, "/v1/replicas").await?;
    let slugs: BTreeMap<String, String> = listed
        .iter()
        .map(|r| (r["uuid"].as_str().unwrap_or_default().into(), r["slug"].as_str().unwrap_or_default().into()))
        .collect();
    if let Some(stray) = slugs.values().find(|s| *s != "main" && !ledger.replicas_sent.contains(*s)) {
        return Err(format!("replica {stray} was never sent"));
    }
    for (id, slug) in &ledger.replicas_acked {
        if slugs.get(id) != Some(slug) {
            return Err(format!("acknowledged replica {id} ({slug}) is missing or altered"));
        }
    }
    if usage["replicas"].as_u64() != Some(listed.len() as u64) {
        return Err(format!("orgs list counts {} replicas, the list holds {}", usage["replicas"], listed.len()));
    }
    Ok(())
}

async fn verify_entries(api: &Api, replica: &str, ledger: &Ledger, usage: &Value) -> Outcome {
    let listed = list_all(api, &format!("/v1/replicas/{replica}/knowledge-base")).await?;
    let mut titles = BTreeMap::new();
    for e in &listed {
        let title = e["title"].as_str().or(e["file"]["name"].as_str()).unwrap_or_default().to_string();
        if !ledger.entries_sent.contains(&title) {
            return Err(format!("entry {e} was never sent"));
        }
        titles.insert(e["id"].as_u64().or(e["knowledgeBaseID"].as_u64()).unwrap_or(0), title);
    }
    for (id, title) in &ledger.entries_acked {
        if titles.get(id) != Some(title) {
            return Err(format!("acknowledged entry {id} ({title}) is missing or altered"));
        }
    }
    for (id, size) in &ledger.uploads_acked {
        let e = api.get(&format!("/v1/replicas/{replica}/knowledge-base/{id}")).await?;
        if e["status"] == "NEW" || e["file"]["size"].as_u64() != Some(*size) {
            return Err(format!("acknowledged upload {id} ({size} bytes) is not stored: {e}"));
        }
    }
    if usage["knowledge_base_entries"].as_u64() != Some(listed.len() as u64) {
        let counted = &usage["knowledge_base_entries"];
        return Err(format!("orgs list counts {counted} entries, the list holds {}", listed.len()));
    }
    Ok(())
}

/// Everything a restarted server must show (see the module docs).
async fn verify(bin: &Path, dir: &Path, api: &Api, replica: &str, ledger: &Ledger) -> Outcome {
    if let Some(e) = ledger.refused.first() {
        return Err(format!("a write was refused: {e}"));
    }
    let orgs: Value = serde_json::from_str(&cli(bin, dir, &["orgs", "list", "--json"])?).map_err(|e| e.to_string())?;
    let usage = orgs.as_array().and_then(|a| a.first()).cloned().ok_or(format!("orgs list: {orgs}"))?;
    verify_history(api, replica, ledger).await?;
    verify_replicas(api, ledger, &usage).await?;
    verify_entries(api, replica, ledger, &usage).await?;
    let report: Value = serde_json::from_str(&cli(bin, dir, &["check"])?).map_err(|e| format!("check: {e}"))?;
    verify_files(&report["files"], ledger)
}

/// The uploaded files (`replicad check` verified each recorded one whole): one at least per
/// acknowledged upload, and none that no record names (the start removed what the kill left).
fn verify_files(files: &Value, ledger: &Ledger) -> Outcome {
    let recorded = files["stored_files"].as_u64().ok_or(format!("check reports no files: {files}"))?;
    if recorded < ledger.uploads_acked.len() as u64 {
        return Err(format!("{recorded} files recorded, {} uploads acknowledged", ledger.uploads_acked.len()));
    }
    if files["unreferenced_files"] != json!(0) {
        return Err(format!("files that no record names survived the start: {files}"));
    }
    Ok(())
}

/// One round on a started server: verify, write for a random time, SIGKILL.
async fn round(
    bin: &Path,
    dir: &Path,
    server: Server,
    tenant: &Tenant,
    ledger: &Arc<Mutex<Ledger>>,
    rng: &mut Rng,
) -> Outcome {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())?;
    let api = Arc::new(Api { http, base: server.base.clone(), key: tenant.key.clone() });
    let snapshot = ledger.lock().unwrap().clone();
    if let Err(e) = verify(bin, dir, &api, &tenant.replica, &snapshot).await {
        kill9(server);
        return Err(e);
    }
    let kinds = ["history", "history", "history", "replica", "entry", "upload"];
    let writers: Vec<_> = kinds
        .iter()
        .enumerate()
        .map(|(n, kind)| tokio::spawn(writer(api.clone(), tenant.replica.clone(), kind, n, ledger.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(100 + rng.below(500))).await;
    kill9(server);
    for w in writers {
        w.await.map_err(|e| format!("a writer panicked: {e}"))?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    replicad::install_crypto_provider();
    let a = args();
    let tmp = tempfile::Builder::new().prefix("replicad-crash-").tempdir().expect("temp dir");
    let dir = tmp.path().join("data");
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let started = Instant::now();
    match run(&a, &dir, &mut Rng(seed)).await {
        Ok((rounds, l)) => {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "crash: {rounds} rounds of kill -9 under concurrent writes, no violation ({secs:.1} s); \
                 acknowledged: {} history items, {} replicas, {} entries ({} uploads)",
                l.history_acked.len(),
                l.replicas_acked.len(),
                l.entries_acked.len(),
                l.uploads_acked.len()
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crash: VIOLATION: {e}");
            let log = std::fs::read_to_string(dir.with_extension("log")).unwrap_or_default();
            eprintln!("--- server log (tail) ---\n{}", &log[log.len().saturating_sub(4000)..]);
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs the rounds; returns how many and what was acknowledged.
async fn run(a: &Args, dir: &Path, rng: &mut Rng) -> Result<(u32, Ledger), String> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let first = start(&a.bin, dir)?;
    let tenant = tenant(&a.bin, dir, &first, &http).await?;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut server = first;
    let mut done = 0;
    while done < a.rounds {
        if started.elapsed() > Duration::from_secs(a.seconds) {
            if done < a.min_rounds {
                return Err(format!("only {done} rounds in {} s (at least {} wanted)", a.seconds, a.min_rounds));
            }
            break;
        }
        round(&a.bin, dir, server, &tenant, &ledger, rng).await.map_err(|e| format!("round {}: {e}", done + 1))?;
        done += 1;
        server = start(&a.bin, dir).map_err(|e| format!("after round {done}: {e}"))?;
    }
    let api = Api { http, base: server.base.clone(), key: tenant.key.clone() };
    let snapshot = ledger.lock().unwrap().clone();
    let checked = verify(&a.bin, dir, &api, &tenant.replica, &snapshot).await;
    kill9(server);
    checked.map(|_| (done, snapshot))
}
