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
//! `{"op":"export-replica","org":ID,"replica":"UUID|SLUG","to":"/abs/FILE","with_history"?:BOOL}` and
//! `{"op":"import-replica","from":"/abs/FILE","org":ID,"owner":"USER","slug"?,"embedding_model"?}`
//! → progress lines as `backup`'s, then `{"exported":{"exported":{…}}}` or
//! `{"imported":{"imported":{…}}}` (see `crate::service::bundle`);
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
use crate::config::{Config, DataDir};
use crate::embed::catalog::{Embedders, EmbeddingModels};
use crate::search::check::Report;
use crate::search::{self, Search};
use crate::secrets::key_path;
use crate::service::bundle;
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
    /// Write replica `replica` (its uuid or slug) of `org` as a bundle to `to` (absolute), its
    /// history too `with_history`.
    #[serde(rename = "export-replica")]
    ExportReplica {
        org: uuid::Uuid,
        replica: String,
        to: PathBuf,
        #[serde(default)]
        with_history: bool,
    },
    /// Make a replica in `org`, owned by `owner`, of the bundle at `from` (absolute).
    #[serde(rename = "import-replica")]
    ImportReplica {
        from: PathBuf,
        org: uuid::Uuid,
        owner: String,
        slug: Option<String>,
        embedding_model: Option<String>,
    },
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
    /// What a replica's export wrote.
    Exported { exported: bundle::Exported },
    /// What a replica's import made.
    Imported { imported: bundle::Imported },
    /// How far a long operation is (sent before its answer).
    Progress { progress: backup::Progress },
    /// The clock's new reading, in ms since the epoch.
    Clock { now_ms: i64 },
    /// Whether the filesystem now looks full to the store.
    Disk { full: bool },
    /// The request failed; `error` says why.
    Failed { error: String },
}

/// Why an admin command failed; the text is for the operator (and, from a running server, the
/// `error` of its [`Answer::Failed`]).
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The running server answered [`Answer::Failed`] with this text.
    #[error("{0}")]
    Failed(String),
    /// The server answered something else than the request asks for.
    #[error("unexpected answer from the server: {0:?}")]
    Unexpected(Box<Answer>),
    /// The server closed the connection before its answer.
    #[error("the server closed the admin connection without an answer")]
    Closed,
    /// The server's answer is not an [`Answer`] line.
    #[error("bad answer from the server: {0}")]
    BadAnswer(serde_json::Error),
    /// Writing to or reading from the admin socket failed.
    #[error("{0}")]
    Socket(#[from] std::io::Error),
    /// The request or an answer could not be encoded.
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
    /// The operation failed (minting the invitation, the quotas, rebuilding or checking the
    /// index).
    #[error("{0}")]
    Store(#[from] crate::error::Error),
    /// The store of the data directory does not open.
    #[error("{0}")]
    Open(#[from] crate::store::OpenError),
    /// The server's indexer stopped before it rebuilt the index.
    #[error("indexer stopped")]
    IndexerStopped,
    /// `advance-clock` without `serve --test-clock`, or with `ms < 0`.
    #[error("the clock is not adjustable (serve --test-clock) or ms < 0")]
    ClockFixed,
    /// `disk-full` without `serve --test-faults`.
    #[error("disk-full needs serve --test-faults")]
    NoTestFaults,
    /// `backup`, `export-replica` or `import-replica` sent to [`execute`] (they are answered
    /// as a stream).
    #[error("backup, export-replica and import-replica are answered as a stream")]
    Streamed,
    /// A path of an export or import is not absolute.
    #[error("{} is not an absolute path", .0.display())]
    NotAbsolute(PathBuf),
    /// The embedding models installed in the data directory do not load.
    #[error(transparent)]
    Embeddings(#[from] crate::embed::catalog::CatalogError),
    /// The shipped model catalog does not load (a broken build).
    #[error(transparent)]
    Models(#[from] crate::models::ModelsError),
    /// The backup's file `path` has no absolute form.
    #[error("{}: {source}", path.display())]
    Path { path: PathBuf, source: std::io::Error },
    /// The backup failed.
    #[error(transparent)]
    Backup(#[from] backup::BackupError),
    /// The backup's task ended without an answer (it panicked).
    #[error("{0}")]
    BackupTask(#[from] tokio::task::JoinError),
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
        Ok(req @ (Request::ExportReplica { .. } | Request::ImportReplica { .. })) => {
            bundle_streaming(app, req, &mut w).await?
        }
        Ok(req) => execute(&app, req).await.unwrap_or_else(|e| Answer::Failed { error: e.to_string() }),
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
        Ok(Err(e)) => Answer::Failed { error: e.to_string() },
        Err(e) => Answer::Failed { error: format!("the backup panicked: {e}") },
    })
}

async fn execute(app: &App, req: Request) -> Result<Answer, AdminError> {
    Ok(match req {
        Request::Invite { expires_in_secs } => {
            Answer::Invite { code: orgs::create_invite(&app.store, expires_in_secs).await? }
        }
        Request::Reindex => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            app.reindex.send(tx).await.map_err(|_| AdminError::IndexerStopped)?;
            Answer::Reindex { chunks: rx.await.map_err(|_| AdminError::IndexerStopped)?? }
        }
        Request::Check => Answer::Check { report: search::check::check(&app.store, &app.search).await? },
        Request::Orgs => {
            let now = crate::store::now_ms();
            Answer::Orgs { orgs: quotas::list(&app.store, app.config.quota_defaults(), now).await? }
        }
        Request::SetQuota { org, quota } => Answer::Quota { quota: quotas::set(&app.store, org, quota).await? },
        Request::AdvanceClock { ms } => {
            Answer::Clock { now_ms: crate::clock::advance(ms).ok_or(AdminError::ClockFixed)? }
        }
        Request::DiskFull { full } if app.config.test_faults => {
            app.store.space().inject_full(full);
            Answer::Disk { full }
        }
        Request::DiskFull { .. } => return Err(AdminError::NoTestFaults),
        Request::Backup { .. } | Request::ExportReplica { .. } | Request::ImportReplica { .. } => {
            return Err(AdminError::Streamed)
        }
    })
}

/// Runs a replica's export or import (`req`) on the live store, sending its progress as lines.
async fn bundle_streaming(
    app: Arc<App>,
    req: Request,
    w: &mut (impl AsyncWriteExt + Unpin),
) -> std::io::Result<Answer> {
    let (progress, mut rx) = progress_channel();
    let job = tokio::spawn(async move {
        let embedders = app.search.embedders.clone();
        let models = app.models.clone();
        run_bundle(&app.store, embedders, models, &app.config, req, progress).await
    });
    while let Some(progress) = rx.recv().await {
        write_line(w, &Answer::Progress { progress }).await?;
    }
    Ok(match job.await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => Answer::Failed { error: e.to_string() },
        Err(e) => Answer::Failed { error: format!("the bundle's task panicked: {e}") },
    })
}

/// A progress callback sending to the receiver returned with it.
fn progress_channel(
) -> (Box<dyn FnMut(backup::Progress) + Send>, tokio::sync::mpsc::UnboundedReceiver<backup::Progress>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let progress = Box::new(move |p| {
        let _ = tx.send(p);
    });
    (progress, rx)
}

/// A replica's export or import (`req`) on `store`, with the server's (or this process's)
/// embedding models, model catalog and limits.
async fn run_bundle(
    store: &Store,
    embedders: Option<Arc<Embedders>>,
    models: crate::models::Models,
    config: &Config,
    req: Request,
    progress: Box<dyn FnMut(backup::Progress) + Send>,
) -> Result<Answer, AdminError> {
    match req {
        Request::ExportReplica { org, replica, to, with_history } if to.is_absolute() => {
            let r = (bundle::ReplicaRef::parse(&replica), with_history);
            let exported = bundle::export_to_file(store, embedders, org, r, to, progress).await?;
            Ok(Answer::Exported { exported })
        }
        Request::ImportReplica { from, org, owner, slug, embedding_model } if from.is_absolute() => {
            let file = std::fs::File::open(&from).map_err(|source| AdminError::Path { path: from.clone(), source })?;
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            let opts = config.import_options(org, owner, slug, embedding_model);
            let input = Box::new(std::io::BufReader::new(file));
            let imported = bundle::import(store, embedders, models, input, size, opts, progress).await?;
            Ok(Answer::Imported { imported })
        }
        Request::ExportReplica { to: path, .. } | Request::ImportReplica { from: path, .. } => {
            Err(AdminError::NotAbsolute(path))
        }
        other => Err(unexpected(Answer::Failed { error: format!("not a bundle request: {other:?}") })),
    }
}

/// `replicad replicas export|import` (`req`, its paths absolute): by the running server, or
/// here on the store of `dir` with the embedding models installed in it (`replicad models
/// install`) and the default limits when none runs. `on_progress` sees each step's progress.
pub async fn bundle(
    dir: &DataDir,
    req: Request,
    on_progress: &mut (dyn FnMut(backup::Progress) + Send),
) -> Result<Answer, AdminError> {
    if let Some(answer) = request_with_progress(&dir.data_dir, &req, on_progress).await? {
        return Ok(answer);
    }
    let store = open_store(dir)?;
    let config = Config::new(dir.data_dir.clone());
    let embedders = offline_embedders(&config)?;
    let models = crate::models::Models::load(None)?;
    let (progress, mut rx) = progress_channel();
    let job = run_bundle(&store, embedders, models, &config, req, progress);
    tokio::pin!(job);
    loop {
        tokio::select! {
            Some(p) = rx.recv() => on_progress(p),
            answer = &mut job => return answer,
        }
    }
}

/// The embedding models installed in the data directory of `config`, loaded as `serve` loads
/// them without `--embedding-models` (`None` when there are none).
fn offline_embedders(config: &Config) -> Result<Option<Arc<Embedders>>, AdminError> {
    let installed = crate::embed::install::installed(&config.data_dir);
    if installed.is_empty() {
        return Ok(None);
    }
    let mut catalog = EmbeddingModels::from_dirs(installed)?;
    catalog.set_precision(config.embedding_precision);
    let built = catalog.build(&[], config.llm.policy())?;
    Ok(Some(Arc::new(built)))
}

/// Sends `req` to a running server; `Ok(None)` when no server listens on `data_dir`; a
/// [`Answer::Failed`] comes back as `Err`.
pub async fn request(data_dir: &Path, req: &Request) -> Result<Option<Answer>, AdminError> {
    request_with_progress(data_dir, req, &mut |_| {}).await
}

/// [`request`], calling `on_progress` for each [`Answer::Progress`] line before the answer.
pub async fn request_with_progress(
    data_dir: &Path,
    req: &Request,
    on_progress: &mut (dyn FnMut(backup::Progress) + Send),
) -> Result<Option<Answer>, AdminError> {
    let Ok(stream) = UnixStream::connect(socket_path(data_dir)).await else { return Ok(None) };
    let (r, mut w) = stream.into_split();
    let line = serde_json::to_string(req)?;
    w.write_all(format!("{line}\n").as_bytes()).await?;
    let mut lines = BufReader::new(r).lines();
    loop {
        let line = lines.next_line().await?.ok_or(AdminError::Closed)?;
        match serde_json::from_str(&line).map_err(AdminError::BadAnswer)? {
            Answer::Failed { error } => return Err(AdminError::Failed(error)),
            Answer::Progress { progress } => on_progress(progress),
            answer => return Ok(Some(answer)),
        }
    }
}

/// An answer that is not the one asked for.
pub fn unexpected(answer: Answer) -> AdminError {
    AdminError::Unexpected(Box::new(answer))
}

/// The store of `dir` (its `--store` database, else the redb file in its data directory),
/// opened by this process because no server runs on it.
pub fn open_store(dir: &DataDir) -> Result<Store, crate::store::OpenError> {
    let min_free = crate::store::file::DEFAULT_MIN_FREE_BYTES;
    Store::open_on(&dir.data_dir, dir.store.as_deref(), min_free)
}

fn open_index(data_dir: &Path) -> crate::error::Result<Arc<Search>> {
    Search::open(data_dir).map(|(s, _)| Arc::new(s))
}

/// `replicad invites create`: a new invitation code, minted by the running server or in the
/// store of `dir` when none runs.
pub async fn create_invite(dir: &DataDir, expires_in_secs: Option<u64>) -> Result<String, AdminError> {
    match request(&dir.data_dir, &Request::Invite { expires_in_secs }).await? {
        Some(Answer::Invite { code }) => Ok(code),
        Some(other) => Err(unexpected(other)),
        None => Ok(orgs::create_invite(&open_store(dir)?, expires_in_secs).await?),
    }
}

/// `replicad reindex`: rebuilds the search index (by the running server, or here); returns the
/// number of chunks indexed.
pub async fn reindex(dir: &DataDir) -> Result<usize, AdminError> {
    match request(&dir.data_dir, &Request::Reindex).await? {
        Some(Answer::Reindex { chunks }) => Ok(chunks),
        Some(other) => Err(unexpected(other)),
        None => Ok(search::indexer::rebuild_from_store(&open_store(dir)?, &open_index(&dir.data_dir)?).await?),
    }
}

/// `replicad check`: compares the search index with the store (by the running server, or here).
pub async fn check(dir: &DataDir) -> Result<Report, AdminError> {
    match request(&dir.data_dir, &Request::Check).await? {
        Some(Answer::Check { report }) => Ok(report),
        Some(other) => Err(unexpected(other)),
        None => Ok(search::check::check(&open_store(dir)?, &open_index(&dir.data_dir)?).await?),
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
) -> Result<backup::Summary, AdminError> {
    let to = std::path::absolute(to).map_err(|source| AdminError::Path { path: to.to_path_buf(), source })?;
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
            Ok(job.await??)
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
