//! The store: redb tables are the source of truth for every resource.
//!
//! Reads run inline, in the read snapshot that every read shares until the next commit
//! ([`Store::read`], [`snapshot`]; scans that grow with the data on the blocking pool,
//! [`Store::read_scan`]). Writes go to
//! one writer thread with group commit ([`Store::write`]): it takes every write waiting on its
//! channel, applies them in one redb write transaction, commits (fsync) once and then answers
//! each. A write that returns an error is left out of the batch (the others are re-applied in a
//! fresh transaction), so a failed write never leaves half its changes behind. An acknowledged
//! write is durable. Writes of one [`Grouped`] kind queued together (chat history writes) share
//! the tables they open ([`Store::write_grouped`]).
//!
//! Disk full: writes answer `507 INSUFFICIENT_STORAGE` and leave nothing behind
//! while the data directory's filesystem is full, reads keep working, and writes succeed again
//! once space returns, without a restart (`file`: the free-space check and why it comes before
//! the commit; `handle`: the reopen after a commit that met ENOSPC anyway).
//!
//! Errors: redb's errors become the crate's `Error` through [`error::StoreError`], which says
//! whether the disk is full (507), the handle is latched (a 500 that a reopen cures) or
//! something else failed (500), and is kept as the error's typed cause.

pub mod codec;
pub mod copy;
pub mod error;
pub mod file;
pub mod files;
mod handle;
pub mod kb;
pub mod kv;
pub mod lease;
pub mod meta;
pub mod migrate;
pub mod notify;
pub mod pg;
pub mod private;
pub mod record_cache;
pub mod records;
pub mod replica_index;
pub mod row_cache;
pub mod snapshot;
pub mod sort_key;
pub mod stamps;
pub mod states;
pub mod tables;
mod writer;

use std::path::Path;
use std::sync::Arc;

use kv::{ReadableTable, WriteTransaction};
use redb::Database;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::error::{Error, Result};
use codec::Record;
pub use snapshot::Snapshot;

pub use migrate::SCHEMA_VERSION;
pub use writer::{CommitState, Grouped, WriteFn};

/// File name of the redb database inside the data directory.
pub const DB_FILE: &str = "replicad.redb";

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    engine: Arc<Engine>,
    /// The free-space check of the data directory (the redb file's, the uploaded files').
    space: Arc<file::Space>,
    writer: mpsc::Sender<writer::Job>,
    /// Woken after every commit made by [`Store::write_kb`] (the indexer waits on it).
    pub outbox_notify: Arc<tokio::sync::Notify>,
    /// Woken after every commit made by [`Store::write_kb`] (the ingestion worker waits on it).
    pub jobs_notify: Arc<tokio::sync::Notify>,
    /// The outcome of the writer's last commit (readiness, `ops::health`).
    pub commits: Arc<CommitState>,
    /// The uploaded files, kept beside the store's file ([`files`]).
    pub files: Arc<files::Files>,
    /// Which node does the work only one may do at a time ([`lease`]).
    pub leases: lease::Leases,
    /// The exclusive lock on the data directory's [`NODE_LOCK`].
    _node: Arc<std::fs::File>,
}

/// The engine holding the tables ([`kv`]).
enum Engine {
    /// The redb file in the data directory (the default).
    Redb(Arc<handle::Handle>),
    /// A PostgreSQL database, which several nodes may share, what this node hears of the
    /// others' commits, and the records it keeps between reads.
    Pg(Arc<pg::PgPool>, notify::Listener, record_cache::RecordCache),
}

impl Engine {
    /// Runs `f` in a read snapshot, on the calling thread.
    fn read<T>(&self, f: impl Fn(&Snapshot) -> Result<T>) -> Result<T> {
        match self {
            Engine::Redb(handle) => handle.read(f),
            Engine::Pg(pool, ..) => pool.read(|txn| f(&Snapshot::of(txn))),
        }
    }
}

/// The outbox's last position as [`Store::outbox_head`] keeps it.
struct OutboxHead(u64);

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another process (a running `replicad serve`) holds the database.
    #[error("the store at {0} is in use by another replicad process")]
    InUse(String),
    #[error("{0}")]
    Other(String),
}

/// The open database: dropped (closed cleanly) when the last [`Store`] and the writer thread
/// let go of it, which [`wait_closed`] waits for.
///
/// A redb file that was not closed cleanly is checked and repaired when next opened, which
/// reads the whole file: 0.5 s and 400 MB of RSS with 1,000,000 history items
/// (`examples/startup_bench.rs`), against 18 ms after a clean close. So a stopping server waits
/// (bounded) for the close before it exits.
pub struct Open {
    /// Dropped before the database (fields drop in order).
    shared: snapshot::Shared,
    db: Database,
    _closed: Closing,
}

impl Open {
    fn new(db: Database) -> Open {
        *OPEN.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        Open { shared: snapshot::Shared::default(), db, _closed: Closing }
    }

    /// The read snapshot shared until the next commit ([`snapshot`]).
    pub fn snapshot(&self) -> Result<Arc<snapshot::Snapshot>> {
        self.shared.get(&self.db)
    }

    /// A number that changes at every commit ([`snapshot::Shared::generation`]).
    pub fn commit_generation(&self) -> u64 {
        self.shared.generation()
    }

    /// Tells the shared snapshot that a commit was made (or failed): called by the writer
    /// before it answers the batch's writes.
    fn committed(&self) {
        self.shared.committed();
    }
}

impl std::ops::Deref for Open {
    type Target = Database;
    fn deref(&self) -> &Database {
        &self.db
    }
}

/// Dropped after the database (fields drop in order): counts the close.
struct Closing;

impl Drop for Closing {
    fn drop(&mut self) {
        let mut open = OPEN.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *open -= 1;
        OPEN.1.notify_all();
    }
}

/// Databases open in this process, and a signal when one closes.
static OPEN: (std::sync::Mutex<usize>, std::sync::Condvar) = (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// Makes `data_dir` ready for this process on either engine: private, locked ([`lock_node`]),
/// its free space guarded by `min_free`.
fn node_dir(data_dir: &Path, min_free: u64) -> Result<(std::fs::File, Arc<file::Space>), OpenError> {
    private::private_dir(data_dir).map_err(|e| OpenError::Other(format!("{}: {e}", data_dir.display())))?;
    let lock = lock_node(data_dir)?;
    Ok((lock, Arc::new(file::Space::new(data_dir, min_free))))
}

/// File in the data directory that the process using it holds an exclusive lock on.
pub const NODE_LOCK: &str = "node.lock";

/// Takes the exclusive lock on `data_dir`'s [`NODE_LOCK`]; [`OpenError::InUse`] when another
/// process holds it.
fn lock_node(data_dir: &Path) -> Result<std::fs::File, OpenError> {
    let path = data_dir.join(NODE_LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| OpenError::Other(format!("{}: {e}", path.display())))?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns (open for as long as `file`); no memory
    // is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(file);
    }
    match std::io::Error::last_os_error() {
        e if e.kind() == std::io::ErrorKind::WouldBlock => Err(OpenError::InUse(data_dir.display().to_string())),
        e => Err(OpenError::Other(format!("{}: {e}", path.display()))),
    }
}

/// Logs how many uploaded files no record named (a crash left them) and were removed at open.
fn report_swept(swept: usize) {
    if swept > 0 {
        tracing::info!(files = swept, "removed uploaded files that no record names (left by a crash)");
    }
}

/// An error that keeps the store from opening, as [`OpenError::Other`].
fn other(e: Error) -> OpenError {
    OpenError::Other(e.to_string())
}

/// Waits up to `timeout` until every store opened by this process is closed (every [`Store`]
/// dropped and the writer thread ended); `false` if one is still open then (it is repaired at
/// the next open, as after a crash: slower, nothing lost).
pub fn wait_closed(timeout: std::time::Duration) -> bool {
    let open = OPEN.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (open, _) =
        OPEN.1.wait_timeout_while(open, timeout, |n| *n > 0).unwrap_or_else(std::sync::PoisonError::into_inner);
    *open == 0
}

impl Store {
    /// Opens (or creates) `DATA_DIR/replicad.redb`, applies migrations and starts the writer,
    /// with the default free-space reserve ([`file::DEFAULT_MIN_FREE_BYTES`]).
    /// Must be called inside a tokio runtime.
    pub fn open(data_dir: &Path) -> Result<Store, OpenError> {
        Store::open_with(data_dir, file::DEFAULT_MIN_FREE_BYTES)
    }

    /// The store of `data_dir` on the engine `--store` names: the PostgreSQL database at
    /// `url` ([`Store::open_postgres`]), else the redb file ([`Store::open_with`]).
    pub fn open_on(data_dir: &Path, url: Option<&str>, min_free: u64) -> Result<Store, OpenError> {
        match url {
            None => Store::open_with(data_dir, min_free),
            Some(url) => Store::open_postgres(data_dir, url, min_free),
        }
    }

    /// [`Store::open`] refusing writes (507) while fewer than `min_free` bytes are free on the
    /// data directory's filesystem (`--min-free-space`).
    ///
    /// The data directory is one process's: a second process that opens it (on either engine)
    /// is refused ([`OpenError::InUse`]) by an exclusive lock on [`NODE_LOCK`], held as long as
    /// the store.
    pub fn open_with(data_dir: &Path, min_free: u64) -> Result<Store, OpenError> {
        let (lock, space) = node_dir(data_dir, min_free)?;
        let files = files::Files::open(data_dir, space.clone()).map_err(|e| OpenError::Other(e.to_string()))?;
        let path = data_dir.join(DB_FILE);
        let handle = match handle::Handle::open(path.clone(), space.clone()) {
            Ok(h) => Arc::new(h),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => return Err(OpenError::InUse(path.display().to_string())),
            Err(e) => return Err(OpenError::Other(format!("{}: {e}", path.display()))),
        };
        let db = handle.for_write().map_err(other)?;
        migrate::run(&db, &files).map_err(other)?;
        drop(db);
        report_swept(files.sweep(|| handle.read(|snapshot| files::recorded_names(snapshot))).map_err(other)?);
        let engine = Engine::Redb(handle.clone());
        let (leases, wake) = (lease::Leases::local(), notify::Wake::default());
        Store::assemble(lock, engine, leases, space, files, writer::Target::Redb(handle), wake)
    }

    /// Opens the tables in the PostgreSQL database at `url` (`postgres://user@host:port/db`),
    /// creating or migrating its schema (`store::pg`), with the uploaded files in it too
    /// ([`files`]); `data_dir` holds this node's search index, whose filesystem `min_free`
    /// guards as in [`Store::open_with`]. Errors: the database cannot be reached, or its schema
    /// is newer than this build.
    pub fn open_postgres(data_dir: &Path, url: &str, min_free: u64) -> Result<Store, OpenError> {
        let (lock, space) = node_dir(data_dir, min_free)?;
        // On a thread of its own: the synchronous client runs a runtime of its own, which cannot
        // start on a thread of the server's.
        let stamps = Arc::new(stamps::Stamps::default());
        let connect = || -> Result<_> {
            let mut pool = pg::PgPool::connect(url)?;
            pool.keep_rows(stamps.clone());
            let pool = Arc::new(pool);
            let mut writer = pool.dedicated()?;
            if pool.read(|txn| migrate::holds_v9_bots(&txn))? {
                writer.write(migrate::integrations_in_one_table)?;
            }
            writer.keep_rows(stamps.clone());
            let files = files::Files::in_database(pool.clone(), space.clone());
            let swept = files.sweep(|| pool.read(|txn| files::recorded_names(&Snapshot::of(txn))))?;
            Ok((pool, writer, files, swept))
        };
        let (pool, writer, files, swept) = std::thread::scope(|s| s.spawn(connect).join())
            .map_err(|_| OpenError::Other("connecting to PostgreSQL panicked".into()))?
            .map_err(other)?;
        report_swept(swept);
        let (leases, wake) = (lease::Leases::postgres(url), notify::Wake::default());
        let listener = notify::Listener::spawn(url, wake.clone(), stamps.clone());
        let target = writer::Target::Pg(writer, Box::new(listener.on_commit()));
        let engine = Engine::Pg(pool, listener, record_cache::RecordCache::new(stamps));
        Store::assemble(lock, engine, leases, space, files, target, wake)
    }

    /// The store over `engine`, with its writer committing to `target`, holding `lock`; `wake`
    /// holds the indexer's and the ingestion scheduler's wake-ups.
    fn assemble(
        lock: std::fs::File,
        engine: Engine,
        leases: lease::Leases,
        space: Arc<file::Space>,
        files: Arc<files::Files>,
        target: writer::Target,
        wake: notify::Wake,
    ) -> Result<Store, OpenError> {
        let notify::Wake { outbox: outbox_notify, jobs: jobs_notify } = wake;
        let commits = Arc::new(CommitState::default());
        let writer = writer::spawn(target, commits.clone());
        let engine = Arc::new(engine);
        let _node = Arc::new(lock);
        Ok(Store { engine, space, writer, outbox_notify, jobs_notify, commits, files, leases, _node })
    }

    /// A number that changes at every commit and is never seen twice in the process: a read
    /// that begins after a write was acknowledged finds a newer one than any read that began
    /// before that write's commit. `None` while the file is being reopened after a failed
    /// write. What the read cache (`http::read_cache`) keys its answers on.
    ///
    /// On PostgreSQL it moves on at this node's commits and at every commit another node
    /// notifies ([`notify`]: a read on this node may miss another node's write for as long as
    /// the notification takes to arrive); `None` while this node is not listening.
    pub fn commit_generation(&self) -> Option<u64> {
        match &*self.engine {
            Engine::Redb(handle) => handle.commit_generation(),
            Engine::Pg(_, listener, _) => listener.generation(),
        }
    }

    /// Whether other processes may write these tables too (PostgreSQL): their commits wake
    /// nothing here, and rows that every node reads (the knowledge-base outbox) are kept.
    pub fn is_shared(&self) -> bool {
        matches!(*self.engine, Engine::Pg(..))
    }

    /// Replaces the shared token bucket `key` with the tokens `f` answers from it, and answers
    /// what else `f` answers (`pg::PgPool::update_bucket`: `f` gets the bucket's tokens and
    /// the seconds since it was written, `None` when there is none yet). Errors: the database's,
    /// or on redb, where nothing is shared, an internal one.
    pub async fn update_bucket<T: Send + 'static>(
        &self,
        key: Vec<u8>,
        f: impl FnOnce(Option<(f64, f64)>) -> (f64, T) + Send + 'static,
    ) -> Result<T> {
        let Engine::Pg(pool, ..) = &*self.engine else {
            return Err(Error::internal("the rate-limit buckets are in memory on redb"));
        };
        let pool = pool.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = None;
            pool.update_bucket(&key, |found| {
                let (tokens, answer) = f(found);
                out = Some(answer);
                tokens
            })?;
            out.ok_or_else(|| Error::internal("the bucket was not read"))
        })
        .await
        .map_err(Error::internal)?
    }

    /// The free-space check and fault switch of the data directory (`serve --test-faults`).
    pub fn space(&self) -> &file::Space {
        &self.space
    }

    /// Runs `f` in the shared read snapshot ([`snapshot`]: the last commit, as a fresh read
    /// transaction would see it), inline on the calling task.
    ///
    /// Why inline: a request's reads are a few point lookups or a short range in redb's page
    /// cache — microseconds — while the hop to the blocking pool cost more than the read (thread
    /// wake-ups, futex and mutex contention of a pool that grew to 139 threads under load, as a
    /// profile showed). A panic in `f` is caught and answered as an internal error, as the
    /// pool's join error was. Reads whose size grows with the data (scans over every chat, the
    /// whole knowledge base, the index rebuild) use [`Store::read_scan`] instead, so they never
    /// hold a runtime worker for long.
    ///
    /// On PostgreSQL a read runs inline too while the rows this node keeps for reads answer it
    /// (`pg::PgPool::read_kept`: most of a completion's reads); one that must wait on the
    /// network runs on the blocking pool, in a read-only `REPEATABLE READ` transaction of its own.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Snapshot) -> Result<T> + Send + 'static,
    {
        let caught = |txn: &Snapshot| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(txn)))
                .map_err(|_| Error::internal("a store read panicked"))?
        };
        match &*self.engine {
            Engine::Redb(handle) => handle.read(caught),
            Engine::Pg(pool, ..) => match pool.read_kept(|txn| caught(&Snapshot::of(txn))) {
                Some(out) => out,
                None => self.read_scan(f).await,
            },
        }
    }

    /// Record `key` of table `def` (a `u128`-keyed table of `R` records), `None` when there is
    /// none: a read of one record that most requests make first (the path's replica). On redb
    /// it is the shared snapshot's ([`Snapshot::record`]); on PostgreSQL a record this node
    /// keeps ([`record_cache`]: while its table is unwritten, as far as this node has heard),
    /// else read and kept. Errors as [`Store::read`].
    pub async fn record<R>(
        &self,
        def: redb::TableDefinition<'static, u128, &'static [u8]>,
        key: u128,
    ) -> Result<Option<Arc<R>>>
    where
        R: Record + Send + Sync + 'static,
    {
        use redb::TableHandle as _;
        let Engine::Pg(.., cache) = &*self.engine else {
            return self.read(move |txn| txn.record::<R>(def, key)).await;
        };
        if let Some(kept) = cache.get::<R>(def.name(), key) {
            return Ok(Some(kept));
        }
        let read_at = cache.now();
        let found = self.read(move |txn| txn.record::<R>(def, key)).await?;
        if let (Some(read_at), Some(found)) = (read_at, &found) {
            cache.keep(def.name(), key, read_at, found.clone());
        }
        Ok(found)
    }

    /// The knowledge-base outbox's last position ([`Sequence::Outbox`]: what an index that has
    /// applied every change committed so far has applied). On PostgreSQL this node keeps it
    /// between reads while `seq_kboutbox` is unwritten, as far as it has heard ([`record_cache`]):
    /// the position moves only in a transaction that appends to that table ([`kb::enqueue`]).
    /// Errors as [`Store::read`].
    pub async fn outbox_head(&self) -> Result<u64> {
        let read = |txn: &Snapshot| current_seq(&*txn.table(tables::SEQUENCES)?, Sequence::Outbox);
        let Engine::Pg(.., cache) = &*self.engine else {
            return self.read(read).await;
        };
        let outbox = kb::outbox_table_name();
        if let Some(head) = cache.get::<OutboxHead>(outbox, 0) {
            return Ok(head.0);
        }
        let read_at = cache.now();
        let head = self.read(read).await?;
        if let Some(read_at) = read_at {
            cache.keep(outbox, 0, read_at, Arc::new(OutboxHead(head)));
        }
        Ok(head)
    }

    /// A read transaction for one long read on the caller's thread (the online backup's
    /// snapshot, `crate::backup`): it sees the store as of the last commit for as long as it
    /// lives, while the writer keeps committing. Call it off the runtime's workers.
    ///
    /// Errors: on PostgreSQL, one that says to use `pg_dump` (the database is the operator's).
    pub fn snapshot(&self) -> Result<redb::ReadTransaction> {
        match &*self.engine {
            Engine::Redb(handle) => handle.begin_read(),
            Engine::Pg(..) => Err(Error::internal(
                "this server keeps its tables and uploaded files in PostgreSQL: back them up with pg_dump \
                 (the search index in the data directory is rebuilt from the tables)",
            )),
        }
    }

    /// Runs `f` in the shared read snapshot on the blocking pool: for reads whose cost grows
    /// with the stored data (see [`Store::read`]).
    pub async fn read_scan<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Snapshot) -> Result<T> + Send + 'static,
    {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || engine.read(f)).await.map_err(Error::internal)?
    }

    /// Applies `f` in the writer's next group commit and returns its result once durable.
    /// `f` may run more than once (when another write of its batch fails), so it must derive
    /// everything from the transaction it is given.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&WriteTransaction) -> Result<T> + Send + 'static,
    {
        let (job, rx) = writer::Job::new(f);
        self.submit(job, rx).await
    }

    /// [`Store::write`] for a write of a [`Grouped`] kind: applied in the writer's next group
    /// commit with the writes of its kind queued beside it, sharing the tables they open.
    pub async fn write_grouped<G: Grouped>(&self, write: G) -> Result<G::Output> {
        let (job, rx) = writer::Job::grouped(write);
        self.submit(job, rx).await
    }

    async fn submit<T>(&self, job: writer::Job, rx: tokio::sync::oneshot::Receiver<Result<T>>) -> Result<T> {
        self.writer.send(job).await.map_err(|_| Error::internal("store writer stopped"))?;
        rx.await.map_err(|_| Error::internal("store writer dropped the write"))?
    }
}

impl Store {
    /// [`Store::write`] for knowledge-base changes (outbox rows, ingestion jobs): wakes the
    /// indexer and the ingestion worker once the write is durable.
    pub async fn write_kb<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&WriteTransaction) -> Result<T> + Send + 'static,
    {
        let result = self.write(f).await;
        self.kb_written(result.is_ok());
        result
    }

    /// Removes the uploaded files that no record names any more ([`files::Files::sweep`]):
    /// called after a write that removed entries. Errors are logged (a file left behind is
    /// removed by a later sweep).
    pub async fn sweep_files(&self) {
        let store = self.clone();
        let swept = tokio::task::spawn_blocking(move || store.sweep_files_blocking()).await;
        if let Err(e) = swept.map_err(Error::internal).and_then(|r| r) {
            tracing::warn!(error = %e, "removing the files of deleted entries failed");
        }
    }

    /// [`Store::sweep_files`] on the calling thread (off the runtime's workers); returns how
    /// many files were removed.
    pub fn sweep_files_blocking(&self) -> Result<usize> {
        self.files.sweep(|| self.engine.read(|snapshot| files::recorded_names(snapshot)))
    }

    /// Wakes the indexer and the ingestion worker after a knowledge-base write that succeeded.
    fn kb_written(&self, ok: bool) {
        if ok {
            self.outbox_notify.notify_one();
            self.jobs_notify.notify_one();
        }
    }
}

/// Reads and decodes the record under `key`, if any.
pub fn get<'k, K, R, T>(table: &T, key: impl std::borrow::Borrow<K::SelfType<'k>>) -> Result<Option<R>>
where
    K: kv::StoreKey,
    R: Record,
    T: ReadableTable<K, &'static [u8]>,
{
    match table.get(key)? {
        Some(v) => Ok(Some(codec::decode(v.value())?)),
        None => Ok(None),
    }
}

/// Encodes `record` and inserts it under `key`.
pub fn put<'k, K, R>(
    table: &mut kv::Table<K, &'static [u8]>,
    key: impl std::borrow::Borrow<K::SelfType<'k>>,
    record: &R,
) -> Result<()>
where
    K: kv::StoreKey,
    R: Record,
{
    codec::with_encoded(record, |bytes| table.put(key, bytes))
}

/// A sequence of the `sequences` table: ids and positions issued in strictly increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sequence {
    /// Knowledge-base entry ids (`knowledgeBaseID`): sparse and time-ordered (see [`next_seq`]).
    KbEntry,
    /// Chat history item ids: sparse and time-ordered (see [`next_seq`]).
    Message,
    /// Positions in the knowledge-base outbox (`seq_kboutbox`; the index's commit payload).
    Outbox,
}

impl Sequence {
    /// The key of the sequence in the `sequences` table.
    pub fn key(self) -> &'static str {
        match self {
            Sequence::KbEntry => "kb_entry",
            Sequence::Message => "message",
            Sequence::Outbox => "outbox",
        }
    }
}

/// Issues the next value of sequence `seq`, strictly greater than every value it issued before.
///
/// [`Sequence::Outbox`] counts 1, 2, 3, …: it never leaves the server.
///
/// [`Sequence::KbEntry`] and [`Sequence::Message`] ids are shown to clients, and every
/// organization draws from the same sequence, so consecutive numbers would tell a tenant how
/// many entries or messages all the others wrote in between. They are sparse instead:
/// `max(last + 1, (now_ms << 10) | r)` with `r` random in `0..1024` ([`sparse_id`]). They stay
/// increasing (lists ordered by id keep their order; the small ids issued before this scheme
/// sort below every new one, so no migration), time-ordered, and below 2^53 until about the
/// year 2248, so JavaScript clients read them exactly. They are not counts.
pub fn next_seq(txn: &WriteTransaction, seq: Sequence) -> Result<u64> {
    next_seq_in(&mut txn.open_table(tables::SEQUENCES)?, seq)
}

/// The `sequences` table, open in a write transaction for a run of writes that take ids
/// (`service::history`).
pub struct Sequences<'t>(kv::Table<'t, &'static str, u64>);

impl<'t> Sequences<'t> {
    /// Opens the table in `txn`. Errors: the store's.
    pub fn open(txn: &'t WriteTransaction) -> Result<Sequences<'t>> {
        Ok(Sequences(txn.open_table(tables::SEQUENCES)?))
    }

    /// The next value of `seq` (see [`next_seq`]). Errors: the store's.
    pub fn next(&mut self, seq: Sequence) -> Result<u64> {
        next_seq_in(&mut self.0, seq)
    }
}

/// The knowledge-base outbox's last position ([`Sequence::Outbox`]) as of `txn`. Errors: the
/// store's.
pub fn outbox_seq(txn: &impl kv::Reads) -> Result<u64> {
    current_seq(&txn.read_table(tables::SEQUENCES)?, Sequence::Outbox)
}

/// [`next_seq`] in the open `sequences` table.
fn next_seq_in(table: &mut crate::store::kv::Table<&'static str, u64>, seq: Sequence) -> Result<u64> {
    let last = table.get(seq.key())?.map(|v| v.value()).unwrap_or(0);
    let next = match seq {
        Sequence::Outbox => last + 1,
        Sequence::KbEntry | Sequence::Message => {
            // A failed read of the system's random source leaves `r` at 0: the id is still
            // unique and increasing, only less sparse, which is no reason to refuse a write.
            let mut r = [0u8; 2];
            let _ = getrandom::fill(&mut r);
            sparse_id(last, now_ms(), u16::from_le_bytes(r))
        }
    };
    table.put(seq.key(), next)?;
    Ok(next)
}

/// Bits of a sparse id below the millisecond timestamp.
const SPARSE_RANDOM_BITS: u32 = 10;

/// The sparse id after `last` at `now_ms` (milliseconds since the Unix epoch; a reading before
/// the epoch counts as 0): `max(last + 1, (now_ms << 10) | (random % 1024))`.
fn sparse_id(last: u64, now_ms: i64, random: u16) -> u64 {
    let stamp = u64::try_from(now_ms).unwrap_or(0) << SPARSE_RANDOM_BITS;
    let low = u64::from(random) & ((1 << SPARSE_RANDOM_BITS) - 1);
    (stamp | low).max(last + 1)
}

/// Current value of sequence `seq` (0 if none was issued).
pub fn current_seq(table: &impl ReadableTable<&'static str, u64>, seq: Sequence) -> Result<u64> {
    Ok(table.get(seq.key())?.map(|v| v.value()).unwrap_or(0))
}

/// Key form of a UUID.
pub fn k(id: Uuid) -> u128 {
    id.as_u128()
}

/// Milliseconds since the Unix epoch, now (the server's [`crate::clock`]).
pub fn now_ms() -> i64 {
    crate::clock::now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_ids_carry_the_time_and_a_random_low_part() {
        let now = 1_700_000_000_000;
        assert_eq!(sparse_id(0, now, 5), (now as u64) << 10 | 5);
        assert_eq!(sparse_id(0, now, 1024 + 7), (now as u64) << 10 | 7, "r is taken in 0..1024");
        assert!(sparse_id(0, now, 0) > 1 << 40);
    }

    #[test]
    fn sparse_ids_never_go_back() {
        let now = 1_700_000_000_000;
        let first = sparse_id(0, now, 1023);
        // The same millisecond with a smaller random part, and a clock that stepped back.
        assert_eq!(sparse_id(first, now, 0), first + 1);
        assert_eq!(sparse_id(first, now - 60_000, 500), first + 1);
        // Small ids of earlier versions sort below every sparse id.
        assert!(sparse_id(41, now, 0) > 41);
    }

    #[test]
    fn sparse_ids_fit_53_bits_until_2248() {
        let year_2248 = chrono::NaiveDate::from_ymd_opt(2248, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap();
        let ms = year_2248.and_utc().timestamp_millis();
        assert!(sparse_id(0, ms, 1023) < 1 << 53);
    }
}
