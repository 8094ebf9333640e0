//! `replicad check`: do the search index and the store agree, and are the uploaded files the
//! store records whole?
//!
//! For every entry without pending outbox rows, the index must hold exactly its stored chunk
//! count of documents (`READY`/`VECTOR_CREATED` entries), or none (entries that were never
//! processed or are `UNPROCESSABLE`); the index must hold no document of an entry the store does
//! not have; and the index's commit payload must not be ahead of the store's outbox sequence.
//! Every uploaded file the store records must be in `DATA_DIR/files/` with the recorded size
//! and SHA-256 (`store::files`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Search;
use crate::error::{Error, Result};
use crate::store::files::Verified;
use crate::store::records::KbEntry;
use crate::store::{self, kb, Store};

/// What `check` found.
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    /// `true` when nothing below disagrees.
    pub ok: bool,
    pub entries: u64,
    pub chunks_in_store: u64,
    pub documents_in_index: u64,
    /// Outbox rows not yet applied (their entries are not compared).
    pub pending_outbox_rows: u64,
    /// Entries whose document count differs: `(entry, expected, found)`.
    pub mismatched: Vec<(u64, u64, u64)>,
    /// Entry ids with documents in the index but no entry in the store.
    pub orphaned: Vec<u64>,
    pub index_seq: Option<u64>,
    pub store_seq: u64,
    /// The uploaded files: recorded, damaged (missing or changed), unreferenced.
    pub files: Verified,
    /// Ingestion jobs with runs that started and did not finish (a crash, a stop, a retried
    /// fetch, or a run in progress now): `(entry, runs)`. A job reaching
    /// `ingest::pipeline::MAX_ATTEMPTS` ends its entry `UNPROCESSABLE`. Informational: does not
    /// make `ok` false.
    #[serde(default)]
    pub interrupted_jobs: Vec<(u64, u32)>,
}

fn expected_docs(e: &KbEntry) -> u64 {
    if e.status.is_indexed() {
        e.chunk_count as u64
    } else {
        0
    }
}

impl Search {
    /// Documents per entry id in the current generation (live documents only).
    fn documents_per_entry(&self) -> Result<BTreeMap<u64, u64>> {
        let searcher = self.current().reader.searcher();
        let mut counts = BTreeMap::new();
        for segment in searcher.segment_readers() {
            let column = segment.fast_fields().u64("entry").map_err(Error::from)?;
            for doc in segment.doc_ids_alive() {
                if let Some(entry) = column.first(doc) {
                    *counts.entry(entry).or_default() += 1;
                }
            }
        }
        Ok(counts)
    }
}

/// Compares the index with the store (see the module documentation).
pub async fn check(store: &Store, search: &Arc<Search>) -> Result<Report> {
    let (entries, pending, store_seq, recorded, interrupted_jobs) = store
        .read_scan(|txn| {
            let pending = kb::outbox_entries(txn)?;
            let entries = kb::all_entries(txn)?;
            let recorded = kb::stored_files(txn)?;
            let seq = store::outbox_seq(txn)?;
            Ok((entries, pending, seq, recorded, crate::ingest::pipeline::interrupted_jobs(txn)?))
        })
        .await?;
    let s = search.clone();
    let stored_files = store.files.clone();
    let (mut found, index_seq, files) = tokio::task::spawn_blocking(move || {
        Ok::<_, Error>((
            s.documents_per_entry()?,
            s.current().payload().map(|p| p.seq),
            stored_files.verify(&recorded)?,
        ))
    })
    .await
    .map_err(Error::internal)??;
    let mut report = Report {
        ok: true,
        entries: entries.len() as u64,
        chunks_in_store: entries.iter().map(|e| e.chunk_count as u64).sum(),
        documents_in_index: found.values().sum(),
        pending_outbox_rows: pending.len() as u64,
        mismatched: Vec::new(),
        orphaned: Vec::new(),
        index_seq,
        store_seq,
        files,
        interrupted_jobs,
    };
    for e in &entries {
        let docs = found.remove(&e.id).unwrap_or(0);
        if !pending.contains(&e.id) && docs != expected_docs(e) {
            report.mismatched.push((e.id, expected_docs(e), docs));
        }
    }
    report.orphaned = found.into_keys().filter(|id| !pending.contains(id)).collect();
    report.ok = report.mismatched.is_empty()
        && report.orphaned.is_empty()
        && report.index_seq.is_some_and(|s| s <= store_seq)
        && report.files.damaged_files.is_empty();
    Ok(report)
}
