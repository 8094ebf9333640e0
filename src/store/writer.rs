//! The single writer thread with group commit (see the module docs of `store`), and what it
//! does when the disk is full (see `file`): refuse a batch up front while the free space is
//! below the reserve; answer `507` to every write of a batch whose transaction or commit met
//! ENOSPC; and reopen the handle when that failure latched it (see `handle`).

use std::any::{Any, TypeId};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::handle::Handle;
use super::kv::WriteTransaction;
use super::pg::{self, PgTables};
use crate::error::{Code, Error, Result};

/// A write closure as queued: re-runnable, reporting its error (a copy; the caller gets the
/// original).
pub type WriteFn = Box<dyn FnMut(&WriteTransaction) -> Result<()> + Send>;

/// A kind of write that a batch often holds many of (a chat history write: every
/// `POST …/chat/history` and every completion makes one). The writes of one kind that follow
/// each other in a batch share the tables they write, opened once for the run instead of once
/// per write.
///
/// Why: redb's `open_table` looks the table up in the transaction's table
/// tree and compares its key and value type names, and dropping the table writes its root back
/// into that tree. A history write touches 14 tables; at 64 concurrent writers, opening and
/// closing them was a fifth of the process's time, more than the fsync.
pub trait Grouped: Send + 'static {
    /// What the write answers.
    type Output: Send + 'static;
    /// The tables a run of writes of this kind shares, open in one write transaction.
    type Tables<'t>;
    /// Opens the shared tables in `txn`.
    fn open(txn: &WriteTransaction) -> Result<Self::Tables<'_>>;
    /// Applies this write with the shared `tables` (which keep the transaction, when the write
    /// needs more of it). It may run more than once (as [`super::Store::write`]'s closures),
    /// and must not open again a table that `tables` holds open (redb answers
    /// `TableAlreadyOpen`, a 500).
    fn apply(&self, tables: &mut Self::Tables<'_>) -> Result<Self::Output>;
    /// Ends a run of writes of this kind, once each of them was applied with the shared
    /// `tables`: what the run's writes leave to be written once (a count they all add to,
    /// rather than one row written again by each write). Runs again with the run (as
    /// [`Grouped::apply`]). Errors: as `apply`'s; the run's last write answers them. By default
    /// nothing.
    fn close(_tables: &mut Self::Tables<'_>) -> Result<()> {
        Ok(())
    }
}

/// One queued write: how to apply it and how to answer its caller.
pub struct Job {
    apply: Apply,
    finish: FinishFn,
}

/// Answers a job's caller once its batch is committed (given the commit's error, if any).
type FinishFn = Box<dyn FnOnce(Option<Error>) + Send>;

/// How a job is applied.
enum Apply {
    /// On its own, by its closure.
    Alone(WriteFn),
    /// With the run of jobs of the same [`Grouped`] kind around it: `run` applies the run,
    /// `write` is this job's [`Pending`] write.
    Grouped { kind: TypeId, run: RunFn, write: Box<dyn Any + Send> },
}

/// Applies a run of jobs of one [`Grouped`] kind; the first failure and its index in the run.
type RunFn = fn(&WriteTransaction, &[Job]) -> Option<(usize, Error)>;

/// A grouped write and where its result waits for the commit.
struct Pending<G: Grouped> {
    write: G,
    slot: Slot<G::Output>,
}

/// A write's result, kept until its batch is committed.
type Slot<T> = Arc<Mutex<Option<Result<T>>>>;

/// Most writes applied in one transaction.
const MAX_BATCH: usize = 256;

impl Job {
    /// Wraps `f`; the receiver gets `f`'s result once committed (or the commit error).
    pub fn new<T, F>(f: F) -> (Job, oneshot::Receiver<Result<T>>)
    where
        T: Send + 'static,
        F: Fn(&WriteTransaction) -> Result<T> + Send + 'static,
    {
        let slot: Slot<T> = Arc::default();
        let kept = slot.clone();
        let apply: WriteFn = Box::new(move |txn| settle(&kept, guarded(|| f(txn))));
        let (finish, rx) = finisher(slot);
        (Job { apply: Apply::Alone(apply), finish }, rx)
    }

    /// Wraps the grouped write `write` (see [`Grouped`]); the receiver gets its result once
    /// committed (or the commit error).
    pub fn grouped<G: Grouped>(write: G) -> (Job, oneshot::Receiver<Result<G::Output>>) {
        let slot: Slot<G::Output> = Arc::default();
        let write = Box::new(Pending { write, slot: slot.clone() });
        let (finish, rx) = finisher(slot);
        let apply = Apply::Grouped { kind: TypeId::of::<G>(), run: run_group::<G>, write };
        (Job { apply, finish }, rx)
    }

    /// The [`Grouped`] kind of this job; `None` for a write of its own.
    fn kind(&self) -> Option<TypeId> {
        match &self.apply {
            Apply::Alone(_) => None,
            Apply::Grouped { kind, .. } => Some(*kind),
        }
    }
}

/// Runs `f`, answering a panic as an internal error.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(Error::internal("write panicked")))
}

/// Keeps `r` in `slot` for the commit; returns a copy of its error.
fn settle<T>(slot: &Slot<T>, r: Result<T>) -> Result<()> {
    let outcome = r.as_ref().map(|_| ()).map_err(Error::clone);
    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    outcome
}

/// What answers the caller once the batch is committed: the kept result, or the commit error.
fn finisher<T: Send + 'static>(slot: Slot<T>) -> (FinishFn, oneshot::Receiver<Result<T>>) {
    let (tx, rx) = oneshot::channel();
    let finish = Box::new(move |commit_error: Option<Error>| {
        let r = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        let r = match (commit_error, r) {
            (Some(e), _) => Err(e),
            (None, Some(r)) => r,
            (None, None) => Err(Error::internal("write was never applied")),
        };
        let _ = tx.send(r);
    });
    (finish, rx)
}

/// Applies `jobs` (all of kind `G`, at least one) with one opening of `G`'s tables, then closes
/// the run ([`Grouped::close`]); stops at the first failure. A failure to open the tables is the
/// first job's, a failure to close them the last job's.
fn run_group<G: Grouped>(txn: &WriteTransaction, jobs: &[Job]) -> Option<(usize, Error)> {
    let mut tables = match guarded(|| G::open(txn)) {
        Ok(t) => t,
        Err(e) => return refuse::<G>(jobs, 0, e),
    };
    for (i, job) in jobs.iter().enumerate() {
        let p = pending::<G>(job).expect("a run holds jobs of one kind");
        if let Err(e) = settle(&p.slot, guarded(|| p.write.apply(&mut tables))) {
            return Some((i, e));
        }
    }
    let e = guarded(|| G::close(&mut tables)).err()?;
    refuse::<G>(jobs, jobs.len() - 1, e)
}

/// Answers job `i` of a run of `G`s with `e` (the run's failure it is held to); `e` and `i`.
fn refuse<G: Grouped>(jobs: &[Job], i: usize, e: Error) -> Option<(usize, Error)> {
    let p = pending::<G>(&jobs[i]).expect("a run holds jobs of one kind");
    settle(&p.slot, Err(e)).err().map(|e| (i, e))
}

/// The write of `job` when it is of kind `G`.
fn pending<G: Grouped>(job: &Job) -> Option<&Pending<G>> {
    match &job.apply {
        Apply::Grouped { write, .. } => write.downcast_ref(),
        Apply::Alone(_) => None,
    }
}

/// Applies every job of `batch` in `txn` (each run of one [`Grouped`] kind together); the
/// first failure and its index in `batch`.
fn apply_jobs(txn: &WriteTransaction, batch: &mut [Job]) -> Option<(usize, Error)> {
    let mut start = 0;
    while start < batch.len() {
        let kind = batch[start].kind();
        let len = match kind {
            None => 1,
            Some(_) => batch[start..].iter().take_while(|j| j.kind() == kind).count(),
        };
        let failure = match &mut batch[start].apply {
            Apply::Alone(f) => f(txn).err().map(|e| (0, e)),
            Apply::Grouped { run, .. } => {
                let run = *run;
                run(txn, &batch[start..start + len])
            }
        };
        if let Some((i, e)) = failure {
            return Some((start + i, e));
        }
        start += len;
    }
    None
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

/// Where the writer commits.
pub enum Target {
    /// The redb file (see `file` and `handle` for a full disk).
    Redb(Arc<Handle>),
    /// A PostgreSQL connection of the writer's own, and what to call after each commit (before
    /// its writes are answered).
    Pg(PgTables, Box<dyn Fn() + Send>),
}

/// Starts the writer thread; it ends when every [`super::Store`] is dropped.
pub fn spawn(mut target: Target, state: Arc<CommitState>) -> mpsc::Sender<Job> {
    let (tx, mut rx) = mpsc::channel::<Job>(1024);
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || {
            while let Some(first) = rx.blocking_recv() {
                // When other nodes write, the transaction begins first (waiting for the writers'
                // lock), and the writes that came meanwhile join the batch. Should that begin
                // fail, the batch begins as usual (and runs again on a serialization failure).
                let mut early = match &mut target {
                    Target::Pg(tables, _) if tables.others_wrote() => tables.begin_write_now().ok(),
                    _ => None,
                };
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                match &mut target {
                    Target::Redb(handle) => commit_batch(handle, batch, &state),
                    Target::Pg(tables, committed) => {
                        let begin = &mut || early.take().map_or_else(|| tables.begin_write(), Ok);
                        apply_batch(begin, &**committed, batch, &state);
                    }
                }
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
    let begin = &mut || super::kv::begin_write(&db);
    // Before any write of the batch is answered (`store::snapshot`).
    let committed = &|| db.committed();
    if apply_batch(begin, committed, batch, state) && Handle::latched(&db) {
        drop(db);
        // A failed reopen is logged and retried by the next batch (`Handle::for_write`).
        let _ = handle.reopen();
    }
}

fn fail_batch(batch: Vec<Job>, e: Error, state: &CommitState) {
    state.record(Err(&e));
    fail_all(batch, e);
}

/// Applies `batch` in one transaction begun by `begin`, dropping (and answering) writes that
/// fail; returns whether the store itself failed (a transaction that would not begin or
/// commit, or a write that met a full disk) rather than a write's own rule. After an ENOSPC the
/// handle is latched: the writes left are answered with that `507` rather than redb's
/// `PreviousIo`. A serialization failure (PostgreSQL, [`pg::must_retry`]) is no write's fault:
/// the whole batch runs again, after a pause, up to [`pg::ATTEMPTS`] times. `committed` runs
/// after each commit, before any write is answered.
fn apply_batch(
    begin: &mut dyn FnMut() -> Result<WriteTransaction>,
    committed: &dyn Fn(),
    mut batch: Vec<Job>,
    state: &CommitState,
) -> bool {
    let mut store_failed = false;
    let mut full: Option<Error> = None;
    let mut attempt = 1;
    while !batch.is_empty() {
        let txn = match begin() {
            Ok(t) => t,
            Err(e) => {
                fail_batch(batch, full.take().unwrap_or(e), state);
                return true;
            }
        };
        let failure = apply_jobs(&txn, &mut batch);
        match failure {
            Some((_, e)) if attempt < pg::ATTEMPTS && pg::must_retry(&e) => {
                let _ = txn.abort();
                std::thread::sleep(pg::backoff(attempt));
                attempt += 1;
            }
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
                let err = txn.commit().err();
                if err.as_ref().is_some_and(pg::must_retry) && attempt < pg::ATTEMPTS {
                    std::thread::sleep(pg::backoff(attempt));
                    attempt += 1;
                    continue;
                }
                committed();
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use redb::{Database, TableDefinition};

    use super::*;
    use crate::store::kv::{ReadableTable, Table};

    const ROWS: TableDefinition<u64, u64> = TableDefinition::new("rows");
    static OPENS: AtomicUsize = AtomicUsize::new(0);

    /// A grouped write of one row, failing after its insert when `fail`.
    struct Row {
        key: u64,
        fail: bool,
    }

    impl Grouped for Row {
        type Output = u64;
        type Tables<'t> = Table<'t, u64, u64>;

        fn open(txn: &WriteTransaction) -> Result<Table<'_, u64, u64>> {
            OPENS.fetch_add(1, Ordering::Relaxed);
            txn.open_table(ROWS)
        }

        fn apply(&self, rows: &mut Table<'_, u64, u64>) -> Result<u64> {
            rows.insert(self.key, self.key * 10)?;
            match self.fail {
                true => Err(Error::invalid("key", "refused")),
                false => Ok(self.key),
            }
        }
    }

    const TOTALS: TableDefinition<&str, u64> = TableDefinition::new("totals");
    static CLOSES: AtomicUsize = AtomicUsize::new(0);

    /// A grouped write adding `n` to a total that its run writes once, when it closes (refused
    /// past 10).
    struct Add {
        n: u64,
    }

    /// The tables of a run of [`Add`]s: the totals, and what the run added so far.
    struct Sum<'t> {
        totals: Table<'t, &'static str, u64>,
        added: u64,
    }

    impl Grouped for Add {
        type Output = u64;
        type Tables<'t> = Sum<'t>;

        fn open(txn: &WriteTransaction) -> Result<Sum<'_>> {
            Ok(Sum { totals: txn.open_table(TOTALS)?, added: 0 })
        }

        fn apply(&self, sum: &mut Sum<'_>) -> Result<u64> {
            sum.added += self.n;
            Ok(self.n)
        }

        fn close(sum: &mut Sum<'_>) -> Result<()> {
            CLOSES.fetch_add(1, Ordering::Relaxed);
            let total = sum.totals.get("all")?.map_or(0, |v| v.value()) + sum.added;
            if total > 10 {
                return Err(Error::invalid("n", "the total would pass 10"));
            }
            sum.totals.insert("all", total)?;
            Ok(())
        }
    }

    fn alone(key: u64) -> (Job, oneshot::Receiver<Result<u64>>) {
        Job::new(move |txn| {
            txn.open_table(ROWS)?.insert(key, key * 10)?;
            Ok(key)
        })
    }

    #[test]
    fn a_run_of_grouped_writes_opens_its_tables_once_and_a_failed_write_is_left_out_whole() {
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::Open::new(Database::create(dir.path().join("w.redb")).unwrap());
        let row = |key, fail| Job::grouped(Row { key, fail });
        let (jobs, receivers): (Vec<Job>, Vec<_>) =
            [alone(1), row(2, false), row(3, false), row(4, true), row(5, false), alone(6), row(7, false)]
                .into_iter()
                .unzip();
        let begin = &mut || crate::store::kv::begin_write(&db);
        assert!(!apply_batch(begin, &|| (), jobs, &CommitState::default()), "a write's own error is not the store's");

        let answers: Vec<Result<u64>> = receivers.into_iter().map(|rx| rx.blocking_recv().unwrap()).collect();
        for (answer, key) in answers.iter().zip(1..) {
            match key {
                4 => assert_eq!(answer.as_ref().unwrap_err().code, Code::ValidationFailed),
                _ => assert_eq!(answer.as_ref().ok(), Some(&key)),
            }
        }
        let read = crate::store::kv::begin_read(&db).unwrap();
        let keys: Vec<u64> = read.open_table(ROWS).unwrap().iter().unwrap().map(|r| r.unwrap().0.value()).collect();
        assert_eq!(keys, [1, 2, 3, 5, 6, 7], "the failed write's insert is gone, every other write is there");
        // First try: the run 2–5 (failed at 4). Then: the run 2, 3, 5 and the run 7.
        assert_eq!(OPENS.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_run_closes_once_and_a_failed_close_leaves_out_the_runs_last_write() {
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::Open::new(Database::create(dir.path().join("w.redb")).unwrap());
        let add = |n| Job::grouped(Add { n });
        let (jobs, receivers): (Vec<Job>, Vec<_>) = [add(2), add(3), add(4), alone(1), add(5)].into_iter().unzip();
        let begin = &mut || crate::store::kv::begin_write(&db);
        assert!(!apply_batch(begin, &|| (), jobs, &CommitState::default()), "a write's own error is not the store's");

        let answers: Vec<Result<u64>> = receivers.into_iter().map(|rx| rx.blocking_recv().unwrap()).collect();
        assert_eq!(answers[..4].iter().map(|a| *a.as_ref().unwrap()).collect::<Vec<_>>(), [2, 3, 4, 1]);
        assert_eq!(answers[4].as_ref().unwrap_err().code, Code::ValidationFailed, "the run that passed 10 is refused");
        let read = crate::store::kv::begin_read(&db).unwrap();
        let total = read.open_table(TOTALS).unwrap().get("all").unwrap().map(|v| v.value());
        assert_eq!(total, Some(9), "the first run's total, written once");
        // First try: the run 2, 3, 4 closed, the run 5 failed to. Then: the run 2, 3, 4 again.
        assert_eq!(CLOSES.load(Ordering::Relaxed), 3);
    }
}
