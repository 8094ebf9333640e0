//! PostgreSQL as an engine for the store's tables (`serve --store postgres://…`): the mode in
//! which several nodes share one database (docs/architecture.md, "Beyond one machine"). The
//! services reach it through [`super::kv`], the same table API as on redb; [`super::Store`]
//! commits its writer's batches through [`PgTables::begin_write`] and reads through [`PgPool`].
//!
//! Every table of `store::tables` is a set of rows of one SQL table, `replicad_rows`: the
//! table's name (`tbl`), the key's sort bytes (`sk`, [`crate::store::sort_key`]: PostgreSQL
//! orders `bytea` bytewise, so a range of `sk` is the range redb would scan, in redb's order),
//! redb's own encoding of the key (`k`, decoded with `redb::Key::from_bytes`) and of the value
//! (`v`, the same bytes redb stores: `store::codec` records stay as they are). The primary key
//! is `(tbl, sk)`, so a point read is an index lookup and a range scan an index range scan.
//! Beside it: `replicad_files`, the uploaded files (`store::files`), and `replicad_buckets`, the
//! rate-limit buckets (`rate_limit`).
//!
//! Write transactions are few round trips. Their writes wait on the client, one per row (the
//! last write of a row is the one that counts). At the commit they go to the database with its
//! notifications, in one round trip. A transaction that has sent nothing yet (the writer's batch
//! whose rows were all kept) commits as one statement, `pg_temp.replicad_apply` over binary
//! arrays ([`COMMIT_CALL`], [`WRITE_SETUP`]), in an implicit `SERIALIZABLE` transaction: the
//! check of the kept rows it took, its removals and puts, and `pg_notify`, with neither `BEGIN`
//! nor `COMMIT` to send and no literal for PostgreSQL to lex and decode. One that has begun
//! sends them with `COMMIT` as a simple query (the statement `replicad_put`, prepared once per
//! connection, run over array literals of the removals and the puts, [`writes_sql`]). Before a
//! statement that reads more than one row (a range, a count) they go first, so that it sees
//! them, as the same statement over bound arrays ([`FLUSH`]). A point read of a row the
//! transaction already read or wrote is answered on the client; so is, on the store writer's
//! connection, a row its earlier committed transactions read or wrote ([`Kept`]: taken without
//! a round trip, and checked in the round trip that sends `BEGIN`, or the commit's; a row
//! another process changed meanwhile fails the batch as a serialization failure, run again
//! reading). Any other point read is a round trip. A transaction's `BEGIN` goes in the round
//! trip of its first point read (read transactions too), and on the writer's connection so do
//! the rows its last transactions read (read again: [`Kept`]). So the writer's batch of history
//! writes to chats it wrote before is one round trip (one statement: the check, the writes, the
//! notifications; the commit), plus the reads of rows it did not keep
//! (`tests/it/postgres_round_trips.rs` counts them); when another node wrote meanwhile, two
//! (`BEGIN` with the rows read again, sent before the batch is taken, so that the writes that
//! came while it waited for the writers' lock join it: [`PgTables::begin_write_now`]; the
//! commit) and a third for the flush ([`Conn::commit_begun`]); a read of one row is two round
//! trips (`BEGIN` and the read, `COMMIT`). Nothing is acknowledged before the commit is answered
//! and flushed.
//!
//! Write transactions are `SERIALIZABLE` and run again, from the start, when PostgreSQL reports
//! a serialization failure (SQLSTATE 40001) or a deadlock (40P01) ([`PgTables::write`], and the
//! store's writer for a whole batch), so two nodes that read and then write the same rows (a
//! counter, a unique name) never both commit on a stale read. Every write transaction takes the
//! writers' lock first ([`BEGIN_WRITE`]): the nodes' writers commit one at a time, without
//! failing on each other's rows. Reads are `REPEATABLE READ READ ONLY`: one snapshot, which
//! never fails on a conflict. The schema is versioned
//! ([`SCHEMA_VERSION`], one step per version); it is created or migrated in one transaction
//! under an advisory lock, and a database whose schema is newer than this build is refused.

use std::collections::{HashMap, VecDeque};

use foldhash::HashMap as Rows;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};
use redb::Value;

use super::kv::{self, AccessGuard, Entry, StoreKey};
use super::row_cache::{BoundedRows, RowCache, RowId};
use super::stamps::Stamps;
use crate::error::{Error, Result};

/// The version of the SQL schema this build writes and reads.
pub const SCHEMA_VERSION: i32 = SCHEMA_STEPS.len() as i32;

/// The schema's steps: step `i` brings version `i` to `i + 1`.
const SCHEMA_STEPS: [&str; 3] = [
    // 1: the rows of every table.
    "CREATE TABLE IF NOT EXISTS replicad_rows (
         tbl text NOT NULL, sk bytea NOT NULL, k bytea NOT NULL, v bytea NOT NULL,
         PRIMARY KEY (tbl, sk))",
    // 2: the uploaded files, in parts of `FILE_PART` bytes; `kept` once the record naming the
    // file was committed.
    "CREATE TABLE IF NOT EXISTS replicad_files (
         name text NOT NULL, part integer NOT NULL, data bytea NOT NULL,
         written_at timestamptz NOT NULL DEFAULT now(), kept boolean NOT NULL DEFAULT false,
         PRIMARY KEY (name, part))",
    // 3: the token buckets of the per-key rate limits (`rate_limit`): state worth
    // nothing after a crash, so not written to the WAL.
    "CREATE UNLOGGED TABLE IF NOT EXISTS replicad_buckets (
         key bytea PRIMARY KEY, tokens float8 NOT NULL, at timestamptz NOT NULL)",
];

/// The size of a part of an uploaded file (`replicad_files`): the most bytes one row holds.
const FILE_PART: usize = 1 << 20;

/// How many times a transaction is run before a serialization failure is given up on.
pub const ATTEMPTS: u32 = 50;

/// The longest pause before a transaction is run again (the pause doubles from 100 µs up to it,
/// and a random part of it is taken, so that transactions that collided do not collide again).
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// Key of the advisory lock held while the schema is created or migrated.
const MIGRATION_LOCK: i64 = 0x7265_706c_6963_6164; // "replicad"

/// Rows a range scan fetches first from one end; each further fetch from that end doubles, up
/// to [`MAX_PAGE`] (a listing that takes 20 rows reads one small page; a full scan reads few).
const FIRST_PAGE: i64 = 64;
const MAX_PAGE: i64 = 4096;

/// A row as a range fetches it: its sort key, key and value bytes.
type RawRow = (Vec<u8>, Vec<u8>, Vec<u8>);

/// Rows fetched from one end of a range, before it hands them out.
type Buffered = VecDeque<RawRow>;

/// Marks a type as holding `K` and `V` only by name (so tables are `Send` and `Sync` whatever
/// the key and value types borrow).
type Types<K, V> = PhantomData<fn() -> (K, V)>;

/// A connection to the database holding the tables, used by one thread at a time. Its
/// transactions are [`PgTables::write`] and [`PgTables::read`]; the tables they open are
/// [`kv`]'s, the same the services use on redb.
pub struct PgTables {
    conn: Arc<Mutex<Conn>>,
    url: String,
}

/// The connection and the statements it prepared (each SQL text is prepared once per
/// connection, so a query is one round trip).
struct Conn {
    client: Client,
    statements: HashMap<String, Statement>,
    /// The channels the write transaction in progress notifies when it commits
    /// ([`super::notify`]).
    notify: Vec<&'static str>,
    /// The `BEGIN` of the transaction in progress while it is not sent yet: it goes with the
    /// transaction's first statement ([`Conn::begin`], [`PgTable::get`]).
    unsent_begin: Option<&'static str>,
    /// The write transaction in progress: what it has read and written so far; `None` outside
    /// a write transaction.
    write: Option<Written>,
    /// The rows the writer's connection keeps between its transactions ([`PgTables::keep_rows`]);
    /// `None` on other connections.
    kept: Option<Kept>,
    /// What the read transaction in progress takes from and gives to the rows its node keeps
    /// for reads ([`RowCache`]).
    reads: Reads,
    /// [`WRITE_SETUP`] was run on this connection.
    set_up: bool,
}

/// A read transaction's use of the rows kept for reads ([`RowCache`]): while it has sent
/// nothing, a point read takes a kept row; once it has begun, it checks the rows it took
/// ([`Conn::opened`]) and keeps the rows it reads.
#[derive(Default)]
struct Reads {
    /// The rows kept for reads, on a connection of a pool that keeps them.
    cache: Option<Arc<RowCache>>,
    /// The tables of the rows taken so far, with the stamps they were read at.
    taken: Vec<(Arc<str>, u64)>,
    /// The stamp taken before the transaction's `BEGIN` was sent: what the rows it reads are
    /// kept with.
    begun_at: Option<u64>,
    /// A row taken was no longer fresh once the transaction began: it must run again without
    /// kept rows.
    stale: bool,
    /// The transaction may only read kept rows: it sends nothing ([`PgPool::read_kept`]).
    offline: bool,
    /// The transaction, [`Reads::offline`], needed to send something: what it answered is void.
    needed: bool,
}

/// The rows a writer's connection keeps between its transactions: each row its committed
/// transactions read or wrote, as they left it. A transaction takes a row from here instead of
/// reading it (no round trip) while it has sent nothing yet, and checks, in the round trip that
/// sends its `BEGIN`, that every row it took is still so ([`expect_sql`]): a row another process
/// changed meanwhile fails the transaction as a serialization failure, and the writer runs its
/// batch again, reading. Emptied when another process's commit is heard ([`Stamps::foreign`]),
/// and by any transaction that sent something and did not commit.
///
/// Beside them, which rows its last committed transactions read (`recent`): the batches of one
/// kind read the same rows (a chat's, the message sequence, the passages of the questions asked
/// lately), so a transaction that must read from the database (its rows were emptied: another
/// node wrote) reads them all again with its first read, in the round trip that sends its
/// `BEGIN` ([`Conn::begin_with_get`]), instead of one round trip each while it holds the
/// writers' lock ([`BEGIN_WRITE`]).
struct Kept {
    stamps: Arc<Stamps>,
    /// At most [`MAX_KEPT_ROWS`] rows and [`MAX_KEPT_BYTES`] bytes.
    rows: BoundedRows<()>,
    /// [`Stamps::foreign`] when `rows` were last checked against it.
    foreign: Option<u64>,
    /// The rows the last [`READ_AGAIN_FOR`] committed transactions read, with how many
    /// transactions ago each was read last; at most [`MAX_READ_AGAIN`].
    recent: Rows<RowId, u32>,
}

/// Most rows a writer's connection keeps between its transactions.
const MAX_KEPT_ROWS: usize = 4096;
const MAX_KEPT_BYTES: usize = 4 << 20;

/// Most rows of the last transactions a write transaction reads again with its first read.
const MAX_READ_AGAIN: usize = 256;

/// How many committed transactions a row read is read again for ([`Kept`]).
const READ_AGAIN_FOR: u32 = 4;

/// The `BEGIN` of a write transaction, and the writers' lock: every write transaction takes it
/// first, so that the write transactions of all nodes run one at a time (`replicad_schema` in
/// `EXCLUSIVE` mode, which lets plain reads of it pass). Taken right after `BEGIN`, before any
/// statement that takes the transaction's snapshot (a `LOCK` does not), so a transaction that
/// waited for another's commit sees it and fails on nothing it wrote. Without it, the batches of
/// several nodes writing the same rows (a chat's, the message sequence) waited for each other's row
/// locks *after* their snapshots and failed on them, one batch run again for each one committed
/// (measured: a fifth of the transactions of three nodes rolled back, and each node's writes in
/// smaller batches). The batches of the nodes commit one after another either way (they write the
/// same hot rows); what the lock removes is the failed runs. Correctness does not rest on it: the
/// transactions stay `SERIALIZABLE`.
const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE; LOCK TABLE replicad_schema IN EXCLUSIVE MODE";
/// The `BEGIN` of a read transaction.
const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// What a write transaction holds on the client's side, so that a batch is a few round trips
/// (the module docs: "Write transactions").
#[derive(Default)]
struct Written {
    /// Each row this transaction has read or written, as it now is (`None`: no row): a point
    /// read of a row found here costs no round trip.
    known: Rows<RowId, Option<Vec<u8>>>,
    /// The writes not sent yet, one per row: the key and value put, or `None` for a removal.
    pending: Pending,
    /// The bytes of keys and values in `pending` (sent early past [`MAX_PENDING_BYTES`]).
    pending_bytes: usize,
    /// The rows taken from the connection's [`Kept`] rows, to be checked when `BEGIN` is sent.
    assumed: Vec<(RowId, Option<Vec<u8>>)>,
    /// The rows this transaction read (from the database or the kept rows): what a writer's
    /// connection keeps of it once committed (a row only written, such as a new history item,
    /// is seldom read again).
    read: Vec<RowId>,
    /// The rows read again with the first read ([`Conn::begin_with_rows`]) that the
    /// transaction has not asked for yet: known, but counted as read (and so read again by the
    /// next transaction) only once asked for.
    unasked: Rows<RowId, ()>,
    /// The tables this transaction wrote (named in its commit's notification).
    tables: Vec<Arc<str>>,
    /// Another process wrote since this connection's last transaction ([`Kept::check_foreign`]):
    /// its commit releases its locks before its flush ([`Conn::commit_begun`]).
    shared: bool,
}

/// A write transaction's writes not sent yet: per row, the key and value put, or `None` for a
/// removal.
type Pending = Rows<RowId, Option<(Vec<u8>, Vec<u8>)>>;

/// Most bytes of keys and values a write transaction keeps unsent before it sends them (a
/// migration that rewrites a whole table does not hold it all in memory).
const MAX_PENDING_BYTES: usize = 16 << 20;

/// The statement that sends a write transaction's pending writes: the removals and the puts
/// of distinct rows, in one round trip (the data-modifying `WITH` parts run whether or not the
/// `SELECT` reads them).
const FLUSH: &str = "WITH gone AS (DELETE FROM replicad_rows r USING unnest($1::text[], $2::bytea[]) AS d(tbl, sk)
                                 WHERE r.tbl = d.tbl AND r.sk = d.sk),
                          put AS (INSERT INTO replicad_rows (tbl, sk, k, v)
                                  SELECT * FROM unnest($3::text[], $4::bytea[], $5::bytea[], $6::bytea[])
                                  ON CONFLICT (tbl, sk) DO UPDATE SET k = EXCLUDED.k, v = EXCLUDED.v)
                     SELECT 1";

/// What a connection that writes prepares once, outside any transaction, so that a commit's
/// statements are parsed and planned once per connection rather than once per commit:
/// `replicad_put`, [`FLUSH`] as a prepared statement (run over array literals, [`writes_sql`], by a
/// commit whose transaction has begun); `pg_temp.replicad_expect(tbl, sk, v)`, which reads the rows
/// `(tbl[i], sk[i])` and fails as a serialization failure (SQLSTATE 40001) when one's value is not
/// `v[i]` (`NULL`: no row); and `pg_temp.replicad_apply(…)` ([`COMMIT_CALL`]), the whole of a
/// transaction that has sent nothing yet as one statement: the writers' lock ([`BEGIN_WRITE`]:
/// taken after the implicit transaction's snapshot, so a transaction that waited for it fails the
/// check, or its writes, when the other changed its rows), that check, the removals, the puts, and
/// `pg_notify` of each channel with its payload. The functions' statements keep one plan
/// (`force_generic_plan`: a point lookup by the primary key, or an insert from `unnest`, whatever
/// the table's size); the other statements are planned anew at each run (`force_custom_plan`): a
/// plan made once, when the table was small, scanned it whole once it had grown (twice PostgreSQL's
/// CPU per write, measured). Transactions that begin without `BEGIN` (the single statement of
/// [`COMMIT_CALL`], an implicit transaction) are `SERIALIZABLE`, as the connection's `BEGIN`s.
const WRITE_SETUP: [&str; 2] = [
    "PREPARE replicad_put (text[], bytea[], text[], bytea[], bytea[], bytea[]) AS ",
    "; CREATE FUNCTION pg_temp.replicad_expect(t text[], s bytea[], v bytea[]) RETURNS void
         LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $replicad$
         DECLARE held bytea;
         BEGIN
             FOR i IN 1 .. coalesce(array_length(t, 1), 0) LOOP
                 SELECT r.v INTO held FROM replicad_rows r WHERE r.tbl = t[i] AND r.sk = s[i];
                 IF held IS DISTINCT FROM v[i] THEN
                     RAISE EXCEPTION 'a row changed since this node kept it' USING ERRCODE = 'serialization_failure';
                 END IF;
             END LOOP;
         END $replicad$;
     CREATE FUNCTION pg_temp.replicad_apply(et text[], es bytea[], ev bytea[], gt text[], gs bytea[],
                                             pt text[], ps bytea[], pk bytea[], pv bytea[],
                                             channels text[], payloads text[]) RETURNS void
         LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $replicad$
         BEGIN
             LOCK TABLE replicad_schema IN EXCLUSIVE MODE;
             PERFORM pg_temp.replicad_expect(et, es, ev);
             FOR i IN 1 .. coalesce(array_length(gt, 1), 0) LOOP
                 DELETE FROM replicad_rows WHERE tbl = gt[i] AND sk = gs[i];
             END LOOP;
             INSERT INTO replicad_rows (tbl, sk, k, v) SELECT * FROM unnest(pt, ps, pk, pv)
                 ON CONFLICT (tbl, sk) DO UPDATE SET k = EXCLUDED.k, v = EXCLUDED.v;
             FOR i IN 1 .. coalesce(array_length(channels, 1), 0) LOOP
                 PERFORM pg_notify(channels[i], payloads[i]);
             END LOOP;
         END $replicad$;
     SET plan_cache_mode TO force_custom_plan;
     SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
];

/// The statement that commits a write transaction that has sent nothing yet, in one round trip
/// (an implicit transaction, `SERIALIZABLE` by [`WRITE_SETUP`]): the rows it took from the kept
/// ones (table names, sort keys, values: [`expect_sql`]), its removals (table names, sort
/// keys), its puts (table names, sort keys, keys, values), and the channels to notify with their
/// payloads, as binary arrays.
const COMMIT_CALL: &str = "SELECT pg_temp.replicad_apply($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

/// The connection of a transaction in progress, as [`kv::WriteTransaction::Pg`] and
/// [`kv::ReadTransaction::Pg`] hold it.
#[derive(Clone)]
pub struct Txn {
    conn: Arc<Mutex<Conn>>,
}

/// A table of a PostgreSQL transaction: its rows of `replicad_rows`.
pub struct PgTable<K, V> {
    conn: Arc<Mutex<Conn>>,
    name: Arc<str>,
    types: Types<K, V>,
}

/// A range scan of a [`PgTable`], fetched a page at a time from whichever end is iterated.
pub struct PgRange<K, V> {
    conn: Arc<Mutex<Conn>>,
    name: Arc<str>,
    /// The bounds of the rows not fetched yet (sort keys).
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Rows fetched from the low end (ascending) and from the high end (ascending too).
    front: Buffered,
    back: Buffered,
    /// Every row within the bounds has been fetched (or a fetch failed).
    done: bool,
    page: i64,
    types: Types<K, V>,
}

impl PgTables {
    /// Connects to `url` (`postgres://user@host:port/database`, no TLS) and creates or
    /// migrates the schema. Errors: a 500 whose cause is the `postgres::Error` when the
    /// database cannot be reached, or whose text says so when its schema is newer than
    /// [`SCHEMA_VERSION`].
    pub fn connect(url: &str) -> Result<PgTables> {
        let tables = PgTables::open(url)?;
        lock(&tables.conn).migrate()?;
        Ok(tables)
    }

    /// Connects to `url` without looking at the schema (a further connection of a
    /// [`PgPool`]).
    fn open(url: &str) -> Result<PgTables> {
        let client = Client::connect(url, NoTls).map_err(Error::caused_by)?;
        let conn = Conn {
            client,
            statements: HashMap::new(),
            notify: Vec::new(),
            unsent_begin: None,
            write: None,
            kept: None,
            reads: Reads::default(),
            set_up: false,
        };
        let conn = Arc::new(Mutex::new(conn));
        Ok(PgTables { conn, url: url.to_string() })
    }

    /// Runs `f` in a `SERIALIZABLE` transaction and commits; runs it again from the start (up
    /// to 50 times, after a growing random pause: [`MAX_BACKOFF`]) while the transaction fails
    /// on a serialization failure or a deadlock. `f` must therefore have no effect outside the
    /// transaction. Errors: `f`'s, or the database's.
    pub fn write<R>(&mut self, mut f: impl FnMut(&kv::WriteTransaction) -> Result<R>) -> Result<R> {
        let mut attempt = 1;
        loop {
            let txn = self.begin_write()?;
            let run = match f(&txn) {
                Ok(out) => txn.commit().map(|()| out),
                Err(e) => {
                    // A failed rollback leaves the connection broken, and its next statement says so.
                    let _ = txn.abort();
                    Err(e)
                }
            };
            match run {
                Err(e) if attempt < ATTEMPTS && must_retry(&e) => {
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Begins a `SERIALIZABLE` transaction; the caller commits or aborts it
    /// ([`kv::WriteTransaction::commit`]), and runs it again when [`must_retry`] says so. No
    /// round trip yet: `BEGIN` is sent with the transaction's first read, or at its commit.
    ///
    /// A connection the server closed (a restart of PostgreSQL, a dropped link) is replaced by
    /// a new one first, so a long-lived writer recovers by itself.
    pub fn begin_write(&mut self) -> Result<kv::WriteTransaction> {
        if lock(&self.conn).client.is_closed() {
            let stamps = lock(&self.conn).kept.take().map(|k| k.stamps);
            *self = PgTables::open(&self.url)?;
            if let Some(stamps) = stamps {
                self.keep_rows(stamps);
            }
        }
        let mut conn = lock(&self.conn);
        if !conn.set_up {
            let setup = [WRITE_SETUP[0], FLUSH, WRITE_SETUP[1]].concat();
            conn.client.batch_execute(&setup).map_err(Error::caused_by)?;
            conn.set_up = true;
        }
        let shared = conn.kept.as_mut().is_some_and(Kept::check_foreign);
        conn.write = Some(Written { shared, ..Written::default() });
        conn.unsent_begin = Some(BEGIN_WRITE);
        drop(conn);
        Ok(kv::WriteTransaction::Pg(Txn { conn: self.conn.clone() }))
    }

    /// Whether another process committed since this connection's last write transaction began
    /// (as far as its notifications have arrived, [`Kept::foreign_since`]): the next one is
    /// likely to wait for the writers' lock ([`BEGIN_WRITE`]). `false` on a connection that
    /// keeps no rows.
    pub fn others_wrote(&self) -> bool {
        lock(&self.conn).kept.as_ref().is_some_and(|k| k.foreign_since().is_some())
    }

    /// [`PgTables::begin_write`], its `BEGIN` and the writers' lock sent at once, with the rows
    /// its last transactions read ([`Kept`]), in one round trip that returns once the lock is
    /// taken: the store's writer, when other nodes write, begins so before it takes the writes
    /// waiting for it, so that those that came while it waited go in the same batch. Errors:
    /// the database's (the transaction is then rolled back).
    pub fn begin_write_now(&mut self) -> Result<kv::WriteTransaction> {
        let txn = self.begin_write()?;
        let sent = lock(&self.conn).begin_with_recent();
        if let Err(e) = sent {
            // A failed rollback leaves the connection broken, and its next statement says so.
            let _ = txn.abort();
            return Err(e);
        }
        Ok(txn)
    }

    /// Has this connection (the store's writer's) keep the rows of its write transactions
    /// between them ([`Kept`]), and stamp the tables it commits in `stamps` (before the commit
    /// returns), naming them in its notifications ([`Stamps::payload`]).
    pub fn keep_rows(&mut self, stamps: Arc<Stamps>) {
        let foreign = stamps.foreign();
        let rows = BoundedRows::new(MAX_KEPT_ROWS, MAX_KEPT_BYTES);
        lock(&self.conn).kept = Some(Kept { stamps, rows, foreign, recent: Rows::default() });
    }

    /// Runs `f` in a read-only `REPEATABLE READ` transaction: one snapshot of the database,
    /// which never fails on a conflict. Errors: `f`'s, or the database's.
    pub fn read<R>(&mut self, f: impl FnOnce(&kv::ReadTransaction) -> Result<R>) -> Result<R> {
        self.read_owned(|txn| f(&txn))
    }

    /// [`PgTables::read`], handing `f` the transaction itself (a [`super::Snapshot`] owns it).
    /// Its `BEGIN` goes with its first statement (a read of one row: both in one round trip).
    fn read_owned<R>(&mut self, f: impl FnOnce(kv::ReadTransaction) -> Result<R>) -> Result<R> {
        self.read_sending(f, true)
    }

    /// [`PgTables::read_owned`]; when `may_send` is false, a read that a kept row does not
    /// answer fails instead of sending, and the transaction is marked ([`Reads::needed`]).
    fn read_sending<R>(&mut self, f: impl FnOnce(kv::ReadTransaction) -> Result<R>, may_send: bool) -> Result<R> {
        let mut conn = lock(&self.conn);
        conn.unsent_begin = Some(BEGIN_READ);
        conn.reads = Reads { cache: conn.reads.cache.take(), offline: !may_send, ..Reads::default() };
        drop(conn);
        let txn = Txn { conn: self.conn.clone() };
        let out = f(kv::ReadTransaction::Pg(txn.clone()));
        let end = txn.end(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
        let out = out?;
        end.map(|()| out)
    }
}

/// Connections to one database, kept between reads: each read takes one for its transaction
/// and gives it back. At most [`MAX_OPEN`] are open: a read that finds none idle and the most
/// open waits for one, up to [`WAIT_FOR_IDLE`], before it opens one more (so a burst of reads
/// does not open and close connections, each a new PostgreSQL backend, at every request; and a
/// read made while another is held never waits long).
pub struct PgPool {
    url: String,
    /// The rows its reads keep between them ([`PgPool::keep_rows`]).
    cache: Option<Arc<RowCache>>,
    idle: Mutex<Idle>,
    /// Signalled when a connection is given back or closed.
    freed: std::sync::Condvar,
}

/// The idle connections of a [`PgPool`], and how many it has open (idle or in use).
struct Idle {
    conns: Vec<PgTables>,
    open: usize,
}

impl Drop for PgPool {
    /// Closes the idle connections on a thread of its own: the synchronous client closes a
    /// connection by running a runtime of its own, which cannot start on a runtime's thread
    /// (where the last `Store` is often dropped).
    fn drop(&mut self) {
        let idle = std::mem::take(&mut self.lock_idle().conns);
        let _ = std::thread::spawn(move || drop(idle)).join();
    }
}

/// Most connections a [`PgPool`] keeps open.
const MAX_OPEN: usize = 32;

/// How long a read waits for an idle connection when [`MAX_OPEN`] are in use.
const WAIT_FOR_IDLE: Duration = Duration::from_millis(100);

impl PgPool {
    /// Connects to `url`, creating or migrating the schema ([`PgTables::connect`]).
    pub fn connect(url: &str) -> Result<PgPool> {
        let first = PgTables::connect(url)?;
        let idle = Mutex::new(Idle { conns: vec![first], open: 1 });
        Ok(PgPool { url: url.to_string(), cache: None, idle, freed: std::sync::Condvar::new() })
    }

    /// Has the pool's read transactions keep the rows they read between them, checked against
    /// `stamps` ([`RowCache`]).
    pub fn keep_rows(&mut self, stamps: Arc<Stamps>) {
        self.cache = Some(Arc::new(RowCache::new(stamps)));
    }

    fn lock_idle(&self) -> MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An idle connection, or a new one while fewer than [`MAX_OPEN`] are open (or after
    /// [`WAIT_FOR_IDLE`]); the caller gives it back ([`PgPool::give_back`]) or reports it
    /// closed ([`PgPool::closed`]).
    fn take(&self) -> Result<PgTables> {
        let deadline = std::time::Instant::now() + WAIT_FOR_IDLE;
        let mut idle = self.lock_idle();
        loop {
            if let Some(conn) = idle.conns.pop() {
                return Ok(conn);
            }
            let now = std::time::Instant::now();
            if idle.open < MAX_OPEN || now >= deadline {
                idle.open += 1;
                break;
            }
            idle = self.freed.wait_timeout(idle, deadline - now).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
        drop(idle);
        PgTables::open(&self.url).inspect_err(|_| self.closed())
    }

    /// Counts a connection taken from the pool as closed.
    fn closed(&self) {
        self.lock_idle().open -= 1;
        self.freed.notify_one();
    }

    /// Runs `f` with a connection of the pool, giving it back after (or, when `f` panics,
    /// dropping it: it may be in the middle of a transaction).
    fn with_pooled<R>(&self, f: impl FnOnce(&mut PgTables) -> Result<R>) -> Result<R> {
        let conn = self.take()?;
        self.with_taken(conn, f)
    }

    /// Runs `f` with `conn`, taken from the pool, as [`PgPool::with_pooled`] does.
    fn with_taken<T>(&self, mut conn: PgTables, f: impl FnOnce(&mut PgTables) -> T) -> T {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut conn))) {
            Ok(out) => {
                self.give_back(conn);
                out
            }
            Err(panic) => {
                self.closed();
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// A connection of its own (not pooled: the store's writer keeps one for its life).
    pub fn dedicated(&self) -> Result<PgTables> {
        PgTables::open(&self.url)
    }

    /// Runs `f` in a read-only `REPEATABLE READ` transaction on an idle connection (or a new
    /// one: [`PgPool::take`]), its point reads answered from the rows the pool keeps while it
    /// has sent nothing ([`RowCache`]); runs it again without them when a row it took changed
    /// before its snapshot was taken. Blocks on the network: call it off the runtime's workers.
    pub fn read<R>(&self, f: impl Fn(kv::ReadTransaction) -> Result<R>) -> Result<R> {
        self.with_pooled(|conn| {
            lock(&conn.conn).reads.cache = self.cache.clone();
            let out = conn.read_owned(&f);
            let mut state = lock(&conn.conn);
            if !std::mem::take(&mut state.reads.stale) {
                return out;
            }
            state.reads.cache = None;
            drop(state);
            conn.read_owned(&f)
        })
    }

    /// Runs `f` as [`PgPool::read`] does, while the rows kept for reads answer each of its reads
    /// ([`RowCache`]), without a round trip; `None` (nothing sent) when one is not kept, when
    /// the pool keeps no rows, or when no connection is idle. Never blocks on the network: the
    /// store runs it on the runtime's worker before it hands a read to the blocking pool
    /// (`Store::read`), as most of a completion's reads are answered here.
    pub fn read_kept<R>(&self, f: impl Fn(kv::ReadTransaction) -> Result<R>) -> Option<Result<R>> {
        let cache = self.cache.clone()?;
        let conn = self.lock_idle().conns.pop()?;
        self.with_taken(conn, |conn| {
            lock(&conn.conn).reads.cache = Some(cache);
            let out = conn.read_sending(&f, false);
            let reads = std::mem::take(&mut lock(&conn.conn).reads);
            (!reads.needed).then_some(out)
        })
    }

    /// Keeps `conn` for later use, unless it is closed or [`MAX_OPEN`] are kept.
    fn give_back(&self, conn: PgTables) {
        let mut idle = self.lock_idle();
        if !lock(&conn.conn).client.is_closed() && idle.conns.len() < MAX_OPEN {
            idle.conns.push(conn);
        } else {
            idle.open -= 1;
        }
        drop(idle);
        self.freed.notify_one();
    }
}

/// The uploaded files kept in the database (`replicad_files`, `store::files`): each file is
/// written once, in one transaction of its own on a pooled connection (never the writer's, so a
/// large upload holds no other write back), read whole, and removed by name.
impl PgPool {
    /// Runs `f` on an idle connection (or a new one), outside any transaction of the store's.
    fn with_conn<R>(&self, f: impl FnOnce(&mut Conn) -> Result<R>) -> Result<R> {
        self.with_pooled(|conn| f(&mut lock(&conn.conn)))
    }

    /// Writes file `name` (its parts in one transaction), durable when this returns.
    /// Errors: 507 when the database's disk is full, else the database's.
    pub fn put_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        self.with_conn(|conn| {
            let mut tx = conn.client.transaction().map_err(Error::caused_by)?;
            // An empty file is one empty part (so that it exists).
            let parts: Vec<&[u8]> = if bytes.is_empty() { vec![bytes] } else { bytes.chunks(FILE_PART).collect() };
            for (part, data) in parts.into_iter().enumerate() {
                let part = part as i32;
                tx.execute("INSERT INTO replicad_files (name, part, data) VALUES ($1, $2, $3)", &[&name, &part, &data])
                    .map_err(disk_full_or)?;
            }
            tx.commit().map_err(disk_full_or)
        })
    }

    /// The bytes of file `name`; `None` when it has no part.
    pub fn get_file(&self, name: &str) -> Result<Option<Vec<u8>>> {
        self.with_conn(|conn| {
            let rows = conn.query("SELECT data FROM replicad_files WHERE name = $1 ORDER BY part", &[&name])?;
            if rows.is_empty() {
                return Ok(None);
            }
            Ok(Some(rows.iter().flat_map(|r| r.get::<_, &[u8]>(0).to_vec()).collect()))
        })
    }

    /// Removes the files `names`.
    pub fn remove_files(&self, names: &[String]) -> Result<()> {
        self.with_conn(|conn| conn.execute("DELETE FROM replicad_files WHERE name = ANY($1)", &[&names]).map(drop))
    }

    /// Marks file `name` as named by a committed record.
    pub fn keep_file(&self, name: &str) -> Result<()> {
        self.with_conn(|conn| conn.execute("UPDATE replicad_files SET kept = true WHERE name = $1", &[&name]).map(drop))
    }

    /// The names of the files that were kept ([`PgPool::keep_file`]) or whose writing began more
    /// than `age` ago.
    pub fn file_names(&self, age: Duration) -> Result<Vec<String>> {
        let seconds = age.as_secs_f64();
        self.with_conn(|conn| {
            let sql = "SELECT DISTINCT name FROM replicad_files \
                       WHERE kept OR written_at < now() - make_interval(secs => $1)";
            Ok(conn.query(sql, &[&seconds])?.iter().map(|r| r.get(0)).collect())
        })
    }
}

impl PgPool {
    /// Replaces the token bucket `key` (`replicad_buckets`) with what `f` answers from it, under
    /// the row's lock, so that nodes taking tokens from one bucket at once take each token once.
    /// `f` gets the bucket's tokens and the seconds since it was written (on the database's
    /// clock, which all nodes share), `None` when there is no bucket yet; what it answers is
    /// stored, stamped with that clock. One transaction of three statements.
    pub fn update_bucket(&self, key: &[u8], f: impl FnOnce(Option<(f64, f64)>) -> f64) -> Result<()> {
        // A new row's tokens are NaN: "no bucket yet". The no-op update takes the row's lock.
        let lock_row = "INSERT INTO replicad_buckets (key, tokens, at) VALUES ($1, 'NaN', clock_timestamp()) \
                        ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key \
                        RETURNING tokens, EXTRACT(EPOCH FROM clock_timestamp() - at)::float8, clock_timestamp()";
        self.with_conn(|conn| {
            conn.client.batch_execute("BEGIN; SET LOCAL synchronous_commit TO off").map_err(Error::caused_by)?;
            let done = (|| {
                let row = conn.query(lock_row, &[&key])?.pop().ok_or_else(|| Error::internal("no bucket row"))?;
                let (tokens, seconds): (f64, f64) = (row.get(0), row.get(1));
                let at: std::time::SystemTime = row.get(2);
                let left = f((!tokens.is_nan()).then_some((tokens, seconds.max(0.0))));
                conn.execute("UPDATE replicad_buckets SET tokens = $2, at = $3 WHERE key = $1", &[&key, &left, &at])?;
                Ok(())
            })();
            let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
            let ended = conn.client.batch_execute(end).map_err(Error::caused_by);
            done.and(ended)
        })
    }
}

/// Runs `f` where the synchronous client may block: the blocking pool, or a thread of its own
/// outside a runtime (never a runtime's worker, where the client's own runtime cannot start).
pub fn off_runtime(f: impl FnOnce() + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(f)),
        Err(_) => drop(std::thread::spawn(f)),
    }
}

/// A database error, as 507 when it says the disk is full.
fn disk_full_or(e: postgres::Error) -> Error {
    match e.code() {
        Some(c) if *c == SqlState::DISK_FULL => Error::insufficient_storage(),
        _ => Error::caused_by(e),
    }
}

fn lock(conn: &Mutex<Conn>) -> MutexGuard<'_, Conn> {
    conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Conn {
    /// Creates the schema, or brings it to [`SCHEMA_VERSION`] ([`SCHEMA_STEPS`]), in one
    /// transaction under an advisory lock (nodes starting together do it once). Errors: the
    /// database's, or a schema newer than this build.
    fn migrate(&mut self) -> Result<()> {
        let mut tx = self.client.transaction().map_err(Error::caused_by)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(Error::caused_by)?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS replicad_schema (version integer NOT NULL)")
            .map_err(Error::caused_by)?;
        let found: Option<i32> =
            tx.query_opt("SELECT version FROM replicad_schema", &[]).map_err(Error::caused_by)?.map(|r| r.get(0));
        let from = found.unwrap_or(0);
        if from > SCHEMA_VERSION {
            return Err(Error::internal(format!(
                "the database's schema is version {from}, newer than this build's {SCHEMA_VERSION}: \
                 run the newer replicad"
            )));
        }
        for step in &SCHEMA_STEPS[from as usize..] {
            tx.batch_execute(step).map_err(Error::caused_by)?;
        }
        let set = match found {
            None => "INSERT INTO replicad_schema (version) VALUES ($1)",
            Some(_) => "UPDATE replicad_schema SET version = $1",
        };
        tx.execute(set, &[&SCHEMA_VERSION]).map_err(Error::caused_by)?;
        tx.commit().map_err(Error::caused_by)
    }

    /// The rows of `sql` (prepared on first use on this connection).
    fn query(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let statement = self.statement(sql)?;
        self.client.query(&statement, params).map_err(Error::caused_by)
    }

    /// Runs `sql` (prepared on first use on this connection); the rows it changed.
    fn execute(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let statement = self.statement(sql)?;
        self.client.execute(&statement, params).map_err(Error::caused_by)
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let prepared = self.client.prepare(sql).map_err(Error::caused_by)?;
        self.statements.insert(sql.to_string(), prepared.clone());
        Ok(prepared)
    }
}

/// The pause after the `attempt`-th failed run: a random part ("full jitter") of 100 µs doubled
/// per attempt, at most [`MAX_BACKOFF`].
pub fn backoff(attempt: u32) -> Duration {
    let ceiling = Duration::from_micros(100).saturating_mul(1 << attempt.min(16)).min(MAX_BACKOFF);
    let mut random = [0u8; 4];
    let fraction = match getrandom::fill(&mut random) {
        Ok(()) => f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX),
        Err(_) => 0.5,
    };
    ceiling.mul_f64(fraction)
}

/// Whether `e` is a serialization failure or a deadlock: the transaction may succeed if run again.
pub fn must_retry(e: &Error) -> bool {
    let code = e.cause::<postgres::Error>().and_then(postgres::Error::code);
    code.is_some_and(|c| *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
}

impl Conn {
    /// Sends the transaction's `BEGIN` if it was not sent yet ([`Conn::opening`]).
    fn begin(&mut self) -> Result<()> {
        match self.opening()? {
            Some(sql) => {
                self.client.batch_execute(&sql).map_err(Error::caused_by)?;
                self.opened()
            }
            None => Ok(()),
        }
    }

    /// The transaction's unsent `BEGIN` and, in a write transaction that took kept rows
    /// ([`Conn::assume`]), the check that they are still so ([`expect_sql`]), as the SQL to send
    /// before anything else; `None` when it was sent. From then on, nothing more is taken from
    /// the kept rows: the transaction reads in its snapshot. Errors: the transaction may read
    /// only kept rows ([`Reads::offline`]); it is marked as having needed more ([`Reads::needed`]).
    fn opening(&mut self) -> Result<Option<String>> {
        let Some(begin) = self.unsent_begin else { return Ok(None) };
        if self.reads.offline {
            self.reads.needed = true;
            return Err(Error::internal("a read that kept rows do not answer"));
        }
        self.unsent_begin = None;
        let mut sql = String::from(begin);
        match &mut self.write {
            Some(w) => expect_sql(&mut sql, std::mem::take(&mut w.assumed)),
            None => self.reads.begun_at = self.reads.cache.as_ref().and_then(|c| c.now()),
        }
        Ok(Some(sql))
    }

    /// After the round trip that sent a read transaction's `BEGIN`: whether every row it took
    /// from the rows kept for reads is still fresh, now that its snapshot is taken. Errors: one
    /// is not (the transaction is marked to run again without kept rows: [`Reads::stale`]).
    fn opened(&mut self) -> Result<()> {
        let taken = std::mem::take(&mut self.reads.taken);
        let Some(cache) = &self.reads.cache else { return Ok(()) };
        if taken.iter().all(|(table, read_at)| cache.fresh(table, *read_at)) {
            return Ok(());
        }
        self.reads.stale = true;
        Err(Error::internal("a row kept for reads changed as the read began"))
    }

    /// Row `id` as the rows kept for reads hold it, for a read transaction that has sent
    /// nothing yet; `None` when not kept (or not fresh), or in another transaction.
    fn take_kept(&mut self, id: &RowId) -> Option<Option<Vec<u8>>> {
        if self.write.is_some() || self.unsent_begin.is_none() {
            return None;
        }
        let (value, read_at) = self.reads.cache.as_ref()?.get(id)?;
        self.reads.taken.push((id.0.clone(), read_at));
        Some(value)
    }

    /// Notes the value of row `id` that the transaction read: a write transaction knows it
    /// from now on; a read transaction keeps it for later reads ([`RowCache`]).
    fn read_row(&mut self, id: RowId, value: &Option<Vec<u8>>) {
        match (&mut self.write, &self.reads) {
            (Some(w), _) => {
                w.read.push(id.clone());
                w.known.insert(id, value.clone());
            }
            (None, Reads { cache: Some(cache), begun_at: Some(at), .. }) => cache.keep(id, value.clone(), *at),
            (None, _) => {}
        }
    }

    /// The value of row `sk` of table `tbl`, read with the transaction's unsent opening
    /// ([`Conn::opening`]) in one round trip ([`Conn::begin_with_rows`]); in a write transaction
    /// of the writer's connection, with the rows its last transactions read that this one does
    /// not know yet ([`Kept`]). Errors: the database's (the transaction counts as begun either
    /// way, so that it is ended).
    fn begin_with_get(&mut self, tbl: &Arc<str>, sk: &[u8]) -> Result<Option<Vec<u8>>> {
        let again = self.read_again(tbl, sk);
        self.begin_with_rows((tbl.clone(), sk.to_vec()), again)
    }

    /// The rows the writer's connection's last transactions read ([`Kept`]) that the write
    /// transaction in progress does not know yet, besides `(tbl, sk)`; none elsewhere.
    fn read_again(&self, tbl: &Arc<str>, sk: &[u8]) -> Vec<RowId> {
        let (Some(w), Some(kept)) = (&self.write, &self.kept) else { return Vec::new() };
        let known = |id: &RowId| w.known.contains_key(id) || (id.0 == *tbl && id.1 == sk);
        kept.recent.keys().filter(|id| !known(id)).cloned().collect()
    }

    /// The value of row `id`, read with the transaction's unsent opening and the rows `again`
    /// (which the transaction then knows, as if read one by one: [`Written::unasked`]) in one
    /// round trip ([`Conn::begin_reading`]). Errors: the database's.
    fn begin_with_rows(&mut self, id: RowId, mut again: Vec<RowId>) -> Result<Option<Vec<u8>>> {
        again.insert(0, id);
        let mut values = self.begin_reading(&again)?;
        let value = std::mem::take(&mut values[0]);
        self.know_unasked(again.into_iter().skip(1).zip(values.into_iter().skip(1)));
        Ok(value)
    }

    /// Notes the rows `read` (id, value) that the write transaction read again, not asked for
    /// yet ([`Written::unasked`]).
    fn know_unasked(&mut self, read: impl Iterator<Item = (RowId, Option<Vec<u8>>)>) {
        if let Some(w) = &mut self.write {
            for (id, value) in read {
                w.known.insert(id.clone(), value);
                w.unasked.insert(id, ());
            }
        }
    }

    /// Sends the write transaction's unsent opening with a read of the rows its connection's last
    /// transactions read ([`Kept`]), which it then knows ([`Written::unasked`]).
    fn begin_with_recent(&mut self) -> Result<()> {
        let again: Vec<RowId> = self.kept.as_ref().map(|k| k.recent.keys().cloned().collect()).unwrap_or_default();
        if again.is_empty() {
            return self.begin();
        }
        let values = self.begin_reading(&again)?;
        self.know_unasked(again.into_iter().zip(values));
        Ok(())
    }

    /// Sends the transaction's unsent opening with a read of the rows `ids`, in one round trip:
    /// one statement over array literals of their names and sort keys, answering each row found
    /// by its place in the arrays and its value in hex. Their values, in order (`None`: no row).
    /// Errors: the database's.
    fn begin_reading(&mut self, ids: &[RowId]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut sql = self.opening()?.unwrap_or_default();
        let ids = || ids.iter();
        sql.push_str("; SELECT u.i, encode(r.v, 'hex') FROM unnest(");
        push_text_array(&mut sql, ids().map(|(tbl, _)| &**tbl));
        sql.push_str("::text[], ");
        push_bytea_array(&mut sql, ids().map(|(_, sk)| Some(sk)));
        sql.push_str(
            "::bytea[]) WITH ORDINALITY AS u(tbl, sk, i) JOIN replicad_rows r ON r.tbl = u.tbl AND r.sk = u.sk",
        );
        let answers = self.client.simple_query(&sql).map_err(Error::caused_by)?;
        self.opened()?;
        let mut values: Vec<Option<Vec<u8>>> = vec![None; ids().len()];
        for answer in answers {
            // Only this statement's rows have two columns (the check answers one).
            let postgres::SimpleQueryMessage::Row(row) = answer else { continue };
            if row.len() != 2 {
                continue;
            }
            let (Some(i), Some(text)) = (row.get(0), row.get(1)) else { continue };
            let i: usize = i.parse().map_err(Error::internal)?;
            let value = hex::decode(text).map_err(Error::internal)?;
            if let Some(slot) = i.checked_sub(1).and_then(|i| values.get_mut(i)) {
                *slot = Some(value);
            }
        }
        Ok(values)
    }

    /// Sends the write transaction's pending writes (after its `BEGIN`), in one statement; a
    /// statement that reads more than one row (a range, a count) comes after it.
    fn flush(&mut self) -> Result<()> {
        self.begin()?;
        let Some(w) = &mut self.write else { return Ok(()) };
        if w.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut w.pending);
        w.pending_bytes = 0;
        let c = Columns::of(&pending);
        let statement = self.statement(FLUSH)?;
        let params: [&(dyn ToSql + Sync); 6] = [&c.gone_tbl, &c.gone_sk, &c.put_tbl, &c.put_sk, &c.put_k, &c.put_v];
        self.client.execute(&statement, &params).map_err(disk_full_or)?;
        Ok(())
    }

    /// Records a write of row `id` (`None`: its removal) in the write transaction, to be sent
    /// with the others ([`Conn::flush`]); sends them early past [`MAX_PENDING_BYTES`]. Errors:
    /// no write transaction is in progress (an internal error).
    fn stage(&mut self, id: RowId, row: Option<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        let Some(w) = &mut self.write else { return Err(Error::internal("a write outside a write transaction")) };
        w.pending_bytes += id.1.len() + row.as_ref().map_or(0, |(k, v)| k.len() + v.len());
        if !w.tables.contains(&id.0) {
            w.tables.push(id.0.clone());
        }
        w.known.insert(id.clone(), row.as_ref().map(|(_, v)| v.clone()));
        w.pending.insert(id, row);
        if w.pending_bytes > MAX_PENDING_BYTES {
            self.flush()?;
            if let Some(w) = &mut self.write {
                // Every write was sent: what the database answers is what this transaction wrote.
                w.known.clear();
            }
        }
        Ok(())
    }

    /// The value of row `id` as this write transaction last read or wrote it, if it did.
    /// A row read again with the first read ([`Written::unasked`]) counts as read from now on.
    fn known(&mut self, id: &RowId) -> Option<Option<Vec<u8>>> {
        let w = self.write.as_mut()?;
        let value = w.known.get(id).cloned()?;
        if w.unasked.remove(id).is_some() {
            w.read.push(id.clone());
        }
        Some(value)
    }

    /// The value of row `id` as the connection keeps it ([`Kept`]), taken into the write
    /// transaction (to be checked when its `BEGIN` is sent); `None` when it keeps no such row,
    /// or the transaction has sent something already.
    fn assume(&mut self, id: &RowId) -> Option<Option<Vec<u8>>> {
        self.unsent_begin?;
        let value = self.kept.as_ref()?.rows.get(id)?.0.clone();
        let w = self.write.as_mut()?;
        w.known.insert(id.clone(), value.clone());
        w.read.push(id.clone());
        w.assumed.push((id.clone(), value.clone()));
        Some(value)
    }
}

impl Kept {
    /// [`Stamps::foreign`] now, when another process committed since the rows were checked
    /// last (or the listener that would say so is away); `None` when nothing changed.
    fn foreign_since(&self) -> Option<Option<u64>> {
        let now = self.stamps.foreign();
        (now.is_none() || now != self.foreign).then_some(now)
    }

    /// Empties the rows when another process committed since they were checked last
    /// ([`Kept::foreign_since`]); whether it did.
    fn check_foreign(&mut self) -> bool {
        let Some(now) = self.foreign_since() else { return false };
        self.rows.clear();
        self.foreign = now;
        true
    }

    /// Keeps the rows the committed transaction `written` read, as it left them (starting
    /// again empty past [`MAX_KEPT_ROWS`] or [`MAX_KEPT_BYTES`]).
    fn committed(&mut self, mut written: Written) {
        self.recent.retain(|_, age| {
            *age += 1;
            *age < READ_AGAIN_FOR
        });
        for id in written.read.iter().take(MAX_READ_AGAIN) {
            self.recent.insert(id.clone(), 0);
        }
        if self.recent.len() > MAX_READ_AGAIN {
            self.recent.retain(|_, age| *age == 0);
        }
        for id in written.read {
            let Some((id, value)) = written.known.remove_entry(&id) else { continue };
            self.rows.insert(id, value, ());
        }
    }
}

impl Conn {
    /// Commits `written`, a write transaction that has sent nothing yet, as one statement in an
    /// implicit transaction ([`COMMIT_CALL`]: its values as binary arrays, so PostgreSQL neither
    /// lexes nor decodes them as text), notifying `channels` (name, payload). Errors: the
    /// database's (507 for a full disk); the implicit transaction is then rolled back already.
    fn commit_unsent(&mut self, written: &Written, channels: &[(&str, String)]) -> Result<()> {
        let c = Columns::of(&written.pending);
        let assumed = &written.assumed;
        let expect_tbl: Vec<&str> = assumed.iter().map(|((tbl, _), _)| &**tbl).collect();
        let expect_sk: Vec<&[u8]> = assumed.iter().map(|((_, sk), _)| sk.as_slice()).collect();
        let expect_v: Vec<Option<&[u8]>> = assumed.iter().map(|(_, v)| v.as_deref()).collect();
        let names: Vec<&str> = channels.iter().map(|(name, _)| *name).collect();
        let payloads: Vec<&str> = channels.iter().map(|(_, payload)| payload.as_str()).collect();
        let statement = self.statement(COMMIT_CALL)?;
        let params: [&(dyn ToSql + Sync); 11] = [
            &expect_tbl,
            &expect_sk,
            &expect_v,
            &c.gone_tbl,
            &c.gone_sk,
            &c.put_tbl,
            &c.put_sk,
            &c.put_k,
            &c.put_v,
            &names,
            &payloads,
        ];
        self.client.execute(&statement, &params).map(drop).map_err(disk_full_or)
    }

    /// Commits the write transaction in progress, which has begun: its `pending` writes
    /// ([`writes_sql`]), `NOTIFY` of `channels` (name, payload) and `COMMIT`, as one simple
    /// query. Errors: the database's (507 for a full disk), after a `ROLLBACK`.
    ///
    /// When other processes write too (`shared`), the commit lets go of its locks before its
    /// flush: `synchronous_commit` off for the transaction, then one more round trip, [`FLUSH_WAL`],
    /// whose own commit waits for the flush of the WAL up to it, and so of this commit, before
    /// anything is acknowledged. The rows every batch writes (a chat's, the
    /// message sequence) are locked by one transaction at a time: with the flush, a millisecond
    /// or more, inside the lock, the nodes' batches committed one flush after another, fewer in
    /// all than one node commits alone; outside it, the flushes of several nodes' commits are
    /// one (PostgreSQL's group commit). Nothing is acknowledged before it is durable; a read
    /// may see a batch in the moment between its commit and its flush (lost with it if the
    /// database crashes then, and acknowledged to no one).
    fn commit_begun(&mut self, pending: &Pending, channels: &[(&str, String)], shared: bool) -> Result<()> {
        let mut batch = String::from(if shared { "SET LOCAL synchronous_commit TO off; " } else { "" });
        writes_sql(&mut batch, pending);
        for (channel, payload) in channels {
            batch.push_str("NOTIFY ");
            batch.push_str(channel);
            if !payload.is_empty() {
                batch.push_str(", ");
                push_text(&mut batch, payload);
            }
            batch.push_str("; ");
        }
        batch.push_str("COMMIT");
        self.client.batch_execute(&batch).map_err(|e| {
            // After a failed statement the transaction is still open (aborted); after a failed
            // `COMMIT` this only warns. A failed rollback leaves the connection broken, and its
            // next statement says so.
            let _ = self.client.batch_execute("ROLLBACK");
            disk_full_or(e)
        })?;
        if shared {
            self.client.batch_execute(FLUSH_WAL).map_err(disk_full_or)?;
        }
        Ok(())
    }
}

/// The statement whose commit waits for the WAL to be flushed up to it (and so up to every
/// commit before it): a transactional logical message, an implicit transaction that writes one
/// WAL record and commits with `synchronous_commit` on. A transaction that only takes an id
/// (`SELECT pg_current_xact_id()`) is not enough: PostgreSQL flushes a commit only when the
/// transaction wrote WAL before it (`RecordTransactionCommit`), and measured on PostgreSQL 15,
/// the WAL of a commit made with `synchronous_commit` off was still unflushed after it
/// (`pg_current_wal_insert_lsn() - pg_current_wal_flush_lsn()`: 144 bytes), and flushed whole
/// after this statement (0 bytes), at `wal_level` `replica`. Any role may run it.
const FLUSH_WAL: &str = "SELECT pg_logical_emit_message(true, 'replicad', '')";

/// A write transaction's pending writes as the columns of the arrays [`FLUSH`] and
/// [`COMMIT_CALL`] take: the removals' table names and sort keys, the puts' table names, sort
/// keys, keys and values.
struct Columns<'a> {
    gone_tbl: Vec<&'a str>,
    gone_sk: Vec<&'a [u8]>,
    put_tbl: Vec<&'a str>,
    put_sk: Vec<&'a [u8]>,
    put_k: Vec<&'a [u8]>,
    put_v: Vec<&'a [u8]>,
}

impl<'a> Columns<'a> {
    fn of(pending: &'a Pending) -> Columns<'a> {
        let mut c = Columns {
            gone_tbl: Vec::new(),
            gone_sk: Vec::new(),
            put_tbl: Vec::with_capacity(pending.len()),
            put_sk: Vec::with_capacity(pending.len()),
            put_k: Vec::with_capacity(pending.len()),
            put_v: Vec::with_capacity(pending.len()),
        };
        for ((tbl, sk), row) in pending {
            match row {
                None => {
                    c.gone_tbl.push(&**tbl);
                    c.gone_sk.push(sk.as_slice());
                }
                Some((k, v)) => {
                    c.put_tbl.push(&**tbl);
                    c.put_sk.push(sk.as_slice());
                    c.put_k.push(k.as_slice());
                    c.put_v.push(v.as_slice());
                }
            }
        }
        c
    }
}

/// Appends to `sql` the pending writes `pending` as one statement and `; ` (sent with `COMMIT`
/// in one simple query): `replicad_put` ([`WRITE_SETUP`]) over array literals of the removals and
/// the puts; nothing when there is none.
fn writes_sql(sql: &mut String, pending: &Pending) {
    if pending.is_empty() {
        return;
    }
    let gone = || pending.iter().filter(|(_, row)| row.is_none()).map(|(id, _)| id);
    let puts = || pending.iter().filter_map(|((tbl, sk), row)| row.as_ref().map(|(k, v)| (tbl, sk, k, v)));
    sql.push_str("EXECUTE replicad_put(");
    push_text_array(sql, gone().map(|(tbl, _)| &**tbl));
    sql.push_str(", ");
    push_bytea_array(sql, gone().map(|(_, sk)| Some(sk)));
    sql.push_str(", ");
    push_text_array(sql, puts().map(|(tbl, ..)| &**tbl));
    sql.push_str(", ");
    push_bytea_array(sql, puts().map(|(_, sk, _, _)| Some(sk)));
    sql.push_str(", ");
    push_bytea_array(sql, puts().map(|(_, _, k, _)| Some(k)));
    sql.push_str(", ");
    push_bytea_array(sql, puts().map(|(.., v)| Some(v)));
    sql.push_str("); ");
}

/// Appends to `sql` (after `; `) the check that the rows `assumed` are still as a write
/// transaction took them from the kept rows ([`Kept`]): a call of `pg_temp.replicad_expect`
/// ([`WRITE_SETUP`]), which reads them and fails as a serialization failure (SQLSTATE 40001)
/// when one differs. Nothing when `assumed` is empty. It locks no row: the transaction holds the
/// writers' lock ([`BEGIN_WRITE`], sent before it), so no other write transaction runs
/// meanwhile.
fn expect_sql(sql: &mut String, assumed: Vec<(RowId, Option<Vec<u8>>)>) {
    if assumed.is_empty() {
        return;
    }
    sql.push_str("; SELECT pg_temp.replicad_expect(");
    push_text_array(sql, assumed.iter().map(|((tbl, _), _)| &**tbl));
    sql.push_str(", ");
    push_bytea_array(sql, assumed.iter().map(|((_, sk), _)| Some(sk)));
    sql.push_str(", ");
    push_bytea_array(sql, assumed.iter().map(|(_, v)| v.as_ref()));
    sql.push(')');
}

/// Appends `texts` as the literal of a `text[]` (each element quoted).
fn push_text_array<'a>(sql: &mut String, texts: impl Iterator<Item = &'a str>) {
    sql.push_str("'{");
    for (i, text) in texts.enumerate() {
        sql.push_str(if i == 0 { "\"" } else { ",\"" });
        for c in text.chars() {
            match c {
                '"' | '\\' => sql.push('\\'),
                '\'' => sql.push('\''),
                _ => {}
            }
            sql.push(c);
        }
        sql.push('"');
    }
    sql.push_str("}'");
}

/// Appends `values` as the literal of a `bytea[]` (`None`: `NULL`), each element in hex.
fn push_bytea_array<'a>(sql: &mut String, values: impl Iterator<Item = Option<&'a Vec<u8>>>) {
    sql.push_str("'{");
    for (i, value) in values.enumerate() {
        if i > 0 {
            sql.push(',');
        }
        match value {
            Some(bytes) => {
                // `\\x…` in the literal: the array's quoting keeps one backslash, bytea's `\x…`.
                sql.push_str("\"\\\\x");
                push_hex(sql, bytes);
                sql.push('"');
            }
            None => sql.push_str("NULL"),
        }
    }
    sql.push_str("}'");
}

/// Appends `text` as a SQL string literal.
fn push_text(sql: &mut String, text: &str) {
    sql.push('\'');
    for c in text.chars() {
        if c == '\'' {
            sql.push('\'');
        }
        sql.push(c);
    }
    sql.push('\'');
}

/// Appends `bytes` in hex, without allocating.
fn push_hex(sql: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    sql.reserve(bytes.len() * 2 + 17);
    for b in bytes {
        sql.push(char::from(HEX[usize::from(b >> 4)]));
        sql.push(char::from(HEX[usize::from(b & 15)]));
    }
}

impl Txn {
    /// Ends the transaction with `statement` (`COMMIT` or `ROLLBACK`); a write transaction that
    /// sent nothing yet ends without a round trip. One that sent something and is rolled back
    /// empties the kept rows ([`Kept`]: it may have failed on a row another process changed).
    pub(super) fn end(&self, statement: &str) -> Result<()> {
        let mut conn = lock(&self.conn);
        conn.notify.clear();
        conn.write = None;
        if conn.unsent_begin.take().is_some() {
            return Ok(());
        }
        if let Some(kept) = conn.kept.as_mut().filter(|_| statement != "COMMIT") {
            kept.rows.clear();
        }
        conn.client.batch_execute(statement).map_err(Error::caused_by)
    }

    /// Has the write transaction notify `channel` when it commits ([`super::notify`]).
    pub(super) fn notify_on_commit(&self, channel: &'static str) {
        let mut conn = lock(&self.conn);
        if !conn.notify.contains(&channel) {
            conn.notify.push(channel);
        }
    }

    /// Commits the write transaction in one round trip. One that has sent nothing yet is one
    /// statement ([`Conn::commit_unsent`]: the check of the kept rows it took, its writes and its
    /// notifications, as binary arrays, in an implicit transaction); one that has begun sends
    /// its pending writes ([`writes_sql`]), its notifications and `COMMIT` as one simple query.
    /// Its notifications: [`super::notify::COMMIT`] (naming the tables it wrote, on the writer's
    /// connection: [`Stamps::payload`]) and the channels asked for. A transaction that neither
    /// read nor wrote ends without any. On the writer's connection the tables written are
    /// stamped, and the rows it read and wrote kept ([`Kept`]), before this returns. When a
    /// statement fails (a serialization failure, a full disk: 507), the transaction is rolled
    /// back, the kept rows emptied, and the error answered.
    pub(super) fn commit(&self) -> Result<()> {
        let mut conn = lock(&self.conn);
        let notify = std::mem::take(&mut conn.notify);
        let idle = conn.write.as_ref().is_none_or(|w| w.pending.is_empty() && w.assumed.is_empty());
        if conn.unsent_begin.is_some() && idle {
            conn.unsent_begin = None;
            conn.write = None;
            return Ok(());
        }
        let written = conn.write.take().unwrap_or_default();
        let stamps = conn.kept.as_ref().map(|k| k.stamps.clone());
        let payload = |channel: &str| match &stamps {
            Some(stamps) if channel == super::notify::COMMIT => stamps.payload(written.tables.iter().map(|t| &**t)),
            _ => String::new(),
        };
        let channels: Vec<(&str, String)> =
            std::iter::once(super::notify::COMMIT).chain(notify).map(|c| (c, payload(c))).collect();
        let tables = || written.tables.iter().map(|t| &**t);
        if let Some(stamps) = &stamps {
            stamps.committing(tables());
        }
        let done = match conn.unsent_begin.take() {
            Some(_) => conn.commit_unsent(&written, &channels),
            None => conn.commit_begun(&written.pending, &channels, written.shared),
        };
        if let Some(stamps) = &stamps {
            stamps.committed(tables());
        }
        match (done, &mut conn.kept) {
            (Ok(()), Some(kept)) => {
                kept.committed(written);
                Ok(())
            }
            (Ok(()), None) => Ok(()),
            (Err(e), kept) => {
                if let Some(kept) = kept {
                    kept.rows.clear();
                }
                Err(e)
            }
        }
    }

    /// Deletes every row of table `name`; whether it had one.
    pub(super) fn delete_table(&self, name: &str) -> Result<bool> {
        let mut conn = lock(&self.conn);
        conn.flush()?;
        if let Some(w) = &mut conn.write {
            w.known.retain(|(tbl, _), _| &**tbl != name);
            if !w.tables.iter().any(|t| &**t == name) {
                w.tables.push(name.into());
            }
        }
        let sql = "DELETE FROM replicad_rows WHERE tbl = $1";
        Ok(conn.execute(sql, &[&name])? > 0)
    }

    /// Table `name` of this transaction.
    pub(super) fn table<K, V>(&self, name: &str) -> PgTable<K, V> {
        PgTable { conn: self.conn.clone(), name: name.into(), types: Types::default() }
    }
}

impl<K: StoreKey, V: Value + 'static> PgTable<K, V> {
    /// The value under the key whose sort key is `sk`, if any: in a write transaction, as it
    /// last read or wrote it (no round trip), else read (and remembered).
    pub(super) fn get(&self, sk: &[u8]) -> Result<Option<AccessGuard<'static, V>>> {
        Ok(self.value(sk)?.map(AccessGuard::owned))
    }

    fn value(&self, sk: &[u8]) -> Result<Option<Vec<u8>>> {
        let id = (self.name.clone(), sk.to_vec());
        let mut conn = lock(&self.conn);
        if let Some(known) = conn.known(&id) {
            return Ok(known);
        }
        if let Some(kept) = conn.assume(&id) {
            return Ok(kept);
        }
        if let Some(kept) = conn.take_kept(&id) {
            return Ok(kept);
        }
        let value = match conn.unsent_begin {
            Some(_) => conn.begin_with_get(&self.name, sk)?,
            None => {
                let sql = "SELECT v FROM replicad_rows WHERE tbl = $1 AND sk = $2";
                let rows = conn.query(sql, &[&&*self.name, &sk])?;
                rows.into_iter().next().map(|r| r.get(0))
            }
        };
        conn.read_row(id, &value);
        Ok(value)
    }

    /// Puts `value` under `key`; the value it replaced, if any (read first, unless this
    /// transaction knows it: [`PgTable::put`] does not read).
    pub(super) fn insert(
        &self,
        key: &K::SelfType<'_>,
        value: &V::SelfType<'_>,
    ) -> Result<Option<AccessGuard<'static, V>>> {
        let old = self.get(&K::sort_key_of(key))?;
        self.put(key, value)?;
        Ok(old)
    }

    /// Puts `value` under `key`, sent with the transaction's other writes.
    pub(super) fn put(&self, key: &K::SelfType<'_>, value: &V::SelfType<'_>) -> Result<()> {
        let (k, v) = (K::as_bytes(key).as_ref().to_vec(), V::as_bytes(value).as_ref().to_vec());
        lock(&self.conn).stage((self.name.clone(), K::sort_key_of(key)), Some((k, v)))
    }

    /// Removes the key whose sort key is `sk`; the value it had, if any (read first, unless
    /// this transaction knows it: [`PgTable::delete`] does not read).
    pub(super) fn remove(&self, sk: &[u8]) -> Result<Option<AccessGuard<'static, V>>> {
        let old = self.get(sk)?;
        self.delete(sk)?;
        Ok(old)
    }

    /// Removes the key whose sort key is `sk`, sent with the transaction's other writes.
    pub(super) fn delete(&self, sk: &[u8]) -> Result<()> {
        lock(&self.conn).stage((self.name.clone(), sk.to_vec()), None)
    }

    /// The rows within the sort-key bounds `(lo, hi)`, in key order.
    pub(super) fn range(&self, (lo, hi): (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> PgRange<K, V> {
        PgRange {
            conn: self.conn.clone(),
            name: self.name.clone(),
            lo,
            hi,
            front: Buffered::new(),
            back: Buffered::new(),
            done: false,
            page: FIRST_PAGE,
            types: Types::default(),
        }
    }

    /// Removes the rows within `bounds` for which `predicate` is false (sent with the
    /// transaction's other writes, after the scan).
    pub(super) fn retain_in<F>(&self, bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>), mut predicate: F) -> Result<()>
    where
        F: for<'f> FnMut(K::SelfType<'f>, V::SelfType<'f>) -> bool,
    {
        let mut range = self.range(bounds);
        let mut dropped: Vec<Vec<u8>> = Vec::new();
        while let Some(row) = range.next_row(false) {
            let (sk, k, v) = row?;
            if !predicate(K::from_bytes(&k), V::from_bytes(&v)) {
                dropped.push(sk);
            }
        }
        for sk in dropped {
            self.delete(&sk)?;
        }
        Ok(())
    }

    /// The number of rows.
    pub(super) fn len(&self) -> Result<u64> {
        let sql = "SELECT count(*) FROM replicad_rows WHERE tbl = $1";
        let mut conn = lock(&self.conn);
        conn.flush()?;
        let rows = conn.query(sql, &[&&*self.name])?;
        let n: i64 = rows.first().map_or(0, |r| r.get(0));
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

impl<K: StoreKey, V: Value + 'static> PgRange<K, V> {
    /// The next row (sort key, key, value) from the low end, or from the high end when
    /// `from_high`: from that end's buffer, else a fetch, else the other end's buffer.
    fn next_row(&mut self, from_high: bool) -> Option<Result<RawRow>> {
        let own = if from_high { &self.back } else { &self.front };
        if own.is_empty() && !self.done {
            if let Err(e) = self.fetch(from_high) {
                self.done = true;
                return Some(Err(e));
            }
        }
        let row = match from_high {
            false => self.front.pop_front().or_else(|| self.back.pop_front()),
            true => self.back.pop_back().or_else(|| self.front.pop_back()),
        };
        row.map(Ok)
    }

    /// Fetches the next page of unfetched rows nearest the low (or high) end into that end's
    /// buffer, and narrows the unfetched bounds past them.
    fn fetch(&mut self, from_high: bool) -> Result<()> {
        let name: &str = &self.name;
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&name];
        let mut sql = String::from("SELECT sk, k, v FROM replicad_rows WHERE tbl = $1");
        for (bound, [inclusive, exclusive]) in [(&self.lo, [">=", ">"]), (&self.hi, ["<=", "<"])] {
            let (op, bytes) = match bound {
                Bound::Included(b) => (inclusive, b),
                Bound::Excluded(b) => (exclusive, b),
                Bound::Unbounded => continue,
            };
            params.push(bytes);
            sql.push_str(&format!(" AND sk {op} ${}", params.len()));
        }
        sql.push_str(if from_high { " ORDER BY sk DESC LIMIT $" } else { " ORDER BY sk LIMIT $" });
        params.push(&self.page);
        sql.push_str(&params.len().to_string());
        let mut conn = lock(&self.conn);
        // The rows as this transaction wrote them: its pending writes go first.
        conn.flush()?;
        let rows = conn.query(&sql, &params)?;
        drop(conn);
        self.done = (rows.len() as i64) < self.page;
        self.page = (self.page * 2).min(MAX_PAGE);
        let rows = rows.into_iter().map(|r| (r.get::<_, Vec<u8>>(0), r.get(1), r.get(2)));
        for row in rows {
            if from_high {
                self.hi = Bound::Excluded(row.0.clone());
                self.back.push_front(row);
            } else {
                self.lo = Bound::Excluded(row.0.clone());
                self.front.push_back(row);
            }
        }
        Ok(())
    }
}

fn entry<K: StoreKey, V: Value + 'static>(row: Result<RawRow>) -> Result<Entry<'static, K, V>> {
    let (_, k, v) = row?;
    Ok((AccessGuard::owned(k), AccessGuard::owned(v)))
}

impl<K: StoreKey, V: Value + 'static> Iterator for PgRange<K, V> {
    type Item = Result<Entry<'static, K, V>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row(false).map(entry)
    }
}

impl<K: StoreKey, V: Value + 'static> DoubleEndedIterator for PgRange<K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_row(true).map(entry)
    }
}
