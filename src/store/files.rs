//! Uploaded files, kept as files of their own beside the store's file, in
//! `DATA_DIR/files/`; the store records each one ([`StoredFile`], table `kbid_storedfile`).
//!
//! **On PostgreSQL** (several nodes) the files are in the database instead (`replicad_files`,
//! `store::pg`), so that a file uploaded through one node is read by the node that runs its
//! ingestion job, and a node keeps nothing the others need. The database rather than a
//! directory all nodes share: nothing more to set up, run or back up than the database the
//! tables are in already, and the same durability. A file is written in a transaction of its
//! own on a pooled connection (not the writer's: the reason below holds there too), before its
//! record is committed, as on disk, and marked `kept` after that commit. A sweep cannot know
//! which files other nodes are writing, so there it removes the unrecorded files that were kept
//! (their record was deleted since) or whose writing began more than [`DB_SWEEP_AGE`] ago (left
//! by a crash).
//! The rest of this documentation is about the directory.
//!
//! **Why outside redb.** The store has one writer: a 50 MiB upload put into redb held every
//! other write behind its insert and fsync (history writes waited 80–220 ms at p99 during
//! 20 MiB uploads, `examples/upload_stall.rs`). A file of its own is written and fsynced by the
//! upload's request alone, off the runtime's workers; the writer only commits the small record
//! naming it.
//!
//! **Order of durability.** [`Files::write`] writes `.NAME.part`, fsyncs it, renames it to
//! `NAME` and fsyncs the directory; only then is the record committed. So a recorded file is
//! always whole on disk. A crash after the rename and before the commit leaves a file no record
//! names: the upload was never acknowledged, and the file is removed when the store is next
//! opened ([`Files::sweep`]).
//!
//! **Names.** `<entry id>-<16 random hex digits>`: never reused, so two uploads racing for the
//! same URL write two files, the one whose record is committed stays and the other is removed
//! ([`Written`] removes its file unless [`Written::keep`] was called after the commit).
//!
//! **Removal.** Deleting an entry removes its record in the deleting write transaction; the
//! file goes in the [`Files::sweep`] that follows the commit (and, after a crash in between,
//! in the sweep at the next open). A sweep removes the files that are neither named by a record
//! of a snapshot taken after the directory was listed nor being written: a file listed and not
//! in flight was either recorded before that snapshot or abandoned, and a name once abandoned
//! is never recorded. While a backup holds a [`Pin`], sweeps remove nothing (the backup reads
//! the files its snapshot names).
//!
//! **Disk full.** A write first asks [`Space::check_room`] for the file's size plus the
//! reserve, and ENOSPC met while writing answers 507; the partial file is removed. With
//! `serve --test-faults`, an injected full disk shows 0 bytes free to that check, so every
//! file write (never empty) is refused.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::file::Space;
use super::pg::PgPool;
use super::records::StoredFile;
use crate::error::{Error, Result};
use crate::store::kv::ReadTransaction;

/// Directory of the uploaded files inside the data directory.
pub const DIR: &str = "files";

/// How old an unrecorded file in the database must be before a sweep removes it (an upload
/// records its file within seconds of writing it; another node may be writing it now).
pub const DB_SWEEP_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// The uploaded files and what is being written to them.
pub struct Files {
    place: Place,
    space: Arc<Space>,
    /// Names of the files written and not yet recorded or given up ([`Written`]).
    in_flight: Mutex<HashSet<String>>,
    /// Backups reading files ([`Pin`]); held by a sweep for its whole run.
    pins: Mutex<usize>,
}

/// Where the files are kept.
enum Place {
    /// `DATA_DIR/files/`, one file each.
    Dir(PathBuf),
    /// The shared database (`replicad_files`).
    Db(Arc<PgPool>),
}

/// A file written and fsynced, not yet known to be recorded: removed when dropped unless
/// [`Written::keep`] was called (after the record's commit).
pub struct Written {
    files: Arc<Files>,
    /// The record that names the file.
    pub stored: StoredFile,
    kept: bool,
}

impl Written {
    /// The record naming the file was committed: the file stays. In the database the file is
    /// marked so (not waited for: until then only a sweep after [`DB_SWEEP_AGE`] sees it).
    pub fn keep(mut self) {
        self.kept = true;
        if let Place::Db(pool) = &self.files.place {
            let (pool, name) = (pool.clone(), self.stored.name.clone());
            super::pg::off_runtime(move || {
                if let Err(e) = pool.keep_file(&name) {
                    tracing::warn!(file = name, error = %e, "marking an uploaded file as recorded failed");
                }
            });
        }
    }
}

impl Drop for Written {
    fn drop(&mut self) {
        if !self.kept {
            self.files.remove(&self.stored.name);
        }
        self.files.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.stored.name);
    }
}

/// Held by a backup while it reads the files of its snapshot: sweeps remove nothing meanwhile.
pub struct Pin(Arc<Files>);

impl Drop for Pin {
    fn drop(&mut self) {
        *self.0.pins.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
    }
}

/// What [`verify`] found.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Verified {
    /// Files the store records.
    pub stored_files: u64,
    /// Entries whose recorded file is missing, or differs in size or SHA-256.
    pub damaged_files: Vec<u64>,
    /// Files in the directory that no record names (an upload in flight, or left by a crash
    /// or a deletion and removed at the next sweep).
    pub unreferenced_files: u64,
}

impl Files {
    /// The files directory of `data_dir`, created when missing (and made durable).
    pub fn open(data_dir: &Path, space: Arc<Space>) -> std::io::Result<Arc<Files>> {
        let dir = data_dir.join(DIR);
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir)?;
            std::fs::File::open(data_dir)?.sync_all()?;
        }
        Ok(Files::new(Place::Dir(dir), space))
    }

    /// The files kept in the database of `pool` (several nodes share them).
    pub fn in_database(pool: Arc<PgPool>, space: Arc<Space>) -> Arc<Files> {
        Files::new(Place::Db(pool), space)
    }

    fn new(place: Place, space: Arc<Space>) -> Arc<Files> {
        Arc::new(Files { place, space, in_flight: Mutex::default(), pins: Mutex::new(0) })
    }

    /// The files directory; an error when the files are in the database.
    fn dir(&self) -> Result<&Path> {
        match &self.place {
            Place::Dir(dir) => Ok(dir),
            Place::Db(_) => Err(Error::internal("the uploaded files are in the database, not in a directory")),
        }
    }

    /// Where the file `name` is in the directory (only called where the files are there).
    fn path(&self, name: &str) -> PathBuf {
        self.dir().map_or_else(|_| PathBuf::from(name), |d| d.join(name))
    }

    /// Removes file `name`, a file not recorded (errors are left to a later sweep). The
    /// database is not waited for on a runtime's thread.
    fn remove(&self, name: &str) {
        match &self.place {
            Place::Dir(dir) => drop(std::fs::remove_file(dir.join(name))),
            Place::Db(pool) => {
                let (pool, names) = (pool.clone(), vec![name.to_string()]);
                super::pg::off_runtime(move || drop(pool.remove_files(&names)));
            }
        }
    }

    /// Writes `bytes` as a new file of `entry`, durable when this returns (see the module
    /// documentation); the caller records [`Written::stored`] and then calls [`Written::keep`].
    /// Blocking. Errors: 507 when the disk (the directory's, or the database's) is or gets full,
    /// 500 for other I/O or database errors.
    pub fn write(self: &Arc<Files>, entry: u64, bytes: &[u8]) -> Result<Written> {
        if let Place::Dir(_) = self.place {
            self.space.check_room(bytes.len() as u64)?;
        }
        let name = format!("{entry}-{:016x}", random_u64()?);
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone());
        let stored = StoredFile { name, size: bytes.len() as u64, sha256: sha2::Sha256::digest(bytes).into() };
        let written = Written { files: self.clone(), stored, kept: false };
        match &self.place {
            Place::Dir(dir) => {
                let part = dir.join(format!(".{}.part", written.stored.name));
                let result = self.write_durably(&part, &self.path(&written.stored.name), bytes);
                if result.is_err() {
                    let _ = std::fs::remove_file(&part);
                }
                result.map(|()| written)
            }
            Place::Db(pool) => pool.put_file(&written.stored.name, bytes).map(|()| written),
        }
    }

    fn write_durably(&self, part: &Path, to: &Path, bytes: &[u8]) -> Result<()> {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(part)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(part, to)?;
        std::fs::File::open(self.dir()?)?.sync_all()?;
        Ok(())
    }

    /// The recorded file `stored`, opened for reading; 500 when it is missing or not the size
    /// recorded (what `replicad check` reports as damaged), or when the files are in the
    /// database.
    pub fn open_recorded(&self, stored: &StoredFile) -> Result<std::fs::File> {
        let path = self.dir()?.join(&stored.name);
        let at = |e: std::io::Error| Error::internal(format!("{}: {e}", path.display()));
        let file = std::fs::File::open(&path).map_err(at)?;
        let size = file.metadata().map_err(at)?.len();
        if size != stored.size {
            return Err(Error::internal(format!("{}: {size} bytes, {} recorded", path.display(), stored.size)));
        }
        Ok(file)
    }

    /// The bytes of the recorded file `stored`; 500 when it is missing or not the size recorded.
    /// Blocking.
    pub fn read(&self, stored: &StoredFile) -> Result<Vec<u8>> {
        let Place::Db(pool) = &self.place else {
            let mut bytes = Vec::with_capacity(stored.size as usize);
            std::io::Read::read_to_end(&mut self.open_recorded(stored)?, &mut bytes)?;
            return Ok(bytes);
        };
        let bytes =
            pool.get_file(&stored.name)?.ok_or_else(|| Error::internal(format!("file {} is missing", stored.name)))?;
        if bytes.len() as u64 != stored.size {
            let found = bytes.len();
            return Err(Error::internal(format!("file {}: {found} bytes, {} recorded", stored.name, stored.size)));
        }
        Ok(bytes)
    }

    /// Keeps sweeps from removing anything until the pin is dropped (a backup's files).
    /// Waits for a sweep in progress.
    pub fn pin(self: &Arc<Files>) -> Pin {
        *self.pins.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Pin(self.clone())
    }

    /// Removes the files that no record names and that are not being written (see the module
    /// documentation); `recorded` reads the names recorded in a snapshot taken when it is
    /// called. Does nothing while a backup holds a [`Pin`]. Blocking. Returns how many files
    /// were removed.
    pub fn sweep(&self, recorded: impl FnOnce() -> Result<HashSet<String>>) -> Result<usize> {
        let pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        if *pins > 0 {
            return Ok(0);
        }
        let listed = match &self.place {
            Place::Dir(_) => self.list()?,
            Place::Db(pool) => pool.file_names(DB_SWEEP_AGE)?,
        };
        let in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let recorded = recorded()?;
        let unnamed = |file: &String| {
            let name = file.strip_prefix('.').and_then(|f| f.strip_suffix(".part")).unwrap_or(file);
            !in_flight.contains(name) && !recorded.contains(file)
        };
        let gone: Vec<String> = listed.into_iter().filter(unnamed).collect();
        let removed = match &self.place {
            Place::Dir(dir) => gone.iter().filter(|f| std::fs::remove_file(dir.join(f)).is_ok()).count(),
            Place::Db(pool) => pool.remove_files(&gone).map(|()| gone.len())?,
        };
        drop(pins);
        Ok(removed)
    }

    /// The names of the files (in the database: every file, however recent).
    fn list(&self) -> Result<Vec<String>> {
        let dir = match &self.place {
            Place::Dir(dir) => dir,
            Place::Db(pool) => return pool.file_names(std::time::Duration::ZERO),
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.extend(entry.file_name().to_str().map(str::to_string));
            }
        }
        Ok(names)
    }

    /// Compares the recorded files with the directory: every recorded file is there, of the
    /// recorded size and SHA-256. Blocking (reads every file).
    pub fn verify(&self, recorded: &[(u64, StoredFile)]) -> Result<Verified> {
        let names: HashSet<&str> = recorded.iter().map(|(_, s)| s.name.as_str()).collect();
        let mut report = Verified { stored_files: recorded.len() as u64, ..Verified::default() };
        for (entry, stored) in recorded {
            let whole = self.read(stored).is_ok_and(|b| sha2::Sha256::digest(&b)[..] == stored.sha256);
            if !whole {
                report.damaged_files.push(*entry);
            }
        }
        report.unreferenced_files = self.list()?.iter().filter(|n| !names.contains(n.as_str())).count() as u64;
        Ok(report)
    }
}

/// The names of every recorded file in `txn`'s view of the store.
pub fn recorded_names(txn: &ReadTransaction) -> Result<HashSet<String>> {
    Ok(super::kb::stored_files(txn)?.into_iter().map(|(_, s)| s.name).collect())
}

/// Whether `name` can be a file of this directory (what restore accepts from an archive).
pub fn valid_name(name: &str) -> bool {
    let (entry, nonce) = name.split_once('-').unwrap_or(("", ""));
    !entry.is_empty()
        && entry.bytes().all(|b| b.is_ascii_digit())
        && nonce.len() == 16
        && nonce.bytes().all(|b| b.is_ascii_hexdigit())
}

fn random_u64() -> Result<u64> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(Error::internal)?;
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Arc<Files> {
        Files::open(dir, Arc::new(Space::new(dir, 0))).unwrap()
    }

    fn names(files: &Files) -> HashSet<String> {
        files.list().unwrap().into_iter().collect()
    }

    #[test]
    fn a_written_file_stays_only_when_kept() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let kept = files.write(7, b"kept bytes").unwrap();
        let stored = kept.stored.clone();
        assert!(stored.name.starts_with("7-") && valid_name(&stored.name), "{}", stored.name);
        assert_eq!(stored.size, 10);
        kept.keep();
        let dropped = files.write(7, b"dropped").unwrap();
        let dropped_name = dropped.stored.name.clone();
        assert_ne!(dropped_name, stored.name, "names are never reused");
        drop(dropped);
        assert_eq!(names(&files), HashSet::from([stored.name.clone()]));
        assert_eq!(files.read(&stored).unwrap(), b"kept bytes");
        assert!(files.in_flight.lock().unwrap().is_empty());
    }

    #[test]
    fn a_sweep_removes_what_no_record_names_but_not_a_file_in_flight_or_while_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let recorded = files.write(1, b"recorded").unwrap();
        let orphan = files.write(2, b"orphan").unwrap();
        let in_flight = files.write(3, b"in flight").unwrap();
        let (recorded_name, orphan_name) = (recorded.stored.name.clone(), orphan.stored.name.clone());
        recorded.keep();
        orphan.keep(); // as after a crash between the rename and the commit
        std::fs::write(files.path(".9-0000000000000000.part"), b"partial").unwrap();
        let only_recorded = || Ok(HashSet::from([recorded_name.clone()]));

        let pin = files.pin();
        assert_eq!(files.sweep(only_recorded).unwrap(), 0, "nothing is removed while a backup reads");
        drop(pin);
        assert_eq!(files.sweep(only_recorded).unwrap(), 2, "the orphan and the partial file");
        let left = names(&files);
        assert!(left.contains(&recorded_name) && left.contains(&in_flight.stored.name), "{left:?}");
        assert!(!left.contains(&orphan_name));
        drop(in_flight);
        assert_eq!(names(&files), HashSet::from([recorded_name]));
    }

    #[test]
    fn verify_finds_a_missing_or_changed_file_and_counts_unreferenced_ones() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let mut recorded = Vec::new();
        for (entry, bytes) in [(1, b"same size"), (2, b"whole one"), (3, b"to remove")] {
            let w = files.write(entry, bytes).unwrap();
            recorded.push((entry, w.stored.clone()));
            w.keep();
        }
        std::fs::write(files.path(&recorded[0].1.name), b"same siZe").unwrap();
        std::fs::remove_file(files.path(&recorded[2].1.name)).unwrap();
        files.write(4, b"unrecorded").unwrap().keep();
        let report = files.verify(&recorded).unwrap();
        assert_eq!(report, Verified { stored_files: 3, damaged_files: vec![1, 3], unreferenced_files: 1 });
    }

    #[test]
    fn an_injected_full_disk_refuses_the_file_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        files.space.inject_full(true);
        let e = files.write(5, b"bytes").err().unwrap();
        assert_eq!(e.code, crate::error::Code::InsufficientStorage, "{e}");
        assert!(names(&files).is_empty());
        assert!(files.in_flight.lock().unwrap().is_empty());
    }

    #[test]
    fn only_names_of_uploaded_files_are_valid() {
        assert!(valid_name("12-00ff00ff00ff00ff"));
        for bad in [
            "",
            "12",
            "-00ff00ff00ff00ff",
            "12-00ff",
            "../x-00ff00ff00ff00ff",
            "12-00ff00ff00ff00fg",
            ".1-0000000000000000.part",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
