//! The database handle that readers and the writer share, and its replacement after a failed
//! write (see `file` for why a failed write of redb's file needs one).
//!
//! Readers load the handle lock-free ([`arc_swap`]) and hold it while their read runs
//! ([`Handle::read`]). After a write that left the handle latched by an I/O error (redb's
//! `PreviousIo`), the writer calls [`Handle::reopen`]: it takes the handle out, waits until the
//! reads in flight are done with it (at most [`REOPEN_WAIT`]), drops it — redb's drop closes
//! the file and releases its lock, even while a straggling read transaction still exists (its
//! later page reads then answer `DatabaseClosed`) — and opens the file again, which repairs it
//! to the last durable commit. The repair writes only pages the file already has (its header),
//! so it succeeds on a full disk too. Reads arriving meanwhile wait for the new handle (at most
//! [`READ_WAIT`]); a read that met the latched handle before the writer took it out (its page
//! reads answer `PreviousIo`) runs again on the new one — told by its error's cause,
//! [`StoreError::Latched`], not by its text. The open-database count of
//! [`super::wait_closed`] stays right: the old [`Open`] counts its close when dropped, the new
//! one its open.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use redb::{Database, ReadTransaction, ReadableDatabase, StorageError, TransactionError};

use super::error::StoreError;
use super::file::{self, Space};
use super::{Open, Snapshot};
use crate::error::{Error, Result};

/// Longest time [`Handle::reopen`] spends: waiting for reads in flight, then retrying the open.
pub const REOPEN_WAIT: Duration = Duration::from_secs(10);

/// Longest wait of a read for the handle while the writer reopens the file.
pub const READ_WAIT: Duration = Duration::from_secs(5);

/// The shared handle (see the module documentation).
pub struct Handle {
    db: ArcSwapOption<Open>,
    path: PathBuf,
    /// The free-space check and the fault switch of the store's file.
    pub space: Arc<Space>,
    /// How many times the file was reopened (a read that met a latched handle waits for more).
    generation: AtomicU64,
    reopened: (Mutex<()>, Condvar),
}

impl Handle {
    /// Opens the database at `path` on the store's file layer.
    pub fn open(path: PathBuf, space: Arc<Space>) -> Result<Handle, redb::DatabaseError> {
        let db = file::open(&path, space.clone())?;
        let db = ArcSwapOption::from_pointee(Open::new(db));
        Ok(Handle { db, path, space, generation: AtomicU64::new(0), reopened: Default::default() })
    }

    /// The current handle, waiting up to `wait` while it is reopened; 500 after that.
    fn current_within(&self, wait: Duration) -> Result<Arc<Open>> {
        self.reopened_since(0, wait)
    }

    /// The handle of a generation after `generation` (a reopen since), waiting up to `wait`;
    /// 500 after that.
    fn reopened_since(&self, generation: u64, wait: Duration) -> Result<Arc<Open>> {
        let deadline = Instant::now() + wait;
        let (lock, cvar) = &self.reopened;
        let mut guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.generation.load(Ordering::Acquire) >= generation {
                if let Some(db) = self.db.load_full() {
                    return Ok(db);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::internal("the store is being reopened after a failed write"));
            }
            guard = cvar.wait_timeout(guard, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// The handle for the writer: the current one, or — after a reopen that failed — a new
    /// attempt at [`Handle::reopen`] (so every batch retries until the file opens again).
    pub fn for_write(&self) -> Result<Arc<Open>> {
        match self.db.load_full() {
            Some(db) => Ok(db),
            None => {
                self.reopen()?;
                self.current_within(Duration::ZERO)
            }
        }
    }

    /// The current handle's commit generation ([`super::snapshot::Shared::generation`]);
    /// `None` while the file is being reopened.
    pub fn commit_generation(&self) -> Option<u64> {
        self.db.load().as_deref().map(Open::commit_generation)
    }

    /// Runs `f` in a read transaction, holding the handle meanwhile (so a reopen waits for it).
    /// A read that meets the handle latched under it (a write failed while it ran) runs again,
    /// once, on the reopened handle (waiting up to [`READ_WAIT`] for it).
    pub fn read<T>(&self, f: impl Fn(&Snapshot) -> Result<T>) -> Result<T> {
        let generation = self.generation.load(Ordering::Acquire);
        let guard = self.db.load();
        let first = match guard.as_deref() {
            Some(db) => db.snapshot().and_then(|s| f(&s)),
            None => return f(&*self.current_within(READ_WAIT)?.snapshot()?),
        };
        drop(guard);
        match first {
            Err(e) if cured_by_reopen(&e) => f(&*self.reopened_since(generation + 1, READ_WAIT)?.snapshot()?),
            other => other,
        }
    }

    /// A read transaction on the current handle, for a long read (the backup's snapshot); it
    /// does not hold the handle, so a reopen during it ends it (`DatabaseClosed`, a 500).
    pub fn begin_read(&self) -> Result<ReadTransaction> {
        Ok(self.current_within(READ_WAIT)?.begin_read()?)
    }

    /// Whether the handle refuses every operation after an I/O error (redb's `PreviousIo`).
    pub fn latched(db: &Database) -> bool {
        matches!(db.begin_write(), Err(TransactionError::Storage(StorageError::PreviousIo)))
    }

    /// Closes the (latched) handle and opens the file again, within [`REOPEN_WAIT`]: waits for
    /// the reads in flight to let go of the old handle, then retries the open with a growing
    /// pause (10 ms to 500 ms). On failure (the file still in use, or failing to open) the
    /// handle stays closed and the error is returned (ENOSPC as 507); the writer's next batch
    /// tries again ([`Handle::for_write`]). Called by the writer thread only.
    pub fn reopen(&self) -> Result<()> {
        self.reopen_within(REOPEN_WAIT)
    }

    /// [`Handle::reopen`] within `wait`.
    fn reopen_within(&self, wait: Duration) -> Result<()> {
        let deadline = Instant::now() + wait;
        if let Some(old) = self.db.swap(None) {
            while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            // The last holder closes the file; until then the open below is refused as in use.
            drop(old);
        }
        let mut pause = Duration::from_millis(10);
        let db = loop {
            match file::open(&self.path, self.space.clone()) {
                Ok(db) => break db,
                Err(e) if Instant::now() + pause < deadline => {
                    tracing::warn!(error = %e, "reopening the store after a failed write; retrying");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) => {
                    tracing::error!(error = %e, "reopening the store after a failed write failed; the next write retries");
                    return Err(Error::from(e));
                }
            }
        };
        tracing::warn!("the store was reopened after a failed write");
        let (lock, cvar) = &self.reopened;
        let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        self.db.store(Some(Arc::new(Open::new(db))));
        self.generation.fetch_add(1, Ordering::AcqRel);
        cvar.notify_all();
        Ok(())
    }
}

/// Whether `e` is a store error that a reopened handle cures ([`StoreError::Latched`]: redb's
/// `PreviousIo` or `DatabaseClosed`), told by the type of its cause.
fn cured_by_reopen(e: &Error) -> bool {
    matches!(e.cause::<StoreError>(), Some(StoreError::Latched(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::store::error::LATCHED_MESSAGE;

    /// redb's `PreviousIo` and `DatabaseClosed`, whichever redb type brings them, are
    /// [`StoreError::Latched`] and cured by a reopen, with today's message on the wire; an
    /// error that merely reads the same is not.
    #[test]
    fn a_latched_handle_is_told_by_type_not_text() {
        let kinds: [fn() -> StorageError; 2] = [|| StorageError::PreviousIo, || StorageError::DatabaseClosed];
        for latched in kinds {
            let text = latched().to_string();
            for e in [Error::from(latched()), Error::from(TransactionError::Storage(latched()))] {
                assert!(matches!(e.cause::<StoreError>(), Some(StoreError::Latched(_))), "{e}");
                assert!(cured_by_reopen(&e));
                assert_eq!((e.code, e.message.as_str()), (Code::Internal, LATCHED_MESSAGE));
                assert_eq!(e.cause_text(), Some(text.clone()));
            }
        }
        assert!(cured_by_reopen(&Error::from(redb::Error::DatabaseClosed)));
        let lookalike = Error::new(Code::Internal, LATCHED_MESSAGE).with_cause_text(StorageError::PreviousIo);
        assert!(!cured_by_reopen(&lookalike));
        assert!(!cured_by_reopen(&Error::internal("the store is being reopened after a failed write")));
        assert!(!cured_by_reopen(&Error::from(StorageError::Corrupted("bad page".into()))));
    }

    /// A reopen that cannot close the old handle (a holder that does not let go) gives up
    /// within its bound, and the next write's [`Handle::for_write`] opens the file once the
    /// holder is gone.
    #[test]
    fn a_reopen_is_bounded_and_retried_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let handle = Handle::open(dir.path().join("db.redb"), Arc::new(Space::new(dir.path(), 0))).unwrap();
        let stuck = handle.for_write().unwrap();
        let e = handle.reopen_within(Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e.cause::<StoreError>(), Some(StoreError::Redb(redb::Error::DatabaseAlreadyOpen))), "{e}");
        assert!(handle.db.load().is_none(), "no handle until the file is reopened");
        drop(stuck);
        let db = handle.for_write().unwrap();
        assert!(!Handle::latched(&db));
        drop(db);
        handle.read(|txn| Ok(txn.open_existing_table(super::super::tables::META)?.is_none())).unwrap();
    }
}
