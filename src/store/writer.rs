//! The single writer thread with group commit (see the module docs of `store`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use redb::{Database, WriteTransaction};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};

/// A write closure as queued: re-runnable, reporting success.
pub type WriteFn = Box<dyn FnMut(&WriteTransaction) -> bool + Send>;

/// One queued write: the closure and how to answer its caller.
pub struct Job {
    apply: WriteFn,
    finish: Box<dyn FnOnce(Option<Error>) + Send>,
    /// Committed in a transaction of its own (see [`Job::alone`]).
    alone: bool,
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
            let ok = r.is_ok();
            *slot_apply.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            ok
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
        (Job { apply, finish, alone: false }, rx)
    }

    /// Makes the job commit in a transaction of its own: the writes batched before it are
    /// committed (and answered) without waiting for it, and it is never applied again because
    /// another write of its batch failed. For the few large writes (an uploaded file's bytes).
    pub fn alone(mut self) -> Job {
        self.alone = true;
        self
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
pub fn spawn(db: Arc<super::Open>, state: Arc<CommitState>) -> mpsc::Sender<Job> {
    let (tx, mut rx) = mpsc::channel::<Job>(1024);
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || {
            let mut next: Option<Job> = None;
            while let Some(first) = next.take().or_else(|| rx.blocking_recv()) {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH && !batch[0].alone {
                    match rx.try_recv() {
                        Ok(job) if job.alone => {
                            next = Some(job);
                            break;
                        }
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                commit_batch(&db, batch, &state);
            }
        })
        .expect("spawn store writer thread");
    tx
}

/// Applies `batch` in one transaction, dropping (and answering) writes that fail.
fn commit_batch(db: &Database, mut batch: Vec<Job>, state: &CommitState) {
    while !batch.is_empty() {
        let txn = match db.begin_write() {
            Ok(t) => t,
            Err(e) => {
                let e = Error::from(e);
                state.record(Err(&e));
                return fail_all(batch, e);
            }
        };
        let failed = batch.iter_mut().position(|job| !(job.apply)(&txn));
        match failed {
            Some(i) => {
                let _ = txn.abort();
                let job = batch.remove(i);
                (job.finish)(None);
            }
            None => {
                let started = Instant::now();
                let err = txn.commit().err().map(Error::from);
                crate::telemetry::store_commit(batch.len(), started.elapsed());
                state.record(err.as_ref().map_or(Ok(()), Err));
                for job in batch.drain(..) {
                    (job.finish)(err.clone());
                }
            }
        }
    }
}

fn fail_all(batch: Vec<Job>, e: Error) {
    for job in batch {
        (job.finish)(Some(e.clone()));
    }
}
