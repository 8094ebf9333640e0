//! The members of a bundle as they are written (JSON with the API's camelCase names, and one
//! binary layout for vectors): kept apart from the store's records, so the store may change
//! while the format stays (a new format is a new [`super::FORMAT`] and a step in
//! [`super::archive::migrate`]). docs/bundles.md documents every field.

use serde::{Deserialize, Serialize};

use super::BundleError;
use crate::store::records::{FileMeta, KbEntry, KbSource, Llm, Replica, WebsiteMeta};

/// The first member, `manifest.json`.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The bundle format ([`super::FORMAT`] when written by this build).
    pub format: u32,
    /// The version of the replicad that wrote it.
    pub replicad: String,
    /// How chunks were cut into the sentences their sentence vectors are of
    /// (`search::vectors::SEGMENTATION_VERSION` of the writer).
    pub segmentation_version: u64,
    /// When it was written, RFC 3339 UTC.
    pub created_at: String,
    /// The replica's configuration.
    pub replica: ReplicaConfig,
    /// The vectors it holds, one set per embedding model (none when it holds no vectors).
    pub vector_sets: Vec<VectorSet>,
    /// What it holds.
    pub counts: Counts,
    /// Whether it holds the replica's history (`history/users.json`, `history/messages.json`).
    #[serde(default)]
    pub with_history: bool,
    /// The channel integrations the replica had (`messengerA`, `messengerB`): their tokens are
    /// never in a bundle, so they are to be connected again after an import.
    pub integrations_to_reconnect: Vec<String>,
    /// Every other member: its path, size and SHA-256.
    pub members: Vec<Member>,
}

/// The embedding model a set of vectors was made with.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VectorSet {
    /// Embedding-model catalog id.
    pub model: String,
    /// The model's fingerprint (`embed::Embedder::fingerprint`: SHA-256 of its files and the
    /// arithmetic it ran in).
    pub fingerprint: String,
    /// Length of each vector.
    pub dimension: u32,
    /// Chunks with vectors in the set.
    pub chunks: u64,
    /// Sentence vectors in the set.
    pub sentences: u64,
}

/// How much a bundle holds.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub entries: u64,
    pub chunks: u64,
    /// Chunks with vectors.
    pub vectors: u64,
    /// Original files.
    pub files: u64,
    /// History items (with the history).
    #[serde(default)]
    pub messages: u64,
}

/// A member of the archive: its path (relative, `/`-separated), size in bytes and SHA-256 (hex).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// A replica's configuration (its fields of spec §2.3, without ids, owner or dates).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaConfig {
    pub name: String,
    pub slug: String,
    pub short_description: String,
    pub greeting: String,
    pub purpose: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub private: bool,
    pub tags: Vec<String>,
    pub suggested_questions: Vec<String>,
    pub whitelist_emails: Vec<String>,
    pub profile_image: Option<String>,
    pub voice_preview_text: Option<String>,
    pub voice_enabled: bool,
    pub video_enabled: bool,
    pub is_every_conversation_accessible_by_support: bool,
    pub is_private_conversations_enabled: bool,
    pub voice_vendor_id: Option<String>,
    /// `llm.model`, `llm.memoryMode`, `llm.systemMessage`, `llm.embeddingModel`.
    pub llm: LlmConfig,
    /// The allowed origins of its embed widget (never its identity secret).
    pub embed_allowed_origins: Vec<String>,
}

/// A replica's `llm` object.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct LlmConfig {
    pub model: String,
    pub memory_mode: String,
    pub system_message: Option<String>,
    pub embedding_model: Option<String>,
}

impl ReplicaConfig {
    /// The configuration of `r` with its embed widget's `origins`.
    pub fn of(r: &Replica, origins: Vec<String>) -> ReplicaConfig {
        let llm = &r.llm;
        ReplicaConfig {
            name: r.name.clone(),
            slug: r.slug.clone(),
            short_description: r.short_description.clone(),
            greeting: r.greeting.clone(),
            purpose: r.purpose.clone(),
            kind: r.kind.clone(),
            private: r.private,
            tags: r.tags.clone(),
            suggested_questions: r.suggested_questions.clone(),
            whitelist_emails: r.whitelist_emails.clone(),
            profile_image: r.profile_image.clone(),
            voice_preview_text: r.voice_preview_text.clone(),
            voice_enabled: r.voice_enabled,
            video_enabled: r.video_enabled,
            is_every_conversation_accessible_by_support: r.every_conversation_accessible_by_support,
            is_private_conversations_enabled: r.private_conversations_enabled,
            voice_vendor_id: r.voice_vendor_id.clone(),
            llm: LlmConfig {
                model: llm.model.clone(),
                memory_mode: llm.memory_mode.clone(),
                system_message: llm.system_message.clone(),
                embedding_model: llm.embedding_model.clone(),
            },
            embed_allowed_origins: origins,
        }
    }

    /// A replica record of this configuration (ids, owner and dates left to the importer).
    pub fn to_record(&self) -> Replica {
        let llm = &self.llm;
        Replica {
            name: self.name.clone(),
            slug: self.slug.clone(),
            short_description: self.short_description.clone(),
            greeting: self.greeting.clone(),
            purpose: self.purpose.clone(),
            kind: self.kind.clone(),
            private: self.private,
            tags: self.tags.clone(),
            suggested_questions: self.suggested_questions.clone(),
            whitelist_emails: self.whitelist_emails.clone(),
            profile_image: self.profile_image.clone(),
            voice_preview_text: self.voice_preview_text.clone(),
            voice_enabled: self.voice_enabled,
            video_enabled: self.video_enabled,
            every_conversation_accessible_by_support: self.is_every_conversation_accessible_by_support,
            private_conversations_enabled: self.is_private_conversations_enabled,
            voice_vendor_id: self.voice_vendor_id.clone(),
            llm: Llm {
                model: llm.model.clone(),
                memory_mode: llm.memory_mode.clone(),
                system_message: llm.system_message.clone(),
                embedding_model: llm.embedding_model.clone(),
            },
            ..Replica::default()
        }
    }
}

/// `entries/NNNNN/entry.json`: a knowledge-base entry's fields and where it came from.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct EntryMeta {
    /// `text`, `file`, `website`, `youtube`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The status it had (`READY`, `UNPROCESSABLE`, …).
    pub status: String,
    pub title: Option<String>,
    pub generated_title: Option<String>,
    pub language: Option<String>,
    /// A website entry is fetched again periodically (its refresh setting).
    pub auto_refresh: bool,
    pub summary: String,
    pub error: Option<String>,
    pub url: Option<String>,
    pub file: Option<FileInfo>,
    pub website: Option<WebsiteInfo>,
    pub detected_language: Option<String>,
    /// The extraction format (`pdf`, `html`, …).
    pub format: Option<String>,
    /// Its chunks (`chunks.json`); 0 when it holds no text.
    pub chunks: u32,
    /// Whether `original` (the uploaded file's bytes) is in the bundle.
    pub original: bool,
    /// The entry's id where it was exported (what the history's sources name).
    #[serde(default)]
    pub source_id: u64,
    /// Creation and last change, ms since the Unix epoch.
    pub created_at: i64,
    pub updated_at: i64,
}

/// An uploaded file: name, bytes, media type.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    pub name: String,
    pub size: u64,
    pub mime_type: String,
}

/// What fetching a website entry found.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteInfo {
    pub final_url: String,
    pub status: u16,
    pub content_type: String,
    pub page_title: Option<String>,
    pub fetched_at: i64,
}

impl EntryMeta {
    /// The member of entry `e` with its source record; `original` when its file is carried.
    pub fn of(e: &KbEntry, s: &KbSource, original: bool) -> EntryMeta {
        EntryMeta {
            kind: e.kind.as_str().to_string(),
            status: e.status.as_str().to_string(),
            title: e.title.clone(),
            generated_title: e.generated_title.clone(),
            language: e.language.clone(),
            auto_refresh: e.auto_refresh,
            summary: e.summary.clone(),
            error: e.error.clone(),
            url: s.url.clone(),
            file: s.file.as_ref().map(|f| FileInfo {
                name: f.name.clone(),
                size: f.size,
                mime_type: f.mime_type.clone(),
            }),
            website: s.website.as_ref().map(|w| WebsiteInfo {
                final_url: w.final_url.clone(),
                status: w.status,
                content_type: w.content_type.clone(),
                page_title: w.page_title.clone(),
                fetched_at: w.fetched_at,
            }),
            detected_language: s.detected_language.clone(),
            format: s.format.clone(),
            chunks: e.chunk_count,
            original,
            source_id: e.id,
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }

    /// The source record it describes.
    pub fn source(&self) -> KbSource {
        KbSource {
            url: self.url.clone(),
            file: self.file.as_ref().map(|f| FileMeta {
                name: f.name.clone(),
                size: f.size,
                mime_type: f.mime_type.clone(),
            }),
            website: self.website.as_ref().map(|w| WebsiteMeta {
                final_url: w.final_url.clone(),
                status: w.status,
                content_type: w.content_type.clone(),
                page_title: w.page_title.clone(),
                fetched_at: w.fetched_at,
            }),
            detected_language: self.detected_language.clone(),
            format: self.format.clone(),
        }
    }
}

/// One user of `history/users.json`: a user of the history's organization.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct HistoryUser {
    /// The id the client chose for the user (`POST /v1/users` `id`), if any: the user of the
    /// same id in the target organization is this one.
    pub id: Option<String>,
    pub name: String,
    pub email: Option<String>,
    pub profile_image: Option<String>,
    /// `(type, account)` of its linked accounts (`messengerA`, `messengerB`, `embed`).
    pub linked_accounts: Vec<(String, String)>,
}

/// One item of `history/messages.json`, in the order they were written.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct HistoryMessage {
    /// Its user: an index into `history/users.json`.
    pub user: u32,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    /// The channel (`web`, `embed`, …).
    pub source: String,
    /// The passages an assistant item cited (their `entry`: an entry's `sourceId`).
    pub sources: Vec<HistorySource>,
    pub private: bool,
    pub channel_data: Option<String>,
    /// ms since the Unix epoch.
    pub created_at: i64,
    pub interrupted: bool,
}

/// A passage an assistant item cited.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct HistorySource {
    /// The entry's `sourceId`.
    pub entry: u64,
    pub score: f32,
    pub created_at: i64,
    pub name: String,
    pub content: String,
    pub url: Option<String>,
    pub page: Option<u32>,
}

/// `entries/NNNNN/text.json`: the extracted (`raw`) and cleaned (`processed`) text.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct TextMember {
    pub raw: String,
    pub processed: String,
}

/// One chunk of `entries/NNNNN/chunks.json`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ChunkMember {
    /// Document title + heading path.
    pub title: String,
    pub text: String,
    /// The 1-based page it begins on, for a document with pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

/// The vectors of one chunk: its index, its vector and its sentences' (each of the set's
/// dimension).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVectors {
    pub chunk: u32,
    pub vector: Vec<f32>,
    pub sentences: Vec<Vec<f32>>,
}

/// The first bytes of `vectors.bin`.
const VECTORS_MAGIC: &[u8; 4] = b"RPV1";

/// `entries/NNNNN/vectors.bin`: `RPV1`, the dimension (`u32`), the number of chunks (`u32`),
/// then per chunk its index and number of sentences (`u32` each) and `(1 + sentences) ×
/// dimension` `f32` (the chunk's vector, then its sentences'), all little-endian.
pub fn encode_vectors(dimension: u32, chunks: &[ChunkVectors]) -> Vec<u8> {
    let floats: usize = chunks.iter().map(|c| (1 + c.sentences.len()) * dimension as usize).sum();
    let mut out = Vec::with_capacity(12 + chunks.len() * 8 + floats * 4);
    out.extend_from_slice(VECTORS_MAGIC);
    out.extend_from_slice(&dimension.to_le_bytes());
    out.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    for c in chunks {
        out.extend_from_slice(&c.chunk.to_le_bytes());
        out.extend_from_slice(&(c.sentences.len() as u32).to_le_bytes());
        for v in std::iter::once(&c.vector).chain(&c.sentences) {
            v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
        }
    }
    out
}

/// Reads [`encode_vectors`]' layout at `path`, each vector of `dimension` values. Errors:
/// [`BundleError::Vectors`] when it is not that layout, and [`BundleError::Dimension`] when
/// its vectors are of another length.
pub fn decode_vectors(path: &str, bytes: &[u8], dimension: u32) -> Result<Vec<ChunkVectors>, BundleError> {
    let bad = |why: &str| BundleError::Vectors { path: path.to_string(), why: why.to_string() };
    let mut r = Reader { bytes, at: 0 };
    if r.take(4).ok_or_else(|| bad("too short"))? != VECTORS_MAGIC {
        return Err(bad("not a vectors member"));
    }
    let found = r.u32().ok_or_else(|| bad("too short"))?;
    if found != dimension {
        return Err(BundleError::Dimension { path: path.to_string(), found, expected: dimension });
    }
    let count = r.u32().ok_or_else(|| bad("too short"))?;
    let mut out = Vec::new();
    for _ in 0..count {
        let (chunk, sentences) = r.u32().zip(r.u32()).ok_or_else(|| bad("truncated"))?;
        let mut vectors = Vec::new();
        for _ in 0..=sentences {
            vectors.push(r.floats(dimension as usize).ok_or_else(|| bad("truncated"))?);
        }
        let vector = vectors.remove(0);
        out.push(ChunkVectors { chunk, vector, sentences: vectors });
    }
    if r.at != bytes.len() {
        return Err(bad("bytes after its last vector"));
    }
    Ok(out)
}

/// A cursor over little-endian values.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn floats(&mut self, n: usize) -> Option<Vec<f32>> {
        let b = self.take(n.checked_mul(4)?)?;
        Some(b.chunks_exact(4).map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]])).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_a_wrong_dimension_is_named() {
        let chunks = vec![
            ChunkVectors { chunk: 0, vector: vec![0.5, -0.5], sentences: vec![vec![1.0, 0.0], vec![0.0, 1.0]] },
            ChunkVectors { chunk: 3, vector: vec![0.25, 0.75], sentences: Vec::new() },
        ];
        let bytes = encode_vectors(2, &chunks);
        assert_eq!(decode_vectors("v", &bytes, 2).unwrap(), chunks);
        assert!(matches!(decode_vectors("v", &bytes, 3), Err(BundleError::Dimension { found: 2, expected: 3, .. })));
        assert!(matches!(decode_vectors("v", &bytes[..bytes.len() - 1], 2), Err(BundleError::Vectors { .. })));
    }
}
