//! The shared outbox's old rows, on a store several nodes share: each node records how far its
//! index has applied the outbox, and the rows every live node has applied are removed.
//!
//! - **Positions.** A node's indexer writes its position (`meta` `outbox_position/<node>`: the
//!   seq its index has applied, and when) in the write that marks a batch `READY`, and again
//!   every [`REPORT_EVERY_MS`] while idle. The node is this process ([`this_node`], a random
//!   id per start).
//! - **Removal.** In the same write, the rows up to the smallest position of the live nodes,
//!   less [`MARGIN`] (a node applies its last batch again after a start), are removed, with the
//!   positions not written for [`LIFE_MS`]: such a node counts as gone.
//! - **A node that was gone** (stopped for longer than [`LIFE_MS`], or a new node after a
//!   removal) finds rows missing past its position ([`rows_missing`]) and rebuilds its index
//!   from the tables, which hold everything the rows pointed at.

use std::sync::LazyLock;

use uuid::Uuid;

use crate::error::Result;
use crate::store::kv::{ReadTransaction, WriteTransaction};
use crate::store::meta::Meta;

/// How long a position counts without being written again.
pub const LIFE_MS: i64 = 10 * 60 * 1000;
/// How often an idle node writes its position again.
pub const REPORT_EVERY_MS: i64 = 60 * 1000;
/// Rows kept below the smallest live position (the batch a node applies again after a start).
pub const MARGIN: u64 = 512;

const PREFIX: &str = "outbox_position/";
/// The first key after every key starting with [`PREFIX`] (`'0'` follows `'/'`).
const PREFIX_END: &str = "outbox_position0";

static NODE: LazyLock<String> = LazyLock::new(|| format!("{PREFIX}{}", Uuid::new_v4()));

/// This process's key in `meta`.
pub fn this_node() -> &'static str {
    &NODE
}

/// Records that this node has applied the outbox up to `applied` at `now` (ms), removes the
/// positions not written for [`LIFE_MS`] and the outbox rows every live node has applied (less
/// [`MARGIN`]).
pub fn record(txn: &WriteTransaction, applied: u64, now: i64) -> Result<()> {
    let mut meta = Meta::open(txn)?;
    meta.put(this_node(), &encode(applied, now))?;
    let (mut oldest, mut gone) = (applied, Vec::new());
    for (name, value) in meta.range(PREFIX..PREFIX_END)? {
        match decode(&value) {
            Some((_, at)) if at < now - LIFE_MS => gone.push(name),
            Some((position, _)) => oldest = oldest.min(position),
            None => gone.push(name),
        }
    }
    for name in &gone {
        meta.remove(name)?;
    }
    if let Some(upto) = oldest.checked_sub(MARGIN).filter(|u| *u > 0) {
        crate::store::kb::trim_outbox(txn, upto)?;
    }
    Ok(())
}

/// Whether rows past `after` that this node has not applied were removed (the outbox's head is
/// past `after` and its row `after + 1` is gone): its index must be rebuilt from the tables.
pub fn rows_missing(txn: &ReadTransaction, after: u64) -> Result<bool> {
    let head = crate::store::outbox_seq(txn)?;
    Ok(head > after && crate::store::kb::outbox_row_gone(txn, after + 1)?)
}

fn encode(applied: u64, at: i64) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&applied.to_be_bytes());
    bytes[8..].copy_from_slice(&at.to_be_bytes());
    bytes
}

fn decode(bytes: &[u8]) -> Option<(u64, i64)> {
    let applied = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
    let at = i64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some((applied, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_back_as_written() {
        assert_eq!(decode(&encode(42, 1_700_000_000_000)), Some((42, 1_700_000_000_000)));
        assert_eq!(decode(b"short"), None);
    }

    #[test]
    fn every_position_key_sorts_between_the_prefix_and_its_end() {
        let key = this_node();
        assert!((PREFIX..PREFIX_END).contains(&key), "{key}");
    }
}
