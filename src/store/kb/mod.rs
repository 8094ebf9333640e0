//! Knowledge-base rows written beside an entry: its source record, its outbox rows, its
//! ingestion job, and the indexer's status marks (see `search::indexer`, `ingest::pipeline`).

use crate::store::kv::{ReadableTable, WriteTransaction};

use crate::error::Result;
use crate::store::records::{Chunk, KbEntry, KbSource, KbStatus};
use crate::store::{get, next_seq, put, tables, Sequence};

pub mod order;
pub mod summary;

/// The chunks of entry `id`, in order, from the open `kbchunk_chunk` table.
pub fn chunks_of(table: &impl ReadableTable<(u64, u32), &'static [u8]>, id: u64) -> Result<Vec<Chunk>> {
    table
        .range((id, 0)..=(id, u32::MAX))?
        .map(|r| r.and_then(|(_, v)| crate::store::codec::decode(v.value())))
        .collect()
}

/// The source record of entry `id` (empty when none was written).
pub fn source_in(txn: &WriteTransaction, id: u64) -> Result<KbSource> {
    Ok(get::<u64, KbSource, _>(&txn.open_table(tables::KBID_SOURCE)?, id)?.unwrap_or_default())
}

/// Writes the source record of entry `id`.
pub fn put_source(txn: &WriteTransaction, id: u64, source: &KbSource) -> Result<()> {
    put(&mut txn.open_table(tables::KBID_SOURCE)?, id, source)
}

/// Appends an outbox row for `entry` at `revision` (0 for a deletion); the other nodes hear of
/// it at the commit ([`crate::store::notify::KB`]).
pub fn enqueue(txn: &WriteTransaction, entry: u64, revision: u64) -> Result<()> {
    let seq = next_seq(txn, Sequence::Outbox)?;
    txn.open_table(tables::SEQ_KBOUTBOX)?.insert(seq, (entry, revision))?;
    txn.notify_on_commit(crate::store::notify::KB);
    Ok(())
}

/// Moves entries whose current revision is the one indexed (`(entry, revision)` pairs) to
/// `status` (`READY`: written only after the index commit that holds them is visible to
/// searches; see `search::indexer`) where [`KbStatus::may_become`] allows it.
pub fn mark_indexed_in(txn: &WriteTransaction, indexed: &[(u64, u64)], status: KbStatus) -> Result<()> {
    for &(id, revision) in indexed {
        let Some(mut e) = get::<u64, KbEntry, _>(&txn.open_table(tables::KBID_ENTRY)?, id)? else { continue };
        if e.revision == revision && e.move_to(status) {
            summary::put_entry(txn, &e)?;
        }
    }
    Ok(())
}
