//! Disk full: while the data directory's filesystem is full, every kind of
//! write answers 507 `INSUFFICIENT_STORAGE` with the spec's error body and stores nothing,
//! reads keep working, writes succeed again once space returns (no restart), `replicad check`
//! finds the index in agreement with the store, and nothing acknowledged is lost.
//!
//! The full disk is injected (`serve --test-faults`, admin `disk-full`, see `store::file`):
//! with the free-space reserve the writer refuses writes before touching the file; with
//! `--min-free-space 0` the write that needs new space fails mid-transaction and the store is
//! reopened. With `REPLICAD_TMPFS_TEST=1` (set by `.ci/run` where this machine can mount a
//! tmpfs, as on the machines this project runs CI on) the same runs on a real 8 MiB tmpfs.
//!
//! The full disk is the redb file's, so these servers keep their tables in it whatever the
//! run's engine.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_error, replica_body, send, user, DataDir, Org, Server, ZORBLAX};

/// Makes the store of `server` (started with `--test-faults`) see a full filesystem, or not.
fn disk_full(server: &Server, full: bool) {
    let mut s = UnixStream::connect(server.dir().path().join("admin.sock")).expect("admin socket");
    writeln!(s, "{}", json!({"op": "disk-full", "full": full})).expect("write admin request");
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).expect("admin answer");
    let v: Value = serde_json::from_str(&line).expect("admin answer is JSON");
    assert_eq!(v, json!({"disk": {"full": full}}), "disk-full answer");
}

/// What the test wrote and the server acknowledged, to find again after a restart.
#[derive(Default)]
struct Acknowledged {
    history: Vec<String>,
    replicas: Vec<String>,
    entries: Vec<u64>,
}

/// One write of each kind; each answers its success status, or 507 with the spec's error body.
/// Returns how many were refused (507); the acknowledged ones are added to `ack`.
async fn write_each_kind(org: &Org, replica: &str, tag: &str, ack: &mut Acknowledged) -> usize {
    let mut refused = 0;
    let mut outcome = |r: &crate::common::Resp, ok: StatusCode| -> bool {
        if r.status == StatusCode::INSUFFICIENT_STORAGE {
            assert_error(r, StatusCode::INSUFFICIENT_STORAGE, Some("INSUFFICIENT_STORAGE"));
            refused += 1;
            return false;
        }
        assert_eq!(r.status, ok, "{}", r.text);
        true
    };
    let content = format!("history item {tag}");
    let r = org
        .call(Method::POST, &format!("/v1/replicas/{replica}/chat/history"), Some(&json!({"content": content})), &[])
        .await;
    if outcome(&r, StatusCode::OK) {
        ack.history.push(content);
    }
    let r =
        org.call(Method::POST, "/v1/replicas", Some(&replica_body(&format!("r-{tag}"), &org.owner_email)), &[]).await;
    if outcome(&r, StatusCode::CREATED) {
        ack.replicas.push(r.body["uuid"].as_str().expect("uuid").to_string());
    }
    let mut update = replica_body("main", &org.owner_email);
    update["shortDescription"] = json!(format!("updated {tag}"));
    let r = org.call(Method::PUT, &format!("/v1/replicas/{replica}"), Some(&update), &[]).await;
    outcome(&r, StatusCode::OK);
    let text = json!({"text": format!("{ZORBLAX} Entry {tag}."), "title": format!("entry {tag}"), "language": "en"});
    let r = org.call(Method::POST, &format!("/v1/replicas/{replica}/knowledge-base"), Some(&text), &[]).await;
    if outcome(&r, StatusCode::MULTI_STATUS) {
        ack.entries.push(r.body["results"][0]["knowledgeBaseID"].as_u64().expect("knowledgeBaseID"));
    }
    let r = org
        .call(
            Method::POST,
            &format!("/v1/replicas/{replica}/chat/completions"),
            Some(&json!({"content": "Where is Quenth?"})),
            &[],
        )
        .await;
    outcome(&r, StatusCode::OK);
    refused
}

/// Creates a `file` entry (a write) and returns its id and signed URL.
async fn file_entry(org: &Org, replica: &str, name: &str) -> (u64, String) {
    let (s, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({ "filename": name })).await;
    assert_eq!(s, StatusCode::MULTI_STATUS, "{v}");
    let r = &v["results"][0];
    (r["knowledgeBaseID"].as_u64().expect("id"), r["signedURL"].as_str().expect("signedURL").to_string())
}

/// PUTs `bytes` to a signed upload URL.
async fn put_upload(org: &Org, url: &str, bytes: Vec<u8>) -> crate::common::Resp {
    send(org.client.put(url).body(bytes)).await
}

/// The content of every history item of `replica`, paging with `beforeID`.
async fn all_history(org: &Org, replica: &str) -> Vec<String> {
    let mut contents = Vec::new();
    let mut before = String::new();
    loop {
        let items = org.history(replica, &format!("?limit=100{before}")).await;
        let Some(oldest) = items.iter().filter_map(|i| i["id"].as_u64()).min() else { return contents };
        contents.extend(items.iter().filter_map(|i| i["content"].as_str().map(str::to_string)));
        before = format!("&beforeID={oldest}");
    }
}

/// The reads a client makes keep answering while writes are refused.
async fn reads_work(org: &Org, replica: &str, ack: &Acknowledged) {
    let (s, v) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let contents = all_history(org, replica).await;
    for h in &ack.history {
        assert!(contents.contains(h), "{h} is listed: {contents:?}");
    }
    let (s, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    for kb in &ack.entries {
        let (s, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{kb}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    let (s, v) = org.get("/v1/replicas").await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

/// Waits until every acknowledged entry is indexed (the indexer caught up after the full disk),
/// stops `server`, runs `replicad check` on its directory (index and store in agreement),
/// starts it again and finds every acknowledged write; returns the new server.
async fn check_and_find_everything(
    server: Server,
    org: &Org,
    replica: &str,
    ack: &Acknowledged,
    extra: &[&str],
) -> Server {
    for kb in &ack.entries {
        org.wait_settled(replica, *kb).await;
    }
    let (status, dir) = server.stop();
    assert!(status.success(), "the server stopped cleanly: {status}");
    let out = dir.cli(&["check"]);
    assert!(
        out.status.success(),
        "check: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["ok"], json!(true), "{report}");
    assert_eq!(report["mismatched"], json!([]), "{report}");
    let server = Server::start_in(dir, extra);
    let org = org.at(&server);
    reads_work(&org, replica, ack).await;
    for r in &ack.replicas {
        let (s, v) = org.get(&format!("/v1/replicas/{r}")).await;
        assert_eq!(s, StatusCode::OK, "acknowledged replica {r}: {v}");
    }
    for kb in &ack.entries {
        org.wait_ready(replica, *kb).await;
    }
    server
}

#[tokio::test]
async fn a_full_disk_refuses_every_kind_of_write_with_507_keeps_reads_and_recovers() {
    let server = Server::start_in(DataDir::redb(), &["--test-faults"]);
    let org = server.new_org("Full").await;
    let replica = org.create_replica("main").await;
    let mut ack = Acknowledged::default();
    assert_eq!(write_each_kind(&org, &replica, "before", &mut ack).await, 0);
    let (upload_entry, url) = file_entry(&org, &replica, "notes.txt").await;
    let (s, v) = org.get_as("/v1/users/me", &user("messengerA", "known")).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    disk_full(&server, true);
    let mut refused = Acknowledged::default();
    assert_eq!(write_each_kind(&org, &replica, "during", &mut refused).await, 5, "every write is refused");
    let r = put_upload(&org, &url, ZORBLAX.as_bytes().to_vec()).await;
    assert_error(&r, StatusCode::INSUFFICIENT_STORAGE, Some("INSUFFICIENT_STORAGE"));
    reads_work(&org, &replica, &ack).await;
    let (s, v) = org.get_as("/v1/users/me", &user("messengerA", "known")).await;
    assert_eq!(s, StatusCode::OK, "a user met before reads as before: {v}");
    // A user met for the first time is made on that read: it cannot be, so 507 too.
    let r = org.call(Method::GET, "/v1/users/me", None, &user("messengerA", "first-contact")).await;
    assert_error(&r, StatusCode::INSUFFICIENT_STORAGE, Some("INSUFFICIENT_STORAGE"));
    let (_, v) = org.get(&format!("/v1/replicas/{replica}/knowledge-base/{upload_entry}")).await;
    assert_ne!(v["status"], json!("FILE_UPLOADED"), "the refused upload stored nothing: {v}");

    disk_full(&server, false);
    assert_eq!(write_each_kind(&org, &replica, "after", &mut ack).await, 0, "writes succeed again");
    let r = put_upload(&org, &url, ZORBLAX.as_bytes().to_vec()).await;
    assert_eq!(r.status, StatusCode::OK, "the same upload URL works once space returns: {}", r.text);
    ack.entries.push(upload_entry);
    let stored = all_history(&org, &replica).await;
    assert!(!stored.iter().any(|c| c == "history item during"), "nothing refused is stored");

    let server = check_and_find_everything(server, &org, &replica, &ack, &["--test-faults"]).await;
    let org = org.at(&server);
    let (_, list) = org.get("/v1/replicas").await;
    assert!(!list.to_string().contains("r-during"), "the refused replica was not created: {list}");
}

#[tokio::test]
async fn a_disk_that_fills_mid_write_answers_507_and_the_store_is_reopened() {
    let flags = ["--test-faults", "--min-free-space", "0"];
    let server = Server::start_in(DataDir::redb(), &flags);
    let org = server.new_org("Filling").await;
    let replica = org.create_replica("main").await;
    let mut ack = Acknowledged::default();
    assert_eq!(write_each_kind(&org, &replica, "before", &mut ack).await, 0);
    let (entry, url) = file_entry(&org, &replica, "big.txt").await;
    // Just under the 2,000,000 characters one entry may hold.
    let big: Vec<u8> = ZORBLAX.bytes().chain(*b" ").cycle().take(1_950_000).collect();

    disk_full(&server, true);
    // An uploaded file is a file of its own: refused before the store is touched.
    let r = put_upload(&org, &url, big.clone()).await;
    assert_error(&r, StatusCode::INSUFFICIENT_STORAGE, Some("INSUFFICIENT_STORAGE"));
    assert!(!server.dir().log().contains("the store was reopened after a failed write"), "{}", server.dir().log_tail());
    // Without a reserve, the check lets a large write through; it needs new space and fails.
    let text: String = ZORBLAX.chars().chain(" ".chars()).cycle().take(1_900_000).collect();
    let body = json!({"text": text, "title": "big text", "language": "en"});
    let r = org.call(Method::POST, &format!("/v1/replicas/{replica}/knowledge-base"), Some(&body), &[]).await;
    assert_error(&r, StatusCode::INSUFFICIENT_STORAGE, Some("INSUFFICIENT_STORAGE"));
    reads_work(&org, &replica, &ack).await;
    assert!(server.dir().log().contains("the store was reopened after a failed write"), "{}", server.dir().log_tail());
    // Small writes fit in the file's free pages, or are refused: either way, told truly.
    write_each_kind(&org, &replica, "during", &mut ack).await;
    reads_work(&org, &replica, &ack).await;

    disk_full(&server, false);
    let r = put_upload(&org, &url, big).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    ack.entries.push(entry);
    assert_eq!(write_each_kind(&org, &replica, "after", &mut ack).await, 0, "writes succeed again");
    check_and_find_everything(server, &org, &replica, &ack, &flags).await;
}

/// A size-capped tmpfs mounted on a test's data directory; unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir).output();
        let out = out.expect("run mount");
        assert!(out.status.success(), "mount tmpfs (REPLICAD_TMPFS_TEST=1): {}", String::from_utf8_lossy(&out.stderr));
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the filesystem of `dir` with `ballast` until fewer than `left` bytes are free.
fn fill(dir: &Path, left: u64) -> std::path::PathBuf {
    let ballast = dir.join("ballast");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&ballast).unwrap();
    let block = vec![0xA5u8; 64 << 10];
    while fs4::available_space(dir).unwrap() >= left {
        if f.write_all(&block).is_err() {
            break;
        }
    }
    let _ = f.sync_all();
    ballast
}

/// On a real 8 MiB filesystem: below the reserve writes are refused before the store's file is
/// touched; without a reserve the disk really fills mid-write. Both recover when the ballast
/// is removed. Runs with `REPLICAD_TMPFS_TEST=1` (root, `.ci/run` sets it).
#[tokio::test]
async fn on_a_small_tmpfs_writes_answer_507_until_space_returns() {
    if std::env::var("REPLICAD_TMPFS_TEST").as_deref() != Ok("1") {
        eprintln!(
            "on_a_small_tmpfs_writes_answer_507_until_space_returns: not run (set REPLICAD_TMPFS_TEST=1; .ci/run does)"
        );
        return;
    }
    for reserve in ["1MiB", "0"] {
        let dir = DataDir::redb();
        let mount = Tmpfs::mount(&dir.path(), "8m");
        let flags = ["--min-free-space", reserve];
        let server = Server::start_in(dir, &flags);
        let org = server.new_org("Tiny").await;
        let replica = org.create_replica("main").await;
        let mut ack = Acknowledged::default();
        assert_eq!(write_each_kind(&org, &replica, "before", &mut ack).await, 0);
        let ballast = fill(&server.dir().path(), 256 << 10);
        let mut refused = 0;
        for round in 0..64 {
            refused += write_each_kind(&org, &replica, &format!("full-{round}"), &mut ack).await;
            if refused > 0 {
                break;
            }
        }
        assert!(refused > 0, "with {reserve} reserve, writes are refused on a full disk");
        let reopened = server.dir().log().contains("the store was reopened after a failed write");
        eprintln!(
            "tmpfs, --min-free-space {reserve}: 507 after {} history items; reopened: {reopened}",
            ack.history.len()
        );
        reads_work(&org, &replica, &ack).await;
        std::fs::remove_file(ballast).unwrap();
        assert_eq!(write_each_kind(&org, &replica, "after", &mut ack).await, 0, "writes succeed again ({reserve})");
        let server = check_and_find_everything(server, &org, &replica, &ack, &flags).await;
        let (_, dir) = server.stop();
        drop(mount);
        drop(dir);
    }
}
