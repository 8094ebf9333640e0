//! The knowledge base's tables: an entry (`kbid_entry`) and the rows written beside it, its
//! text, source record and stored file, its chunks and their vectors, its replica's row, the
//! outbox the indexers follow, the indexer's status marks (see `search::indexer`,
//! `ingest::pipeline`), and the replicas' summaries ([`summary`]) and list orders ([`order`]).
//! This module alone opens these tables; the knowledge-base service, ingestion and search call
//! the functions below.

use std::collections::HashSet;

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::kv::{ReadableTable, Reads, WriteTransaction};
use crate::store::records::{Chunk, ChunkVector, KbEntry, KbSource, KbStatus, KbText, StoredFile};
use crate::store::{codec, get, k, next_seq, put, tables, Sequence};

pub mod order;
pub mod summary;

/// The chunks of entry `id`, in order, from the open `kbchunk_chunk` table.
fn chunks_of(table: &impl ReadableTable<(u64, u32), &'static [u8]>, id: u64) -> Result<Vec<Chunk>> {
    table
        .range((id, 0)..=(id, u32::MAX))?
        .map(|r| r.and_then(|(_, v)| crate::store::codec::decode(v.value())))
        .collect()
}

/// Entry `id`, if stored. Errors: the store's.
pub fn entry(txn: &impl Reads, id: u64) -> Result<Option<KbEntry>> {
    get::<u64, KbEntry, _>(&txn.read_table(tables::KBID_ENTRY)?, id)
}

/// Entry `id` if it is `replica`'s; 404 otherwise. Errors: the store's.
pub fn entry_of(txn: &impl Reads, replica: Uuid, id: u64) -> Result<KbEntry> {
    entry(txn, id)?.filter(|e| e.replica == replica).ok_or_else(|| Error::not_found("knowledge-base entry"))
}

/// Every entry, in id order (the index check, a rebuild). Errors: the store's.
pub fn all_entries(txn: &impl Reads) -> Result<Vec<KbEntry>> {
    let table = txn.read_table(tables::KBID_ENTRY)?;
    let entries = table.iter()?.map(|r| r.and_then(|(_, v)| codec::decode::<KbEntry>(v.value()))).collect();
    entries
}

/// The id of every entry, in order. Errors: the store's.
pub fn entry_ids(txn: &impl Reads) -> Result<Vec<u64>> {
    let table = txn.read_table(tables::KBID_ENTRY)?;
    let ids = table.iter()?.map(|r| r.map(|(k, _)| k.value())).collect();
    ids
}

/// The ids of `replica`'s entries, in order. Errors: the store's.
pub fn ids_of_replica(txn: &impl Reads, replica: Uuid) -> Result<Vec<u64>> {
    let table = txn.read_table(tables::REPLICA_KB)?;
    let ids = table.range((k(replica), 0)..=(k(replica), u64::MAX))?.map(|r| r.map(|(key, _)| key.value().1)).collect();
    ids
}

/// Files new entry `id` under `replica`. Errors: the store's.
pub fn add_to_replica(txn: &WriteTransaction, replica: Uuid, id: u64) -> Result<()> {
    txn.open_table(tables::REPLICA_KB)?.insert((k(replica), id), ())?;
    Ok(())
}

/// The text of entry `id`, if one was written. Errors: the store's.
pub fn text(txn: &impl Reads, id: u64) -> Result<Option<KbText>> {
    get::<u64, KbText, _>(&txn.read_table(tables::KBID_TEXT)?, id)
}

/// Writes the text of entry `id`, a [`KbText`] already encoded ([`codec::encode`]: the
/// writer only puts the finished record). Errors: the store's.
pub fn put_encoded_text(txn: &WriteTransaction, id: u64, encoded: &[u8]) -> Result<()> {
    txn.open_table(tables::KBID_TEXT)?.insert(id, encoded)?;
    Ok(())
}

/// Replaces the chunks of entry `id` with `encoded` (each a [`Chunk`] already encoded), in
/// order. Errors: the store's.
pub fn put_encoded_chunks(txn: &WriteTransaction, id: u64, encoded: &[Vec<u8>]) -> Result<()> {
    let mut chunks = txn.open_table(tables::KBCHUNK_CHUNK)?;
    chunks.retain_in((id, 0)..=(id, u32::MAX), |_, _| false)?;
    for (i, c) in encoded.iter().enumerate() {
        chunks.insert((id, i as u32), c.as_slice())?;
    }
    Ok(())
}

/// The chunks of entry `id`, in order. Errors: the store's.
pub fn chunks(txn: &impl Reads, id: u64) -> Result<Vec<Chunk>> {
    chunks_of(&txn.read_table(tables::KBCHUNK_CHUNK)?, id)
}

/// The file stored for entry `id`, if any. Errors: the store's.
pub fn stored_file(txn: &impl Reads, id: u64) -> Result<Option<StoredFile>> {
    get::<u64, StoredFile, _>(&txn.read_table(tables::KBID_STOREDFILE)?, id)
}

/// Records `stored` as the file of entry `id`. Errors: the store's.
pub fn put_stored_file(txn: &WriteTransaction, id: u64, stored: &StoredFile) -> Result<()> {
    put(&mut txn.open_table(tables::KBID_STOREDFILE)?, id, stored)
}

/// Every stored file, `(entry, file)`, in entry order (the sweep, the backup, the index
/// check). Errors: the store's.
pub fn stored_files(txn: &impl Reads) -> Result<Vec<(u64, StoredFile)>> {
    let table = txn.read_table(tables::KBID_STOREDFILE)?;
    let files = table
        .iter()?
        .map(|row| {
            let (k, v) = row?;
            Ok((k.value(), codec::decode::<StoredFile>(v.value())?))
        })
        .collect();
    files
}

/// Removes the rows written beside entry `e`: its text, source record, stored file (the file
/// goes at the next sweep), chunks, vectors and its replica's row. Errors: the store's.
pub fn remove_rows(txn: &WriteTransaction, e: &KbEntry) -> Result<()> {
    let id = e.id;
    txn.open_table(tables::KBID_TEXT)?.remove(id)?;
    txn.open_table(tables::KBID_SOURCE)?.remove(id)?;
    txn.open_table(tables::KBID_STOREDFILE)?.remove(id)?;
    txn.open_table(tables::REPLICA_KB)?.remove((k(e.replica), id))?;
    txn.open_table(tables::KBCHUNK_CHUNK)?.retain_in((id, 0)..=(id, u32::MAX), |_, _| false)?;
    txn.open_table(tables::KBCHUNK_VECTOR)?.retain_in((id, 0)..=(id, u32::MAX), |_, _| false)?;
    Ok(())
}

/// Entries and their source records, open for reading many in one read (a list's page, a
/// retrieval's hits).
pub struct EntryReader<T> {
    entries: T,
    sources: T,
}

/// An [`EntryReader`] in `txn`. Errors: the store's.
pub fn entry_reader<R: Reads>(txn: &R) -> Result<EntryReader<R::Table<'_, u64, &'static [u8]>>> {
    Ok(EntryReader { entries: txn.read_table(tables::KBID_ENTRY)?, sources: txn.read_table(tables::KBID_SOURCE)? })
}

impl<T: ReadableTable<u64, &'static [u8]>> EntryReader<T> {
    /// Entry `id`, if stored. Errors: the store's.
    pub fn entry(&self, id: u64) -> Result<Option<KbEntry>> {
        get::<u64, KbEntry, _>(&self.entries, id)
    }

    /// The source record of entry `id` (empty when none was written). Errors: the store's.
    pub fn source(&self, id: u64) -> Result<KbSource> {
        Ok(get::<u64, KbSource, _>(&self.sources, id)?.unwrap_or_default())
    }
}

/// The vectors of chunk `(entry, index)`, if stored. Errors: the store's.
pub fn vector(txn: &impl Reads, key: (u64, u32)) -> Result<Option<ChunkVector>> {
    get::<(u64, u32), ChunkVector, _>(&txn.read_table(tables::KBCHUNK_VECTOR)?, key)
}

/// Chunk `(entry, index)`, if stored. Errors: the store's.
pub fn chunk(txn: &impl Reads, key: (u64, u32)) -> Result<Option<Chunk>> {
    get::<(u64, u32), Chunk, _>(&txn.read_table(tables::KBCHUNK_CHUNK)?, key)
}

/// The stored vectors of `entry`'s chunks, `(chunk index, vectors)`, in order. Errors: the
/// store's.
pub fn vectors_of(txn: &impl Reads, entry: u64) -> Result<Vec<(u32, ChunkVector)>> {
    let table = txn.read_table(tables::KBCHUNK_VECTOR)?;
    let rows = table
        .range((entry, 0)..=(entry, u32::MAX))?
        .map(|row| {
            let (key, value) = row?;
            Ok((key.value().1, codec::decode::<ChunkVector>(value.value())?))
        })
        .collect();
    rows
}

/// Writes the vectors `computed` of `entry`'s chunks and removes those of chunks from
/// `chunk_count` on (past the entry's end). Errors: the store's.
pub fn put_vectors(
    txn: &WriteTransaction,
    entry: u64,
    computed: &[(u32, ChunkVector)],
    chunk_count: u32,
) -> Result<()> {
    let mut table = txn.open_table(tables::KBCHUNK_VECTOR)?;
    for (chunk, v) in computed {
        table.insert((entry, *chunk), codec::encode(v)?.as_slice())?;
    }
    table.retain_in((entry, chunk_count)..=(entry, u32::MAX), |_, _| false)
}

/// The name of the outbox table (the record cache's key for the outbox's head,
/// `Store::outbox_head`).
pub fn outbox_table_name() -> &'static str {
    use redb::TableHandle as _;
    tables::SEQ_KBOUTBOX.name()
}

/// The outbox's pending rows' entries (the index check). Errors: the store's.
pub fn outbox_entries(txn: &impl Reads) -> Result<HashSet<u64>> {
    let table = txn.read_table(tables::SEQ_KBOUTBOX)?;
    let entries = table.iter()?.map(|r| r.map(|(_, v)| v.value().0)).collect();
    entries
}

/// Removes the outbox rows up to position `upto` (every index has applied them). Errors: the
/// store's.
pub fn trim_outbox(txn: &WriteTransaction, upto: u64) -> Result<()> {
    txn.open_table(tables::SEQ_KBOUTBOX)?.retain_in(0..=upto, |_, _| false)
}

/// Up to `limit` outbox rows after position `after`, `(position, entry)`, in order. Errors:
/// the store's.
pub fn outbox_after(txn: &impl Reads, after: u64, limit: usize) -> Result<Vec<(u64, u64)>> {
    let table = txn.read_table(tables::SEQ_KBOUTBOX)?;
    let rows = table.range(after + 1..)?.take(limit).map(|r| r.map(|(seq, v)| (seq.value(), v.value().0))).collect();
    rows
}

/// Removes the outbox rows at `positions` (this node applied them). Errors: the store's.
pub fn remove_outbox_rows(txn: &WriteTransaction, positions: &[u64]) -> Result<()> {
    let mut outbox = txn.open_table(tables::SEQ_KBOUTBOX)?;
    for p in positions {
        outbox.remove(p)?;
    }
    Ok(())
}

/// Whether the outbox row at position `seq` is gone (trimmed). Errors: the store's.
pub fn outbox_row_gone(txn: &impl Reads, seq: u64) -> Result<bool> {
    Ok(txn.read_table(tables::SEQ_KBOUTBOX)?.get(seq)?.is_none())
}

/// The source record of entry `id` (empty when none was written).
pub fn source_in(txn: &impl Reads, id: u64) -> Result<KbSource> {
    Ok(get::<u64, KbSource, _>(&txn.read_table(tables::KBID_SOURCE)?, id)?.unwrap_or_default())
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
        let Some(mut e) = entry(txn, id)? else { continue };
        if e.revision == revision && e.move_to(status) {
            summary::put_entry(txn, &e)?;
        }
    }
    Ok(())
}
