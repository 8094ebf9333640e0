//! Schema version of the store: stamp a fresh store, refuse one newer than this binary,
//! migrate an older one (one transaction per step, which also writes the new version).

use redb::{Database, ReadableTable};

use super::tables;
use crate::error::{Error, Result};

/// The store layout this binary writes.
pub const SCHEMA_VERSION: u32 = 1;

const KEY: &str = "schema_version";

/// Brings the store at `db` to [`SCHEMA_VERSION`], creating every table.
pub fn run(db: &Database) -> Result<()> {
    let found = read_version(db)?;
    match found {
        None => fresh(db),
        Some(v) if v > SCHEMA_VERSION => Err(Error::internal(format!(
            "the store has schema version {v}, newer than this binary ({SCHEMA_VERSION}); \
             upgrade replicad"
        ))),
        Some(v) => {
            // Ordered migrations go here: `for step in v..SCHEMA_VERSION { migrate_from(step) }`.
            debug_assert!(v == SCHEMA_VERSION);
            Ok(())
        }
    }
}

fn read_version(db: &Database) -> Result<Option<u32>> {
    let txn = db.begin_write()?;
    let v = {
        let meta = txn.open_table(tables::META)?;
        let v = meta.get(KEY)?.map(|b| b.value().to_vec());
        v
    };
    txn.abort()?;
    match v {
        None => Ok(None),
        Some(b) => {
            let arr: [u8; 4] = b.try_into().map_err(|_| Error::internal("bad schema_version"))?;
            Ok(Some(u32::from_be_bytes(arr)))
        }
    }
}

fn fresh(db: &Database) -> Result<()> {
    let txn = db.begin_write()?;
    {
        txn.open_table(tables::SEQUENCES)?;
        txn.open_table(tables::ORGS)?;
        txn.open_table(tables::KEYHASH_ORG)?;
        txn.open_table(tables::CODEHASH_INVITE)?;
        txn.open_table(tables::REPLICAS)?;
        txn.open_table(tables::ORG_REPLICA)?;
        txn.open_table(tables::SLUG_REPLICA)?;
        txn.open_table(tables::USERS)?;
        txn.open_table(tables::ORG_USER)?;
        txn.open_table(tables::EMAIL_USER)?;
        txn.open_table(tables::LINKED_USER)?;
        txn.open_table(tables::KB_ENTRIES)?;
        txn.open_table(tables::KB_TEXTS)?;
        txn.open_table(tables::REPLICA_KB)?;
        txn.open_table(tables::KB_CHUNKS)?;
        txn.open_table(tables::KB_OUTBOX)?;
        txn.open_table(tables::MESSAGES)?;
        txn.open_table(tables::REPLICA_MESSAGECOUNT)?;
        txn.open_table(tables::ONCE)?;
        txn.open_table(tables::CHANNELMSG_MESSAGE)?;
        txn.open_table(tables::REPLICAUSERMONTH_USAGE)?;
        let mut meta = txn.open_table(tables::META)?;
        meta.insert(KEY, SCHEMA_VERSION.to_be_bytes().as_slice())?;
    }
    txn.commit()?;
    Ok(())
}
