//! `replicad restore --from FILE --data-dir DIR`: a data directory brought back from an archive
//! made by `replicad backup` (see the parent module for its layout).
//!
//! DIR must be absent or empty (an existing store is never overwritten). The store, the
//! uploaded files and the secrets key are unpacked (only the archive's known entries: no path
//! from the archive is trusted), the store is opened (which migrates an older schema), the search index is rebuilt
//! from the store's chunks and checked against the store. A failed restore removes what it
//! wrote.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Manifest, FILES, FORMAT, MANIFEST, SECRETS_KEY};
use crate::search::{self, Search};
use crate::store::{Store, DB_FILE};

/// What a restore brought back (printed as JSON on stdout by `replicad restore`).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Restored {
    /// The archive's manifest.
    pub manifest: Manifest,
    /// Chunks indexed by the rebuilt search index.
    pub chunks: usize,
    /// Where the secrets key was written, when the archive held one.
    pub secrets_key_file: Option<PathBuf>,
}

/// Why a restore failed; the text names the file or directory at fault, for the operator.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The data directory holds something already.
    #[error("{} is not empty; restore only into an absent or empty directory", .0.display())]
    NotEmpty(PathBuf),
    /// Reading the archive or writing the data directory failed at `path`.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// The archive does not begin with a manifest.
    #[error("{} is not a replicad backup (no {MANIFEST} first)", .0.display())]
    NotBackup(PathBuf),
    /// The manifest is not one.
    #[error("{MANIFEST}: {0}")]
    Manifest(serde_json::Error),
    /// The archive is of a format newer than [`FORMAT`].
    #[error(
        "the backup has format {0}, newer than this replicad ({FORMAT}); restore it with the replicad that wrote it"
    )]
    NewerFormat(u32),
    /// The archive `from` holds an entry no backup has.
    #[error("{}: unexpected entry {name:?}", from.display())]
    UnexpectedEntry { from: PathBuf, name: String },
    /// The archive `from` holds another number of uploaded files than its manifest says.
    #[error("{}: {found} uploaded files, {listed} in the manifest (truncated?)", from.display())]
    FileCount { from: PathBuf, found: u64, listed: u64 },
    /// The archive `from` lacks `entry` (the store, or the key its manifest lists).
    #[error("{}: the archive holds no {entry} (truncated?)", from.display())]
    Missing { from: PathBuf, entry: &'static str },
    /// A key file is already at the key's path, holding another key.
    #[error("{} exists and holds another key; move it away first", .0.display())]
    KeyExists(PathBuf),
    /// The unpacking task ended without an answer.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
    /// The restored store does not open (a newer schema, a damaged file).
    #[error("{0}")]
    Open(#[from] crate::store::OpenError),
    /// Opening the index, or rebuilding or checking it, failed.
    #[error("{0}")]
    Index(#[from] crate::error::Error),
    /// The rebuilt index does not agree with the store.
    #[error("the rebuilt search index disagrees with the store: {0:?}")]
    IndexDisagrees(Box<search::check::Report>),
}

/// A [`RestoreError::Io`] at `path`.
fn at(path: &Path) -> impl Fn(std::io::Error) -> RestoreError + '_ {
    move |source| RestoreError::Io { path: path.to_path_buf(), source }
}

/// Restores the archive `from` into `data_dir`, the key going to `key_file` (default
/// `DATA_DIR/secrets.key`). Errors: DIR not empty, a key file already there with another key,
/// an archive that is not a replicad backup or of a newer format, I/O, a store of a newer
/// schema.
pub async fn restore(from: &Path, data_dir: &Path, key_file: Option<&Path>) -> Result<Restored, RestoreError> {
    refuse_non_empty(data_dir)?;
    let created_dir = !data_dir.exists();
    let key_existed = key_file.is_some_and(Path::exists);
    let key_path = key_file.map_or_else(|| data_dir.join(SECRETS_KEY), Path::to_path_buf);
    let (from_owned, dir, key) = (from.to_path_buf(), data_dir.to_path_buf(), key_path.clone());
    let unpacked = tokio::task::spawn_blocking(move || unpack(&from_owned, &dir, &key))
        .await
        .map_err(RestoreError::from)
        .and_then(|r| r);
    let result = match unpacked {
        Ok((manifest, wrote_key)) => rebuild_index(data_dir).await.map(|chunks| Restored {
            manifest,
            chunks,
            secrets_key_file: wrote_key.then_some(key_path.clone()),
        }),
        Err(e) => Err(e),
    };
    if result.is_err() {
        undo(data_dir, created_dir, &key_path, key_file.is_some() && !key_existed);
    }
    result
}

fn refuse_non_empty(data_dir: &Path) -> Result<(), RestoreError> {
    match std::fs::read_dir(data_dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(RestoreError::NotEmpty(data_dir.to_path_buf())),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(at(data_dir)(e)),
    }
}

/// Removes what a failed restore wrote.
fn undo(data_dir: &Path, created_dir: bool, key_path: &Path, key_outside: bool) {
    if created_dir {
        let _ = std::fs::remove_dir_all(data_dir);
    } else if let Ok(entries) = std::fs::read_dir(data_dir) {
        for entry in entries.flatten() {
            let p = entry.path();
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }
    if key_outside {
        let _ = std::fs::remove_file(key_path);
    }
}

/// Unpacks the manifest, the store and the key; returns the manifest and whether a key was
/// written.
fn unpack(from: &Path, data_dir: &Path, key_path: &Path) -> Result<(Manifest, bool), RestoreError> {
    let file = File::open(from).map_err(at(from))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(BufReader::new(file)));
    let mut entries = archive.entries().map_err(at(from))?;
    let not_backup = || RestoreError::NotBackup(from.to_path_buf());
    let mut first = entries.next().ok_or_else(not_backup)?.map_err(at(from))?;
    if first.path().map_err(at(from))?.to_str() != Some(MANIFEST) {
        return Err(not_backup());
    }
    let mut text = String::new();
    first.by_ref().take(1 << 20).read_to_string(&mut text).map_err(at(from))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(RestoreError::Manifest)?;
    if manifest.format > FORMAT {
        return Err(RestoreError::NewerFormat(manifest.format));
    }
    std::fs::create_dir_all(data_dir).map_err(at(data_dir))?;
    let (mut store, mut key, mut files) = (false, false, 0);
    let files_dir = data_dir.join(FILES);
    for entry in entries {
        let mut entry = entry.map_err(at(from))?;
        let name = entry.path().map_err(at(from))?.to_string_lossy().to_string();
        match name.as_str() {
            DB_FILE if !store => store = write_new(&mut entry, &data_dir.join(DB_FILE))?,
            SECRETS_KEY if !key => {
                let mut bytes = Vec::new();
                entry.take(4096).read_to_end(&mut bytes).map_err(at(from))?;
                key = write_key(bytes, key_path)?;
            }
            other => match uploaded_file(other) {
                Some(file) => {
                    std::fs::create_dir_all(&files_dir).map_err(at(&files_dir))?;
                    write_new(&mut entry, &files_dir.join(file))?;
                    files += 1;
                }
                None => {
                    return Err(RestoreError::UnexpectedEntry { from: from.to_path_buf(), name: other.to_string() })
                }
            },
        }
    }
    if files != manifest.files {
        return Err(RestoreError::FileCount { from: from.to_path_buf(), found: files, listed: manifest.files });
    }
    if files > 0 {
        File::open(&files_dir).and_then(|d| d.sync_all()).map_err(at(&files_dir))?;
    }
    if !store {
        return Err(RestoreError::Missing { from: from.to_path_buf(), entry: DB_FILE });
    }
    if manifest.secrets_key && !key {
        return Err(RestoreError::Missing { from: from.to_path_buf(), entry: SECRETS_KEY });
    }
    File::open(data_dir).and_then(|d| d.sync_all()).map_err(at(data_dir))?;
    Ok((manifest, key))
}

/// The file name of an archive entry `files/NAME` with a name an uploaded file can have (no
/// other path from the archive is trusted).
fn uploaded_file(entry: &str) -> Option<&str> {
    entry.strip_prefix(FILES)?.strip_prefix('/').filter(|name| crate::store::files::valid_name(name))
}

/// Writes `data` to a new file at `path` (mode 0600), fsynced.
fn write_new(data: &mut impl Read, path: &Path) -> Result<bool, RestoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(at(path))?;
    std::io::copy(data, &mut file).map_err(at(path))?;
    file.sync_all().map_err(at(path))?;
    Ok(true)
}

/// The key goes to `path`; an existing file there must hold the same key.
fn write_key(key: Vec<u8>, path: &Path) -> Result<bool, RestoreError> {
    match std::fs::read(path) {
        Ok(existing) if existing == key => Ok(true),
        Ok(_) => Err(RestoreError::KeyExists(path.to_path_buf())),
        Err(_) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(at(dir))?;
            }
            write_new(&mut key.as_slice(), path)
        }
    }
}

/// Opens the restored store (migrating it), rebuilds the search index from it and checks that
/// they agree; returns the chunks indexed.
async fn rebuild_index(data_dir: &Path) -> Result<usize, RestoreError> {
    let store = Store::open(data_dir)?;
    let index = Arc::new(Search::open(data_dir)?.0);
    let chunks = search::indexer::rebuild_from_store(&store, &index).await?;
    let report = search::check::check(&store, &index).await?;
    if !report.ok {
        return Err(RestoreError::IndexDisagrees(Box::new(report)));
    }
    Ok(chunks)
}
