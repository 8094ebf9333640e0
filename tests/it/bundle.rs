//! Replica bundles (docs/bundles.md): a replica exported on one server (`GET …/export`,
//! `replicad replicas export`) and imported on another (`POST /v1/replicas/import`,
//! `replicad replicas import`) answers as it did, lists the same knowledge base and keeps its
//! vectors; bad bundles, a taken slug and quotas are refused with nothing written; an export
//! under writes is one consistent read; an import is all or nothing on redb (a `kill -9`) and
//! on PostgreSQL.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::pg::fresh_database;
use crate::common::{assert_error, send, DataDir, Org, Server, ZORBLAX, ZORBLAX_QUESTION};
use crate::embedding::real_model_dir;

/// Texts of a small knowledge base: (title, text).
const TEXTS: &[(&str, &str)] = &[
    ("Zorblax", ZORBLAX),
    (
        "Moonwater",
        "Moonwater is harvested every spring from the northern lakes of Quenth. \
         It glows faintly blue and is crystallised in salt pans before it fuels the reactor.",
    ),
    (
        "Quenth",
        "Quenth is a floating city above the Sea of Glass. Its streets are suspended bridges, \
         and its mayor is elected every seven years by the guild of bridge keepers.",
    ),
];

/// Questions asked of both replicas of a round trip.
const QUESTIONS: &[&str] =
    &[ZORBLAX_QUESTION, "When is moonwater harvested?", "Who elects the mayor of Quenth?", "What glows blue?"];

/// A catalog of the real model under the id `minilm`, written into `dir`.
fn minilm_catalog(dir: &Path) -> PathBuf {
    let path = dir.join("embedding-models.json");
    let models = json!({ "minilm": { "name": "all-MiniLM-L6-v2", "dir": real_model_dir() } });
    std::fs::write(&path, json!({ "models": models }).to_string()).unwrap();
    path
}

/// A server on `dir` with the real model (`catalog` its catalog file).
fn with_model(dir: DataDir, catalog: &Path) -> Server {
    Server::start_in(dir, &["--embedding-models", catalog.to_str().unwrap()])
}

/// An organization of `server` with a replica `slug` holding [`TEXTS`] and an uploaded file,
/// every entry `READY`; its embed widget allows one origin.
async fn source(server: &Server, slug: &str) -> (Org, String) {
    let org = server.new_org("Source").await;
    let replica = org.create_replica(slug).await;
    for (title, text) in TEXTS {
        org.add_ready_text(&replica, title, text).await;
    }
    let file =
        org.upload(&replica, "bridges.txt", b"The bridges of Quenth are woven from silver reeds.".to_vec()).await;
    org.wait_ready(&replica, file).await;
    let (s, v) = org
        .post(&format!("/v1/replicas/{replica}/embed-keys"), json!({ "allowedOrigins": ["https://quenth.example"] }))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    (org, replica)
}

/// The bundle of `replica` over HTTP; checks the answer's headers.
async fn export(org: &Org, replica: &str) -> Vec<u8> {
    let r = org.req(reqwest::Method::GET, &format!("/v1/replicas/{replica}/export")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "application/gzip");
    let disposition = r.headers()["content-disposition"].to_str().unwrap().to_string();
    assert!(disposition.starts_with("attachment; filename="), "{disposition}");
    r.bytes().await.unwrap().to_vec()
}

/// `POST /v1/replicas/import?QUERY` of `bundle`.
async fn import(org: &Org, bundle: Vec<u8>, query: &str) -> (StatusCode, Value) {
    let rb = org.req(reqwest::Method::POST, &format!("/v1/replicas/import?{query}"));
    send(rb.header("content-type", "application/gzip").body(bundle)).await.parts()
}

/// The owner query of `org`.
fn owner(org: &Org) -> String {
    format!("ownerID={}", org.owner_email)
}

/// `v` without ids and dates (keys named so, at any depth).
fn strip(v: &Value) -> Value {
    const GONE: &[&str] = &["id", "uuid", "replicaUUID", "knowledgeBaseID", "createdAt", "updatedAt", "fetchedAt"];
    match v {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, _)| !GONE.contains(&k.as_str())).map(|(k, v)| (k.clone(), strip(v))).collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

/// Every entry of `replica` (ids and dates left out), in the list's order.
async fn listing(org: &Org, replica: &str) -> Vec<Value> {
    let (s, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base?pageSize=100")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().iter().map(strip).collect()
}

/// Polls until every entry of `replica` is `READY`; returns how many there are.
async fn all_ready(org: &Org, replica: &str) -> usize {
    all_ready_within(org, replica, crate::common::PATIENCE * 3).await
}

/// [`all_ready`] waiting at most `patience`.
async fn all_ready_within(org: &Org, replica: &str, patience: std::time::Duration) -> usize {
    let deadline = Instant::now() + patience;
    loop {
        let (s, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base?pageSize=100")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let items = v["items"].as_array().unwrap();
        if items.iter().all(|e| e["status"] == "READY") {
            return items.len();
        }
        assert!(Instant::now() < deadline, "entries not READY in time: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The retrieval traces (`…/chat/completions/test`, ids and dates left out) and the answers of
/// [`QUESTIONS`].
async fn answers(org: &Org, replica: &str) -> Vec<(Value, String)> {
    answers_to(org, replica, QUESTIONS).await
}

/// [`answers`] to `questions`.
async fn answers_to(org: &Org, replica: &str, questions: &[&str]) -> Vec<(Value, String)> {
    let mut out = Vec::new();
    for q in questions {
        let (s, v) = org.post(&format!("/v1/replicas/{replica}/chat/completions/test"), json!({ "content": q })).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let reply = org
            .post(
                &format!("/v1/replicas/{replica}/chat/completions"),
                json!({ "content": q, "skip_chat_history": true }),
            )
            .await;
        assert_eq!(reply.0, StatusCode::OK, "{}", reply.1);
        out.push((strip(&v), reply.1["content"].as_str().unwrap().to_string()));
    }
    out
}

/// The members of a bundle, in order: (path, bytes).
fn members(bundle: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bundle));
    let mut out = Vec::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = String::from_utf8(entry.path_bytes().to_vec()).unwrap();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        out.push((path, bytes));
    }
    out
}

/// A bundle of `members` as given (paths written raw, so unsafe ones too).
fn pack(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (path, bytes) in members {
        let mut header = tar::Header::new_gnu();
        let name = &mut header.as_gnu_mut().unwrap().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_size(bytes.len() as u64);
        header.set_mode(0o600);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        tar.append(&header, bytes.as_slice()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// `members` with the manifest changed by `f`.
fn with_manifest(members: &[(String, Vec<u8>)], f: impl FnOnce(&mut Value)) -> Vec<(String, Vec<u8>)> {
    let mut out = members.to_vec();
    let mut manifest: Value = serde_json::from_slice(&out[0].1).unwrap();
    f(&mut manifest);
    out[0].1 = serde_json::to_vec(&manifest).unwrap();
    out
}

/// `members` plus `(path, bytes)`, listed in the manifest with its size and hash.
fn with_listed(members: &[(String, Vec<u8>)], path: &str, bytes: Vec<u8>) -> Vec<(String, Vec<u8>)> {
    let sha = hex::encode(Sha256::digest(&bytes));
    let size = bytes.len();
    let mut out = with_manifest(members, |m| {
        m["members"].as_array_mut().unwrap().push(json!({ "path": path, "size": size, "sha256": sha }));
    });
    out.push((path.to_string(), bytes));
    out
}

/// What an organization holds: its replicas and its knowledge-base entries (all replicas).
async fn holdings(org: &Org) -> (u64, u64) {
    let (s, r) = org.get("/v1/replicas").await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (s, kb) = org.get("/v1/knowledge-base").await;
    assert_eq!(s, StatusCode::OK, "{kb}");
    (r["total"].as_u64().unwrap(), kb["total"].as_u64().unwrap())
}

/// The uploaded files in a redb server's data directory.
fn stored_files(dir: &DataDir) -> usize {
    std::fs::read_dir(dir.path().join("files")).map(|d| d.count()).unwrap_or(0)
}

#[tokio::test]
async fn a_replica_exported_over_http_imports_on_a_fresh_server_with_the_same_answers_and_listing() {
    let catalog_dir = tempfile::tempdir().unwrap();
    let catalog = minilm_catalog(catalog_dir.path());
    let a = with_model(DataDir::new(), &catalog);
    let (org_a, replica_a) = source(&a, "quenth").await;
    let bundle = export(&org_a, &replica_a).await;
    let manifest: Value = serde_json::from_slice(&members(&bundle)[0].1).unwrap();
    assert_eq!(manifest["format"], 1);
    assert_eq!(manifest["segmentationVersion"], 1);
    assert_eq!(manifest["vectorSets"][0]["model"], "minilm");
    assert!(manifest["vectorSets"][0]["fingerprint"].as_str().unwrap().starts_with("sha256:"), "{manifest}");
    assert_eq!(manifest["counts"]["entries"], 4);
    assert_eq!(manifest["counts"]["files"], 1);
    assert_eq!(manifest["replica"]["embedAllowedOrigins"], json!(["https://quenth.example"]));
    let text = String::from_utf8_lossy(&bundle).to_string() + &manifest.to_string();
    assert!(!text.contains("rpl_embed_") && !text.contains("rpl_idsec_"), "no key or secret in a bundle");

    let b = with_model(DataDir::new(), &catalog);
    let org_b = b.new_org("Target").await;
    let (s, imported) = import(&org_b, bundle.clone(), &owner(&org_b)).await;
    assert_eq!(s, StatusCode::CREATED, "{imported}");
    assert_eq!(imported["reembedding"], false, "{imported}");
    assert_eq!(imported["vectorsReused"], imported["chunks"], "{imported}");
    assert_eq!(imported["slug"], "quenth");
    let replica_b = imported["replicaUUID"].as_str().unwrap().to_string();
    assert_ne!(replica_b, replica_a, "new ids");
    assert_eq!(all_ready(&org_b, &replica_b).await, 4);
    assert_eq!(listing(&org_b, &replica_b).await, listing(&org_a, &replica_a).await);
    assert_eq!(answers(&org_b, &replica_b).await, answers(&org_a, &replica_a).await);
    let (_, r) = org_b.get(&format!("/v1/replicas/{replica_b}")).await;
    assert_eq!(r["slug"], "quenth", "{r}");
    // exported again, the replica carries the same configuration and knowledge
    let again: Value = serde_json::from_slice(&members(&export(&org_b, &replica_b).await)[0].1).unwrap();
    assert_eq!(again["replica"], manifest["replica"]);
    assert_eq!(again["counts"], manifest["counts"]);
}

#[tokio::test]
async fn a_bundle_of_another_model_is_embedded_again_on_import() {
    let catalog_dir = tempfile::tempdir().unwrap();
    let catalog = minilm_catalog(catalog_dir.path());
    let a = with_model(DataDir::new(), &catalog);
    let (org_a, replica_a) = source(&a, "quenth").await;
    // the same model id with another fingerprint (files changed): the vectors are not reused
    let changed = with_manifest(&members(&export(&org_a, &replica_a).await), |m| {
        m["vectorSets"][0]["fingerprint"] = json!("sha256:0000");
    });
    let (s, imported) = import(&org_a, pack(&changed), &format!("{}&slug=again", owner(&org_a))).await;
    assert_eq!(s, StatusCode::CREATED, "{imported}");
    assert_eq!((imported["reembedding"].clone(), imported["vectorsReused"].clone()), (json!(true), json!(0)));
    let replica = imported["replicaUUID"].as_str().unwrap().to_string();
    assert_eq!(imported["embeddingModel"], "minilm", "{imported}");
    let before = holdings(&org_a).await;
    let query = format!("{}&slug=unknown&embeddingModel=no-such-model", owner(&org_a));
    let (s, v) = import(&org_a, pack(&changed), &query).await;
    assert_error_status(s, &v, StatusCode::BAD_REQUEST, "VALIDATION_ERROR");
    assert_eq!(holdings(&org_a).await, before, "nothing written");
    assert_eq!(all_ready(&org_a, &replica).await, 4, "embedded again in the background");
    let (s, v) = org_a
        .post(&format!("/v1/replicas/{replica}/chat/completions/test"), json!({ "content": ZORBLAX_QUESTION }))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v.to_string().contains("451 kelvin"), "{v}");
}

#[tokio::test]
async fn the_cli_exports_and_imports_through_running_servers_into_another_organization() {
    let server = Server::start();
    let (org, replica) = source(&server, "quenth").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quenth.tar.gz");
    let out = server.dir().cli(&["replicas", "export", "quenth", "--org", &org.id, "--to", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exported: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(exported["replicaUUID"].as_str(), Some(replica.as_str()));
    assert_eq!(exported["bytes"].as_u64(), Some(std::fs::metadata(&file).unwrap().len()));

    let other = server.new_org("Other").await;
    let args = ["replicas", "import", file.to_str().unwrap(), "--org", &other.id, "--owner", &other.owner_email];
    let out = server.dir().cli(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let imported: Value = serde_json::from_slice(&out.stdout).unwrap();
    let copy = imported["replicaUUID"].as_str().unwrap().to_string();
    assert_eq!(all_ready(&other, &copy).await, 4);
    assert_eq!(listing(&other, &copy).await, listing(&org, &replica).await);
    for (a, b) in answers(&other, &copy).await.into_iter().zip(answers(&org, &replica).await) {
        assert_eq!(a.1, b.1, "the same answer");
    }
    // the copy is the other organization's alone
    let (s, _) = org.get(&format!("/v1/replicas/{copy}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // the same bundle again in the same organization: the slug is taken, and nothing is written
    let before = holdings(&other).await;
    let out = server.dir().cli(&args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("slug") && stderr.contains("quenth"), "{stderr}");
    assert_eq!(holdings(&other).await, before);
    let with_slug = [&args[..], &["--slug", "quenth-2"]].concat();
    let out = server.dir().cli(&with_slug);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn the_cli_exports_and_imports_on_the_store_when_no_server_runs() {
    let server = Server::start_in(DataDir::redb(), &[]);
    let (org, replica) = source(&server, "quenth").await;
    let want = listing(&org, &replica).await;
    let dir = server.stop().1;
    let file = dir.path().join("..").join("offline.tar.gz");
    let out = dir.cli(&["replicas", "export", &replica, "--org", &org.id, "--to", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = dir.cli(&[
        "replicas",
        "import",
        file.to_str().unwrap(),
        "--org",
        &org.id,
        "--owner",
        &org.owner_email,
        "--slug",
        "offline",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let copy = serde_json::from_slice::<Value>(&out.stdout).unwrap()["replicaUUID"].as_str().unwrap().to_string();
    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);
    assert_eq!(all_ready(&org, &copy).await, 4, "indexed at the next start");
    assert_eq!(listing(&org, &copy).await, want);
}

#[tokio::test]
async fn an_import_beyond_a_quota_is_refused_before_anything_is_written() {
    let server = Server::start();
    let (org, replica) = source(&server, "quenth").await;
    let bundle = export(&org, &replica).await;
    let other = server.new_org("Small").await;
    other.create_replica("first").await;
    let out = server.dir().cli(&["orgs", "set-quota", &other.id, "--knowledge-base-entries", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let before = holdings(&other).await;
    let (s, v) = import(&other, bundle.clone(), &owner(&other)).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error_code"], "KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED", "{v}");
    let out = server.dir().cli(&["orgs", "set-quota", &other.id, "--knowledge-base-entries", "100", "--replicas", "1"]);
    assert!(out.status.success());
    let (s, v) = import(&other, bundle, &owner(&other)).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert_eq!(v["error_code"], "REPLICA_QUOTA_EXCEEDED", "{v}");
    assert_eq!(holdings(&other).await, before, "nothing written");
}

#[tokio::test]
async fn bad_bundles_are_refused_with_the_error_body_and_nothing_written() {
    let catalog_dir = tempfile::tempdir().unwrap();
    let catalog = minilm_catalog(catalog_dir.path());
    let server = Server::start_in(
        DataDir::redb(),
        &["--embedding-models", catalog.to_str().unwrap(), "--max-bundle-bytes", "4000000"],
    );
    let (org, replica) = source(&server, "quenth").await;
    let good = export(&org, &replica).await;
    let m = members(&good);
    assert_eq!(m[0].0, "manifest.json");
    let target = server.new_org("Target").await;
    let files = stored_files(server.dir());
    let before = holdings(&target).await;

    let mut tampered = m.clone();
    let i = tampered.iter().position(|(p, _)| p.ends_with("chunks.json")).unwrap();
    tampered[i].1 = tampered[i].1.to_ascii_uppercase();
    let vectors = m.iter().position(|(p, _)| p.ends_with("vectors.bin")).unwrap();
    let mut cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        ("truncated", good[..good.len() / 2].to_vec(), StatusCode::BAD_REQUEST, "INVALID_BUNDLE"),
        ("not an archive", b"hello".to_vec(), StatusCode::BAD_REQUEST, "INVALID_BUNDLE"),
        ("hash mismatch", pack(&tampered), StatusCode::BAD_REQUEST, "INVALID_BUNDLE"),
        (
            "a .. path",
            pack(&with_listed(&m, "entries/../../evil", b"x".to_vec())),
            StatusCode::BAD_REQUEST,
            "INVALID_BUNDLE",
        ),
        (
            "an absolute path",
            pack(&with_listed(&m, "/tmp/evil", b"x".to_vec())),
            StatusCode::BAD_REQUEST,
            "INVALID_BUNDLE",
        ),
        (
            "an unlisted member",
            pack(&[m.clone(), vec![("extra".into(), b"x".to_vec())]].concat()),
            StatusCode::BAD_REQUEST,
            "INVALID_BUNDLE",
        ),
        ("a missing member", pack(&m[..m.len() - 1]), StatusCode::BAD_REQUEST, "INVALID_BUNDLE"),
        (
            "a bomb",
            pack(&with_listed(&m, "padding", vec![0u8; 8_000_000])),
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            "a newer format",
            pack(&with_manifest(&m, |v| v["format"] = json!(2))),
            StatusCode::BAD_REQUEST,
            "BUNDLE_FORMAT_UNSUPPORTED",
        ),
        (
            "another dimension",
            pack(&with_manifest(&m, |v| v["vectorSets"][0]["dimension"] = json!(383))),
            StatusCode::BAD_REQUEST,
            "INVALID_BUNDLE",
        ),
    ];
    let mut short = m.clone();
    let cut = short[vectors].1.len() - 4;
    short[vectors].1.truncate(cut);
    let short = with_manifest(&short, |v| {
        let listed = v["members"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|x| x["path"].as_str().unwrap().ends_with("vectors.bin"))
            .unwrap();
        listed["size"] = json!(short[vectors].1.len());
        listed["sha256"] = json!(hex::encode(Sha256::digest(&short[vectors].1)));
    });
    cases.push(("vectors cut short", pack(&short), StatusCode::BAD_REQUEST, "INVALID_BUNDLE"));
    for (what, bundle, status, code) in cases {
        let r = send(
            target
                .req(reqwest::Method::POST, &format!("/v1/replicas/import?{}", owner(&target)))
                .header("content-type", "application/gzip")
                .body(bundle),
        )
        .await;
        assert_error(&r, status, Some(code));
        assert!(r.body["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: {}", r.body);
        assert_eq!(holdings(&target).await, before, "{what}: nothing written");
        assert_eq!(stored_files(server.dir()), files, "{what}: no file left behind");
    }
    // the good one still imports
    let (s, v) = import(&target, good, &owner(&target)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

#[tokio::test]
async fn an_export_while_writes_go_on_holds_every_entry_acknowledged_before_it() {
    let server = Server::start();
    let (org, replica) = source(&server, "busy").await;
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let writer = {
        let (org, replica, stop, acked) = (org.clone(), replica.clone(), stop.clone(), acked.clone());
        tokio::spawn(async move {
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let title = format!("Note {i}");
                org.add_text(&replica, &title, &format!("Note number {i} says the bridges sway in the wind.")).await;
                acked.lock().unwrap().push(title);
            }
        })
    };
    let target = server.new_org("Copies").await;
    for round in 0..3 {
        let before: Vec<String> = acked.lock().unwrap().clone();
        let bundle = export(&org, &replica).await;
        let (s, v) = import(&target, bundle, &format!("{}&slug=copy-{round}", owner(&target))).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let copy = v["replicaUUID"].as_str().unwrap();
        let titles: Vec<String> =
            listing(&target, copy).await.iter().map(|e| e["title"].as_str().unwrap_or("").to_string()).collect();
        for t in &before {
            assert!(titles.contains(t), "round {round}: {t} was acknowledged before the export");
        }
        assert_eq!(v["entries"].as_u64().unwrap() as usize, titles.len());
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    assert!(acked.lock().unwrap().len() > 3, "writes went on meanwhile");
}

#[tokio::test]
async fn an_import_on_postgresql_is_all_or_nothing_and_round_trips() {
    let server = Server::start_in(DataDir::on_store(&fresh_database()), &[]);
    let (org, replica) = source(&server, "quenth").await;
    let bundle = export(&org, &replica).await;
    let target = server.new_org("Target").await;
    let (s, v) = import(&target, bundle.clone(), &owner(&target)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let copy = v["replicaUUID"].as_str().unwrap();
    assert_eq!(all_ready(&target, copy).await, 4);
    assert_eq!(listing(&target, copy).await, listing(&org, &replica).await);
    // a second import with the slug taken writes nothing: no replica, no entry
    let before = holdings(&target).await;
    let (s, v) = import(&target, bundle, &owner(&target)).await;
    assert_error_status(s, &v, StatusCode::CONFLICT, "SLUG_TAKEN");
    assert_eq!(holdings(&target).await, before);
}

fn assert_error_status(s: StatusCode, v: &Value, status: StatusCode, code: &str) {
    assert_eq!(s, status, "{v}");
    assert_eq!(v["error_code"], code, "{v}");
    assert_eq!(v["success"], false, "{v}");
}

/// A bundle of `n` text entries (made on a server of its own).
async fn big_bundle(n: usize) -> Vec<u8> {
    let server = Server::start();
    let org = server.new_org("Big").await;
    let replica = org.create_replica("big").await;
    let text = "The bridges of Quenth sway in the wind and the keepers mend them at dawn. ".repeat(40);
    for i in 0..n {
        org.add_text(&replica, &format!("Part {i}"), &text).await;
    }
    all_ready(&org, &replica).await;
    export(&org, &replica).await
}

#[tokio::test]
async fn a_kill_9_during_an_import_leaves_no_replica_behind() {
    let bundle = big_bundle(150).await;
    let server = Server::start_in(DataDir::redb(), &[]);
    let org = server.new_org("Crash").await;
    // how long an import takes here, to kill the next one half-way
    let started = Instant::now();
    let (s, v) = import(&org, bundle.clone(), &format!("{}&slug=measured", owner(&org))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let took = started.elapsed();
    let before = holdings(&org).await;
    let request = org.req(reqwest::Method::POST, &format!("/v1/replicas/import?{}&slug=killed", owner(&org)));
    let pending = tokio::spawn(request.header("content-type", "application/gzip").body(bundle).send());
    tokio::time::sleep(took / 2).await;
    let dir = server.kill9();
    let _ = pending.await;
    let server = Server::start_in(dir, &[]);
    let org = org.at(&server);
    let (replicas, entries) = holdings(&org).await;
    let (s, v) = org.get("/v1/replicas?slug=killed").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let killed = v["items"].as_array().unwrap().len();
    if killed == 0 {
        assert_eq!((replicas, entries), before, "no replica and no entry of the killed import");
    } else {
        // the commit came before the kill: then all of it is there
        assert_eq!((replicas, entries), (before.0 + 1, before.1 + 150), "all or nothing");
    }
    let out = server.dir().cli(&["check"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// `(role, content, source names)` of each history item.
fn items_of(history: &[Value]) -> Vec<(String, String, Vec<String>)> {
    let names = |i: &Value| {
        i["sources"].as_array().map(|s| s.iter().map(|s| s["name"].to_string()).collect()).unwrap_or_default()
    };
    history.iter().map(|i| (i["role"].to_string(), i["content"].to_string(), names(i))).collect()
}

#[tokio::test]
async fn a_bundle_with_history_brings_its_chats_and_their_users_into_another_organization() {
    let server = Server::start();
    let (org, replica) = source(&server, "quenth").await;
    let (s, v) = org.post("/v1/users", json!({"id": "alice", "name": "Alice", "email": "alice@example.org"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let alice = crate::common::user("id", "alice");
    for q in &QUESTIONS[..2] {
        let path = format!("/v1/replicas/{replica}/chat/completions");
        let (s, v) = org.post_as(&path, json!({ "content": q }), &alice).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    let want = org.history_as(&replica, "", &alice).await;
    assert_eq!(want.len(), 4);
    let (_, chats) = org.get(&format!("/v1/replicas/{replica}/chats")).await;
    let r =
        org.req(reqwest::Method::GET, &format!("/v1/replicas/{replica}/export?withHistory=true")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let bundle = r.bytes().await.unwrap().to_vec();

    let other = server.new_org("Other").await;
    let (s, v) = import(&other, bundle.clone(), &owner(&other)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!((v["messages"].as_u64(), v["usersCreated"].as_u64()), (Some(4), Some(1)), "{v}");
    let copy = v["replicaUUID"].as_str().unwrap().to_string();
    let got = other.history_as(&copy, "", &alice).await;
    assert_eq!(items_of(&got), items_of(&want));
    for source in got.iter().flat_map(|i| i["sources"].as_array().cloned().unwrap_or_default()) {
        let (s, v) = other.get(&format!("/v1/replicas/{copy}/knowledge-base/{}", source["id"])).await;
        assert_eq!(s, StatusCode::OK, "a source names the copy's entry: {v}");
    }
    let (_, copied_chats) = other.get(&format!("/v1/replicas/{copy}/chats")).await;
    assert_eq!(copied_chats["total"], chats["total"], "{copied_chats}");
    assert_eq!(copied_chats["items"][0]["messageCount"], chats["items"][0]["messageCount"]);

    // the same history again: alice is found, not made again
    let (s, v) = import(&other, bundle.clone(), &format!("{}&slug=again", owner(&other))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["usersCreated"], 0, "{v}");

    // an organization whose alice is someone else refuses it, writing nothing
    let third = server.new_org("Third").await;
    let (s, v) = third.post("/v1/users", json!({"id": "alice", "email": "another-alice@example.org"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let before = holdings(&third).await;
    let (s, v) = import(&third, bundle, &owner(&third)).await;
    assert_error_status(s, &v, StatusCode::CONFLICT, "USER_ID_TAKEN");
    assert_eq!(holdings(&third).await, before);

    // without withHistory the history stays behind
    let (s, v) = import(&third, export(&org, &replica).await, &owner(&third)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["messages"], 0, "{v}");
    let (_, none) = third.get(&format!("/v1/replicas/{}/chats", v["replicaUUID"].as_str().unwrap())).await;
    assert_eq!(none["total"], 0, "{none}");
}

#[tokio::test]
async fn an_import_names_a_language_model_it_replaced_and_refuses_an_unknown_owner() {
    let server = Server::start();
    let (org, replica) = source(&server, "quenth").await;
    let m = members(&export(&org, &replica).await);
    let unserved = with_manifest(&m, |v| v["replica"]["llm"]["model"] = json!("no-such-model"));
    let (s, v) = import(&org, pack(&unserved), &format!("{}&slug=replaced", owner(&org))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["llmModelReplaced"], "no-such-model", "{v}");
    let (_, r) = org.get(&format!("/v1/replicas/{}", v["replicaUUID"].as_str().unwrap())).await;
    assert_eq!(r["llm"]["model"], v["llmModel"], "the server's default: {r}");
    assert_ne!(r["llm"]["model"], "no-such-model");
    let before = holdings(&org).await;
    let (s, v) = import(&org, pack(&m), "ownerID=nobody@example.org&slug=other").await;
    assert_error_status(s, &v, StatusCode::BAD_REQUEST, "VALIDATION_ERROR");
    assert_eq!(holdings(&org).await, before);
}

#[tokio::test]
async fn the_demo_replica_answers_alike_after_a_round_trip() {
    let catalog_dir = tempfile::tempdir().unwrap();
    let catalog = minilm_catalog(catalog_dir.path());
    let a = Server::start_in(DataDir::new(), &["--demo", "--embedding-models", catalog.to_str().unwrap()]);
    let log = a.dir().log();
    let key = log.split_whitespace().find(|w| w.starts_with("rpl_")).expect("serve --demo prints its key");
    let demo = Org {
        key: key.to_string(),
        id: String::new(),
        owner_email: String::new(),
        base: a.base_url.clone(),
        client: a.client.clone(),
    };
    let (s, v) = demo.get("/v1/replicas?slug=python-tutor").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let tutor = v["items"][0]["uuid"].as_str().expect("the demo replica").to_string();
    let entries = all_ready_within(&demo, &tutor, std::time::Duration::from_secs(900)).await;
    let bundle = export(&demo, &tutor).await;

    let b = with_model(DataDir::new(), &catalog);
    let org = b.new_org("Tutor").await;
    let (s, imported) = import(&org, bundle, &owner(&org)).await;
    assert_eq!(s, StatusCode::CREATED, "{imported}");
    assert_eq!(imported["reembedding"], false, "{imported}");
    let copy = imported["replicaUUID"].as_str().unwrap().to_string();
    assert_eq!(all_ready(&org, &copy).await, entries);
    assert_eq!(listing(&org, &copy).await, listing(&demo, &tutor).await);
    let questions = [
        "How do I delete a key from a dictionary?",
        "What does the range function return?",
        "How do I define a function with default arguments?",
        "What is a list comprehension?",
        "How do I read a file line by line?",
    ];
    assert_eq!(answers_to(&org, &copy, &questions).await, answers_to(&demo, &tutor, &questions).await);
}

#[tokio::test]
async fn a_website_entry_keeps_its_refresh_setting_and_is_refreshed_on_the_target() {
    use crate::fixtures::{web_server_shared, Page, Pages};
    let page = |day: &str| {
        Page::html(&format!(
            "<html><head><title>Ferry timetable</title></head><body><article><h1>Ferry to Skerra</h1>\
             <p>The ferry to the island of Skerra leaves the harbour every {day} at nine in the morning.</p>\
             </article></body></html>"
        ))
    };
    let pages: Pages = Arc::new(Mutex::new(std::collections::HashMap::from([("/ferry", page("Tuesday"))])));
    let base = web_server_shared(pages.clone()).await;
    let a = Server::start_with(&["--allow-private-urls"]);
    let org_a = a.new_org("Ferries").await;
    let replica_a = org_a.create_replica("ferries").await;
    let body = json!({ "url": format!("{base}/ferry"), "autoRefresh": true });
    let (_, v) = org_a.post(&format!("/v1/replicas/{replica_a}/knowledge-base"), body).await;
    let kb = v["results"][0]["knowledgeBaseID"].as_u64().unwrap();
    org_a.wait_ready(&replica_a, kb).await;
    let bundle = export(&org_a, &replica_a).await;
    let entry: Value = serde_json::from_slice(&members(&bundle)[1].1).unwrap();
    assert_eq!((entry["type"].clone(), entry["autoRefresh"].clone()), (json!("website"), json!(true)), "{entry}");

    pages.lock().unwrap().insert("/ferry", page("Thursday"));
    let b = Server::start_with(&["--allow-private-urls", "--kb-refresh-interval", "1"]);
    let org_b = b.new_org("Ferries").await;
    let (s, v) = import(&org_b, bundle, &owner(&org_b)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let copy = v["replicaUUID"].as_str().unwrap().to_string();
    let listed = &listing(&org_b, &copy).await[0];
    assert_eq!(listed["website"], listing(&org_a, &replica_a).await[0]["website"], "{listed}");
    let deadline = Instant::now() + crate::common::PATIENCE;
    loop {
        let (_, items) = org_b.get(&format!("/v1/replicas/{copy}/knowledge-base")).await;
        let id = items["items"][0]["id"].as_u64().unwrap();
        let entry = org_b.wait_settled(&copy, id).await;
        if entry["rawText"].as_str().unwrap_or("").contains("Thursday") {
            break;
        }
        assert!(Instant::now() < deadline, "the imported page was not refreshed: {entry}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
