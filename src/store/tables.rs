//! Every redb table of replicad, with its key layout. Names follow `key_value`.
//!
//! UUIDs are stored as big-endian `u128` so that ranges over a prefix are scans; values named
//! `&[u8]` are records encoded by [`super::codec`].

use redb::TableDefinition;

/// `name → bytes`: `schema_version` (u32 BE) and other store-wide facts.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `sequence name → last value issued` (`kb_entry`, `message`, `outbox`).
pub const SEQUENCES: TableDefinition<&str, u64> = TableDefinition::new("sequences");
/// `org id → Org`.
pub const ORGID_ORG: TableDefinition<u128, &[u8]> = TableDefinition::new("orgid_org");
/// `sha256(api key) → org id`.
pub const KEYHASH_ORG: TableDefinition<&[u8; 32], u128> = TableDefinition::new("keyhash_org");
/// `sha256(invitation code) → Invite`.
pub const CODEHASH_INVITE: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("codehash_invite");
/// `replica id → Replica`.
pub const REPLICAID_REPLICA: TableDefinition<u128, &[u8]> = TableDefinition::new("replicaid_replica");
/// `(org id, replica id) → ()`: the replicas of an organization, in creation order (UUID v7).
pub const ORG_REPLICA: TableDefinition<(u128, u128), ()> = TableDefinition::new("org_replica");
/// `(org id, slug) → replica id`: slugs are unique per organization.
pub const SLUG_REPLICA: TableDefinition<(u128, &str), u128> = TableDefinition::new("slug_replica");
/// `user id → User`.
pub const USERID_USER: TableDefinition<u128, &[u8]> = TableDefinition::new("userid_user");
/// `(org id, user id) → ()`: the users of an organization.
pub const ORG_USER: TableDefinition<(u128, u128), ()> = TableDefinition::new("org_user");
/// `(org id, lower-cased e-mail) → user id`.
pub const EMAIL_USER: TableDefinition<(u128, &str), u128> = TableDefinition::new("email_user");
/// `(org id, account type, account id) → user id` for linked accounts (`messengerA`, `embed`, …).
pub const LINKEDACCOUNT_USER: TableDefinition<(u128, &str, &str), u128> = TableDefinition::new("linkedaccount_user");
/// `entry id → KbEntry`.
pub const KBID_ENTRY: TableDefinition<u64, &[u8]> = TableDefinition::new("kbid_entry");
/// `entry id → KbText` (raw and processed text of the entry).
pub const KBID_TEXT: TableDefinition<u64, &[u8]> = TableDefinition::new("kbid_text");
/// `(replica id, entry id) → ()`: the knowledge base of a replica.
pub const REPLICA_KB: TableDefinition<(u128, u64), ()> = TableDefinition::new("replica_kb");
/// `(entry id, chunk index) → Chunk`.
pub const KBCHUNK_CHUNK: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("kbchunk_chunk");
/// `(entry id, chunk index) → ChunkVector`: the chunk's embedding (the search index's vectors
/// are loaded from here by `search::indexer`; written by the embedding queue,
/// `search::embedding`, and deleted with the entry's chunks by `service::knowledge`).
pub const KBCHUNK_VECTOR: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("kbchunk_vector");
/// `outbox seq → (entry id, entry revision)`: index work not yet committed to tantivy.
pub const SEQ_KBOUTBOX: TableDefinition<u64, (u64, u64)> = TableDefinition::new("seq_kboutbox");
/// `(replica id, user id, message id) → Message`: chat history, oldest first.
pub const REPLICAUSERMSG_MESSAGE: TableDefinition<(u128, u128, u64), &[u8]> =
    TableDefinition::new("replicausermsg_message");
/// `(replica id, passage key) → text` of a source cited by the replica's history replies, kept
/// once however often it is cited (`service::passages`): the key is the text's XXH3-64.
pub const REPLICAPASSAGE_TEXT: TableDefinition<(u128, u64), &str> = TableDefinition::new("replicapassage_text");
/// `replica id → number of chat history items` (the `popularity` sort of replica lists).
pub const REPLICA_MESSAGECOUNT: TableDefinition<u128, u64> = TableDefinition::new("replica_messagecount");
/// `"demo" → org id` and other one-time facts of the server's life.
pub const ONCE: TableDefinition<&str, u128> = TableDefinition::new("once");
/// `(replica id, channel, chat or channel id, message id, is the reply) → history item id`:
/// channel messages already saved, and the replies stored for them (a retried POST or a
/// replayed update with the same channel message stores nothing new). See
/// `service::channel_data::ChannelKey`.
pub const REPLICACHANNELMSG_MESSAGE: TableDefinition<(u128, &str, &str, &str, bool), u64> =
    TableDefinition::new("replicachannelmsg_message");
/// `entry id → KbSource`: url / file / website facts and the detected language of an entry.
pub const KBID_SOURCE: TableDefinition<u64, &[u8]> = TableDefinition::new("kbid_source");
/// `entry id → StoredFile`: the uploaded file of a `file` entry, kept in `DATA_DIR/files/`
/// (`store::files`; schema 6 kept the bytes themselves in `kbid_file`).
pub const KBID_STOREDFILE: TableDefinition<u64, &[u8]> = TableDefinition::new("kbid_storedfile");
/// `entry id → (attempts so far, not before: ms since the epoch)`: ingestion jobs not finished
/// (see `ingest::pipeline`).
pub const KBID_JOB: TableDefinition<u64, (u32, i64)> = TableDefinition::new("kbid_job");
/// `sha256(upload token) → Upload`: signed upload URLs of `file` entries.
pub const TOKENHASH_UPLOAD: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("tokenhash_upload");
/// `(replica id, normalized url) → entry id`: a URL is in a replica's knowledge base once.
pub const REPLICA_URL: TableDefinition<(u128, &str), u64> = TableDefinition::new("replica_url");
/// `replica id → KbSummary`: the entry count and first titles of a replica's knowledge base,
/// kept at write time (`store::kb::summary`).
pub const REPLICA_KBSUMMARY: TableDefinition<u128, &[u8]> = TableDefinition::new("replica_kbsummary");
/// `org id → number of knowledge-base entries` (the per-organization quota).
pub const ORG_KBCOUNT: TableDefinition<u128, u64> = TableDefinition::new("org_kbcount");
/// `(replica id, user id, month as YYYYMM in UTC) → (prompt tokens, completion tokens)`: token
/// usage of chat completions, written with the messages of each completion.
pub const REPLICAUSERMONTH_USAGE: TableDefinition<(u128, u128, u32), (u64, u64)> =
    TableDefinition::new("replicausermonth_usage");
/// `(replica id, source, group place, user id) → chat id`: the chat of one user on one source
/// (`(r, source, "", user)`) or of a group on a channel (`(r, "messengerA", chat id, 0)`,
/// `(r, "messengerB", channel id, 0)`); see `service::chats::ChatIdentity`.
pub const REPLICACHATKEY_CHAT: TableDefinition<(u128, &str, &str, u128), u128> =
    TableDefinition::new("replicachatkey_chat");
/// `(replica id, chat id) → Chat`: the chats of a replica, counts kept at write time.
pub const CHATS: TableDefinition<(u128, u128), &[u8]> = TableDefinition::new("replicachat_chat");
/// `(replica id, chat id, conversation id) → Conversation`, oldest conversation first (UUID v7).
pub const CONVERSATIONS: TableDefinition<(u128, u128, u128), &[u8]> =
    TableDefinition::new("replicachatconv_conversation");
/// `(replica id, conversation id) → chat id`: a conversation by its id alone.
pub const REPLICACONV_CHAT: TableDefinition<(u128, u128), u128> = TableDefinition::new("replicaconv_chat");
/// `(replica id, chat id, message id) → (user id, conversation id)`: the messages of a chat.
pub const CHATMSG_USERCONV: TableDefinition<(u128, u128, u64), (u128, u128)> = TableDefinition::new("chatmsg_userconv");
/// `(replica id, conversation id, message id) → user id`: the messages of a conversation.
pub const CONVMSG_USER: TableDefinition<(u128, u128, u64), u128> = TableDefinition::new("convmsg_user");
/// `(replica id, user id, chat id) → ()`: the chats a user wrote in.
pub const USER_CHAT: TableDefinition<(u128, u128, u128), ()> = TableDefinition::new("user_chat");
/// `(replica id, user id, source) → chat id`: the chat of the user's latest item on a source
/// (an assistant reply goes to the chat of the question it answers).
pub const USERSOURCE_CHAT: TableDefinition<(u128, u128, &str), u128> = TableDefinition::new("usersource_chat");
/// `(replica id, month as YYYYMM in UTC) → conversations started` (usage, quotas).
pub const REPLICAMONTH_CONVERSATIONS: TableDefinition<(u128, u32), u64> =
    TableDefinition::new("replicamonth_conversations");
/// `(replica id, day: days since the Unix epoch in UTC) → conversations started` (analytics).
pub const REPLICADAY_CONVERSATIONS: TableDefinition<(u128, u32), u64> =
    TableDefinition::new("replicaday_conversations");
/// `(replica id, source) → conversations started` (analytics by source).
pub const REPLICASOURCE_CONVERSATIONS: TableDefinition<(u128, &str), u64> =
    TableDefinition::new("replicasource_conversations");
/// `(org id, month as YYYYMM in UTC) → conversations started` (the monthly conversation quota);
/// with bit 31 of the month set, those started by the anonymous visitors of the organization's
/// public chats, counted apart (`service::quotas::Pool`).
pub const ORGMONTH_CONVERSATIONS: TableDefinition<(u128, u32), u64> = TableDefinition::new("orgmonth_conversations");
/// `org id → Quota`: the operator's quotas of an organization.
pub const ORG_QUOTA: TableDefinition<u128, &[u8]> = TableDefinition::new("org_quota");
/// `(replica id, chat id, conversation id) → last message time (ms)`: conversations whose
/// `summary`, `commonQuestions` and `commonTopics` are not computed yet (the insights job's
/// durable queue; see `service::chats::insights`).
pub const OPEN_CONVERSATION: TableDefinition<(u128, u128, u128), i64> = TableDefinition::new("open_conversation");
/// `(replica id, term) → conversations of the replica holding the term` (document frequencies
/// of the topics' TF-IDF), and `(replica id, "") → conversations analyzed`.
pub const REPLICATERM_CONVERSATIONS: TableDefinition<(u128, &str), u64> =
    TableDefinition::new("replicaterm_conversations");
/// `(channel name, replica id) → Integration`: the replica's bot on each bot channel (sealed
/// token, state, update cursor), a channel's bots together. See `service::integrations`.
pub const CHANNELREPLICA_INTEGRATION: TableDefinition<(&str, u128), &[u8]> =
    TableDefinition::new("channelreplica_integration");
/// `sha256(embed key) → replica id`: public keys of the embeddable widget (`service::embed`).
pub const KEYHASH_EMBED: TableDefinition<&[u8; 32], u128> = TableDefinition::new("keyhash_embed");
/// `replica id → EmbedSettings`: the origins allowed to use the replica's widget and its
/// identity secret.
pub const REPLICA_EMBED: TableDefinition<u128, &[u8]> = TableDefinition::new("replica_embedsettings");
/// `(org id, sort, sort key, replica id) → ()`: the replicas of an organization in the orders
/// `GET /v1/replicas` offers besides creation order (sort [`REPLICA_SORT_NAME`]: lower-cased name
/// bytes; [`REPLICA_SORT_POPULARITY`]: `u64::MAX - chat history items`, big-endian), kept at
/// write time by `store::replica_index`.
pub const ORG_REPLICAORDER: TableDefinition<(u128, u8, &[u8], u128), ()> = TableDefinition::new("org_replicaorder");
/// Sort number of the name order in [`ORG_REPLICAORDER`].
pub const REPLICA_SORT_NAME: u8 = 1;
/// Sort number of the popularity order in [`ORG_REPLICAORDER`].
pub const REPLICA_SORT_POPULARITY: u8 = 2;
/// `(org id, replica id) → ()`: the private replicas of an organization (`store::replica_index`).
pub const ORG_PRIVATEREPLICA: TableDefinition<(u128, u128), ()> = TableDefinition::new("org_privatereplica");
/// `(replica or org id, sort, sort key, entry id) → replica id`: the entries of a replica and of
/// an organization in each order the entry lists offer (`store::kb::order`: sort numbers and key
/// bytes), kept at write time.
pub const SCOPE_KBORDER: TableDefinition<(u128, u8, &[u8], u64), u128> = TableDefinition::new("scope_kborder");
/// `org id → (replicas, private replicas)`, kept at write time (`store::replica_index`).
pub const ORG_REPLICACOUNT: TableDefinition<u128, (u64, u64)> = TableDefinition::new("org_replicacount");
