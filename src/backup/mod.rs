//! Online backup: `replicad backup --to FILE` writes one archive holding
//! everything a data directory needs to be brought back by `replicad restore` ([`restore`]).
//!
//! The archive is a gzip-compressed tar with, in this order:
//! - `replicad-backup.json`: the [`Manifest`] (format, versions, record count, time);
//! - `replicad.redb`: the store as of one commit, copied out of one read transaction while the
//!   server keeps committing (see [`crate::store::copy`] for why a copy and not the file);
//! - `files/NAME`, one per uploaded file the store's copy records (`crate::store::files`). A
//!   file is never changed once recorded, and the backup holds a pin from before its snapshot
//!   until the files are read, so the files of the deletions committed meanwhile stay until
//!   then: the files in the archive are exactly those of the snapshot;
//! - `secrets.key`: the key sealing the bots' tokens (`crate::secrets`), when there is one;
//!   without it a restored server could not open the stored tokens.
//!
//! The search index is not in the archive: restore rebuilds it from the chunks the store holds
//! (no extraction, no chunking again; seconds for ten thousand chunks). A copy of the index
//! files would have to be taken at the very commit of the store's snapshot to agree with it,
//! and the indexer commits on its own schedule; the rebuild agrees by construction (restore
//! runs `replicad check` to show it) and keeps the archive smaller.
//!
//! While a server runs on the data directory, `backup` asks it through the admin socket
//! (`crate::admin`), so the snapshot comes from the live store; otherwise it opens the store.

pub mod restore;

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::files::Files;
use crate::store::records::StoredFile;
use crate::store::{copy, Store, DB_FILE};

/// Name of the manifest, the archive's first entry.
pub const MANIFEST: &str = "replicad-backup.json";
/// Name of the secrets key in the archive (and in a restored data directory).
pub const SECRETS_KEY: &str = crate::secrets::DEFAULT_KEY_FILE;
/// The archive format this build writes (it reads this one and older ones). Format 1 had no
/// `files/` entries: its store held the uploaded files (schema 6), which opening the restored
/// store moves out.
pub const FORMAT: u32 = 2;

/// Directory of the uploaded files in the archive (as in a data directory).
pub const FILES: &str = crate::store::files::DIR;

/// The first entry of an archive.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Archive format ([`FORMAT`]); restore refuses a format it does not know.
    pub format: u32,
    /// Version of the replicad that wrote the archive.
    pub replicad: String,
    /// Schema version of the store in the archive (restore migrates an older one).
    pub schema_version: u32,
    /// Records of the store, all tables together.
    pub records: u64,
    /// Whether the archive holds `secrets.key`.
    pub secrets_key: bool,
    /// Uploaded files in the archive (`files/`); 0 in format 1.
    #[serde(default)]
    pub files: u64,
    /// When the snapshot was taken, ms since the Unix epoch.
    pub created_at_ms: i64,
}

/// What a backup wrote (printed as JSON on stdout by `replicad backup`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The archive written (absolute).
    pub file: PathBuf,
    /// Size of the archive, bytes.
    pub bytes: u64,
    /// Size of the store's copy before compression, bytes.
    pub store_bytes: u64,
    /// Records of the store, all tables together.
    pub records: u64,
    /// Uploaded files in the archive, and their bytes before compression.
    pub files: u64,
    pub file_bytes: u64,
    /// Schema version of the store.
    pub schema_version: u32,
    /// Whether the archive holds the secrets key.
    pub secrets_key: bool,
    /// Wall time of the whole backup, ms.
    pub millis: u64,
}

/// How far a backup is: `done` of `total` records copied (step `copy`), then bytes of the
/// store's copy and the uploaded files compressed into the archive (step `archive`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub step: Step,
    pub done: u64,
    pub total: u64,
}

/// The steps of a backup ([`Progress`]).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// Copying the store's records out of the snapshot.
    Copy,
    /// Compressing the copy and the files into the archive.
    Archive,
    /// Reading an archive (bytes of it read: a replica bundle's import, `service::bundle`).
    Unpack,
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let percent = (self.done * 100).checked_div(self.total).unwrap_or(100);
        match self.step {
            Step::Copy => write!(f, "copying records: {} of {} ({percent} %)", self.done, self.total),
            Step::Archive => {
                let mib = |b: u64| b as f64 / 1_048_576.0;
                write!(f, "compressing: {:.1} of {:.1} MiB ({percent} %)", mib(self.done), mib(self.total))
            }
            Step::Unpack => {
                let mib = |b: u64| b as f64 / 1_048_576.0;
                write!(f, "reading: {:.1} of {:.1} MiB ({percent} %)", mib(self.done), mib(self.total))
            }
        }
    }
}

/// Writes the archive of `store` as of now to `to` (replaced atomically when it exists), with
/// the secrets key read from `key_file` when that file exists. Blocking: call it on the
/// blocking pool. `progress` is called after every batch of records and of compressed bytes.
/// Errors: I/O (the target's directory, disk space) and store errors; a failed backup leaves no
/// file at `to` and no temporary files behind.
pub fn write(store: &Store, key_file: &Path, to: &Path, progress: &mut dyn FnMut(Progress)) -> Result<Summary> {
    let started = Instant::now();
    let to = std::path::absolute(to)?;
    let name = to.file_name().ok_or_else(|| Error::internal(format!("{} is not a file name", to.display())))?;
    let parent = to.parent().unwrap_or(Path::new("/"));
    let work = WorkDir::create(parent.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id())))?;
    let pin = store.files.pin();
    let snapshot = store.snapshot()?;
    let created_at_ms = crate::store::now_ms();
    let copy_path = work.0.join(DB_FILE);
    let mut reported = 0;
    let copied = copy::copy_store(&snapshot, &copy_path, &mut |done, total| {
        // One line per batch of records at most (tables smaller than a batch add none).
        if done - reported >= copy::BATCH || (done == total && reported < total) {
            reported = done;
            progress(Progress { step: Step::Copy, done, total });
        }
    })?;
    let snapshot = crate::store::kv::ReadTransaction::Redb(snapshot);
    let files = crate::store::kb::stored_files(&snapshot)?;
    drop(snapshot);
    let key = read_key(key_file)?;
    let manifest = Manifest {
        format: FORMAT,
        replicad: env!("CARGO_PKG_VERSION").to_string(),
        schema_version: copied.schema_version,
        records: copied.records,
        secrets_key: key.is_some(),
        files: files.len() as u64,
        created_at_ms,
    };
    let partial = work.0.join("archive");
    let store_bytes = std::fs::metadata(&copy_path)?.len();
    let parts = Parts { store_copy: &copy_path, files: &files, key: key.as_deref() };
    write_archive(&partial, &manifest, &parts, &store.files, progress)?;
    drop(pin);
    if let Err(e) = store.sweep_files_blocking() {
        tracing::warn!(error = %e, "removing the files of entries deleted during the backup failed");
    }
    std::fs::rename(&partial, &to)?;
    File::open(parent)?.sync_all()?;
    let bytes = std::fs::metadata(&to)?.len();
    Ok(Summary {
        file: to,
        bytes,
        store_bytes,
        records: copied.records,
        files: files.len() as u64,
        file_bytes: files.iter().map(|(_, f)| f.size).sum(),
        schema_version: copied.schema_version,
        secrets_key: key.is_some(),
        millis: started.elapsed().as_millis() as u64,
    })
}

/// A failed backup: the error [`write`] met, shown to the operator as its cause (the I/O or
/// store failure, without the API's error wrapping).
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.cause_text().unwrap_or_else(|| .0.message.clone()))]
pub struct BackupError(#[source] pub Error);

/// [`write`] on the blocking pool: its progress comes on the receiver (closed when the backup
/// ends), its outcome from the handle.
pub fn spawn(
    store: Store,
    key_file: PathBuf,
    to: PathBuf,
) -> (tokio::sync::mpsc::UnboundedReceiver<Progress>, tokio::task::JoinHandle<Result<Summary, BackupError>>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let job = tokio::task::spawn_blocking(move || {
        write(&store, &key_file, &to, &mut |p| {
            let _ = tx.send(p);
        })
        .map_err(BackupError)
    });
    (rx, job)
}

fn read_key(key_file: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(key_file) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(path = %key_file.display(), "no secrets key: the backup holds none");
            Ok(None)
        }
        Err(e) => Err(Error::internal(format!("{}: {e}", key_file.display()))),
    }
}

/// What goes into an archive after its manifest.
struct Parts<'a> {
    store_copy: &'a Path,
    /// The uploaded files the copy records.
    files: &'a [(u64, StoredFile)],
    key: Option<&'a [u8]>,
}

/// The archive at `path`: manifest, store copy, uploaded files (read from `dir`), key; fsynced.
fn write_archive(
    path: &Path,
    manifest: &Manifest,
    parts: &Parts<'_>,
    dir: &Files,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    // The archive holds the secrets key: only its owner may read it.
    let file = std::os::unix::fs::OpenOptionsExt::mode(std::fs::OpenOptions::new().write(true).create_new(true), 0o600)
        .open(path)?;
    let gz = flate2::write::GzEncoder::new(BufWriter::new(file), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let json = serde_json::to_vec_pretty(manifest).map_err(Error::internal)?;
    append(&mut tar, MANIFEST, 0o644, json.len() as u64, json.as_slice())?;
    let store_bytes = std::fs::metadata(parts.store_copy)?.len();
    let total = store_bytes + parts.files.iter().map(|(_, f)| f.size).sum::<u64>();
    let mut counted = Counted::new(File::open(parts.store_copy)?, Step::Archive, total, progress);
    append(&mut tar, DB_FILE, 0o600, store_bytes, &mut counted)?;
    for (_, file) in parts.files {
        counted.inner = dir.open_recorded(file)?;
        append(&mut tar, &format!("{FILES}/{}", file.name), 0o600, file.size, (&mut counted).take(file.size))?;
    }
    counted.finish();
    if let Some(key) = parts.key {
        append(&mut tar, SECRETS_KEY, 0o600, key.len() as u64, key)?;
    }
    let file = tar.into_inner()?.finish()?.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(())
}

fn append<W: Write>(tar: &mut tar::Builder<W>, name: &str, mode: u32, size: u64, data: impl Read) -> Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime((crate::store::now_ms() / 1000).max(0) as u64);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, name, data)?;
    Ok(())
}

/// A reader reporting the bytes read through it as `step`'s progress every 8 MiB and at the
/// end of its input (`total`: the bytes expected; a larger count raises it).
pub(crate) struct Counted<'a, R> {
    pub(crate) inner: R,
    step: Step,
    done: u64,
    total: u64,
    reported: u64,
    progress: &'a mut dyn FnMut(Progress),
}

impl<'a, R> Counted<'a, R> {
    /// `inner` counted as `step`, `total` bytes expected, reported to `progress`.
    pub(crate) fn new(inner: R, step: Step, total: u64, progress: &'a mut dyn FnMut(Progress)) -> Self {
        Counted { inner, step, done: 0, total, reported: 0, progress }
    }

    /// Reports the last progress line when it was not yet.
    pub(crate) fn finish(&mut self) {
        if self.reported < self.done {
            self.reported = self.done;
            (self.progress)(Progress { step: self.step, done: self.done, total: self.total.max(self.done) });
        }
    }
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        if self.done - self.reported >= 8 << 20 || (n == 0 && !buf.is_empty()) {
            self.finish();
        }
        Ok(n)
    }
}

/// A scratch directory removed with everything in it when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create(path: PathBuf) -> Result<WorkDir> {
        std::fs::create_dir(&path).map_err(|e| Error::internal(format!("{}: {e}", path.display())))?;
        Ok(WorkDir(path))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
