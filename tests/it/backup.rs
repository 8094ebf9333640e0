//! Online backup and restore: `replicad backup` while writes go on, then
//! `replicad restore` into a fresh directory and a server on it.
//!
//! The backup copies the redb file, so these servers keep their tables in it whatever the run's
//! engine (a PostgreSQL store is backed up with `pg_dump`).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{run, DataDir, Org, Server, BIN, PATIENCE};

/// Every history item of `replica` visible to the organization: id → content.
async fn all_history(org: &Org, replica: &str) -> BTreeMap<u64, String> {
    let mut all = BTreeMap::new();
    let mut before = String::new();
    loop {
        let (s, v) = org.get(&format!("/v1/replicas/{replica}/chat/history?limit=100{before}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let items = v["items"].as_array().expect("items");
        let Some(oldest) = items.first() else { return all };
        for item in items {
            all.insert(item["id"].as_u64().expect("id"), item["content"].as_str().expect("content").to_string());
        }
        before = format!("&beforeID={}", oldest["id"]);
    }
}

/// Writes history items until `stop`; each acknowledged one goes into `acked`.
async fn writer(org: Org, replica: String, n: usize, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<(u64, String)>>>) {
    let path = format!("/v1/replicas/{replica}/chat/history");
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let content = format!("writer {n} item {i}");
        let (s, v) = org.post(&path, json!({ "content": content })).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        acked.lock().unwrap().push((v["id"].as_u64().expect("id"), content));
    }
}

fn cli(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    run(cmd)
}

#[tokio::test]
async fn a_backup_taken_under_write_load_restores_every_acknowledged_record() {
    let server = Server::start_in(DataDir::redb(), &[]);
    let org = server.new_org("Backup").await;
    let replica = org.create_replica("b").await;
    let text = org.add_ready_text(&replica, "Zorblax", crate::common::ZORBLAX).await;
    let file = org.upload(&replica, "notes.txt", b"Moonwater is harvested every spring.".to_vec()).await;
    org.wait_ready(&replica, file).await;

    let (stop, acked) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
    let writers: Vec<_> =
        (0..4).map(|n| tokio::spawn(writer(org.clone(), replica.clone(), n, stop.clone(), acked.clone()))).collect();
    let deadline = Instant::now() + PATIENCE;
    while acked.lock().unwrap().len() < 40 {
        assert!(Instant::now() < deadline, "the writers acknowledged too little");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before_backup = acked.lock().unwrap().clone();
    let archive = DataDir::redb();
    let to = archive.path().with_extension("tar.gz");
    let data = server.dir().path();
    let args: Vec<String> =
        vec!["backup".into(), "--data-dir".into(), data.display().to_string(), "--to".into(), to.display().to_string()];
    let out =
        tokio::task::spawn_blocking(move || cli(&args.iter().map(String::as_str).collect::<Vec<_>>())).await.unwrap();
    assert!(out.status.success(), "backup failed: {}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("a JSON summary on stdout");
    assert_eq!(summary["secrets_key"], json!(true), "{summary}");
    assert_eq!((summary["files"].as_u64(), summary["file_bytes"].as_u64()), (Some(1), Some(36)), "{summary}");
    assert_eq!(summary["bytes"].as_u64(), Some(std::fs::metadata(&to).unwrap().len()), "{summary}");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let original = all_history(&org, &replica).await;

    let restored_dir = DataDir::redb();
    let dir = restored_dir.path();
    let out = cli(&["restore", "--from", to.to_str().unwrap(), "--data-dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "restore failed: {}", String::from_utf8_lossy(&out.stderr));
    let restored: Value = serde_json::from_slice(&out.stdout).expect("a JSON summary on stdout");
    assert_eq!(restored["manifest"]["records"], summary["records"], "{restored}");
    let key = |d: &std::path::Path| std::fs::read(d.join("secrets.key")).expect("secrets.key");
    assert_eq!(key(&dir), key(&data), "the secrets key comes back as it was");
    let files = |d: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(d.join("files"))
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().to_string(), std::fs::read(e.path()).unwrap()))
            .collect();
        files.sort();
        files
    };
    assert_eq!(files(&dir), files(&data), "the uploaded file comes back as it was");

    let again = Server::start_in(restored_dir, &[]);
    let org2 = org.at(&again);
    let history = all_history(&org2, &replica).await;
    for (id, content) in &before_backup {
        assert_eq!(history.get(id), Some(content), "item {id}, acknowledged before the backup, is restored as it was");
    }
    for (id, content) in &history {
        assert_eq!(original.get(id), Some(content), "restored item {id} is one the server stored, as it stored it");
    }
    for entry in [text, file] {
        let path = format!("/v1/replicas/{replica}/knowledge-base/{entry}");
        assert_eq!(org2.get(&path).await, org.get(&path).await, "entry {entry} is restored as it was");
    }
    let sources = org2.ask(&replica, crate::common::ZORBLAX_QUESTION).await;
    assert!(sources.contains("451"), "the rebuilt index answers from the restored entries: {sources}");
    let check = again.dir().cli(&["check"]);
    assert!(check.status.success(), "check: {}", String::from_utf8_lossy(&check.stdout));
}

#[tokio::test]
async fn restore_refuses_a_non_empty_directory_and_a_file_that_is_no_backup() {
    let server = Server::start_in(DataDir::redb(), &[]);
    let archive = server.dir().path().join("backup.tar.gz");
    let out = server.dir().cli(&["backup", "--to", archive.to_str().unwrap()]);
    assert!(out.status.success(), "backup: {}", String::from_utf8_lossy(&out.stderr));

    let occupied = DataDir::redb();
    std::fs::create_dir_all(occupied.path()).unwrap();
    std::fs::write(occupied.path().join("keep.txt"), "mine").unwrap();
    let out = occupied.cli(&["restore", "--from", archive.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"), "{out:?}");
    assert_eq!(std::fs::read_to_string(occupied.path().join("keep.txt")).unwrap(), "mine", "nothing touched");

    let not_backup = server.dir().path().join("not-a-backup.tar.gz");
    std::fs::write(&not_backup, crate::common::gzip(b"hello")).unwrap();
    let fresh = DataDir::redb();
    let out = fresh.cli(&["restore", "--from", not_backup.to_str().unwrap()]);
    assert!(!out.status.success(), "{out:?}");
    assert!(!fresh.path().exists(), "a failed restore leaves no directory behind");
}
