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

use crate::common::pg::fresh_database;
use redb::{Database, TableDefinition};
use replicad::error::Result;
use replicad::store::kv::{self, Entry, ReadTransaction, ReadableTable, WriteTransaction};
use replicad::store::pg::{PgTables, SCHEMA_VERSION};

const NAMED: TableDefinition<(u128, &str), u64> = TableDefinition::new("t_named");
const BLOBS: TableDefinition<u128, &[u8]> = TableDefinition::new("t_blobs");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("t_counters");

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

/// One random round of changes over [`NAMED`]: organization, name, and the value to put (or
/// `None`: remove).
type Ops = Vec<(u128, &'static str, Option<u64>)>;

fn random_ops(rng: &mut Rng) -> Ops {
    (0..10)
        .map(|_| {
            let value = (rng.below(4) > 0).then(|| rng.below(1000));
            (u128::from(rng.below(3)) << 100 | u128::from(rng.below(2)), NAMES[rng.below(7) as usize], value)
        })
        .collect()
}

/// Applies `ops` (the same code on both engines); what each insert and removal answered (the
/// value replaced or removed).
fn apply(txn: &WriteTransaction, ops: &Ops) -> Result<Vec<Option<u64>>> {
    let mut t = txn.open_table(NAMED)?;
    let mut answers = Vec::new();
    for (org, name, value) in ops {
        let old = match value {
            Some(v) => t.insert((*org, *name), v)?.map(|g| g.value()),
            None => t.remove((*org, *name))?.map(|g| g.value()),
        };
        answers.push(old);
    }
    Ok(answers)
}

type Row = (u128, String, u64);

/// What a reader sees of [`NAMED`] (the same code on both engines): every range, forwards and
/// backwards, every point read, the first and last entries and the count.
fn observe(txn: &ReadTransaction) -> Result<Vec<Vec<Row>>> {
    let t = txn.open_table(NAMED)?;
    let row = |e: Result<Entry<(u128, &str), u64>>| e.map(|(k, v)| (k.value().0, k.value().1.to_string(), v.value()));
    let orgs = [0u128, 1, 1 << 100, (1 << 100) | 1, 2 << 100, (2 << 100) | 1];
    let mut ranges = vec![(Bound::Unbounded, Bound::Unbounded)];
    for org in orgs {
        ranges.push((Bound::Included((org, "")), Bound::Excluded((org + 1, ""))));
        ranges.push((Bound::Excluded((org, "a")), Bound::Included((org, "ab"))));
    }
    let mut seen = Vec::new();
    for (from, to) in &ranges {
        seen.push(t.range::<(u128, &str)>((*from, *to))?.map(row).collect::<Result<_>>()?);
        seen.push(t.range::<(u128, &str)>((*from, *to))?.rev().map(row).collect::<Result<_>>()?);
    }
    for org in orgs {
        let got = NAMES.iter().map(|name| Ok(t.get((org, *name))?.map(|v| (org, name.to_string(), v.value()))));
        seen.push(got.collect::<Result<Vec<_>>>()?.into_iter().flatten().collect());
    }
    let ends = [t.first()?, t.last()?].into_iter().flatten().map(Ok).map(row);
    seen.push(ends.collect::<Result<_>>()?);
    seen.push(vec![(u128::from(t.len()?), String::new(), 0)]);
    Ok(seen)
}

/// The same random changes through `store::kv` on redb and on the PostgreSQL engine answer the
/// same and leave the same entries, read back in the same order (the sort keys order rows as
/// redb orders keys), whole and by range, forwards and backwards.
#[test]
fn the_engine_keeps_what_redb_keeps_in_redb_order() {
    let dir = tempfile::tempdir().unwrap();
    let redb = Database::create(dir.path().join("reference.redb")).unwrap();
    let mut pg = PgTables::connect(&fresh_database()).unwrap();
    let mut rng = Rng(0x2545_F491);
    for round in 0..40 {
        let ops = random_ops(&mut rng);
        let w = kv::begin_write(&redb).unwrap();
        let want = apply(&w, &ops).unwrap();
        w.commit().unwrap();
        assert_eq!(pg.write(|txn| apply(txn, &ops)).unwrap(), want, "round {round}: answers of insert and remove");
        let want = observe(&kv::begin_read(&redb).unwrap()).unwrap();
        assert_eq!(pg.read(observe).unwrap(), want, "round {round}");
    }
}

const MANY: TableDefinition<u64, u64> = TableDefinition::new("t_many");

/// A range longer than several pages, iterated from both ends at once in a random pattern,
/// yields every row once, in order, as on redb; and `retain_in` removes what it should.
#[test]
fn long_ranges_are_read_from_both_ends_and_retained_as_on_redb() {
    let dir = tempfile::tempdir().unwrap();
    let redb = Database::create(dir.path().join("reference.redb")).unwrap();
    let mut pg = PgTables::connect(&fresh_database()).unwrap();
    let fill = |txn: &WriteTransaction| -> Result<()> {
        let mut t = txn.open_table(MANY)?;
        (0..3000u64).try_for_each(|i| t.insert(i * 3, i).map(drop))
    };
    let w = kv::begin_write(&redb).unwrap();
    fill(&w).unwrap();
    w.commit().unwrap();
    pg.write(fill).unwrap();
    let mut rng = Rng(77);
    let pattern: Vec<bool> = (0..2700).map(|_| rng.below(3) == 0).collect();
    let zigzag = |txn: &ReadTransaction| -> Result<Vec<u64>> {
        let t = txn.open_table(MANY)?;
        let mut range = t.range(10u64..=8000)?;
        let mut out = Vec::new();
        for back in &pattern {
            let next = if *back { range.next_back() } else { range.next() };
            match next {
                Some(row) => out.push(row?.0.value()),
                None => out.push(u64::MAX),
            }
        }
        Ok(out)
    };
    let want = zigzag(&kv::begin_read(&redb).unwrap()).unwrap();
    assert_eq!(want.iter().filter(|k| **k != u64::MAX).count(), 2663, "the range holds 2663 keys");
    assert_eq!(pg.read(zigzag).unwrap(), want);
    let retain =
        |txn: &WriteTransaction| txn.open_table(MANY)?.retain_in(100u64..7000, |k, v| k % 2 == 0 || v % 5 == 0);
    let w = kv::begin_write(&redb).unwrap();
    retain(&w).unwrap();
    w.commit().unwrap();
    pg.write(retain).unwrap();
    let all = |txn: &ReadTransaction| -> Result<Vec<(u64, u64)>> {
        txn.open_table(MANY)?.iter()?.map(|r| r.map(|(k, v)| (k.value(), v.value()))).collect()
    };
    let want = all(&kv::begin_read(&redb).unwrap()).unwrap();
    assert!(want.len() < 3000 && want.len() > 2000, "retain_in removed some: {}", want.len());
    assert_eq!(pg.read(all).unwrap(), want);
}

#[test]
fn values_are_stored_as_redb_encodes_them_and_replaced_in_place() {
    let mut pg = PgTables::connect(&fresh_database()).unwrap();
    let blob: Vec<u8> = (0..=255).collect();
    pg.write(|txn| {
        let mut t = txn.open_table(BLOBS)?;
        t.insert(7, blob.as_slice())?;
        t.insert(7, &blob[..3])?;
        t.insert(u128::MAX, &b""[..])?;
        Ok(())
    })
    .unwrap();
    let (seven, max, removed, gone) = pg
        .write(|txn| {
            let mut t = txn.open_table(BLOBS)?;
            let seven = t.get(7)?.map(|v| v.value().to_vec());
            let max = t.get(u128::MAX)?.map(|v| v.value().to_vec());
            let removed = t.remove(7)?.map(|v| v.value().to_vec());
            let gone = t.get(7)?.is_none();
            Ok((seven, max, removed, gone))
        })
        .unwrap();
    assert_eq!((seven, max), (Some(vec![0, 1, 2]), Some(vec![])));
    assert_eq!(removed, Some(vec![0, 1, 2]));
    assert!(gone);
    let deleted = pg.write(|txn| Ok((txn.delete_table(BLOBS)?, txn.delete_table(BLOBS)?))).unwrap();
    assert_eq!(deleted, (true, false), "a table with a row, then none");
    assert_eq!(pg.read(|txn| txn.open_table(BLOBS)?.len()).unwrap(), 0);
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
                    pg.write(|txn| {
                        let mut t = txn.open_table(COUNTERS)?;
                        let now = t.get("conversations")?.map_or(0, |v| v.value());
                        t.insert("conversations", now + 1).map(drop)
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
    let total = pg.read(|txn| Ok(txn.open_table(COUNTERS)?.get("conversations")?.map(|v| v.value()))).unwrap();
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

#[test]
fn a_version_1_schema_is_brought_to_the_current_one_keeping_its_rows() {
    let url = fresh_database();
    let mut admin = Client::connect(&url, NoTls).unwrap();
    admin
        .batch_execute(
            "CREATE TABLE replicad_schema (version integer NOT NULL);
             INSERT INTO replicad_schema VALUES (1);
             CREATE TABLE replicad_rows (tbl text NOT NULL, sk bytea NOT NULL, k bytea NOT NULL,
                 v bytea NOT NULL, PRIMARY KEY (tbl, sk));
             INSERT INTO replicad_rows VALUES ('t', '\x01', '\x01', '\x02');",
        )
        .unwrap();
    PgTables::connect(&url).unwrap();
    let version: i32 = admin.query_one("SELECT version FROM replicad_schema", &[]).unwrap().get(0);
    assert_eq!(version, SCHEMA_VERSION);
    let rows: i64 = admin.query_one("SELECT count(*) FROM replicad_rows", &[]).unwrap().get(0);
    assert_eq!(rows, 1, "the rows stay");
    let files: i64 = admin.query_one("SELECT count(*) FROM replicad_files", &[]).unwrap().get(0);
    assert_eq!(files, 0, "the files' table exists");
}

/// Schema 9's bot tables (one per channel), as the store before schema 10 kept them.
const MESSENGERA_BOT_V9: TableDefinition<u128, &[u8]> = TableDefinition::new("replica_messengerabot");
const MESSENGERB_BOT_V9: TableDefinition<u128, &[u8]> = TableDefinition::new("replica_messengerbbot");

/// A schema 9 messengerA bot (`docs_bot`, mention `@docs`, offset 77) and messengerB bot
/// (`helper`), as schema 9's structs encoded them (`store::migrate`'s test has the same bytes);
/// their replica's id is bytes 2..18, replaced by the test's.
const MESSENGERA_BOT_V9_HEX: &str = "01100190000000007000800000000000000110019000000000700080000000000000aa03010203fb\
    242108646f63735f626f740540646f637301010334323901fdf6d0ca9f170300009afd00d0ca9f17030000fdced7ca9f17030000";
const MESSENGERB_BOT_V9_HEX: &str = "01100190000000007000800000000000000110019000000000700080000000000000aa020908fd\
    1581e97df41022110668656c706572000000fdd0d7ca9f17030000fda0dfca9f17030000";

/// `hex` decoded, with the replica id at bytes 2..18 set to `replica`.
fn v9_bot(hex: &str, replica: uuid::Uuid) -> Vec<u8> {
    let mut bytes: Vec<u8> =
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    bytes[2..18].copy_from_slice(replica.as_bytes());
    bytes
}

/// A PostgreSQL store written before schema 10 kept each channel's bots in a table of their own;
/// a server started on it moves them into the one table of every channel's bots, and serves
/// them as before.
#[tokio::test]
async fn a_store_with_the_bots_of_schema_9_serves_them_after_the_upgrade() {
    use crate::common::{DataDir, Server};
    let url = fresh_database();
    let server = Server::start_in(DataDir::on_store(&url), &[]);
    let org = server.new_org("bots").await;
    let replica = org.create_replica("bots").await;
    let (_, dir) = server.stop();
    let id = uuid::Uuid::parse_str(&replica).unwrap();
    let old = [(MESSENGERA_BOT_V9, MESSENGERA_BOT_V9_HEX), (MESSENGERB_BOT_V9, MESSENGERB_BOT_V9_HEX)];
    let write = || {
        PgTables::connect(&url).unwrap().write(|txn| {
            for (table, hex) in old {
                txn.open_table(table)?.insert(id.as_u128(), v9_bot(hex, id).as_slice())?;
            }
            Ok(())
        })
    };
    thread::scope(|s| s.spawn(write).join().unwrap()).unwrap();

    let server = Server::start_in(dir, &["--messenger-a-api-base", "http://127.0.0.1:9"]);
    let org = org.at(&server);
    let (status, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{read}");
    assert_eq!(read["messengerA_integration"]["service_name"], "docs_bot", "{read}");
    assert_eq!(read["messengerA_integration"]["mention"], "@docs");
    assert_eq!(read["messengerB_integration"]["service_name"], "helper", "{read}");
    let count = |tbl: &'static str| {
        let sql = "SELECT count(*) FROM replicad_rows WHERE tbl = $1";
        crate::common::pg::with_client(&url, |c| c.query_one(sql, &[&tbl]).unwrap().get::<_, i64>(0))
    };
    assert_eq!((count("replica_messengerabot"), count("replica_messengerbbot")), (0, 0), "the old rows moved");
    assert_eq!(count("channelreplica_integration"), 2);
    let (status, _) = org.delete(&format!("/v1/replicas/{replica}/integrations/messengerB")).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    let (_, read) = org.get(&format!("/v1/replicas/{replica}")).await;
    assert!(read["messengerB_integration"].is_null(), "{read}");
    assert_eq!(count("channelreplica_integration"), 1);
}
