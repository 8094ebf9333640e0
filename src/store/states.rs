//! The states and kinds of a knowledge-base entry, and the one table of allowed status moves.
//!
//! Stored in [`super::records::KbEntry`] (bincode writes the variant's position, so variants are
//! only ever appended) and shown on the wire by name (`status`, `type`; spec §2.5).

use serde::{Deserialize, Serialize};

/// Processing status of an entry (spec §2.5 `status`), in processing order, then the failure.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum KbStatus {
    /// Made; a `website` waits to be fetched, a `file` for its bytes.
    New,
    /// The file's bytes are stored; extraction comes next.
    FileUploaded,
    /// Fetched or extracted text is stored; chunking comes next.
    RawText,
    /// Chunks are stored and an outbox row queues them for the index.
    ProcessedText,
    /// The index commit holds the chunks.
    VectorCreated,
    /// Searches see the chunks.
    Ready,
    /// Processing failed; the entry's `error` says why.
    Unprocessable,
}

impl KbStatus {
    /// Every status, in processing order, then the failure status.
    pub const ALL: [KbStatus; 7] = [
        KbStatus::New,
        KbStatus::FileUploaded,
        KbStatus::RawText,
        KbStatus::ProcessedText,
        KbStatus::VectorCreated,
        KbStatus::Ready,
        KbStatus::Unprocessable,
    ];
    /// The wire names of [`KbStatus::ALL`], in the same order.
    pub const NAMES: [&'static str; 7] =
        ["NEW", "FILE_UPLOADED", "RAW_TEXT", "PROCESSED_TEXT", "VECTOR_CREATED", "READY", "UNPROCESSABLE"];

    /// The wire name (`"READY"`, …).
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The status named `name` (a wire name), if any.
    pub fn parse(name: &str) -> Option<KbStatus> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| Self::ALL[i])
    }

    /// Whether an entry at `self` may move to `next`. The only table of moves:
    /// - `any → FILE_UPLOADED`: the upload arrived (once: its URL is single-use; the file
    ///   replaces a text a PATCH gave meanwhile);
    /// - `NEW | FILE_UPLOADED → RAW_TEXT`: fetched or extracted;
    /// - `PROCESSED_TEXT | VECTOR_CREATED | READY → RAW_TEXT`: an `autoRefresh` re-fetch changed;
    /// - `any → PROCESSED_TEXT`: a text was written (create, PATCH `rawText`, chunking);
    /// - `PROCESSED_TEXT → VECTOR_CREATED → READY` (or straight to `READY`): indexed;
    /// - `any → UNPROCESSABLE`: failed.
    pub fn may_become(self, next: KbStatus) -> bool {
        use KbStatus::*;
        matches!(
            (self, next),
            (_, FileUploaded)
                | (New | FileUploaded | ProcessedText | VectorCreated | Ready, RawText)
                | (_, ProcessedText)
                | (ProcessedText, VectorCreated)
                | (ProcessedText | VectorCreated, Ready)
                | (_, Unprocessable)
        )
    }

    /// Whether the index holds the entry's chunks at this status (`VECTOR_CREATED`, `READY`).
    pub fn is_indexed(self) -> bool {
        matches!(self, KbStatus::VectorCreated | KbStatus::Ready)
    }
}

/// Where an entry's content comes from (spec §2.5 `type`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum KbKind {
    /// Text given in the create body.
    Text,
    /// An uploaded file.
    File,
    /// A fetched web page.
    Website,
    /// A YouTube video (not processable by this server).
    Youtube,
}

impl KbKind {
    /// Every kind.
    pub const ALL: [KbKind; 4] = [KbKind::Text, KbKind::File, KbKind::Website, KbKind::Youtube];
    /// The wire names of [`KbKind::ALL`], in the same order.
    pub const NAMES: [&'static str; 4] = ["text", "file", "website", "youtube"];

    /// The wire name (`"website"`, …).
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The kind named `name` (a wire name), if any.
    pub fn parse(name: &str) -> Option<KbKind> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| Self::ALL[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for s in KbStatus::ALL {
            assert_eq!(KbStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for k in KbKind::ALL {
            assert_eq!(KbKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert_eq!(KbStatus::parse("DONE"), None);
        assert_eq!(KbKind::parse("pdf"), None);
    }

    #[test]
    fn the_pipeline_moves_forward_and_an_index_never_revives_a_failure() {
        use KbStatus::*;
        for (from, to) in [(New, RawText), (FileUploaded, RawText), (RawText, ProcessedText), (ProcessedText, Ready)] {
            assert!(from.may_become(to), "{from:?} → {to:?}");
        }
        for (from, to) in [
            (Unprocessable, Ready),
            (Unprocessable, VectorCreated),
            (RawText, Ready),
            (Ready, New),
            (Ready, VectorCreated),
        ] {
            assert!(!from.may_become(to), "{from:?} → {to:?}");
        }
        assert!(Unprocessable.may_become(ProcessedText), "a PATCH with rawText revives a failed entry");
    }
}
