//! The single writer thread with group commit (see the module docs of `store`), and what it
//! does when the disk is full (see `file`): refuse a batch up front while the free space is
//! below the reserve; answer `507` to every write of a batch whose transaction or commit met
//! ENOSPC; and reopen the handle when that failure latched it (see `handle`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use redb::WriteTransaction;
use tokio::sync::{mpsc, oneshot};

use super::handle::Handle;
use crate::error::{Code, Error, Result};

/// A write closure as queued: re-runnable, reporting its error (a copy; the caller gets the
/// original).
pub type WriteFn = Box<dyn FnMut(&WriteTransaction) -> Result<()> + Send>;

/// One queued write: the closure and how to answer its caller.
pub struct Job {
    apply: WriteFn,
    finish: Box<dyn FnOnce(Option<Error>) + Send>,
}

/// Most writes applied in one transaction.
const MAX_BATCH: usize = 256;

impl Job {
    /// Wraps `f`; the receiver gets `f`'s result once committed (or the commit error).
    pub fn new<T, F>(f: F) -> (Job, oneshot::Receiver<Result<T>>)
    where
        T: Send + 'static,
        F: Fn(&WriteTransaction) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let slot: Arc<std::sync::Mutex<Option<Result<T>>>> = Arc::default();
        let slot_apply = slot.clone();
        let apply: WriteFn = Box::new(move |txn| {
            let r =
                catch_unwind(AssertUnwindSafe(|| f(txn))).unwrap_or_else(|_| Err(Error::internal("write panicked")));
            let outcome = r.as_ref().map(|_| ()).map_err(Error::clone);
            *slot_apply.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            outcome
        });
        let finish = Box::new(move |commit_error: Option<Error>| {
            let r = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            let r = match (commit_error, r) {
                (Some(e), _) => Err(e),
                (None, Some(r)) => r,
                (None, None) => Err(Error::internal("write was never applied")),
            };
            let _ = tx.send(r);
        });
        (Job { apply, finish }, rx)
    }
}

/// What the writer last saw of the disk (readiness reads it, see `ops::health`): when a commit
/// last succeeded, and the error of the last failed one (cleared by the next success).
#[derive(Default)]
pub struct CommitState {
    /// Milliseconds since the Unix epoch of the last successful commit; 0: none yet.
    last_ok_ms: AtomicI64,
    error: Mutex<Option<String>>,
}

impl CommitState {
    fn record(&self, result: Result<(), &Error>) {
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(()) => {
                self.last_ok_ms.store(super::now_ms(), Ordering::Relaxed);
                *error = None;
            }
            Err(e) => *error = Some(e.to_string()),
        }
    }

    /// The time of the last successful commit (ms since the epoch) and the error of the last
    /// commit when it failed.
    pub fn last(&self) -> (Option<i64>, Option<String>) {
        let ok = self.last_ok_ms.load(Ordering::Relaxed);
        let error = self.error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        ((ok > 0).then_some(ok), error)
    }
}

/// Starts the writer thread; it ends when every [`super::Store`] is dropped.
pub fn spawn(handle: Arc<Handle>, state: Arc<CommitState>) -> mpsc::Sender<Job> {
    let (tx, mut rx) = mpsc::channel::<Job>(1024);
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || {
            while let Some(first) = rx.blocking_recv() {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                commit_batch(&handle, batch, &state);
            }
        })
        .expect("spawn store writer thread");
    tx
}

/// Refuses `batch` while the disk is (nearly) full; else commits it, then reopens the handle
/// if an I/O failure latched it.
fn commit_batch(handle: &Handle, batch: Vec<Job>, state: &CommitState) {
    if let Err(e) = handle.space.check() {
        return fail_batch(batch, e, state);
    }
    let db = match handle.for_write() {
        Ok(db) => db,
        Err(e) => return fail_batch(batch, e, state),
    };
    if apply_batch(&db, batch, state) && Handle::latched(&db) {
        drop(db);
        // A failed reopen is logged and retried by the next batch (`Handle::for_write`).
        let _ = handle.reopen();
    }
}

fn fail_batch(batch: Vec<Job>, e: Error, state: &CommitState) {
    state.record(Err(&e));
    fail_all(batch, e);
}

/// Applies `batch` in one transaction, dropping (and answering) writes that fail; returns
/// whether the store itself failed (a transaction that would not begin or commit, or a write
/// that met a full disk) rather than a write's own rule. After an ENOSPC the handle is
/// latched: the writes left are answered with that `507` rather than redb's `PreviousIo`.
fn apply_batch(db: &super::Open, mut batch: Vec<Job>, state: &CommitState) -> bool {
    let mut store_failed = false;
    let mut full: Option<Error> = None;
    while !batch.is_empty() {
        let txn = match db.begin_write() {
            Ok(t) => t,
            Err(e) => {
                fail_batch(batch, full.take().unwrap_or_else(|| Error::from(e)), state);
                return true;
            }
        };
        let failure = batch.iter_mut().enumerate().find_map(|(i, job)| (job.apply)(&txn).err().map(|e| (i, e)));
        match failure {
            Some((i, e)) => {
                // A 500 may be a store error too (redb's `PreviousIo`): the caller checks.
                store_failed |= matches!(e.code, Code::InsufficientStorage | Code::Internal);
                if e.code == Code::InsufficientStorage {
                    full = Some(e);
                }
                let _ = txn.abort();
                let job = batch.remove(i);
                (job.finish)(None);
            }
            None => {
                let started = Instant::now();
                let err = txn.commit().err().map(Error::from);
                db.committed(); // before any write of the batch is answered (`store::snapshot`)
                crate::telemetry::store_commit(batch.len(), started.elapsed());
                state.record(err.as_ref().map_or(Ok(()), Err));
                store_failed |= err.is_some();
                for job in batch.drain(..) {
                    (job.finish)(err.clone());
                }
            }
        }
    }
    store_failed
}

fn fail_all(batch: Vec<Job>, e: Error) {
    for job in batch {
        (job.finish)(Some(e.clone()));
    }
}
