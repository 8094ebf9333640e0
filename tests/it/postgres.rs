//! The PostgreSQL table engine (`replicad::store::pg`) against a real PostgreSQL server: the one
//! `.ci/install-postgres` starts on loopback (`REPLICAD_TEST_POSTGRES`; `bash .ci/run` sets it,
//! and without it these tests fail saying so). Each test works in a database of its own.
//!
//! What is checked: the same operations applied to a redb table and to the engine leave the
//! same entries, read back in the same order by point reads and range scans (the sort keys
//! order rows as redb orders keys); concurrent read-then-write transactions on one counter lose
//! no update (serializable, retried); the schema is created once and a newer one is refused.

use std::ops::Bound;
use std::thread;

use postgres::{Client, NoTls};
use redb::{Database, ReadableDatabase, TableDefinition};
use replicad::store::pg::{PgTables, SCHEMA_VERSION};

const NAMED: TableDefinition<(u128, &str), u64> = TableDefinition::new("t_named");
const BLOBS: TableDefinition<u128, &[u8]> = TableDefinition::new("t_blobs");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("t_counters");

/// The server of `.ci/install-postgres`; fails (never skips) without it.
fn server_url() -> String {
    std::env::var("REPLICAD_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "REPLICAD_TEST_POSTGRES is not set: run `eval \"$(bash .ci/install-postgres)\"` \
             (bash .ci/run does) and run the tests again"
        )
    })
}

/// A new, empty database on the test server; its URL.
fn fresh_database() -> String {
    let url = server_url();
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = Client::connect(&url, NoTls).expect("the test server answers");
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Names that sort differently as bytes and by length, with a NUL byte among them.
const NAMES: [&str; 7] = ["", "a", "a\0", "a\0b", "ab", "b", "é"];

#[test]
fn the_engine_keeps_what_redb_keeps_in_redb_order() {
    let dir = tempfile::tempdir().unwrap();
    let redb = Database::create(dir.path().join("reference.redb")).unwrap();
    let mut pg = PgTables::connect(&fresh_database()).unwrap();
    let mut rng = Rng(0x2545_F491);
    for round in 0..40 {
        let ops: Vec<(u128, &str, Option<u64>)> = (0..10)
            .map(|_| {
                let value = (rng.below(4) > 0).then(|| rng.below(1000));
                (u128::from(rng.below(3)) << 100 | u128::from(rng.below(2)), NAMES[rng.below(7) as usize], value)
            })
            .collect();
        let w = redb.begin_write().unwrap();
        {
            let mut t = w.open_table(NAMED).unwrap();
            for (org, name, value) in &ops {
                match value {
                    Some(v) => drop(t.insert((*org, *name), v).unwrap()),
                    None => drop(t.remove((*org, *name)).unwrap()),
                }
            }
        }
        w.commit().unwrap();
        pg.transaction(|txn| {
            for (org, name, value) in &ops {
                match value {
                    Some(v) => txn.insert(NAMED, &(*org, *name), v)?,
                    None => drop(txn.remove(NAMED, &(*org, *name))?),
                }
            }
            Ok(())
        })
        .unwrap();
        compare_named(&redb, &mut pg, round);
    }
}

/// Every range redb answers over [`NAMED`] (whole, by organization, from a name on) and every
/// point read, answered the same by the engine.
fn compare_named(redb: &Database, pg: &mut PgTables, round: usize) {
    let r = redb.begin_read().unwrap();
    let t = r.open_table(NAMED).unwrap();
    let want = |from: Bound<(u128, &str)>, to: Bound<(u128, &str)>| -> Vec<(u128, String, u64)> {
        let range = t.range::<(u128, &str)>((from, to)).unwrap();
        range.map(|e| e.unwrap()).map(|(k, v)| (k.value().0, k.value().1.to_string(), v.value())).collect()
    };
    let orgs = [0u128, 1, 1 << 100, (1 << 100) | 1, 2 << 100, (2 << 100) | 1];
    let mut ranges = vec![(Bound::Unbounded, Bound::Unbounded)];
    for org in orgs {
        ranges.push((Bound::Included((org, "")), Bound::Excluded((org + 1, ""))));
        ranges.push((Bound::Excluded((org, "a")), Bound::Included((org, "ab"))));
    }
    pg.transaction(|txn| {
        for (from, to) in &ranges {
            let got: Vec<(u128, String, u64)> = txn
                .range(NAMED, from.as_ref(), to.as_ref())?
                .iter()
                .map(|(k, v)| (k.value().0, k.value().1.to_string(), v.value()))
                .collect();
            assert_eq!(got, want(*from, *to), "round {round}: range {from:?}..{to:?}");
        }
        for org in orgs {
            for name in NAMES {
                let got = txn.get(NAMED, &(org, name))?.map(|v| v.value());
                assert_eq!(got, t.get((org, name)).unwrap().map(|v| v.value()), "round {round}: {org} {name:?}");
            }
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn values_are_stored_as_redb_encodes_them_and_replaced_in_place() {
    let mut pg = PgTables::connect(&fresh_database()).unwrap();
    let blob: Vec<u8> = (0..=255).collect();
    pg.transaction(|txn| {
        txn.insert(BLOBS, &7, &blob.as_slice())?;
        txn.insert(BLOBS, &7, &&blob[..3])?;
        txn.insert(BLOBS, &u128::MAX, &&b""[..])?;
        Ok(())
    })
    .unwrap();
    let (seven, max, removed, gone) = pg
        .transaction(|txn| {
            let seven = txn.get(BLOBS, &7)?.map(|v| v.value().to_vec());
            let max = txn.get(BLOBS, &u128::MAX)?.map(|v| v.value().to_vec());
            let removed = txn.remove(BLOBS, &7)?;
            Ok((seven, max, removed, txn.get(BLOBS, &7)?.is_none()))
        })
        .unwrap();
    assert_eq!((seven, max), (Some(vec![0, 1, 2]), Some(vec![])));
    assert!(removed && gone);
}

/// Eight connections each add 1 to one counter 25 times, every time reading it first: with
/// serializable transactions run again on a conflict, the counter ends at 200.
#[test]
fn concurrent_read_then_write_transactions_lose_no_update() {
    let url = fresh_database();
    PgTables::connect(&url).unwrap();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            thread::spawn(move || {
                let mut pg = PgTables::connect(&url).unwrap();
                for _ in 0..25 {
                    pg.transaction(|txn| {
                        let now = txn.get(COUNTERS, &"conversations")?.map_or(0, |v| v.value());
                        txn.insert(COUNTERS, &"conversations", &(now + 1))
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut pg = PgTables::connect(&url).unwrap();
    let total = pg.transaction(|txn| Ok(txn.get(COUNTERS, &"conversations")?.map(|v| v.value()))).unwrap();
    assert_eq!(total, Some(200));
}

#[test]
fn the_schema_is_made_once_and_a_newer_one_is_refused() {
    let url = fresh_database();
    PgTables::connect(&url).unwrap();
    PgTables::connect(&url).unwrap();
    let mut admin = Client::connect(&url, NoTls).unwrap();
    let versions: Vec<i32> =
        admin.query("SELECT version FROM replicad_schema", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, [SCHEMA_VERSION]);
    admin.execute("UPDATE replicad_schema SET version = $1", &[&(SCHEMA_VERSION + 1)]).unwrap();
    let refused = PgTables::connect(&url).err().expect("a newer schema is refused");
    let text = refused.cause_text().unwrap_or_default();
    assert!(text.contains("newer than this build"), "{text}");
}
