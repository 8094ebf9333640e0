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

/// Restores the archive `from` into `data_dir`, the key going to `key_file` (default
/// `DATA_DIR/secrets.key`). Errors (as text for the operator): DIR not empty, a key file
/// already there with another key, an archive that is not a replicad backup or of a newer
/// format, I/O, a store of a newer schema.
pub async fn restore(from: &Path, data_dir: &Path, key_file: Option<&Path>) -> Result<Restored, String> {
    refuse_non_empty(data_dir)?;
    let created_dir = !data_dir.exists();
    let key_existed = key_file.is_some_and(Path::exists);
    let key_path = key_file.map_or_else(|| data_dir.join(SECRETS_KEY), Path::to_path_buf);
    let (from_owned, dir, key) = (from.to_path_buf(), data_dir.to_path_buf(), key_path.clone());
    let unpacked = tokio::task::spawn_blocking(move || unpack(&from_owned, &dir, &key))
        .await
        .map_err(|e| e.to_string())
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

fn refuse_non_empty(data_dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(data_dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(format!("{} is not empty; restore only into an absent or empty directory", data_dir.display())),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", data_dir.display())),
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
fn unpack(from: &Path, data_dir: &Path, key_path: &Path) -> Result<(Manifest, bool), String> {
    let at = |e: std::io::Error| format!("{}: {e}", from.display());
    let file = File::open(from).map_err(at)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(BufReader::new(file)));
    let mut entries = archive.entries().map_err(at)?;
    let not_backup = || format!("{} is not a replicad backup (no {MANIFEST} first)", from.display());
    let mut first = entries.next().ok_or_else(not_backup)?.map_err(at)?;
    if first.path().map_err(at)?.to_str() != Some(MANIFEST) {
        return Err(not_backup());
    }
    let mut text = String::new();
    first.by_ref().take(1 << 20).read_to_string(&mut text).map_err(at)?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| format!("{MANIFEST}: {e}"))?;
    if manifest.format > FORMAT {
        return Err(format!("the backup has format {}, newer than this replicad ({FORMAT})", manifest.format)
            + "; restore it with the replicad that wrote it");
    }
    std::fs::create_dir_all(data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let (mut store, mut key, mut files) = (false, false, 0);
    let files_dir = data_dir.join(FILES);
    for entry in entries {
        let mut entry = entry.map_err(at)?;
        let name = entry.path().map_err(at)?.to_string_lossy().to_string();
        match name.as_str() {
            DB_FILE if !store => store = write_new(&mut entry, &data_dir.join(DB_FILE))?,
            SECRETS_KEY if !key => key = write_key(&mut entry, key_path)?,
            other => match uploaded_file(other) {
                Some(file) => {
                    std::fs::create_dir_all(&files_dir).map_err(|e| format!("{}: {e}", files_dir.display()))?;
                    write_new(&mut entry, &files_dir.join(file))?;
                    files += 1;
                }
                None => return Err(format!("{}: unexpected entry {other:?}", from.display())),
            },
        }
    }
    if files != manifest.files {
        return Err(format!(
            "{}: {files} uploaded files, {} in the manifest (truncated?)",
            from.display(),
            manifest.files
        ));
    }
    if files > 0 {
        File::open(&files_dir).and_then(|d| d.sync_all()).map_err(|e| format!("{}: {e}", files_dir.display()))?;
    }
    if !store {
        return Err(format!("{}: the archive holds no {DB_FILE} (truncated?)", from.display()));
    }
    if manifest.secrets_key && !key {
        return Err(format!("{}: the archive holds no {SECRETS_KEY} (truncated?)", from.display()));
    }
    File::open(data_dir).and_then(|d| d.sync_all()).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    Ok((manifest, key))
}

/// The file name of an archive entry `files/NAME` with a name an uploaded file can have (no
/// other path from the archive is trusted).
fn uploaded_file(entry: &str) -> Option<&str> {
    entry.strip_prefix(FILES)?.strip_prefix('/').filter(|name| crate::store::files::valid_name(name))
}

/// Writes `data` to a new file at `path` (mode 0600), fsynced.
fn write_new(data: &mut impl Read, path: &Path) -> Result<bool, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(at)?;
    std::io::copy(data, &mut file).map_err(at)?;
    file.sync_all().map_err(at)?;
    Ok(true)
}

/// The key goes to `path`; an existing file there must hold the same key.
fn write_key(data: &mut impl Read, path: &Path) -> Result<bool, String> {
    let mut key = Vec::new();
    data.take(4096).read_to_end(&mut key).map_err(|e| e.to_string())?;
    match std::fs::read(path) {
        Ok(existing) if existing == key => Ok(true),
        Ok(_) => Err(format!("{} exists and holds another key; move it away first", path.display())),
        Err(_) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            write_new(&mut key.as_slice(), path)
        }
    }
}

/// Opens the restored store (migrating it), rebuilds the search index from it and checks that
/// they agree; returns the chunks indexed.
async fn rebuild_index(data_dir: &Path) -> Result<usize, String> {
    let text = |e: crate::error::Error| e.to_string();
    let store = Store::open(data_dir).map_err(|e| e.to_string())?;
    let index = Arc::new(Search::open(data_dir).map_err(text)?.0);
    let chunks = search::indexer::rebuild_from_store(&store, &index).await.map_err(text)?;
    let report = search::check::check(&store, &index).await.map_err(text)?;
    if !report.ok {
        return Err(format!("the rebuilt search index disagrees with the store: {report:?}"));
    }
    Ok(chunks)
}
