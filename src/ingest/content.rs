//! Writing an entry's text: chunks, summary, detected language, and the outbox row that queues
//! it for the index. Used by the knowledge-base service (text entries, PATCH) and the pipeline
//! (fetched and extracted text).

use redb::WriteTransaction;

use crate::error::Result;
use crate::store::kb::{enqueue, put_source, source_in};
use crate::store::records::{Chunk, KbEntry, KbStatus, KbText};
use crate::store::{self, tables};
use crate::text::{chunk, language};

/// Characters of the processed text kept as the entry's `summary`.
const SUMMARY_CHARS: usize = 200;

/// Stores `raw` as the entry's text, its chunks (replacing old ones), detects its language when
/// none is set, and queues the entry for indexing (status `PROCESSED_TEXT`).
pub fn write_content(txn: &WriteTransaction, entry: &mut KbEntry, raw: &str) -> Result<()> {
    let title = entry.title.clone().or_else(|| entry.generated_title.clone()).unwrap_or_default();
    let pieces = chunk::chunk(&title, raw);
    let mut chunks = txn.open_table(tables::KBCHUNK_CHUNK)?;
    chunks.retain_in((entry.id, 0)..=(entry.id, u32::MAX), |_, _| false)?;
    for (i, p) in pieces.iter().enumerate() {
        store::put(&mut chunks, (entry.id, i as u32), &Chunk { title: p.title.clone(), text: p.text.clone() })?;
    }
    let processed = pieces.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n\n");
    entry.summary = processed.chars().take(SUMMARY_CHARS).collect();
    let mut source = source_in(txn, entry.id)?;
    source.detected_language = language::detect(&processed).map(str::to_string);
    put_source(txn, entry.id, &source)?;
    let text = KbText { raw: raw.to_string(), processed };
    store::put(&mut txn.open_table(tables::KBID_TEXT)?, entry.id, &text)?;
    entry.chunk_count = pieces.len() as u32;
    entry.revision += 1;
    entry.move_to(KbStatus::ProcessedText);
    entry.error = None;
    enqueue(txn, entry.id, entry.revision)
}
