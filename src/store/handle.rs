//! The database handle that readers and the writer share, and its replacement after a failed
//! write (see `file` for why a failed write of redb's file needs one).
//!
//! Readers load the handle lock-free ([`arc_swap`]); the writer, after a commit that left the
//! handle latched by an I/O error, takes it out, waits until the last reader has let go of it
//! (a read holds it only to begin its transaction), closes it and opens the file again — redb
//! repairs it to the last durable commit. Reads arriving meanwhile wait for the new handle
//! (at most [`REOPEN_WAIT`]); transactions begun before keep their snapshot.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use redb::{Database, ReadTransaction, ReadableDatabase, StorageError, TransactionError};

use super::Open;

use super::file::{self, Space};
use crate::error::{Error, Result};

/// Longest wait of a read for the handle while the writer reopens the file.
pub const REOPEN_WAIT: Duration = Duration::from_secs(30);

/// The shared handle (see the module documentation).
pub struct Handle {
    db: ArcSwapOption<Open>,
    path: PathBuf,
    /// The free-space check and the fault switch of the store's file.
    pub space: Arc<Space>,
    reopened: (Mutex<()>, Condvar),
}

impl Handle {
    /// Opens the database at `path` on the store's file layer.
    pub fn open(path: PathBuf, space: Arc<Space>) -> Result<Handle, redb::DatabaseError> {
        let db = file::open(&path, space.clone())?;
        Ok(Handle { db: ArcSwapOption::from_pointee(Open::new(db)), path, space, reopened: Default::default() })
    }

    /// The current handle, waiting up to [`REOPEN_WAIT`] while it is reopened.
    pub fn current(&self) -> Result<Arc<Open>> {
        if let Some(db) = self.db.load_full() {
            return Ok(db);
        }
        let deadline = Instant::now() + REOPEN_WAIT;
        let (lock, cvar) = &self.reopened;
        let mut guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(db) = self.db.load_full() {
                return Ok(db);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::internal("the store is being reopened after a failed write"));
            }
            guard = cvar.wait_timeout(guard, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// A read transaction on the current handle (the handle itself is held only meanwhile).
    pub fn begin_read(&self) -> Result<ReadTransaction> {
        if let Some(db) = self.db.load().as_deref() {
            return Ok(db.begin_read()?);
        }
        Ok(self.current()?.begin_read()?)
    }

    /// Whether the handle refuses every operation after an I/O error (redb's `PreviousIo`).
    pub fn latched(db: &Database) -> bool {
        matches!(db.begin_write(), Err(TransactionError::Storage(StorageError::PreviousIo)))
    }

    /// Closes the latched handle and opens the file again; retries (every second, logging)
    /// until the open succeeds. Called by the writer only.
    pub fn reopen(&self) {
        let Some(mut old) = self.db.swap(None) else { return };
        // Readers hold the handle only to begin a transaction: wait for them to let go.
        let closed = loop {
            match Arc::try_unwrap(old) {
                Ok(db) => break db,
                Err(still_shared) => {
                    old = still_shared;
                    std::thread::yield_now();
                }
            }
        };
        drop(closed);
        let mut attempt = 0u32;
        let db = loop {
            match file::open(&self.path, self.space.clone()) {
                Ok(db) => break db,
                Err(e) => {
                    attempt += 1;
                    tracing::error!(error = %e, attempt, "reopening the store after a failed write failed; retrying");
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
        };
        tracing::warn!("the store was reopened after a failed write");
        let (lock, cvar) = &self.reopened;
        let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        self.db.store(Some(Arc::new(Open::new(db))));
        cvar.notify_all();
    }
}
