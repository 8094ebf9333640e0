//! On-disk records (bincode, versioned by [`Record::VERSION`]). Wire DTOs live in `api`;
//! services convert between the two. Times are milliseconds since the Unix epoch (UTC).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::codec::{self, Record};
pub use super::states::{KbKind, KbStatus};

/// A [`Record`] at layout version 1 (no older layout to read): `version_1!(Org);` after the
/// struct.
macro_rules! version_1 {
    ($record:ty) => {
        impl Record for $record {
            const VERSION: u8 = 1;
        }
    };
}

/// An organization: made by redeeming an invitation (spec §4.1 redeem).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Org {
    pub id: Uuid,
    pub name: String,
    /// The user made for the contact given at redemption; org-key callers act as this user.
    pub owner_user: Uuid,
    pub created_at: i64,
    pub valid_until: Option<i64>,
}
version_1!(Org);

/// An invitation code (stored under the hash of the code).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Invite {
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub redeemed_by: Option<Uuid>,
}
version_1!(Invite);

/// A user of an organization (spec §4.2 `/v1/users*`, docs/decisions.md "Users").
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct User {
    /// The store key: the client's id when it is a UUID, else a UUID v5 of it (see
    /// `service::users::key_of`), else a fresh UUID v7.
    pub id: Uuid,
    /// The id the client chose at creation (1–100 visible characters, unique in the
    /// organization); shown as the user's `id`. `None`: [`User::id`] is shown.
    pub client_id: Option<String>,
    pub org: Uuid,
    pub name: String,
    pub email: Option<String>,
    pub profile_image: Option<String>,
    /// Linked accounts `(accountType, accountID)`, `accountType` one of `messengerA`,
    /// `messengerB`, `embed`; a channel's user has the one it was made for.
    pub linked: Vec<(String, String)>,
    pub created_at: i64,
    pub updated_at: i64,
}
impl Record for User {
    const VERSION: u8 = 2;

    fn upgrade(version: u8, body: &[u8]) -> crate::error::Result<Self> {
        match version {
            1 => Ok(codec::decode_body::<UserV1>(body)?.into()),
            v => Err(crate::error::Error::internal(format!("unknown User record version {v}"))),
        }
    }
}

impl User {
    /// The id shown on the wire and named by `X-USER-ID`: the client's id, else the UUID.
    pub fn public_id(&self) -> String {
        self.client_id.clone().unwrap_or_else(|| self.id.to_string())
    }
}

/// [`User`] as version 1 wrote it (no client id, at most one linked account).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct UserV1 {
    pub id: Uuid,
    pub org: Uuid,
    pub name: String,
    pub email: Option<String>,
    pub profile_image: Option<String>,
    pub linked: Option<(String, String)>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<UserV1> for User {
    fn from(u: UserV1) -> User {
        User {
            id: u.id,
            client_id: None,
            org: u.org,
            name: u.name,
            email: u.email,
            profile_image: u.profile_image,
            linked: u.linked.into_iter().collect(),
            created_at: u.created_at,
            updated_at: u.updated_at,
        }
    }
}

/// The `llm` object of a replica.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Llm {
    pub model: String,
    pub memory_mode: String,
    pub system_message: Option<String>,
    pub embedding_model: Option<String>,
}

/// A replica (spec §2.3) with the decisions of docs/decisions.md "Replicas".
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Replica {
    pub id: Uuid,
    pub org: Uuid,
    pub name: String,
    pub slug: String,
    pub short_description: String,
    pub greeting: String,
    pub owner: Uuid,
    pub purpose: Option<String>,
    pub kind: String,
    pub private: bool,
    pub tags: Vec<String>,
    pub suggested_questions: Vec<String>,
    pub whitelist_emails: Vec<String>,
    pub profile_image: Option<String>,
    pub voice_preview_text: Option<String>,
    pub voice_enabled: bool,
    pub video_enabled: bool,
    pub every_conversation_accessible_by_support: bool,
    pub private_conversations_enabled: bool,
    pub voice_vendor_id: Option<String>,
    pub llm: Llm,
    pub created_at: i64,
    pub updated_at: i64,
}
version_1!(Replica);

/// A knowledge-base entry. `revision` grows with every content change; the indexer marks the
/// entry `READY` only for the revision it indexed. Version 2 made `kind` and `status` enums;
/// `status` changes only through [`KbEntry::move_to`].
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct KbEntry {
    pub id: u64,
    pub replica: Uuid,
    pub org: Uuid,
    pub kind: KbKind,
    pub status: KbStatus,
    pub title: Option<String>,
    pub generated_title: Option<String>,
    pub language: Option<String>,
    pub auto_refresh: bool,
    /// The first characters of the processed text (the text itself is a [`KbText`]).
    pub summary: String,
    pub chunk_count: u32,
    pub revision: u64,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}
impl Record for KbEntry {
    const VERSION: u8 = 2;

    fn upgrade(version: u8, body: &[u8]) -> crate::error::Result<Self> {
        match version {
            1 => KbEntry::upgrade_v1(body),
            v => Err(crate::error::Error::internal(format!("unknown KbEntry record version {v}"))),
        }
    }
}

impl KbEntry {
    /// Reads the body of a version 1 entry. Version 1 wrote `kind` and `status` (the 4th and 5th
    /// fields) as their wire names and every other field as version 2 does (bincode lays a struct
    /// out as its fields in order, nothing between them): the first five fields are read, written
    /// again with the typed `kind` and `status`, and the rest of the bytes follow as they are.
    /// Errors (internal) on a `kind` or `status` name no version wrote.
    fn upgrade_v1(body: &[u8]) -> crate::error::Result<KbEntry> {
        let ((id, replica, org, kind, status), rest) = codec::decode_prefix::<(u64, Uuid, Uuid, String, String)>(body)?;
        let unknown = |what: &str, v: &str| crate::error::Error::internal(format!("KbEntry v1: unknown {what} {v:?}"));
        let kind = KbKind::parse(&kind).ok_or_else(|| unknown("kind", &kind))?;
        let status = KbStatus::parse(&status).ok_or_else(|| unknown("status", &status))?;
        let mut v2 = codec::encode_body(&(id, replica, org, kind, status))?;
        v2.extend_from_slice(rest);
        codec::decode_body(&v2)
    }

    /// Moves the entry to `next` when [`KbStatus::may_become`] allows it; `false` (and no
    /// change) otherwise.
    pub fn move_to(&mut self, next: KbStatus) -> bool {
        let allowed = self.status.may_become(next);
        if allowed {
            self.status = next;
        }
        allowed
    }
}

/// The texts of an entry, kept apart so that listing entries does not read them.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct KbText {
    pub raw: String,
    pub processed: String,
}
version_1!(KbText);

/// Where an entry's content comes from and what was learned while processing it; kept apart
/// from [`KbEntry`] (one record per entry in `kbid_source`).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct KbSource {
    /// The `url` of a `website` or `youtube` entry, as given.
    pub url: Option<String>,
    /// The uploaded file of a `file` entry.
    pub file: Option<FileMeta>,
    /// What fetching a `website` entry found.
    pub website: Option<WebsiteMeta>,
    /// ISO 639-1 code detected from the text when the entry has no `language`.
    pub detected_language: Option<String>,
    /// The extraction format (`pdf`, `docx`, `html`, …; see `ingest::formats`).
    pub format: Option<String>,
}
version_1!(KbSource);

/// An uploaded file: name as given at create, size in bytes, media type.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct FileMeta {
    pub name: String,
    pub size: u64,
    pub mime_type: String,
}

/// The fetch of a `website` entry: final URL after redirects, HTTP status, media type, page
/// title, time (ms).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct WebsiteMeta {
    pub final_url: String,
    pub status: u16,
    pub content_type: String,
    pub page_title: Option<String>,
    pub fetched_at: i64,
}

/// A pending upload: the signed URL's token (stored hashed) names the entry it fills.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Upload {
    pub entry: u64,
    pub expires_at: i64,
    /// Largest accepted body, in bytes.
    pub max_bytes: u64,
    pub used: bool,
}
version_1!(Upload);

/// An uploaded file, kept outside the store's file (`store::files`): its name in
/// `DATA_DIR/files/`, its size in bytes and its SHA-256.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    pub name: String,
    pub size: u64,
    pub sha256: [u8; 32],
}
version_1!(StoredFile);

/// A chunk of an entry's processed text: what the index holds and sources quote. Version 2
/// added `page`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Chunk {
    /// Document title + heading path, e.g. "More Control Flow Tools › for Statements".
    pub title: String,
    pub text: String,
    /// The 1-based page of the document on which the chunk begins, for a text with pages (a
    /// PDF; `text::pages`); `None` otherwise and in version 1 records.
    pub page: Option<u32>,
}
impl Record for Chunk {
    const VERSION: u8 = 2;

    fn upgrade(version: u8, body: &[u8]) -> crate::error::Result<Self> {
        match version {
            1 => {
                let (title, text) = codec::decode_body::<(String, String)>(body)?;
                Ok(Chunk { title, text, page: None })
            }
            v => Err(crate::error::Error::internal(format!("unknown Chunk record version {v}"))),
        }
    }
}

/// A retrieval source kept with an assistant message (spec §2.2), with where it is in its
/// document (Message version 4 on).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct SourceRef {
    pub id: u64,
    pub score: f32,
    pub created_at: i64,
    pub name: String,
    pub content: String,
    /// The web page of a `website` entry, with a text fragment (`#:~:text=…`) that opens it
    /// scrolled to the quoted words; `None` for other entries.
    pub url: Option<String>,
    /// The 1-based page on which the chunk begins, for a document with pages ([`Chunk::page`]).
    pub page: Option<u32>,
}

#[cfg(test)]
impl SourceRef {
    /// A source of section `name` quoting `content` (entry 1, score 1, no url or page), for the
    /// unit tests of the modules that read sources.
    pub fn sample(name: &str, content: &str) -> SourceRef {
        SourceRef {
            id: 1,
            score: 1.0,
            created_at: 0,
            name: name.into(),
            content: content.into(),
            url: None,
            page: None,
        }
    }
}

/// [`SourceRef`] as Message versions 1 to 3 wrote it (before `url` and `page`).
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct SourceRefV1 {
    pub id: u64,
    pub score: f32,
    pub created_at: i64,
    pub name: String,
    pub content: String,
}

impl From<SourceRefV1> for SourceRef {
    fn from(s: SourceRefV1) -> SourceRef {
        SourceRef {
            id: s.id,
            score: s.score,
            created_at: s.created_at,
            name: s.name,
            content: s.content,
            url: None,
            page: None,
        }
    }
}

/// The embeddings of a chunk (`kbchunk_vector`): the chunk's and its prose sentences', with
/// what they were computed from, so that they are reused only for the same text under the
/// same model. Version 2 added `sentences`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ChunkVector {
    /// Embedding-model catalog id (`llm.embeddingModel`).
    pub model: String,
    /// XXH3-64 of the text embedded (the chunk's title, a newline, its text), seeded with the
    /// segmentation version (`search::vectors::text_key`).
    pub text_key: u64,
    /// L2-normalised, of the model's dimension.
    pub vector: Vec<f32>,
    /// One vector per prose sentence of the chunk, in order (`search::vectors::sentence_texts`),
    /// for the embedded reader; `None` in a version 1 record (to be computed).
    pub sentences: Option<Vec<Vec<f32>>>,
}
impl Record for ChunkVector {
    const VERSION: u8 = 2;

    fn upgrade(version: u8, body: &[u8]) -> crate::error::Result<Self> {
        match version {
            1 => {
                let (model, text_key, vector) = codec::decode_body::<(String, u64, Vec<f32>)>(body)?;
                Ok(ChunkVector { model, text_key, vector, sentences: None })
            }
            v => Err(crate::error::Error::internal(format!("unknown ChunkVector record version {v}"))),
        }
    }
}

/// A chat history item (spec §2.1). Version 2 added `interrupted`; version 3 `passages`;
/// version 4 the sources' `url` and `page`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Message {
    pub id: u64,
    pub replica: Uuid,
    pub user: Uuid,
    pub role: String,
    pub content: String,
    pub source: String,
    pub sources: Vec<SourceRef>,
    pub is_private: bool,
    /// `messengerA_data` / `messengerB_data` as JSON text, kept as received.
    pub channel_data: Option<String>,
    pub created_at: i64,
    /// An assistant reply cut short (the client went away mid-stream or the upstream failed
    /// after it began): `content` is what was said until then.
    pub interrupted: bool,
    /// Where the `content` of each of `sources` is kept, when not in the item itself: the keys
    /// of `service::passages` (one per source, `0` for a content kept inline), or empty when
    /// every content is inline (items written before version 3, and user items).
    pub passages: Vec<u64>,
}
impl Record for Message {
    const VERSION: u8 = 4;

    /// Versions 1 to 3 wrote the sources as [`SourceRefV1`]s and every other field as version 4
    /// does; version 1 stopped after `created_at`, version 2 after `interrupted`. bincode lays a
    /// struct out as its fields in order with nothing between them, so the fields before the
    /// sources are read, the sources read and written again as version 4 writes them, the bytes
    /// after them kept, and the fields a version did not write appended (not interrupted, no
    /// passages: its sources keep their texts inline).
    fn upgrade(version: u8, body: &[u8]) -> crate::error::Result<Self> {
        let missing = match version {
            1 => codec::encode_body(&(false, Vec::<u64>::new()))?,
            2 => codec::encode_body(&Vec::<u64>::new())?,
            3 => Vec::new(),
            v => return Err(crate::error::Error::internal(format!("unknown Message record version {v}"))),
        };
        let (head, rest) = codec::decode_prefix::<(u64, Uuid, Uuid, String, String, String)>(body)?;
        let (sources, rest) = codec::decode_prefix::<Vec<SourceRefV1>>(rest)?;
        let sources: Vec<SourceRef> = sources.into_iter().map(SourceRef::from).collect();
        let mut v4 = codec::encode_body(&(head, sources))?;
        v4.extend_from_slice(rest);
        v4.extend(missing);
        codec::decode_body(&v4)
    }
}

/// What a chat and a conversation both count, kept at write time with every history item.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Counts {
    pub message_count: u64,
    /// Assistant items.
    pub replica_reply_count: u64,
    pub first_message_at: i64,
    pub last_message_at: i64,
    pub last_replica_reply_at: Option<i64>,
}

/// A chat (docs/decisions.md "Chat"): one (replica, user, source) thread, or one messengerA /
/// messengerB group chat.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Chat {
    pub id: Uuid,
    pub replica: Uuid,
    pub source: String,
    /// A group chat (`chatType: group`); else individual.
    pub group: bool,
    /// The user of an individual chat.
    pub user: Option<Uuid>,
    /// The group's name as the channel last reported it.
    pub name: Option<String>,
    pub counts: Counts,
    /// The latest conversation.
    pub conversation: Uuid,
}
version_1!(Chat);

/// A conversation: the items of a chat with no silence longer than 30 minutes between them.
/// `summary`, `common_questions` and `common_topics` are computed when it closes or set by an
/// owner's `PATCH`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Conversation {
    pub id: Uuid,
    pub chat: Uuid,
    pub replica: Uuid,
    pub source: String,
    pub group: bool,
    pub counts: Counts,
    pub summary: Option<String>,
    pub common_questions: Vec<String>,
    pub common_topics: Vec<String>,
}
version_1!(Conversation);

/// The operator's quotas of an organization (`replicad orgs set-quota`); `None` falls back to
/// the server's defaults (`--max-replicas-per-org`, `--max-kb-entries-per-org`,
/// `--embed-conversations-per-month`; no monthly conversation limit).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct Quota {
    pub conversations_per_month: Option<u64>,
    pub replicas: Option<u64>,
    pub knowledge_base_entries: Option<u64>,
    /// Conversations the anonymous visitors of the organization's public chats (embed widget,
    /// web page) may start per UTC month, apart from `conversations_per_month` (version 2).
    pub embed_conversations_per_month: Option<u64>,
}
impl Record for Quota {
    const VERSION: u8 = 2;

    fn upgrade(version: u8, body: &[u8]) -> crate::error::Result<Self> {
        match version {
            1 => Ok(codec::decode_body::<QuotaV1>(body)?.into()),
            v => Err(crate::error::Error::internal(format!("unknown Quota record version {v}"))),
        }
    }
}

/// [`Quota`] as version 1 stored it (without the visitors' quota).
#[derive(Deserialize)]
struct QuotaV1 {
    conversations_per_month: Option<u64>,
    replicas: Option<u64>,
    knowledge_base_entries: Option<u64>,
}

impl From<QuotaV1> for Quota {
    fn from(q: QuotaV1) -> Quota {
        Quota {
            conversations_per_month: q.conversations_per_month,
            replicas: q.replicas,
            knowledge_base_entries: q.knowledge_base_entries,
            embed_conversations_per_month: None,
        }
    }
}

/// A replica's bot on one channel (`service::integrations`, keyed by channel and replica): the token sealed by `secrets::Secrets`, who the platform said
/// the bot is, the connection state its runner reports and the platform's update cursor. One
/// record for every bot channel: what differs between the platforms lives in the runners.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Integration {
    pub replica: Uuid,
    /// The replica's organization (its users are the linked-account senders).
    pub org: Uuid,
    pub sealed_token: Vec<u8>,
    /// The bot's user id on the platform, as the platform writes it (messengerA: a number,
    /// messengerB: a snowflake); the `id` of the connect answer.
    pub platform_id: String,
    /// The bot's username on the platform: the `service_name` of the integration object.
    pub username: String,
    /// The handle the bot answers to in groups, with its `@`, on a platform whose mentions are
    /// by handle (messengerA); `None` where they are by id (messengerB).
    pub mention: Option<String>,
    /// The runner's connection works (messengerA: its last poll succeeded; messengerB: its
    /// gateway session is ready).
    pub is_active: bool,
    /// What went wrong last (cleared when the connection works again).
    pub last_error: Option<String>,
    /// When `last_error` happened (ms since the epoch).
    pub last_error_at: Option<i64>,
    /// The platform's update cursor: the next update to fetch, updates below it were handled
    /// (messengerA's `getUpdates` offset); 0 on a platform without one (messengerB's gateway
    /// resumes its own session, and messages are de-duplicated by their channel key).
    pub cursor: i64,
    /// When this connection was made (ms since the epoch): a runner's writes apply only to the
    /// connection it was started for.
    pub connected_at: i64,
    pub updated_at: i64,
}
version_1!(Integration);

/// The embeddable widget of a replica (`service::embed`): the origins whose pages may use it
/// and the secret its site signs visitor identities with. Version 2 added `identity_secret`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct EmbedSettings {
    pub replica: Uuid,
    pub org: Uuid,
    /// Serialized origins (`scheme://host[:port]`).
    pub allowed_origins: Vec<String>,
    pub updated_at: i64,
    /// The identity secret (`rpl_idsec_…`) sealed with the secrets key, as the bots' tokens are
    /// (`service::embed::create_identity_secret`); `None` when signed identities are off.
    pub identity_secret: Option<Vec<u8>>,
}
impl Record for EmbedSettings {
    const VERSION: u8 = 2;

    fn upgrade(version: u8, body: &[u8]) -> crate::error::Result<Self> {
        match version {
            1 => {
                let (replica, org, allowed_origins, updated_at) =
                    codec::decode_body::<(Uuid, Uuid, Vec<String>, i64)>(body)?;
                Ok(EmbedSettings { replica, org, allowed_origins, updated_at, identity_secret: None })
            }
            v => Err(crate::error::Error::internal(format!("unknown EmbedSettings record version {v}"))),
        }
    }
}

/// What a replica's knowledge base holds, kept in step by every write that adds or removes an
/// entry or changes its title (`store::kb::summary`): the number of entries, and the `(entry id,
/// title)` of the first [`crate::store::kb::summary::MAX_TITLES`] entries that have a title
/// (given, else generated), in entry-id order.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct KbSummary {
    pub entries: u64,
    pub titles: Vec<(u64, String)>,
}

version_1!(KbSummary);
