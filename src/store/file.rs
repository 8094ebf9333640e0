//! The store's file: redb's own file backend ([`redb::backends::FileBackend`]) behind a thin
//! layer that knows the free space of the data directory's filesystem, so that the writer can
//! answer a full disk before redb meets it.
//!
//! **Why the writer checks free space before it writes.** redb latches an I/O error: once a
//! write, `set_len` or fsync of its file fails (ENOSPC included), every later operation of that
//! [`Database`] handle — reads of pages not in its cache too — answers `PreviousIo` until the
//! handle is closed and the file reopened (redb 4.5, `CheckedBackend` in `cached_file.rs`). So a
//! full disk met mid-commit costs a reopen (with redb's repair walk of the file) during which
//! reads wait. The writer therefore asks [`Space::check`] before each group commit and answers
//! `507` without touching the file while fewer than `--min-free-space` bytes are free (the
//! default covers the largest single write, an upload, with room to spare); nothing is latched,
//! reads are unaffected, and the first batch after space returns commits. When the disk fills
//! anyway (another process took the space between the check and the commit, a write larger than
//! the reserve, or `--min-free-space 0`), the write that needs new space fails, the writes of its
//! batch answer `507`, and the writer reopens the file (see `handle`). Writes that fit in the
//! file's own free pages still succeed then, as on any full filesystem.
//!
//! **Fault injection (tests only).** With `serve --test-faults`, the admin socket's
//! `{"op":"disk-full","full":true}` makes the filesystem look full to the store: [`Space::check`]
//! sees 0 bytes free (so with a reserve every write is refused up front), and the store's file
//! fails with ENOSPC ([`std::io::ErrorKind::StorageFull`]) every growth and every write past the
//! highest byte written so far — the blocks a full filesystem has no room for — while writes over
//! bytes already written (redb's header, reused pages) succeed, as they do on a full disk. With
//! `--min-free-space 0` this is the path where the disk fills after the check.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use redb::backends::FileBackend;
use redb::{BackendError, Database, DatabaseError, StorageBackend};

use crate::error::{Error, Result};

/// Default of `--min-free-space`: more than the largest single write (a 50 MiB upload).
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;

/// The free space the writer keeps on the data directory's filesystem, and the test switch
/// that makes the filesystem look full.
pub struct Space {
    dir: PathBuf,
    min_free: u64,
    injected_full: AtomicBool,
}

impl Space {
    /// Watches the filesystem holding `dir`; writes are refused below `min_free` bytes free.
    pub fn new(dir: &Path, min_free: u64) -> Space {
        Space { dir: dir.to_path_buf(), min_free, injected_full: AtomicBool::new(false) }
    }

    /// `Ok` when at least the reserve is free; else 507 `INSUFFICIENT_STORAGE` (the bytes
    /// free and the reserve go to the log). A failing `statvfs` counts as room: the write
    /// itself will tell.
    pub fn check(&self) -> Result<()> {
        self.check_room(0)
    }

    /// [`Space::check`] for a write of `bytes` outside the store's file (an uploaded file,
    /// `store::files`): at least `bytes` plus the reserve must be free.
    pub fn check_room(&self, bytes: u64) -> Result<()> {
        let free = if self.injected_full() { Ok(0) } else { fs4::available_space(&self.dir) };
        match free {
            Ok(free) if free < self.min_free.saturating_add(bytes) => Err(Error::insufficient_storage()
                .with_cause_text(format!(
                    "{free} bytes free on the data directory's filesystem, fewer than {bytes} to write \
                 and --min-free-space {}",
                    self.min_free
                ))),
            _ => Ok(()),
        }
    }

    /// Whether the filesystem is made to look full (`serve --test-faults`).
    fn injected_full(&self) -> bool {
        self.injected_full.load(Ordering::SeqCst)
    }

    /// Tests only (`serve --test-faults`): while `full`, the filesystem looks full to the store
    /// (see the module documentation).
    pub fn inject_full(&self, full: bool) {
        self.injected_full.store(full, Ordering::SeqCst);
    }
}

/// The store's file as redb sees it: [`FileBackend`], with [`Space::inject_full`] applied to
/// the operations that take new space.
pub struct StoreFile {
    inner: FileBackend,
    space: Arc<Space>,
    /// End of the highest byte written (or the length at open): what a full disk still holds.
    written_end: AtomicU64,
}

impl StoreFile {
    /// ENOSPC while the filesystem is made to look full and `end` lies past what was written.
    fn refuse_past(&self, end: u64) -> io::Result<()> {
        if self.space.injected_full() && end > self.written_end.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device (injected)"));
        }
        Ok(())
    }
}

impl fmt::Debug for StoreFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreFile").field("inner", &self.inner).finish()
    }
}

/// Most bytes of redb's page cache (reads and writes together). redb's default is 1 GiB per
/// database, kept for the life of the process once read: a server that walked a large store
/// (a filtered list, the insights job, `check`) would hold up to that much. The file's pages
/// beyond it are still in the kernel's page cache, one `pread` away. Part of what bounds RSS
/// under load.
pub const PAGE_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Opens (or creates) the redb database at `path` on a [`StoreFile`], with a page cache of
/// [`PAGE_CACHE_BYTES`].
pub fn open(path: &Path, space: Arc<Space>) -> Result<Database, DatabaseError> {
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    let written_end = AtomicU64::new(file.metadata()?.len());
    let inner = FileBackend::new(file)?;
    Database::builder().set_cache_size(PAGE_CACHE_BYTES).create_with_backend(StoreFile { inner, space, written_end })
}

type Bound = std::ops::Bound<u64>;

impl StorageBackend for StoreFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if len > self.inner.len()? {
            self.refuse_past(len)?;
        }
        self.inner.set_len(len)?;
        self.written_end.fetch_min(len, Ordering::SeqCst);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset + data.len() as u64;
        self.refuse_past(end)?;
        self.inner.write(offset, data)?;
        self.written_end.fetch_max(end, Ordering::SeqCst);
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound, end: Bound) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(&self, start: Bound, end: Bound) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound, end: Bound) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound, end: Bound) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound, end: Bound) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound, end: Bound) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::{tables, OpenError, Store, DB_FILE};
    use crate::error::{Code, Result};

    /// Stores `len` bytes under `key` in `meta`.
    async fn put(store: &Store, key: &'static str, len: usize) -> Result<()> {
        store.write(move |txn| txn.open_table(tables::META)?.insert(key, vec![7u8; len].as_slice()).map(|_| ())).await
    }

    async fn has(store: &Store, key: &'static str) -> bool {
        store.read(move |txn| Ok(txn.open_table(tables::META)?.get(key)?.is_some())).await.unwrap()
    }

    /// Opens the store again once the writer thread of the dropped one has let go of the file.
    fn reopen(dir: &std::path::Path, min_free: u64) -> Store {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Store::open_with(dir, min_free) {
                Err(OpenError::InUse(_)) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                other => return other.unwrap(),
            }
        }
    }

    /// Without a reserve the full disk is met mid-transaction: the write answers 507, the
    /// latched handle is reopened (on the full disk), reads keep working, and writes succeed
    /// again once space returns.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_disk_met_mid_write_answers_507_keeps_reads_and_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), 0).unwrap();
        put(&store, "before", 64).await.unwrap();
        store.space().inject_full(true);
        for key in ["during-1", "during-2"] {
            let e = put(&store, key, 4 << 20).await.unwrap_err();
            assert_eq!(e.code, Code::InsufficientStorage, "{e}");
            assert!(has(&store, "before").await, "reads work while the disk is full");
        }
        store.space().inject_full(false);
        put(&store, "after", 4 << 20).await.unwrap();
        assert!(has(&store, "after").await);
        drop(store);
        let store = reopen(dir.path(), 0);
        for (key, stored) in [("before", true), ("during-1", false), ("during-2", false), ("after", true)] {
            assert_eq!(has(&store, key).await, stored, "{key}");
        }
    }

    /// With a reserve, a full disk is seen before the file is touched: nothing is latched.
    #[tokio::test]
    async fn below_the_reserve_writes_are_refused_before_the_file_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), 0).unwrap();
        put(&store, "before", 64).await.unwrap();
        drop(store);
        let store = reopen(dir.path(), u64::MAX);
        let len = std::fs::metadata(dir.path().join(DB_FILE)).unwrap().len();
        let e = put(&store, "refused", 64).await.unwrap_err();
        assert_eq!(e.code, Code::InsufficientStorage, "{e}");
        assert!(has(&store, "before").await);
        assert!(!has(&store, "refused").await);
        assert_eq!(std::fs::metadata(dir.path().join(DB_FILE)).unwrap().len(), len);
    }

    /// The injected full disk reports 0 bytes free to the reserve check.
    #[tokio::test]
    async fn an_injected_full_disk_is_below_any_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), 1).unwrap();
        put(&store, "before", 64).await.unwrap();
        store.space().inject_full(true);
        assert_eq!(put(&store, "during", 64).await.unwrap_err().code, Code::InsufficientStorage);
        store.space().inject_full(false);
        put(&store, "after", 64).await.unwrap();
        assert!(has(&store, "before").await && !has(&store, "during").await && has(&store, "after").await);
    }
}
