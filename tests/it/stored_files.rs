//! Uploaded files are files of their own in `DATA_DIR/files/` (on PostgreSQL, rows of
//! `replicad_files`), so that a large upload does not hold up the store's single writer: written
//! and made durable before the record that names them is committed, removed with their entry or
//! replica, the files a crash left unrecorded removed at the next start, and checked whole by
//! `replicad check`.

use std::collections::BTreeMap;
use std::path::Path;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::pg::with_client;
use crate::common::{DataDir, Server};

/// The uploaded files of the server of `dir`, name → bytes: the files directory's (hidden
/// partial files too), or the database's.
fn stored(dir: &DataDir) -> BTreeMap<String, Vec<u8>> {
    let Some(url) = dir.store() else {
        return std::fs::read_dir(dir.path().join("files"))
            .expect("the files directory")
            .map(|e| {
                let e = e.unwrap();
                (e.file_name().to_string_lossy().to_string(), std::fs::read(e.path()).unwrap())
            })
            .collect();
    };
    with_client(url, |db| {
        let mut files = BTreeMap::<String, Vec<u8>>::new();
        for row in db.query("SELECT name, data FROM replicad_files ORDER BY name, part", &[]).unwrap() {
            files.entry(row.get(0)).or_default().extend_from_slice(row.get::<_, &[u8]>(1));
        }
        files
    })
}

/// Stores `bytes` as file `name` behind the server's back, as a crash can leave it (in the
/// database, written `age_hours` ago).
fn plant(dir: &DataDir, name: &str, bytes: &[u8], age_hours: f64) {
    let Some(url) = dir.store() else { return std::fs::write(dir.path().join("files").join(name), bytes).unwrap() };
    with_client(url, |db| {
        let sql = "INSERT INTO replicad_files (name, part, data, written_at) \
                   VALUES ($1, 0, $2, now() - make_interval(secs => $3))";
        db.execute(sql, &[&name, &bytes, &(age_hours * 3600.0)]).unwrap();
    });
}

/// Replaces the bytes of file `name` behind the server's back.
fn alter(dir: &DataDir, name: &str, bytes: &[u8]) {
    let Some(url) = dir.store() else { return std::fs::write(dir.path().join("files").join(name), bytes).unwrap() };
    with_client(url, |db| db.execute("UPDATE replicad_files SET data = $2 WHERE name = $1", &[&name, &bytes]).unwrap());
}

/// `replicad check` on a stopped server's directory: its JSON report.
fn check(dir: &DataDir) -> (bool, Value) {
    let out = dir.cli(&["check"]);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| json!({"stderr": String::from_utf8_lossy(&out.stderr)}));
    (out.status.success(), report)
}

#[tokio::test]
async fn an_uploaded_file_is_a_file_of_its_own_until_its_entry_or_replica_is_deleted() {
    let server = Server::start();
    let org = server.new_org("Files").await;
    let (a, b) = (org.create_replica("a").await, org.create_replica("b").await);
    let first = org.upload(&a, "first.txt", b"The first file of replica a.".to_vec()).await;
    let second = org.upload(&a, "second.txt", b"The second file of replica a.".to_vec()).await;
    let third = org.upload(&b, "third.txt", b"The file of replica b.".to_vec()).await;
    for (replica, entry) in [(&a, first), (&a, second), (&b, third)] {
        org.wait_ready(replica, entry).await;
    }
    let files = stored(server.dir());
    let contents: Vec<&[u8]> = files.values().map(Vec::as_slice).collect();
    assert_eq!(files.len(), 3, "{:?}", files.keys());
    for bytes in
        [b"The first file of replica a.".as_slice(), b"The second file of replica a.", b"The file of replica b."]
    {
        assert!(contents.contains(&bytes), "{files:?}");
    }
    assert!(files.keys().any(|n| n.starts_with(&format!("{first}-"))), "named by the entry: {:?}", files.keys());

    let (s, v) = org.delete(&format!("/v1/replicas/{a}/knowledge-base/{first}")).await;
    assert!(s.is_success(), "{s} {v}");
    let files = stored(server.dir());
    assert_eq!(files.len(), 2, "the deleted entry's file is removed: {:?}", files.keys());
    assert!(!files.keys().any(|n| n.starts_with(&format!("{first}-"))));
    let (s, v) = org.delete(&format!("/v1/replicas/{b}")).await;
    assert!(s.is_success(), "{s} {v}");
    let files = stored(server.dir());
    assert_eq!(files.len(), 1, "the deleted replica's file is removed: {:?}", files.keys());
    assert!(files.keys().all(|n| n.starts_with(&format!("{second}-"))));

    let (status, dir) = server.stop();
    assert!(status.success());
    let (ok, report) = check(&dir);
    assert!(ok && report["ok"] == json!(true), "{report}");
    assert_eq!(report["files"], json!({"stored_files": 1, "damaged_files": [], "unreferenced_files": 0}), "{report}");

    // What a crash between a file's rename and its record's commit, or mid-write, leaves.
    plant(&dir, "77-0123456789abcdef", b"never acknowledged", 2.0);
    let recent = "79-0123456789abcdef";
    match dir.store() {
        None => plant(&dir, ".78-0123456789abcdef.part", b"half writ", 0.0),
        // Another node may be writing a recent file: it stays (its node records or removes it).
        Some(_) => plant(&dir, recent, b"being written", 0.0),
    }
    let server = Server::start_in(dir, &[]);
    let mut files = stored(server.dir());
    if server.dir().store().is_some() {
        assert!(files.remove(recent).is_some(), "a recent file stays in the database: {:?}", files.keys());
    }
    assert_eq!(files.len(), 1, "the start removed what no record names: {:?}", files.keys());
    let org = org.at(&server);
    let (s, v) = org.get(&format!("/v1/replicas/{a}/knowledge-base/{second}")).await;
    assert_eq!((s, v["file"]["size"].as_u64()), (StatusCode::OK, Some(29)), "{v}");

    // A recorded file changed behind the server's back is reported.
    let (_, dir) = server.stop();
    let name = stored(&dir).into_keys().find(|n| n.starts_with(&format!("{second}-"))).unwrap();
    alter(&dir, &name, b"The second file of replica A.");
    let (ok, report) = check(&dir);
    assert!(!ok && report["ok"] == json!(false), "{report}");
    assert_eq!(report["files"]["damaged_files"], json!([second]), "{report}");
}

/// `cmd` run under umask 022 (the usual login default), whatever the test runner's own.
fn under_umask_022(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: umask is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        })
    }
}

/// Every path below `dir` (itself included) whose mode lets group or others in, with its mode.
fn open_to_others(dir: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut open = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 && !meta.file_type().is_symlink() {
            open.push((path.display().to_string(), mode));
        }
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    open
}

#[tokio::test]
async fn the_data_directory_its_files_and_backups_are_the_server_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    // The redb file and its backup are among the files checked.
    let dir = DataDir::redb();
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = std::process::Command::new(crate::common::BIN);
    cmd.arg("serve").arg("--listen").arg("127.0.0.1:0").arg("--data-dir").arg(dir.path());
    under_umask_022(&mut cmd);
    let server = Server::spawn(cmd, dir, &[]);
    let org = server.new_org("Modes").await;
    let replica = org.create_replica("modes").await;
    let kb = org.upload(&replica, "notes.txt", b"The lighthouse keeper winds the clock at dusk.".to_vec()).await;
    org.wait_settled(&replica, kb).await;
    let data = server.dir().path();
    let files = stored(server.dir());
    assert!(server.dir().log().contains("was open to other users"), "no warning: {}", server.dir().log_tail());
    let archive = tempfile::tempdir().unwrap();
    let to = archive.path().join("backup.tar.gz");
    let mut backup = std::process::Command::new(crate::common::BIN);
    backup.args(["backup", "--data-dir", data.to_str().unwrap(), "--to", to.to_str().unwrap()]);
    under_umask_022(&mut backup);
    let out = crate::common::run(backup);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(open_to_others(&data), vec![], "files of the data directory open to other users");
    assert_eq!(open_to_others(&to), vec![], "the backup is open to other users");
    assert!(data.join("replicad.redb").exists() && files.len() == 1, "{:?}", files.keys());
}
