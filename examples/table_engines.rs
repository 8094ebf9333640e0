//! The store's two table engines side by side: redb (the default, in-process) and PostgreSQL
//! (`store::pg`, over loopback), on the operations the services make, to size the PostgreSQL
//! mode's costs before it is wired behind `Store`. Reported per operation: the mean wall time.
//!
//! ```sh
//! eval "$(REPLICAD_TEST_POSTGRES_FSYNC=on bash .ci/install-postgres)"   # durable, as redb is
//! cargo build --release --example table_engines
//! taskset -c 0 target/release/examples/table_engines "$REPLICAD_TEST_POSTGRES"
//! ```
//! (the PostgreSQL server then runs on the other core; pin it with `taskset -pc 1` on its PIDs).
//!
//! Operations, on a `(u128, u64) → bytes` table holding 10,000 rows of 200 bytes:
//! - a point read in a transaction of its own (what an inline read of a request is);
//! - 100 point reads in one transaction (a request that reads many rows);
//! - a range scan of 50 rows;
//! - a write transaction of one row, committed durably (redb: fsync; PostgreSQL: per its
//!   `fsync` setting, said in the output), and 64 rows in one transaction (a group commit).

use std::time::Instant;

use postgres::{Client, NoTls};
use redb::{Database, TableDefinition};
use replicad::error::Result;
use replicad::store::kv::{self, ReadTransaction, WriteTransaction};
use replicad::store::pg::PgTables;

const ROWS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("bench_rows");
const N: u64 = 10_000;

fn main() {
    let url = std::env::args().nth(1).expect("usage: table_engines POSTGRES_URL");
    let fsync: String = Client::connect(&url, NoTls).unwrap().query_one("SHOW fsync", &[]).unwrap().get(0);
    let value = vec![7u8; 200];
    let dir = tempfile::tempdir().unwrap();
    let redb = Database::create(dir.path().join("bench.redb")).unwrap();
    let mut pg = PgTables::connect(&fresh_database(&url)).unwrap();
    fill(&redb, &mut pg, &value);
    println!("operation                        redb          PostgreSQL (fsync={fsync})");
    let key = |i: u64| (u128::from(i * 7919 % N % 7), i * 7919 % N);
    row("point read, own transaction", 2000, |i| redb_get(&redb, &[key(i)]), |i| pg_get(&mut pg, &[key(i)]));
    let many = |i: u64| (0..100).map(|j| key(i * 100 + j)).collect::<Vec<_>>();
    row("100 point reads, one transaction", 100, |i| redb_get(&redb, &many(i)), |i| pg_get(&mut pg, &many(i)));
    row("range scan of 50 rows", 500, |i| redb_range(&redb, i), |i| pg_range(&mut pg, i));
    let write = |i: u64, n: u64| (0..n).map(move |j| (9u128, (i * n + j) % N));
    row(
        "write transaction, 1 row",
        200,
        |i| redb_put(&redb, write(i, 1), &value),
        |i| pg_put(&mut pg, write(i, 1), &value),
    );
    row(
        "write transaction, 64 rows",
        50,
        |i| redb_put(&redb, write(i, 64), &value),
        |i| pg_put(&mut pg, write(i, 64), &value),
    );
}

/// A new database on the server of `url`; its URL.
fn fresh_database(url: &str) -> String {
    let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
    Client::connect(url, NoTls).unwrap().batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    format!("{}/{name}", url.rsplit_once('/').unwrap().0)
}

fn fill(redb: &Database, pg: &mut PgTables, value: &[u8]) {
    let keys: Vec<(u128, u64)> = (0..N).map(|i| (u128::from(i % 7), i)).collect();
    for chunk in keys.chunks(1000) {
        redb_put(redb, chunk.iter().copied(), value);
        pg_put(pg, chunk.iter().copied(), value);
    }
}

/// Runs `redb` and `pg` `times` times each, alternating halves; prints the mean of each.
fn row(name: &str, times: u64, mut redb: impl FnMut(u64), mut pg: impl FnMut(u64)) {
    let (mut r, mut p) = (0.0, 0.0);
    for half in 0..2 {
        let start = Instant::now();
        (half * times / 2..(half + 1) * times / 2).for_each(&mut redb);
        r += start.elapsed().as_secs_f64();
        let start = Instant::now();
        (half * times / 2..(half + 1) * times / 2).for_each(&mut pg);
        p += start.elapsed().as_secs_f64();
    }
    let us = |t: f64| t / times as f64 * 1e6;
    println!("{name:<32} {:>9.1} µs  {:>9.1} µs  ({:.0}×)", us(r), us(p), p / r);
}

fn redb_get(db: &Database, keys: &[(u128, u64)]) {
    get_all(&kv::begin_read(db).unwrap(), keys).unwrap();
}

fn pg_get(pg: &mut PgTables, keys: &[(u128, u64)]) {
    pg.read(|txn| get_all(txn, keys)).unwrap();
}

/// The same code for both engines: the table API of `store::kv`.
fn get_all(txn: &ReadTransaction, keys: &[(u128, u64)]) -> Result<()> {
    let t = txn.open_table(ROWS)?;
    for k in keys {
        assert!(t.get(*k)?.is_some());
    }
    Ok(())
}

fn redb_range(db: &Database, i: u64) {
    range_of(&kv::begin_read(db).unwrap(), i).unwrap();
}

fn pg_range(pg: &mut PgTables, i: u64) {
    pg.read(|txn| range_of(txn, i)).unwrap();
}

fn range_of(txn: &ReadTransaction, i: u64) -> Result<()> {
    let from = (u128::from(i % 7), i % 9000);
    assert_eq!(txn.open_table(ROWS)?.range(from..(from.0, from.1 + 350))?.count(), 50);
    Ok(())
}

fn redb_put(db: &Database, keys: impl Iterator<Item = (u128, u64)>, value: &[u8]) {
    let w = kv::begin_write(db).unwrap();
    put_all(&w, keys, value).unwrap();
    w.commit().unwrap();
}

fn pg_put(pg: &mut PgTables, keys: impl Iterator<Item = (u128, u64)> + Clone, value: &[u8]) {
    pg.write(|txn| put_all(txn, keys.clone(), value)).unwrap();
}

fn put_all(txn: &WriteTransaction, keys: impl Iterator<Item = (u128, u64)>, value: &[u8]) -> Result<()> {
    let mut t = txn.open_table(ROWS)?;
    keys.into_iter().try_for_each(|k| t.insert(k, value).map(drop))
}
