//! Writing an entry's text: chunks, summary, detected language, and the outbox row that queues
//! it for the index. Used by the knowledge-base service (text entries, PATCH) and the pipeline
//! (fetched and extracted text).
//!
//! The work is split in two so that nothing heavy runs inside the writer's transaction, where
//! every other write would wait behind it.
//! [`PreparedText::prepare`] does everything that costs CPU — the generated title, chunking
//! (up to 2,000,000 characters), language detection, the summary, encoding every record — off
//! the single writer, on the blocking pool (a text of up to 16 KiB on the calling task, where
//! that costs less than the hop). [`write_content`] then only puts those finished
//! records in the write transaction, so it is cheap to run again when the writer re-applies its
//! batch after another write failed. The caller's write closure checks, before it writes
//! anything, that what the text was prepared from still holds (the entry exists, is at the
//! revision and status it was read at, and its chunks are still named as prepared, see
//! [`PreparedText::fits`]); when not, it writes nothing and the caller reads and prepares again.

use crate::store::kv::WriteTransaction;

use crate::error::{Error, Result};
use crate::store::kb::{enqueue, put_source, source_in};
use crate::store::records::{Chunk, KbEntry, KbStatus, KbText};
use crate::store::{codec, kb};
use crate::text::{chunk, language, pages};

/// Characters of the processed text kept as the entry's `summary`.
const SUMMARY_CHARS: usize = 200;

/// Texts up to this many bytes are prepared on the calling task: chunking them takes less
/// than the hop to the blocking pool.
const INLINE_BYTES: usize = 16 * 1024;

/// An entry's text chunked, analysed and encoded, ready for [`write_content`].
#[derive(Debug)]
pub struct PreparedText {
    /// The title the chunks are named after.
    title: String,
    /// `Some`: the entry's `generatedTitle` becomes this (a `text` entry names itself after its
    /// text); `None`: it is kept.
    generated_title: Option<Option<String>>,
    /// Encoded [`Chunk`] records, in order.
    chunks: Vec<Vec<u8>>,
    /// The encoded [`KbText`] record (raw and processed text).
    text: Vec<u8>,
    summary: String,
    detected_language: Option<String>,
}

/// Whose title names a text's chunks: the entry's own `title` (as it will be once written),
/// and its `generatedTitle` — or, with `generate`, a title generated from the text itself.
#[derive(Debug, Clone, Default)]
pub struct Naming {
    pub title: Option<String>,
    pub generated_title: Option<String>,
    pub generate: bool,
}

impl Naming {
    /// The naming of `entry` as it is: its own titles, none generated.
    pub fn of(entry: &KbEntry) -> Naming {
        Naming { title: entry.title.clone(), generated_title: entry.generated_title.clone(), generate: false }
    }
}

/// The title chunks of `entry` are named after: its title, else its generated title.
fn chunk_title(title: Option<&String>, generated: Option<&String>) -> String {
    title.or(generated).cloned().unwrap_or_default()
}

impl PreparedText {
    /// Chunks `raw`, detects its language and encodes the records, on the calling thread.
    pub fn new(naming: Naming, raw: &str) -> Result<PreparedText> {
        let generated_title = naming.generate.then(|| Some(chunk::generated_title(raw)).filter(|t| !t.is_empty()));
        let generated = generated_title.clone().unwrap_or(naming.generated_title);
        let title = chunk_title(naming.title.as_ref(), generated.as_ref());
        let pieces = chunk::chunk(&title, raw);
        let pages = pages::first_pages(raw, pieces.iter().map(|p| p.text.as_str()));
        let chunks = pieces
            .iter()
            .zip(pages)
            .map(|(p, page)| codec::encode(&Chunk { title: p.title.clone(), text: p.text.clone(), page }))
            .collect::<Result<Vec<_>>>()?;
        let processed = pieces.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n\n");
        let summary = processed.chars().take(SUMMARY_CHARS).collect();
        let detected_language = language::detect(&processed).map(str::to_string);
        let text = codec::encode(&KbText { raw: raw.to_string(), processed })?;
        Ok(PreparedText { title, generated_title, chunks, text, summary, detected_language })
    }

    /// [`PreparedText::new`] off the runtime's workers: on the blocking pool, but for a short
    /// text.
    pub async fn prepare(naming: Naming, raw: String) -> Result<PreparedText> {
        if raw.len() <= INLINE_BYTES {
            return PreparedText::new(naming, &raw);
        }
        tokio::task::spawn_blocking(move || PreparedText::new(naming, &raw)).await.map_err(Error::internal)?
    }

    /// Whether the chunks were named as `entry` (as it is about to be written) names them: when
    /// not, the entry's title changed since the text was prepared and it must be prepared again.
    pub fn fits(&self, entry: &KbEntry) -> bool {
        let generated = match &self.generated_title {
            Some(g) => g.as_ref(),
            None => entry.generated_title.as_ref(),
        };
        chunk_title(entry.title.as_ref(), generated) == self.title
    }

    /// How many chunks the text made.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

/// Stores the prepared text as the entry's text and its chunks (replacing old ones), its
/// detected language and summary, and queues the entry for indexing (status `PROCESSED_TEXT`,
/// next revision). Only puts finished records: cheap to run again. An internal error (and
/// nothing written) when `text` does not [`PreparedText::fits`] the entry: the caller checks
/// that first.
pub fn write_content(txn: &WriteTransaction, entry: &mut KbEntry, text: &PreparedText) -> Result<()> {
    if !text.fits(entry) {
        return Err(Error::internal(format!("entry {}: its text was prepared under another title", entry.id)));
    }
    if let Some(g) = &text.generated_title {
        entry.generated_title = g.clone();
    }
    kb::put_encoded_chunks(txn, entry.id, &text.chunks)?;
    let mut source = source_in(txn, entry.id)?;
    source.detected_language = text.detected_language.clone();
    put_source(txn, entry.id, &source)?;
    kb::put_encoded_text(txn, entry.id, &text.text)?;
    entry.summary = text.summary.clone();
    entry.chunk_count = text.chunks.len() as u32;
    entry.revision += 1;
    entry.move_to(KbStatus::ProcessedText);
    entry.error = None;
    enqueue(txn, entry.id, entry.revision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::KbKind;

    fn entry(title: Option<&str>, generated: Option<&str>) -> KbEntry {
        KbEntry {
            id: 1,
            replica: uuid::Uuid::nil(),
            org: uuid::Uuid::nil(),
            kind: KbKind::Text,
            status: KbStatus::New,
            title: title.map(str::to_string),
            generated_title: generated.map(str::to_string),
            language: None,
            auto_refresh: false,
            summary: String::new(),
            chunk_count: 0,
            revision: 0,
            error: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn prepared_text_holds_the_chunks_the_chunker_makes() {
        let raw = "# Tea\n\nGreen tea is steamed.\n\n## Black\n\nBlack tea is oxidised.";
        let naming = Naming { title: None, generated_title: None, generate: true };
        let p = PreparedText::new(naming, raw).unwrap();
        assert_eq!(p.generated_title, Some(Some("Tea".to_string())));
        assert_eq!(p.title, "Tea");
        let made = chunk::chunk("Tea", raw);
        assert_eq!(p.chunk_count(), made.len());
        let first: Chunk = codec::decode(&p.chunks[0]).unwrap();
        assert_eq!((first.title.as_str(), first.text.as_str()), (made[0].title.as_str(), made[0].text.as_str()));
        let text: KbText = codec::decode(&p.text).unwrap();
        assert_eq!(text.raw, raw);
        assert!(p.summary.starts_with("Green tea"));
    }

    #[test]
    fn prepared_text_fits_only_the_titles_it_was_named_after() {
        let p = PreparedText::new(Naming::of(&entry(Some("Own"), Some("Gen"))), "Some text.").unwrap();
        assert!(p.fits(&entry(Some("Own"), Some("Other"))));
        assert!(!p.fits(&entry(Some("Renamed"), Some("Gen"))));
        let p = PreparedText::new(Naming::of(&entry(None, Some("Gen"))), "Some text.").unwrap();
        assert!(p.fits(&entry(None, Some("Gen"))));
        assert!(!p.fits(&entry(None, Some("Changed by a re-fetch"))));
        assert!(!p.fits(&entry(Some("Own"), Some("Gen"))));
        let generating = Naming { generate: true, ..Naming::of(&entry(None, Some("Old"))) };
        let p = PreparedText::new(generating, "New first line\n\nmore").unwrap();
        assert!(p.fits(&entry(None, Some("Old"))), "the generated title replaces the stored one");
        assert!(!p.fits(&entry(Some("Own"), None)));
    }
}
