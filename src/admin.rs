//! Admin commands: a Unix socket `DATA_DIR/admin.sock` (mode 0600, so only the server's own
//! OS user can use it) taking one JSON line, a [`Request`], and answering one, an [`Answer`].
//! `replicad invites create`, `replicad reindex` and `replicad check` go through it when a
//! server holds the store ([`create_invite`], [`reindex`], [`check`]), and open the store
//! themselves otherwise.
//!
//! Lines: `{"op":"invite","expires_in_secs":N|null}` → `{"invite":{"code":"inv_…"}}`;
//! `{"op":"reindex"}` → `{"reindex":{"chunks":N}}`; `{"op":"check"}` → `{"check":{"report":{…}}}`
//! (see `search::check::Report`); `{"op":"orgs"}` → `{"orgs":{"orgs":[…]}}` (see
//! `service::quotas::OrgUsage`); `{"op":"set-quota","org":ID,"conversations_per_month"?,
//! "replicas"?,"knowledge_base_entries"?,"embed_conversations_per_month"?}` →
//! `{"quota":{"quota":{…}}}`;
//! `{"op":"backup","to":"/abs/FILE"}` → zero or more `{"progress":{"progress":{…}}}` lines then
//! `{"backup":{"summary":{…}}}` (see `crate::backup`);
//! `{"op":"advance-clock","ms":N}` → `{"clock":{"now_ms":N}}` (only with `serve --test-clock`,
//! see [`crate::clock`]); `{"op":"disk-full","full":BOOL}` → `{"disk":{"full":BOOL}}` (only with
//! `serve --test-faults`: while `full`, the filesystem looks full to the store, see
//! `crate::store::file`); failures → `{"failed":{"error":"…"}}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::app::App;
use crate::backup;
use crate::config::DataDir;
use crate::search::check::Report;
use crate::search::{self, Search};
use crate::secrets::key_path;
use crate::service::orgs;
use crate::service::quotas::{self, OrgUsage};
use crate::store::records::Quota;
use crate::store::Store;

/// A request on the admin socket.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// Mint an invitation code valid for `expires_in_secs` seconds (no expiry when `None`).
    Invite { expires_in_secs: Option<u64> },
    /// Rebuild the search index in place.
    Reindex,
    /// Compare the search index with the store.
    Check,
    /// Every organization with its usage and quotas.
    Orgs,
    /// Set the quotas of organization `org` (`None`: the server's default).
    #[serde(rename = "set-quota")]
    SetQuota {
        org: uuid::Uuid,
        #[serde(flatten)]
        quota: Quota,
    },
    /// Write a backup archive of the live store to `to` (an absolute path).
    Backup { to: PathBuf },
    /// Move the test clock forward by `ms` milliseconds (`serve --test-clock` only).
    #[serde(rename = "advance-clock")]
    AdvanceClock { ms: i64 },
    /// Make the filesystem look full to the store while `full` (`serve --test-faults` only).
    #[serde(rename = "disk-full")]
    DiskFull { full: bool },
}

/// The answer to a [`Request`].
#[derive(Serialize, Deserialize, Debug)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// The minted invitation code.
    Invite { code: String },
    /// The number of chunks indexed.
    Reindex { chunks: usize },
    /// What the check found.
    Check { report: Report },
    /// The organizations with their usage and quotas.
    Orgs { orgs: Vec<OrgUsage> },
    /// The quotas now in effect.
    Quota { quota: Quota },
    /// What the backup wrote.
    Backup { summary: backup::Summary },
    /// How far a long operation is (sent before its answer).
    Progress { progress: backup::Progress },
    /// The clock's new reading, in ms since the epoch.
    Clock { now_ms: i64 },
    /// Whether the filesystem now looks full to the store.
    Disk { full: bool },
    /// The request failed; `error` says why.
    Failed { error: String },
}

/// Path of the admin socket in `data_dir`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.sock")
}

/// Listens on the admin socket for the life of the server.
pub fn spawn(app: Arc<App>) -> std::io::Result<()> {
    let path = socket_path(&app.config.data_dir);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let app = app.clone();
            tokio::spawn(async move {
                if let Err(e) = answer(app, stream).await {
                    tracing::warn!(error = %e, "admin connection failed");
                }
            });
        }
    });
    Ok(())
}

async fn answer(app: Arc<App>, stream: UnixStream) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut line = String::new();
    BufReader::new(r).read_line(&mut line).await?;
    let answer = match serde_json::from_str::<Request>(&line) {
        Ok(Request::Backup { to }) => backup_streaming(&app, to, &mut w).await?,
        Ok(req) => execute(&app, req).await.unwrap_or_else(|error| Answer::Failed { error }),
        Err(e) => Answer::Failed { error: format!("bad request: {e}") },
    };
    write_line(&mut w, &answer).await
}

async fn write_line(w: &mut (impl AsyncWriteExt + Unpin), answer: &Answer) -> std::io::Result<()> {
    let line = serde_json::to_string(answer).map_err(std::io::Error::other)?;
    w.write_all(format!("{line}\n").as_bytes()).await
}

/// Runs a backup of the live store on the blocking pool, sending its progress as lines.
async fn backup_streaming(app: &App, to: PathBuf, w: &mut (impl AsyncWriteExt + Unpin)) -> std::io::Result<Answer> {
    if !to.is_absolute() {
        return Ok(Answer::Failed { error: format!("{} is not an absolute path", to.display()) });
    }
    let key_file = key_path(app.config.secrets_key_file.as_deref(), &app.config.data_dir);
    let (mut rx, job) = backup::spawn(app.store.clone(), key_file, to);
    while let Some(progress) = rx.recv().await {
        write_line(w, &Answer::Progress { progress }).await?;
    }
    Ok(match job.await {
        Ok(Ok(summary)) => Answer::Backup { summary },
        Ok(Err(error)) => Answer::Failed { error },
        Err(e) => Answer::Failed { error: format!("the backup panicked: {e}") },
    })
}

async fn execute(app: &App, req: Request) -> Result<Answer, String> {
    let text = |e: crate::error::Error| e.to_string();
    match req {
        Request::Invite { expires_in_secs } => {
            orgs::create_invite(&app.store, expires_in_secs).await.map(|code| Answer::Invite { code }).map_err(text)
        }
        Request::Reindex => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            app.reindex.send(tx).await.map_err(|_| "indexer stopped")?;
            let chunks = rx.await.map_err(|_| "indexer stopped")?.map_err(text)?;
            Ok(Answer::Reindex { chunks })
        }
        Request::Check => {
            search::check::check(&app.store, &app.search).await.map(|report| Answer::Check { report }).map_err(text)
        }
        Request::Orgs => {
            let now = crate::store::now_ms();
            let orgs = quotas::list(&app.store, app.config.quota_defaults(), now).await;
            orgs.map(|orgs| Answer::Orgs { orgs }).map_err(text)
        }
        Request::SetQuota { org, quota } => {
            quotas::set(&app.store, org, quota).await.map(|quota| Answer::Quota { quota }).map_err(text)
        }
        Request::AdvanceClock { ms } => crate::clock::advance(ms)
            .map(|now_ms| Answer::Clock { now_ms })
            .ok_or_else(|| "the clock is not adjustable (serve --test-clock) or ms < 0".to_string()),
        Request::DiskFull { full } if app.config.test_faults => {
            app.store.space().inject_full(full);
            Ok(Answer::Disk { full })
        }
        Request::DiskFull { .. } => Err("disk-full needs serve --test-faults".to_string()),
        Request::Backup { .. } => Err("backup is answered as a stream".into()),
    }
}

/// Sends `req` to a running server; `Ok(None)` when no server listens on `data_dir`; a
/// [`Answer::Failed`] comes back as `Err`.
pub async fn request(data_dir: &Path, req: &Request) -> Result<Option<Answer>, String> {
    request_with_progress(data_dir, req, &mut |_| {}).await
}

/// [`request`], calling `on_progress` for each [`Answer::Progress`] line before the answer.
pub async fn request_with_progress(
    data_dir: &Path,
    req: &Request,
    on_progress: &mut (dyn FnMut(backup::Progress) + Send),
) -> Result<Option<Answer>, String> {
    let Ok(stream) = UnixStream::connect(socket_path(data_dir)).await else { return Ok(None) };
    let (r, mut w) = stream.into_split();
    let line = serde_json::to_string(req).map_err(|e| e.to_string())?;
    w.write_all(format!("{line}\n").as_bytes()).await.map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(r).lines();
    loop {
        let line = lines.next_line().await.map_err(|e| e.to_string())?;
        let line = line.ok_or("the server closed the admin connection without an answer")?;
        match serde_json::from_str(&line).map_err(|e| format!("bad answer from the server: {e}"))? {
            Answer::Failed { error } => return Err(error),
            Answer::Progress { progress } => on_progress(progress),
            answer => return Ok(Some(answer)),
        }
    }
}

fn unexpected(answer: Answer) -> String {
    format!("unexpected answer from the server: {answer:?}")
}

/// The store of `dir` (its `--store` database, else the redb file in its data directory),
/// opened by this process because no server runs on it.
pub fn open_store(dir: &DataDir) -> Result<Store, String> {
    let min_free = crate::store::file::DEFAULT_MIN_FREE_BYTES;
    Store::open_on(&dir.data_dir, dir.store.as_deref(), min_free).map_err(|e| e.to_string())
}

fn open_index(data_dir: &Path) -> Result<Arc<Search>, String> {
    Search::open(data_dir).map(|(s, _)| Arc::new(s)).map_err(|e| e.to_string())
}

/// `replicad invites create`: a new invitation code, minted by the running server or in the
/// store of `dir` when none runs.
pub async fn create_invite(dir: &DataDir, expires_in_secs: Option<u64>) -> Result<String, String> {
    match request(&dir.data_dir, &Request::Invite { expires_in_secs }).await? {
        Some(Answer::Invite { code }) => Ok(code),
        Some(other) => Err(unexpected(other)),
        None => orgs::create_invite(&open_store(dir)?, expires_in_secs).await.map_err(|e| e.to_string()),
    }
}

/// `replicad reindex`: rebuilds the search index (by the running server, or here); returns the
/// number of chunks indexed.
pub async fn reindex(dir: &DataDir) -> Result<usize, String> {
    match request(&dir.data_dir, &Request::Reindex).await? {
        Some(Answer::Reindex { chunks }) => Ok(chunks),
        Some(other) => Err(unexpected(other)),
        None => search::indexer::rebuild_from_store(&open_store(dir)?, &open_index(&dir.data_dir)?)
            .await
            .map_err(|e| e.to_string()),
    }
}

/// `replicad check`: compares the search index with the store (by the running server, or here).
pub async fn check(dir: &DataDir) -> Result<Report, String> {
    match request(&dir.data_dir, &Request::Check).await? {
        Some(Answer::Check { report }) => Ok(report),
        Some(other) => Err(unexpected(other)),
        None => search::check::check(&open_store(dir)?, &open_index(&dir.data_dir)?).await.map_err(|e| e.to_string()),
    }
}

/// `replicad backup`: writes a backup archive to `to` (see [`crate::backup`]), taken by the
/// running server from its live store, or here from the store of `data_dir`. `on_progress`
/// sees each step's progress.
pub async fn backup(
    dir: &DataDir,
    secrets_key_file: Option<&Path>,
    to: &Path,
    on_progress: &mut (dyn FnMut(backup::Progress) + Send),
) -> Result<backup::Summary, String> {
    let to = std::path::absolute(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let data_dir = &dir.data_dir;
    match request_with_progress(data_dir, &Request::Backup { to: to.clone() }, on_progress).await? {
        Some(Answer::Backup { summary }) => Ok(summary),
        Some(other) => Err(unexpected(other)),
        None => {
            let store = open_store(dir)?;
            let (mut rx, job) = backup::spawn(store, key_path(secrets_key_file, data_dir), to);
            while let Some(p) = rx.recv().await {
                on_progress(p);
            }
            job.await.map_err(|e| e.to_string())?
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_keep_their_documented_lines() {
        let invite: Request = serde_json::from_str(r#"{"op":"invite","expires_in_secs":60}"#).unwrap();
        assert_eq!(invite, Request::Invite { expires_in_secs: Some(60) });
        assert_eq!(serde_json::to_string(&Request::Reindex).unwrap(), r#"{"op":"reindex"}"#);
        let backup: Request = serde_json::from_str(r#"{"op":"backup","to":"/b.tar.gz"}"#).unwrap();
        assert_eq!(backup, Request::Backup { to: "/b.tar.gz".into() });
        let full: Request = serde_json::from_str(r#"{"op":"disk-full","full":true}"#).unwrap();
        assert_eq!(full, Request::DiskFull { full: true });
        let failed = serde_json::to_string(&Answer::Failed { error: "x".into() }).unwrap();
        assert_eq!(failed, r#"{"failed":{"error":"x"}}"#);
    }
}
