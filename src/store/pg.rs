//! PostgreSQL as an engine for the store's tables: the first piece of the mode in which several
//! nodes share one database (docs/architecture.md, "Beyond one machine"). Not yet behind
//! [`crate::store::Store`]: the services still run on redb alone.
//!
//! Every table of `store::tables` is a set of rows of one SQL table, `replicad_rows`: the
//! table's name (`tbl`), the key's sort bytes (`sk`, [`crate::store::sort_key`]: PostgreSQL
//! orders `bytea` bytewise, so a range of `sk` is the range redb would scan, in redb's order),
//! redb's own encoding of the key (`k`, decoded with `redb::Key::from_bytes`) and of the value
//! (`v`, the same bytes redb stores: `store::codec` records stay as they are). The primary key
//! is `(tbl, sk)`, so a point read is an index lookup and a range scan an index range scan.
//!
//! Transactions are `SERIALIZABLE`; [`PgTables::transaction`] runs its closure again, from the
//! start, when PostgreSQL reports a serialization failure (SQLSTATE 40001) or a deadlock (40P01),
//! so two nodes that read and then write the same rows (a counter, a unique name) never both
//! commit on a stale read. The schema is versioned ([`SCHEMA_VERSION`]); it is created or
//! migrated in one transaction under an advisory lock, and a database whose schema is newer
//! than this build is refused.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::Bound;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Client, IsolationLevel, NoTls, Row, Statement};
use redb::{Key, TableDefinition, TableHandle, Value};

use super::sort_key::SortKey;
use crate::error::{Error, Result};

/// The version of the SQL schema this build writes and reads.
pub const SCHEMA_VERSION: i32 = 1;

/// How many times a transaction is run before a serialization failure is given up on.
const ATTEMPTS: u32 = 50;

/// The longest pause before a transaction is run again (the pause doubles from 100 µs up to it,
/// and a random part of it is taken, so that transactions that collided do not collide again).
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// Key of the advisory lock held while the schema is created or migrated.
const MIGRATION_LOCK: i64 = 0x7265_706c_6963_6164; // "replicad"

/// A connection to the database holding the tables (one per thread that uses it), with the
/// statements it prepared (each SQL text is prepared once per connection, so a query is one
/// round trip).
pub struct PgTables {
    client: Client,
    statements: HashMap<String, Statement>,
}

/// A value or key as stored: redb's encoding of a `T`; [`Stored::value`] decodes it.
pub struct Stored<T: Value> {
    bytes: Vec<u8>,
    kind: PhantomData<T>,
}

impl<T: Value> Stored<T> {
    /// The decoded value, borrowing from the stored bytes.
    pub fn value(&self) -> T::SelfType<'_> {
        T::from_bytes(&self.bytes)
    }
}

/// One transaction of [`PgTables::transaction`]: redb-like typed tables over the SQL rows.
pub struct PgTxn<'c> {
    tx: postgres::Transaction<'c>,
    statements: &'c mut HashMap<String, Statement>,
}

impl PgTables {
    /// Connects to `url` (`postgres://user@host:port/database`, no TLS) and creates or
    /// migrates the schema. Errors: a 500 whose cause is the `postgres::Error` when the
    /// database cannot be reached, or whose text says so when its schema is newer than
    /// [`SCHEMA_VERSION`].
    pub fn connect(url: &str) -> Result<PgTables> {
        let client = Client::connect(url, NoTls).map_err(Error::caused_by)?;
        let mut tables = PgTables { client, statements: HashMap::new() };
        tables.migrate()?;
        Ok(tables)
    }

    /// Runs `f` in a `SERIALIZABLE` transaction and commits; runs it again from the start (up
    /// to 50 times, after a growing random pause: [`MAX_BACKOFF`]) while the transaction fails
    /// on a serialization failure or a deadlock. `f` must therefore have no effect outside the
    /// transaction. Errors: `f`'s, or the database's.
    pub fn transaction<R>(&mut self, mut f: impl FnMut(&mut PgTxn<'_>) -> Result<R>) -> Result<R> {
        let mut attempt = 1;
        loop {
            match self.attempt(&mut f) {
                Err(e) if attempt < ATTEMPTS && must_retry(&e) => {
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    fn attempt<R>(&mut self, f: &mut impl FnMut(&mut PgTxn<'_>) -> Result<R>) -> Result<R> {
        let tx = self.client.build_transaction().isolation_level(IsolationLevel::Serializable).start();
        let mut txn = PgTxn { tx: tx.map_err(Error::caused_by)?, statements: &mut self.statements };
        let out = f(&mut txn)?;
        txn.tx.commit().map_err(Error::caused_by)?;
        Ok(out)
    }

    /// Creates the schema, or checks its version, in one transaction under an advisory lock
    /// (nodes starting together do it once).
    fn migrate(&mut self) -> Result<()> {
        let mut tx = self.client.transaction().map_err(Error::caused_by)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(Error::caused_by)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS replicad_schema (version integer NOT NULL);
             CREATE TABLE IF NOT EXISTS replicad_rows (
                 tbl text NOT NULL, sk bytea NOT NULL, k bytea NOT NULL, v bytea NOT NULL,
                 PRIMARY KEY (tbl, sk));",
        )
        .map_err(Error::caused_by)?;
        let found: Option<i32> =
            tx.query_opt("SELECT version FROM replicad_schema", &[]).map_err(Error::caused_by)?.map(|r| r.get(0));
        match found {
            None => {
                tx.execute("INSERT INTO replicad_schema (version) VALUES ($1)", &[&SCHEMA_VERSION])
                    .map_err(Error::caused_by)?;
            }
            Some(v) if v > SCHEMA_VERSION => {
                return Err(Error::internal(format!(
                    "the database's schema is version {v}, newer than this build's {SCHEMA_VERSION}: \
                     run the newer replicad"
                )));
            }
            Some(_) => {}
        }
        tx.commit().map_err(Error::caused_by)
    }
}

/// The pause after the `attempt`-th failed run: a random part ("full jitter") of 100 µs doubled
/// per attempt, at most [`MAX_BACKOFF`].
fn backoff(attempt: u32) -> Duration {
    let ceiling = Duration::from_micros(100).saturating_mul(1 << attempt.min(16)).min(MAX_BACKOFF);
    let mut random = [0u8; 4];
    let fraction = match getrandom::fill(&mut random) {
        Ok(()) => f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX),
        Err(_) => 0.5,
    };
    ceiling.mul_f64(fraction)
}

/// Whether `e` is a serialization failure or a deadlock: the transaction may succeed if run again.
fn must_retry(e: &Error) -> bool {
    let code = e.cause::<postgres::Error>().and_then(postgres::Error::code);
    code.is_some_and(|c| *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
}

impl PgTxn<'_> {
    /// The value under `key` in `table`, if any.
    pub fn get<K, V>(&mut self, table: TableDefinition<K, V>, key: &K::SelfType<'_>) -> Result<Option<Stored<V>>>
    where
        K: Key + 'static,
        V: Value + 'static,
        for<'a> K::SelfType<'a>: SortKey,
    {
        let sql = "SELECT v FROM replicad_rows WHERE tbl = $1 AND sk = $2";
        let rows = self.query(sql, &[&table.name(), &key.sort_key()])?;
        Ok(rows.into_iter().next().map(|r| stored(r.get(0))))
    }

    /// Puts `value` under `key` in `table` (replacing the value there).
    pub fn insert<K, V>(
        &mut self,
        table: TableDefinition<K, V>,
        key: &K::SelfType<'_>,
        value: &V::SelfType<'_>,
    ) -> Result<()>
    where
        K: Key + 'static,
        V: Value + 'static,
        for<'a> K::SelfType<'a>: SortKey,
    {
        let (k, v) = (K::as_bytes(key).as_ref().to_vec(), V::as_bytes(value).as_ref().to_vec());
        let sql = "INSERT INTO replicad_rows (tbl, sk, k, v) VALUES ($1, $2, $3, $4)
                   ON CONFLICT (tbl, sk) DO UPDATE SET k = EXCLUDED.k, v = EXCLUDED.v";
        self.execute(sql, &[&table.name(), &key.sort_key(), &k, &v]).map(drop)
    }

    /// Removes `key` from `table`; whether it was there.
    pub fn remove<K, V>(&mut self, table: TableDefinition<K, V>, key: &K::SelfType<'_>) -> Result<bool>
    where
        K: Key + 'static,
        V: Value + 'static,
        for<'a> K::SelfType<'a>: SortKey,
    {
        let sql = "DELETE FROM replicad_rows WHERE tbl = $1 AND sk = $2";
        Ok(self.execute(sql, &[&table.name(), &key.sort_key()])? > 0)
    }

    /// The entries of `table` with keys within `(from, to)`, in key order (redb's `range`).
    pub fn range<K, V>(
        &mut self,
        table: TableDefinition<K, V>,
        from: Bound<&K::SelfType<'_>>,
        to: Bound<&K::SelfType<'_>>,
    ) -> Result<Vec<(Stored<K>, Stored<V>)>>
    where
        K: Key + 'static,
        V: Value + 'static,
        for<'a> K::SelfType<'a>: SortKey,
    {
        let (lo, hi) = (from.map(SortKey::sort_key), to.map(SortKey::sort_key));
        let name = table.name();
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&name];
        let mut sql = String::from("SELECT k, v FROM replicad_rows WHERE tbl = $1");
        for (bound, [inclusive, exclusive]) in [(&lo, [">=", ">"]), (&hi, ["<=", "<"])] {
            let (op, bytes) = match bound {
                Bound::Included(b) => (inclusive, b),
                Bound::Excluded(b) => (exclusive, b),
                Bound::Unbounded => continue,
            };
            params.push(bytes);
            sql.push_str(&format!(" AND sk {op} ${}", params.len()));
        }
        sql.push_str(" ORDER BY sk");
        let rows = self.query(&sql, &params)?;
        Ok(rows.into_iter().map(|r| (stored(r.get(0)), stored(r.get(1)))).collect())
    }

    /// The rows of `sql` (prepared on first use on this connection).
    fn query(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let statement = self.statement(sql)?;
        self.tx.query(&statement, params).map_err(Error::caused_by)
    }

    /// Runs `sql` (prepared on first use on this connection); the rows it changed.
    fn execute(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let statement = self.statement(sql)?;
        self.tx.execute(&statement, params).map_err(Error::caused_by)
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let prepared = self.tx.prepare(sql).map_err(Error::caused_by)?;
        self.statements.insert(sql.to_string(), prepared.clone());
        Ok(prepared)
    }
}

fn stored<T: Value>(bytes: Vec<u8>) -> Stored<T> {
    Stored { bytes, kind: PhantomData }
}
