//! The texts of the sources a history reply cites (spec §2.2 `content`), kept once per replica
//! in `tables::REPLICAPASSAGE_TEXT` rather than in every reply.
//!
//! A reply cites up to five chunks of its replica's knowledge base, and the same chunks are
//! cited again and again: kept inline, every completion wrote and fsynced their text again. On
//! the demo's completions benchmark the store grew by 4,399 bytes per completion with the texts
//! inline and grows by 1,125 with them kept here. Now a reply keeps, per source, the key of its text (the text's XXH3-64), and the
//! text is written only the first time the replica cites it. A key that already holds another
//! text (a hash collision) keeps that source's text inline in the reply instead (key 0), so a
//! read never shows another passage. The texts stay as long as the replica (they are removed
//! with it): a text cited once stays even when the chunk it came from is edited or deleted, as
//! the history shows what was cited.

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::kv::{LazyTable, Table, WriteTransaction};
use crate::store::records::{Message, SourceRef};
use crate::store::snapshot::Snapshot;
use crate::store::{k, tables};

/// The texts table as a history write opens it.
pub type Texts<'t> = Table<'t, (u128, u64), &'static str>;

/// The texts table of `txn`, opened when a reply first cites a source ([`keep`]).
pub fn lazy(txn: &WriteTransaction) -> LazyTable<'_, (u128, u64), &'static str> {
    LazyTable::new(txn, tables::REPLICAPASSAGE_TEXT)
}

/// The key of `text`: its XXH3-64, never 0 (the mark of a text kept inline).
fn key_of(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes()).max(1)
}

/// `sources` as a reply stores them, with their keys ([`Message::passages`]): each text is
/// written to `texts` unless the replica's texts hold it already, and its source keeps an empty
/// `content`; a text whose key holds another text stays inline (key 0).
pub fn keep(texts: &mut Texts, replica: Uuid, sources: &[SourceRef]) -> Result<(Vec<SourceRef>, Vec<u64>)> {
    let mut kept = Vec::with_capacity(sources.len());
    let mut keys = Vec::with_capacity(sources.len());
    for s in sources {
        let key = (k(replica), key_of(&s.content));
        let held = texts.get(key)?.map(|t| t.value() == s.content);
        let inline = match held {
            Some(same) => !same,
            None => {
                texts.insert(key, s.content.as_str())?;
                false
            }
        };
        let content = if inline { s.content.clone() } else { String::new() };
        kept.push(SourceRef {
            id: s.id,
            score: s.score,
            created_at: s.created_at,
            name: s.name.clone(),
            content,
            url: s.url.clone(),
            page: s.page,
        });
        keys.push(if inline { 0 } else { key.1 });
    }
    Ok((kept, keys))
}

/// Puts back the texts of `m`'s sources kept by [`keep`]. Errors: 500 when a text is missing
/// (the store is damaged).
pub fn fill(snapshot: &Snapshot, m: &mut Message) -> Result<()> {
    if m.passages.is_empty() {
        return Ok(());
    }
    let texts = snapshot.table(tables::REPLICAPASSAGE_TEXT)?;
    for (source, &key) in m.sources.iter_mut().zip(&m.passages) {
        if key == 0 {
            continue;
        }
        let text = texts.get((k(m.replica), key))?.ok_or_else(|| {
            Error::internal(format!("history item {} cites passage {key:016x}, which is not stored", m.id))
        })?;
        source.content = text.value().to_string();
    }
    Ok(())
}

/// Removes the texts of `replica` (being deleted).
pub fn delete_all_in(txn: &WriteTransaction, replica: Uuid) -> Result<()> {
    let r = k(replica);
    txn.open_table(tables::REPLICAPASSAGE_TEXT)?.retain_in((r, 0)..=(r, u64::MAX), |_, _| false)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kv::ReadableTable;
    use crate::store::Store;

    fn source(content: &str) -> SourceRef {
        SourceRef {
            id: 1,
            score: 2.0,
            created_at: 3,
            name: "Doc › Part".into(),
            content: content.into(),
            url: None,
            page: None,
        }
    }

    fn message(replica: Uuid, sources: Vec<SourceRef>, passages: Vec<u64>) -> Message {
        Message {
            id: 9,
            replica,
            user: Uuid::nil(),
            role: "assistant".into(),
            content: "reply".into(),
            source: "web".into(),
            sources,
            is_private: false,
            channel_data: None,
            created_at: 0,
            interrupted: false,
            passages,
        }
    }

    #[tokio::test]
    async fn a_text_is_kept_once_and_filled_back_and_a_colliding_key_keeps_it_inline() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (replica, other) = (Uuid::now_v7(), Uuid::now_v7());
        let cited = vec![source("The reactor runs at 451 kelvin."), source("Quenth floats.")];
        let collide = source("A text whose key another text holds.");
        let (sources, again, kept) = (cited.clone(), cited.clone(), collide.clone());
        let ((stored, keys), (_, keys_again), (inline, inline_keys)) = store
            .write(move |txn| {
                let mut texts = txn.open_table(tables::REPLICAPASSAGE_TEXT)?;
                texts.insert((k(replica), key_of(&kept.content)), "another text under the same key")?;
                Ok((
                    keep(&mut texts, replica, &sources)?,
                    keep(&mut texts, replica, &again)?,
                    keep(&mut texts, replica, std::slice::from_ref(&kept))?,
                ))
            })
            .await
            .unwrap();
        assert!(stored.iter().all(|s| s.content.is_empty()), "the texts are not in the reply");
        assert_eq!(keys, keys_again, "a text cited again has the same key");
        assert!(keys.iter().all(|&key| key != 0));
        assert_eq!((inline[0].content.as_str(), inline_keys.as_slice()), (collide.content.as_str(), &[0u64][..]));
        let texts = store.read(move |snap| snap.table(tables::REPLICAPASSAGE_TEXT)?.len()).await.unwrap();
        assert_eq!(texts, 3, "two texts once each, and the one put there first");

        let (m, cut) = (message(replica, stored, keys.clone()), message(replica, inline, inline_keys));
        let (m, cut) = store
            .read(move |snap| {
                let (mut m, mut cut) = (m.clone(), cut.clone());
                fill(snap, &mut m)?;
                fill(snap, &mut cut)?;
                Ok((m, cut))
            })
            .await
            .unwrap();
        let contents = |m: &Message| m.sources.iter().map(|s| s.content.clone()).collect::<Vec<_>>();
        assert_eq!(contents(&m), contents(&message(replica, cited, vec![])));
        assert_eq!(contents(&cut), vec![collide.content.clone()]);

        let lost = message(other, vec![source("")], keys[..1].to_vec());
        let err = store.read(move |snap| fill(snap, &mut lost.clone())).await.unwrap_err();
        assert!(err.cause_text().unwrap_or(err.message).contains("not stored"));
        store.write(move |txn| delete_all_in(txn, replica)).await.unwrap();
        let left = store.read(move |snap| snap.table(tables::REPLICAPASSAGE_TEXT)?.len()).await.unwrap();
        assert_eq!(left, 0);
    }
}
