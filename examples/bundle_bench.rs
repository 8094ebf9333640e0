//! Replica bundles at scale (docs/bundles.md): a knowledge base of `--docs` text files (Vim's
//! documentation, `/usr/share/vim/vim90/doc/*.txt` of Debian's vim-runtime package, under the
//! Vim licence; each cut at `--max-bytes`) embedded on server A with the real model, exported,
//! and imported on a fresh server B with the same model. Prints the time embedding took on A,
//! the time the import took on B until every entry was `READY` (vectors kept: no embedding),
//! the export's time, the archive's size against the original files plus the vectors as `f32`,
//! and whether the retrieval traces (`…/chat/completions/test`) and answers of `--questions`
//! questions are the same on both (ids and dates aside). Both servers run in this process.
//!
//! ```text
//! cargo run --example bundle_bench -- --model ~/.cache/replicad-ci/models/all-minilm-l6-v2
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};

#[allow(dead_code)] // each example uses part of it
mod common;

#[derive(Parser)]
struct Args {
    /// The embedding model's directory (all-MiniLM-L6-v2).
    #[arg(long)]
    model: PathBuf,
    /// Where the documents come from: every `*.txt` of this directory, in name order.
    #[arg(long, default_value = "/usr/share/vim/vim90/doc")]
    source: PathBuf,
    /// Documents in the knowledge base.
    #[arg(long, default_value_t = 110)]
    docs: usize,
    /// Each document cut at this many bytes (at a line's end).
    #[arg(long, default_value_t = 12_000)]
    max_bytes: usize,
    /// Questions asked of both servers.
    #[arg(long, default_value_t = 30)]
    questions: usize,
}

/// The documents: (file name, text).
fn documents(args: &Args) -> Vec<(String, String)> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(&args.source)
        .expect("the source directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    names.sort();
    let mut docs = Vec::new();
    for path in names {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let mut cut = text.len().min(args.max_bytes);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let end = text[..cut].rfind('\n').unwrap_or(cut);
        if end >= 2000 {
            docs.push((path.file_name().unwrap().to_string_lossy().to_string(), text[..end].to_string()));
        }
        if docs.len() == args.docs {
            break;
        }
    }
    assert_eq!(docs.len(), args.docs, "not enough documents in {}", args.source.display());
    docs
}

/// A server with the model of `catalog` on `dir`, in this process; its base URL and an
/// organization's key and owner.
async fn server(dir: &Path, catalog: &Path, http: &reqwest::Client) -> (String, String, String) {
    let mut config = replicad::Config::new(dir.to_path_buf());
    config.embedding_models = Some(catalog.to_path_buf());
    let base = common::serve(config).await;
    let code = loop {
        let invite = replicad::admin::Request::Invite { expires_in_secs: None };
        match replicad::admin::request(dir, &invite).await {
            Ok(Some(replicad::admin::Answer::Invite { code })) => break code,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    let owner = "bench@example.org".to_string();
    let body = json!({"organizationName": "Bench", "name": "Bench Owner", "email": owner});
    let v = call(http.post(format!("{base}/v1/api-keys/invites/{code}/redeem")).json(&body)).await;
    (base, v["apiKey"].as_str().expect("apiKey").to_string(), owner)
}

async fn call(rb: reqwest::RequestBuilder) -> Value {
    let res = rb.send().await.expect("request");
    let status = res.status();
    let v: Value = res.json().await.expect("JSON");
    assert!(status.is_success(), "{status} {v}");
    v
}

/// Polls until every entry of `replica` is `READY`; returns the number of entries.
async fn all_ready(http: &reqwest::Client, base: &str, key: &str, replica: &str) -> usize {
    loop {
        let mut page = 1;
        let mut ready = 0;
        let total = loop {
            let url = format!("{base}/v1/replicas/{replica}/knowledge-base?pageSize=100&page={page}");
            let v = call(http.get(url).header("X-ORGANIZATION-SECRET", key)).await;
            let items = v["items"].as_array().expect("items");
            ready += items.iter().filter(|e| e["status"] == "READY").count();
            if items.len() < 100 {
                break v["total"].as_u64().expect("total") as usize;
            }
            page += 1;
        };
        if ready == total {
            return total;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `v` without ids and dates.
fn strip(v: &Value) -> Value {
    const GONE: &[&str] = &["id", "uuid", "replicaUUID", "knowledgeBaseID", "createdAt", "updatedAt"];
    match v {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, _)| !GONE.contains(&k.as_str())).map(|(k, v)| (k.clone(), strip(v))).collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

/// Questions: a line of every few documents, as a visitor would ask about it.
fn questions(docs: &[(String, String)], n: usize) -> Vec<String> {
    let step = (docs.len() / n.max(1)).max(1);
    let pick = |(_, text): &(String, String)| {
        let line = text.lines().map(str::trim).filter(|l| l.split_whitespace().count() >= 6).nth(3)?;
        Some(format!("What does this mean: {line}"))
    };
    docs.iter().step_by(step).filter_map(pick).take(n).collect()
}

/// The traces and answers of `questions` on one replica.
async fn answers(http: &reqwest::Client, base: &str, key: &str, replica: &str, questions: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for q in questions {
        let test = format!("{base}/v1/replicas/{replica}/chat/completions/test");
        let trace = call(http.post(test).header("X-ORGANIZATION-SECRET", key).json(&json!({"content": q}))).await;
        let chat = format!("{base}/v1/replicas/{replica}/chat/completions");
        let body = json!({"content": q, "skip_chat_history": true});
        let answer = call(http.post(chat).header("X-ORGANIZATION-SECRET", key).json(&body)).await;
        out.push(json!({"trace": strip(&trace), "answer": answer["content"]}));
    }
    out
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let tmp = tempfile::tempdir().expect("temp dir");
    let catalog = tmp.path().join("embedding-models.json");
    let models = json!({"models": {"minilm": {"name": "all-MiniLM-L6-v2", "dir": args.model}}});
    std::fs::write(&catalog, models.to_string()).expect("catalog");
    replicad::install_crypto_provider();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(600)).build().expect("client");
    let docs = documents(&args);
    let original: usize = docs.iter().map(|(_, t)| t.len()).sum();

    let (a, key_a, owner) = server(&tmp.path().join("a"), &catalog, &http).await;
    let body = json!({"name": "Vim help", "shortDescription": "Vim's manual", "greeting": "Hi", "ownerID": owner,
        "slug": "vim-help", "llm": {"model": "llama-3.1-8b-instruct"}});
    let v = call(http.post(format!("{a}/v1/replicas")).header("X-ORGANIZATION-SECRET", &key_a).json(&body)).await;
    let replica_a = v["uuid"].as_str().expect("uuid").to_string();
    let started = Instant::now();
    for (title, text) in &docs {
        let url = format!("{a}/v1/replicas/{replica_a}/knowledge-base");
        let body = json!({"text": text, "title": title, "language": "en"});
        call(http.post(url).header("X-ORGANIZATION-SECRET", &key_a).json(&body)).await;
    }
    all_ready(&http, &a, &key_a, &replica_a).await;
    let embedding = started.elapsed();

    let started = Instant::now();
    let url = format!("{a}/v1/replicas/{replica_a}/export");
    let res = http.get(url).header("X-ORGANIZATION-SECRET", &key_a).send().await.expect("export");
    assert!(res.status().is_success(), "export: {}", res.status());
    let bundle = res.bytes().await.expect("bundle");
    let export = started.elapsed();
    let manifest = manifest_of(&bundle);
    let set = &manifest["vectorSets"][0];
    let (chunks, sentences, dim) = (u(&set["chunks"]), u(&set["sentences"]), u(&set["dimension"]));
    let vectors = (chunks + sentences) * dim * 4;

    let (b, key_b, owner_b) = server(&tmp.path().join("b"), &catalog, &http).await;
    let started = Instant::now();
    let url = format!("{b}/v1/replicas/import?ownerID={owner_b}");
    let rb = http.post(url).header("X-ORGANIZATION-SECRET", &key_b).header("content-type", "application/gzip");
    let imported = call(rb.body(bundle.clone())).await;
    let replica_b = imported["replicaUUID"].as_str().expect("replicaUUID").to_string();
    let request = started.elapsed();
    all_ready(&http, &b, &key_b, &replica_b).await;
    let import = started.elapsed();

    let qs = questions(&docs, args.questions);
    let (on_a, on_b) =
        (answers(&http, &a, &key_a, &replica_a, &qs).await, answers(&http, &b, &key_b, &replica_b, &qs).await);
    let same = on_a.iter().zip(&on_b).filter(|(x, y)| x == y).count();
    let mib = |b: usize| b as f64 / 1_048_576.0;
    println!(
        "knowledge base: {} documents, {chunks} chunks, {sentences} sentence vectors of {dim} dimensions",
        docs.len()
    );
    println!("embedding on A (create to all READY): {:.1} s", embedding.as_secs_f64());
    println!(
        "import on B: {:.2} s to all READY ({:.2} s for the request), {:.1} % of the embedding; vectors reused: {}, re-embedding: {}",
        import.as_secs_f64(),
        request.as_secs_f64(),
        100.0 * import.as_secs_f64() / embedding.as_secs_f64(),
        imported["vectorsReused"],
        imported["reembedding"]
    );
    println!(
        "export: {:.2} s; archive {:.2} MiB = {:.3} × (original files {:.2} MiB + f32 vectors {:.2} MiB)",
        export.as_secs_f64(),
        mib(bundle.len()),
        bundle.len() as f64 / (original + vectors) as f64,
        mib(original),
        mib(vectors)
    );
    println!("questions with the same trace and answer on A and B: {same} of {}", qs.len());
    if let Some((x, y)) = on_a.iter().zip(&on_b).find(|(x, y)| x != y) {
        println!("first difference:\n  A: {x}\n  B: {y}");
    }
}

fn u(v: &Value) -> usize {
    v.as_u64().expect("a count") as usize
}

/// The manifest, the bundle's first member.
fn manifest_of(bundle: &[u8]) -> Value {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bundle));
    let mut first = tar.entries().expect("a tar").next().expect("a member").expect("a member");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut first, &mut bytes).expect("the manifest");
    serde_json::from_slice(&bytes).expect("JSON")
}
