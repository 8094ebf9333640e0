//! Schema version of the store: stamp a fresh store, refuse one newer than this binary,
//! migrate an older one (one transaction per step, which also writes the new version).

use redb::{Database, TableDefinition};

use std::sync::Arc;

use super::files::{Files, Written};
use super::tables;
use crate::error::{Error, Result};
use crate::store::kv::{ReadableTable, WriteTransaction};
use crate::store::records::Integration;

/// The store layout this binary writes.
pub const SCHEMA_VERSION: u32 = 10;

const KEY: &str = "schema_version";

/// `meta` key present while the history stored before schema 3 still has to be filed under its
/// chats (see `service::chats::derive_pending_in`).
pub const DERIVE_CHATS: &str = "derive_chats";

/// Brings the store at `db` to [`SCHEMA_VERSION`], creating every table; `files` is where the
/// step to schema 7 moves the uploaded files.
pub fn run(db: &Database, files: &Arc<Files>) -> Result<()> {
    let found = read_version(db)?;
    match found {
        None => fresh(db),
        Some(v) if v > SCHEMA_VERSION => Err(Error::internal(format!(
            "the store has schema version {v}, newer than this binary ({SCHEMA_VERSION}); \
             upgrade replicad"
        ))),
        Some(v) => (v..SCHEMA_VERSION).try_for_each(|from| migrate_from(db, from, files).map_err(|e| explain(e, from))),
    }
}

/// A step that met a full disk leaves the store as it was (its transaction is not committed,
/// the files it wrote are removed): the server cannot start until there is room, and says so.
fn explain(e: Error, from: u32) -> Error {
    if e.code != crate::error::Code::InsufficientStorage {
        return e;
    }
    let cause = e.cause_text().unwrap_or(e.message);
    Error::internal(format!(
        "migrating the store from schema {from} to {} needs disk space: {cause}; the store is unchanged, \
         free space on the data directory's filesystem (or lower --min-free-space) and start again",
        from + 1
    ))
}

fn read_version(db: &Database) -> Result<Option<u32>> {
    let txn = super::kv::begin_write(db)?;
    let v = {
        let meta = txn.open_table(tables::META)?;
        let v = meta.get(KEY)?.map(|b| b.value().to_vec());
        v
    };
    txn.abort()?;
    decode_version(v)
}

fn decode_version(v: Option<Vec<u8>>) -> Result<Option<u32>> {
    match v {
        None => Ok(None),
        Some(b) => {
            let arr: [u8; 4] = b.try_into().map_err(|_| Error::internal("bad schema_version"))?;
            Ok(Some(u32::from_be_bytes(arr)))
        }
    }
}

/// The schema version of the redb store as `txn` sees it (0 when none is written: an empty
/// store).
pub fn stored_version(txn: &redb::ReadTransaction) -> Result<u32> {
    let v = match txn.open_table(tables::META) {
        Ok(meta) => meta.get(KEY)?.map(|b| b.value().to_vec()),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(decode_version(v)?.unwrap_or(0))
}

fn fresh(db: &Database) -> Result<()> {
    let txn = super::kv::begin_write(db)?;
    create_tables(&txn)?;
    write_version(&txn, SCHEMA_VERSION)?;
    txn.commit()?;
    Ok(())
}

/// One step from `from` to `from + 1`, in its own transaction that also writes the version.
fn migrate_from(db: &Database, from: u32, files: &Arc<Files>) -> Result<()> {
    let txn = super::kv::begin_write(db)?;
    let mut moved = Vec::new();
    match from {
        // 1 → 2: knowledge-base sources, files, jobs, uploads, URLs and per-org entry counts.
        1 => {
            create_tables(&txn)?;
            backfill_org_kb_counts(&txn)?;
        }
        // 2 → 3: channel bots (messengerA), the widget's keys and origins; chats, conversations and
        // their counters (usage, analytics), which `service::chats::derive_pending_in` derives from the
        // stored history when the server starts (the store layer does not know the chat rules).
        2 => {
            create_tables(&txn)?;
            txn.open_table(tables::META)?.insert(DERIVE_CHATS, [1u8].as_slice())?;
        }
        // 3 → 4: messengerB bots.
        3 => create_tables(&txn)?,
        // 4 → 5: composite keys as tuples instead of formatted strings; the knowledge-base
        // summaries kept at write time.
        4 => {
            create_tables(&txn)?;
            split_linked_account_keys(&txn)?;
            split_channel_message_keys(&txn)?;
            split_chat_identity_keys(&txn)?;
            super::kb::summary::rebuild_all_in(&txn)?;
        }
        // 5 → 6: the list indexes and counts kept at write time (replicas: `store::replica_index`;
        // knowledge-base entries: `store::kb::order`).
        5 => {
            create_tables(&txn)?;
            super::replica_index::rebuild_all_in(&txn)?;
            super::kb::order::rebuild_all_in(&txn)?;
        }
        // 6 → 7: uploaded files out of the store's file, into `DATA_DIR/files/` (`store::files`).
        6 => {
            create_tables(&txn)?;
            moved = move_files_out(&txn, files)?;
        }
        // 7 → 8: the texts of the sources cited by history replies, kept once per replica
        // (`service::passages`); items stored before keep their sources' texts inline.
        7 => create_tables(&txn)?,
        // 8 → 9: the chunks' embeddings; the indexer computes those of entries stored before
        // when it starts (`search::indexer::load_vectors` queues the entries lacking them).
        8 => create_tables(&txn)?,
        // 9 → 10: every channel's bots in one table, one record for all of them.
        9 => {
            create_tables(&txn)?;
            integrations_in_one_table(&txn)?;
        }
        _ => return Err(Error::internal(format!("no migration from schema version {from}"))),
    }
    write_version(&txn, from + 1)?;
    txn.commit()?;
    moved.into_iter().for_each(Written::keep);
    tracing::info!(from, to = from + 1, "store migrated");
    Ok(())
}

fn write_version(txn: &WriteTransaction, version: u32) -> Result<()> {
    txn.open_table(tables::META)?.insert(KEY, version.to_be_bytes().as_slice())?;
    Ok(())
}

/// Counts each organization's entries into `org_kbcount`.
fn backfill_org_kb_counts(txn: &WriteTransaction) -> Result<()> {
    let mut counts: std::collections::HashMap<u128, u64> = std::collections::HashMap::new();
    for row in txn.open_table(tables::KBID_ENTRY)?.iter()? {
        let entry: crate::store::records::KbEntry = super::codec::decode(row?.1.value())?;
        *counts.entry(entry.org.as_u128()).or_default() += 1;
    }
    let mut table = txn.open_table(tables::ORG_KBCOUNT)?;
    for (org, n) in counts {
        table.insert(org, n)?;
    }
    Ok(())
}

/// Schema 6's `entry id → uploaded bytes` (raw).
const FILE_V6: TableDefinition<u64, &[u8]> = TableDefinition::new("kbid_file");

/// Writes each file of schema 6's [`FILE_V6`] to `files` (durably, before the step commits),
/// records it in [`tables::KBID_STOREDFILE`] and drops the old table. The files are kept once
/// the step commits; when it does not, they are removed (or swept at the next open).
fn move_files_out(txn: &WriteTransaction, files: &Arc<Files>) -> Result<Vec<Written>> {
    let mut moved = Vec::new();
    {
        let old = txn.open_table(FILE_V6)?;
        let mut new = txn.open_table(tables::KBID_STOREDFILE)?;
        for row in old.iter()? {
            let (id, bytes) = row?;
            let written = files.write(id.value(), bytes.value())?;
            super::put(&mut new, id.value(), &written.stored)?;
            moved.push(written);
        }
    }
    txn.delete_table(FILE_V6)?;
    Ok(moved)
}

/// Schema 4's `(org id, "<type>:<account id>") → user id`.
const LINKED_USER_V4: TableDefinition<(u128, &str), u128> = TableDefinition::new("linked_user");
/// Schema 4's `(replica id, "[reply:]<channel>:<chat or channel id>:<message id>") → item id`.
const CHANNELMSG_MESSAGE_V4: TableDefinition<(u128, &str), u64> = TableDefinition::new("channelmsg_message");

/// Moves schema 4's linked-account rows to [`tables::LINKEDACCOUNT_USER`]. Account types are
/// one of a fixed list without `:`, so the first `:` ends the type.
fn split_linked_account_keys(txn: &WriteTransaction) -> Result<()> {
    let old = txn.open_table(LINKED_USER_V4)?;
    let mut new = txn.open_table(tables::LINKEDACCOUNT_USER)?;
    for row in old.iter()? {
        let (key, user) = row?;
        let (org, joined) = key.value();
        let (kind, account) = joined.split_once(':').ok_or_else(|| Error::internal("linked_user key without ':'"))?;
        new.insert((org, kind, account), user.value())?;
    }
    drop(old);
    txn.delete_table(LINKED_USER_V4)?;
    Ok(())
}

/// Moves schema 4's channel-message rows to [`tables::REPLICACHANNELMSG_MESSAGE`]. The channel
/// names and messengerA's numeric ids hold no `:`; a messengerB id given through the history
/// operation could, which the old joined key could not tell apart: the last `:` is taken to
/// start the message id.
fn split_channel_message_keys(txn: &WriteTransaction) -> Result<()> {
    let old = txn.open_table(CHANNELMSG_MESSAGE_V4)?;
    let mut new = txn.open_table(tables::REPLICACHANNELMSG_MESSAGE)?;
    for row in old.iter()? {
        let (key, item) = row?;
        let (replica, joined) = key.value();
        let (reply, joined) = match joined.strip_prefix("reply:") {
            Some(rest) => (true, rest),
            None => (false, joined),
        };
        let split = joined.split_once(':').and_then(|(channel, rest)| Some((channel, rest.rsplit_once(':')?)));
        let (channel, (place, message)) = split.ok_or_else(|| {
            Error::internal(format!("channelmsg_message key {joined:?} is not channel:place:message"))
        })?;
        new.insert((replica, channel, place, message, reply), item.value())?;
    }
    drop(old);
    txn.delete_table(CHANNELMSG_MESSAGE_V4)?;
    Ok(())
}

/// Schema 4's `(replica id, "u:<user id>:<source>" | "<channel>:<place>") → chat id`.
const CHATKEY_CHAT_V4: TableDefinition<(u128, &str), u128> = TableDefinition::new("chatkey_chat");

/// Moves schema 4's chat identities to [`tables::REPLICACHATKEY_CHAT`]. A one-user chat's
/// identity was `u:<user id>:<source>`; a group's `<channel>:<place>`.
fn split_chat_identity_keys(txn: &WriteTransaction) -> Result<()> {
    let old = txn.open_table(CHATKEY_CHAT_V4)?;
    let mut new = txn.open_table(tables::REPLICACHATKEY_CHAT)?;
    for row in old.iter()? {
        let (key, chat) = row?;
        let (replica, joined) = key.value();
        let bad = || Error::internal(format!("chatkey_chat key {joined:?} is not an identity"));
        let (first, rest) = joined.split_once(':').ok_or_else(bad)?;
        let (source, place, user) = match first {
            "u" => {
                let (user, source) = rest.split_once(':').ok_or_else(bad)?;
                (source, "", uuid::Uuid::parse_str(user).map_err(|_| bad())?.as_u128())
            }
            channel => (channel, rest, 0),
        };
        new.insert((replica, source, place, user), chat.value())?;
    }
    drop(old);
    txn.delete_table(CHATKEY_CHAT_V4)?;
    Ok(())
}

/// Schema 9's `replica id → messengerA bot` and `replica id → messengerB bot`.
const MESSENGERA_BOT_V9: TableDefinition<u128, &[u8]> = TableDefinition::new("replica_messengerabot");
const MESSENGERB_BOT_V9: TableDefinition<u128, &[u8]> = TableDefinition::new("replica_messengerbbot");

/// A schema 9 messengerA bot: replica, org, sealed token, bot id, username, mention, is active,
/// last error, its time, `getUpdates` offset, connected at, updated at.
type MessengerABotV9 =
    (uuid::Uuid, uuid::Uuid, Vec<u8>, i64, String, String, bool, Option<String>, Option<i64>, i64, i64, i64);
/// A schema 9 messengerB bot: replica, org, sealed token, bot id, username, is active, last
/// error, its time, connected at, updated at.
type MessengerBBotV9 = (uuid::Uuid, uuid::Uuid, Vec<u8>, u64, String, bool, Option<String>, Option<i64>, i64, i64);

/// Moves schema 9's bots, one table and one record type per channel, to
/// [`tables::CHANNELREPLICA_INTEGRATION`] as [`Integration`]s, and drops the old tables.
/// Idempotent (a second run finds the old tables empty): the PostgreSQL store, whose SQL schema
/// alone is versioned, runs it at an open that finds such bots ([`holds_v9_bots`],
/// `Store::open_postgres`).
pub fn integrations_in_one_table(txn: &WriteTransaction) -> Result<()> {
    let mut moved: Vec<(&str, Integration)> = Vec::new();
    for row in txn.open_table(MESSENGERA_BOT_V9)?.iter()? {
        let (r, o, t, id, u, mention, a, e, ea, cursor, at, up) =
            super::codec::decode_body::<MessengerABotV9>(version_1_body(row?.1.value())?)?;
        moved.push((
            "messengerA",
            integration_of((r, o, t, id.to_string(), u, Some(mention), a, e, ea, cursor, at, up)),
        ));
    }
    for row in txn.open_table(MESSENGERB_BOT_V9)?.iter()? {
        let (r, o, t, id, u, a, e, ea, at, up) =
            super::codec::decode_body::<MessengerBBotV9>(version_1_body(row?.1.value())?)?;
        moved.push(("messengerB", integration_of((r, o, t, id.to_string(), u, None, a, e, ea, 0, at, up))));
    }
    let mut table = txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?;
    for (channel, integration) in &moved {
        super::put(&mut table, (*channel, integration.replica.as_u128()), integration)?;
    }
    txn.delete_table(MESSENGERA_BOT_V9)?;
    txn.delete_table(MESSENGERB_BOT_V9)?;
    Ok(())
}

/// Whether the store still holds bots in schema 9's tables (a read, so that an open that finds
/// none writes nothing).
pub fn holds_v9_bots(txn: &super::kv::ReadTransaction) -> Result<bool> {
    let a = txn.open_table(MESSENGERA_BOT_V9)?.is_empty()?;
    Ok(!a || !txn.open_table(MESSENGERB_BOT_V9)?.is_empty()?)
}

/// A schema 9 bot's fields in [`Integration`]'s order, its platform id as text.
type BotFieldsV9 =
    (uuid::Uuid, uuid::Uuid, Vec<u8>, String, String, Option<String>, bool, Option<String>, Option<i64>, i64, i64, i64);

/// The [`Integration`] of a schema 9 bot's fields `f`.
fn integration_of(f: BotFieldsV9) -> Integration {
    let (replica, org, sealed_token, platform_id, username, mention) = (f.0, f.1, f.2, f.3, f.4, f.5);
    let (is_active, last_error, last_error_at, cursor, connected_at, updated_at) = (f.6, f.7, f.8, f.9, f.10, f.11);
    Integration {
        replica,
        org,
        sealed_token,
        platform_id,
        username,
        mention,
        is_active,
        last_error,
        last_error_at,
        cursor,
        connected_at,
        updated_at,
    }
}

/// The bytes after the version byte of a record stored at version 1.
fn version_1_body(bytes: &[u8]) -> Result<&[u8]> {
    match bytes.split_first() {
        Some((1, body)) => Ok(body),
        _ => Err(Error::internal("a schema 9 bot record is not at version 1")),
    }
}

/// Opens (so creates) every table of [`tables`].
fn create_tables(txn: &WriteTransaction) -> Result<()> {
    {
        txn.open_table(tables::SEQUENCES)?;
        txn.open_table(tables::ORGID_ORG)?;
        txn.open_table(tables::KEYHASH_ORG)?;
        txn.open_table(tables::CODEHASH_INVITE)?;
        txn.open_table(tables::REPLICAID_REPLICA)?;
        txn.open_table(tables::ORG_REPLICA)?;
        txn.open_table(tables::SLUG_REPLICA)?;
        txn.open_table(tables::USERID_USER)?;
        txn.open_table(tables::ORG_USER)?;
        txn.open_table(tables::EMAIL_USER)?;
        txn.open_table(tables::LINKEDACCOUNT_USER)?;
        txn.open_table(tables::KBID_ENTRY)?;
        txn.open_table(tables::KBID_TEXT)?;
        txn.open_table(tables::REPLICA_KB)?;
        txn.open_table(tables::KBCHUNK_CHUNK)?;
        txn.open_table(tables::KBCHUNK_VECTOR)?;
        txn.open_table(tables::SEQ_KBOUTBOX)?;
        txn.open_table(tables::REPLICAUSERMSG_MESSAGE)?;
        txn.open_table(tables::REPLICAPASSAGE_TEXT)?;
        txn.open_table(tables::REPLICA_MESSAGECOUNT)?;
        txn.open_table(tables::ONCE)?;
        txn.open_table(tables::REPLICACHANNELMSG_MESSAGE)?;
        txn.open_table(tables::KBID_SOURCE)?;
        txn.open_table(tables::KBID_STOREDFILE)?;
        txn.open_table(tables::KBID_JOB)?;
        txn.open_table(tables::TOKENHASH_UPLOAD)?;
        txn.open_table(tables::REPLICA_URL)?;
        txn.open_table(tables::ORG_KBCOUNT)?;
        txn.open_table(tables::REPLICA_KBSUMMARY)?;
        txn.open_table(tables::REPLICAUSERMONTH_USAGE)?;
        txn.open_table(tables::REPLICACHATKEY_CHAT)?;
        txn.open_table(tables::CHATS)?;
        txn.open_table(tables::CONVERSATIONS)?;
        txn.open_table(tables::REPLICACONV_CHAT)?;
        txn.open_table(tables::CHATMSG_USERCONV)?;
        txn.open_table(tables::CONVMSG_USER)?;
        txn.open_table(tables::USER_CHAT)?;
        txn.open_table(tables::USERSOURCE_CHAT)?;
        txn.open_table(tables::REPLICAMONTH_CONVERSATIONS)?;
        txn.open_table(tables::REPLICADAY_CONVERSATIONS)?;
        txn.open_table(tables::REPLICASOURCE_CONVERSATIONS)?;
        txn.open_table(tables::ORGMONTH_CONVERSATIONS)?;
        txn.open_table(tables::ORG_QUOTA)?;
        txn.open_table(tables::ORG_REPLICAORDER)?;
        txn.open_table(tables::ORG_PRIVATEREPLICA)?;
        txn.open_table(tables::ORG_REPLICACOUNT)?;
        txn.open_table(tables::SCOPE_KBORDER)?;
        txn.open_table(tables::OPEN_CONVERSATION)?;
        txn.open_table(tables::REPLICATERM_CONVERSATIONS)?;
        txn.open_table(tables::CHANNELREPLICA_INTEGRATION)?;
        txn.open_table(tables::KEYHASH_EMBED)?;
        txn.open_table(tables::REPLICA_EMBED)?;
        txn.open_table(tables::META)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::TableHandle;
    use uuid::Uuid;

    use super::*;
    use crate::store::kv::ReadableTable;
    use crate::store::records::KbEntry;

    /// The names of the tables of the redb file `db`.
    fn table_names(db: &redb::Database) -> Vec<String> {
        let read = redb::ReadableDatabase::begin_read(db).unwrap();
        read.list_tables().unwrap().map(|t| t.name().to_string()).collect()
    }

    fn entry(id: u64, org: Uuid) -> KbEntry {
        KbEntry { org, ..crate::store::kb::summary::tests::entry(id, Uuid::now_v7(), None) }
    }

    #[test]
    fn a_version_1_store_gains_the_knowledge_base_tables_and_org_counts() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("v1.redb")).unwrap();
        let org = Uuid::now_v7();
        let txn = crate::store::kv::begin_write(&db).unwrap();
        {
            let mut entries = txn.open_table(tables::KBID_ENTRY).unwrap();
            for id in 1..=3 {
                crate::store::put(&mut entries, id, &entry(id, org)).unwrap();
            }
            write_version(&txn, 1).unwrap();
        }
        txn.commit().unwrap();

        run(&db, &files(dir.path())).unwrap();
        assert_eq!(read_version(&db).unwrap(), Some(SCHEMA_VERSION));
        let read = crate::store::kv::begin_read(&db).unwrap();
        assert_eq!(read.open_table(tables::ORG_KBCOUNT).unwrap().get(org.as_u128()).unwrap().unwrap().value(), 3);
        assert!(read.open_table(tables::KBID_JOB).is_ok() && read.open_table(tables::KBID_SOURCE).is_ok());
    }

    fn files(dir: &std::path::Path) -> Arc<Files> {
        Files::open(dir, Arc::new(crate::store::file::Space::new(dir, 0))).unwrap()
    }

    #[test]
    fn a_version_6_store_moves_its_uploaded_files_out_of_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("v6.redb")).unwrap();
        let txn = crate::store::kv::begin_write(&db).unwrap();
        {
            let mut old = txn.open_table(FILE_V6).unwrap();
            old.insert(4, b"four".as_slice()).unwrap();
            old.insert(9, vec![9u8; 100_000].as_slice()).unwrap();
        }
        write_version(&txn, 6).unwrap();
        txn.commit().unwrap();

        let files = files(dir.path());
        run(&db, &files).unwrap();
        let read = crate::store::kv::begin_read(&db).unwrap();
        let recorded = crate::store::kb::stored_files(&read).unwrap();
        let bytes: Vec<(u64, Vec<u8>)> = recorded.iter().map(|(id, s)| (*id, files.read(s).unwrap())).collect();
        assert_eq!(bytes, vec![(4, b"four".to_vec()), (9, vec![9u8; 100_000])]);
        let names = table_names(&db);
        assert!(!names.iter().any(|n| n == FILE_V6.name()), "schema 6's table is dropped: {names:?}");
        let report = files.verify(&recorded).unwrap();
        assert_eq!((report.damaged_files.len(), report.unreferenced_files), (0, 0), "{report:?}");
    }

    #[test]
    fn a_migration_that_meets_a_full_disk_leaves_the_store_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("v6.redb")).unwrap();
        let txn = crate::store::kv::begin_write(&db).unwrap();
        txn.open_table(FILE_V6).unwrap().insert(4, b"four".as_slice()).unwrap();
        write_version(&txn, 6).unwrap();
        txn.commit().unwrap();

        let full = Files::open(dir.path(), Arc::new(crate::store::file::Space::new(dir.path(), u64::MAX))).unwrap();
        let e = run(&db, &full).unwrap_err();
        assert!(e.to_string().contains("schema 6 to 7 needs disk space"), "{e}");
        assert_eq!(read_version(&db).unwrap(), Some(6));
        assert_eq!(std::fs::read_dir(dir.path().join(crate::store::files::DIR)).unwrap().count(), 0);
        let read = crate::store::kv::begin_read(&db).unwrap();
        assert_eq!(read.open_table(FILE_V6).unwrap().get(4).unwrap().unwrap().value(), b"four");
        drop(read);
        run(&db, &files(dir.path())).unwrap();
        assert_eq!(read_version(&db).unwrap(), Some(SCHEMA_VERSION));
    }

    fn values<K: crate::store::kv::StoreKey, R: crate::store::codec::Record>(
        t: &impl ReadableTable<K, &'static [u8]>,
    ) -> Vec<R> {
        t.iter().unwrap().map(|r| crate::store::codec::decode(r.unwrap().1.value()).unwrap()).collect()
    }

    fn message(id: u64, replica: Uuid, user: Uuid, role: &str, at: i64) -> crate::store::records::Message {
        crate::store::records::Message {
            id,
            replica,
            user,
            role: role.into(),
            content: format!("item {id}"),
            source: "web".into(),
            sources: vec![],
            is_private: false,
            channel_data: None,
            created_at: at,
            interrupted: false,
            passages: Vec::new(),
        }
    }

    #[test]
    fn a_version_2_store_derives_chats_and_conversations_from_its_history() {
        use crate::store::records::{Chat, Conversation};
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("v2.redb")).unwrap();
        let (replica, ann, bob) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let hour = 3_600_000;
        let txn = crate::store::kv::begin_write(&db).unwrap();
        {
            let mut t = txn.open_table(tables::REPLICAUSERMSG_MESSAGE).unwrap();
            let rows = [(1, ann, "user", 0), (2, ann, "assistant", 1), (3, bob, "user", 2), (4, ann, "user", hour)];
            for (id, user, role, at) in rows {
                crate::store::put(
                    &mut t,
                    (replica.as_u128(), user.as_u128(), id),
                    &message(id, replica, user, role, at),
                )
                .unwrap();
            }
            write_version(&txn, 2).unwrap();
        }
        txn.commit().unwrap();

        run(&db, &files(dir.path())).unwrap();
        let txn = crate::store::kv::begin_write(&db).unwrap();
        assert!(crate::service::chats::derive_pending_in(&txn).unwrap(), "the history is derived once");
        assert!(!crate::service::chats::derive_pending_in(&txn).unwrap());
        txn.commit().unwrap();
        let read = crate::store::kv::begin_read(&db).unwrap();
        let chats: Vec<Chat> = values(&read.open_table(tables::CHATS).unwrap());
        assert_eq!(chats.len(), 2, "one chat per user on web");
        let anns = chats.iter().find(|c| c.user == Some(ann)).unwrap();
        assert_eq!((anns.counts.message_count, anns.counts.replica_reply_count), (3, 1));
        let convs: Vec<Conversation> = values(&read.open_table(tables::CONVERSATIONS).unwrap());
        let of_ann: Vec<u64> = convs.iter().filter(|c| c.chat == anns.id).map(|c| c.counts.message_count).collect();
        assert_eq!(of_ann, vec![2, 1], "the hour of silence split ann's chat");
    }

    #[test]
    fn a_version_4_store_keys_linked_accounts_channel_messages_and_chats_by_tuples() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("v4.redb")).unwrap();
        let (org, replica, user) = (Uuid::now_v7().as_u128(), Uuid::now_v7().as_u128(), Uuid::now_v7().as_u128());
        let txn = crate::store::kv::begin_write(&db).unwrap();
        {
            let mut linked = txn.open_table(LINKED_USER_V4).unwrap();
            linked.insert((org, "messengerA:4711"), user).unwrap();
            linked.insert((org, "email:ann@x.example"), user).unwrap();
            let mut channel = txn.open_table(CHANNELMSG_MESSAGE_V4).unwrap();
            channel.insert((replica, "messengerA:-100123:7"), 1).unwrap();
            channel.insert((replica, "reply:messengerA:-100123:7"), 2).unwrap();
            channel.insert((replica, "messengerB:general:chat:99"), 3).unwrap();
            let mut chats = txn.open_table(CHATKEY_CHAT_V4).unwrap();
            chats.insert((replica, format!("u:{}:web", Uuid::from_u128(user)).as_str()), 10).unwrap();
            chats.insert((replica, "messengerA:-100123"), 11).unwrap();
            write_version(&txn, 4).unwrap();
        }
        txn.commit().unwrap();

        run(&db, &files(dir.path())).unwrap();
        let read = crate::store::kv::begin_read(&db).unwrap();
        let linked = read.open_table(tables::LINKEDACCOUNT_USER).unwrap();
        assert_eq!(linked.get((org, "messengerA", "4711")).unwrap().unwrap().value(), user);
        assert_eq!(linked.get((org, "email", "ann@x.example")).unwrap().unwrap().value(), user);
        let channel = read.open_table(tables::REPLICACHANNELMSG_MESSAGE).unwrap();
        let id = |key| channel.get(key).unwrap().map(|v| v.value());
        assert_eq!(id((replica, "messengerA", "-100123", "7", false)), Some(1));
        assert_eq!(id((replica, "messengerA", "-100123", "7", true)), Some(2));
        assert_eq!(id((replica, "messengerB", "general:chat", "99", false)), Some(3));
        assert_eq!(channel.len().unwrap(), 3);
        let gone = [LINKED_USER_V4.name(), CHANNELMSG_MESSAGE_V4.name(), CHATKEY_CHAT_V4.name()];
        let names = table_names(&db);
        assert!(gone.iter().all(|g| !names.iter().any(|n| n == g)), "schema 4's tables are dropped: {names:?}");
        let chats = read.open_table(tables::REPLICACHATKEY_CHAT).unwrap();
        assert_eq!(chats.get((replica, "web", "", user)).unwrap().unwrap().value(), 10);
        assert_eq!(chats.get((replica, "messengerA", "-100123", 0)).unwrap().unwrap().value(), 11);
        assert_eq!(chats.len().unwrap(), 2);
    }

    #[test]
    fn a_version_5_store_gains_the_replica_list_indexes_and_counts() {
        use crate::store::records::Replica;
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("v5.redb")).unwrap();
        let org = Uuid::now_v7();
        let txn = crate::store::kv::begin_write(&db).unwrap();
        for (name, private) in [("Zed", false), ("amy", true), ("Bob", false)] {
            let r = Replica { id: Uuid::now_v7(), org, name: name.into(), private, ..Replica::default() };
            crate::store::put(&mut txn.open_table(tables::REPLICAID_REPLICA).unwrap(), r.id.as_u128(), &r).unwrap();
            txn.open_table(tables::ORG_REPLICA).unwrap().insert((org.as_u128(), r.id.as_u128()), ()).unwrap();
        }
        let replica = Uuid::now_v7();
        for id in [7, 3] {
            let e = KbEntry { replica, ..entry(id, org) };
            crate::store::put(&mut txn.open_table(tables::KBID_ENTRY).unwrap(), id, &e).unwrap();
        }
        write_version(&txn, 5).unwrap();
        txn.commit().unwrap();

        run(&db, &files(dir.path())).unwrap();
        let read = crate::store::kv::begin_read(&db).unwrap();
        let rows = read.open_table(tables::SCOPE_KBORDER).unwrap().len().unwrap();
        assert_eq!(rows, 16, "a row per entry, scope (replica, organization) and entry order");
        let created: Vec<u64> = crate::store::kb::order::walk(&read, replica, Default::default(), false)
            .unwrap()
            .map(|listed| listed.map(|(id, _)| id))
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(created, vec![3, 7]);
        let (order, private, counts) = crate::store::replica_index::tests::rows(&db);
        assert_eq!(counts, vec![(org.as_u128(), (3, 1))]);
        assert_eq!(private.len(), 1);
        let names: Vec<&[u8]> =
            order.iter().filter(|r| r.1 == tables::REPLICA_SORT_NAME).map(|r| r.2.as_slice()).collect();
        assert_eq!(names, vec![b"amy".as_slice(), b"bob", b"zed"]);
        assert_eq!(order.len(), 6, "a name row and a popularity row per replica");
    }

    /// A schema 9 messengerA bot and messengerB bot, as the structs of schema 9
    /// (`MessengerABot`, `MessengerBBot`, removed with it) encoded them: replica
    /// `01900000-0000-7000-8000-000000000001` of org `…00aa`.
    const MESSENGERA_BOT_V9_HEX: &str =
        "01100190000000007000800000000000000110019000000000700080000000000000aa03010203fb\
        242108646f63735f626f740540646f637301010334323901fdf6d0ca9f170300009afd00d0ca9f17030000fdced7ca9f17030000";
    const MESSENGERB_BOT_V9_HEX: &str =
        "01100190000000007000800000000000000110019000000000700080000000000000aa020908fd\
        1581e97df41022110668656c706572000000fdd0d7ca9f17030000fda0dfca9f17030000";

    fn unhex(hex: &str) -> Vec<u8> {
        let hex: String = hex.split_whitespace().collect();
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn a_version_9_store_keeps_its_bots_in_one_table() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("v9.redb")).unwrap();
        let replica = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0001);
        let txn = crate::store::kv::begin_write(&db).unwrap();
        {
            let a = unhex(MESSENGERA_BOT_V9_HEX);
            let b = unhex(MESSENGERB_BOT_V9_HEX);
            txn.open_table(MESSENGERA_BOT_V9).unwrap().insert(replica.as_u128(), a.as_slice()).unwrap();
            txn.open_table(MESSENGERB_BOT_V9).unwrap().insert(replica.as_u128(), b.as_slice()).unwrap();
        }
        write_version(&txn, 9).unwrap();
        txn.commit().unwrap();

        run(&db, &files(dir.path())).unwrap();
        assert_eq!(read_version(&db).unwrap(), Some(SCHEMA_VERSION));
        let names = table_names(&db);
        assert!(!names.iter().any(|n| n.starts_with("replica_messenger")), "the old tables are gone: {names:?}");
        let read = crate::store::kv::begin_read(&db).unwrap();
        let table = read.open_table(tables::CHANNELREPLICA_INTEGRATION).unwrap();
        let get = |channel: &str| -> Integration {
            crate::store::get::<_, Integration, _>(&table, (channel, replica.as_u128())).unwrap().unwrap()
        };
        let a = get("messengerA");
        assert_eq!((a.replica, a.org.as_u128() & 0xff), (replica, 0xaa));
        assert_eq!(
            (a.sealed_token.as_slice(), a.platform_id.as_str(), a.username.as_str()),
            ([1, 2, 3].as_slice(), "4242", "docs_bot")
        );
        assert_eq!((a.mention.as_deref(), a.is_active, a.last_error.as_deref()), (Some("@docs"), true, Some("429")));
        assert_eq!(
            (a.last_error_at, a.cursor, a.connected_at, a.updated_at),
            (Some(1_700_000_000_123), 77, 1_700_000_000_000, 1_700_000_000_999)
        );
        let b = get("messengerB");
        assert_eq!(
            (b.sealed_token.as_slice(), b.platform_id.as_str(), b.username.as_str()),
            ([9, 8].as_slice(), "1234567890123456789", "helper")
        );
        assert_eq!((b.mention, b.is_active, b.last_error, b.last_error_at), (None, false, None, None));
        assert_eq!((b.cursor, b.connected_at, b.updated_at), (0, 1_700_000_001_000, 1_700_000_002_000));
        assert_eq!(table.len().unwrap(), 2);
    }
}
